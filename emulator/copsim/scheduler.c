/*
 * scheduler.c — contexts onto slots: binding, time slices, retiring, and
 * the driver's hooks.
 *
 * A context becomes runnable once its emulator waits at its closed run gate
 * (emulator.c checks that), and joins the tail of one FIFO run queue.  The
 * scheduler thread binds the head of the queue to the lowest free slot:
 *
 *   bind      register file bind, the bind hook, a "bind" record, then the
 *             gate opens and the context runs.
 *
 * Every tick (1 ms by default) while contexts wait for a slot, it reads
 * each busy slot's cycle counter; a context that has had its slice on its
 * slot is preempted:
 *
 *   preempt   close the gate and wait until the emulator acknowledges it at
 *             a block boundary; a "preempt" record, the unbind hook (the
 *             driver drains the slot), register file unbind, an "unbind"
 *             record, and the context goes to the tail of the queue, to be
 *             bound again to whichever slot is free next.
 *
 * A context whose emulator ended (emulator.c reaped it) is retired by the
 * thread that reaped it: an "exit" or "fault" record, and the same unbind
 * path when it was on a slot.  With a cycle limit the tick also watches
 * every context's total cycles and kills the emulator of one that went
 * over it (a looping program).
 *
 * Every step above runs with s->lock held, so bind and unbind hooks are
 * called one at a time, in the order the register file changed, and
 * nothing else is bound to a slot between an unbind and its hook.
 *
 * A test hook, the environment variable COPSIM_TEST_GATHER=N, makes the
 * scheduler bind nothing until N contexts wait in the run queue (once)
 * and, in the slot model, every slot's emulator has booted (they are
 * started when the first context comes): then contexts certainly wait
 * while others run on every slot, so a test with more contexts than slots
 * sees preemptions on each slot however the emulators' starts overlap.
 */
#include "emulator/copsim/copsim-int.h"

#include "trace-unit/trace-unit.h"

#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOLD_TIMEOUT_MS     500     /* an emulator that does not stop */
#define HAND_BACK_TIMEOUT_MS 5000   /* a slot stub that does not hand back
                                       (its emulator stalled on a full FIFO
                                       or held by the driver meanwhile) */
#define HOLD_RETRY_NS       1000000000ull
#define GATHER_ENV          "COPSIM_TEST_GATHER"
#define GATHER_TIMEOUT_NS   60000000000ull  /* a test whose contexts failed */

static uint64_t slot_cycles(const struct scheduler *s, uint32_t slot)
{
    const struct trace_regs_slot *regs = trace_unit_slot(s->unit, slot);

    return __atomic_load_n(&regs->cycles, __ATOMIC_ACQUIRE);
}

static struct trace_regs_context *regs_context(const struct scheduler *s,
                                               const struct sim_context *c)
{
    return trace_unit_context(s->unit, c->info.trace_context);
}

static void make_switch(const struct scheduler *s, uint32_t slot,
                        const struct sim_context *c,
                        struct copsim_switch *change)
{
    memset(change, 0, sizeof(*change));
    change->slot = slot;
    change->cycle = slot_cycles(s, slot);
    change->monotonic_ns = schedlog_monotonic_ns();
    change->context = &c->info;
}

/*
 * Posts a switch in its slot's mailbox (docs/trace-unit.md, "Mailbox"),
 * before the hooks run: the driver, hosted or in a guest, learns binds,
 * unbinds and ends from it.  BIND carries the context's and its image's
 * identity and its guard words as they are now.
 */
static void post_switch(const struct scheduler *s, uint32_t op,
                        const struct copsim_switch *change)
{
    struct trace_regs_mailbox *box = trace_unit_mailbox(s->unit,
                                                        change->slot);
    const struct copsim_context *c = change->context;
    size_t path_length = strlen(c->image.path);
    uint32_t seq = box->seq;

    memset(box, 0, offsetof(struct trace_regs_mailbox, ack));
    memset(box->guards, 0, sizeof(box->guards) + sizeof(box->path));
    box->seq = seq;
    box->op = op;
    box->context = c->trace_context;
    box->slot = change->slot;
    box->context_id = c->id;
    box->object_id = c->object_id;
    box->pid = c->pid;
    box->tid = c->tid;
    box->status = (uint32_t)change->exit_status;
    if (op == TRACE_MAILBOX_BIND) {
        box->image_offset = c->image.offset;
        box->image_device = c->image.device;
        box->image_inode = c->image.inode;
        box->image_file_size = c->image.file_size;
        box->image_hash = c->image.hash;
        box->path_length = (uint32_t)path_length;
        memcpy(box->path, c->image.path, path_length < sizeof(box->path)
               ? path_length : sizeof(box->path));
        box->guard_ls_offset = c->guard_ls_offset;
        box->guard_count = c->n_regions;
        for (uint32_t r = 0; r < c->n_regions && r < TRACE_MAX_GUARDS; r++)
            box->guards[r] = __atomic_load_n(&c->guard_words[r],
                                             __ATOMIC_ACQUIRE);
    }
    trace_mailbox_post(box);
}

/*
 * With a driver outside copsim reading the mailboxes (copdrv.ko in a
 * guest), waits until it acked the slot's message: it has drained the
 * slot and knows the switch before the next context runs.  Looks every
 * MAILBOX_LOOK_NS, for at most MAILBOX_WAIT_NS.
 */
#define MAILBOX_LOOK_NS 50000L
#define MAILBOX_WAIT_NS 1000000000LL

static void wait_switch_acked(const struct scheduler *s, uint32_t slot)
{
    const struct trace_regs_mailbox *box = trace_unit_mailbox(s->unit, slot);
    struct timespec look = { 0, MAILBOX_LOOK_NS };
    long long waited = 0;

    if (!__atomic_load_n(&s->unit->header->mailbox_reader, __ATOMIC_ACQUIRE))
        return;
    while (!trace_mailbox_acked(box)) {
        if (waited >= MAILBOX_WAIT_NS) {
            fprintf(stderr, "copsim: slot %u: the driver did not ack "
                    "mailbox message %u within 1 s; going on\n", slot,
                    box->seq);
            return;
        }
        nanosleep(&look, NULL);
        waited += MAILBOX_LOOK_NS;
    }
}

/* ---- The run queue ------------------------------------------------------ */

static void queue_push(struct scheduler *s, struct sim_context *c)
{
    c->next = NULL;
    if (s->queue_tail)
        s->queue_tail->next = c;
    else
        s->queue_head = c;
    s->queue_tail = c;
    c->state = SIM_QUEUED;
}

static struct sim_context *queue_pop(struct scheduler *s)
{
    struct sim_context *c = s->queue_head;

    if (c) {
        s->queue_head = c->next;
        if (!s->queue_head)
            s->queue_tail = NULL;
        c->next = NULL;
    }
    return c;
}

static void queue_remove(struct scheduler *s, struct sim_context *c)
{
    struct sim_context **link = &s->queue_head, *previous = NULL;

    while (*link && *link != c) {
        previous = *link;
        link = &(*link)->next;
    }
    if (!*link)
        return;
    *link = c->next;
    if (s->queue_tail == c)
        s->queue_tail = previous;
    c->next = NULL;
}

/* ---- Switches ----------------------------------------------------------- */

/* Ends c's run, once, for a reason (with s->lock held): kills its emulator,
 * or in the slot model has the stub hand it back (slots.c ends the run). */
static void kill_emulator(struct scheduler *s, struct sim_context *c,
                          enum sim_kill why)
{
    if (c->kill != SIM_KILL_NONE)
        return;
    if (s->model) {
        c->kill = why;
        slots_kill(s->model, c);
        return;
    }
    if (c->emulator <= 0)
        return;
    c->kill = why;
    kill(c->emulator, SIGKILL);
}

/* Binds c to the free slot and opens its gate. */
static void bind_slot(struct scheduler *s, uint32_t slot, struct sim_context *c)
{
    struct copsim_switch change;
    char err[256];

    if ((s->model && slots_ensure(s->model, slot, err, sizeof(err)) < 0)
        || trace_unit_bind(s->unit, c->info.trace_context, slot, err,
                           sizeof(err)) < 0) {
        fprintf(stderr, "copsim: context %llu: %s\n",
                (unsigned long long)c->info.id, err);
        schedlog_error(s->log, c->info.id, c->info.pid, err);
        c->state = SIM_STARTING;        /* not queued; retired when it dies */
        kill_emulator(s, c, SIM_KILL_BIND);
        return;
    }
    if (s->model)
        slots_bind(s->model, slot, c);     /* its state onto the slot */
    make_switch(s, slot, c, &change);
    s->slots[slot].bound = c;
    s->slots[slot].bind_cycle = change.cycle;
    c->slot = (int)slot;
    c->state = SIM_BOUND;
    c->binds++;
    post_switch(s, TRACE_MAILBOX_BIND, &change);
    if (s->hooks && s->hooks->bind)
        s->hooks->bind(s->hooks->data, &change);
    wait_switch_acked(s, slot);
    schedlog_bind(s->log, &change);
    trace_context_release(regs_context(s, c));
    if (s->model)
        slots_go(s->model, slot, c);
}

/* Takes the context off its slot, whose emulator has stopped. */
static void unbind_slot(struct scheduler *s, struct sim_context *c,
                        struct copsim_switch *change)
{
    uint32_t slot = change->slot;

    c->cycles_run += change->cycle - s->slots[slot].bind_cycle;
    post_switch(s, change->reason == COPSIM_UNBIND_PREEMPT
                ? TRACE_MAILBOX_UNBIND : TRACE_MAILBOX_END, change);
    if (s->hooks && s->hooks->unbind)
        s->hooks->unbind(s->hooks->data, change);
    wait_switch_acked(s, slot);
    trace_unit_unbind(s->unit, c->info.trace_context);
    schedlog_unbind(s->log, change);
    if (s->model)
        slots_unbind(s->model, slot, c);
    s->slots[slot].bound = NULL;
    c->slot = -1;
}

/* Stops c at its gate: 0, or 1 when it is ending or did not stop. */
static int hold_at_gate(struct scheduler *s, struct sim_context *c)
{
    struct trace_regs_context *regs = regs_context(s, c);
    uint32_t gate = trace_context_hold(regs);

    switch (trace_context_wait_held(regs, gate, HOLD_TIMEOUT_MS)) {
    case TRACE_WAIT_EXITED:
        return 1;               /* it is ending: retired when reaped */
    case TRACE_WAIT_TIMEOUT:
        fprintf(stderr, "copsim: context %llu did not stop at its gate "
                "within %d ms; it keeps slot %d\n",
                (unsigned long long)c->info.id, HOLD_TIMEOUT_MS, c->slot);
        trace_context_release(regs);
        c->retry_hold_ns = schedlog_monotonic_ns() + HOLD_RETRY_NS;
        return 1;
    }
    return 0;
}

/* Slot model: has the stub hand c back saved: 0, or 1 when it is ending
 * or was not handed back in time (it keeps its slot; retried later). */
static int take_back(struct scheduler *s, struct sim_context *c)
{
    switch (slots_hand_back(s->model, (uint32_t)c->slot, c,
                            HAND_BACK_TIMEOUT_MS)) {
    case 0:
        return 0;
    case 1:
        return 1;               /* it ended first: its run retires it */
    }
    fprintf(stderr, "copsim: context %llu was not handed back within %d "
            "ms; it keeps slot %d\n", (unsigned long long)c->info.id,
            HAND_BACK_TIMEOUT_MS, c->slot);
    c->retry_hold_ns = schedlog_monotonic_ns() + HOLD_RETRY_NS;
    return 1;
}

/* Ends c's time slice on its slot; it goes to the tail of the queue. */
static void preempt(struct scheduler *s, struct sim_context *c)
{
    uint64_t hold_start = schedlog_monotonic_ns();
    uint32_t slot = (uint32_t)c->slot;
    struct copsim_switch change;

    if (s->model ? take_back(s, c) : hold_at_gate(s, c))
        return;
    make_switch(s, slot, c, &change);
    change.reason = COPSIM_UNBIND_PREEMPT;
    schedlog_preempt(s->log, &change,
                     change.cycle - s->slots[slot].bind_cycle,
                     change.monotonic_ns - hold_start);
    c->preemptions++;
    unbind_slot(s, c, &change);
    if (s->pin)
        c->affinity = (int)slot;
    queue_push(s, c);
}

/* ---- The scheduler thread ------------------------------------------------ */

/* Kills the emulator of a context over its cycle limit, once. */
static void check_limit(struct scheduler *s, struct sim_context *c,
                        uint64_t ran)
{
    if (c->max_cycles != 0 && c->cycles_run + ran >= c->max_cycles)
        kill_emulator(s, c, SIM_KILL_CYCLES);
}

/* Preempts the contexts whose slice is over while others wait, and
 * enforces cycle limits. */
static void check_slots(struct scheduler *s)
{
    uint64_t now = schedlog_monotonic_ns();

    for (uint32_t slot = 0; slot < s->n_slots; slot++) {
        struct sim_context *c = s->slots[slot].bound;
        uint64_t ran;

        if (!c)
            continue;
        ran = slot_cycles(s, slot) - s->slots[slot].bind_cycle;
        check_limit(s, c, ran);
        if (s->queue_head && c->kill == SIM_KILL_NONE
            && ran >= s->slice_cycles && now >= c->retry_hold_ns)
            preempt(s, c);
    }
}

/* The slot model: the slots whose emulators have not booted yet, each
 * started now if it was not (a slot that cannot start is left to the
 * bind, which says why). */
static uint32_t slots_booting(struct scheduler *s)
{
    uint32_t booting = 0;
    char err[256];

    for (uint32_t slot = 0; s->model && slot < s->n_slots; slot++)
        if (slots_ensure(s->model, slot, err, sizeof(err)) == 0
            && !slots_booted(s->model, slot))
            booting++;
    return booting;
}

/* Whether the COPSIM_TEST_GATHER hook still holds binds back: fewer than
 * s->gather contexts wait, or a slot's emulator is booting.  It ends once
 * neither is so, or GATHER_TIMEOUT_NS after the first came (a test whose
 * other contexts failed to start: said on stderr, and the contexts run). */
static int scheduler_gathering(struct scheduler *s)
{
    uint32_t waiting = 0, booting;

    if (s->gather == 0 || !s->queue_head)
        return s->gather != 0;
    for (const struct sim_context *c = s->queue_head; c; c = c->next)
        waiting++;
    booting = slots_booting(s);
    if (s->gather_until_ns == 0)
        s->gather_until_ns = schedlog_monotonic_ns() + GATHER_TIMEOUT_NS;
    if ((waiting < s->gather || booting) &&
        schedlog_monotonic_ns() < s->gather_until_ns)
        return 1;
    if (waiting < s->gather)
        fprintf(stderr, "copsim: %s: only %u of %u contexts came to the "
                "run queue\n", GATHER_ENV, waiting, s->gather);
    if (booting)
        fprintf(stderr, "copsim: %s: %u slot emulators did not boot\n",
                GATHER_ENV, booting);
    s->gather = 0;
    return 0;
}

/* The first queued context that may run on slot: any, or with s->pin one
 * that has not run yet or last ran there; taken out of the queue. */
static struct sim_context *queue_take_for(struct scheduler *s, uint32_t slot)
{
    struct sim_context *c = s->queue_head;

    if (!s->pin)
        return queue_pop(s);
    while (c && c->affinity >= 0 && c->affinity != (int)slot)
        c = c->next;
    if (c)
        queue_remove(s, c);
    return c;
}

static void fill_slots(struct scheduler *s)
{
    if (scheduler_gathering(s))
        return;
    for (uint32_t slot = 0; slot < s->n_slots && s->queue_head; slot++)
        if (!s->slots[slot].bound) {
            struct sim_context *c = queue_take_for(s, slot);

            if (c)
                bind_slot(s, slot, c);
        }
}

/* Whether the tick must poll the slots: someone waits, or a bound
 * context has a cycle limit. */
static int needs_tick(const struct scheduler *s)
{
    if (s->gather && s->queue_head)
        return 1;               /* scheduler_gathering()'s time limit */
    for (uint32_t slot = 0; slot < s->n_slots; slot++) {
        const struct sim_context *c = s->slots[slot].bound;

        if (c && (s->queue_head || c->max_cycles))
            return 1;
    }
    return 0;
}

static void wait_tick(struct scheduler *s)
{
    struct timespec until;

    if (!needs_tick(s)) {
        pthread_cond_wait(&s->wake, &s->lock);
        return;
    }
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += (long)s->tick_us * 1000;
    until.tv_sec += until.tv_nsec / 1000000000;
    until.tv_nsec %= 1000000000;
    pthread_cond_timedwait(&s->wake, &s->lock, &until);
}

static void *scheduler_main(void *arg)
{
    struct scheduler *s = arg;

    pthread_mutex_lock(&s->lock);
    while (!s->stopping) {
        fill_slots(s);
        check_slots(s);
        fill_slots(s);
        wait_tick(s);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

/* ---- Interface ---------------------------------------------------------- */

/* Reads the COPSIM_TEST_GATHER hook: unset or empty, off; else a count
 * of contexts from 1 to the slot limit of the register file. */
static int scheduler_gather_option(struct scheduler *s, char *err,
                                   size_t errlen)
{
    const char *text = getenv(GATHER_ENV);
    char *end;
    unsigned long n;

    if (!text || !*text)
        return 0;
    errno = 0;
    n = strtoul(text, &end, 10);
    if (*end || errno || n == 0 || n > UINT32_MAX || text[0] == '-') {
        snprintf(err, errlen, "%s=%s: not a number of contexts",
                 GATHER_ENV, text);
        return -1;
    }
    s->gather = (uint32_t)n;
    return 0;
}

int scheduler_init(struct scheduler *s, struct trace_unit *unit,
                   struct schedlog *log, const struct copsim_info *info,
                   uint32_t tick_us, char *err, size_t errlen)
{
    pthread_condattr_t attr;

    memset(s, 0, sizeof(*s));
    s->unit = unit;
    s->log = log;
    s->info = *info;
    s->n_slots = info->n_slots;
    s->slice_cycles = info->slice_cycles;
    s->tick_us = tick_us;
    if (scheduler_gather_option(s, err, errlen) < 0)
        return -1;
    s->slots = calloc(s->n_slots, sizeof(*s->slots));
    if (!s->slots) {
        snprintf(err, errlen, "out of memory for %u slots",
                 s->n_slots);
        return -1;
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &attr);
    pthread_condattr_destroy(&attr);
    return 0;
}

int scheduler_start(struct scheduler *s, char *err, size_t errlen)
{
    int error = pthread_create(&s->thread, NULL, scheduler_main, s);

    if (error) {
        snprintf(err, errlen, "cannot start the scheduler: %s",
                 strerror(error));
        return -1;
    }
    s->running = 1;
    return 0;
}

void scheduler_stop(struct scheduler *s)
{
    if (!s->running)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    s->running = 0;
}

void scheduler_destroy(struct scheduler *s)
{
    scheduler_hooks_remove(s);
    free(s->slots);
    s->slots = NULL;
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
}

void scheduler_starting(struct scheduler *s, struct sim_context *c,
                        pid_t emulator, uint64_t max_cycles)
{
    pthread_mutex_lock(&s->lock);
    c->state = SIM_STARTING;
    c->slot = -1;
    c->emulator = emulator;
    c->max_cycles = max_cycles;
    c->cycles_run = 0;
    c->binds = 0;
    c->preemptions = 0;
    c->kill = SIM_KILL_NONE;
    c->retry_hold_ns = 0;
    c->affinity = -1;
    pthread_mutex_unlock(&s->lock);
}

void scheduler_make_runnable(struct scheduler *s, struct sim_context *c)
{
    pthread_mutex_lock(&s->lock);
    if (c->state == SIM_STARTING && c->kill == SIM_KILL_NONE) {
        queue_push(s, c);
        pthread_cond_signal(&s->wake);
    }
    pthread_mutex_unlock(&s->lock);
}

void scheduler_kill(struct scheduler *s, struct sim_context *c,
                    enum sim_kill why)
{
    pthread_mutex_lock(&s->lock);
    kill_emulator(s, c, why);
    pthread_mutex_unlock(&s->lock);
}

enum sim_kill scheduler_disarm(struct scheduler *s, struct sim_context *c)
{
    enum sim_kill why;

    pthread_mutex_lock(&s->lock);
    c->emulator = 0;
    if (c->kill == SIM_KILL_NONE)
        c->kill = SIM_KILL_ENDED;
    why = c->kill;
    pthread_mutex_unlock(&s->lock);
    return why;
}

void scheduler_retire(struct scheduler *s, struct sim_context *c,
                      enum copsim_unbind_reason reason, int status,
                      uint64_t instructions, const char *detail)
{
    struct copsim_switch change;
    uint64_t cycles;
    int slot;

    pthread_mutex_lock(&s->lock);
    slot = c->state == SIM_BOUND ? c->slot : -1;
    if (slot >= 0)
        make_switch(s, (uint32_t)slot, c, &change);
    cycles = slot >= 0 ? change.cycle : 0;
    if (reason == COPSIM_UNBIND_EXIT)
        schedlog_exit(s->log, &c->info, slot, cycles, status, instructions);
    else if (reason == COPSIM_UNBIND_FAULT)
        schedlog_fault(s->log, &c->info, slot, cycles, status, detail);
    if (slot >= 0) {
        change.reason = reason;
        change.exit_status = status;
        unbind_slot(s, c, &change);
        pthread_cond_signal(&s->wake);
    } else if (c->state == SIM_QUEUED) {
        queue_remove(s, c);
    }
    c->state = SIM_ENDED;
    pthread_mutex_unlock(&s->lock);
}

void scheduler_counts(struct scheduler *s, const struct sim_context *c,
                      uint32_t *binds, uint32_t *preemptions)
{
    pthread_mutex_lock(&s->lock);
    *binds = c->binds;
    *preemptions = c->preemptions;
    pthread_mutex_unlock(&s->lock);
}

int scheduler_hooks_install(struct scheduler *s,
                            const struct copsim_hooks *hooks, char *err,
                            size_t errlen)
{
    struct copsim_switch bound[TRACE_MAX_SLOTS];
    size_t n_bound = 0;
    int status = 0;

    pthread_mutex_lock(&s->lock);
    if (s->hooks) {
        snprintf(err, errlen, "driver hooks are installed already");
        status = -1;
    } else {
        for (uint32_t slot = 0; slot < s->n_slots; slot++)
            if (s->slots[slot].bound)
                make_switch(s, slot, s->slots[slot].bound,
                            &bound[n_bound++]);
        if (hooks->start
            && hooks->start(hooks->data, &s->info, bound, n_bound) < 0) {
            snprintf(err, errlen, "the driver refused to start");
            status = -1;
        } else {
            s->hooks = hooks;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return status;
}

void scheduler_hooks_remove(struct scheduler *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->hooks && s->hooks->stop)
        s->hooks->stop(s->hooks->data, &s->info);
    s->hooks = NULL;
    pthread_mutex_unlock(&s->lock);
}
