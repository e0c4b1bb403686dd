/*
 * test-copsim-hooks.c — GLib tests of the driver's hooks (copsim-hooks.h):
 * a copsim created in this process with recording hooks installed, and
 * libcop clients (threads of this process) running real programs on it.
 *
 * The hooks check, as they are called, what the header promises: a bind
 * comes while the context's run gate is still closed and the register file
 * shows it bound; an unbind comes once its emulator has stopped (held and
 * acknowledged, or ended) and while the slot still shows it; the slot's
 * cycle counter is the one passed; the guest RAM and guard words given are
 * the context's own, and the trace unit watches those guard words.
 */
#include "emulator/copsim/copsim.h"
#include "trace-unit/trace-unit.h"
#include "abi/cop-abi.h"
#include "sdk/libcop.h"

#include <glib.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#define MAX_RECORDS 4096

struct record {
    char kind;                  /* 'b' bind, 'u' unbind */
    uint32_t slot;
    uint64_t context;
    uint64_t cycle;
    enum copsim_unbind_reason reason;
    int exit_status;
    uint32_t guards[2];         /* an overlays image's guard words */
    uint32_t n_regions;
};

struct recorder {
    GMutex lock;
    struct trace_unit *unit;
    struct record records[MAX_RECORDS];
    size_t count;
    int started, stopped;
    size_t bound_at_start;
    uint64_t first_bound_context;
    struct copsim_hooks hooks;
    /* Set: the hooks leave the acks to a "guest driver" thread, which
     * takes posted messages from `posted`, as copdrv.ko would. */
    int guest_acks;
    GAsyncQueue *posted;
};

/* A message the guest-driver thread is to ack. */
struct posted {
    uint32_t slot, seq, context, op;
};

/* A copsim served by a thread of this process, on the socket that
 * $COPSIM_SOCKET names (set once, before any thread exists). */
struct server {
    struct copsim *sim;
    GThread *thread;
};

static char *socket_dir;

/* ---- Hooks --------------------------------------------------------------- */

static const struct trace_regs_context *regs_of(struct recorder *r,
                                                const struct copsim_context *c)
{
    return trace_unit_context(r->unit, c->trace_context);
}

static int on_start(void *data, const struct copsim_info *info,
                    const struct copsim_switch *bound, size_t n_bound)
{
    struct recorder *r = data;

    r->unit = info->unit;
    if (r->guest_acks)
        __atomic_store_n(&info->unit->header->mailbox_reader, 1,
                         __ATOMIC_RELEASE);
    r->started++;
    r->bound_at_start = n_bound;
    if (n_bound)
        r->first_bound_context = bound[0].context->id;
    g_assert_cmpuint(info->n_slots, ==, 1);
    return 0;
}

static void record(struct recorder *r, char kind,
                   const struct copsim_switch *change)
{
    const struct copsim_context *c = change->context;
    struct record *rec;

    g_mutex_lock(&r->lock);
    g_assert_cmpuint(r->count, <, MAX_RECORDS);
    rec = &r->records[r->count++];
    rec->kind = kind;
    rec->slot = change->slot;
    rec->context = c->id;
    rec->cycle = change->cycle;
    rec->reason = change->reason;
    rec->exit_status = change->exit_status;
    rec->n_regions = c->n_regions;
    for (uint32_t i = 0; i < c->n_regions && i < 2; i++)
        rec->guards[i] = c->guard_words[i];
    g_mutex_unlock(&r->lock);
}

static void check_view(struct recorder *r, const struct copsim_switch *change)
{
    const struct copsim_context *c = change->context;
    const struct trace_regs_slot *slot = trace_unit_slot(r->unit,
                                                         change->slot);

    g_assert_cmpuint(slot->bound_context, ==, c->trace_context);
    g_assert_cmpuint(slot->cycles, ==, change->cycle);
    g_assert_cmpint(c->pid, ==, getpid());
    g_assert_nonnull(c->ram);
    g_assert_cmpuint(c->ram_size, ==, COP_RAM_SIZE);
    g_assert_true(g_str_has_prefix(c->image.name, "copsim-probe")
                  || strcmp(c->image.name, "overlays") == 0);
    if (c->n_regions)
        g_assert_true((const void *)c->guard_words
                      == c->ram + c->guard_ls_offset);
    /* The trace unit watches the same guard words (none without). */
    g_assert_cmpuint(regs_of(r, c)->guard_count, ==, c->n_regions);
    g_assert_cmphex(regs_of(r, c)->guard_ls_offset, ==, c->guard_ls_offset);
}

/*
 * The slot's mailbox holds the switch, posted before the hook and not yet
 * acked, with everything the driver needs to know about it; the hook then
 * acks it as a driver does.
 */
static void check_mailbox(struct recorder *r,
                          const struct copsim_switch *change, uint32_t op)
{
    const struct copsim_context *c = change->context;
    struct trace_regs_mailbox *box = trace_unit_mailbox(r->unit,
                                                        change->slot);
    uint32_t seq = trace_mailbox_pending(box);

    g_assert_cmpuint(seq, !=, 0);
    g_assert_cmpuint(box->op, ==, op);
    g_assert_cmpuint(box->slot, ==, change->slot);
    g_assert_cmpuint(box->context, ==, c->trace_context);
    g_assert_cmpuint(box->context_id, ==, c->id);
    g_assert_cmpuint(box->object_id, ==, c->object_id);
    g_assert_cmpint(box->pid, ==, c->pid);
    g_assert_cmpint(box->tid, ==, c->tid);
    if (op == TRACE_MAILBOX_BIND) {
        g_assert_cmpuint(box->path_length, ==, strlen(c->image.path));
        g_assert_cmpmem(box->path, box->path_length, c->image.path,
                        strlen(c->image.path));
        g_assert_cmpuint(box->image_offset, ==, c->image.offset);
        g_assert_cmpuint(box->image_inode, ==, c->image.inode);
        g_assert_cmpuint(box->image_device, ==, c->image.device);
        g_assert_cmpuint(box->image_file_size, ==, c->image.file_size);
        g_assert_cmphex(box->image_hash, ==, c->image.hash);
        g_assert_cmpuint(box->guard_count, ==, c->n_regions);
        g_assert_cmphex(box->guard_ls_offset, ==, c->guard_ls_offset);
        for (uint32_t i = 0; i < c->n_regions && i < TRACE_MAX_GUARDS; i++)
            g_assert_cmphex(box->guards[i], ==, c->guard_words[i]);
    } else if (op == TRACE_MAILBOX_END) {
        g_assert_cmpint((int)box->status, ==, change->exit_status);
    }
    if (r->guest_acks) {
        struct posted *p = g_new(struct posted, 1);

        *p = (struct posted){ change->slot, seq, c->trace_context, op };
        g_async_queue_push(r->posted, p);
        return;
    }
    trace_mailbox_ack(box, seq);
    g_assert_true(trace_mailbox_acked(box));
}

/*
 * The guest driver: acks each posted message, after checking that copsim
 * still waits for it: a bound context's gate stays closed until the ack.
 * Ends at a message with seq 0; returns how many it acked.
 */
static gpointer guest_driver(gpointer data)
{
    struct recorder *r = data;
    uintptr_t acked = 0;

    for (;;) {
        struct posted *p = g_async_queue_pop(r->posted);
        struct trace_regs_mailbox *box;

        if (!p->seq) {
            g_free(p);
            return (gpointer)acked;
        }
        box = trace_unit_mailbox(r->unit, p->slot);
        g_assert_cmpuint(trace_mailbox_pending(box), ==, p->seq);
        if (p->op == TRACE_MAILBOX_BIND)
            g_assert_false(trace_gate_is_open(__atomic_load_n(
                &trace_unit_context(r->unit, p->context)->gate,
                __ATOMIC_ACQUIRE)));
        trace_mailbox_ack(box, p->seq);
        acked++;
        g_free(p);
    }
}

static void on_bind(void *data, const struct copsim_switch *change)
{
    struct recorder *r = data;

    check_view(r, change);
    check_mailbox(r, change, TRACE_MAILBOX_BIND);
    g_assert_false(trace_gate_is_open(regs_of(r, change->context)->gate));
    record(r, 'b', change);
}

static void on_unbind(void *data, const struct copsim_switch *change)
{
    struct recorder *r = data;
    const struct trace_regs_context *regs = regs_of(r, change->context);

    check_view(r, change);
    check_mailbox(r, change, change->reason == COPSIM_UNBIND_PREEMPT
                  ? TRACE_MAILBOX_UNBIND : TRACE_MAILBOX_END);
    if (change->reason == COPSIM_UNBIND_PREEMPT) {
        g_assert_cmpuint(regs->status, ==, TRACE_CONTEXT_HELD);
        g_assert_cmpuint(regs->ack, ==, regs->gate);
    }
    record(r, 'u', change);
}

static void on_stop(void *data, const struct copsim_info *info)
{
    struct recorder *r = data;

    (void)info;
    r->stopped++;
}

static void recorder_init(struct recorder *r)
{
    memset(r, 0, sizeof(*r));
    g_mutex_init(&r->lock);
    r->hooks = (struct copsim_hooks){
        .data = r, .start = on_start, .bind = on_bind, .unbind = on_unbind,
        .stop = on_stop,
    };
}

/* ---- A copsim in this process --------------------------------------------- */

static gpointer serve(gpointer data)
{
    copsim_serve(data);
    return NULL;
}

static void server_start(struct server *s, uint64_t slice)
{
    struct copsim_config config = {
        .n_slots = 1,
        .slice_cycles = slice,
        .socket_path = g_getenv("COPSIM_SOCKET"),
    };
    char err[1024];

    s->sim = copsim_create(&config, err, sizeof(err));
    if (!s->sim)
        g_error("copsim: %s", err);
    s->thread = g_thread_new("copsim", serve, s->sim);
}

static void remove_in(const char *dir, const char *name)
{
    char *path = g_build_filename(dir, name, NULL);

    g_remove(path);
    g_free(path);
}

static void server_stop(struct server *s)
{
    copsim_shutdown(s->sim);
    g_thread_join(s->thread);
    copsim_destroy(s->sim);
    remove_in(socket_dir, "copsim.coplog");
    remove_in(socket_dir, "images");
}

static char *build_path(const char *relative)
{
    const char *build = g_getenv("COPROF_BUILD");

    return g_build_filename(build ? build : "build", relative, NULL);
}

/* Runs image with argv on a new context; returns the stop info. */
struct run {
    const char *image;
    char *argv[4];
    int argc;
    uint64_t limit;
    struct cop_stop_info stop;
    uint64_t id;
};

static gpointer run_context(gpointer data)
{
    struct run *run = data;
    cop_context_t *ctx = cop_context_create();
    char *image = build_path(run->image);
    int null = open("/dev/null", O_WRONLY);

    g_assert_nonnull(ctx);
    run->id = cop_context_id(ctx);
    g_assert_cmpint(cop_context_load_file(ctx, image), ==, 0);
    g_assert_cmpint(cop_context_set_console(ctx, null), ==, 0);
    close(null);
    cop_context_set_cycle_limit(ctx, run->limit);
    g_assert_cmpint(cop_context_run(ctx, run->argc, run->argv, &run->stop),
                    ==, 0);
    g_assert_cmpint(cop_context_destroy(ctx), ==, 0);
    g_free(image);
    return NULL;
}

/* ---- Tests --------------------------------------------------------------- */

/* Three contexts on one slot: every switch seen, in order, consistent.
 * The scheduler binds none before all three wait (COPSIM_TEST_GATHER), so
 * the first is preempted for certain. */
static void test_hooks_see_every_switch(void)
{
    struct recorder *r = g_new(struct recorder, 1);
    struct server s;
    struct run runs[3] = {
        {.image = "tests/cop/copsim-probe.elf",
         .argv = {"p", "spin", "100000000"}, .argc = 3},
        {.image = "tests/cop/copsim-probe.elf",
         .argv = {"p", "spin", "100000000"}, .argc = 3},
        {.image = "examples/overlays.elf", .argv = {"overlays", "2"},
         .argc = 2},
    };
    GThread *threads[3];
    char err[256];
    uint64_t bound = 0, last_cycle = 0;
    int preempted = 0, exits = 0;

    recorder_init(r);
    g_setenv("COPSIM_TEST_GATHER", "3", TRUE);
    server_start(&s, 100000);
    g_unsetenv("COPSIM_TEST_GATHER");
    g_assert_cmpint(copsim_hooks_install(s.sim, &r->hooks, err, sizeof(err)),
                    ==, 0);
    g_assert_cmpint(r->started, ==, 1);
    g_assert_cmpuint(r->bound_at_start, ==, 0);
    g_assert_cmpint(copsim_hooks_install(s.sim, &r->hooks, err, sizeof(err)),
                    ==, -1);
    g_assert_cmpstr(err, ==, "driver hooks are installed already");
    for (int i = 0; i < 3; i++)
        threads[i] = g_thread_new("client", run_context, &runs[i]);
    for (int i = 0; i < 3; i++) {
        g_thread_join(threads[i]);
        g_assert_cmpint(runs[i].stop.reason, ==, COP_STOP_EXIT);
    }
    for (size_t i = 0; i < r->count; i++) {
        const struct record *rec = &r->records[i];

        g_assert_cmpuint(rec->slot, ==, 0);
        g_assert_cmpuint(rec->cycle, >=, last_cycle);
        if (rec->kind == 'b') {
            g_assert_cmpuint(bound, ==, 0);
            g_assert_cmpuint(rec->cycle, ==, last_cycle);
            bound = rec->context;
        } else {
            g_assert_cmpuint(bound, ==, rec->context);
            bound = 0;
            preempted += rec->reason == COPSIM_UNBIND_PREEMPT;
            exits += rec->reason == COPSIM_UNBIND_EXIT;
            if (rec->reason == COPSIM_UNBIND_EXIT && rec->n_regions == 2) {
                /* histogram (3) and sort (5) stay loaded at the end. */
                g_assert_cmpuint(rec->guards[0], ==, 3);
                g_assert_cmpuint(rec->guards[1], ==, 5);
            }
        }
        last_cycle = rec->cycle;
    }
    g_assert_cmpuint(bound, ==, 0);
    g_assert_cmpint(exits, ==, 3);
    g_assert_cmpint(preempted, >=, 1);
    copsim_hooks_remove(s.sim);
    g_assert_cmpint(r->stopped, ==, 1);
    copsim_hooks_remove(s.sim);
    g_assert_cmpint(r->stopped, ==, 1);
    server_stop(&s);
    g_free(r);
}

/*
 * With a driver outside copsim reading the mailboxes (mailbox_reader),
 * copsim waits for its ack after each switch: a context's gate opens only
 * after its BIND was acked, and every message is acked by that driver.
 */
static void test_waits_for_guest_ack(void)
{
    struct recorder *r = g_new(struct recorder, 1);
    struct server s;
    struct run runs[2] = {
        {.image = "tests/cop/copsim-probe.elf",
         .argv = {"p", "spin", "3000000"}, .argc = 3},
        {.image = "tests/cop/copsim-probe.elf",
         .argv = {"p", "spin", "3000000"}, .argc = 3},
    };
    GThread *threads[2], *driver;
    struct posted *end = g_new0(struct posted, 1);
    char err[256];

    recorder_init(r);
    r->guest_acks = 1;
    r->posted = g_async_queue_new();
    g_setenv("COPSIM_TEST_GATHER", "2", TRUE);
    server_start(&s, 100000);
    g_unsetenv("COPSIM_TEST_GATHER");
    g_assert_cmpint(copsim_hooks_install(s.sim, &r->hooks, err, sizeof(err)),
                    ==, 0);
    driver = g_thread_new("guest-driver", guest_driver, r);
    for (int i = 0; i < 2; i++)
        threads[i] = g_thread_new("client", run_context, &runs[i]);
    for (int i = 0; i < 2; i++) {
        g_thread_join(threads[i]);
        g_assert_cmpint(runs[i].stop.reason, ==, COP_STOP_EXIT);
    }
    g_async_queue_push(r->posted, end);
    g_assert_cmpuint((uintptr_t)g_thread_join(driver), ==, r->count);
    g_assert_cmpuint(r->count, >=, 4);
    copsim_hooks_remove(s.sim);
    server_stop(&s);
    g_async_queue_unref(r->posted);
    g_free(r);
}

/* Hooks installed while a context runs learn about it at start, and
 * copsim's end unbinds it (reaped) before the stop hook. */
static void test_install_while_running(void)
{
    struct recorder *r = g_new(struct recorder, 1);
    struct server s;
    struct run loop = {.image = "tests/cop/copsim-probe.elf",
                       .argv = {"p", "loop"}, .argc = 2, .limit = 300000000};
    GThread *thread;
    char err[256];

    recorder_init(r);
    server_start(&s, 1000000);
    thread = g_thread_new("client", run_context, &loop);
    for (;;) {
        g_assert_cmpint(copsim_hooks_install(s.sim, &r->hooks, err,
                                             sizeof(err)), ==, 0);
        if (r->bound_at_start)
            break;
        copsim_hooks_remove(s.sim);
        g_usleep(10000);
    }
    g_assert_cmpuint(r->first_bound_context, ==, loop.id);
    /* The cycle limit ends it as a fault: one unbind, reason fault. */
    g_thread_join(thread);
    g_assert_cmpint(loop.stop.reason, ==, COP_STOP_FAULT);
    g_assert_cmpuint(r->count, ==, 1);
    g_assert_cmpint(r->records[0].kind, ==, 'u');
    g_assert_cmpint(r->records[0].reason, ==, COPSIM_UNBIND_FAULT);
    server_stop(&s);
    g_assert_cmpint(r->stopped, ==, r->started);
    g_free(r);
}

int main(int argc, char **argv)
{
    char *socket_path;
    int status;

    g_test_init(&argc, &argv, NULL);
    socket_dir = g_dir_make_tmp("cs-hooks-XXXXXX", NULL);
    socket_path = g_build_filename(socket_dir, "s", NULL);
    g_setenv("COPSIM_SOCKET", socket_path, TRUE);
    g_test_add_func("/copsim/hooks/every-switch", test_hooks_see_every_switch);
    g_test_add_func("/copsim/hooks/waits-for-guest-ack",
                    test_waits_for_guest_ack);
    g_test_add_func("/copsim/hooks/install-while-running",
                    test_install_while_running);
    status = g_test_run();
    g_rmdir(socket_dir);
    g_free(socket_path);
    g_free(socket_dir);
    return status;
}
