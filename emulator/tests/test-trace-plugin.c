/*
 * test-trace-plugin.c — GTest suite that runs the libcoptrace.so plugin in
 * qemu-system-riscv32 on the test guests and plays the controller: the run
 * gate, moving a context between slots while it is held, LFSR state carried
 * over from one context to the next, a programmed value taking effect at
 * the next reload, value 0, a hold while capture is off (only the doorbell
 * stops the fast path then), a hold while the emulator is stalled on a
 * full FIFO, a controller that dies (while the emulator is held, and
 * while it is stalled), and a slot whose event changes while its context
 * is held (the main-memory callbacks of the new clock, window.c).
 *
 * The guests start at the local store directly (QEMU's loader device sets
 * the PC), so every instruction is in the local store and a reference run
 * at N = 1 lists the PC field of every instruction: the oracle for the
 * expected captures of other settings.
 */
#include "trace-unit/trace-unit.h"
#include "abi/cop-abi.h"
#include "emulator/timing.h"
#include "trace-unit/tests/stall-wait.h"
#include "lfsr/lfsr.h"

#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG_FIFO (1u << 20)

struct fixture {
    char *dir;
    char *regs;
    struct trace_unit *unit;
};

static const char *build_dir(void)
{
    const char *dir = g_getenv("COPROF_BUILD");

    return dir && *dir ? dir : "build";
}

static void setup_geometry(struct fixture *f, uint32_t slots, uint32_t depth)
{
    struct trace_geometry geo;
    char err[512];

    f->dir = g_dir_make_tmp("test-trace-plugin-XXXXXX", NULL);
    f->regs = g_build_filename(f->dir, "regs", NULL);
    trace_geometry_default(&geo);
    geo.n_slots = slots;
    geo.fifo_depth = depth;
    f->unit = trace_unit_create(f->regs, &geo, err, sizeof(err));
    if (!f->unit)
        g_error("%s", err);
    trace_unit_set_controller(f->unit, getpid());
    /* These tests check captures against QEMU's instruction log and the
     * slot's cycles against the context's instructions: the instruction
     * event (test_timing_model.py checks the cycles event). */
    for (uint32_t s = 0; s < geo.n_slots; s++)
        trace_slot_set_event(trace_unit_slot(f->unit, s),
                             TRACE_EVENT_INSTRUCTIONS);
}

static void setup(struct fixture *f, gconstpointer data)
{
    setup_geometry(f, 2, BIG_FIFO);
}

static void teardown(struct fixture *f, gconstpointer data)
{
    char *log = g_build_filename(f->dir, "stderr", NULL);

    g_unlink(log);
    g_free(log);
    trace_unit_close(f->unit, 1);
    g_rmdir(f->dir);
    g_free(f->regs);
    g_free(f->dir);
}

/* ---- Running an emulator ------------------------------------------------ */

/* Starts the guest as `context`; its stderr goes to DIR/stderr. */
static pid_t start_emulator(struct fixture *f, uint32_t context,
                            const char *guest, int reference)
{
    char *plugin = g_build_filename(build_dir(), "lib", "libcoptrace.so", NULL);
    char *elf = g_strdup_printf("%s/tests/guest/%s.elf", build_dir(), guest);
    char *log = g_build_filename(f->dir, "stderr", NULL);
    char arg[4096];
    pid_t pid;

    g_assert_true(g_file_test(elf, G_FILE_TEST_EXISTS));
    g_assert_cmpint(trace_plugin_arg(arg, sizeof(arg), plugin, f->regs,
                                     context, reference ? TRACE_MODE_REFERENCE
                                                        : TRACE_MODE_FAST,
                                     NULL, NULL),
                    ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        int out = open("/dev/null", O_WRONLY);
        int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        dup2(out, STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        execlp("qemu-system-riscv32", "qemu-system-riscv32", "-M", "virt",
               "-bios", "none", "-display", "none", "-monitor", "none",
               "-serial", "null", "-kernel", elf,
               "-device", "loader,addr=0x80000000,cpu-num=0",
               "-plugin", arg, (char *)NULL);
        _exit(127);
    }
    g_free(plugin);
    g_free(elf);
    g_free(log);
    return pid;
}

static char *emulator_stderr(struct fixture *f)
{
    char *log = g_build_filename(f->dir, "stderr", NULL);
    char *text = NULL;

    g_file_get_contents(log, &text, NULL, NULL);
    g_free(log);
    return text ? text : g_strdup("");
}

static void drain_into(struct fixture *f, uint32_t slot, GArray *out)
{
    struct trace_regs_slot *s = trace_unit_slot(f->unit, slot);
    uint16_t batch[4096];
    int32_t n;

    while ((n = trace_slot_drain(s, f->unit->header->fifo_depth, batch,
                                 G_N_ELEMENTS(batch))) > 0) {
        trace_slot_wake_producer(s);
        g_array_append_vals(out, batch, (guint)n);
    }
    g_assert_cmpint(n, ==, 0);
}

/*
 * Drains `slot` until the emulator ends; returns its exit status.  Under
 * the stall policy it drains whenever the emulator rings the doorbell
 * (the wait's time limit is for the emulator's end, which rings nothing),
 * otherwise every 200 us.
 */
static int drain_until_exit(struct fixture *f, pid_t pid, uint32_t slot,
                            GArray *out)
{
    uint32_t *doorbell = &f->unit->header->doorbell;
    int stall = trace_unit_slot(f->unit, slot)->fifo_policy
                == TRACE_FIFO_STALL;
    int status;

    for (;;) {
        uint32_t seen = __atomic_load_n(doorbell, __ATOMIC_ACQUIRE);
        pid_t done = waitpid(pid, &status, WNOHANG);

        drain_into(f, slot, out);
        if (done == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        if (stall)
            trace_doorbell_wait(doorbell, seen, 10000000ull);
        else
            g_usleep(200);
    }
}

/* Binds context to slot, loads its LFSR with `load`, programs `program`. */
static void prepare(struct fixture *f, uint32_t context, uint32_t slot,
                    uint32_t load, uint32_t program)
{
    char err[512];

    g_assert_cmpint(trace_unit_bind(f->unit, context, slot, err,
                                    sizeof(err)), ==, 0);
    trace_slot_program(trace_unit_slot(f->unit, slot), program);
    trace_slot_load(trace_unit_slot(f->unit, slot), load);
}

/* Runs a guest to the end as context 0 on slot 0, gate open from the start. */
static GArray *run_guest(struct fixture *f, const char *guest, int reference,
                         uint32_t load, uint32_t program)
{
    GArray *captures = g_array_new(FALSE, FALSE, sizeof(uint16_t));
    pid_t pid;

    prepare(f, 0, 0, load, program);
    trace_context_release(trace_unit_context(f->unit, 0));
    pid = start_emulator(f, 0, guest, reference);
    drain_until_exit(f, pid, 0, captures);
    return captures;
}

/* The PC field of every instruction the guest retires, in order. */
static GArray *full_trace(const char *guest)
{
    struct fixture f;
    uint32_t every = lfsr_value_for_count(1);
    GArray *trace;

    setup(&f, NULL);
    trace = run_guest(&f, guest, 1, every, every);
    g_assert_cmpuint(trace->len, ==, trace_unit_slot(f.unit, 0)->cycles);
    g_assert_cmpuint(trace_unit_slot(f.unit, 0)->outside_count, ==, 0);
    teardown(&f, NULL);
    return trace;
}

static void assert_same_captures(GArray *got, GArray *want)
{
    g_assert_cmpuint(got->len, ==, want->len);
    for (guint i = 0; i < want->len; i++) {
        if (g_array_index(got, uint16_t, i) != g_array_index(want, uint16_t, i))
            g_error("capture %u: got 0x%05x, expected 0x%05x", i + 1,
                    g_array_index(got, uint16_t, i) << 2,
                    g_array_index(want, uint16_t, i) << 2);
    }
}

/* ---- Tests -------------------------------------------------------------- */

static void test_start_held(struct fixture *f, gconstpointer data)
{
    struct trace_regs_context *ctx = trace_unit_context(f->unit, 0);
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    uint32_t value = lfsr_value_for_count(1000);
    GArray *captures = g_array_new(FALSE, FALSE, sizeof(uint16_t));
    pid_t pid;

    prepare(f, 0, 0, value, value);
    pid = start_emulator(f, 0, "mix", 0);
    while (__atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE)
           != TRACE_CONTEXT_HELD)
        g_usleep(1000);
    g_assert_cmpint(trace_context_wait_held(ctx, 0, 5000), ==, TRACE_WAIT_HELD);
    g_usleep(50000);
    g_assert_cmpuint(slot->cycles, ==, 0);              /* nothing ran */
    g_assert_cmpuint(ctx->pid, ==, pid);
    g_assert_cmpuint(ctx->mode, ==, TRACE_MODE_FAST);
    trace_context_release(ctx);
    g_assert_cmpint(drain_until_exit(f, pid, 0, captures), ==, 0);
    g_assert_cmpuint(ctx->status, ==, TRACE_CONTEXT_EXITED);
    g_assert_cmpuint(ctx->instructions, ==, slot->cycles);
    g_assert_cmpuint(slot->capture_count, ==, slot->cycles / 1000);
    g_assert_cmpuint(captures->len, ==, slot->capture_count);
    g_array_free(captures, TRUE);
}

/* Lets context 0 run until slots 0 and 1 together counted `until` cycles,
 * or it exited: moves then come at points of the run, not of time, and a
 * loaded machine cannot make the run end before the test moved it. */
static void run_until_cycles(struct fixture *f, uint64_t until)
{
    struct trace_regs_context *ctx = trace_unit_context(f->unit, 0);
    struct trace_regs_slot *s0 = trace_unit_slot(f->unit, 0);
    struct trace_regs_slot *s1 = trace_unit_slot(f->unit, 1);

    while (__atomic_load_n(&s0->cycles, __ATOMIC_ACQUIRE)
           + __atomic_load_n(&s1->cycles, __ATOMIC_ACQUIRE) < until
           && __atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE)
              != TRACE_CONTEXT_EXITED)
        g_usleep(200);
}

/*
 * Holds the running context every eighth of its run (`run_cycles`), drains
 * its slot, loads the other slot's LFSR with the state this one has, moves
 * the context there and releases it: the captures, concatenated, must be
 * those of a run that never moved.
 */
static void check_moves(struct fixture *f, int reference, GArray *unmoved,
                        uint32_t value, uint64_t run_cycles)
{
    struct trace_regs_context *ctx = trace_unit_context(f->unit, 0);
    GArray *captures = g_array_new(FALSE, FALSE, sizeof(uint16_t));
    uint32_t slot = 0, moves = 0;
    struct trace_slot_status status;
    char err[512];
    pid_t pid;
    int exit_status = -1;

    prepare(f, 0, 0, value, value);
    trace_slot_program(trace_unit_slot(f->unit, 1), value);
    trace_context_release(ctx);
    pid = start_emulator(f, 0, "spin", reference);
    for (;;) {
        uint32_t gate;

        run_until_cycles(f, (moves + 1) * (run_cycles / 8));
        gate = trace_context_hold(ctx);
        if (trace_context_wait_held(ctx, gate, 10000) != TRACE_WAIT_HELD)
            break;
        drain_into(f, slot, captures);
        trace_slot_status(f->unit, slot, &status);
        trace_slot_load(trace_unit_slot(f->unit, 1 - slot), status.lfsr_state);
        slot = 1 - slot;
        g_assert_cmpint(trace_unit_bind(f->unit, 0, slot, err, sizeof(err)),
                        ==, 0);
        trace_context_release(ctx);
        moves++;
    }
    g_assert_cmpint(waitpid(pid, &exit_status, 0), ==, pid);
    g_assert_true(WIFEXITED(exit_status) && WEXITSTATUS(exit_status) == 0);
    drain_into(f, slot, captures);
    g_test_message("%s mode: %u moves, %u captures",
                   reference ? "reference" : "fast", moves, captures->len);
    g_assert_cmpuint(moves, >=, 3);
    assert_same_captures(captures, unmoved);
    g_assert_cmpuint(ctx->instructions, ==,
                     trace_unit_slot(f->unit, 0)->cycles
                     + trace_unit_slot(f->unit, 1)->cycles);
    g_array_free(captures, TRUE);
}

/* The captures of a fast run of `guest` alone, loaded and programmed with
 * `value`, into a FIFO that never fills: the oracle of the tests below. */
static GArray *plain_run(const char *guest, uint32_t value)
{
    struct fixture f;
    GArray *captures;

    setup(&f, NULL);
    captures = run_guest(&f, guest, 0, value, value);
    teardown(&f, NULL);
    return captures;
}

static void test_move_while_held(void)
{
    const uint32_t count = 997;
    uint32_t value = lfsr_value_for_count(count);
    struct fixture f;
    GArray *unmoved = plain_run("spin", value);

    g_assert_cmpuint(unmoved->len, >, 10000);
    for (int reference = 0; reference <= 1; reference++) {
        setup(&f, NULL);
        check_moves(&f, reference, unmoved, value,
                    (uint64_t)unmoved->len * count);
        teardown(&f, NULL);
    }
    g_array_free(unmoved, TRUE);
}

/*
 * A hold while the emulator is stalled in a capture (a 4-entry FIFO under
 * the stall policy, nothing drained): it cannot reach a block boundary, so
 * the hold is not acknowledged; once the FIFO is drained the capture goes
 * in and the emulator stops at the next boundary, held.  Released, it runs
 * on, drained at each doorbell, and its captures are exactly those of a
 * run into a FIFO that never fills.  Both modes.
 */
static void test_hold_while_stalled(void)
{
    uint32_t value = lfsr_value_for_count(997);
    struct fixture f;
    GArray *unbounded = plain_run("mix", value);

    for (int reference = 0; reference <= 1; reference++) {
        GArray *captures = g_array_new(FALSE, FALSE, sizeof(uint16_t));
        struct trace_regs_context *ctx;
        struct trace_regs_slot *slot;
        uint32_t gate;
        pid_t pid;

        setup_geometry(&f, 1, 4);
        ctx = trace_unit_context(f.unit, 0);
        slot = trace_unit_slot(f.unit, 0);
        trace_slot_set_policy(slot, TRACE_FIFO_STALL, 2);
        prepare(&f, 0, 0, value, value);
        trace_context_release(ctx);
        pid = start_emulator(&f, 0, "mix", reference);
        wait_until_stalled(f.unit, slot);
        gate = trace_context_hold(ctx);
        g_assert_cmpint(trace_context_wait_held(ctx, gate, 0), ==,
                        TRACE_WAIT_TIMEOUT);
        g_assert_cmpuint(slot->stalled, ==, 1);
        drain_into(&f, 0, captures);
        g_assert_cmpint(trace_context_wait_held(ctx, gate, 60000), ==,
                        TRACE_WAIT_HELD);
        g_assert_cmpuint(slot->stalled, ==, 0);
        g_assert_cmpuint(slot->stall_count, >=, 1);
        trace_context_release(ctx);
        g_assert_cmpint(drain_until_exit(&f, pid, 0, captures), ==, 0);
        g_assert_cmpuint(slot->overflow_count, ==, 0);
        assert_same_captures(captures, unbounded);
        g_test_message("%s mode: %llu stalls, %llu ns",
                       reference ? "reference" : "fast",
                       (unsigned long long)slot->stall_count,
                       (unsigned long long)slot->stall_ns);
        g_array_free(captures, TRUE);
        teardown(&f, NULL);
    }
    g_array_free(unbounded, TRUE);
}

/*
 * Context 1 runs on slot 0 after context 0 exited there, without a reload:
 * its captures are those of a run whose LFSR starts where context 0 left it.
 */
static void test_state_carries_over(void)
{
    uint32_t value = lfsr_value_for_count(333);
    struct trace_slot_status after_first;
    GArray *first, *second, *explicit;
    struct fixture f;
    char err[512];
    pid_t pid;

    setup(&f, NULL);
    first = run_guest(&f, "mix", 0, value, value);
    trace_slot_status(f.unit, 0, &after_first);
    g_assert_cmpuint(after_first.cycles % 333, !=, 0);   /* mid-period */
    g_assert_cmphex(after_first.lfsr_state, ==,
                    lfsr_value_for_count(333 - after_first.cycles % 333));
    g_assert_cmpuint(first->len, ==, after_first.cycles / 333);

    /* Only a new binding: the slot's LFSR and counters stay as they are. */
    g_assert_cmpint(trace_unit_bind(f.unit, 1, 0, err, sizeof(err)), ==, 0);
    trace_context_release(trace_unit_context(f.unit, 1));
    second = g_array_new(FALSE, FALSE, sizeof(uint16_t));
    pid = start_emulator(&f, 1, "mix", 0);
    g_assert_cmpint(drain_until_exit(&f, pid, 0, second), ==, 0);
    g_assert_cmpuint(trace_unit_slot(f.unit, 0)->cycles, ==,
                     2 * after_first.cycles);
    g_assert_cmpuint(trace_unit_context(f.unit, 1)->instructions, ==,
                     after_first.cycles);
    teardown(&f, NULL);

    setup(&f, NULL);
    explicit = run_guest(&f, "mix", 0, after_first.lfsr_state, value);
    teardown(&f, NULL);
    assert_same_captures(second, explicit);
    g_array_free(first, TRUE);
    g_array_free(second, TRUE);
    g_array_free(explicit, TRUE);
}

/* Captures at instructions first, first + every, ... taken from the trace. */
static GArray *expected_captures(GArray *trace, uint32_t first, uint32_t every)
{
    GArray *want = g_array_new(FALSE, FALSE, sizeof(uint16_t));

    for (uint64_t i = first; i <= trace->len; i += every) {
        g_array_append_val(want, g_array_index(trace, uint16_t, i - 1));
        if (!every)
            break;
    }
    return want;
}

static void test_program_at_reload(void)
{
    GArray *trace = full_trace("mix");
    struct fixture f;
    GArray *got, *want;

    for (int reference = 0; reference <= 1; reference++) {
        /* Loaded for 500, programmed for 300: 500, 800, 1100, ... */
        setup(&f, NULL);
        got = run_guest(&f, "mix", reference, lfsr_value_for_count(500),
                        lfsr_value_for_count(300));
        want = expected_captures(trace, 500, 300);
        assert_same_captures(got, want);
        teardown(&f, NULL);
        g_array_free(got, TRUE);
        g_array_free(want, TRUE);

        /* Programmed 0: the first expiry captures, then capture stops. */
        setup(&f, NULL);
        got = run_guest(&f, "mix", reference, lfsr_value_for_count(4321), 0);
        want = expected_captures(trace, 4321, 0);
        assert_same_captures(got, want);
        g_assert_cmphex(trace_unit_slot(f.unit, 0)->reload_state, ==, 0);
        teardown(&f, NULL);
        g_array_free(got, TRUE);
        g_array_free(want, TRUE);

        /* Loaded 0: the LFSR does not run, whatever is programmed. */
        setup(&f, NULL);
        got = run_guest(&f, "mix", reference, 0, lfsr_value_for_count(10));
        g_assert_cmpuint(got->len, ==, 0);
        g_assert_cmpuint(trace_unit_slot(f.unit, 0)->capture_count, ==, 0);
        g_assert_cmpuint(trace_unit_slot(f.unit, 0)->cycles, ==, trace->len);
        teardown(&f, NULL);
        g_array_free(got, TRUE);
    }
    g_array_free(trace, TRUE);
}

/*
 * With capture off the fast path never reaches check_cycle: only the
 * controller zeroing it (the doorbell) makes the emulator look at its gate.
 */
static void test_hold_with_capture_off(struct fixture *f, gconstpointer data)
{
    struct trace_regs_context *ctx = trace_unit_context(f->unit, 0);
    struct trace_regs_slot *slot = trace_unit_slot(f->unit, 0);
    GArray *captures = g_array_new(FALSE, FALSE, sizeof(uint16_t));
    uint64_t frozen;
    uint32_t gate;
    pid_t pid;

    prepare(f, 0, 0, 0, 0);
    trace_context_release(ctx);
    pid = start_emulator(f, 0, "spin", 0);
    while (__atomic_load_n(&slot->cycles, __ATOMIC_ACQUIRE) < 1000000)
        g_usleep(200);
    gate = trace_context_hold(ctx);
    g_assert_cmpint(trace_context_wait_held(ctx, gate, 10000), ==,
                    TRACE_WAIT_HELD);
    frozen = slot->cycles;
    g_usleep(30000);
    g_assert_cmpuint(slot->cycles, ==, frozen);
    g_assert_cmpuint(ctx->instructions, ==, frozen);
    trace_context_release(ctx);
    g_assert_cmpint(drain_until_exit(f, pid, 0, captures), ==, 0);
    g_assert_cmpuint(captures->len, ==, 0);
    g_assert_cmpuint(slot->cycles, >, frozen);
    g_assert_cmpuint(ctx->instructions, ==, slot->cycles);
    g_array_free(captures, TRUE);
}

static void test_controller_dies(struct fixture *f, gconstpointer data)
{
    struct trace_regs_context *ctx = trace_unit_context(f->unit, 0);
    pid_t controller = fork(), pid;
    char *text;
    int status;

    if (controller == 0) {
        pause();
        _exit(0);
    }
    trace_unit_set_controller(f->unit, controller);
    prepare(f, 0, 0, lfsr_value_for_count(100), lfsr_value_for_count(100));
    pid = start_emulator(f, 0, "mix", 0);
    while (__atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE)
           != TRACE_CONTEXT_HELD)
        g_usleep(1000);
    kill(controller, SIGKILL);
    waitpid(controller, NULL, 0);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 1);
    text = emulator_stderr(f);
    g_test_message("%s", text);
    g_assert_nonnull(strstr(text, "coptrace: "));
    g_assert_nonnull(strstr(text, "died while context 0 was held"));
    g_assert_cmpuint(ctx->status, ==, TRACE_CONTEXT_EXITED);
    g_free(text);
}

/*
 * The controller dies while the emulator is stalled on a full FIFO (a
 * 4-entry one, nobody draining): the emulator stops waiting, drops the
 * captures that find the FIFO full (counted), runs to its end and exits
 * normally; every capture is queued or counted.
 */
static void test_stalled_controller_dies(void)
{
    struct fixture f;
    struct trace_regs_slot *slot;
    pid_t controller, pid;
    int status;

    setup_geometry(&f, 1, 4);
    slot = trace_unit_slot(f.unit, 0);
    controller = fork();
    if (controller == 0) {
        pause();
        _exit(0);
    }
    trace_unit_set_controller(f.unit, controller);
    trace_slot_set_policy(slot, TRACE_FIFO_STALL, 2);
    prepare(&f, 0, 0, lfsr_value_for_count(100), lfsr_value_for_count(100));
    trace_context_release(trace_unit_context(f.unit, 0));
    pid = start_emulator(&f, 0, "mix", 0);
    wait_until_stalled(f.unit, slot);
    kill(controller, SIGKILL);
    waitpid(controller, NULL, 0);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_cmpuint(slot->overflow_count, >, 0);
    g_assert_cmpuint(slot->capture_count, ==,
                     slot->overflow_count + trace_slot_queued(slot));
    g_assert_cmpuint(trace_slot_queued(slot), ==, 4);
    g_assert_cmpuint(slot->capture_count, ==, slot->cycles / 100);
    teardown(&f, NULL);
}

/* ---- A change of clock ------------------------------------------------- */

#define WINDOW_WORDS 64                 /* window.c's */
#define HANDSHAKE_OFFSET 0xf00000u      /* window.c's 0x80f00000 */

/* A 16 MiB guest RAM file whose boot block names the data window. */
static char *window_ram(struct fixture *f)
{
    char *ram = g_build_filename(f->dir, "ram", NULL);
    struct cop_boot_block boot = { 0 };
    int fd = open(ram, O_RDWR | O_CREAT | O_TRUNC, 0600);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, COP_RAM_SIZE), ==, 0);
    boot.data_addr = COP_DATA_BASE;
    boot.data_size = COP_DATA_SIZE;
    g_assert_cmpint(pwrite(fd, &boot, sizeof(boot),
                           COP_BOOT_BASE - COP_RAM_BASE), ==, sizeof(boot));
    close(fd);
    return ram;
}

static pid_t start_window_guest(struct fixture *f, const char *ram,
                                const char *counts, int reference)
{
    char *plugin = g_build_filename(build_dir(), "lib", "libcoptrace.so", NULL);
    char *elf = g_strdup_printf("%s/tests/guest/window.elf", build_dir());
    char *log = g_build_filename(f->dir, "stderr", NULL);
    char *backend = g_strdup_printf("memory-backend-file,id=ram,size=16M,"
                                    "mem-path=%s,share=on", ram);
    char arg[4096];
    pid_t pid;

    g_assert_cmpint(trace_plugin_arg(arg, sizeof(arg), plugin, f->regs, 0,
                                     reference ? TRACE_MODE_REFERENCE
                                               : TRACE_MODE_FAST,
                                     counts, ram), ==, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        int out = open("/dev/null", O_WRONLY);
        int err = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        dup2(out, STDOUT_FILENO);
        dup2(err, STDERR_FILENO);
        execlp("qemu-system-riscv32", "qemu-system-riscv32", "-M",
               "virt,memory-backend=ram", "-m", "16M", "-object", backend,
               "-bios", "none", "-display", "none", "-monitor", "none",
               "-serial", "null", "-kernel", elf,
               "-device", "loader,addr=0x80000000,cpu-num=0",
               "-plugin", arg, (char *)NULL);
        _exit(127);
    }
    g_free(plugin);
    g_free(elf);
    g_free(log);
    g_free(backend);
    return pid;
}

/* The MEMORY column of a counts file, summed. */
static uint64_t memory_cycles(const char *counts)
{
    FILE *in = fopen(counts, "r");
    char line[512];
    uint64_t total = 0;

    g_assert_nonnull(in);
    while (fgets(line, sizeof(line), in)) {
        unsigned long long addr, n[7];
        char bytes[64];

        if (sscanf(line, "0x%llx %63s %llu %llu %llu %llu %llu %llu %llu",
                   &addr, bytes, &n[0], &n[1], &n[2], &n[3], &n[4], &n[5],
                   &n[6]) == 9)
            total += n[6];
    }
    fclose(in);
    return total;
}

/*
 * window.c loads the window, then spins; the slot's event is `first`.
 * Held there, the slot's event becomes `second`, and the guest loads the
 * window again through the same translated code: the exact MEMORY cycles
 * are WINDOW_WORDS x memory.latency for each phase run under SPU_CYCLES,
 * so the code translated under SPU_INSTRUCTIONS (no memory callbacks)
 * must not survive the change.
 */
static void check_clock_change(uint32_t first, uint32_t second,
                               int reference)
{
    struct fixture f;
    struct trace_regs_context *ctx;
    struct timing_model model;
    char *ram, *counts;
    volatile uint32_t *handshake;
    uint32_t gate;
    int fd, status = -1;
    pid_t pid;
    uint64_t expected;

    setup(&f, NULL);
    ctx = trace_unit_context(f.unit, 0);
    ram = window_ram(&f);
    counts = g_build_filename(f.dir, "counts", NULL);
    fd = open(ram, O_RDWR);
    handshake = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                     HANDSHAKE_OFFSET);
    close(fd);
    g_assert_true(handshake != MAP_FAILED);
    prepare(&f, 0, 0, lfsr_value_for_count(997), lfsr_value_for_count(997));
    trace_slot_set_event(trace_unit_slot(f.unit, 0), first);
    trace_context_release(ctx);
    pid = start_window_guest(&f, ram, counts, reference);
    while (!__atomic_load_n(&handshake[0], __ATOMIC_ACQUIRE)) {
        g_assert_cmpint(waitpid(pid, &status, WNOHANG), ==, 0);
        g_usleep(1000);
    }
    gate = trace_context_hold(ctx);
    g_assert_cmpint(trace_context_wait_held(ctx, gate, 10000), ==,
                    TRACE_WAIT_HELD);
    trace_slot_set_event(trace_unit_slot(f.unit, 0), second);
    trace_context_release(ctx);
    __atomic_store_n(&handshake[1], 1, __ATOMIC_RELEASE);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    timing_model_default(&model);
    expected = (uint64_t)WINDOW_WORDS * model.memory_latency
               * ((first == TRACE_EVENT_CYCLES) + (second == TRACE_EVENT_CYCLES));
    g_assert_cmpuint(memory_cycles(counts), ==, expected);
    munmap((void *)handshake, 8);
    g_unlink(counts);
    g_unlink(ram);
    g_free(counts);
    g_free(ram);
    teardown(&f, NULL);
}

static void test_clock_change(void)
{
    for (int reference = 0; reference <= 1; reference++) {
        check_clock_change(TRACE_EVENT_INSTRUCTIONS, TRACE_EVENT_CYCLES,
                           reference);
        check_clock_change(TRACE_EVENT_CYCLES, TRACE_EVENT_INSTRUCTIONS,
                           reference);
        check_clock_change(TRACE_EVENT_CYCLES, TRACE_EVENT_CYCLES,
                           reference);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add("/trace-plugin/start-held", struct fixture, NULL, setup,
               test_start_held, teardown);
    g_test_add_func("/trace-plugin/move-while-held", test_move_while_held);
    g_test_add_func("/trace-plugin/hold-while-stalled",
                    test_hold_while_stalled);
    g_test_add_func("/trace-plugin/stalled-controller-dies",
                    test_stalled_controller_dies);
    g_test_add_func("/trace-plugin/state-carries-over",
                    test_state_carries_over);
    g_test_add_func("/trace-plugin/program-at-reload", test_program_at_reload);
    g_test_add("/trace-plugin/hold-with-capture-off", struct fixture, NULL,
               setup, test_hold_with_capture_off, teardown);
    g_test_add("/trace-plugin/controller-dies", struct fixture, NULL, setup,
               test_controller_dies, teardown);
    g_test_add_func("/trace-plugin/clock-change", test_clock_change);
    return g_test_run();
}
