/*
 * session.c — decoding, attributing and aggregating the stream (session.h).
 *
 * State.  Each slot that has been seen has a slot_state: the context bound
 * to it (or none), the tally of its open poll group, its current binding
 * (for the slot timeline) and whether the OVERLAY records now coming are
 * the first read after a bind.  Each context has a context_state: its
 * identity, its image record and, per overlay region (0-based as in the
 * stream), the guard word now, the values at the close of the last two
 * poll groups, whether a change was reported in this group or the last,
 * and the tail of samples waiting for the next first read.
 *
 * The ambiguity rule (escape-protocol/README.md §3, writer rule 4): a
 * guard change reported in poll group k happened between the guard reads
 * of groups k-1 and k, so the samples of groups k and k+1 in that region
 * may lie on either side of it.  Put the other way, when group k closes
 * (its TIME record), a sample of it in region r is ambiguous exactly when
 * r changed in group k or in group k-1; the guard value before is the one
 * at the close of group k-2 (k-1 when only group k changed), the value
 * after is the one read now.
 *
 * Placed changes (stream 1.1, OVERLAY flags bit 0) sit exactly in the
 * slot's sample sequence and open no window.  At a placed change of region
 * r, the open group's samples in r so far are set aside as held samples
 * with the guard they were taken under; the group's close judges them with
 * that guard (exact), unless an unplaced change of r touches the window
 * (ambiguous, as any sample of the group).  The samples after it stay in
 * the group and are judged under the guard at the close, as before.  Held
 * samples are never pending: the placed record says the guard held until
 * it.
 *
 * Settling: a sample the guards decide (outside overlay regions, or in a
 * region that kept its guard) goes to its context's settled tally, by LS
 * address; the tally is resolved and counted only before the context's
 * guards or timeline bucket change and before counts are read, so an
 * address is resolved once per guard state rather than once per group.
 *
 * The sample timeline: the exact samples of groups closed by a TIME record
 * are also counted by function (the symbol covering the file offset, else
 * the offset itself) in the context's current time bucket, the bucket of
 * the TIME record; a bucket's counts become rows when the context moves to
 * another bucket, and at every flush.
 *
 * Ends (stream 1.3): a context's END settles it, abandons its pending
 * samples and emits its bucket, and takes it out of the index; it stays in
 * `contexts` until a flush committed its rows, then session_written()
 * frees it and drops its count entries (their totals go to `retired`).
 * So what the session holds is O(live contexts + distinct places).
 *
 * Call stacks (stream 1.4): a CALLSTACK record follows the sample it
 * belongs to, which is the last of the batch the decoder delivered just
 * before it.  The sample is resolved with the guards of now (exact with
 * the overlay watch: its placed changes come before it), each frame's
 * call site (return address - 4) with its own overlay, the one that held
 * it at the call; the chain is a text key (docs/session-format.md,
 * stacks) counted per context until the next flush adds it to the table.
 *
 * Stall reasons (stream 1.6): each slot holds the reasons its last
 * REASONS gave for its next sample words and a transfer, the last its
 * TRANSFER named (none after the START and each CONTEXT).  A sample takes
 * the slot's next reason (ISSUE beyond them) and, a DMA wait, the
 * transfer: a cause, the session's index of the (stall, transfer), looked
 * up in the slot's small table by stall (refilled when the transfer
 * changes), so the sample path does no hashing.  A REASONS, CONTEXT,
 * RELEASE or STOP that comes while reasons of the slot are unread is a
 * writer's error (reasons-unread): those reasons are dropped, never
 * shifted onto later samples.  A sample is tallied under its address and
 * its cause, and every step after keeps the cause with it (held, tail
 * and settled samples alike): an exact count's key holds it, and a flush
 * writes each exact count to samples and, by its stall, to sample_stalls
 * (so these agree exactly), a DMA wait's also to dma_wait_samples (the
 * issuer resolved under the guards the sample was).  Timeline buckets
 * count by stall beside by function (stall_timeline), and a call stack's
 * key holds its sample's stall (stack_stalls).  Distinct causes are kept up
 * to CAUSES_MAX; one beyond gives CAUSE_DROPPED (its stall shown as
 * STALL_DROPPED) and counts an error.
 *
 * The sample path is on_samples(): one tally add per sample.  Everything
 * else happens per record or per distinct address of a group.
 */
#include "daemon/session.h"
#include "daemon/counts.h"
#include "daemon/images.h"
#include "overlay/overlay.h"

#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define SLOTS           COPSTREAM_MAX_SLOTS
#define REGION_MAX      65536u  /* guard words a 256 KiB store could hold */
#define ERROR_LOG_MAX   1000u   /* errors kept one by one (all are counted) */
#define ENDED_MAX       65536u  /* ended context ids remembered, latest */
#define NO_SLOT         UINT32_MAX
#define DEFAULT_CLOCK   1000000000u
#define CAUSES_MAX      65536u  /* distinct (stall, transfer) kept */
#define CAUSE_ISSUE     0u      /* the session's cause indexes */
#define CAUSE_DROPPED   1u
#define STALL_DROPPED   UINT32_MAX  /* a reason beyond CAUSES_MAX */
#define CAUSE_UNKNOWN   UINT32_MAX  /* a slot's stall_cause not looked up */
#define STALLS          16u         /* values of a 4-bit stall */

/* One overlay region of a context, 0-based as in the stream. */
struct region_state {
    bool known;             /* its guard has been read */
    bool changed_now;       /* an OVERLAY record in the open group */
    bool changed_before;    /* ... in the group before */
    bool reread;            /* read since the last bind */
    int64_t closed;         /* guard at the close of the last group */
    int64_t closed_before;  /* ... of the group before */
    int64_t tail_from;      /* guard when the pending tail was drained */
};

struct context_state {
    uint32_t id;                    /* contexts.id */
    struct copstream_context record;    /* as first seen (slot, cycle) */
    struct image_record *image;
    uint32_t bound_slot;            /* NO_SLOT when not bound */
    unsigned regions;               /* entries of guard and region */
    uint32_t *guard;                /* the guard words now, for ovl_resolve */
    struct region_state *region;
    struct addr_tally tail;         /* pending samples, if has_tail (made
                                       at the first, freed once judged) */
    bool has_tail;
    struct addr_tally settled;      /* decided, resolved at the next settle */
    bool ended;                     /* its END came: freed after a flush */
    int64_t bucket;                 /* timeline bucket being counted */
    GHashTable *bucket_counts;      /* function offset -> function_count */
    GHashTable *bucket_stalls;      /* stall -> function_count (by stall) */
};

/* A call stack's samples since the last flush. */
struct stack_count {
    uint32_t context, image;
    uint32_t stall;                 /* its sample's */
    size_t frames;                  /* where the frames start in the key */
    uint64_t count;
};

struct function_count {
    uint64_t function;              /* the key */
    uint64_t count;
};

struct timeline_row {
    uint32_t context, image;
    uint64_t bucket_start_ns, function;     /* function: or the stall */
    uint64_t count;
};

struct context_key {
    uint64_t context_id, object_id, image_offset;
    struct copstream_image_id image;
    uint32_t pid, tid;
};

/* Samples of the open group taken before a placed change of their region. */
struct held_samples {
    uint32_t address;
    uint32_t cause;
    uint32_t n;
    unsigned region;                /* 1-based */
    int64_t guard;                  /* the region's guard then, or NONE */
};

struct slot_state {
    uint32_t index;
    struct context_state *context;  /* NULL when idle */
    bool first_read;                /* OVERLAYs now are the first read */
    struct addr_tally group;        /* the open poll group's samples */
    struct addr_tally rest;         /* scratch: the group, minus a region */
    GArray *held;                   /* struct held_samples of the group */
    struct store_binding binding;   /* valid while context != NULL */
    bool have_time;                 /* a TIME seen during this binding */
    uint64_t time_cycle, time_ns;
    uint64_t last_cycle;            /* latest cycle seen on the slot */
    uint32_t cause;                 /* its last sample's (CAUSE_ISSUE...) */
    uint32_t reasons, reasons_next; /* its last REASONS's count, read */
    struct count_cause transfer;    /* its last TRANSFER's; stall unused */
    uint32_t stall_cause[STALLS];   /* cause of each stall now */
    uint8_t stalls[COPSTREAM_MAX_REASONS / 2];  /* its last REASONS's */
};

struct time_row {
    uint32_t slot;
    uint64_t cycle, time_ns;
};

struct error_row {
    uint64_t offset;
    enum copstream_error_kind kind;
    uint16_t code;
};

struct session {
    struct copstream_decoder decoder;
    struct image_registry *images;
    struct count_table counts;
    struct slot_state *slots[SLOTS];
    GHashTable *context_index;      /* context_key -> live context_state */
    GPtrArray *contexts;            /* the context_states held: live, and
                                       ended ones until a flush wrote them */
    uint32_t context_ids;           /* contexts.id given so far */
    bool any_ended;                 /* contexts wait to be freed */
    GHashTable *freeing;            /* ids being freed (uint32 keys) */
    uint64_t *ended_ring;           /* the latest ENDED_MAX ended ids */
    GHashTable *ended_ids;          /* ... as a set (uint64 keys) */
    uint32_t ended_next;            /* next slot of ended_ring */
    uint64_t end_unknown, end_twice, bind_after_end;    /* their errors */
    uint64_t out_of_range;      /* fields of 2^63 or more, stored clamped */
    uint64_t retired[COUNT_ORPHAN + 1]; /* totals by kind of freed entries */
    uint32_t bindings;              /* bindings.id given so far */
    struct copstream_start start;
    bool started, stopped, finished;
    struct copstream_stop stop;
    uint64_t ignored_overlays;
    uint64_t errors_logged;
    uint64_t timeline_ns;           /* bucket width; 0: no timeline */
    GPtrArray *region_maps;         /* by image id - 1: uint16_t[] or NULL */

    /* Rows waiting for the next flush. */
    guint contexts_written;
    bool start_dirty, stop_dirty;
    GArray *binding_rows;           /* struct store_binding */
    GArray *overlay_rows;           /* struct store_overlay_event */
    GArray *lost_rows;              /* struct store_lost */
    GArray *stall_rows;             /* struct store_stall */
    GArray *time_rows;              /* struct time_row */
    GArray *error_rows;             /* struct error_row */
    GArray *timeline_rows;          /* struct timeline_row */
    GArray *stall_timeline_rows;    /* struct timeline_row, by stall */
    GHashTable *stacks;             /* "CONTEXT STALL FRAMES" -> stack_count */

    /* Stall reasons: the distinct causes, by index. */
    GArray *causes;                 /* struct count_cause */
    GHashTable *cause_index;        /* struct count_cause -> index */
    uint64_t causes_dropped;        /* causes beyond CAUSES_MAX */
    uint64_t reasons_unread;        /* REASONS not read out: an error */

    /* Call stacks: the sample a CALLSTACK record may follow. */
    struct copstream_sample last_sample;
    bool have_last_sample;
    uint64_t callstacks;            /* CALLSTACK records attached */
    uint64_t callstacks_unattached; /* ... that followed no sample */
};

/* ---- slots and contexts ------------------------------------------------- */

static struct slot_state *get_slot(struct session *s, uint32_t index)
{
    struct slot_state *slot = s->slots[index];

    if (slot != NULL)
        return slot;
    slot = g_new0(struct slot_state, 1);
    slot->index = index;
    addr_tally_init(&slot->group);
    addr_tally_init(&slot->rest);
    slot->held = g_array_new(FALSE, FALSE, sizeof(struct held_samples));
    for (unsigned i = 0; i < STALLS; i++)
        slot->stall_cause[i] = CAUSE_UNKNOWN;
    s->slots[index] = slot;
    return slot;
}

static guint context_key_hash(gconstpointer p)
{
    const struct context_key *key = p;

    return (guint)(key->context_id * 2654435761u ^ key->object_id ^
                   key->image.hash ^ key->pid * 40503u ^ key->tid);
}

static gboolean context_key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct context_key)) == 0;
}

static void ensure_regions(struct context_state *context, unsigned count)
{
    if (count <= context->regions)
        return;
    context->guard = g_renew(uint32_t, context->guard, count);
    context->region = g_renew(struct region_state, context->region, count);
    for (unsigned r = context->regions; r < count; r++) {
        context->guard[r] = 0;
        context->region[r] = (struct region_state){
            .closed = COUNT_GUARD_NONE,
            .closed_before = COUNT_GUARD_NONE,
            .tail_from = COUNT_GUARD_NONE,
        };
    }
    context->regions = count;
}

/* Region r's guard now, or COUNT_GUARD_NONE when never read. */
static int64_t guard_now(const struct context_state *context, unsigned r)
{
    return context->region[r].known ? (int64_t)context->guard[r]
                                    : COUNT_GUARD_NONE;
}

static void context_key_of(const struct copstream_context *rec,
                           struct context_key *key)
{
    memset(key, 0, sizeof *key);
    key->context_id = rec->context_id;
    key->object_id = rec->object_id;
    key->image_offset = rec->image_offset;
    key->image = rec->image;
    key->pid = rec->pid;
    key->tid = rec->tid;
}

static struct context_state *find_context(struct session *s,
                                          const struct copstream_context *rec)
{
    struct context_key key;

    context_key_of(rec, &key);
    struct context_state *context = g_hash_table_lookup(s->context_index,
                                                        &key);
    if (context != NULL)
        return context;
    context = g_new0(struct context_state, 1);
    context->id = ++s->context_ids;
    context->record = *rec;
    context->bound_slot = NO_SLOT;
    context->image = image_registry_lookup(s->images, &rec->image,
                                           rec->image_offset);
    /* (the image is unusable then, and stored clamped: images.c) */
    s->out_of_range += rec->image_offset > INT64_MAX ||
                       rec->image.size > INT64_MAX;
    if (context->image->ovl != NULL)
        ensure_regions(context, ovl_image_region_count(context->image->ovl));
    addr_tally_init(&context->settled);
    context->bucket = -1;
    context->bucket_counts = g_hash_table_new_full(g_int64_hash,
                                                   g_int64_equal, NULL,
                                                   g_free);
    context->bucket_stalls = g_hash_table_new_full(g_int64_hash,
                                                   g_int64_equal, NULL,
                                                   g_free);
    g_ptr_array_add(s->contexts, context);
    g_hash_table_insert(s->context_index, g_memdup2(&key, sizeof key),
                        context);
    return context;
}

/* ---- causes ------------------------------------------------------------- */

static guint cause_hash(gconstpointer p)
{
    const struct count_cause *c = p;

    return c->stall * 2654435761u ^ c->transfer ^ c->tag * 40503u ^
           c->issuer;
}

static gboolean cause_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct count_cause)) == 0;
}

static const struct count_cause *cause_at(const struct session *s,
                                          uint32_t index)
{
    return &g_array_index(s->causes, struct count_cause, index);
}

static void add_cause(struct session *s, const struct count_cause *cause)
{
    guint index = s->causes->len;

    g_array_append_val(s->causes, *cause);
    g_hash_table_insert(s->cause_index, g_memdup2(cause, sizeof *cause),
                        GUINT_TO_POINTER(index));
}

/* The index of a cause, numbering it if new (CAUSE_DROPPED once
 * CAUSES_MAX are numbered). */
static uint32_t cause_index_of(struct session *s,
                               const struct count_cause *cause)
{
    gpointer index;

    if (g_hash_table_lookup_extended(s->cause_index, cause, NULL, &index))
        return GPOINTER_TO_UINT(index);
    if (s->causes->len >= CAUSES_MAX) {
        s->causes_dropped++;
        return CAUSE_DROPPED;
    }
    add_cause(s, cause);
    return s->causes->len - 1;
}

/* The cause of a sample of the slot whose stall is `stall`: a DMA wait's
 * with the slot's transfer. */
static uint32_t stall_cause(struct session *s, struct slot_state *slot,
                            uint32_t stall)
{
    struct count_cause cause = { .stall = stall };

    if (slot->stall_cause[stall] != CAUSE_UNKNOWN)
        return slot->stall_cause[stall];
    if (stall == COPSTREAM_STALL_DMA_WAIT && slot->transfer.transfer) {
        cause.transfer = 1;
        cause.tag = slot->transfer.tag;
        cause.issuer = slot->transfer.issuer;
    }
    slot->stall_cause[stall] = cause_index_of(s, &cause);
    return slot->stall_cause[stall];
}

/* The cause of the slot's next sample word: its next reason, or ISSUE. */
static inline uint32_t next_cause(struct session *s, struct slot_state *slot)
{
    if (G_LIKELY(slot->reasons_next >= slot->reasons))
        return slot->cause = CAUSE_ISSUE;
    return slot->cause = stall_cause(s, slot, copstream_reason_at(
        slot->stalls, slot->reasons_next++));
}

/* A record that ends the slot's reasons: any left unread are an error. */
static void end_reasons(struct session *s, struct slot_state *slot)
{
    if (slot->reasons_next < slot->reasons)
        s->reasons_unread++;
    slot->reasons = slot->reasons_next = 0;
}

/* The slot's transfer from now on (none: transfer 0). */
static void set_transfer(struct slot_state *slot,
                         const struct count_cause *transfer)
{
    slot->transfer = *transfer;
    slot->stall_cause[COPSTREAM_STALL_DMA_WAIT] = CAUSE_UNKNOWN;
}

/* As after the START or a CONTEXT: no reasons, no transfer. */
static void reset_reasons(struct session *s, struct slot_state *slot)
{
    struct count_cause none = { 0 };

    end_reasons(s, slot);
    set_transfer(slot, &none);
    slot->cause = CAUSE_ISSUE;
}

/* ---- counting ----------------------------------------------------------- */

/* Samples that did not resolve to a file offset (no cause kept). */
static void count(struct session *s, const struct context_state *context,
                  enum count_kind kind, uint32_t detail, uint64_t position,
                  int64_t guard_from, int64_t guard_to, uint64_t n)
{
    struct count_key key;

    memset(&key, 0, sizeof key);
    key.context = context ? context->id : 0;
    key.image = context ? context->image->id : 0;
    key.kind = kind;
    key.detail = detail;
    key.position = position;
    key.guard_from = guard_from;
    key.guard_to = guard_to;
    count_table_add(&s->counts, &key, 0, -1, n);
}

static void resolve(const struct context_state *context, uint32_t address,
                    struct ovl_location *loc);

/* The file offset of a DMA wait's issuer, under the guards of now (those
 * its sample resolved with), or -1. */
static int64_t issuer_offset(const struct session *s,
                             const struct context_state *context,
                             uint32_t cause)
{
    const struct count_cause *c = cause_at(s, cause);
    struct ovl_location loc;

    if (!c->transfer)
        return -1;
    resolve(context, c->issuer, &loc);
    return loc.reason == OVL_MAPPED ? (int64_t)loc.file_offset : -1;
}

/* Exact samples: at a file offset, under a cause. */
static void count_exact(struct session *s, const struct context_state *context,
                        const struct ovl_location *loc, uint32_t cause,
                        uint64_t n)
{
    struct count_key key;

    memset(&key, 0, sizeof key);
    key.context = context->id;
    key.image = context->image->id;
    key.kind = COUNT_EXACT;
    key.cause = cause;
    key.position = loc->file_offset;
    int64_t issuer = -1;
    if (cause_at(s, cause)->transfer &&
        count_table_find(&s->counts, &key) == NULL)
        issuer = issuer_offset(s, context, cause);
    count_table_add(&s->counts, &key, loc->overlay, issuer, n);
}

/* A resolved location, exact or unmapped. */
static void count_location(struct session *s,
                           const struct context_state *context,
                           const struct ovl_location *loc, uint32_t cause,
                           uint64_t n)
{
    if (loc->reason == OVL_MAPPED) {
        count_exact(s, context, loc, cause, n);
        return;
    }
    int64_t guard = loc->region != 0 && loc->reason != OVL_GUARD_UNKNOWN ?
                    (int64_t)loc->guard : COUNT_GUARD_NONE;
    count(s, context, COUNT_UNMAPPED, loc->reason, loc->ls_addr, guard, 0,
          n);
}

static void count_ambiguous(struct session *s,
                            const struct context_state *context,
                            uint32_t address, unsigned region,
                            int64_t guard_from, int64_t guard_to, uint64_t n)
{
    count(s, context, COUNT_AMBIGUOUS, region, address, guard_from, guard_to,
          n);
}

static void resolve(const struct context_state *context, uint32_t address,
                    struct ovl_location *loc)
{
    const struct ovl_image *ovl = context->image->ovl;
    unsigned guards = MIN(context->regions, ovl_image_region_count(ovl));

    ovl_resolve(ovl, address, context->guard, guards, loc);
}

/* ---- settled samples and the timeline ---------------------------------- */

/* The counts of one of the context's bucket tables become rows. */
static void emit_counts(struct session *s, struct context_state *context,
                        GHashTable *counts, GArray *rows)
{
    GHashTableIter iter;
    gpointer value;

    g_hash_table_iter_init(&iter, counts);
    while (g_hash_table_iter_next(&iter, NULL, &value)) {
        const struct function_count *f = value;
        struct timeline_row row = {
            context->id, context->image->id,
            (uint64_t)context->bucket * s->timeline_ns, f->function, f->count,
        };
        g_array_append_val(rows, row);
    }
    g_hash_table_remove_all(counts);
}

/* The counts of the context's current bucket become rows. */
static void emit_bucket(struct session *s, struct context_state *context)
{
    emit_counts(s, context, context->bucket_counts, s->timeline_rows);
    emit_counts(s, context, context->bucket_stalls, s->stall_timeline_rows);
}

static void add_function_count(GHashTable *counts, uint64_t key, uint64_t n)
{
    struct function_count *f = g_hash_table_lookup(counts, &key);

    if (f == NULL) {
        f = g_new0(struct function_count, 1);
        f->function = key;
        g_hash_table_insert(counts, &f->function, f);
    }
    f->count += n;
}

/* n exact samples at file_offset under a cause in the context's current
 * bucket, by the function symbol covering them (else by the offset
 * itself), and by the cause's stall. */
static void add_to_bucket(struct session *s, struct context_state *context,
                          uint64_t file_offset, uint32_t cause, uint64_t n)
{
    struct ovl_symbol symbol;

    if (context->bucket < 0)
        return;
    uint64_t function = ovl_symbol_at(context->image->ovl, file_offset,
                                      &symbol) == 0 ? symbol.file_offset
                                                    : file_offset;
    add_function_count(context->bucket_counts, function, n);
    add_function_count(context->bucket_stalls, cause_at(s, cause)->stall, n);
}

/*
 * The settled samples are resolved under the guards now and counted
 * (exact or unmapped), and the exact ones added to the current bucket.
 * Called before the guards or the bucket change, and before counts are
 * read: so each distinct address is resolved once per guard state and
 * bucket, not once per poll group.
 */
static void settle(struct session *s, struct context_state *context)
{
    struct ovl_location loc;

    for (uint32_t i = 0; i < context->settled.used_count; i++) {
        uint32_t n = addr_tally_count(&context->settled, i);
        uint32_t cause = addr_tally_cause(&context->settled, i);
        resolve(context, addr_tally_address(&context->settled, i), &loc);
        count_location(s, context, &loc, cause, n);
        if (loc.reason == OVL_MAPPED)
            add_to_bucket(s, context, loc.file_offset, cause, n);
    }
    addr_tally_clear(&context->settled);
}

static void settle_all(struct session *s)
{
    for (guint i = 0; i < s->contexts->len; i++)
        settle(s, g_ptr_array_index(s->contexts, i));
}

/* A TIME record at time_ns: the context's samples go to its bucket. */
static void enter_bucket(struct session *s, struct context_state *context,
                         int64_t time_ns)
{
    if (s->timeline_ns == 0)
        return;
    int64_t bucket = time_ns / (int64_t)s->timeline_ns;
    if (bucket == context->bucket)
        return;
    settle(s, context);
    emit_bucket(s, context);
    context->bucket = bucket;
}

/* The overlay region (1-based) of every LS word of an image, 0 outside
 * regions: the region a sample is in, without resolving it. */
static const uint16_t *region_map(struct session *s,
                                  const struct image_record *image)
{
    while (s->region_maps->len < image->id)
        g_ptr_array_add(s->region_maps, NULL);
    uint16_t *map = g_ptr_array_index(s->region_maps, image->id - 1);
    if (map != NULL)
        return map;
    map = g_new0(uint16_t, COP_LS_SIZE / 4);
    unsigned count = MIN(ovl_image_region_count(image->ovl), UINT16_MAX);
    for (unsigned r = 1; r <= count; r++) {
        const struct ovl_region *region = ovl_image_region(image->ovl, r);
        for (uint32_t a = region->ls_start; a < region->ls_end; a += 4)
            map[a / 4] = (uint16_t)r;
    }
    g_ptr_array_index(s->region_maps, image->id - 1) = map;
    return map;
}

/* ---- closing poll groups ------------------------------------------------ */

enum group_end {
    GROUP_READ,         /* a TIME record: the guards were read after it */
    GROUP_TRAILING,     /* a switch, release or stop: maybe no read after */
};

/* Samples whose place the guards now decide: at once in a trailing group
 * (no timeline bucket), else at the next settle. */
static void decided(struct session *s, struct context_state *context,
                    uint32_t address, uint32_t cause, uint32_t n,
                    enum group_end end)
{
    struct ovl_location loc;

    if (end == GROUP_READ) {
        addr_tally_add_n(&context->settled, address, cause, n);
        return;
    }
    resolve(context, address, &loc);
    count_location(s, context, &loc, cause, n);
}

/* Attributes n samples of address under a cause, drained in the group now
 * closing. */
static void attribute(struct session *s, struct context_state *context,
                      const uint16_t *regions, uint32_t address,
                      uint32_t cause, uint32_t n, enum group_end end)
{
    unsigned r = address < COP_LS_SIZE ? regions[address / 4] : 0;

    if (r == 0) {
        decided(s, context, address, cause, n, end);
        return;
    }
    const struct region_state *region = &context->region[r - 1];
    if (region->changed_now || region->changed_before) {
        int64_t from = region->changed_before ? region->closed_before
                                              : region->closed;
        count_ambiguous(s, context, address, r, from, context->guard[r - 1],
                        n);
    } else if (!region->known) {
        count(s, context, COUNT_UNMAPPED, OVL_GUARD_UNKNOWN, address,
              COUNT_GUARD_NONE, 0, n);
    } else if (end == GROUP_TRAILING) {
        if (context->tail.keys == NULL)
            addr_tally_init(&context->tail);
        addr_tally_add_n(&context->tail, address, cause, n);
        context->has_tail = true;
    } else {
        decided(s, context, address, cause, n, end);
    }
}

/*
 * Held samples of the group now closing: taken under h->guard, exact
 * unless an unplaced change of their region touches the window.
 */
static void attribute_held(struct session *s, struct context_state *context,
                           const struct held_samples *h, enum group_end end)
{
    const struct region_state *region = &context->region[h->region - 1];
    struct ovl_location loc;

    if (region->changed_now || region->changed_before) {
        int64_t from = region->changed_before ? region->closed_before
                                              : region->closed;
        count_ambiguous(s, context, h->address, h->region, from, h->guard,
                        h->n);
        return;
    }
    if (h->guard == COUNT_GUARD_NONE) {
        count(s, context, COUNT_UNMAPPED, OVL_GUARD_UNKNOWN, h->address,
              COUNT_GUARD_NONE, 0, h->n);
        return;
    }
    uint32_t now = context->guard[h->region - 1];
    context->guard[h->region - 1] = (uint32_t)h->guard;
    resolve(context, h->address, &loc);
    count_location(s, context, &loc, h->cause, h->n);
    context->guard[h->region - 1] = now;
    if (end == GROUP_READ && loc.reason == OVL_MAPPED)
        add_to_bucket(s, context, loc.file_offset, h->cause, h->n);
}

/* A context whose image cannot be used keeps raw LS addresses. */
static void keep_raw(struct session *s, struct context_state *context,
                     const struct addr_tally *group)
{
    for (uint32_t i = 0; i < group->used_count; i++)
        count(s, context, COUNT_UNMAPPED, COUNT_REASON_NO_IMAGE,
              addr_tally_address(group, i), COUNT_GUARD_NONE, 0,
              addr_tally_count(group, i));
}

/* The held samples of a group, judged at its close (image usable). */
static void attribute_all_held(struct session *s, struct slot_state *slot,
                               enum group_end end)
{
    for (guint i = 0; i < slot->held->len; i++)
        attribute_held(s, slot->context,
                       &g_array_index(slot->held, struct held_samples, i),
                       end);
    g_array_set_size(slot->held, 0);
}

/* The window moves on: group k closed with a read after it. */
static void roll_window(struct context_state *context)
{
    for (unsigned r = 0; r < context->regions; r++) {
        struct region_state *region = &context->region[r];
        region->closed_before = region->closed;
        region->closed = guard_now(context, r);
        region->changed_before = region->changed_now;
        region->changed_now = false;
    }
}

static void end_first_read(struct session *s, struct slot_state *slot);

/* Closes the slot's open group; time_ns: its TIME record's (GROUP_READ). */
static void close_group(struct session *s, struct slot_state *slot,
                        enum group_end end, int64_t time_ns)
{
    struct context_state *context = slot->context;

    if (context == NULL)
        return;
    if (slot->first_read)
        end_first_read(s, slot);
    if (end == GROUP_TRAILING && !context->has_tail)
        for (unsigned r = 0; r < context->regions; r++)
            context->region[r].tail_from = guard_now(context, r);
    if (context->image->ovl == NULL) {
        keep_raw(s, context, &slot->group);
        g_array_set_size(slot->held, 0);    /* only with an image: none */
    } else {
        /* The image may have become usable after the context was made. */
        ensure_regions(context, ovl_image_region_count(context->image->ovl));
        if (end == GROUP_READ)
            enter_bucket(s, context, time_ns);
        attribute_all_held(s, slot, end);
        const uint16_t *regions = region_map(s, context->image);
        for (uint32_t i = 0; i < slot->group.used_count; i++)
            attribute(s, context, regions,
                      addr_tally_address(&slot->group, i),
                      addr_tally_cause(&slot->group, i),
                      addr_tally_count(&slot->group, i), end);
    }
    addr_tally_clear(&slot->group);
    if (end == GROUP_READ)
        roll_window(context);
}

/* ---- the pending tail --------------------------------------------------- */

/*
 * The first read after a bind is done: the tail drained at the context's
 * last unbind is judged.  A region read again with the guard it had then
 * did not change after the last read (the local store of an unbound
 * context does not change), so its samples are exact.
 */
static void judge_tail(struct session *s, struct context_state *context)
{
    struct ovl_location loc;

    for (uint32_t i = 0; i < context->tail.used_count; i++) {
        uint32_t address = addr_tally_address(&context->tail, i);
        uint32_t cause = addr_tally_cause(&context->tail, i);
        uint32_t n = addr_tally_count(&context->tail, i);
        resolve(context, address, &loc);
        if (loc.region == 0) {          /* cannot happen: tails hold */
            count_location(s, context, &loc, cause, n); /* region addresses */
            continue;
        }
        const struct region_state *region = &context->region[loc.region - 1];
        int64_t to = region->reread ? (int64_t)context->guard[loc.region - 1]
                                    : COUNT_GUARD_NONE;
        if (to != COUNT_GUARD_NONE && to == region->tail_from)
            count_location(s, context, &loc, cause, n);
        else
            count_ambiguous(s, context, address, loc.region,
                            region->tail_from, to, n);
    }
    addr_tally_free(&context->tail);     /* held only while pending */
    context->has_tail = false;
}

/* No read will come: the tail is ambiguous with an unknown "after". */
static void abandon_tail(struct session *s, struct context_state *context)
{
    struct ovl_location loc;

    for (uint32_t i = 0; i < context->tail.used_count; i++) {
        uint32_t address = addr_tally_address(&context->tail, i);
        uint32_t n = addr_tally_count(&context->tail, i);
        resolve(context, address, &loc);
        if (loc.region == 0)
            count_location(s, context, &loc,
                           addr_tally_cause(&context->tail, i), n);
        else
            count_ambiguous(s, context, address, loc.region,
                            context->region[loc.region - 1].tail_from,
                            COUNT_GUARD_NONE, n);
    }
    addr_tally_free(&context->tail);     /* held only while pending */
    context->has_tail = false;
}

static void end_first_read(struct session *s, struct slot_state *slot)
{
    struct context_state *context = slot->context;

    slot->first_read = false;
    for (unsigned r = 0; r < context->regions; r++) {
        struct region_state *region = &context->region[r];
        region->closed = guard_now(context, r);
        region->closed_before = region->closed;
        region->changed_now = region->changed_before = false;
    }
    if (context->has_tail)
        judge_tail(s, context);
}

/* ---- bindings ----------------------------------------------------------- */

static uint64_t clock_hz(const struct session *s)
{
    return s->started && s->start.clock_hz ? s->start.clock_hz : DEFAULT_CLOCK;
}

/* The time at cycle, from a (cycle, time) pair of the same binding; in
 * 0..INT64_MAX whatever 64-bit values the stream gave. */
static int64_t time_at(const struct session *s, uint64_t cycle,
                       uint64_t known_cycle, uint64_t known_ns)
{
    double delta = ((double)cycle - (double)known_cycle) * 1e9 /
                   (double)clock_hz(s);
    double ns = (double)known_ns + delta;

    if (!(ns > 0))
        return 0;
    return ns >= 0x1p63 ? INT64_MAX : (int64_t)ns;
}

static void queue_binding(struct session *s, const struct slot_state *slot)
{
    g_array_append_val(s->binding_rows, slot->binding);
}

static void bind(struct session *s, struct slot_state *slot,
                 struct context_state *context, uint64_t cycle)
{
    slot->context = context;
    slot->first_read = true;
    slot->have_time = false;
    slot->last_cycle = cycle;
    context->bound_slot = slot->index;
    for (unsigned r = 0; r < context->regions; r++)
        context->region[r].reread = false;
    slot->binding = (struct store_binding){
        .id = ++s->bindings,
        .slot = slot->index,
        .context = context->id,
        .start_cycle = cycle,
        .start_time_ns = STORE_TIME_NONE,
        .end_time_ns = STORE_TIME_NONE,
    };
    queue_binding(s, slot);
}

static void unbind(struct session *s, struct slot_state *slot,
                   const char *reason, uint64_t cycle, int64_t time_ns)
{
    struct store_binding *binding = &slot->binding;

    if (slot->context == NULL)
        return;
    close_group(s, slot, GROUP_TRAILING, -1);
    binding->end_cycle = cycle;
    binding->end_reason = reason;
    if (time_ns != STORE_TIME_NONE)
        binding->end_time_ns = time_ns;
    else if (slot->have_time)
        binding->end_time_ns = time_at(s, cycle, slot->time_cycle,
                                       slot->time_ns);
    else if (binding->start_time_ns != STORE_TIME_NONE)
        binding->end_time_ns = time_at(s, cycle, binding->start_cycle,
                                       (uint64_t)binding->start_time_ns);
    queue_binding(s, slot);
    slot->context->bound_slot = NO_SLOT;
    slot->context = NULL;
    slot->first_read = false;
}

/* ---- records ------------------------------------------------------------ */

static void on_start(struct session *s, const struct copstream_record *rec)
{
    if (rec->repeat || s->started)
        return;
    s->start = rec->u.start;
    s->started = true;
    s->start_dirty = true;
    for (unsigned i = 0; i < SLOTS; i++)
        if (s->slots[i] != NULL)
            reset_reasons(s, s->slots[i]);
}

static void on_image(struct session *s, const struct copstream_record *rec)
{
    image_registry_note_path(s->images, &rec->u.image.id, rec->u.image.path,
                             rec->u.image.path_length);
}

static bool was_ended(const struct session *s, uint64_t context_id)
{
    return g_hash_table_contains(s->ended_ids, &context_id);
}

/* Remembers an ended id, forgetting the oldest beyond ENDED_MAX. */
static void remember_ended(struct session *s, uint64_t context_id)
{
    uint64_t *cell = &s->ended_ring[s->ended_next];

    if (g_hash_table_size(s->ended_ids) == ENDED_MAX)
        g_hash_table_remove(s->ended_ids, cell);
    *cell = context_id;
    g_hash_table_add(s->ended_ids, cell);
    s->ended_next = (s->ended_next + 1) % ENDED_MAX;
}

static void on_context(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_context *c = &rec->u.context;
    struct slot_state *slot = get_slot(s, c->slot);

    unbind(s, slot, "switch", c->cycle, STORE_TIME_NONE);
    reset_reasons(s, slot);
    if (was_ended(s, c->context_id)) {
        s->bind_after_end++;    /* a writer's error: its samples are */
        return;                 /* orphans of the idle slot */
    }
    struct context_state *context = find_context(s, c);
    if (context->bound_slot != NO_SLOT)
        unbind(s, s->slots[context->bound_slot], "moved", c->cycle,
               STORE_TIME_NONE);
    bind(s, slot, context, c->cycle);
}

static void queue_overlay_event(struct session *s,
                                const struct slot_state *slot,
                                const struct copstream_overlay *o, bool first)
{
    struct store_overlay_event event = {
        .context = slot->context->id,
        .slot = slot->index,
        .region = o->region + 1,
        .guard = o->guard,
        .cycle = o->cycle,
        .initial = first,
        .placed = !first && (o->flags & COPSTREAM_OVERLAY_PLACED) != 0,
    };
    g_array_append_val(s->overlay_rows, event);
}

/*
 * A placed change of region r (1-based) comes: the open group's samples in
 * r so far were taken under its guard now, and are held with it.
 */
static void hold_region(struct session *s, struct slot_state *slot,
                        unsigned r)
{
    struct context_state *context = slot->context;

    if (context->image->ovl == NULL || slot->group.used_count == 0)
        return;
    const uint16_t *regions = region_map(s, context->image);
    addr_tally_clear(&slot->rest);
    for (uint32_t i = 0; i < slot->group.used_count; i++) {
        uint32_t address = addr_tally_address(&slot->group, i);
        uint32_t cause = addr_tally_cause(&slot->group, i);
        uint32_t n = addr_tally_count(&slot->group, i);
        if (address >= COP_LS_SIZE || regions[address / 4] != r) {
            addr_tally_add_n(&slot->rest, address, cause, n);
            continue;
        }
        struct held_samples h = { address, cause, n, r,
                                  guard_now(context, r - 1) };
        g_array_append_val(slot->held, h);
    }
    struct addr_tally swap = slot->group;
    slot->group = slot->rest;
    slot->rest = swap;
}

static void on_overlay(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_overlay *o = &rec->u.overlay;
    struct slot_state *slot = get_slot(s, o->slot);
    struct context_state *context = slot->context;

    if (context == NULL)
        return;                     /* an orphan: the decoder counted it */
    if (o->region >= REGION_MAX) {
        s->ignored_overlays++;
        return;
    }
    ensure_regions(context, o->region + 1);
    settle(s, context);             /* under the guards they were decided */
    struct region_state *region = &context->region[o->region];
    bool placed = (o->flags & COPSTREAM_OVERLAY_PLACED) != 0;
    if (slot->first_read && (region->reread || placed))
        end_first_read(s, slot);    /* a region twice: a change after all */
    if (placed && o->region + 1 <= UINT16_MAX)
        hold_region(s, slot, o->region + 1);
    context->guard[o->region] = o->guard;
    region->known = true;
    slot->last_cycle = o->cycle;
    if (slot->first_read)
        region->reread = true;
    else if (!placed)
        region->changed_now = true;
    queue_overlay_event(s, slot, o, slot->first_read);
}

static void on_lost(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_lost *l = &rec->u.lost;
    struct slot_state *slot = get_slot(s, l->slot);

    if (slot->first_read)
        end_first_read(s, slot);
    struct store_lost row = {
        .slot = l->slot,
        .context = slot->context ? slot->context->id : 0,
        .cause = l->cause,
        .count = l->count,
        .cycle = l->cycle,
    };
    g_array_append_val(s->lost_rows, row);
}

static void on_stall(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_stall *t = &rec->u.stall;
    struct slot_state *slot = get_slot(s, t->slot);
    struct store_stall row = {
        .slot = t->slot,
        .context = slot->context ? slot->context->id : 0,
        .count = t->count,
        .ns = t->ns > INT64_MAX ? INT64_MAX : t->ns,
        .cycle = t->cycle,
    };

    s->out_of_range += t->ns > INT64_MAX;
    g_array_append_val(s->stall_rows, row);
}

/* The reasons of the slot's next sample words. */
static void on_reasons(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_reasons *r = &rec->u.reasons;
    struct slot_state *slot = get_slot(s, r->slot);

    end_reasons(s, slot);
    memcpy(slot->stalls, r->stalls, (r->count + 1) / 2);
    slot->reasons = r->count;
}

/* The transfer the slot's DMA-wait samples wait on from now on. */
static void on_transfer(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_transfer *t = &rec->u.transfer;
    struct count_cause transfer = {
        .stall = COPSTREAM_STALL_DMA_WAIT,
        .transfer = (t->flags & COPSTREAM_TRANSFER_KNOWN) != 0,
        .tag = t->tag,
        .issuer = t->issuer,
    };

    set_transfer(get_slot(s, t->slot), &transfer);
}

static void on_time(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_time *t = &rec->u.time;
    struct slot_state *slot = get_slot(s, t->slot);
    struct time_row row = { t->slot, t->cycle, t->time_ns };

    g_array_append_val(s->time_rows, row);
    slot->last_cycle = t->cycle;
    if (slot->context == NULL)
        return;
    close_group(s, slot, GROUP_READ, (int64_t)t->time_ns);
    if (slot->binding.start_time_ns == STORE_TIME_NONE) {
        slot->binding.start_time_ns = t->cycle >= slot->binding.start_cycle ?
            time_at(s, slot->binding.start_cycle, t->cycle, t->time_ns) :
            (int64_t)t->time_ns;
        queue_binding(s, slot);
    }
    slot->have_time = true;
    slot->time_cycle = t->cycle;
    slot->time_ns = t->time_ns;
}

static void on_release(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_release *r = &rec->u.release;

    unbind(s, get_slot(s, r->slot), "release", r->cycle, STORE_TIME_NONE);
    end_reasons(s, get_slot(s, r->slot));
}

/*
 * The context ended (stream 1.3): its pending samples can no longer be
 * judged, its open bucket becomes rows, and it leaves the index; the next
 * successful flush writes it and session_written() frees it.
 */
static void end_context(struct session *s, struct context_state *context,
                        uint64_t cycle)
{
    struct context_key key;

    if (context->bound_slot != NO_SLOT)     /* END before its RELEASE */
        unbind(s, s->slots[context->bound_slot], "release", cycle,
               STORE_TIME_NONE);
    settle(s, context);
    if (context->has_tail)
        abandon_tail(s, context);
    emit_bucket(s, context);
    context_key_of(&context->record, &key);
    g_hash_table_remove(s->context_index, &key);
    context->ended = true;
    s->any_ended = true;
}

static void on_end(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_end *e = &rec->u.end;
    bool found = false;

    if (was_ended(s, e->context_id)) {
        s->end_twice++;
        return;
    }
    for (guint i = 0; i < s->contexts->len; i++) {
        struct context_state *context = g_ptr_array_index(s->contexts, i);
        if (context->ended || context->record.context_id != e->context_id)
            continue;
        end_context(s, context, e->cycle);
        found = true;
    }
    if (!found) {
        s->end_unknown++;
        return;
    }
    remember_ended(s, e->context_id);
}

/* Every binding ends; pending samples can no longer be judged. */
static void end_all(struct session *s, const char *reason, int64_t time_ns)
{
    for (unsigned i = 0; i < SLOTS; i++)
        if (s->slots[i] != NULL)
            unbind(s, s->slots[i], reason, s->slots[i]->last_cycle, time_ns);
    for (guint i = 0; i < s->contexts->len; i++) {
        struct context_state *context = g_ptr_array_index(s->contexts, i);
        if (context->has_tail)
            abandon_tail(s, context);
    }
}

static void on_stop(struct session *s, const struct copstream_record *rec)
{
    if (s->stopped)
        return;
    for (unsigned i = 0; i < SLOTS; i++)
        if (s->slots[i] != NULL)
            end_reasons(s, s->slots[i]);
    s->stop = rec->u.stop;
    s->stopped = true;
    s->stop_dirty = true;
    end_all(s, "stop", (int64_t)rec->u.stop.time_ns);
}

/* ---- decoder callbacks -------------------------------------------------- */

/* A sample the fast path did not take: no slot state yet, no context, or
 * the first read after a bind just ended. */
static void slow_sample(struct session *s, const struct copstream_sample *sm)
{
    struct slot_state *slot = get_slot(s, sm->slot);

    if (slot->first_read)
        end_first_read(s, slot);
    if (slot->context == NULL)
        count(s, NULL, COUNT_ORPHAN, sm->slot, sm->address, 0, 0, 1);
    else
        addr_tally_add(&slot->group, sm->address, next_cause(s, slot));
}

static void on_samples(void *user, uint64_t offset,
                       const struct copstream_sample *samples, size_t n)
{
    struct session *s = user;

    for (size_t i = 0; i < n; i++) {
        struct slot_state *slot = s->slots[samples[i].slot];
        if (G_UNLIKELY(slot == NULL || slot->context == NULL ||
                       slot->first_read)) {
            slow_sample(s, &samples[i]);
            continue;
        }
        addr_tally_add(&slot->group, samples[i].address,
                       next_cause(s, slot));
    }
    if (n > 0) {
        s->last_sample = samples[n - 1];
        s->have_last_sample = true;
    }
}

/* ---- call stacks -------------------------------------------------------- */

/* Resolves a frame's call site under the overlay it was made in (0: the
 * guards of now). */
static void resolve_frame(struct session *s, struct context_state *context,
                          uint32_t address, unsigned overlay,
                          struct ovl_location *loc)
{
    const uint16_t *regions = region_map(s, context->image);
    unsigned region = address < COP_LS_SIZE ? regions[address / 4] : 0;

    if (overlay == 0 || region == 0 || region > context->regions) {
        resolve(context, address, loc);
        return;
    }
    uint32_t now = context->guard[region - 1];
    context->guard[region - 1] = overlay;
    resolve(context, address, loc);
    context->guard[region - 1] = now;
}

/* One frame of a stack key: the file offset, @OVERLAY in an overlay, or
 * ?LS_ADDRESS when it does not resolve (loc NULL: no usable image). */
static void append_frame(GString *key, const struct ovl_location *loc,
                         uint32_t address)
{
    if (key->str[key->len - 1] != ' ')
        g_string_append_c(key, ' ');
    if (loc == NULL || loc->reason != OVL_MAPPED) {
        g_string_append_printf(key, "?0x%x", loc ? loc->ls_addr : address);
        return;
    }
    g_string_append_printf(key, "0x%" G_GINT64_MODIFIER "x",
                           loc->file_offset);
    if (loc->overlay)
        g_string_append_printf(key, "@%u", loc->overlay);
}

static void on_callstack(struct session *s, const struct copstream_record *rec)
{
    const struct copstream_callstack *c = &rec->u.callstack;
    struct slot_state *slot = s->slots[c->slot];
    struct ovl_location loc;

    if (!s->have_last_sample || s->last_sample.slot != c->slot) {
        s->callstacks_unattached++;
        return;
    }
    s->have_last_sample = false;
    if (slot == NULL || slot->context == NULL)
        return;                 /* an orphan sample: so is its stack */
    struct context_state *context = slot->context;
    uint32_t stall = cause_at(s, slot->cause)->stall;
    GString *key = g_string_new(NULL);
    g_string_printf(key, "%u %u ", context->id, stall);
    size_t frames = key->len;
    bool usable = context->image->ovl != NULL;
    if (usable)
        resolve(context, s->last_sample.address, &loc);
    append_frame(key, usable ? &loc : NULL, s->last_sample.address);
    for (uint32_t i = 0; i < c->n_frames; i++) {
        uint64_t w = copstream_frame(c->frames, i);
        uint32_t site = (uint32_t)w >= 4 ? (uint32_t)w - 4 : (uint32_t)w;

        if (usable)
            resolve_frame(s, context, site, (unsigned)(w >> 32), &loc);
        append_frame(key, usable ? &loc : NULL, site);
    }
    if (c->depth > c->n_frames)
        g_string_append(key, " ...");
    struct stack_count *count = g_hash_table_lookup(s->stacks, key->str);
    if (count == NULL) {
        count = g_new0(struct stack_count, 1);
        *count = (struct stack_count){ context->id, context->image->id,
                                       stall, frames, 0 };
        g_hash_table_insert(s->stacks, g_string_free(key, FALSE), count);
    } else {
        g_string_free(key, TRUE);
    }
    count->count++;
    s->callstacks++;
}

static void on_record(void *user, const struct copstream_record *rec)
{
    struct session *s = user;

    if (rec->code == COPSTREAM_CALLSTACK) {
        on_callstack(s, rec);
        return;
    }
    s->have_last_sample = false;
    switch (rec->code) {
    case COPSTREAM_START:
        on_start(s, rec);
        break;
    case COPSTREAM_CONTEXT:
        on_context(s, rec);
        break;
    case COPSTREAM_OVERLAY:
        on_overlay(s, rec);
        break;
    case COPSTREAM_LOST:
        on_lost(s, rec);
        break;
    case COPSTREAM_TIME:
        on_time(s, rec);
        break;
    case COPSTREAM_STOP:
        on_stop(s, rec);
        break;
    case COPSTREAM_IMAGE:
        on_image(s, rec);
        break;
    case COPSTREAM_RELEASE:
        on_release(s, rec);
        break;
    case COPSTREAM_STALL:
        on_stall(s, rec);
        break;
    case COPSTREAM_END:
        on_end(s, rec);
        break;
    case COPSTREAM_REASONS:
        on_reasons(s, rec);
        break;
    case COPSTREAM_TRANSFER:
        on_transfer(s, rec);
        break;
    }
}

static void on_error(void *user, const struct copstream_error *err)
{
    struct session *s = user;
    struct error_row row = { err->offset, err->kind, err->code };

    if (s->errors_logged >= ERROR_LOG_MAX)
        return;
    s->errors_logged++;
    g_array_append_val(s->error_rows, row);
}

/* ---- the session -------------------------------------------------------- */

struct session *session_new(const char *session_dir, uint64_t timeline_ns,
                            bool quiet)
{
    struct session *s = g_new0(struct session, 1);
    struct copstream_handler handler = {
        .samples = on_samples,
        .record = on_record,
        .error = on_error,
        .user = s,
    };

    copstream_decoder_init(&s->decoder, &handler);
    s->timeline_ns = timeline_ns;
    s->images = image_registry_new(session_dir, quiet);
    count_table_init(&s->counts);
    s->context_index = g_hash_table_new_full(context_key_hash,
                                             context_key_equal, g_free, NULL);
    s->contexts = g_ptr_array_new();
    s->ended_ring = g_new0(uint64_t, ENDED_MAX);
    s->ended_ids = g_hash_table_new(g_int64_hash, g_int64_equal);
    s->freeing = g_hash_table_new_full(g_int_hash, g_int_equal, g_free,
                                       NULL);
    s->binding_rows = g_array_new(FALSE, FALSE, sizeof(struct store_binding));
    s->overlay_rows = g_array_new(FALSE, FALSE,
                                  sizeof(struct store_overlay_event));
    s->lost_rows = g_array_new(FALSE, FALSE, sizeof(struct store_lost));
    s->stall_rows = g_array_new(FALSE, FALSE, sizeof(struct store_stall));
    s->time_rows = g_array_new(FALSE, FALSE, sizeof(struct time_row));
    s->error_rows = g_array_new(FALSE, FALSE, sizeof(struct error_row));
    s->timeline_rows = g_array_new(FALSE, FALSE, sizeof(struct timeline_row));
    s->stall_timeline_rows = g_array_new(FALSE, FALSE,
                                         sizeof(struct timeline_row));
    s->causes = g_array_new(FALSE, FALSE, sizeof(struct count_cause));
    s->cause_index = g_hash_table_new_full(cause_hash, cause_equal, g_free,
                                           NULL);
    add_cause(s, &(struct count_cause){ .stall = 0 });     /* CAUSE_ISSUE */
    add_cause(s, &(struct count_cause){ .stall = STALL_DROPPED });
    s->stacks = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                      g_free);
    s->region_maps = g_ptr_array_new_with_free_func(g_free);
    return s;
}

static void context_free(struct context_state *context)
{
    addr_tally_free(&context->tail);
    addr_tally_free(&context->settled);
    g_hash_table_destroy(context->bucket_counts);
    g_hash_table_destroy(context->bucket_stalls);
    g_free(context->guard);
    g_free(context->region);
    g_free(context);
}

void session_free(struct session *s)
{
    if (s == NULL)
        return;
    for (unsigned i = 0; i < SLOTS; i++) {
        if (s->slots[i] == NULL)
            continue;
        addr_tally_free(&s->slots[i]->group);
        addr_tally_free(&s->slots[i]->rest);
        g_array_free(s->slots[i]->held, TRUE);
        g_free(s->slots[i]);
    }
    for (guint i = 0; i < s->contexts->len; i++)
        context_free(g_ptr_array_index(s->contexts, i));
    g_ptr_array_free(s->contexts, TRUE);
    g_hash_table_destroy(s->context_index);
    g_hash_table_destroy(s->ended_ids);
    g_hash_table_destroy(s->freeing);
    g_free(s->ended_ring);
    count_table_free(&s->counts);
    image_registry_free(s->images);
    g_array_free(s->binding_rows, TRUE);
    g_array_free(s->overlay_rows, TRUE);
    g_array_free(s->lost_rows, TRUE);
    g_array_free(s->stall_rows, TRUE);
    g_array_free(s->time_rows, TRUE);
    g_array_free(s->error_rows, TRUE);
    g_array_free(s->timeline_rows, TRUE);
    g_array_free(s->stall_timeline_rows, TRUE);
    g_array_free(s->causes, TRUE);
    g_hash_table_destroy(s->cause_index);
    g_hash_table_destroy(s->stacks);
    g_ptr_array_free(s->region_maps, TRUE);
    g_free(s);
}

void session_feed(struct session *s, const uint8_t *bytes, size_t length)
{
    copstream_decoder_feed(&s->decoder, bytes, length);
}

void session_finish(struct session *s)
{
    if (s->finished)
        return;
    s->finished = true;
    copstream_decoder_finish(&s->decoder);
    end_all(s, "end", STORE_TIME_NONE);
}

bool session_stopped(const struct session *s)
{
    return s->stopped;
}

bool session_stop_mismatch(const struct session *s, char *buf, size_t len)
{
    const struct copstream_stats *st = &s->decoder.stats;
    uint64_t held = st->samples + st->lost;
    uint64_t counted = s->stop.samples + s->stop.lost;

    if (!s->stopped ||
        st->errors_by_kind[COPSTREAM_ERR_COUNT_MISMATCH] == 0)
        return false;
    snprintf(buf, len, "the driver's STOP counted %" PRIu64 " samples and "
             "%" PRIu64 " lost, the stream held %" PRIu64 " samples and %"
             PRIu64 " lost: %" PRIu64 " %s", s->stop.samples, s->stop.lost,
             st->samples, st->lost, counted > held ? counted - held :
             held - counted, counted > held ? "missing" : "more than "
             "counted");
    return true;
}

bool session_start_time(const struct session *s, uint64_t *ns)
{
    if (!s->started)
        return false;
    *ns = s->start.start_time_ns;
    return true;
}

const struct copstream_stats *session_stream_stats(const struct session *s)
{
    return &s->decoder.stats;
}

/* ---- totals ------------------------------------------------------------- */

static size_t tally_bytes(const struct addr_tally *tally)
{
    size_t cells = (size_t)tally->mask + 1;

    if (tally->keys == NULL)
        return 0;
    return cells * (sizeof(uint64_t) + sizeof(uint32_t)) +
           (cells / 2 + 1) * sizeof(uint32_t);
}

/* What the session holds for its contexts, by its own accounting: their
 * states, tallies, regions and open timeline buckets. */
static uint64_t context_bytes(const struct session *s)
{
    uint64_t bytes = 0;

    for (guint i = 0; i < s->contexts->len; i++) {
        const struct context_state *c = g_ptr_array_index(s->contexts, i);
        bytes += sizeof *c + sizeof(struct context_key) +
                 tally_bytes(&c->tail) + tally_bytes(&c->settled) +
                 c->regions * (sizeof *c->guard + sizeof *c->region) +
                 (g_hash_table_size(c->bucket_counts) +
                  g_hash_table_size(c->bucket_stalls)) *
                     sizeof(struct function_count);
    }
    return bytes;
}

void session_get_totals(struct session *s, struct session_totals *t)
{
    settle_all(s);
    memset(t, 0, sizeof *t);  /* (before the totals it keeps) */
    t->samples = s->decoder.stats.samples;
    t->lost = s->decoder.stats.lost;
    t->errors = s->decoder.stats.errors + s->end_unknown + s->end_twice +
                s->bind_after_end + s->out_of_range + s->reasons_unread;
    t->contexts = s->context_ids;
    t->exact = s->retired[COUNT_EXACT];
    t->ambiguous = s->retired[COUNT_AMBIGUOUS];
    t->unmapped = s->retired[COUNT_UNMAPPED];
    t->orphan = s->retired[COUNT_ORPHAN];
    t->images = image_registry_count(s->images);
    t->ignored_overlays = s->ignored_overlays;
    t->live_contexts = s->contexts->len;
    t->context_bytes = context_bytes(s);
    t->count_entries = s->counts.occupied;
    for (size_t i = 0; i <= s->counts.mask; i++) {
        const struct count_entry *e = &s->counts.entries[i];
        if (!e->occupied)
            continue;
        if (e->key.kind == COUNT_EXACT)
            t->exact += e->total;
        else if (e->key.kind == COUNT_AMBIGUOUS)
            t->ambiguous += e->total;
        else if (e->key.kind == COUNT_UNMAPPED)
            t->unmapped += e->total;
        else
            t->orphan += e->total;
    }
    for (guint i = 0; i < s->contexts->len; i++) {
        const struct context_state *c = g_ptr_array_index(s->contexts, i);
        for (uint32_t j = 0; j < c->tail.used_count; j++)
            t->pending += addr_tally_count(&c->tail, j);
    }
    for (unsigned i = 0; i < SLOTS; i++) {
        const struct slot_state *slot = s->slots[i];
        for (uint32_t j = 0; slot != NULL && j < slot->group.used_count; j++)
            t->open += addr_tally_count(&slot->group, j);
        for (guint j = 0; slot != NULL && j < slot->held->len; j++)
            t->open += g_array_index(slot->held, struct held_samples, j).n;
    }
}

/* ---- writing ------------------------------------------------------------ */

/* The START's FIFO-full policy and dither (0 in a 1.1 START: drop, off). */
/* START's event (1.5) as a session word; an earlier START has none. */
static int write_event(const struct copstream_start *st, struct store *store)
{
    char text[32];

    if (st->version >> 16 != COPSTREAM_VERSION_MAJOR ||
        (st->version & 0xffff) < 5)
        return 0;
    if (st->event == COPSTREAM_EVENT_CYCLES)
        g_strlcpy(text, "SPU_CYCLES", sizeof text);
    else if (st->event == COPSTREAM_EVENT_INSTRUCTIONS)
        g_strlcpy(text, "SPU_INSTRUCTIONS", sizeof text);
    else
        g_snprintf(text, sizeof text, "%u", st->event);
    return store_put_meta_text(store, "sampling.event", text);
}

static int write_sampling(const struct copstream_start *st,
                          struct store *store)
{
    char seed[32];

    g_snprintf(seed, sizeof seed, "%" G_GUINT64_FORMAT, st->dither_seed);
    if (store_put_meta_text(store, "sampling.fifo_full",
                            st->fifo_full == COPSTREAM_FIFO_STALL ? "stall"
                                                                  : "drop")
            != 0 ||
        store_put_meta_text(store, "sampling.dither",
                            st->dither ? "on" : "off") != 0 ||
        store_put_meta_text(store, "sampling.dither_seed", seed) != 0 ||
        store_put_meta_int(store, "sampling.watermark", st->watermark) != 0)
        return -1;
    return write_event(st, store);
}

static int write_start(struct session *s, struct store *store)
{
    const struct copstream_start *st = &s->start;
    char version[32];

    if (!s->start_dirty)
        return 0;
    g_snprintf(version, sizeof version, "%u.%u", st->version >> 16,
               st->version & 0xffff);
    if (store_put_meta_text(store, "stream.version", version) != 0 ||
        store_put_meta_int(store, "stream.slots", st->slots) != 0 ||
        store_put_meta_int(store, "stream.lfsr_value", st->lfsr_value) != 0 ||
        store_put_meta_int(store, "stream.lfsr_count", st->lfsr_count) != 0 ||
        store_put_meta_int(store, "stream.clock_hz",
                           (int64_t)st->clock_hz) != 0 ||
        store_put_meta_int(store, "stream.fifo_depth", st->fifo_depth) != 0 ||
        store_put_meta_int(store, "stream.ls_size",
                           (int64_t)st->ls_size) != 0 ||
        store_put_meta_int(store, "stream.poll_interval_ns",
                           (int64_t)st->poll_interval_ns) != 0 ||
        store_put_meta_int(store, "stream.start_time_ns",
                           (int64_t)st->start_time_ns) != 0)
        return -1;
    return write_sampling(st, store);
}

static int write_stop(struct session *s, struct store *store)
{
    if (!s->stop_dirty)
        return 0;
    if (store_put_meta_int(store, "stream.stop_time_ns",
                           (int64_t)s->stop.time_ns) != 0 ||
        store_put_meta_int(store, "stream.stop_samples",
                           (int64_t)s->stop.samples) != 0 ||
        store_put_meta_int(store, "stream.stop_lost",
                           (int64_t)s->stop.lost) != 0)
        return -1;
    return 0;
}

/* END records that name no live context, and binds after an END. */
static int write_end_errors(struct session *s, struct store *store)
{
    if ((s->end_unknown != 0 &&
         store_put_error_count(store, "end-unknown", s->end_unknown) != 0) ||
        (s->end_twice != 0 &&
         store_put_error_count(store, "end-twice", s->end_twice) != 0) ||
        (s->bind_after_end != 0 &&
         store_put_error_count(store, "bind-after-end",
                               s->bind_after_end) != 0) ||
        (s->out_of_range != 0 &&
         store_put_error_count(store, "out-of-range",
                               s->out_of_range) != 0) ||
        (s->causes_dropped != 0 &&
         store_put_error_count(store, "reasons-dropped",
                               s->causes_dropped) != 0) ||
        (s->reasons_unread != 0 &&
         store_put_error_count(store, "reasons-unread",
                               s->reasons_unread) != 0))
        return -1;
    return 0;
}

static int write_stream_stats(struct session *s, struct store *store)
{
    const struct copstream_stats *st = &s->decoder.stats;
    uint64_t records = 0;

    for (int code = 0; code < COPSTREAM_CODE_END; code++)
        records += st->records[code];
    if (store_put_meta_int(store, "stream.bytes", (int64_t)st->bytes) != 0 ||
        store_put_meta_int(store, "stream.samples",
                           (int64_t)st->samples) != 0 ||
        store_put_meta_int(store, "stream.records", (int64_t)records) != 0 ||
        store_put_meta_int(store, "stream.unknown_records",
                           (int64_t)st->unknown_records) != 0 ||
        store_put_meta_int(store, "stream.lost", (int64_t)st->lost) != 0 ||
        store_put_meta_int(store, "stream.errors", (int64_t)st->errors) != 0 ||
        store_put_meta_int(store, "stream.skipped_bytes",
                           (int64_t)st->skipped_bytes) != 0 ||
        store_put_meta_int(store, "stream.resyncs",
                           (int64_t)st->resyncs) != 0 ||
        store_put_meta_int(store, "stream.ignored_overlays",
                           (int64_t)s->ignored_overlays) != 0 ||
        store_put_meta_int(store, "stream.complete", s->finished) != 0 ||
        store_put_meta_int(store, "timeline.bucket_ns",
                           (int64_t)s->timeline_ns) != 0 ||
        store_put_meta_int(store, "stream.callstacks",
                           (int64_t)s->callstacks) != 0 ||
        store_put_meta_int(store, "stream.callstacks_unattached",
                           (int64_t)s->callstacks_unattached) != 0)
        return -1;
    for (int kind = 1; kind < COPSTREAM_ERR_KIND_END; kind++)
        if (st->errors_by_kind[kind] != 0 &&
            store_put_error_count(store, copstream_error_name(kind),
                                  st->errors_by_kind[kind]) != 0)
            return -1;
    return write_end_errors(s, store);
}

static int write_images(struct session *s, struct store *store)
{
    for (unsigned i = 0; i < image_registry_count(s->images); i++) {
        const struct image_record *r = image_registry_at(s->images, i);
        if (!r->dirty)
            continue;
        struct store_image row = {
            .id = r->id,
            .path = r->path,
            .offset = r->offset,
            .identity = r->identity,
            .status = image_status_name(r->status),
            .message = r->message,
            .cache_file = r->cache_file,
            .ovl = r->ovl,
        };
        if (store_put_image(store, &row) != 0)
            return -1;
    }
    return 0;
}

static int write_contexts(struct session *s, struct store *store)
{
    for (guint i = 0; i < s->contexts->len; i++) {
        const struct context_state *c = g_ptr_array_index(s->contexts, i);
        if (c->id <= s->contexts_written)
            continue;
        struct store_context row = {
            .id = c->id,
            .context_id = c->record.context_id,
            .pid = c->record.pid,
            .tid = c->record.tid,
            .object_id = c->record.object_id,
            .image = c->image->id,
            .first_slot = c->record.slot,
            .first_cycle = c->record.cycle,
        };
        if (store_put_context(store, &row) != 0)
            return -1;
    }
    return 0;
}

static int write_counts(struct session *s, struct store *store)
{
    for (size_t i = 0; i < s->counts.dirty_count; i++) {
        const struct count_entry *e = count_table_dirty_entry(&s->counts, i);
        if (store_add_count(store, e, cause_at(s, e->key.cause),
                            e->unflushed) != 0)
            return -1;
        if (e->key.kind != COUNT_AMBIGUOUS)
            continue;
        const struct image_record *image =
            image_registry_at(s->images, e->key.image - 1);
        if (store_put_candidates(store, e->key.image, image->ovl,
                                 (uint32_t)e->key.position) != 0)
            return -1;
    }
    return 0;
}

/* A context's pending samples by address, whatever their causes. */
static int write_context_pending(struct store *store,
                                 const struct context_state *c,
                                 struct addr_tally *by_address)
{
    struct ovl_location loc;

    addr_tally_clear(by_address);
    for (uint32_t j = 0; j < c->tail.used_count; j++)
        addr_tally_add_n(by_address, addr_tally_address(&c->tail, j),
                         CAUSE_ISSUE, addr_tally_count(&c->tail, j));
    for (uint32_t j = 0; j < by_address->used_count; j++) {
        uint32_t address = addr_tally_address(by_address, j);
        resolve(c, address, &loc);
        int64_t guard = loc.region ? c->region[loc.region - 1].tail_from
                                   : COUNT_GUARD_NONE;
        if (store_put_pending(store, c->id, c->image->id, address,
                              loc.region, guard,
                              addr_tally_count(by_address, j)) != 0)
            return -1;
    }
    return 0;
}

static int write_pending(struct session *s, struct store *store)
{
    struct addr_tally by_address;
    int rc = 0;

    if (store_clear_pending(store) != 0)
        return -1;
    addr_tally_init(&by_address);
    for (guint i = 0; i < s->contexts->len && rc == 0; i++) {
        const struct context_state *c = g_ptr_array_index(s->contexts, i);
        rc = write_context_pending(store, c, &by_address);
    }
    addr_tally_free(&by_address);
    return rc;
}

static int write_rows(struct session *s, struct store *store)
{
    for (guint i = 0; i < s->binding_rows->len; i++)
        if (store_put_binding(store, &g_array_index(s->binding_rows,
                                                    struct store_binding,
                                                    i)) != 0)
            return -1;
    for (guint i = 0; i < s->overlay_rows->len; i++)
        if (store_put_overlay_event(store, &g_array_index(
                s->overlay_rows, struct store_overlay_event, i)) != 0)
            return -1;
    for (guint i = 0; i < s->lost_rows->len; i++)
        if (store_put_lost(store, &g_array_index(s->lost_rows,
                                                 struct store_lost, i)) != 0)
            return -1;
    for (guint i = 0; i < s->stall_rows->len; i++)
        if (store_put_stall(store, &g_array_index(s->stall_rows,
                                                  struct store_stall, i)) != 0)
            return -1;
    for (guint i = 0; i < s->time_rows->len; i++) {
        const struct time_row *t = &g_array_index(s->time_rows,
                                                  struct time_row, i);
        if (store_put_time(store, t->slot, t->cycle, t->time_ns) != 0)
            return -1;
    }
    for (guint i = 0; i < s->error_rows->len; i++) {
        const struct error_row *e = &g_array_index(s->error_rows,
                                                   struct error_row, i);
        if (store_put_error(store, e->offset, copstream_error_name(e->kind),
                            e->code) != 0)
            return -1;
    }
    return 0;
}

/* A timeline row: by function, or (by_stall) by stall. */
static int write_timeline_row(struct store *store,
                              const struct timeline_row *row, bool by_stall)
{
    if (by_stall)
        return store_add_stall_timeline(store, row->context, row->image,
                                        row->bucket_start_ns,
                                        (uint32_t)row->function, row->count);
    return store_add_timeline(store, row->context, row->image,
                              row->bucket_start_ns, row->function,
                              row->count);
}

/* Rows of closed buckets, then the open buckets' counts so far. */
static int write_timeline_table(struct session *s, struct store *store,
                                const GArray *rows, bool by_stall)
{
    GHashTableIter iter;
    gpointer value;

    for (guint i = 0; i < rows->len; i++)
        if (write_timeline_row(store, &g_array_index(rows,
                                                     struct timeline_row, i),
                               by_stall) != 0)
            return -1;
    for (guint i = 0; i < s->contexts->len; i++) {
        const struct context_state *c = g_ptr_array_index(s->contexts, i);
        g_hash_table_iter_init(&iter, by_stall ? c->bucket_stalls
                                               : c->bucket_counts);
        while (g_hash_table_iter_next(&iter, NULL, &value)) {
            const struct function_count *f = value;
            struct timeline_row row = {
                c->id, c->image->id, (uint64_t)c->bucket * s->timeline_ns,
                f->function, f->count,
            };
            if (write_timeline_row(store, &row, by_stall) != 0)
                return -1;
        }
    }
    return 0;
}

/* The buckets closed since the last flush, and the open ones so far. */
static int write_timeline(struct session *s, struct store *store)
{
    if (write_timeline_table(s, store, s->timeline_rows, false) != 0 ||
        write_timeline_table(s, store, s->stall_timeline_rows, true) != 0)
        return -1;
    return 0;
}

/* The stacks counted since the last flush (added to the table's). */
static int write_stacks(struct session *s, struct store *store)
{
    GHashTableIter iter;
    gpointer key, value;

    g_hash_table_iter_init(&iter, s->stacks);
    while (g_hash_table_iter_next(&iter, &key, &value)) {
        const struct stack_count *c = value;

        if (store_add_stack(store, c->context, c->image, c->stall,
                            (const char *)key + c->frames, c->count) != 0)
            return -1;
    }
    return 0;
}

int session_write(struct session *s, struct store *store)
{
    settle_all(s);
    if (write_start(s, store) != 0 || write_stop(s, store) != 0 ||
        write_stream_stats(s, store) != 0 || write_images(s, store) != 0 ||
        write_contexts(s, store) != 0 || write_counts(s, store) != 0 ||
        write_pending(s, store) != 0 || write_rows(s, store) != 0 ||
        write_timeline(s, store) != 0 || write_stacks(s, store) != 0)
        return -1;
    return 0;
}

/* A count entry of a freed context leaves the table; its total stays in
 * the session's totals. */
static bool keep_count(const struct count_entry *e, void *data)
{
    struct session *s = data;

    if (e->key.context == 0 || !g_hash_table_contains(s->freeing,
                                                      &e->key.context))
        return true;
    s->retired[e->key.kind] += e->total;
    return false;
}

/* The ended contexts are in the database now: everything held for them
 * goes, their count entries too. */
static void free_ended(struct session *s)
{
    if (!s->any_ended)
        return;
    s->any_ended = false;
    for (guint i = 0; i < s->contexts->len;) {
        struct context_state *c = g_ptr_array_index(s->contexts, i);
        if (!c->ended) {
            i++;
            continue;
        }
        g_hash_table_add(s->freeing, g_memdup2(&c->id, sizeof c->id));
        g_ptr_array_remove_index_fast(s->contexts, i);
        context_free(c);
    }
    count_table_retain(&s->counts, keep_count, s);
    g_hash_table_remove_all(s->freeing);
}

void session_written(struct session *s)
{
    s->start_dirty = false;
    s->stop_dirty = false;
    s->contexts_written = s->context_ids;
    for (unsigned i = 0; i < image_registry_count(s->images); i++)
        image_registry_at(s->images, i)->dirty = false;
    count_table_mark_flushed(&s->counts);
    g_array_set_size(s->binding_rows, 0);
    g_array_set_size(s->overlay_rows, 0);
    g_array_set_size(s->lost_rows, 0);
    g_array_set_size(s->stall_rows, 0);
    g_array_set_size(s->time_rows, 0);
    g_array_set_size(s->error_rows, 0);
    g_array_set_size(s->timeline_rows, 0);
    g_array_set_size(s->stall_timeline_rows, 0);
    g_hash_table_remove_all(s->stacks);
    for (guint i = 0; i < s->contexts->len; i++) {
        struct context_state *c = g_ptr_array_index(s->contexts, i);
        g_hash_table_remove_all(c->bucket_counts);  /* written; the bucket */
        g_hash_table_remove_all(c->bucket_stalls);  /* may get more */
    }
    free_ended(s);
}
