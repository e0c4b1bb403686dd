/*
 * trace-unit.c — creating, opening and validating the trace unit's register
 * file, and the handshakes every party performs on it (see trace-unit.h;
 * the layout and ordering rules are in trace-regs.h and docs/trace-unit.md).
 *
 * The file is mapped MAP_SHARED by every process.  Gates and acks are futex
 * words (shared, not private, futexes, since the processes differ): the
 * emulator sleeps on its context's gate and the controller on its ack.
 * Sleeps are cut into short slices so a dead peer is noticed.
 *
 * A producer stalled on a full FIFO (policy stall) waits on the slot's
 * fifo_tail, which the consumer moves, after publishing `stalled`; a
 * consumer that drained loads `stalled` and wakes it (both sequentially
 * consistent, so one of them sees the other).  The doorbell is a counter
 * in the header that producers increment and wake: the driver sleeps on
 * it with its poll interval as timeout.
 *
 * A handshake (trace_handshake_wait/_wake) spins a bounded time before it
 * sleeps, and its waker skips the FUTEX_WAKE while nobody sleeps: the
 * same pairing as `stalled`, with a count, described at the functions.
 */
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_SLICE_MS      10       /* longest sleep between liveness checks */
#define POLL_MIN_US        100      /* the simple consumer's poll interval */
#define POLL_MAX_US        10000    /* adapts between these */
#define DRAIN_BATCH        4096

static void fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    if (!err || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- Futexes and processes ---------------------------------------------- */

static void futex_wait_ms(uint32_t *word, uint32_t expected, int timeout_ms)
{
    struct timespec timeout = {
        .tv_sec = timeout_ms / 1000,
        .tv_nsec = (long)(timeout_ms % 1000) * 1000000L,
    };

    syscall(SYS_futex, word, FUTEX_WAIT, expected, &timeout, NULL, 0);
}

static void futex_wake_all(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int process_is_gone(pid_t pid)
{
    return pid > 0 && kill(pid, 0) < 0 && errno == ESRCH;
}

static uint64_t monotonic_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* ---- Files -------------------------------------------------------------- */

void trace_geometry_default(struct trace_geometry *geo)
{
    geo->n_slots = TRACE_DEFAULT_SLOTS;
    geo->n_contexts = TRACE_DEFAULT_CONTEXTS;
    geo->fifo_depth = TRACE_DEFAULT_FIFO_DEPTH;
    geo->ls_base = TRACE_DEFAULT_LS_BASE;
    geo->ls_size = TRACE_DEFAULT_LS_SIZE;
    geo->stack_depth = 0;
}

/* A geometry's fault (trace_geometry_fault()) as a one-line reason. */
static int check_geometry(const struct trace_geometry *geo,
                          char *err, size_t errlen)
{
    switch (trace_geometry_fault(geo->n_slots, geo->n_contexts,
                                 geo->fifo_depth, geo->ls_base, geo->ls_size,
                                 geo->stack_depth)) {
    case TRACE_REGS_OK:
        return 0;
    case TRACE_REGS_BAD_SLOTS:
        fail(err, errlen, "slot count %u is outside 1..%u", geo->n_slots,
             TRACE_MAX_SLOTS);
        return -1;
    case TRACE_REGS_BAD_CONTEXTS:
        fail(err, errlen, "context count %u is outside 1..%u",
             geo->n_contexts, TRACE_MAX_CONTEXTS);
        return -1;
    case TRACE_REGS_BAD_FIFO_DEPTH:
        fail(err, errlen, "FIFO depth %u is not a power of two in %u..%u",
             geo->fifo_depth, TRACE_MIN_FIFO_DEPTH, TRACE_MAX_FIFO_DEPTH);
        return -1;
    case TRACE_REGS_BAD_LOCAL_STORE:
        fail(err, errlen, "local store 0x%x+0x%x is not 4-byte aligned, "
             "at most 0x%x bytes, below 4 GiB", geo->ls_base, geo->ls_size,
             TRACE_MAX_LS_SIZE);
        return -1;
    default:
        fail(err, errlen, "call-stack depth %u is above %u", geo->stack_depth,
             TRACE_MAX_STACK_DEPTH);
        return -1;
    }
}

static uint64_t contexts_offset(const struct trace_geometry *geo)
{
    return trace_regs_contexts_at(geo->n_slots, geo->fifo_depth);
}

static uint64_t mailbox_offset(const struct trace_geometry *geo)
{
    return trace_regs_mailboxes_at(geo->n_slots, geo->n_contexts,
                                   geo->fifo_depth);
}

static uint64_t stack_offset(const struct trace_geometry *geo)
{
    return trace_regs_stacks_at(geo->n_slots, geo->n_contexts,
                                geo->fifo_depth, geo->stack_depth);
}

static uint64_t file_size_for(const struct trace_geometry *geo)
{
    return trace_regs_size_for(geo->n_slots, geo->n_contexts,
                               geo->fifo_depth, geo->stack_depth);
}

/*
 * trace_regs_check() (trace-regs.h) decides; this says why in words, with
 * the values.
 */
int trace_regs_validate(const void *base, uint64_t size,
                        char *err, size_t errlen)
{
    struct trace_regs_header h;
    struct trace_geometry geo;
    enum trace_regs_fault fault;

    if (size < sizeof(h)) {
        fail(err, errlen, "file is %llu bytes, shorter than the %zu-byte "
             "header", (unsigned long long)size, sizeof(h));
        return -1;
    }
    trace_regs_snapshot(&h, base);
    fault = trace_regs_check(&h, size);
    geo = (struct trace_geometry){ h.n_slots, h.n_contexts, h.fifo_depth,
                                   h.ls_base, h.ls_size, h.stack_depth };
    switch (fault) {
    case TRACE_REGS_OK:
        return 0;
    case TRACE_REGS_BAD_MAGIC:
        fail(err, errlen, "not a trace-unit register file (bad magic)");
        return -1;
    case TRACE_REGS_BAD_VERSION:
        fail(err, errlen, "register file version %u, this build reads "
             "version %u", h.version, TRACE_REGS_VERSION);
        return -1;
    case TRACE_REGS_BAD_HEADER_SIZE:
        fail(err, errlen, "header size %u, expected %zu", h.header_size,
             sizeof(h));
        return -1;
    case TRACE_REGS_BAD_RESERVED: {
        size_t i = 0;

        while (i + 1 < sizeof(h.reserved) && !h.reserved[i])
            i++;
        fail(err, errlen, "reserved header byte %zu is not zero",
             offsetof(struct trace_regs_header, reserved) + i);
        return -1;
    }
    case TRACE_REGS_BAD_LAYOUT:
        fail(err, errlen, "inconsistent layout (slot stride %u at %u, "
             "context stride %u at %u, mailbox stride %u at %u)",
             h.slot_stride, h.slots_offset, h.context_stride,
             h.contexts_offset, h.mailbox_stride, h.mailbox_offset);
        return -1;
    case TRACE_REGS_BAD_FILE_SIZE:
        fail(err, errlen, "file is %llu bytes, header says %llu and the "
             "geometry needs %llu", (unsigned long long)size,
             (unsigned long long)h.file_size,
             (unsigned long long)file_size_for(&geo));
        return -1;
    default:
        return check_geometry(&geo, err, errlen);
    }
}

static struct trace_unit *map_unit(const char *path, int fd, size_t size,
                                   char *err, size_t errlen)
{
    struct trace_unit *unit = calloc(1, sizeof(*unit));
    void *base;

    if (!unit || !(unit->path = strdup(path))) {
        fail(err, errlen, "%s: out of memory", path);
        free(unit);
        return NULL;
    }
    base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        fail(err, errlen, "%s: cannot map: %s", path, strerror(errno));
        free(unit->path);
        free(unit);
        return NULL;
    }
    unit->fd = fd;
    unit->base = base;
    unit->size = size;
    unit->header = base;
    return unit;
}

static void initialise(struct trace_unit *unit,
                       const struct trace_geometry *geo)
{
    struct trace_regs_header *h = unit->header;

    h->version = TRACE_REGS_VERSION;
    h->header_size = sizeof(*h);
    h->file_size = unit->size;
    h->n_slots = geo->n_slots;
    h->n_contexts = geo->n_contexts;
    h->fifo_depth = geo->fifo_depth;
    h->slot_stride = (uint32_t)trace_regs_slot_stride(geo->fifo_depth);
    h->slots_offset = sizeof(*h);
    h->context_stride = sizeof(struct trace_regs_context);
    h->contexts_offset = (uint32_t)contexts_offset(geo);
    h->mailbox_offset = (uint32_t)mailbox_offset(geo);
    h->mailbox_stride = sizeof(struct trace_regs_mailbox);
    h->stack_offset = (uint32_t)stack_offset(geo);
    h->stack_depth = geo->stack_depth;
    h->ls_base = geo->ls_base;
    h->ls_size = geo->ls_size;
    for (uint32_t i = 0; i < geo->n_slots; i++) {
        struct trace_regs_slot *slot = trace_unit_slot(unit, i);

        slot->bound_context = TRACE_NONE;
        slot->watermark = trace_default_watermark(geo->fifo_depth);
    }
    for (uint32_t i = 0; i < geo->n_contexts; i++)
        trace_unit_context(unit, i)->slot = TRACE_NONE;
    /* The magic goes last: a file with it is complete. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    memcpy(h->magic, TRACE_REGS_MAGIC, TRACE_REGS_MAGIC_SIZE);
}

static struct trace_unit *create_on_fd(const char *path, int fd,
                                       const struct trace_geometry *geo,
                                       char *err, size_t errlen)
{
    uint64_t size = file_size_for(geo);
    struct trace_unit *unit;
    int error;

    /* Every block reserved now: a full file system is this error, not a
     * SIGBUS at the first store into a page of a sparse file. */
    error = posix_fallocate(fd, 0, (off_t)size);
    if (error) {
        fail(err, errlen, "%s: cannot reserve %llu bytes for the register "
             "file: %s", path, (unsigned long long)size, strerror(error));
        return NULL;
    }
    unit = map_unit(path, fd, size, err, errlen);
    if (unit)
        initialise(unit, geo);
    return unit;
}

struct trace_unit *trace_unit_create(const char *path,
                                     const struct trace_geometry *geo,
                                     char *err, size_t errlen)
{
    struct trace_unit *unit;
    char reason[160];
    int fd;

    if (check_geometry(geo, reason, sizeof(reason)) < 0) {
        fail(err, errlen, "%s: %s", path, reason);
        return NULL;
    }
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fail(err, errlen, "%s: cannot create: %s", path, strerror(errno));
        return NULL;
    }
    unit = create_on_fd(path, fd, geo, err, errlen);
    if (!unit) {
        close(fd);
        unlink(path);
    }
    return unit;
}

struct trace_unit *trace_unit_create_temp(const char *dir,
                                          const struct trace_geometry *geo,
                                          char *err, size_t errlen)
{
    struct trace_unit *unit;
    char path[PATH_MAX], reason[160];
    int fd;

    if (!dir)
        dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = "/tmp";
    if (check_geometry(geo, reason, sizeof(reason)) < 0) {
        fail(err, errlen, "trace register file: %s", reason);
        return NULL;
    }
    if (snprintf(path, sizeof(path), "%s/coptrace-XXXXXX", dir)
        >= (int)sizeof(path)) {
        fail(err, errlen, "%s: directory name too long", dir);
        return NULL;
    }
    fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        fail(err, errlen, "%s: cannot create a register file: %s", dir,
             strerror(errno));
        return NULL;
    }
    unit = create_on_fd(path, fd, geo, err, errlen);
    if (!unit) {
        close(fd);
        unlink(path);
    }
    return unit;
}

struct trace_unit *trace_unit_open(const char *path, char *err, size_t errlen)
{
    struct trace_unit *unit;
    struct stat st;
    char reason[200];
    int fd;

    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        fail(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    if ((uint64_t)st.st_size < sizeof(struct trace_regs_header)) {
        fail(err, errlen, "%s: file is %llu bytes, shorter than the header",
             path, (unsigned long long)st.st_size);
        close(fd);
        return NULL;
    }
    unit = map_unit(path, fd, (size_t)st.st_size, err, errlen);
    if (!unit) {
        close(fd);
        return NULL;
    }
    if (trace_regs_validate(unit->base, unit->size, reason,
                            sizeof(reason)) < 0) {
        fail(err, errlen, "%s: %s", path, reason);
        trace_unit_close(unit, 0);
        return NULL;
    }
    return unit;
}

void trace_unit_close(struct trace_unit *unit, int remove_file)
{
    if (!unit)
        return;
    munmap(unit->base, unit->size);
    close(unit->fd);
    if (remove_file)
        unlink(unit->path);
    free(unit->path);
    free(unit);
}

/* Block `index` of an array of `count` blocks of `stride` bytes at `offset`,
 * or NULL past its end. */
static void *block_at(const struct trace_unit *unit, uint32_t offset,
                      uint32_t stride, uint32_t count, uint32_t index)
{
    if (index >= count)
        return NULL;
    return unit->base + offset + (size_t)index * stride;
}

struct trace_regs_slot *trace_unit_slot(const struct trace_unit *unit,
                                        uint32_t slot)
{
    const struct trace_regs_header *h = unit->header;

    return block_at(unit, h->slots_offset, h->slot_stride, h->n_slots, slot);
}

struct trace_regs_context *trace_unit_context(const struct trace_unit *unit,
                                              uint32_t context)
{
    const struct trace_regs_header *h = unit->header;

    return block_at(unit, h->contexts_offset, h->context_stride,
                    h->n_contexts, context);
}

struct trace_regs_mailbox *trace_unit_mailbox(const struct trace_unit *unit,
                                              uint32_t slot)
{
    const struct trace_regs_header *h = unit->header;

    return block_at(unit, h->mailbox_offset, h->mailbox_stride, h->n_slots,
                    slot);
}

/* ---- Controller --------------------------------------------------------- */

void trace_unit_set_controller(struct trace_unit *unit, pid_t pid)
{
    __atomic_store_n(&unit->header->controller_pid, (int32_t)pid,
                     __ATOMIC_RELEASE);
}

void trace_slot_program(struct trace_regs_slot *slot, uint32_t value)
{
    __atomic_store_n(&slot->programmed_value, value & LFSR_MASK,
                     __ATOMIC_RELEASE);
}

void trace_slot_load(struct trace_regs_slot *slot, uint32_t state)
{
    trace_slot_load_state(slot, state & LFSR_MASK);
}

int trace_parse_fifo_policy(const char *text, uint32_t *policy)
{
    if (!strcmp(text, "stall"))
        *policy = TRACE_FIFO_STALL;
    else if (!strcmp(text, "drop"))
        *policy = TRACE_FIFO_DROP;
    else
        return -1;
    return 0;
}

const char *trace_fifo_policy_name(uint32_t policy)
{
    return policy == TRACE_FIFO_STALL ? "stall" : "drop";
}

int trace_parse_event(const char *text, uint32_t *event)
{
    if (!strcmp(text, TRACE_EVENT_CYCLES_NAME))
        *event = TRACE_EVENT_CYCLES;
    else if (!strcmp(text, TRACE_EVENT_INSTRUCTIONS_NAME))
        *event = TRACE_EVENT_INSTRUCTIONS;
    else
        return -1;
    return 0;
}

void trace_slot_set_policy(struct trace_regs_slot *slot, uint32_t fifo_policy,
                           uint32_t watermark)
{
    trace_slot_configure(slot, fifo_policy, watermark,
                         __atomic_load_n(&slot->dither, __ATOMIC_RELAXED),
                         __atomic_load_n(&slot->dither_seed,
                                         __ATOMIC_RELAXED));
}

void trace_slot_set_dither(struct trace_regs_slot *slot, uint32_t dither,
                           uint64_t seed)
{
    trace_slot_configure(slot,
                         __atomic_load_n(&slot->fifo_policy, __ATOMIC_RELAXED),
                         __atomic_load_n(&slot->watermark, __ATOMIC_RELAXED),
                         dither, seed);
}

static int context_is_running(const struct trace_regs_context *ctx)
{
    uint32_t status = __atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE);
    uint32_t gate = __atomic_load_n(&ctx->gate, __ATOMIC_ACQUIRE);
    uint32_t ack = __atomic_load_n(&ctx->ack, __ATOMIC_ACQUIRE);

    if (status == TRACE_CONTEXT_IDLE || status == TRACE_CONTEXT_EXITED)
        return 0;
    if (process_is_gone(__atomic_load_n(&ctx->pid, __ATOMIC_ACQUIRE)))
        return 0;
    return trace_gate_is_open(gate) || ack != gate;
}

int trace_unit_bind(struct trace_unit *unit, uint32_t context, uint32_t slot,
                    char *err, size_t errlen)
{
    struct trace_regs_context *ctx = trace_unit_context(unit, context);
    struct trace_regs_slot *target = trace_unit_slot(unit, slot);
    uint32_t owner;

    if (!ctx || !target) {
        fail(err, errlen, "%s: cannot bind context %u to slot %u: out of "
             "range (%u contexts, %u slots)", unit->path, context, slot,
             unit->header->n_contexts, unit->header->n_slots);
        return -1;
    }
    if (context_is_running(ctx)) {
        fail(err, errlen, "%s: context %u is running; hold it first",
             unit->path, context);
        return -1;
    }
    owner = __atomic_load_n(&target->bound_context, __ATOMIC_ACQUIRE);
    if (owner != TRACE_NONE && owner != context) {
        struct trace_regs_context *previous = trace_unit_context(unit, owner);

        if (previous && context_is_running(previous)) {
            fail(err, errlen, "%s: slot %u is in use by running context %u",
                 unit->path, slot, owner);
            return -1;
        }
        trace_unit_unbind(unit, owner);
    }
    trace_unit_unbind(unit, context);
    __atomic_store_n(&target->bound_context, context, __ATOMIC_RELEASE);
    __atomic_store_n(&ctx->slot, slot, __ATOMIC_RELEASE);
    return 0;
}

void trace_unit_unbind(struct trace_unit *unit, uint32_t context)
{
    struct trace_regs_context *ctx = trace_unit_context(unit, context);
    struct trace_regs_slot *old;

    if (!ctx)
        return;
    old = trace_unit_slot(unit, __atomic_load_n(&ctx->slot, __ATOMIC_ACQUIRE));
    if (old
        && __atomic_load_n(&old->bound_context, __ATOMIC_ACQUIRE) == context)
        __atomic_store_n(&old->bound_context, TRACE_NONE, __ATOMIC_RELEASE);
    __atomic_store_n(&ctx->slot, TRACE_NONE, __ATOMIC_RELEASE);
}

/* Whether guard_count words at guard_ls_offset are a watch the local
 * store of `unit` can hold. */
static int check_guards(const struct trace_unit *unit, uint32_t context,
                        uint32_t guard_ls_offset, uint32_t guard_count,
                        char *err, size_t errlen)
{
    uint32_t ls_size = unit->header->ls_size;

    if (guard_count > TRACE_MAX_GUARDS) {
        fail(err, errlen, "%s: context %u watches %u guard words, more than "
             "%u", unit->path, context, guard_count, TRACE_MAX_GUARDS);
        return -1;
    }
    if (guard_count && (guard_ls_offset % 4 || guard_ls_offset > ls_size
                        || guard_count * 4u > ls_size - guard_ls_offset)) {
        fail(err, errlen, "%s: context %u's %u guard words at LS offset "
             "0x%x are not aligned words inside the 0x%x-byte local store",
             unit->path, context, guard_count, guard_ls_offset, ls_size);
        return -1;
    }
    return 0;
}

int trace_context_watch_guards(struct trace_unit *unit, uint32_t context,
                               uint32_t guard_ls_offset, uint32_t guard_count,
                               char *err, size_t errlen)
{
    struct trace_regs_context *ctx = trace_unit_context(unit, context);

    if (!ctx) {
        fail(err, errlen, "%s: context %u is out of range (%u contexts)",
             unit->path, context, unit->header->n_contexts);
        return -1;
    }
    if (check_guards(unit, context, guard_ls_offset, guard_count,
                     err, errlen) < 0)
        return -1;
    if (context_is_running(ctx)) {
        fail(err, errlen, "%s: context %u is running; its watch is read "
             "when its emulator starts", unit->path, context);
        return -1;
    }
    __atomic_store_n(&ctx->guard_ls_offset, guard_count ? guard_ls_offset : 0,
                     __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->guard_count, guard_count, __ATOMIC_RELEASE);
    return 0;
}

int trace_context_guards(const struct trace_unit *unit, uint32_t context,
                         uint32_t *guard_ls_offset, uint32_t *guard_count,
                         char *err, size_t errlen)
{
    const struct trace_regs_context *ctx = trace_unit_context(unit, context);

    if (!ctx) {
        fail(err, errlen, "%s: context %u is out of range (%u contexts)",
             unit->path, context, unit->header->n_contexts);
        return -1;
    }
    *guard_count = __atomic_load_n(&ctx->guard_count, __ATOMIC_ACQUIRE);
    *guard_ls_offset = __atomic_load_n(&ctx->guard_ls_offset,
                                       __ATOMIC_RELAXED);
    return check_guards(unit, context, *guard_ls_offset, *guard_count,
                        err, errlen);
}

uint32_t trace_context_hold(struct trace_regs_context *context)
{
    uint32_t gate = __atomic_load_n(&context->gate, __ATOMIC_ACQUIRE);

    if (trace_gate_is_open(gate)) {
        gate++;
        /* Close, then ring: the emulator's fast path only watches
         * check_cycle (docs/trace-unit.md, ordering rule 3). */
        __atomic_store_n(&context->gate, gate, __ATOMIC_SEQ_CST);
        __atomic_store_n(&context->check_cycle, 0, __ATOMIC_SEQ_CST);
    }
    return gate;
}

void trace_context_kick(struct trace_regs_context *context)
{
    __atomic_store_n(&context->check_cycle, 0, __ATOMIC_SEQ_CST);
}

void trace_context_park(struct trace_regs_context *context)
{
    uint32_t gate = trace_context_hold(context);

    __atomic_store_n(&context->ack, gate, __ATOMIC_RELEASE);
    __atomic_store_n(&context->status, TRACE_CONTEXT_HELD, __ATOMIC_RELEASE);
}

int trace_context_wait_held(struct trace_regs_context *context, uint32_t gate,
                            int timeout_ms)
{
    for (int waited = 0;; waited += WAIT_SLICE_MS) {
        uint32_t ack = __atomic_load_n(&context->ack, __ATOMIC_ACQUIRE);
        uint32_t status = __atomic_load_n(&context->status, __ATOMIC_ACQUIRE);

        if (status == TRACE_CONTEXT_EXITED
            || process_is_gone(__atomic_load_n(&context->pid,
                                               __ATOMIC_ACQUIRE)))
            return TRACE_WAIT_EXITED;
        if (ack == gate && status == TRACE_CONTEXT_HELD)
            return TRACE_WAIT_HELD;
        if (status == TRACE_CONTEXT_IDLE)
            return TRACE_WAIT_HELD;     /* no emulator: nothing runs */
        if (timeout_ms >= 0 && waited >= timeout_ms)
            return TRACE_WAIT_TIMEOUT;
        futex_wait_ms(&context->ack, ack, WAIT_SLICE_MS);
    }
}

void trace_context_release(struct trace_regs_context *context)
{
    uint32_t gate = __atomic_load_n(&context->gate, __ATOMIC_ACQUIRE);

    if (!trace_gate_is_open(gate))
        __atomic_store_n(&context->gate, gate + 1, __ATOMIC_RELEASE);
    futex_wake_all(&context->gate);
}

uint32_t trace_lfsr_snapshot_state(const struct trace_lfsr_snapshot *snap)
{
    uint64_t steps = snap->cycles - snap->reload_cycle;

    if (snap->cycles < snap->reload_cycle)
        steps = 0;
    return lfsr_advance(snap->reload_state, (uint32_t)(steps % LFSR_PERIOD));
}

void trace_slot_status(const struct trace_unit *unit, uint32_t slot,
                       struct trace_slot_status *status)
{
    const struct trace_regs_slot *s = trace_unit_slot(unit, slot);
    struct trace_lfsr_snapshot snap;

    /* a producer killed inside its write left its values as they are */
    (void)trace_slot_read_lfsr(s, &snap);
    status->captures = __atomic_load_n(&s->capture_count, __ATOMIC_ACQUIRE);
    status->dropped = __atomic_load_n(&s->overflow_count, __ATOMIC_ACQUIRE);
    status->outside = __atomic_load_n(&s->outside_count, __ATOMIC_ACQUIRE);
    status->queued = trace_slot_queued(s);
    status->stall_ns = __atomic_load_n(&s->stall_ns, __ATOMIC_ACQUIRE);
    status->stalls = __atomic_load_n(&s->stall_count, __ATOMIC_ACQUIRE);
    status->cycles = snap.cycles;
    status->lfsr_state = trace_lfsr_snapshot_state(&snap);
    status->programmed_value = __atomic_load_n(&s->programmed_value,
                                               __ATOMIC_ACQUIRE);
    status->bound_context = __atomic_load_n(&s->bound_context,
                                            __ATOMIC_ACQUIRE);
}

/* ---- FIFO-full policy and doorbell -------------------------------------- */

void trace_futex_wake(uint32_t *word)
{
    futex_wake_all(word);
}

void trace_slot_wake_producer(struct trace_regs_slot *slot)
{
    if (__atomic_load_n(&slot->stalled, __ATOMIC_SEQ_CST))
        futex_wake_all(&slot->fifo_tail);
}

int trace_doorbell_wait(uint32_t *doorbell, uint32_t seen,
                        uint64_t timeout_ns)
{
    struct timespec timeout = {
        .tv_sec = (time_t)(timeout_ns / 1000000000u),
        .tv_nsec = (long)(timeout_ns % 1000000000u),
    };

    if (__atomic_load_n(doorbell, __ATOMIC_ACQUIRE) != seen)
        return 1;
    syscall(SYS_futex, doorbell, FUTEX_WAIT, seen, &timeout, NULL, 0);
    return __atomic_load_n(doorbell, __ATOMIC_ACQUIRE) != seen;
}

void trace_doorbell_ring(uint32_t *doorbell)
{
    __atomic_add_fetch(doorbell, 1, __ATOMIC_RELEASE);
    futex_wake_all(doorbell);
}

/* ---- Handshakes ---------------------------------------------------------- */

#define HANDSHAKE_PAUSES    64      /* word reads between looks at the clock */

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

/* Reads the word until it differs from seen or spin_ns has passed since
 * start: 1 when it changed. */
static int spin_on(const uint32_t *word, uint32_t seen, uint64_t start,
                   uint64_t spin_ns)
{
    while (monotonic_ns() - start < spin_ns) {
        for (int i = 0; i < HANDSHAKE_PAUSES; i++) {
            if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != seen)
                return 1;
            cpu_relax();
        }
        sched_yield();
    }
    return __atomic_load_n(word, __ATOMIC_ACQUIRE) != seen;
}

/*
 * Why no wake-up is lost although the waker may skip FUTEX_WAKE: the
 * waiter adds itself to *sleepers, then reads the word (and the kernel
 * reads it again, atomically with queueing the waiter, in FUTEX_WAIT);
 * the waker writes the word, then reads *sleepers.  The add is a
 * sequentially consistent read-modify-write and the waker puts a
 * sequentially consistent fence between its write and its read, so of
 * the two writes one comes first in the single total order: either the
 * waiter's read sees the new word (it does not sleep), or the waker's read
 * sees the count (it wakes; a wake before the waiter is queued finds the
 * word changed in FUTEX_WAIT, which then returns at once).  The count is
 * left only after the sleep, so a waker never reads 0 while one sleeps.
 */
enum trace_handshake trace_handshake_wait(uint32_t *word, uint32_t seen,
                                          uint32_t *sleepers,
                                          uint64_t spin_ns,
                                          uint64_t timeout_ns)
{
    uint64_t start = monotonic_ns();
    enum trace_handshake how = TRACE_HANDSHAKE_EXPIRED;

    if (spin_on(word, seen, start, spin_ns))
        return TRACE_HANDSHAKE_SPUN;
    __atomic_add_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        uint64_t now = monotonic_ns();
        struct timespec left;

        if (__atomic_load_n(word, __ATOMIC_SEQ_CST) != seen) {
            how = TRACE_HANDSHAKE_WOKEN;
            break;
        }
        if (now - start >= timeout_ns)
            break;
        left.tv_sec = (time_t)((timeout_ns - (now - start)) / 1000000000u);
        left.tv_nsec = (long)((timeout_ns - (now - start)) % 1000000000u);
        if (syscall(SYS_futex, word, FUTEX_WAIT, seen, &left, NULL, 0) < 0
            && errno == ETIMEDOUT)
            break;
    }
    __atomic_sub_fetch(sleepers, 1, __ATOMIC_SEQ_CST);
    return how;
}

int trace_handshake_wake(uint32_t *word, const uint32_t *sleepers,
                         uint32_t bitset)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);    /* the word's write first */
    if (__atomic_load_n(sleepers, __ATOMIC_SEQ_CST) == 0)
        return 0;
    syscall(SYS_futex, word, FUTEX_WAKE_BITSET, INT_MAX, NULL, NULL, bitset);
    return 1;
}

int trace_handshake_ring(uint32_t *word, const uint32_t *sleepers)
{
    __atomic_add_fetch(word, 1, __ATOMIC_SEQ_CST);
    return trace_handshake_wake(word, sleepers, FUTEX_BITSET_MATCH_ANY);
}

/* Whether a stalled producer must give up waiting: the controller turned
 * the policy to drop, or is gone (nobody would drain). */
static int stall_abandoned(const struct trace_unit *unit,
                           const struct trace_regs_slot *slot)
{
    return __atomic_load_n(&slot->fifo_policy, __ATOMIC_ACQUIRE)
               != TRACE_FIFO_STALL
           || process_is_gone(__atomic_load_n(&unit->header->controller_pid,
                                              __ATOMIC_ACQUIRE));
}

/*
 * The stall: waits, ringing the doorbell, until the FIFO has room (returns
 * 1) or the stall is abandoned (returns 0).  Its time and one stall go
 * into the slot.  The capture is pushed by the caller right after, so
 * that nothing (no clock read, no system call) lies between the push and
 * the emulator's publishing the capture's cycle: an emulator killed in a
 * stall has neither.
 */
static int stall_for_room(const struct trace_unit *unit,
                          struct trace_regs_slot *slot)
{
    uint32_t depth = unit->header->fifo_depth;
    uint32_t head = __atomic_load_n(&slot->fifo_head, __ATOMIC_RELAXED);
    uint64_t begin = monotonic_ns(), count, ns;
    int room = 0;

    __atomic_store_n(&slot->stalled, 1, __ATOMIC_SEQ_CST);
    for (;;) {
        uint32_t tail = __atomic_load_n(&slot->fifo_tail, __ATOMIC_SEQ_CST);

        if (head - tail < depth) {
            room = 1;
            break;
        }
        if (stall_abandoned(unit, slot))
            break;
        trace_doorbell_ring(&unit->header->doorbell);
        futex_wait_ms(&slot->fifo_tail, tail, WAIT_SLICE_MS);
    }
    __atomic_store_n(&slot->stalled, 0, __ATOMIC_RELAXED);
    ns = __atomic_load_n(&slot->stall_ns, __ATOMIC_RELAXED);
    count = __atomic_load_n(&slot->stall_count, __ATOMIC_RELAXED);
    __atomic_store_n(&slot->stall_ns, ns + (monotonic_ns() - begin),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&slot->stall_count, count + 1, __ATOMIC_RELEASE);
    return room;
}

/*
 * The doorbell rings just before the push that brings the queue to the
 * watermark (the consumer may drain at once: nothing is lost by ringing
 * first), so that the push is the last thing before the caller goes on.
 */
int trace_slot_capture(const struct trace_unit *unit,
                       struct trace_regs_slot *slot, uint16_t field)
{
    return trace_slot_capture_entry(unit, slot, NULL, field,
                                    TRACE_STALL_ISSUE, 0, NULL);
}

int trace_slot_capture_stack(const struct trace_unit *unit,
                             struct trace_regs_slot *slot, uint32_t *area,
                             uint16_t field, uint32_t depth_of_stack,
                             const uint32_t *frames)
{
    return trace_slot_capture_entry(unit, slot, area, field,
                                    TRACE_STALL_ISSUE, depth_of_stack,
                                    frames);
}

int trace_slot_capture_entry(const struct trace_unit *unit,
                             struct trace_regs_slot *slot, uint32_t *area,
                             uint16_t field, uint32_t cause,
                             uint32_t depth_of_stack, const uint32_t *frames)
{
    uint32_t depth = unit->header->fifo_depth;
    uint32_t watermark = __atomic_load_n(&slot->watermark, __ATOMIC_RELAXED);
    uint32_t queued = trace_slot_queued(slot);

    if (queued >= depth
        && __atomic_load_n(&slot->fifo_policy, __ATOMIC_RELAXED)
           == TRACE_FIFO_STALL) {
        if (!stall_for_room(unit, slot)) {
            trace_slot_count_overflow(slot);
            return 0;
        }
        queued = trace_slot_queued(slot);
    }
    if (watermark && queued + 1 == watermark)
        trace_doorbell_ring(&unit->header->doorbell);
    if (area)
        trace_slot_put_stack(slot, depth, area, unit->header->stack_depth,
                             depth_of_stack, frames);
    trace_slot_put_cause(slot, depth, cause);
    return trace_slot_push(slot, depth, field);
}

/* ---- Consumer ----------------------------------------------------------- */

/* One drained capture as a line: its LS address, then with a call-stack
 * area its frames' return addresses, innermost first, "@N" after one
 * made in overlay N, " ..." when frames beyond the record's depth were
 * left out. */
static void write_capture(FILE *out, uint16_t field, const uint32_t *rec,
                          uint32_t stack_depth)
{
    fprintf(out, "0x%05x", (unsigned)field << 2);
    if (rec) {
        uint32_t n = rec[0] < stack_depth ? rec[0] : stack_depth;

        for (uint32_t i = 0; i < n; i++) {
            uint32_t frame = rec[1 + i];

            fprintf(out, " 0x%05x",
                    (unsigned)TRACE_STACK_FRAME_FIELD(frame) << 2);
            if (TRACE_STACK_FRAME_OVERLAY(frame))
                fprintf(out, "@%u", TRACE_STACK_FRAME_OVERLAY(frame));
        }
        if (rec[0] > stack_depth)
            fputs(" ...", out);
    }
    fputc('\n', out);
}

/* One drained capture's stall reason as a line: its LS address, the
 * reason (enum trace_stall_reason), and a DMA wait's tag and issuer. */
static void write_reason(FILE *out, uint16_t field, uint32_t cause)
{
    fprintf(out, "0x%05x %u", (unsigned)field << 2,
            trace_cause_reason(cause));
    if (trace_cause_has_transfer(cause))
        fprintf(out, " %u 0x%05x", trace_cause_tag(cause),
                trace_cause_issuer_field(cause) << 2);
    fputc('\n', out);
}

int trace_slot_drain_to(struct trace_unit *unit, uint32_t slot, FILE *out,
                        FILE *reasons, uint64_t *drained, char *err,
                        size_t errlen)
{
    struct trace_regs_slot *s = trace_unit_slot(unit, slot);
    uint32_t depth = unit->header->fifo_depth;
    uint32_t stack_depth = unit->header->stack_depth;
    uint32_t words = trace_stack_record_words(stack_depth);
    const uint32_t *area = trace_stack_area(unit->base, unit->header, slot);
    uint32_t *records = NULL;
    uint16_t batch[DRAIN_BATCH];
    uint32_t causes[DRAIN_BATCH];
    int32_t n;

    if (area && !(records = malloc((size_t)DRAIN_BATCH * words * 4))) {
        fail(err, errlen, "%s: out of memory for call stacks", unit->path);
        return -1;
    }
    while ((n = trace_slot_drain_entries(s, depth, batch, causes, area,
                                         stack_depth, records,
                                         DRAIN_BATCH)) > 0) {
        trace_slot_wake_producer(s);
        for (int32_t i = 0; out && i < n; i++)
            write_capture(out, batch[i],
                          records ? records + (size_t)i * words : NULL,
                          stack_depth);
        for (int32_t i = 0; reasons && i < n; i++)
            write_reason(reasons, batch[i], causes[i]);
        *drained += (uint64_t)n;
    }
    free(records);
    if (n < 0) {
        fail(err, errlen, "%s: slot %u FIFO is corrupt (head %u, tail %u, "
             "depth %u)", unit->path, slot, s->fifo_head, s->fifo_tail, depth);
        return -1;
    }
    return 0;
}

int trace_slot_drain_events_to(struct trace_unit *unit, uint32_t slot,
                               uint32_t base, FILE *out, uint64_t *drained,
                               char *err, size_t errlen)
{
    struct trace_regs_slot *s = trace_unit_slot(unit, slot);
    uint32_t depth = unit->header->fifo_depth;
    struct trace_ovl_event batch[TRACE_EVENT_DEPTH];
    int32_t n;

    while ((n = trace_slot_drain_events(s, depth, batch,
                                        TRACE_EVENT_DEPTH)) > 0) {
        for (int32_t i = 0; out && i < n; i++)
            fprintf(out, "%u %u %u\n", batch[i].fifo_pos - base,
                    batch[i].region, batch[i].guard);
        *drained += (uint64_t)n;
    }
    if (n < 0) {
        fail(err, errlen, "%s: slot %u event ring is corrupt (head %u, "
             "tail %u)", unit->path, slot, s->event_head, s->event_tail);
        return -1;
    }
    return 0;
}

/* Whether the child has ended, leaving it to the caller to reap. */
static int child_ended(pid_t child, char *err, size_t errlen)
{
    siginfo_t info;

    memset(&info, 0, sizeof(info));
    if (waitid(P_PID, (id_t)child, &info, WEXITED | WNOHANG | WNOWAIT) < 0) {
        if (errno == EINTR)
            return 0;
        fail(err, errlen, "waiting for process %d: %s", (int)child,
             strerror(errno));
        return -1;
    }
    return info.si_pid == child;
}

/*
 * The next poll interval: halved when a poll found the FIFO or the event
 * ring more than half full, doubled when it found both less than an
 * eighth, so a slow sampling rate costs few wake-ups and a fast one (or
 * frequent overlay loads) loses few captures and events.
 */
static long next_poll_us(long interval, uint64_t found, uint32_t depth,
                         uint64_t events)
{
    if ((found > depth / 2 || events > TRACE_EVENT_DEPTH / 2)
        && interval > POLL_MIN_US)
        return interval / 2;
    if (found < depth / 8 && events < TRACE_EVENT_DEPTH / 8
        && interval < POLL_MAX_US)
        return interval * 2;
    return interval;
}

/* Sleeps for the interval, or until the child ends (pidfd readable). */
static void sleep_or_exit(int pidfd, long interval_us)
{
    struct timespec timeout = { interval_us / 1000000,
                                (interval_us % 1000000) * 1000 };
    struct pollfd exit_event = { pidfd, POLLIN, 0 };

    if (pidfd < 0 || ppoll(&exit_event, 1, &timeout, NULL) < 0)
        nanosleep(&timeout, NULL);
}

/*
 * Until the next drain: under the stall policy the emulator waits for us,
 * so we wait on the doorbell (`seen`: its value before the last drain),
 * which it rings at the watermark and while it stalls, for at most the
 * interval (the emulator's end rings nothing); otherwise for the
 * interval, or until the child ends.
 */
static void wait_for_work(const struct trace_run *run, int pidfd,
                          long interval_us, uint32_t seen)
{
    const struct trace_regs_slot *s = trace_unit_slot(run->unit, run->slot);

    if (__atomic_load_n(&s->fifo_policy, __ATOMIC_RELAXED)
        == TRACE_FIFO_STALL)
        trace_doorbell_wait(&run->unit->header->doorbell, seen,
                            (uint64_t)interval_us * 1000u);
    else
        sleep_or_exit(pidfd, interval_us);
}

/* ---- Emulator ----------------------------------------------------------- */

struct trace_regs_context *trace_context_attach(struct trace_unit *unit,
                                                uint32_t context,
                                                uint32_t mode,
                                                char *err, size_t errlen)
{
    struct trace_regs_context *ctx = trace_unit_context(unit, context);
    pid_t self = getpid();
    int32_t owner;

    if (!ctx) {
        fail(err, errlen, "%s: context %u is out of range (%u contexts)",
             unit->path, context, unit->header->n_contexts);
        return NULL;
    }
    owner = __atomic_load_n(&ctx->pid, __ATOMIC_ACQUIRE);
    if (owner > 0 && owner != self && !process_is_gone(owner)
        && __atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE)
           != TRACE_CONTEXT_EXITED) {
        fail(err, errlen, "%s: context %u is attached to emulator pid %d",
             unit->path, context, (int)owner);
        return NULL;
    }
    __atomic_store_n(&ctx->pid, (int32_t)self, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->mode, mode, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->instructions, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->check_cycle, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->status, TRACE_CONTEXT_RUNNING, __ATOMIC_RELEASE);
    return ctx;
}

uint32_t trace_context_wait_open(const struct trace_unit *unit,
                                 struct trace_regs_context *context)
{
    uint32_t gate = __atomic_load_n(&context->gate, __ATOMIC_ACQUIRE);

    while (!trace_gate_is_open(gate)) {
        __atomic_store_n(&context->status, TRACE_CONTEXT_HELD,
                         __ATOMIC_RELEASE);
        __atomic_store_n(&context->ack, gate, __ATOMIC_RELEASE);
        futex_wake_all(&context->ack);
        futex_wait_ms(&context->gate, gate, WAIT_SLICE_MS * 10);
        if (process_is_gone(__atomic_load_n(&unit->header->controller_pid,
                                            __ATOMIC_ACQUIRE)))
            return TRACE_NONE;
        gate = __atomic_load_n(&context->gate, __ATOMIC_ACQUIRE);
    }
    __atomic_store_n(&context->status, TRACE_CONTEXT_RUNNING, __ATOMIC_RELEASE);
    __atomic_store_n(&context->ack, gate, __ATOMIC_RELEASE);
    return gate;
}

void trace_context_exit(struct trace_regs_context *context,
                        uint64_t instructions)
{
    __atomic_store_n(&context->instructions, instructions, __ATOMIC_RELEASE);
    __atomic_store_n(&context->status, TRACE_CONTEXT_EXITED, __ATOMIC_RELEASE);
    futex_wake_all(&context->ack);
}

/* ---- Running the plugin ------------------------------------------------- */

static int file_exists(const char *path)
{
    return access(path, R_OK) == 0;
}

int trace_plugin_path(char *buf, size_t len)
{
    static const char *const beside[] = {
        "../lib/libcoptrace.so", "../lib/coprof/libcoptrace.so",
    };
    const char *env = getenv("COPROF_TRACE_PLUGIN");
    char exe[PATH_MAX];
    ssize_t n;
    char *slash;

    if (env && *env) {
        if ((size_t)snprintf(buf, len, "%s", env) >= len)
            return -1;
        return file_exists(buf) ? 0 : -1;
    }
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n < 0)
        return -1;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
        if ((size_t)snprintf(buf, len, "%s/%s", exe, beside[i]) >= len)
            return -1;
        if (file_exists(buf))
            return 0;
    }
    return -1;
}

/* Appends text to buf at *used, doubling every comma when `escape` is set
 * (QEMU's option syntax for a literal comma). */
static int append(char *buf, size_t len, size_t *used, const char *text,
                  int escape)
{
    for (; *text; text++) {
        int doubled = escape && *text == ',';

        if (*used + 1 + doubled >= len)
            return -1;
        buf[(*used)++] = *text;
        if (doubled)
            buf[(*used)++] = ',';
    }
    buf[*used] = '\0';
    return 0;
}

/* "PLUGIN,regs=REGS,WHO=N,mode=M" (who: context or slot), then each
 * non-NULL ",KEY=PATH" of keys/paths (n of them); -1 if too long. */
static int plugin_arg(char *buf, size_t len, const char *plugin,
                      const char *regs, const char *who, uint32_t n,
                      uint32_t mode, const char *const keys[],
                      const char *const paths[], size_t n_paths)
{
    char tail[64];
    size_t used = 0;

    snprintf(tail, sizeof(tail), ",%s=%u,mode=%s", who, n,
             mode == TRACE_MODE_REFERENCE ? "reference" : "fast");
    if (!len || append(buf, len, &used, plugin, 1) < 0
        || append(buf, len, &used, ",regs=", 0) < 0
        || append(buf, len, &used, regs, 1) < 0
        || append(buf, len, &used, tail, 0) < 0)
        return -1;
    for (size_t i = 0; i < n_paths; i++)
        if (paths[i] && (append(buf, len, &used, keys[i], 0) < 0
                         || append(buf, len, &used, paths[i], 1) < 0))
            return -1;
    return 0;
}

int trace_plugin_arg(char *buf, size_t len, const char *plugin,
                     const char *regs, uint32_t context, uint32_t mode,
                     const char *counts, const char *ram)
{
    static const char *const keys[] = { ",counts=", ",ram=" };
    const char *const paths[] = { counts, ram };

    return plugin_arg(buf, len, plugin, regs, "context", context, mode, keys,
                      paths, 2);
}

int trace_plugin_slot_arg(char *buf, size_t len, const char *plugin,
                          const char *regs, uint32_t slot, uint32_t mode,
                          const char *counts_dir, const char *ram,
                          const char *window)
{
    static const char *const keys[] = { ",ram=", ",countsdir=", ",window=" };
    const char *const paths[] = { ram, counts_dir, window };

    return plugin_arg(buf, len, plugin, regs, "slot", slot, mode, keys,
                      paths, 3);
}

/* ---- A simple traced run ------------------------------------------------ */

static int bind_and_load(struct trace_run *run, uint32_t count,
                         const struct trace_sampling *sampling,
                         char *err, size_t errlen)
{
    struct trace_regs_slot *slot = trace_unit_slot(run->unit, run->slot);
    uint32_t value = lfsr_value_for_count(count);

    if (!value) {
        fail(err, errlen, "sample count %u is outside 1..%u", count,
             LFSR_PERIOD);
        return -1;
    }
    if (trace_unit_bind(run->unit, run->context, run->slot, err, errlen) < 0)
        return -1;
    trace_slot_configure(slot,
                         sampling ? sampling->fifo_policy : TRACE_FIFO_DROP,
                         trace_default_watermark(run->unit->header->fifo_depth),
                         sampling && sampling->dither,
                         sampling ? sampling->dither_seed : 0);
    trace_slot_set_event(slot, sampling ? sampling->event : TRACE_EVENT_CYCLES);
    trace_slot_program(slot, value);
    trace_slot_load(slot, value);
    trace_unit_set_controller(run->unit, getpid());
    return 0;
}

static int format_plugin_arg(struct trace_run *run, uint32_t mode,
                             const char *counts, const char *ram,
                             char *err, size_t errlen)
{
    char plugin[PATH_MAX];

    if (trace_plugin_path(plugin, sizeof(plugin)) < 0) {
        fail(err, errlen, "cannot find libcoptrace.so beside this program "
             "(../lib); set COPROF_TRACE_PLUGIN");
        return -1;
    }
    if (trace_plugin_arg(run->plugin_arg, sizeof(run->plugin_arg), plugin,
                         run->unit->path, run->context, mode, counts,
                         ram) < 0) {
        fail(err, errlen, "%s: path too long for QEMU's -plugin option",
             run->unit->path);
        return -1;
    }
    return 0;
}

int trace_run_start(struct trace_run *run, const char *regs,
                    const struct trace_geometry *geo, uint32_t context,
                    uint32_t slot, uint32_t count, uint32_t mode,
                    const char *counts, const struct trace_watch *watch,
                    const struct trace_sampling *sampling,
                    char *err, size_t errlen)
{
    int watching = watch && watch->guard_count;
    struct trace_regs_slot *s;

    memset(run, 0, sizeof(*run));
    run->context = context;
    run->slot = slot;
    run->private_file = !regs;
    run->unit = regs ? trace_unit_open(regs, err, errlen)
                     : trace_unit_create_temp(NULL, geo, err, errlen);
    if (!run->unit)
        return -1;
    if (format_plugin_arg(run, mode, counts, watch ? watch->ram : NULL,
                          err, errlen) < 0
        || trace_context_watch_guards(run->unit, context,
                                      watching ? watch->guard_ls_offset : 0,
                                      watching ? watch->guard_count : 0,
                                      err, errlen) < 0
        || bind_and_load(run, count, sampling, err, errlen) < 0) {
        trace_run_end(run);
        return -1;
    }
    s = trace_unit_slot(run->unit, slot);
    trace_slot_status(run->unit, slot, &run->start);
    run->fifo_base = __atomic_load_n(&s->fifo_head, __ATOMIC_ACQUIRE);
    run->start_event_overflow = __atomic_load_n(&s->event_overflow,
                                                __ATOMIC_ACQUIRE);
    trace_context_release(trace_unit_context(run->unit, context));
    return 0;
}

void trace_run_report(const struct trace_run *run, FILE *out)
{
    const struct trace_regs_context *ctx = trace_unit_context(run->unit,
                                                              run->context);
    const struct trace_regs_slot *slot = trace_unit_slot(run->unit, run->slot);
    struct trace_slot_status now;

    if (__atomic_load_n(&ctx->guard_count, __ATOMIC_ACQUIRE))
        fprintf(out, "events=%llu events_dropped=%u\n",
                (unsigned long long)run->events_drained,
                __atomic_load_n(&slot->event_overflow, __ATOMIC_ACQUIRE)
                - run->start_event_overflow);
    trace_slot_status(run->unit, run->slot, &now);
    if (__atomic_load_n(&slot->fifo_policy, __ATOMIC_ACQUIRE)
        == TRACE_FIFO_STALL)
        fprintf(out, "stalls=%llu stall_ns=%llu\n",
                (unsigned long long)(now.stalls - run->start.stalls),
                (unsigned long long)(now.stall_ns - run->start.stall_ns));
    fprintf(out, "captures=%llu dropped=%llu instructions=%llu "
            "outside_ls=%llu\n",
            (unsigned long long)(now.captures - run->start.captures),
            (unsigned long long)(now.dropped - run->start.dropped),
            (unsigned long long)__atomic_load_n(&ctx->instructions,
                                                __ATOMIC_ACQUIRE),
            (unsigned long long)(now.outside - run->start.outside));
}

/* Unlinks a private register file once the emulator has mapped it. */
static void forget_private_file(struct trace_run *run)
{
    const struct trace_regs_context *ctx = trace_unit_context(run->unit,
                                                              run->context);

    if (!run->private_file || run->file_removed
        || __atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE)
           == TRACE_CONTEXT_IDLE)
        return;
    unlink(run->unit->path);
    run->file_removed = 1;
}

/* Drains the FIFO, then the overlay events (the order trace-regs.h asks). */
static int drain_run(struct trace_run *run, FILE *out, FILE *reasons,
                     FILE *events, char *err, size_t errlen)
{
    if (trace_slot_drain_to(run->unit, run->slot, out, reasons,
                            &run->drained, err, errlen) < 0)
        return -1;
    return trace_slot_drain_events_to(run->unit, run->slot, run->fifo_base,
                                      events, &run->events_drained,
                                      err, errlen);
}

int trace_run_consume(struct trace_run *run, pid_t child, int drain,
                      FILE *out, FILE *reasons, FILE *events,
                      char *err, size_t errlen)
{
    int pidfd = pidfd_open(child, 0);
    long interval = POLL_MIN_US;
    int failed = 0, ended;

    for (;;) {
        uint64_t before = run->drained, events_before = run->events_drained;
        uint32_t seen = __atomic_load_n(&run->unit->header->doorbell,
                                        __ATOMIC_ACQUIRE);

        ended = child_ended(child, err, errlen);
        if (ended < 0)
            break;
        forget_private_file(run);
        if ((drain || ended) && !failed
            && drain_run(run, out, reasons, events, err, errlen) < 0)
            failed = 1;     /* keep waiting for the child, then report */
        if (ended)
            break;
        interval = next_poll_us(interval, run->drained - before,
                                run->unit->header->fifo_depth,
                                run->events_drained - events_before);
        wait_for_work(run, pidfd, interval, seen);
    }
    if (pidfd >= 0)
        close(pidfd);
    return ended < 0 || failed ? -1 : 0;
}

void trace_run_end(struct trace_run *run)
{
    trace_unit_close(run->unit, run->private_file && !run->file_removed);
    run->unit = NULL;
}
