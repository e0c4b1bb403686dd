/*
 * timing.h - the coprocessor's timing model: how many cycles each RV32IM
 * instruction costs, from a machine description (emulator/timing/spu.model
 * is the default; docs/trace-unit.md, "Timing model").
 *
 * The model is static where it can be: a translated block's instructions
 * are decoded once, scheduled on an in-order single-issue core with a
 * register scoreboard (timing_schedule: each instruction's dependency
 * stall and issue cycles), and its exit classified (timing_exit: the
 * cycles a wrong static prediction of its last instruction costs, for
 * either outcome).  Only the branch outcome is dynamic: the plugin adds
 * the exit's cost for the outcome when the next block starts.  The
 * scoreboard starts empty at every block: a result in flight when a block
 * ends is taken as ready in the next (the documented simplification); it
 * is emptied after every system instruction too, where QEMU may end a
 * block, so that a cost never depends on where the translator cut.
 *
 * Freestanding apart from the parser's string handling; no QEMU.
 */
#ifndef COPROF_TIMING_H
#define COPROF_TIMING_H

#include <stddef.h>
#include <stdint.h>

enum timing_class {
    TIMING_INTEGER,             /* OP, OP-IMM, LUI, AUIPC */
    TIMING_MULTIPLY,            /* mul, mulh, mulhsu, mulhu */
    TIMING_DIVIDE,              /* div, divu, rem, remu */
    TIMING_LOAD,                /* lb, lh, lw, lbu, lhu */
    TIMING_STORE,               /* sb, sh, sw */
    TIMING_BRANCH,              /* conditional branches, jal, jalr */
    TIMING_SYSTEM,              /* csr*, ecall, ebreak, fence, others */
    TIMING_CLASSES
};

enum timing_predict {
    TIMING_BACKWARD_TAKEN,      /* backward taken, forward not taken */
    TIMING_NEVER_TAKEN,
    TIMING_ALWAYS_TAKEN,
};

struct timing_model {
    uint32_t issue[TIMING_CLASSES];
    uint32_t latency[TIMING_CLASSES];
    enum timing_predict predict;
    uint32_t branch_miss;       /* a wrongly predicted conditional branch */
    uint32_t branch_indirect;   /* every jalr */
    uint32_t dma_latency;       /* a DMA transfer's fixed cycles */
    uint32_t dma_bytes_per_cycle;   /* the bus's bandwidth, at least 1 */
    uint32_t mailbox_host_latency;  /* an outbound message to the host's
                                       answer, and to its slot freed */
    uint32_t memory_latency;    /* a direct load or store to the data
                                   window (main memory) */
};

/* One decoded instruction: its class and registers (0: none, x0 too). */
struct timing_insn {
    enum timing_class cls;
    uint8_t rd, rs1, rs2;
};

/* How a block ends, for the dynamic part of its cost. */
struct timing_exit {
    uint64_t fallthrough;       /* the address after its last instruction */
    uint32_t taken;             /* cycles when the next block is not the
                                   fall-through */
    uint32_t not_taken;         /* cycles when it is */
};

/* The machine description in `text` (named `name` in errors).  Returns 0,
 * or -1 with a one-line error naming the line and the reason. */
int timing_model_parse(struct timing_model *m, const char *text,
                       const char *name, char *err, size_t errlen);

/* The machine description in file `path`. */
int timing_model_load(struct timing_model *m, const char *path, char *err,
                      size_t errlen);

/* The built-in description (emulator/timing/spu.model, compiled in). */
void timing_model_default(struct timing_model *m);
extern const char timing_default_model[];

/* Decodes one 32-bit RV32IM instruction word. */
void timing_decode(uint32_t word, struct timing_insn *out);

/*
 * How far from the local store an access may be and still be known not to
 * reach a data window: the plugin refuses a window closer than this
 * (the ABI's are 7.75 MiB above it, or at 0x40000000 on a slot).
 */
#define TIMING_LOCAL_MARGIN (1 << 20)

/*
 * For each of the n instruction words of a block (at addresses pc), whether
 * it is a load or store that may reach main memory (watch[i] = 1): one
 * whose address may lie more than TIMING_LOCAL_MARGIN from the local store
 * [ls_base, ls_base + ls_size), as far as the instructions before it in
 * the block tell (base sp, gp or tp, or a register set from them or from a
 * constant by addi, lui or auipc; docs/trace-unit.md, "Main-memory
 * access").  0 for any other instruction.
 */
void timing_watch_memory(const uint32_t *words, const uint64_t *pc,
                         uint32_t n, uint64_t ls_base, uint64_t ls_size,
                         uint8_t *watch);

/*
 * Schedules the block's n instruction words on an empty scoreboard,
 * emptied again after each system instruction: stall[i] is the cycles
 * instruction i waits for its operands, issue[i] the cycles it occupies
 * the issue slot.  Its cost is stall[i] + issue[i].
 */
void timing_schedule(const struct timing_model *m, const uint32_t *words,
                     uint32_t n, uint32_t *stall, uint32_t *issue);

/* The exit of a block whose last instruction is `word` at `vaddr`. */
void timing_exit(const struct timing_model *m, uint32_t word, uint64_t vaddr,
                 struct timing_exit *out);

#endif /* COPROF_TIMING_H */
