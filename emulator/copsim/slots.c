/*
 * slots.c — copsim's slot model (--context-model=slot): a slot is one
 * long-lived qemu-system-riscv32 running the resident slot stub
 * (stub/slot-stub.S), and a context is saved state.
 *
 * At start copsim looks for the QEMU program; a slot's emulator starts at
 * the first bind to that slot (slots_ensure): its own 64 MiB RAM file with
 * the stub and the stub's control block (one entry, in place), a
 * main-memory window (an ivshmem BAR at SLOT_MAIN_BASE, SLOT_MAIN_AREA
 * bytes), and the trace-unit plugin with slot=S, which follows whichever
 * context is bound to S.
 *
 * A context owns a main-memory file (a memfd: its image window, its data
 * window SLOT_MAIN_DATA bytes in, SLOT_MAIN_AREA bytes, then its local
 * store and boot block at SLOT_MAIN_LS, mapped by copsim as `saved`; the
 * client maps its data window from it, as it mapped its RAM file), and,
 * between binds, the stub's save area (registers, pc, its own M-mode
 * CSRs) and, with --call-graph, its shadow stack as the plugin saved it.
 * A run loads the image through the project's loader into a scratch RAM,
 * puts its local store and boot block and its image window into its file
 * and names the window in the boot block; no instruction is changed (the stub runs the context in
 * user mode and emulates what it does in machine mode: slot-stub.h), then
 * it queues the context.
 *
 * The scheduler binds it as before (register file, mailbox, bind hook,
 * gate) and around that puts its state on the slot while the stub waits
 * (slots_bind): its save area in the entry, its file in SLOT_H_WINDOW and
 * its saved call stack at SLOT_STACK_SAVE; then it marks the entry
 * runnable and rings the doorbell (slots_go).  The stub passes
 * SLOT_STUB_FLUSH, where the plugin maps the context's file over the
 * window, copies its local store and boot block from the file into the
 * slot's RAM and has QEMU drop every translation of the previous context
 * if the incoming code differs.  To preempt, it asks the stub for the
 * context back (PREEMPT, and the ring, an interrupt the stub takes at the
 * next block: raised by the plugin from the vCPU, whose slow path the
 * trace unit's check_cycle brings it to, or a byte to the slot's UART
 * with a plugin that cannot; ask_back), spins then sleeps on the entry's
 * state word until the stub has written it (slot-stub.h,
 * SLOT_SWITCH_SPIN_NS), keeps its save area (slots_hand_back), then
 * unbinds it as before.  Before the stub writes that state, the plugin
 * has copied the local store and boot block back to the file.  The run's
 * thread sees its end in the entry (EXITED or FAULTED, written after the
 * plugin has counted it), or a kill (cycle limit, client gone: the
 * context is handed back and dropped), and retires it.
 *
 * One thread per slot passes the slot's console (QEMU's stdout) to the
 * context bound to it, whole lines at a time (console.c); every byte a
 * context printed is in the pipe before the stub hands it back or ends
 * it, and is forwarded to it before it is unbound.
 */
#include "emulator/copsim/copsim-int.h"

#include "trace-unit/trace-unit.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STUB_SLICE_TICKS    10000000u       /* 1 s on the 10 MHz timer: a
                                               backstop; the ring preempts */
#define END_WAIT_NS         100000000u  /* then looks at the client */
#define QUEUED_WAIT_MS      1000        /* the same while queued */
#define HAND_BACK_LOOK_NS   100000000L  /* then looks whether QEMU died */
#define STOP_WAIT_MS        2000
#define SWITCH_US_MAX       4000        /* switches timed to the us up to */

/* The stub, built by module.mk (ld -r -b binary of its raw bytes). */
extern const unsigned char _binary_slot_stub_bin_start[];
extern const unsigned char _binary_slot_stub_bin_end[];

struct slot_emulator {
    uint32_t index;
    int ram_fd;
    unsigned char *ram;             /* guest 0x80000000, SLOT_RAM_SIZE */
    char ram_path[64];              /* what QEMU opens */
    int window_fd;                  /* the main-memory window's own file, */
    char window_path[64];           /* which the plugin maps contexts' over */
    pid_t pid;
    int pidfd;
    int console;                    /* read ends of QEMU's stdout, */
    int errors;                     /* and stderr */
    int ring_fd;                    /* write end of its stdin: the ring */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t console_lock;
    struct console_out *target;     /* the bound context's console */
    struct line_tracker error_lines;
    int dead;                       /* its QEMU ended (atomic) */
    uint64_t ring_ns;               /* a hand-back's ring, while the
                                       switch it began is not timed */
    int switch_pending;             /* the next context was let go */
    uint32_t *switch_us;            /* switches by us, SWITCH_US_MAX + 1 */
};

struct slot_model {
    struct copsim *sim;
    pthread_mutex_t scratch_lock;
    struct cop_ram scratch;         /* the loader's RAM */
    uint32_t n_slots;
    struct slot_emulator *slots;
};

/* ---- The stub's control block ------------------------------------------- */

static volatile uint32_t *control_word(const struct slot_emulator *e,
                                       uint32_t offset)
{
    return (volatile uint32_t *)(e->ram + (SLOT_CTL_BASE - SLOT_LS_BASE)
                                 + offset);
}

/* A word of the slot's one entry. */
static volatile uint32_t *entry_word(const struct slot_emulator *e,
                                     uint32_t offset)
{
    return control_word(e, SLOT_H_SIZE + offset);
}

static uint32_t entry_state(const struct slot_emulator *e)
{
    return __atomic_load_n(entry_word(e, SLOT_C_STATE), __ATOMIC_ACQUIRE);
}

static void set_entry_state(struct slot_emulator *e, uint32_t state)
{
    __atomic_store_n(entry_word(e, SLOT_C_STATE), state, __ATOMIC_RELEASE);
}

/* Rings the doorbell the vCPU waits on when its stub is idle; no system
 * call while the vCPU does not sleep (it spins right after a hand-back). */
static void ring(struct slot_emulator *e)
{
    trace_handshake_ring((uint32_t *)control_word(e, SLOT_H_DOORBELL),
                         (uint32_t *)control_word(e, SLOT_H_BELL_SLEEPERS));
}

/* Interrupts the running context at once (slot-stub.h, "The ring"): a
 * byte on the emulator's stdin, which its UART receives.  A full pipe
 * already holds bytes, and so an interrupt, for the stub. */
static void ring_guest(struct slot_emulator *e)
{
    ssize_t n;

    do {
        n = write(e->ring_fd, "", 1);
    } while (n < 0 && errno == EINTR);
}

/* Asks the stub for the bound context c back at its next block
 * (slot-stub.h, "The ring"): raised by the plugin from the vCPU when it
 * can (SLOT_H_SOFT_RING), else through the UART. */
static void ask_back(struct slot_model *m, struct slot_emulator *e,
                     const struct sim_context *c)
{
    __atomic_store_n(entry_word(e, SLOT_C_PREEMPT), 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(control_word(e, SLOT_H_SOFT_RING), __ATOMIC_ACQUIRE))
        trace_context_kick(trace_unit_context(m->sim->unit,
                                              c->info.trace_context));
    else
        ring_guest(e);
}

/* ---- Memory ------------------------------------------------------------- */

/* An anonymous file of size bytes (sparse); QEMU opens it as
 * /proc/PID/fd/N of copsim (path, when not NULL). */
static int make_memfd(const char *name, size_t size, int *fd, char *path,
                      size_t pathlen, char *err, size_t errlen)
{
    *fd = memfd_create(name, MFD_CLOEXEC);
    if (*fd < 0 || ftruncate(*fd, (off_t)size) < 0) {
        int error = errno;
        char why[COPSIM_TEXT_MAX];

        snprintf(err, errlen, "%s: cannot create: %s", name,
                 copsim_fd_error(error, why, sizeof(why)));
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
        errno = error == EMFILE || error == ENFILE ? error : ENOMEM;
        return -1;
    }
    if (path)
        snprintf(path, pathlen, "/proc/%d/fd/%d", (int)getpid(), *fd);
    return 0;
}

/* An anonymous file of size bytes, mapped shared. */
static int map_memfd(const char *name, size_t size, int *fd,
                     unsigned char **base, char *path, size_t pathlen,
                     char *err, size_t errlen)
{
    if (make_memfd(name, size, fd, path, pathlen, err, errlen) < 0)
        return -1;
    *base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    if (*base == MAP_FAILED) {
        *base = NULL;
        snprintf(err, errlen, "%s: cannot map: %s", name, strerror(errno));
        return -1;
    }
    return 0;
}

static void unmap_memfd(int *fd, unsigned char **base, size_t size)
{
    if (*base)
        munmap(*base, size);
    if (*fd >= 0)
        close(*fd);
    *base = NULL;
    *fd = -1;
}

/* The context's local store and boot block in its file (SLOT_MAIN_LS),
 * their pages reserved (memory running out is an error now, not a
 * SIGBUS), mapped as `saved`. */
static int map_local_store(struct sim_context *c, char *err, size_t errlen)
{
    int error = posix_fallocate(c->main_fd, SLOT_MAIN_LS, SLOT_SWAP_SIZE);
    void *base;

    if (error) {
        snprintf(err, errlen, "coprof-context: cannot reserve its local "
                 "store (%u bytes): %s", SLOT_SWAP_SIZE, strerror(error));
        errno = ENOMEM;
        return -1;
    }
    base = mmap(NULL, SLOT_SWAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                c->main_fd, SLOT_MAIN_LS);
    if (base == MAP_FAILED) {
        snprintf(err, errlen, "coprof-context: cannot map its local store: "
                 "%s", strerror(errno));
        errno = ENOMEM;
        return -1;
    }
    c->saved = base;
    return 0;
}

/*
 * Main memory: every context has a file of its own (its image, its data
 * window SLOT_MAIN_DATA bytes in, sparse, SLOT_MAIN_AREA bytes; then its
 * local store and boot block at SLOT_MAIN_LS), which its client maps and
 * the plugin of the slot it is bound to maps over the slot's window (and
 * whose local store it copies into the slot's RAM and back); only the
 * pages written take memory.  A context holds one descriptor of copsim's, so
 * copsim raises its open-files limit to the hard one at start
 * (slots_start).
 */
int slots_context_new(struct copsim *sim, struct sim_context *c, char *err,
                      size_t errlen)
{
    (void)sim;
    char why[COPSIM_TEXT_MAX];
    struct stat st;

    c->main_fd = -1;
    c->console = calloc(1, sizeof(*c->console));
    if (!c->console) {
        snprintf(err, errlen, "out of memory for a context's saved state");
        errno = ENOMEM;
        return -1;
    }
    if (make_memfd("coprof-context", SLOT_MAIN_LS + SLOT_SWAP_SIZE,
                   &c->main_fd, NULL, 0, err, errlen) < 0
        || map_local_store(c, err, errlen) < 0)
        return -1;
    if (fstat(c->main_fd, &st) < 0) {
        snprintf(err, errlen, "coprof-context: %s", strerror(errno));
        return -1;
    }
    c->main_id = (uint64_t)st.st_ino;
    c->bound_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->bound_fd < 0) {
        snprintf(err, errlen, "eventfd: %s",
                 copsim_fd_error(errno, why, sizeof(why)));
        return -1;
    }
    c->info.ram = NULL;             /* until it is bound to a slot */
    c->info.ram_size = SLOT_SWAP_SIZE;
    return 0;
}

int slots_data_window(const struct copsim *sim, const struct sim_context *c,
                      uint64_t *offset)
{
    (void)sim;
    *offset = SLOT_MAIN_DATA;
    return c->main_fd;
}

void slots_context_free(struct copsim *sim, struct sim_context *c)
{
    (void)sim;
    if (c->main_fd >= 0)
        close(c->main_fd);
    c->main_fd = -1;
    if (c->bound_fd >= 0)
        close(c->bound_fd);
    c->bound_fd = -1;
    if (c->saved)
        munmap(c->saved, SLOT_SWAP_SIZE);
    free(c->console);
    free(c->call_stack);
    c->call_stack = NULL;
    c->call_stack_len = 0;
    c->saved = NULL;
    c->console = NULL;
}

/* The image into the context's main-memory file, its pages reserved
 * first, so that memory running out is an error now, not a SIGBUS. */
static int place_image(struct sim_context *c, const void *bytes, size_t size,
                       char *err, size_t errlen)
{
    size_t at = 0;
    int error = posix_fallocate(c->main_fd, 0, (off_t)size);

    if (error) {
        snprintf(err, errlen, "%s: main memory: cannot reserve %zu bytes "
                 "for the image: %s", c->image.label, size, strerror(error));
        return -1;
    }
    while (at < size) {
        ssize_t n = pwrite(c->main_fd, (const char *)bytes + at, size - at,
                           (off_t)at);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, errlen, "%s: main memory: cannot write the image: "
                     "%s", c->image.label, n < 0 ? strerror(errno) : "short");
            return -1;
        }
        at += (size_t)n;
    }
    return 0;
}

/* ---- Loading ------------------------------------------------------------ */

/*
 * The context's starting state: the loader lays the image out in the
 * scratch RAM; its local store and boot block become `saved`, its image
 * window goes to the context's area, which the boot block then names.
 */
static int prepare(struct slot_model *m, struct sim_context *c, int argc,
                   char **argv, char *err, size_t errlen)
{
    struct cop_boot_block *boot;
    struct cop_error cerr;
    int status;

    if (c->image.size > SLOT_MAIN_DATA) {
        snprintf(err, errlen, "%s: %zu bytes: a slot's main memory keeps "
                 "images of at most %u", c->image.label, c->image.size,
                 SLOT_MAIN_DATA);
        return -1;
    }
    pthread_mutex_lock(&m->scratch_lock);
    status = cop_ram_load(&m->scratch, &c->image, argc, argv, &cerr);
    if (status == 0) {
        memcpy(c->saved, m->scratch.base, SLOT_SWAP_SIZE);
        status = place_image(c, cop_ram_at(&m->scratch, COP_IMAGE_BASE,
                                           c->image.size),
                             c->image.size, err, errlen);
    } else {
        snprintf(err, errlen, "%s", cerr.message);
    }
    pthread_mutex_unlock(&m->scratch_lock);
    if (status < 0)
        return -1;
    /* Every context's windows are at the one window of its slot. */
    boot = (struct cop_boot_block *)(c->saved + (COP_BOOT_BASE - SLOT_LS_BASE));
    boot->image_addr = SLOT_MAIN_BASE;
    boot->data_addr = SLOT_MAIN_BASE + SLOT_MAIN_DATA;
    memset(c->save_area, 0, sizeof(c->save_area));
    /* It starts where a QEMU of its own starts: the reset code, which
     * jumps to the entry point; its six instructions count, as there. */
    c->save_area[SLOT_C_PC / 4] = SLOT_RESET_VECTOR;
    c->call_stack_len = 0;          /* an empty call stack */
    console_out_init(c->console, -1);
    return 0;
}

/* ---- The scheduler's side ----------------------------------------------- */

/* --call-graph: the context's shadow stack where the plugin restores it
 * from (four zero bytes: empty). */
static void place_call_stack(struct slot_emulator *e,
                             const struct sim_context *c)
{
    unsigned char *at = e->ram + (SLOT_STACK_SAVE - SLOT_LS_BASE);

    if (c->call_stack_len)
        memcpy(at, c->call_stack, c->call_stack_len);
    else
        memset(at, 0, 4);
}

/* --call-graph: keeps the stack the plugin saved at the hand-back. */
static void keep_call_stack(const struct slot_emulator *e,
                            struct sim_context *c)
{
    const unsigned char *at = e->ram + (SLOT_STACK_SAVE - SLOT_LS_BASE);
    uint32_t magic, length;
    unsigned char *copy;

    memcpy(&magic, at, 4);
    memcpy(&length, at + SLOT_STACK_LENGTH, 4);
    if (magic != SLOT_STACK_MAGIC || length < 8
        || length > SLOT_STACK_SAVE_SIZE) {
        fprintf(stderr, "copsim: slot %u: no call stack handed back with "
                "context %" PRIu64 "; it goes on with an empty one\n",
                e->index, c->info.id);
        c->call_stack_len = 0;
        return;
    }
    copy = realloc(c->call_stack, length);
    if (!copy) {
        fprintf(stderr, "copsim: context %" PRIu64 ": out of memory for its "
                "call stack (%u bytes); it goes on with an empty one\n",
                c->info.id, length);
        c->call_stack_len = 0;
        return;
    }
    memcpy(copy, at, length);
    c->call_stack = copy;
    c->call_stack_len = length;
}

/* Where c's local store is read (info.ram and its guard words): the
 * slot's RAM while it is bound, its file while it is not. */
static void point_at_local_store(struct sim_context *c, unsigned char *ls)
{
    c->info.ram = ls;
    if (c->info.n_regions)
        c->info.guard_words = (const volatile uint32_t *)
            (ls + c->info.guard_ls_offset);
}

/*
 * The plugin copies c's local store and boot block from its file into the
 * slot's RAM at the stub's SLOT_STUB_FLUSH, after slots_go(); its guard
 * words are copied here already, so that the bind hook reads them where
 * the driver will watch them while c runs.
 */
void slots_bind(struct slot_model *m, uint32_t slot, struct sim_context *c)
{
    struct slot_emulator *e = &m->slots[slot];

    if (m->sim->config.call_graph)
        place_call_stack(e, c);
    memcpy((void *)entry_word(e, 4), &c->save_area[1], SLOT_CTX_SIZE - 4);
    __atomic_store_n(entry_word(e, SLOT_C_PREEMPT), 0, __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)(void *)control_word(e, SLOT_H_WINDOW_ID),
                     c->main_id, __ATOMIC_RELAXED);
    __atomic_store_n(control_word(e, SLOT_H_WINDOW), (uint32_t)c->main_fd + 1,
                     __ATOMIC_RELAXED);
    point_at_local_store(c, e->ram);
    if (c->info.n_regions)          /* for the bind hook, before the rest */
        memcpy(e->ram + c->info.guard_ls_offset,
               c->saved + c->info.guard_ls_offset, 4 * c->info.n_regions);
    pthread_mutex_lock(&e->console_lock);
    e->target = c->console;
    pthread_mutex_unlock(&e->console_lock);
}

/* Wakes the waiters for an end on the entry of slot e (slot-stub.h). */
static void wake_end_waiters(struct slot_emulator *e)
{
    syscall(SYS_futex, entry_word(e, SLOT_C_STATE), FUTEX_WAKE_BITSET,
            INT32_MAX, NULL, NULL, SLOT_WAKE_END);
}

/*
 * Lets c run, then tells its run's thread where to wait for the end, once
 * the vCPU is on its way (woken, the thread would take a CPU and the
 * scheduler's lock from the switch): at the first bind through its bind
 * eventfd; later only when it sleeps on another slot's entry.  On the
 * slot it ran on last, it sleeps on this very entry already: the plugin
 * wakes it for the end, not for a switch (wait_end).
 */
void slots_go(struct slot_model *m, uint32_t slot, struct sim_context *c)
{
    struct slot_emulator *e = &m->slots[slot];

    e->switch_pending = e->ring_ns != 0;
    set_entry_state(e, SLOT_RUNNABLE);
    ring(e);
    if (c->wait_slot < 0) {
        if (eventfd_write(c->bound_fd, 1) < 0)
            fprintf(stderr, "copsim: context %llu: eventfd: %s\n",
                    (unsigned long long)c->info.id, strerror(errno));
    } else if ((uint32_t)c->wait_slot != slot) {
        wake_end_waiters(&m->slots[c->wait_slot]);
    }
}

/*
 * Switches are timed from the ring of a hand-back to the first block of
 * the context bound next on the slot, which the plugin notes
 * (SLOT_H_TAKEN); this takes the time once that context has run: at the
 * slot's next hand-back or unbind, or at the stop.  A bind to a slot
 * whose context ended is not a switch.
 */
static void time_switch(struct slot_emulator *e)
{
    uint64_t taken = __atomic_load_n((uint64_t *)(void *)
                                     control_word(e, SLOT_H_TAKEN),
                                     __ATOMIC_ACQUIRE);
    uint64_t us;

    if (!e->switch_pending || !e->switch_us || taken <= e->ring_ns)
        return;
    us = (taken - e->ring_ns) / 1000;
    e->switch_us[us < SWITCH_US_MAX ? us : SWITCH_US_MAX]++;
    e->switch_pending = 0;
    e->ring_ns = 0;
}

/* The median, the 95th percentile and the count of the switches timed. */
static void switch_stats(const struct slot_emulator *e, uint32_t *median,
                         uint32_t *p95, uint32_t *count)
{
    uint64_t total = 0, seen = 0;

    *median = *p95 = 0;
    for (uint32_t us = 0; e->switch_us && us <= SWITCH_US_MAX; us++)
        total += e->switch_us[us];
    *count = (uint32_t)total;
    for (uint32_t us = 0; total && us <= SWITCH_US_MAX; us++) {
        uint64_t before = seen;

        seen += e->switch_us[us];
        if (before * 2 < total && seen * 2 >= total)
            *median = us;
        if (before * 20 < total * 19 && seen * 20 >= total * 19)
            *p95 = us;
    }
}

/* Forwards what the slot's console pipe holds now to the bound context. */
static void drain_console(struct slot_emulator *e)
{
    char buf[CONSOLE_CHUNK];
    ssize_t got;

    pthread_mutex_lock(&e->console_lock);
    while ((got = read(e->console, buf, sizeof(buf))) > 0)
        if (e->target)
            console_out_feed(e->target, buf, (size_t)got);
    pthread_mutex_unlock(&e->console_lock);
}

int slots_hand_back(struct slot_model *m, uint32_t slot,
                    struct sim_context *c, int timeout_ms)
{
    struct slot_emulator *e = &m->slots[slot];
    long long deadline = (long long)schedlog_monotonic_ns() + (long long)timeout_ms * 1000000;
    uint64_t spin = SLOT_SWITCH_SPIN_NS;
    uint32_t state;

    /* Spins for the stub's state, then sleeps: the plugin wakes us once
     * the stub has written it (slot-stub.h, SLOT_SWITCH_SPIN_NS). */
    time_switch(e);
    e->ring_ns = schedlog_monotonic_ns();
    e->switch_pending = 0;
    ask_back(m, e, c);
    while ((state = entry_state(e)) == SLOT_RUNNABLE) {
        long long left = deadline - (long long)schedlog_monotonic_ns();

        if (left <= 0 || __atomic_load_n(&e->dead, __ATOMIC_ACQUIRE))
            return -1;
        trace_handshake_wait((uint32_t *)entry_word(e, SLOT_C_STATE),
                             SLOT_RUNNABLE,
                             (uint32_t *)control_word(e,
                                                      SLOT_H_SWITCH_SLEEPERS),
                             spin, left < HAND_BACK_LOOK_NS
                                   ? (uint64_t)left : HAND_BACK_LOOK_NS);
        spin = 0;
    }
    if (state != SLOT_PREEMPTED) {
        e->ring_ns = 0;             /* no switch */
        return 1;                   /* it ended first */
    }
    trace_context_park(trace_unit_context(m->sim->unit,
                                          c->info.trace_context));
    memcpy(&c->save_area[1], (const void *)entry_word(e, 4),
           SLOT_CTX_SIZE - 4);
    if (m->sim->config.call_graph)
        keep_call_stack(e, c);
    drain_console(e);
    return 0;
}

void slots_unbind(struct slot_model *m, uint32_t slot,
                  struct sim_context *c)
{
    struct slot_emulator *e = &m->slots[slot];

    point_at_local_store(c, c->saved);  /* the plugin copied it back */
    time_switch(e);
    if (entry_state(e) != SLOT_PREEMPTED)
        e->ring_ns = 0;             /* it ended: the next bind is no switch */
    __atomic_store_n(entry_word(e, SLOT_C_PREEMPT), 0, __ATOMIC_RELAXED);
    __atomic_store_n(control_word(e, SLOT_H_KILL), 0, __ATOMIC_RELAXED);
    set_entry_state(e, SLOT_EMPTY);
    pthread_mutex_lock(&e->console_lock);
    e->target = NULL;
    pthread_mutex_unlock(&e->console_lock);
}

void slots_kill(struct slot_model *m, struct sim_context *c)
{
    if (c->slot >= 0) {
        __atomic_store_n(control_word(&m->slots[c->slot], SLOT_H_KILL), 1,
                         __ATOMIC_RELEASE);
        ask_back(m, &m->slots[c->slot], c);
    }
}

/* ---- A run -------------------------------------------------------------- */

struct slot_end {
    int ended;
    int slot;                       /* where it ended, or -1 */
    uint32_t state;                 /* the entry's, when it ended there */
    uint32_t status, cause, tval, pc;
    uint32_t handler;               /* its own mtvec; set at a fault: a
                                       trap storm (slot-stub.S) */
    int emulator_died;
};

/* Whether the run has ended (under the scheduler's lock): its entry says
 * EXITED or FAULTED, or it was handed back after a kill, or it was killed
 * while not on a slot, or its slot's emulator died. */
static void look_for_end(struct copsim *sim, struct sim_context *c,
                         struct slot_end *end, uint32_t **word,
                         uint32_t *seen)
{
    struct scheduler *s = &sim->sched;

    pthread_mutex_lock(&s->lock);
    memset(end, 0, sizeof(*end));
    end->slot = -1;
    *word = NULL;
    if (c->state == SIM_BOUND) {
        struct slot_emulator *e = &sim->slot_model->slots[c->slot];
        uint32_t state = entry_state(e);

        *word = (uint32_t *)entry_word(e, SLOT_C_STATE);
        *seen = state;

        end->slot = c->slot;
        end->state = state;
        end->emulator_died = __atomic_load_n(&e->dead, __ATOMIC_ACQUIRE);
        end->ended = state == SLOT_EXITED || state == SLOT_FAULTED
                     || (state == SLOT_PREEMPTED && c->kill != SIM_KILL_NONE)
                     || end->emulator_died;
        if (state == SLOT_PREEMPTED && c->kill == SIM_KILL_NONE) {
            /* handed back after the scheduler gave up waiting: run on */
            set_entry_state(e, SLOT_RUNNABLE);
            ring(e);
        }
        end->status = *entry_word(e, SLOT_C_STATUS);
        end->cause = *entry_word(e, SLOT_C_CAUSE);
        end->tval = *entry_word(e, SLOT_C_TVAL);
        end->pc = *entry_word(e, SLOT_C_PC);
        end->handler = *entry_word(e, SLOT_C_HANDLER);
        c->wait_slot = c->slot;
    } else {
        end->ended = c->kill != SIM_KILL_NONE;
        if (c->wait_slot >= 0) {        /* queued again after a switch */
            struct slot_emulator *e =
                &sim->slot_model->slots[c->wait_slot];

            *word = (uint32_t *)entry_word(e, SLOT_C_STATE);
            *seen = entry_state(e);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

/* Sleeps on an entry's state word while it reads seen, END_WAIT_NS at
 * most, woken for an end (SLOT_WAKE_END), not for a switch. */
static void wait_on_entry(uint32_t *word, uint32_t seen)
{
    struct timespec until;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += END_WAIT_NS;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    syscall(SYS_futex, word, FUTEX_WAIT_BITSET, seen, &until, NULL,
            SLOT_WAKE_END);
}

/*
 * Waits for the run's end, watching the client for a hang-up: until its
 * first bind, asleep in poll on the client and the context's bind
 * eventfd; from then on asleep on the state word of the entry it was
 * bound to last (c->wait_slot), looking at the client every END_WAIT_NS.
 * The plugin wakes it when the stub ends the context there, or hands it
 * back to end its run (a kill), not at a switch: time-sliced on one slot,
 * the run's thread sleeps throughout; bound to another slot, slots_go()
 * wakes it to sleep there.  Nothing polls.
 */
static void wait_end(struct copsim *sim, struct sim_context *c,
                     int client_sock, struct slot_end *end, int *client_gone)
{
    for (;;) {
        struct pollfd fds[2] = {
            { *client_gone ? -1 : client_sock, POLLIN, 0 },
            { c->bound_fd, POLLIN, 0 },
        };
        uint32_t *word, seen = 0;
        eventfd_t bound;

        look_for_end(sim, c, end, &word, &seen);
        if (end->ended)
            return;
        if (word) {
            wait_on_entry(word, seen);
            fds[1].fd = -1;
            if (poll(fds, 1, 0) <= 0)
                continue;
        } else if (poll(fds, 2, QUEUED_WAIT_MS) <= 0) {
            continue;
        }
        if (fds[1].revents)
            eventfd_read(c->bound_fd, &bound);
        if (fds[0].revents && emulator_client_event(client_sock)) {
            *client_gone = 1;
            scheduler_kill(&sim->sched, c, SIM_KILL_CLIENT);
        }
    }
}

/* The run's result: as a QEMU of its own would have ended (its status),
 * or why copsim ended it. */
static void classify_end(struct copsim *sim, struct sim_context *c,
                         const struct slot_end *end, enum sim_kill kill,
                         struct run_result *result)
{
    struct slot_emulator *e = end->slot >= 0
                              ? &sim->slot_model->slots[end->slot] : NULL;
    struct emulator_end how = { 0, (int)end->status };
    char said[LINE_MAX_KEPT + 64] = "";

    if (kill != SIM_KILL_ENDED) {       /* as the process model's SIGKILL */
        how.signaled = 1;
        how.code = SIGKILL;
    } else if (end->emulator_died) {
        how.signaled = 1;
        how.code = SIGKILL;
        snprintf(said, sizeof(said), "the emulator of slot %d ended: %s",
                 end->slot, tracker_last(&e->error_lines));
    } else if (end->state == SLOT_FAULTED && end->handler) {
        snprintf(said, sizeof(said), "trap storm at 0x%08x (mtvec 0x%08x)",
                 end->pc, end->handler);
    } else if (end->state == SLOT_FAULTED) {
        snprintf(said, sizeof(said), "cop: trap: mcause %u at 0x%08x "
                 "(mtval 0x%08x)", end->cause, end->pc, end->tval);
    }
    emulator_classify(end->state == SLOT_FAULTED
                      ? said : tracker_last(&c->console->cop_lines),
                      end->emulator_died ? said : "", &how, kill, c, result);
}

int slots_run(struct copsim *sim, struct sim_context *c, int client_sock,
              int console_fd, int argc, char **argv, uint64_t max_cycles,
              struct run_result *result, char *err, size_t errlen)
{
    struct trace_regs_context *regs = trace_unit_context(sim->unit,
                                                         c->info.trace_context);
    enum copsim_unbind_reason reason;
    struct slot_end end;
    enum sim_kill kill;

    memset(result, 0, sizeof(*result));
    c->wait_slot = -1;
    trace_context_park(regs);           /* on no emulator until bound */
    __atomic_store_n(&regs->instructions, 0, __ATOMIC_RELEASE);
    if (prepare(sim->slot_model, c, argc, argv, err, errlen) < 0
        || trace_context_watch_guards(sim->unit, c->info.trace_context,
                                      c->info.guard_ls_offset,
                                      trace_watchable_guards(
                                          c->info.n_regions),
                                      err, errlen) < 0)
        return -1;
    c->console->client = console_fd;
    scheduler_starting(&sim->sched, c, 0, max_cycles);
    schedlog_run(&sim->log, &c->info, (unsigned)argc);
    scheduler_make_runnable(&sim->sched, c);
    wait_end(sim, c, client_sock, &end, &result->client_gone);
    if (end.slot >= 0)
        drain_console(&sim->slot_model->slots[end.slot]);
    console_out_flush(c->console);
    kill = scheduler_disarm(&sim->sched, c);
    result->instructions = __atomic_load_n(&regs->instructions,
                                           __ATOMIC_ACQUIRE);
    classify_end(sim, c, &end, kill, result);
    reason = result->client_gone ? COPSIM_UNBIND_REAP
             : result->stop_reason == COPSIM_STOP_EXIT ? COPSIM_UNBIND_EXIT
                                                      : COPSIM_UNBIND_FAULT;
    scheduler_retire(&sim->sched, c, reason, result->exit_status,
                     result->instructions, result->detail);
    if (kill != SIM_KILL_ENDED || end.emulator_died)
        result->instructions = c->cycles_run;   /* what the slots saw */
    return 0;
}

/* ---- Slot emulators ----------------------------------------------------- */

/* Passes the slot's console on and keeps what QEMU says, until its
 * pipes close. */
static void *slot_thread(void *arg)
{
    struct slot_emulator *e = arg;
    int open_pipes = 2;

    while (open_pipes > 0) {
        struct pollfd fds[2] = {
            {e->console, POLLIN, 0}, {e->errors, POLLIN, 0},
        };
        char buf[CONSOLE_CHUNK];

        if (poll(fds, 2, -1) < 0 && errno != EINTR)
            break;
        if (fds[0].revents) {
            ssize_t got;

            pthread_mutex_lock(&e->console_lock);
            got = read(e->console, buf, sizeof(buf));
            if (got > 0 && e->target)
                console_out_feed(e->target, buf, (size_t)got);
            if (got == 0) {
                open_pipes--;
                e->console = -e->console - 2;   /* poll ignores it */
            }
            pthread_mutex_unlock(&e->console_lock);
        }
        if (fds[1].revents) {
            ssize_t got = read(e->errors, buf, sizeof(buf));

            if (got > 0)
                tracker_feed(&e->error_lines, buf, (size_t)got);
            if (got == 0) {
                open_pipes--;
                e->errors = -e->errors - 2;
            }
        }
    }
    __atomic_store_n(&e->dead, 1, __ATOMIC_RELEASE);
    return NULL;
}

static int build_command(struct copsim *sim, struct slot_emulator *e,
                         struct cop_argv *cmd, char *err, size_t errlen)
{
    char plugin[4 * COPSIM_PATH_MAX];
    int failed = 0;

    if (trace_plugin_slot_arg(plugin, sizeof(plugin), sim->plugin_path,
                              sim->regs_path, e->index,
                              sim->config.reference_mode
                                  ? TRACE_MODE_REFERENCE : TRACE_MODE_FAST,
                              sim->counts_dir, e->ram_path,
                              e->window_path) < 0) {
        snprintf(err, errlen, "%s: plugin argument too long", sim->regs_path);
        return -1;
    }
    cop_argv_init(cmd);
    failed |= cop_argv_add(cmd, sim->config.qemu_program
                                ? sim->config.qemu_program
                                : "qemu-system-riscv32");
    failed |= cop_argv_add(cmd, "-M");
    failed |= cop_argv_add(cmd, "virt,memory-backend=cop-ram");
    failed |= cop_argv_add(cmd, "-m");
    failed |= cop_argv_addf(cmd, "%uM", SLOT_RAM_SIZE >> 20);
    failed |= cop_argv_add(cmd, "-object");
    failed |= cop_argv_addf(cmd, "memory-backend-file,id=cop-ram,size=%uM,"
                            "mem-path=%s,share=on", SLOT_RAM_SIZE >> 20,
                            e->ram_path);
    failed |= cop_argv_add(cmd, "-object");
    failed |= cop_argv_addf(cmd, "memory-backend-file,id=cop-main,size=%uM,"
                            "mem-path=%s,share=on", SLOT_MAIN_AREA >> 20,
                            e->window_path);
    failed |= cop_argv_add(cmd, "-device");
    failed |= cop_argv_add(cmd, "ivshmem-plain,memdev=cop-main");
    failed |= cop_argv_add(cmd, "-cpu");
    failed |= cop_argv_add(cmd, "rv32,c=off");
    failed |= cop_argv_add(cmd, "-bios");
    failed |= cop_argv_add(cmd, "none");
    failed |= cop_argv_add(cmd, "-nodefaults");
    failed |= cop_argv_add(cmd, "-no-reboot");
    failed |= cop_argv_add(cmd, "-display");
    failed |= cop_argv_add(cmd, "none");
    failed |= cop_argv_add(cmd, "-chardev");
    failed |= cop_argv_add(cmd, "stdio,signal=off,id=cop-console");
    failed |= cop_argv_add(cmd, "-serial");
    failed |= cop_argv_add(cmd, "chardev:cop-console");
    failed |= cop_argv_add(cmd, "-device");
    failed |= cop_argv_addf(cmd, "loader,addr=0x%x,cpu-num=0",
                            SLOT_STUB_BASE);
    failed |= cop_argv_add(cmd, "-plugin");
    failed |= cop_argv_add(cmd, plugin);
    if (failed) {
        cop_argv_free(cmd);
        snprintf(err, errlen, "out of memory for the QEMU command");
        return -1;
    }
    return 0;
}

/* The slot's RAM: the stub and its control block (one entry, in place). */
static void lay_out_stub(struct slot_emulator *e)
{
    size_t size = (size_t)(_binary_slot_stub_bin_end
                           - _binary_slot_stub_bin_start);

    memcpy(e->ram + (SLOT_STUB_BASE - SLOT_LS_BASE),
           _binary_slot_stub_bin_start, size);
    *control_word(e, SLOT_H_MAGIC) = SLOT_MAGIC;
    *control_word(e, SLOT_H_COUNT) = 1;
    *control_word(e, SLOT_H_CURRENT) = SLOT_BOOTING;
    *control_word(e, SLOT_H_RESIDENT) = UINT32_MAX;
    *control_word(e, SLOT_H_SLICE) = STUB_SLICE_TICKS;
    *control_word(e, SLOT_H_INPLACE) = 1;
}

static int start_emulator(struct copsim *sim, struct slot_emulator *e,
                          char *err, size_t errlen)
{
    int console[2] = {-1, -1}, errors[2] = {-1, -1}, input[2] = {-1, -1};
    struct cop_error cerr;
    struct cop_argv cmd;
    int status;

    if (map_memfd("coprof-slot", SLOT_RAM_SIZE, &e->ram_fd, &e->ram,
                  e->ram_path, sizeof(e->ram_path), err, errlen) < 0
        || make_memfd("coprof-window", SLOT_MAIN_AREA, &e->window_fd,
                      e->window_path, sizeof(e->window_path), err,
                      errlen) < 0)
        return -1;
    lay_out_stub(e);
    e->switch_us = calloc(SWITCH_US_MAX + 1, sizeof(*e->switch_us));
    if (!e->switch_us) {
        snprintf(err, errlen, "slot %u: out of memory", e->index);
        return -1;
    }
    if (build_command(sim, e, &cmd, err, errlen) < 0)
        return -1;
    if (pipe2(console, O_CLOEXEC) < 0 || pipe2(errors, O_CLOEXEC) < 0
        || pipe2(input, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        cop_argv_free(&cmd);
        return -1;
    }
    status = cop_qemu_spawn_fds(&cmd, input[0], console[1], errors[1],
                                &e->pid, &cerr);
    cop_argv_free(&cmd);
    close(console[1]);
    close(errors[1]);
    close(input[0]);
    e->ring_fd = input[1];
    fcntl(e->ring_fd, F_SETFL, O_NONBLOCK);
    e->console = console[0];
    e->errors = errors[0];
    if (status < 0) {
        snprintf(err, errlen, "slot %u: %s", e->index, cerr.message);
        return -1;
    }
    fcntl(e->console, F_SETFL, O_NONBLOCK);
    e->pidfd = (int)syscall(SYS_pidfd_open, e->pid, 0);
    if (pthread_create(&e->thread, NULL, slot_thread, e) != 0) {
        snprintf(err, errlen, "slot %u: cannot start its thread", e->index);
        return -1;
    }
    e->thread_started = 1;
    return 0;
}

/* Slot emulators start on demand (slots_ensure), so a QEMU that is not
 * there is found out at copsim's start by a look along PATH, as execvp
 * would look. */
static int find_qemu(const struct copsim *sim, char *err, size_t errlen)
{
    const char *program = sim->config.qemu_program
                          ? sim->config.qemu_program : "qemu-system-riscv32";
    const char *path = getenv("PATH");
    char candidate[COPSIM_PATH_MAX];

    if (strchr(program, '/')) {
        if (access(program, X_OK) == 0)
            return 0;
    } else {
        for (const char *dir = path ? path : "/usr/bin:/bin"; *dir;) {
            size_t len = strcspn(dir, ":");

            snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)len,
                     len ? dir : ".", program);
            if (access(candidate, X_OK) == 0)
                return 0;
            dir += len + (dir[len] == ':');
        }
    }
    if (errno == ENOENT)
        snprintf(err, errlen, "%s: not found (install the Debian package "
                 "%s)", program, COP_QEMU_PACKAGE);
    else
        snprintf(err, errlen, "%s: cannot run: %s", program, strerror(errno));
    return -1;
}

/* A waiting context holds descriptors (its connection, its main-memory
 * file, its bind eventfd): thousands of them need more than the usual
 * soft limit of 1024 open files, up to the hard limit. */
static void raise_open_files(void)
{
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &limit) < 0)
            fprintf(stderr, "copsim: cannot raise the open-files limit to "
                    "%llu: %s\n", (unsigned long long)limit.rlim_max,
                    strerror(errno));
    }
}

int slots_start(struct copsim *sim, char *err, size_t errlen)
{
    struct slot_model *m = calloc(1, sizeof(*m));
    struct cop_error cerr;

    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    sim->slot_model = m;
    sim->sched.model = m;
    sim->sched.pin = sim->counts_dir != NULL;
    m->sim = sim;
    m->scratch.fd = -1;
    pthread_mutex_init(&m->scratch_lock, NULL);
    m->n_slots = sim->config.n_slots;
    m->slots = calloc(m->n_slots, sizeof(*m->slots));
    if (!m->slots) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < m->n_slots; i++) {
        struct slot_emulator *e = &m->slots[i];

        e->index = i;
        e->ram_fd = e->pidfd = e->console = e->errors = e->ring_fd = -1;
        e->window_fd = -1;
        e->error_lines.prefix = "";
        pthread_mutex_init(&e->console_lock, NULL);
    }
    raise_open_files();
    if (cop_ram_create(&m->scratch, NULL, &cerr) < 0) {
        snprintf(err, errlen, "%s", cerr.message);
        return -1;
    }
    return find_qemu(sim, err, errlen);
}

int slots_ensure(struct slot_model *m, uint32_t slot, char *err,
                 size_t errlen)
{
    struct slot_emulator *e = &m->slots[slot];

    if (e->pid > 0)
        return 0;
    if (e->ram_fd >= 0) {
        snprintf(err, errlen, "slot %u: its emulator failed to start",
                 slot);
        return -1;
    }
    return start_emulator(m->sim, e, err, errlen);
}

int slots_booted(struct slot_model *m, uint32_t slot)
{
    const struct slot_emulator *e = &m->slots[slot];

    return e->pid > 0 && __atomic_load_n(control_word(e, SLOT_H_CURRENT),
                                         __ATOMIC_ACQUIRE) != SLOT_BOOTING;
}

/* Ends a slot's emulator: closed, the stub ends QEMU once nothing runs;
 * killed if it does not within STOP_WAIT_MS.  Its counters go to stderr
 * (say), which a private copsim shares with its host program, so it says
 * nothing there. */
static void stop_emulator(struct slot_emulator *e, int say)
{
    if (e->pid > 0) {
        struct pollfd fd = { e->pidfd, POLLIN, 0 };
        uint32_t median, p95, timed;

        time_switch(e);
        switch_stats(e, &median, &p95, &timed);
        if (say)
            fprintf(stderr, "copsim: slot emulator %u: switches=%u "
                    "flushes=%u kept=%u rings=%u soft_rings=%u "
                    "interrupts=%u windows=%u opened=%u timed=%u "
                    "switch_us=%u switch_us_p95=%u\n",
                    e->index, *control_word(e, SLOT_H_SWITCHES),
                    *control_word(e, SLOT_H_FLUSHES),
                    *control_word(e, SLOT_H_KEPT),
                    *control_word(e, SLOT_H_RINGS),
                    *control_word(e, SLOT_H_SOFT_RINGS),
                    *control_word(e, SLOT_H_INTERRUPTS),
                    *control_word(e, SLOT_H_WINDOWS),
                    *control_word(e, SLOT_H_OPENED), timed, median, p95);

        __atomic_store_n(control_word(e, SLOT_H_CLOSED), 1, __ATOMIC_RELEASE);
        ring(e);
        if (e->pidfd < 0 || poll(&fd, 1, STOP_WAIT_MS) <= 0)
            kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
    }
    if (e->thread_started)
        pthread_join(e->thread, NULL);
    for (int *fd = &e->pidfd; fd; fd = fd == &e->pidfd ? &e->console
                                       : fd == &e->console ? &e->errors
                                                            : NULL) {
        if (*fd >= 0)
            close(*fd);
        else if (*fd < -1)
            close(-*fd - 2);
    }
    if (e->ring_fd >= 0)
        close(e->ring_fd);
    e->ring_fd = -1;
    unmap_memfd(&e->ram_fd, &e->ram, SLOT_RAM_SIZE);
    free(e->switch_us);
    e->switch_us = NULL;
    if (e->window_fd >= 0)
        close(e->window_fd);
    e->window_fd = -1;
    pthread_mutex_destroy(&e->console_lock);
}

void slots_stop(struct copsim *sim)
{
    struct slot_model *m = sim->slot_model;

    if (!m)
        return;
    for (uint32_t i = 0; m->slots && i < m->n_slots; i++)
        stop_emulator(&m->slots[i], sim->config.parent_pid <= 0);
    free(m->slots);
    if (m->scratch.fd >= 0)
        cop_ram_close(&m->scratch);
    pthread_mutex_destroy(&m->scratch_lock);
    sim->sched.model = NULL;
    sim->slot_model = NULL;
    free(m);
}
