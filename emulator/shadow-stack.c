/*
 * shadow-stack.c — the trace unit's shadow call stack (shadow-stack.h).
 *
 * Calls and returns are recognised as a RISC-V return-address stack
 * predictor does (the ISA manual's hint table): a link register is ra (x1)
 * or t0 (x5).  jal with a link rd is a call; jalr with a link rd and a
 * non-link rs1 is a call, with a non-link rd and a link rs1 a return, with
 * both links and rd != rs1 a return then a call; with rd = rs1 a call.
 * Everything else (jal x0 and jalr x0 through another register: loops,
 * switch tables, tail calls) leaves the stack alone.
 *
 * Frames are return addresses.  A tail call (jal x0 / jr t1 into another
 * function) pushes nothing, so the tail-called function's caller is the
 * function that called the one that made the tail call: where it returns
 * to, as perf shows it too.
 *
 * A return pops the top frame and is checked when the next block starts
 * (its address is the jump's target):
 *
 *  - the target is the popped return address: the common case;
 *  - the target is the return address of a frame further down: a
 *    longjmp-like return to an outer caller; every frame above it goes;
 *  - the target is a return address that a call pushed before and that
 *    was popped since: a longjmp back to a setjmp, whose call pushed
 *    that address; the stack goes back to the depth it had below that
 *    call (the last call that pushed the address, remembered in a small
 *    direct-mapped table by address);
 *  - the target is none of these: the return went to a landing pad that
 *    returns later, as a callee of overlay code does when it returns
 *    through the overlay manager's __cop_overlay_return, which puts the
 *    caller's overlay back and then returns to the real caller.  The
 *    popped frame stays, so the manager's final return matches it and
 *    frames through the manager show the real caller.  A return that
 *    is none of these (a hand-made jump into a function still active)
 *    leaves frames above it until that function returns, when the second
 *    rule takes them off: the stack resynchronises at the first return
 *    that matches.  Both count in `unmatched`.
 *
 * Overlay identity.  A frame's return address in an overlay region means
 * the overlay loaded there when the call was made (the manager reloads it
 * before returning there), which may no longer be the one loaded at a
 * later capture.  So a push records the index of the overlay that holds
 * the return address then: the one whose _ovly_table entry covers it and
 * whose region's guard word holds its index.  The table is read from the
 * local store once, at the first call: cop.ld places _ovly_table right
 * before the guard words (_ovly_buf_table), one entry {vma, size,
 * file_off, buf} of 16 bytes per overlay, so it is found by walking back
 * from the guard words while the entries are sound (vma and size inside
 * the local store, buf a watched region).
 */
#include "emulator/shadow-stack.h"
#include "abi/trace-regs.h"

#include <endian.h>
#include <stdlib.h>
#include <string.h>

#define INITIAL_FRAMES  256
#define MAX_FRAMES      (1u << 20)  /* deeper: the outermost are not kept */
#define TABLE_ENTRY     16          /* bytes of an _ovly_table entry */

static int is_link(uint32_t reg)
{
    return reg == 1 || reg == 5;
}

static enum shadow_op classify_jalr(uint32_t rd, uint32_t rs1)
{
    if (is_link(rd) && is_link(rs1))
        return rd == rs1 ? SHADOW_CALL : SHADOW_RETURN_CALL;
    if (is_link(rd))
        return SHADOW_CALL;
    return is_link(rs1) ? SHADOW_RETURN : SHADOW_NONE;
}

/* The compressed forms (RV32C): c.jal, c.jr, c.jalr. */
static enum shadow_op classify_compressed(uint16_t insn)
{
    uint32_t op = insn & 3u, funct3 = insn >> 13;
    uint32_t rs1 = (insn >> 7) & 31u, rs2 = (insn >> 2) & 31u;

    if (op == 1 && funct3 == 1)
        return SHADOW_CALL;                     /* c.jal: rd = ra */
    if (op == 2 && funct3 == 4 && rs1 && !rs2)
        return classify_jalr((insn >> 12) & 1u ? 1 : 0, rs1);
    return SHADOW_NONE;
}

enum shadow_op shadow_classify(const uint8_t *bytes, size_t size)
{
    uint32_t insn;

    if (size == 2)
        return classify_compressed((uint16_t)(bytes[0] | bytes[1] << 8));
    if (size != 4)
        return SHADOW_NONE;
    insn = (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8
           | (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
    switch (insn & 0x7Fu) {
    case 0x6F:                                  /* jal */
        return is_link((insn >> 7) & 31u) ? SHADOW_CALL : SHADOW_NONE;
    case 0x67:                                  /* jalr */
        if ((insn >> 12) & 7u)
            return SHADOW_NONE;
        return classify_jalr((insn >> 7) & 31u, (insn >> 15) & 31u);
    default:
        return SHADOW_NONE;
    }
}

void shadow_init(struct shadow_stack *s, const uint8_t *ls, uint64_t ls_base,
                 uint64_t ls_size, const uint32_t *guards,
                 uint32_t guard_count)
{
    memset(s, 0, sizeof(*s));
    s->ls = ls;
    s->ls_base = ls_base;
    s->ls_size = ls_size;
    s->guards = guards;
    s->guard_count = guards ? guard_count : 0;
}

void shadow_free(struct shadow_stack *s)
{
    free(s->frames);
    free(s->overlays);
    s->frames = NULL;
    s->overlays = NULL;
}

static uint32_t ls_word(const struct shadow_stack *s, uint64_t offset)
{
    uint32_t word;

    memcpy(&word, s->ls + offset, sizeof(word));
    return le32toh(word);
}

/* An _ovly_table entry at LS offset `at` that could be one. */
static int sound_entry(const struct shadow_stack *s, uint64_t at,
                       struct shadow_overlay *out)
{
    uint32_t vma = ls_word(s, at), size = ls_word(s, at + 4);
    uint32_t buf = ls_word(s, at + 12);

    if (vma < s->ls_base || !size || buf < 1 || buf > s->guard_count
        || (uint64_t)vma - s->ls_base + size > s->ls_size)
        return 0;
    *out = (struct shadow_overlay){ vma, size, buf - 1 };
    return 1;
}

/* Finds _ovly_table by walking back from the guard words. */
static void read_table(struct shadow_stack *s)
{
    uint64_t end = (uint64_t)((const uint8_t *)s->guards - s->ls);
    uint32_t n = 0;
    struct shadow_overlay entry;

    s->table_read = 1;
    while (end >= (uint64_t)(n + 1) * TABLE_ENTRY && n < UINT16_MAX
           && sound_entry(s, end - (uint64_t)(n + 1) * TABLE_ENTRY, &entry))
        n++;
    if (!n || !(s->overlays = calloc(n, sizeof(*s->overlays))))
        return;
    for (uint32_t i = 0; i < n; i++)
        sound_entry(s, end - (uint64_t)(n - i) * TABLE_ENTRY,
                    &s->overlays[i]);
    s->n_overlays = n;
}

/* The overlay (1-based) loaded now that holds `vaddr`; 0 for none. */
static uint32_t overlay_of(struct shadow_stack *s, uint64_t vaddr)
{
    if (!s->guard_count)
        return 0;
    if (!s->table_read)
        read_table(s);
    for (uint32_t i = 0; i < s->n_overlays; i++) {
        const struct shadow_overlay *o = &s->overlays[i];

        if (vaddr >= o->vma && vaddr - o->vma < o->size
            && le32toh(__atomic_load_n(&s->guards[o->region],
                                       __ATOMIC_RELAXED)) == i + 1)
            return i + 1;
    }
    return 0;
}

static struct shadow_call_site *call_site(struct shadow_stack *s,
                                          uint64_t return_address)
{
    return &s->sites[(return_address >> 2) % SHADOW_CALL_SITES];
}

static void push(struct shadow_stack *s, uint64_t return_address)
{
    struct shadow_call_site *site = call_site(s, return_address);
    uint64_t frame = (uint32_t)return_address
                     | (uint64_t)overlay_of(s, return_address) << 32;

    site->return_address = (uint32_t)return_address;
    site->depth = s->depth;

    if (s->depth == s->allocated) {
        uint32_t grown = s->allocated ? s->allocated * 2 : INITIAL_FRAMES;
        uint64_t *frames;

        if (s->allocated >= MAX_FRAMES) {       /* drop the outermost */
            memmove(s->frames, s->frames + 1,
                    (s->depth - 1) * sizeof(*s->frames));
            s->frames[s->depth - 1] = frame;
            return;
        }
        frames = realloc(s->frames, grown * sizeof(*frames));
        if (!frames)
            abort();
        s->frames = frames;
        s->allocated = grown;
    }
    s->frames[s->depth++] = frame;
}

/* A return reached `target`: the rules at the top of this file. */
static void pop_to(struct shadow_stack *s, uint64_t target)
{
    const struct shadow_call_site *site = call_site(s, target);

    if (!s->depth) {
        s->underflows++;
        return;
    }
    for (uint32_t k = s->depth; k-- > 0;) {
        if ((uint32_t)s->frames[k] == (uint32_t)target) {
            if (k + 1 != s->depth)
                s->unmatched++;
            s->depth = k;
            return;
        }
    }
    s->unmatched++;
    if (site->return_address == (uint32_t)target && site->depth < s->depth)
        s->depth = site->depth;
}

void shadow_settle_slow(struct shadow_stack *s, uint64_t vaddr)
{
    enum shadow_op op = s->pending_op;

    s->pending_op = SHADOW_NONE;
    switch (op) {
    case SHADOW_CALL:
        push(s, s->pending_return);
        break;
    case SHADOW_RETURN:
        pop_to(s, vaddr);
        break;
    case SHADOW_RETURN_CALL:
        if (s->depth)
            s->depth--;
        push(s, s->pending_return);
        break;
    default:
        break;
    }
}

uint32_t shadow_frames(const struct shadow_stack *s, uint32_t *out,
                       uint32_t max)
{
    uint32_t n = s->depth < max ? s->depth : max;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t frame = s->frames[s->depth - 1 - i];
        uint64_t offset = (uint32_t)frame - s->ls_base;

        out[i] = TRACE_STACK_FRAME((offset >> 2) & 0xFFFFu,
                                   (frame >> 32) & 0xFFFFu);
    }
    return s->depth;
}

/* ---- Saved stacks ------------------------------------------------------- */

/* The header of a saved stack; the sites, then the frames, follow. */
struct shadow_saved {
    uint32_t magic;             /* SHADOW_SAVE_MAGIC */
    uint32_t length;            /* bytes, header included */
    uint32_t depth;
    uint32_t pending_op;
    uint64_t pending_return;
    uint32_t n_sites;           /* remembered call sites that follow */
    uint32_t reserved;
    uint64_t unmatched;
    uint64_t underflows;
};

static uint32_t sites_in_use(const struct shadow_stack *s)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < SHADOW_CALL_SITES; i++)
        n += s->sites[i].return_address != 0;
    return n;
}

size_t shadow_save_size(const struct shadow_stack *s)
{
    return sizeof(struct shadow_saved)
           + sites_in_use(s) * sizeof(struct shadow_call_site)
           + (size_t)s->depth * sizeof(*s->frames);
}

size_t shadow_save(const struct shadow_stack *s, void *buf, size_t len)
{
    size_t size = shadow_save_size(s);
    struct shadow_saved h = {
        .magic = SHADOW_SAVE_MAGIC, .length = (uint32_t)size,
        .depth = s->depth, .pending_op = s->pending_op,
        .pending_return = s->pending_return, .n_sites = sites_in_use(s),
        .unmatched = s->unmatched, .underflows = s->underflows,
    };
    uint8_t *at = (uint8_t *)buf + sizeof(h);

    if (size > len || size > UINT32_MAX)
        return 0;
    memcpy(buf, &h, sizeof(h));
    for (uint32_t i = 0; i < SHADOW_CALL_SITES; i++)
        if (s->sites[i].return_address) {
            memcpy(at, &s->sites[i], sizeof(s->sites[i]));
            at += sizeof(s->sites[i]);
        }
    if (s->depth)
        memcpy(at, s->frames, (size_t)s->depth * sizeof(*s->frames));
    return size;
}

/* Makes room for `depth` frames. */
static int reserve_frames(struct shadow_stack *s, uint32_t depth)
{
    uint32_t want = INITIAL_FRAMES;
    uint64_t *frames;

    while (want < depth)
        want *= 2;
    if (want <= s->allocated)
        return 0;
    frames = realloc(s->frames, (size_t)want * sizeof(*frames));
    if (!frames)
        return -1;
    s->frames = frames;
    s->allocated = want;
    return 0;
}

/* Empties the stack, keeping its local store, guard words and frames'
 * memory; the overlay table is read again at the next call. */
static void clear(struct shadow_stack *s)
{
    free(s->overlays);
    s->overlays = NULL;
    s->n_overlays = 0;
    s->table_read = 0;
    s->depth = 0;
    s->pending_op = SHADOW_NONE;
    s->pending_return = 0;
    s->unmatched = 0;
    s->underflows = 0;
    memset(s->sites, 0, sizeof(s->sites));
}

int shadow_restore(struct shadow_stack *s, const void *buf, size_t len)
{
    struct shadow_saved h;
    const uint8_t *at = (const uint8_t *)buf + sizeof(h);

    clear(s);
    if (len >= sizeof(uint32_t) && !*(const uint32_t *)buf)
        return 0;                           /* an empty stack */
    if (len < sizeof(h))
        return -1;
    memcpy(&h, buf, sizeof(h));
    if (h.magic != SHADOW_SAVE_MAGIC || h.length > len
        || h.n_sites > SHADOW_CALL_SITES || h.depth > MAX_FRAMES
        || h.pending_op > SHADOW_RETURN_CALL
        || h.length != sizeof(h) + h.n_sites * sizeof(struct shadow_call_site)
                       + (size_t)h.depth * sizeof(*s->frames)
        || reserve_frames(s, h.depth) < 0)
        return -1;
    for (uint32_t i = 0; i < h.n_sites; i++, at += sizeof(*s->sites)) {
        struct shadow_call_site site;

        memcpy(&site, at, sizeof(site));
        *call_site(s, site.return_address) = site;
    }
    if (h.depth)
        memcpy(s->frames, at, (size_t)h.depth * sizeof(*s->frames));
    s->depth = h.depth;
    s->pending_op = h.pending_op;
    s->pending_return = h.pending_return;
    s->unmatched = h.unmatched;
    s->underflows = h.underflows;
    return 0;
}
