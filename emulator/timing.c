/*
 * timing.c - the coprocessor's timing model (timing.h): the machine
 * description's parser, the RV32IM decoder, the block scheduler and the
 * classification of a block's exit.
 *
 * A description is lines of `KEY VALUE` (emulator/timing/spu.model):
 * CLASS.issue and CLASS.latency for the seven classes, branch.predict,
 * branch.miss and branch.indirect, and the memory flow controller's
 * dma.latency and dma.bytes_per_cycle (emulator/mfc.h), the
 * mailboxes' mailbox.host_latency (emulator/mbox.h) and main memory's
 * memory.latency, each exactly once.  The scheduler is an
 * in-order single-issue core: instruction i issues at
 * max(previous issue + previous issue cycles, ready[rs1], ready[rs2]),
 * and its rd is ready latency cycles after it issues.
 */
#include "emulator/timing.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TIMING_MAX_CYCLES 1000u

static const char *const class_names[TIMING_CLASSES] = {
    "integer", "multiply", "divide", "load", "store", "branch", "system",
};

/* The keys after the classes' and branch.predict: plain cycle counts. */
static const struct {
    const char *name;
    size_t offset;              /* in struct timing_model */
    uint32_t least;             /* the smallest value that makes sense */
} number_keys[] = {
    { "branch.miss", offsetof(struct timing_model, branch_miss), 0 },
    { "branch.indirect", offsetof(struct timing_model, branch_indirect), 0 },
    { "dma.latency", offsetof(struct timing_model, dma_latency), 0 },
    { "dma.bytes_per_cycle", offsetof(struct timing_model,
                                      dma_bytes_per_cycle), 1 },
    { "mailbox.host_latency", offsetof(struct timing_model,
                                       mailbox_host_latency), 0 },
    { "memory.latency", offsetof(struct timing_model, memory_latency), 0 },
};

#define NUMBER_KEYS (sizeof(number_keys) / sizeof(number_keys[0]))

/* The keys of a description, in the order of struct timing_model's use. */
enum { KEYS = 2 * TIMING_CLASSES + 1 + NUMBER_KEYS };

static int parse_number(const char *text, uint32_t *out)
{
    char *end;
    unsigned long n;

    errno = 0;
    n = strtoul(text, &end, 10);
    if (!*text || *end || errno || n > TIMING_MAX_CYCLES || *text == '-')
        return -1;
    *out = (uint32_t)n;
    return 0;
}

static int parse_predict(const char *text, enum timing_predict *out)
{
    if (!strcmp(text, "backward-taken"))
        *out = TIMING_BACKWARD_TAKEN;
    else if (!strcmp(text, "never-taken"))
        *out = TIMING_NEVER_TAKEN;
    else if (!strcmp(text, "always-taken"))
        *out = TIMING_ALWAYS_TAKEN;
    else
        return -1;
    return 0;
}

/* The key's index (seen[]) and where its number goes; -1 if unknown. */
static int key_slot(struct timing_model *m, const char *key, uint32_t **num)
{
    for (int c = 0; c < TIMING_CLASSES; c++) {
        size_t len = strlen(class_names[c]);

        if (strncmp(key, class_names[c], len) || key[len] != '.')
            continue;
        if (!strcmp(key + len + 1, "issue")) {
            *num = &m->issue[c];
            return 2 * c;
        }
        if (!strcmp(key + len + 1, "latency")) {
            *num = &m->latency[c];
            return 2 * c + 1;
        }
    }
    *num = NULL;
    if (!strcmp(key, "branch.predict"))
        return 2 * TIMING_CLASSES;
    for (size_t k = 0; k < NUMBER_KEYS; k++)
        if (!strcmp(key, number_keys[k].name)) {
            *num = (uint32_t *)((char *)m + number_keys[k].offset);
            return 2 * TIMING_CLASSES + 1 + (int)k;
        }
    return -1;
}

static const char *key_name(int k, char *buf, size_t len)
{
    if (k == 2 * TIMING_CLASSES)
        return "branch.predict";
    if (k > 2 * TIMING_CLASSES)
        return number_keys[k - 2 * TIMING_CLASSES - 1].name;
    snprintf(buf, len, "%s.%s", class_names[k / 2],
             k % 2 ? "latency" : "issue");
    return buf;
}

/* One line (comments and blank lines already left out). */
static int parse_line(struct timing_model *m, char *line, int *seen,
                      char *err, size_t errlen)
{
    char *save = NULL, *key = strtok_r(line, " \t", &save);
    char *value = strtok_r(NULL, " \t", &save);
    uint32_t *num;
    int k = key_slot(m, key, &num);

    if (k < 0) {
        snprintf(err, errlen, "unknown key '%s'", key);
        return -1;
    }
    if (!value || strtok_r(NULL, " \t", &save)) {
        snprintf(err, errlen, "%s: expected one value", key);
        return -1;
    }
    if (seen[k]++) {
        snprintf(err, errlen, "%s given twice", key);
        return -1;
    }
    if (num && parse_number(value, num) < 0) {
        snprintf(err, errlen, "%s: '%s' is not a cycle count in 0..%u", key,
                 value, TIMING_MAX_CYCLES);
        return -1;
    }
    if (!num && parse_predict(value, &m->predict) < 0) {
        snprintf(err, errlen, "branch.predict: '%s' is not backward-taken, "
                 "never-taken or always-taken", value);
        return -1;
    }
    return 0;
}

int timing_model_parse(struct timing_model *m, const char *text,
                       const char *name, char *err, size_t errlen)
{
    int seen[KEYS] = {0}, line_no = 0;
    char msg[256], key[64];
    const char *p = text;

    memset(m, 0, sizeof(*m));
    while (*p) {
        size_t len = strcspn(p, "\n");
        char line[512], *hash;

        line_no++;
        if (len >= sizeof(line)) {
            snprintf(err, errlen, "%s:%d: line too long", name, line_no);
            return -1;
        }
        memcpy(line, p, len);
        line[len] = '\0';
        p += len + (p[len] == '\n');
        hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        if (strspn(line, " \t\r") == strlen(line))
            continue;
        line[strcspn(line, "\r")] = '\0';
        if (parse_line(m, line, seen, msg, sizeof(msg)) < 0) {
            snprintf(err, errlen, "%s:%d: %s", name, line_no, msg);
            return -1;
        }
    }
    for (int k = 0; k < KEYS; k++)
        if (!seen[k]) {
            snprintf(err, errlen, "%s: %s is missing", name,
                     key_name(k, key, sizeof(key)));
            return -1;
        }
    for (int c = 0; c < TIMING_CLASSES; c++)
        if (!m->issue[c]) {
            snprintf(err, errlen, "%s: %s.issue must be at least 1", name,
                     class_names[c]);
            return -1;
        }
    for (size_t k = 0; k < NUMBER_KEYS; k++)
        if (*(const uint32_t *)((const char *)m + number_keys[k].offset)
            < number_keys[k].least) {
            snprintf(err, errlen, "%s: %s must be at least %u", name,
                     number_keys[k].name, number_keys[k].least);
            return -1;
        }
    return 0;
}

int timing_model_load(struct timing_model *m, const char *path, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "r");
    char text[16384];
    size_t n;

    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    n = fread(text, 1, sizeof(text) - 1, f);
    if (ferror(f) || !feof(f)) {
        snprintf(err, errlen, "%s: %s", path, ferror(f) ? "cannot read"
                 : "larger than a machine description (16 KiB)");
        fclose(f);
        return -1;
    }
    fclose(f);
    text[n] = '\0';
    if (memchr(text, '\0', n)) {
        snprintf(err, errlen, "%s: not a text file", path);
        return -1;
    }
    return timing_model_parse(m, text, path, err, errlen);
}

void timing_model_default(struct timing_model *m)
{
    char err[256];

    if (timing_model_parse(m, timing_default_model, "spu.model", err,
                           sizeof(err)) < 0)
        abort();        /* the build checks the file: cannot happen */
}

/* ---- Decoding ----------------------------------------------------------- */

void timing_decode(uint32_t word, struct timing_insn *out)
{
    uint32_t opcode = word & 0x7f, funct3 = (word >> 12) & 7;
    uint8_t rd = (word >> 7) & 31, rs1 = (word >> 15) & 31;
    uint8_t rs2 = (word >> 20) & 31;

    out->rd = out->rs1 = out->rs2 = 0;
    switch (opcode) {
    case 0x33:                  /* OP: M extension when funct7 is 1 */
        out->cls = (word >> 25) != 1 ? TIMING_INTEGER
                   : funct3 < 4 ? TIMING_MULTIPLY : TIMING_DIVIDE;
        out->rd = rd, out->rs1 = rs1, out->rs2 = rs2;
        break;
    case 0x13:                  /* OP-IMM */
        out->cls = TIMING_INTEGER;
        out->rd = rd, out->rs1 = rs1;
        break;
    case 0x37: case 0x17:       /* LUI, AUIPC */
        out->cls = TIMING_INTEGER;
        out->rd = rd;
        break;
    case 0x03:
        out->cls = TIMING_LOAD;
        out->rd = rd, out->rs1 = rs1;
        break;
    case 0x23:
        out->cls = TIMING_STORE;
        out->rs1 = rs1, out->rs2 = rs2;
        break;
    case 0x63:
        out->cls = TIMING_BRANCH;
        out->rs1 = rs1, out->rs2 = rs2;
        break;
    case 0x6f:
        out->cls = TIMING_BRANCH;
        out->rd = rd;
        break;
    case 0x67:
        out->cls = TIMING_BRANCH;
        out->rd = rd, out->rs1 = rs1;
        break;
    case 0x73:                  /* SYSTEM: csrr* read rs1 (not the i forms) */
        out->cls = TIMING_SYSTEM;
        out->rd = funct3 ? rd : 0;
        out->rs1 = funct3 && funct3 < 4 ? rs1 : 0;
        break;
    default:                    /* fence, fence.i, anything else */
        out->cls = TIMING_SYSTEM;
        break;
    }
}

/*
 * Which loads and stores of a block may reach a data window (main memory):
 * a forward pass over the block from its first instruction, keeping for
 * each register either "unknown" or an interval its value lies in.  At
 * the block's entry sp, gp and tp are in the local store (the ABI keeps
 * them there: the stack, the small data, the thread-local block; they stay
 * so whatever the block writes to them) and x0 is 0; every other register
 * is unknown.  addi moves an interval by its immediate (mv is addi 0), lui
 * and auipc make a constant (auipc's pc is the instruction's own), and any
 * other instruction writing a register makes it unknown.  An access whose
 * address interval (its base's plus the 12-bit offset) lies within
 * TIMING_LOCAL_MARGIN of the local store, or whose base is x0 (the first
 * or last 2 KiB of the address space), cannot reach a window, which the
 * plugin checks lies farther away (docs/trace-unit.md, "Main-memory
 * access").  Only what ran before in the same block is used, so the answer
 * holds however the block was entered and wherever it stops.
 */
struct value_range {
    int known;
    int64_t lo, hi;             /* lo <= value <= hi */
};

static int32_t imm_i(uint32_t word)
{
    return (int32_t)word >> 20;
}

static int32_t imm_s(uint32_t word)
{
    return ((int32_t)word >> 25) * 32 + (int32_t)((word >> 7) & 31);
}

static struct value_range range_of(const struct value_range *regs,
                                   uint32_t reg, uint64_t ls_base,
                                   uint64_t ls_size)
{
    struct value_range r = { 1, 0, 0 };

    if (reg >= 2 && reg <= 4) {
        r.lo = (int64_t)ls_base;
        r.hi = (int64_t)(ls_base + ls_size - 1);
        return r;
    }
    return reg ? regs[reg] : r;
}

/* Whether the access at base + imm may fall outside the margin. */
static int may_reach(const struct value_range *regs, uint32_t base,
                     int32_t imm, uint64_t ls_base, uint64_t ls_size)
{
    struct value_range r = range_of(regs, base, ls_base, ls_size);

    if (!base)
        return 0;
    return !r.known
           || r.lo + imm < (int64_t)ls_base - TIMING_LOCAL_MARGIN
           || r.hi + imm >= (int64_t)(ls_base + ls_size) + TIMING_LOCAL_MARGIN;
}

/* The register the instruction at pc writes, with its new range. */
static void track_write(struct value_range *regs, uint32_t word, uint64_t pc,
                        uint64_t ls_base, uint64_t ls_size)
{
    uint32_t opcode = word & 0x7f, funct3 = (word >> 12) & 7;
    struct timing_insn insn;
    struct value_range r = { 0, 0, 0 };

    timing_decode(word, &insn);
    if (!insn.rd)
        return;
    if (opcode == 0x13 && funct3 == 0) {            /* addi */
        r = range_of(regs, insn.rs1, ls_base, ls_size);
        r.lo += imm_i(word);
        r.hi += imm_i(word);
        if (r.known && r.lo == r.hi)                /* a 32-bit constant */
            r.lo = r.hi = (uint32_t)r.lo;
    } else if (opcode == 0x37 || opcode == 0x17) {  /* lui, auipc */
        uint32_t v = (word & 0xfffff000u)
                     + (opcode == 0x17 ? (uint32_t)pc : 0);

        r.known = 1;
        r.lo = r.hi = v;
    }
    regs[insn.rd] = r;
}

void timing_watch_memory(const uint32_t *words, const uint64_t *pc,
                         uint32_t n, uint64_t ls_base, uint64_t ls_size,
                         uint8_t *watch)
{
    struct value_range regs[32] = { { 0, 0, 0 } };

    for (uint32_t i = 0; i < n; i++) {
        uint32_t word = words[i], opcode = word & 0x7f;
        uint32_t base = (word >> 15) & 31;

        watch[i] = opcode == 0x03
                   ? may_reach(regs, base, imm_i(word), ls_base, ls_size)
                   : opcode == 0x23
                   ? may_reach(regs, base, imm_s(word), ls_base, ls_size)
                   : 0;
        track_write(regs, word, pc[i], ls_base, ls_size);
    }
}

/* ---- Scheduling --------------------------------------------------------- */

/*
 * After a system instruction the scoreboard is empty, as at a block's
 * start: QEMU ends its translated block after a CSR write (and may or may
 * not after another system instruction), so the cost of what follows must
 * not depend on where the translator cut, nor on whether a slot's stub
 * replaced the instruction (copsim's slots run crt0's csrw mtvec as a nop,
 * which is costed as the csrw).  Its own result (csrr's rd) is ready then.
 */
static void forget_in_flight(uint64_t *ready, uint64_t now)
{
    for (int r = 0; r < 32; r++)
        if (ready[r] > now)
            ready[r] = now;
}

void timing_schedule(const struct timing_model *m, const uint32_t *words,
                     uint32_t n, uint32_t *stall, uint32_t *issue)
{
    uint64_t ready[32] = {0}, next = 0;     /* next: the issue slot free */

    for (uint32_t i = 0; i < n; i++) {
        struct timing_insn in;
        uint64_t at = next;

        timing_decode(words[i], &in);
        if (in.rs1 && ready[in.rs1] > at)
            at = ready[in.rs1];
        if (in.rs2 && ready[in.rs2] > at)
            at = ready[in.rs2];
        stall[i] = (uint32_t)(at - next);
        issue[i] = m->issue[in.cls];
        next = at + issue[i];
        if (in.rd)
            ready[in.rd] = at + m->latency[in.cls];
        if (in.cls == TIMING_SYSTEM)
            forget_in_flight(ready, next);
    }
}

/* The B-type immediate's sign: a backward branch. */
static int branches_backward(uint32_t word)
{
    return (word >> 31) != 0;
}

void timing_exit(const struct timing_model *m, uint32_t word, uint64_t vaddr,
                 struct timing_exit *out)
{
    uint32_t opcode = word & 0x7f;
    int predicted_taken;

    out->fallthrough = vaddr + 4;
    out->taken = out->not_taken = 0;
    if (opcode == 0x67) {
        out->taken = out->not_taken = m->branch_indirect;
        return;
    }
    if (opcode != 0x63)
        return;                 /* jal: a known target; others: no branch */
    predicted_taken = m->predict == TIMING_ALWAYS_TAKEN
                      || (m->predict == TIMING_BACKWARD_TAKEN
                          && branches_backward(word));
    if (predicted_taken)
        out->not_taken = m->branch_miss;
    else
        out->taken = m->branch_miss;
}
