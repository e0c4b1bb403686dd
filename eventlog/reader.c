/*
 * reader.c — reading a coplog file: every ring merged into one order.
 *
 * The global order of records is their raw clock, with ties broken by
 * (subsystem, ring, position): a total order that every reader sees the
 * same.  A reader gathers the keys (clock, ring, position) of readable
 * records in batches ("refills"), sorts them, and returns the records one at
 * a time in that order, copying each out of the file when it returns it (a
 * record overwritten meanwhile is counted as missed).
 *
 * Reading a slot is a seqlock read: the commit word must say "done at the
 * expected position" before and after the words are copied, else the record
 * was not complete or has been overwritten meanwhile.  Each ring keeps the
 * lowest position not yet settled (returned, or counted as missed,
 * unfinished, late or filtered) and a bitmap of the settled ones above it;
 * a refill walks each ring from there to its head.
 *
 * Following a live log needs more care: a writer reserves a position, then
 * reads the clock, then commits, so a record may appear after records with
 * a larger order.  A live refill therefore returns only records below a
 * watermark W such that nothing below W can still appear:
 *
 *   - W <= the time of this refill (read, fenced, before the heads), less a
 *     margin for TSC skew between CPUs and for rdtsc running ahead of the
 *     reservation (measured: under 250 ticks; the margin is 100 us);
 *   - for each ring with pending positions (reserved, not committed), W <=
 *     the time of the newest earlier refill that had not seen the oldest of
 *     them reserved: that writer reserved after it, so its clock is later.
 *
 * Refills record (clock, every ring's head) as marks, at least 1/32 of the
 * stall time apart, 64 kept: enough to cover twice the stall time.  A
 * position already reserved at a mark older than the stall time (default
 * 1 s) is counted as unfinished and no longer holds W back (its writer was
 * killed, or stopped); should it commit later, it is counted as late.
 * Records at or above W stay unsettled and are read again by the next
 * refill.  W only grows; coplog_reader_position() returns it.  A refill
 * needs 24 bytes of memory per record it finds readable.
 *
 * READ_ALL refills (post-mortem) return everything committed and count
 * pending positions as unfinished at once.
 *
 * The file is checked when opened (file.c), so every ring and string area
 * lies inside the mapping; record contents are never trusted: bad format
 * ids, argument counts and string references give markers, not crashes.
 */
#include "eventlog/clock.h"
#include "eventlog/file.h"
#include "eventlog/format-table.h"
#include "eventlog/layout.h"
#include "eventlog/message.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MARKS               64
#define MARK_SPACING        32          /* marks per stall time */
#define SKEW_MARGIN_NS      100000u
#define DEFAULT_STALL_NS    1000000000u
#define TEXT_BYTES          (LAYOUT_STRING_MAX + 1)

struct reader_ring {
    unsigned subsys;
    unsigned index;                     /* within its subsystem */
    const struct layout_subsys *desc;
    const struct layout_ring *counters;
    const uint8_t *records;
    const _Atomic uint64_t *strings;
    uint64_t mask;
    unsigned record_bytes, max_args;
    bool oneshot;
    uint64_t next;                      /* positions below are settled */
    uint8_t *settled;                   /* bit per slot, positions >= next */
    uint64_t head;                      /* at this refill */
    uint64_t bound;                     /* W limit from pending positions */
    bool unbounded_pending;             /* pending with no known bound */
};

struct mark {
    uint64_t clock;
    uint64_t *heads;                    /* one per ring */
};

struct candidate {
    uint64_t clock;
    uint32_t ring;                      /* index in reader->rings */
    uint64_t position;
};

struct cached_format {
    char *text;
    uint64_t kinds;
    unsigned wanted;
};

struct coplog_reader {
    struct log_file file;
    char error[COPLOG_ERROR_MAX];
    struct clock_map clock;
    unsigned ring_count;
    struct reader_ring *rings;
    bool selected[COPLOG_MAX_SUBSYS];
    bool selecting;
    uint64_t since, watermark, stall_ns;
    struct mark marks[MARKS];
    unsigned mark_count, mark_newest;
    struct candidate *candidates;       /* the batch, sorted */
    size_t candidate_count, candidate_capacity, candidate_next;
    char texts[COPLOG_MAX_ARGS][TEXT_BYTES];   /* the last event's strings */
    struct cached_format *formats;      /* format_slots + 1 */
    struct coplog_read_counts counts;
};

/* ------------------------------------------------------------- opening */

static int reader_fail(struct coplog_reader *reader, const char *what)
{
    log_error(reader->error, reader->file.path, "%s", what);
    return -1;
}

static void ring_setup(struct coplog_reader *reader, struct reader_ring *ring,
                       unsigned subsys, unsigned index)
{
    const struct log_file *file = &reader->file;
    const struct layout_subsys *desc = log_file_subsys(file, subsys);

    ring->subsys = subsys;
    ring->index = index;
    ring->desc = desc;
    ring->counters = log_file_ring(file, desc, index);
    ring->records = log_file_records(file, desc, index);
    ring->strings = (const _Atomic uint64_t *)log_file_strings(file, desc,
                                                               index);
    ring->mask = desc->capacity - 1;
    ring->record_bytes = desc->record_bytes;
    ring->max_args = RECORD_ARGS_MAX(desc->record_bytes);
    ring->oneshot = desc->policy == COPLOG_ONESHOT;
}

static int reader_build(struct coplog_reader *reader)
{
    const struct layout_header *header = reader->file.header;
    unsigned count = 0;

    for (unsigned s = 0; s < header->subsys_count; s++)
        count += log_file_subsys(&reader->file, s)->rings;
    reader->rings = calloc(count, sizeof *reader->rings);
    reader->formats = calloc((size_t)header->format_slots + 1,
                             sizeof *reader->formats);
    for (unsigned m = 0; m < MARKS; m++)
        reader->marks[m].heads = calloc(count, sizeof(uint64_t));
    if (reader->rings == NULL || reader->formats == NULL ||
        reader->marks[MARKS - 1].heads == NULL)
        return -1;
    for (unsigned s = 0; s < header->subsys_count; s++)
        for (unsigned r = 0; r < log_file_subsys(&reader->file, s)->rings; r++)
            ring_setup(reader, &reader->rings[reader->ring_count++], s, r);
    return 0;
}

void coplog_reader_close(struct coplog_reader *reader)
{
    if (reader == NULL)
        return;
    for (unsigned i = 0; i < reader->ring_count; i++)
        free(reader->rings[i].settled);
    for (unsigned m = 0; m < MARKS; m++)
        free(reader->marks[m].heads);
    if (reader->formats != NULL)
        for (uint32_t i = 0; i <= reader->file.header->format_slots; i++)
            free(reader->formats[i].text);
    free(reader->formats);
    free(reader->rings);
    free(reader->candidates);
    log_file_unmap(&reader->file);
    free(reader);
}

struct coplog_reader *coplog_reader_open(const char *path,
                                         char error[COPLOG_ERROR_MAX])
{
    struct coplog_reader *reader = calloc(1, sizeof *reader);

    if (reader == NULL) {
        log_error(error, path, "out of memory");
        return NULL;
    }
    if (log_file_map(&reader->file, path, LOG_FILE_READ, error) < 0) {
        free(reader);
        return NULL;
    }
    if (reader_build(reader) < 0) {
        log_error(error, path, "out of memory");
        coplog_reader_close(reader);
        return NULL;
    }
    reader->stall_ns = DEFAULT_STALL_NS;
    clock_map_load(&reader->clock, reader->file.header);
    return reader;
}

const char *coplog_reader_error(const struct coplog_reader *reader)
{
    return reader->error;
}

/* Forgets all progress: the next refill starts from the oldest records. */
static void reader_restart(struct coplog_reader *reader)
{
    for (unsigned i = 0; i < reader->ring_count; i++) {
        struct reader_ring *ring = &reader->rings[i];

        ring->next = 0;
        if (ring->settled != NULL)
            memset(ring->settled, 0, (ring->mask + 1 + 7) / 8);
    }
    reader->mark_count = 0;
    reader->candidate_count = reader->candidate_next = 0;
    reader->watermark = reader->since;
    memset(&reader->counts, 0, sizeof reader->counts);
}

int coplog_reader_select(struct coplog_reader *reader, const char *name)
{
    int index = log_file_find_subsys(&reader->file, name);

    if (index < 0) {
        log_error(reader->error, reader->file.path, "no subsystem '%s'", name);
        return -1;
    }
    reader->selected[index] = true;
    reader->selecting = true;
    reader_restart(reader);
    return 0;
}

void coplog_reader_seek(struct coplog_reader *reader, uint64_t order)
{
    reader->since = order;
    reader_restart(reader);
}

void coplog_reader_set_stall(struct coplog_reader *reader, uint64_t ns)
{
    reader->stall_ns = ns;
}

uint64_t coplog_reader_position(const struct coplog_reader *reader)
{
    return reader->watermark;
}

void coplog_reader_counts(const struct coplog_reader *reader,
                          struct coplog_read_counts *counts)
{
    *counts = reader->counts;
}

static bool ring_wanted(const struct coplog_reader *reader,
                        const struct reader_ring *ring)
{
    return !reader->selecting || reader->selected[ring->subsys];
}

/* ------------------------------------------------------------- slots */

enum slot_state { SLOT_COMMITTED, SLOT_PENDING, SLOT_OVERWRITTEN };

static const _Atomic uint64_t *slot_words(const struct reader_ring *ring,
                                          uint64_t position)
{
    return (const _Atomic uint64_t *)(ring->records +
                                      (position & ring->mask) *
                                      ring->record_bytes);
}

/* Copies words 1 .. count-1 of the record at position if it is committed
 * there, and stays so during the copy. */
static enum slot_state slot_read(const struct reader_ring *ring,
                                 uint64_t position, uint64_t *words,
                                 unsigned count)
{
    const _Atomic uint64_t *record = slot_words(ring, position);
    uint64_t expected = record_commit_word(position, 0);
    uint64_t commit = atomic_load_explicit(&record[RECORD_COMMIT],
                                           memory_order_acquire);

    if (commit != expected)
        return record_commit_stamp(commit) > position + 1 ? SLOT_OVERWRITTEN
                                                          : SLOT_PENDING;
    for (unsigned i = 1; i < count; i++)
        words[i] = atomic_load_explicit(&record[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&record[RECORD_COMMIT], memory_order_relaxed) !=
        expected)
        return SLOT_OVERWRITTEN;
    words[RECORD_COMMIT] = expected;
    return SLOT_COMMITTED;
}

static bool is_settled(const struct reader_ring *ring, uint64_t position)
{
    uint64_t bit = position & ring->mask;

    return ring->settled[bit / 8] & (1u << (bit % 8));
}

static void settle(struct reader_ring *ring, uint64_t position)
{
    uint64_t bit = position & ring->mask;

    ring->settled[bit / 8] |= (uint8_t)(1u << (bit % 8));
}

static void unsettle(struct reader_ring *ring, uint64_t position)
{
    uint64_t bit = position & ring->mask;

    ring->settled[bit / 8] &= (uint8_t)~(1u << (bit % 8));
}

/* Counts positions below floor that were never settled as missed, and
 * moves next up to floor. */
static void ring_skip_to(struct coplog_reader *reader, struct reader_ring *ring,
                         uint64_t floor)
{
    uint64_t capacity = ring->mask + 1;

    if (floor <= ring->next)
        return;
    if (floor - ring->next >= capacity) {
        uint64_t settled = 0;

        for (uint64_t i = 0; i < (capacity + 7) / 8; i++)
            settled += (uint64_t)__builtin_popcount(ring->settled[i]);
        reader->counts.missed += floor - ring->next - settled;
        memset(ring->settled, 0, (capacity + 7) / 8);
    } else {
        for (uint64_t p = ring->next; p < floor; p++) {
            if (!is_settled(ring, p))
                reader->counts.missed++;
            unsettle(ring, p);
        }
    }
    ring->next = floor;
}

static void ring_advance(struct reader_ring *ring)
{
    while (ring->next < ring->head && is_settled(ring, ring->next)) {
        unsettle(ring, ring->next);
        ring->next++;
    }
}

/* ------------------------------------------------------------- marks */

static const struct mark *mark_at(const struct coplog_reader *reader,
                                  unsigned age)
{
    return &reader->marks[(reader->mark_newest + MARKS - age) % MARKS];
}

/* Records this refill's clock and heads, replacing the newest mark when it
 * is younger than the spacing. */
static void mark_push(struct coplog_reader *reader, uint64_t clock)
{
    uint64_t spacing = clock_ticks(&reader->clock,
                                   reader->stall_ns / MARK_SPACING);
    struct mark *mark;

    if (reader->mark_count == 0 ||
        clock - mark_at(reader, 0)->clock >= spacing) {
        reader->mark_newest = (reader->mark_newest + 1) % MARKS;
        if (reader->mark_count < MARKS)
            reader->mark_count++;
    }
    mark = &reader->marks[reader->mark_newest];
    mark->clock = clock;
    for (unsigned i = 0; i < reader->ring_count; i++)
        mark->heads[i] = reader->rings[i].head;
}

/* Whether position was already reserved at a mark older than the stall
 * time. */
static bool mark_stalled(const struct coplog_reader *reader, unsigned ring,
                         uint64_t position, uint64_t now)
{
    uint64_t stall = clock_ticks(&reader->clock, reader->stall_ns);

    for (unsigned age = 0; age < reader->mark_count; age++) {
        const struct mark *mark = mark_at(reader, age);

        if (mark->clock <= now && now - mark->clock >= stall)
            return position < mark->heads[ring];
    }
    return false;
}

/* The time of the newest mark at which position was not yet reserved; false
 * when every mark had it already. */
static bool mark_bound(const struct coplog_reader *reader, unsigned ring,
                       uint64_t position, uint64_t *bound)
{
    for (unsigned age = 0; age < reader->mark_count; age++) {
        const struct mark *mark = mark_at(reader, age);

        if (mark->heads[ring] <= position) {
            *bound = mark->clock;
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------- scanning */

static int candidate_add(struct coplog_reader *reader, uint64_t clock,
                         uint32_t ring, uint64_t position)
{
    if (reader->candidate_count == reader->candidate_capacity) {
        size_t capacity = reader->candidate_capacity
                              ? reader->candidate_capacity * 2 : 1024;
        struct candidate *grown = realloc(reader->candidates,
                                          capacity * sizeof *grown);

        if (grown == NULL)
            return -1;
        reader->candidates = grown;
        reader->candidate_capacity = capacity;
    }
    reader->candidates[reader->candidate_count++] =
        (struct candidate){ clock, ring, position };
    return 0;
}

/* A pending position: unfinished when stalled (or in a final read), else it
 * may bound the watermark. */
static void scan_pending(struct coplog_reader *reader, struct reader_ring *ring,
                         uint64_t position, uint64_t now, bool final)
{
    unsigned index = (unsigned)(ring - reader->rings);
    uint64_t bound;

    if (final || mark_stalled(reader, index, position, now)) {
        reader->counts.unfinished++;
        settle(ring, position);
        return;
    }
    if (ring->unbounded_pending || ring->bound != UINT64_MAX)
        return;     /* an older pending position bounds this ring already */
    if (mark_bound(reader, index, position, &bound))
        ring->bound = bound;
    else
        ring->unbounded_pending = true;
}

static void scan_committed(struct coplog_reader *reader,
                           struct reader_ring *ring, uint64_t position,
                           uint64_t clock, int *status)
{
    if (clock < reader->since) {
        reader->counts.filtered++;
        settle(ring, position);
    } else if (clock < reader->watermark) {
        reader->counts.late++;
        settle(ring, position);
    } else if (candidate_add(reader, clock, (uint32_t)(ring - reader->rings),
                             position) < 0) {
        *status = -1;
    }
}

/* Walks one ring from its oldest unsettled position to its head. */
static int scan_ring(struct coplog_reader *reader, struct reader_ring *ring,
                     uint64_t now, bool final)
{
    uint64_t capacity = ring->mask + 1;
    uint64_t top = ring->head, floor = 0;
    int status = 0;

    if (ring->oneshot && top > capacity)
        top = capacity;
    if (!ring->oneshot && top > capacity)
        floor = top - capacity;
    ring_skip_to(reader, ring, floor);
    ring->bound = UINT64_MAX;
    ring->unbounded_pending = false;
    for (uint64_t p = ring->next; p < top && status == 0; p++) {
        uint64_t words[RECORD_ARGS];

        if (is_settled(ring, p))
            continue;
        switch (slot_read(ring, p, words, RECORD_CLOCK + 1)) {
        case SLOT_COMMITTED:
            scan_committed(reader, ring, p, words[RECORD_CLOCK], &status);
            break;
        case SLOT_OVERWRITTEN:
            reader->counts.missed++;
            settle(ring, p);
            break;
        case SLOT_PENDING:
            scan_pending(reader, ring, p, now, final);
            break;
        }
    }
    return status;
}

static int ring_prepare(struct reader_ring *ring)
{
    if (ring->settled == NULL)
        ring->settled = calloc((ring->mask + 1 + 7) / 8, 1);
    if (ring->settled == NULL)
        return -1;
    ring->head = atomic_load_explicit(&ring->counters->head,
                                      memory_order_acquire);
    return 0;
}

/* The live watermark: see the top of the file. */
static uint64_t live_limit(const struct coplog_reader *reader, uint64_t now)
{
    uint64_t margin = clock_ticks(&reader->clock, SKEW_MARGIN_NS);
    uint64_t limit = now > margin ? now - margin : 0;

    for (unsigned i = 0; i < reader->ring_count; i++) {
        const struct reader_ring *ring = &reader->rings[i];

        if (!ring_wanted(reader, ring))
            continue;
        if (ring->unbounded_pending)
            return reader->watermark;
        if (ring->bound != UINT64_MAX) {
            uint64_t bound = ring->bound > margin ? ring->bound - margin : 0;
            if (bound < limit)
                limit = bound;
        }
    }
    return limit > reader->watermark ? limit : reader->watermark;
}

static int candidate_compare(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;

    if (x->clock != y->clock)
        return x->clock < y->clock ? -1 : 1;
    if (x->ring != y->ring)
        return x->ring < y->ring ? -1 : 1;
    return (x->position > y->position) - (x->position < y->position);
}

/* Keeps the candidates below limit, sorted; returns the watermark they
 * reach. */
static uint64_t candidates_select(struct coplog_reader *reader, uint64_t limit,
                                  bool final)
{
    size_t kept = 0;
    uint64_t reach;

    for (size_t i = 0; i < reader->candidate_count; i++)
        if (reader->candidates[i].clock < limit)
            reader->candidates[kept++] = reader->candidates[i];
    if (kept > 1)
        qsort(reader->candidates, kept, sizeof *reader->candidates,
              candidate_compare);
    reader->candidate_count = kept;
    reader->candidate_next = 0;
    reach = final ? (kept ? reader->candidates[kept - 1].clock + 1 : 0) : limit;
    return reach > reader->watermark ? reach : reader->watermark;
}

/* ------------------------------------------------------------- decoding */

static const struct cached_format *format_get(struct coplog_reader *reader,
                                              unsigned id)
{
    struct cached_format *cached;
    const char *text;

    if (id == 0 || id > reader->file.header->format_slots)
        return NULL;
    cached = &reader->formats[id];
    if (cached->text != NULL)
        return cached;
    text = format_table_lookup(&reader->file, id);
    if (text == NULL || (cached->text = strdup(text)) == NULL)
        return NULL;
    cached->kinds = message_kinds(cached->text, COPLOG_MAX_ARGS,
                                  &cached->wanted);
    return cached;
}

/* Puts a marker in place of a string argument's text. */
static const char *text_marker(char *text, const char *marker)
{
    snprintf(text, TEXT_BYTES, "%s", marker);
    return text;
}

/* The text of a string argument, copied into text out of the ring's string
 * area while it is known not to have been overwritten. */
static const char *string_resolve(const struct reader_ring *ring, uint64_t ref,
                                  char *text)
{
    const struct layout_ring *counters = ring->counters;
    uint64_t area = ring->desc->strings_bytes;
    uint64_t offset = string_ref_offset(ref), length = string_ref_length(ref);
    uint64_t chunk = string_chunk_bytes(length), head;

    if (ref == STRING_NULL)
        return text_marker(text, "(null)");
    if (ref == STRING_LOST)
        return text_marker(text, "<string lost>");
    head = atomic_load_explicit(&counters->strings_head, memory_order_acquire);
    if (area == 0 || length > LAYOUT_STRING_MAX || chunk > area ||
        offset % 8 != 0 || offset + chunk > head ||
        (ring->oneshot && offset + chunk > area))
        return text_marker(text, "<bad string>");
    if (!ring->oneshot && head > offset + area)
        return text_marker(text, "<string overwritten>");
    for (uint64_t done = 0; done < chunk; done += 8) {
        uint64_t word = atomic_load_explicit(
            &ring->strings[((offset + done) % area) / 8], memory_order_relaxed);
        memcpy(text + done, &word, 8);
    }
    atomic_thread_fence(memory_order_acquire);
    head = atomic_load_explicit(&counters->strings_head, memory_order_relaxed);
    if (!ring->oneshot && head > offset + area)
        return text_marker(text, "<string overwritten>");
    text[length] = '\0';
    return text;
}

static void event_decode(struct coplog_reader *reader,
                         const struct reader_ring *ring, uint64_t position,
                         const uint64_t *words, struct coplog_event *event)
{
    uint64_t identity = words[RECORD_IDENTITY];
    uint64_t origin = words[RECORD_ORIGIN];
    const struct cached_format *format;

    memset(event, 0, sizeof *event);
    event->order = words[RECORD_CLOCK];
    event->time_ns = clock_map_ns(&reader->clock, event->order);
    event->subsys = ring->subsys;
    event->subsys_name = ring->desc->name;
    event->ring = ring->index;
    event->seq = position;
    event->level = identity_level(identity);
    event->pid = identity_pid(identity);
    event->tid = identity_tid(identity);
    event->cpu = identity_cpu(identity);
    event->caller = origin_caller(origin);
    event->format_id = origin_format_id(origin);
    event->nargs = identity_nargs(identity);
    if (event->nargs > ring->max_args)
        event->nargs = ring->max_args;
    format = format_get(reader, event->format_id);
    event->format = format != NULL ? format->text : NULL;
    event->format_nargs = format != NULL ? format->wanted : 0;
    for (unsigned i = 0; i < event->nargs; i++) {
        event->args[i] = words[RECORD_ARGS + i];
        if (format != NULL && i < message_kinds_count(format->kinds) &&
            message_kind_at(format->kinds, i) == ARG_STRING)
            event->strings[i] = string_resolve(ring, event->args[i],
                                               reader->texts[i]);
    }
}

/* Returns the next record of the batch, copied now; false when the batch
 * is used up. */
static bool batch_next(struct coplog_reader *reader, struct coplog_event *event)
{
    while (reader->candidate_next < reader->candidate_count) {
        const struct candidate *c = &reader->candidates[reader->candidate_next++];
        struct reader_ring *ring = &reader->rings[c->ring];
        uint64_t words[RECORD_ARGS + COPLOG_MAX_ARGS];

        settle(ring, c->position);
        if (slot_read(ring, c->position, words,
                      RECORD_ARGS + ring->max_args) != SLOT_COMMITTED) {
            reader->counts.missed++;
            continue;
        }
        event_decode(reader, ring, c->position, words, event);
        reader->counts.delivered++;
        return true;
    }
    return false;
}

/* One refill: see the top of the file. */
static int refill(struct coplog_reader *reader, bool final)
{
    uint64_t now = clock_read_fenced(reader->clock.kind);

    clock_map_load(&reader->clock, reader->file.header);
    for (unsigned i = 0; i < reader->ring_count; i++)
        if (ring_prepare(&reader->rings[i]) < 0)
            return reader_fail(reader, "out of memory");
    if (reader->mark_count == 0)
        mark_push(reader, now);     /* later reservations are bounded by it */
    reader->candidate_count = 0;
    for (unsigned i = 0; i < reader->ring_count; i++) {
        struct reader_ring *ring = &reader->rings[i];

        if (!ring_wanted(reader, ring))
            continue;
        ring_advance(ring);
        if (scan_ring(reader, ring, now, final) < 0)
            return reader_fail(reader, "out of memory");
    }
    reader->watermark = candidates_select(reader, final ? UINT64_MAX
                                                        : live_limit(reader, now),
                                          final);
    mark_push(reader, now);
    return 0;
}

int coplog_reader_next(struct coplog_reader *reader, struct coplog_event *event,
                       unsigned flags)
{
    if (batch_next(reader, event))
        return 1;
    if (refill(reader, flags & COPLOG_READ_ALL) < 0)
        return -1;
    return batch_next(reader, event) ? 1 : 0;
}

/* ------------------------------------------------------------- events */

size_t coplog_event_format(const struct coplog_event *event, char *text,
                           size_t size)
{
    char unknown[64 + COPLOG_MAX_ARGS * 20];
    size_t used;

    if (event->format != NULL)
        return message_format(event->format, event->args, event->nargs,
                              event->strings, text, size);
    used = (size_t)snprintf(unknown, sizeof unknown, "<unknown format %u>",
                            event->format_id);
    for (unsigned i = 0; i < event->nargs && used < sizeof unknown; i++)
        used += (size_t)snprintf(unknown + used, sizeof unknown - used,
                                 " 0x%llx", (unsigned long long)event->args[i]);
    return (size_t)snprintf(text, size, "%s", unknown);
}

int coplog_event_compare(const struct coplog_event *a,
                         const struct coplog_event *b)
{
    if (a->order != b->order)
        return a->order < b->order ? -1 : 1;
    if (a->subsys != b->subsys)
        return a->subsys < b->subsys ? -1 : 1;
    if (a->ring != b->ring)
        return a->ring < b->ring ? -1 : 1;
    return (a->seq > b->seq) - (a->seq < b->seq);
}

/* ------------------------------------------------------------- state */

unsigned coplog_reader_subsys_count(const struct coplog_reader *reader)
{
    return reader->file.header->subsys_count;
}

/* Adds one ring's window to stat. */
static void stat_ring(const struct reader_ring *ring,
                      struct coplog_subsys_stat *stat)
{
    uint64_t capacity = ring->mask + 1;
    uint64_t head = atomic_load_explicit(&ring->counters->head,
                                         memory_order_acquire);
    uint64_t top = head, floor = 0;

    if (ring->oneshot && head > capacity) {
        top = capacity;
        stat->refused += head - capacity;
    }
    if (!ring->oneshot && head > capacity)
        floor = head - capacity;
    stat->overwritten += floor;
    stat->reserved += head;
    stat->skipped += atomic_load(&ring->counters->skipped);
    stat->strings_used += atomic_load(&ring->counters->strings_head);
    stat->string_bytes += ring->desc->strings_bytes;
    for (uint64_t p = floor; p < top; p++) {
        uint64_t commit = atomic_load_explicit(&slot_words(ring, p)[0],
                                               memory_order_relaxed);
        uint64_t stamp = record_commit_stamp(commit);

        if (commit & RECORD_BUSY)
            stat->in_progress++;    /* for p, or a lap before or after it */
        else if (stamp > p + 1)
            stat->overwritten++;
        else if (stamp < p + 1)
            stat->unclaimed++;
        else
            stat->committed++;
    }
}

int coplog_reader_stat(const struct coplog_reader *reader, unsigned subsys,
                       struct coplog_subsys_stat *stat)
{
    const struct layout_subsys *desc;
    uint32_t control;

    if (subsys >= reader->file.header->subsys_count)
        return -1;
    desc = log_file_subsys(&reader->file, subsys);
    control = atomic_load(&reader->file.header->control[subsys]);
    memset(stat, 0, sizeof *stat);
    stat->name = desc->name;
    stat->policy = (enum coplog_policy)desc->policy;
    stat->rings = desc->rings;
    stat->capacity = desc->capacity;
    stat->args = RECORD_ARGS_MAX(desc->record_bytes);
    stat->level = control & COPLOG_CONTROL_LEVEL;
    stat->enabled = control & COPLOG_CONTROL_ENABLED;
    stat->echo = control & COPLOG_CONTROL_ECHO;
    for (unsigned i = 0; i < reader->ring_count; i++)
        if (reader->rings[i].subsys == subsys)
            stat_ring(&reader->rings[i], stat);
    return 0;
}

void coplog_reader_info(struct coplog_reader *reader,
                        struct coplog_file_info *info)
{
    const struct layout_header *header = reader->file.header;
    uint64_t used = atomic_load(&header->format_heap_used);

    clock_map_load(&reader->clock, header);
    memset(info, 0, sizeof *info);
    info->clock = reader->clock.kind;
    info->clock_hz = reader->clock.hz;
    info->calibrations = reader->clock.count;
    info->cpu_rings = header->cpu_rings;
    info->format_slots = header->format_slots;
    info->formats = format_table_count(&reader->file);
    info->format_bytes = header->format_heap_bytes;
    info->format_bytes_used = used < header->format_heap_bytes
                                  ? used : header->format_heap_bytes;
    info->formats_refused = atomic_load(&header->format_refused);
    info->file_bytes = header->file_bytes;
    info->creator_pid = header->creator_pid;
    info->created_realtime_ns = header->created_realtime_ns;
}

uint64_t coplog_reader_order_ns(struct coplog_reader *reader, uint64_t order)
{
    clock_map_load(&reader->clock, reader->file.header);
    return clock_map_ns(&reader->clock, order);
}

uint64_t coplog_reader_ns_order(struct coplog_reader *reader, uint64_t ns)
{
    clock_map_load(&reader->clock, reader->file.header);
    return clock_map_clock(&reader->clock, ns);
}
