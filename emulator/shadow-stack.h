/*
 * shadow-stack.h — the call stack the trace unit keeps for --call-graph.
 *
 * QEMU 7.2's plugin API reads no guest registers, so the trace unit
 * cannot walk frame pointers.  It keeps a shadow stack instead, from the
 * call and return instructions it translates (RISC-V's return-address
 * stack hints: jal/jalr writing ra or t0 is a call, jalr x0 through ra or
 * t0 a return), and hands the innermost frames to the register file with
 * every capture (trace-regs.h, "Call stacks").  docs/trace-unit.md, "Call
 * stacks", is the specification; shadow-stack.c says how each case
 * (tail calls, the overlay manager, longjmp-like returns) is handled.
 *
 * A stack operation is noted when its instruction is about to execute and
 * settled when the next block starts (its address is the jump's target),
 * so a capture of the call or return instruction itself, or of anything
 * before it, sees the stack as it was before.
 */
#ifndef COPROF_SHADOW_STACK_H
#define COPROF_SHADOW_STACK_H

#include <stddef.h>
#include <stdint.h>

/* What an instruction does to the stack. */
enum shadow_op {
    SHADOW_NONE = 0,
    SHADOW_CALL = 1,            /* push the return address */
    SHADOW_RETURN = 2,          /* pop to the target */
    SHADOW_RETURN_CALL = 3,     /* pop, then push (a coroutine swap) */
};

/* One _ovly_table entry as the stack needs it. */
struct shadow_overlay {
    uint32_t vma;               /* guest address of its region */
    uint32_t size;              /* bytes */
    uint32_t region;            /* 0-based guard word */
};

#define SHADOW_CALL_SITES 4096     /* return addresses remembered */

/* The depth below a call's frame, remembered by its return address. */
struct shadow_call_site {
    uint32_t return_address;
    uint32_t depth;
};

struct shadow_stack {
    uint64_t *frames;           /* return address | overlay << 32, outermost
                                   first */
    uint32_t depth;
    uint32_t allocated;
    uint32_t pending_op;        /* enum shadow_op noted, not yet settled */
    uint64_t pending_return;    /* its return address */

    /* Overlay identity: the guard words (NULL: none watched) and the
     * overlay table, found in the local store at the first call. */
    const uint32_t *guards;
    uint32_t guard_count;
    const uint8_t *ls;          /* local-store byte 0, mapped (or NULL) */
    uint64_t ls_base;
    uint64_t ls_size;
    int table_read;
    struct shadow_overlay *overlays;
    uint32_t n_overlays;

    struct shadow_call_site sites[SHADOW_CALL_SITES];  /* by address */

    uint64_t unmatched;         /* returns that did not pop just the top */
    uint64_t underflows;        /* returns with the stack empty */
};

/* Decodes one instruction (`size` bytes, 2 or 4, little-endian). */
enum shadow_op shadow_classify(const uint8_t *bytes, size_t size);

/* A stack with no frames.  `ls` is the local store mapped from ls_base
 * on (guards and the overlay table are read there; NULL: no overlay
 * identity), `guards` the watched guard words (guard_count of them, at
 * the end of _ovly_table). */
void shadow_init(struct shadow_stack *s, const uint8_t *ls, uint64_t ls_base,
                 uint64_t ls_size, const uint32_t *guards,
                 uint32_t guard_count);

void shadow_free(struct shadow_stack *s);

/* The instruction about to execute does `op`; a call returns to
 * `return_address` (the instruction after it). */
static inline void shadow_note(struct shadow_stack *s, enum shadow_op op,
                               uint64_t return_address)
{
    s->pending_op = op;
    s->pending_return = return_address;
}

/* A block starts at `vaddr`: settles what the previous one's last
 * instruction noted. */
void shadow_settle_slow(struct shadow_stack *s, uint64_t vaddr);

static inline void shadow_settle(struct shadow_stack *s, uint64_t vaddr)
{
    if (s->pending_op)
        shadow_settle_slow(s, vaddr);
}

/* The stack as a register-file record's frames: the innermost
 * min(depth, max) frames into out[], innermost first, each
 * TRACE_STACK_FRAME(PC field, overlay).  Returns the depth. */
uint32_t shadow_frames(const struct shadow_stack *s, uint32_t *out,
                       uint32_t max);

/*
 * A stack as bytes, to follow its context from one emulator to another
 * (the slot model: the plugin saves it where the context is let go and
 * restores it where a slot takes the context again).  The form is this
 * host's: a header (magic SHADOW_SAVE_MAGIC, then the whole length in
 * bytes, the two words a controller that only carries it reads), then
 * the remembered call sites and the frames.  Everything that decides a
 * later frame travels (frames, the call noted and not yet settled, the
 * call sites, the counters); the overlay table is read again from the
 * local store.  A buffer of four zero bytes or more is an empty stack.
 */
#define SHADOW_SAVE_MAGIC   0x4b534853u     /* "SHSK" */

/* Bytes shadow_save needs for the stack now. */
size_t shadow_save_size(const struct shadow_stack *s);

/* Writes the stack into buf (len bytes); returns the bytes written, or 0
 * when it does not fit. */
size_t shadow_save(const struct shadow_stack *s, void *buf, size_t len);

/* Replaces the stack's frames, pending operation, call sites and counters
 * with those saved in buf (len bytes, at least 4); keeps its local store
 * and guard words.  Returns -1, the stack left empty, when buf holds no
 * sound saved stack. */
int shadow_restore(struct shadow_stack *s, const void *buf, size_t len);

#endif /* COPROF_SHADOW_STACK_H */
