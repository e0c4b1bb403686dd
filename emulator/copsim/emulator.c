/*
 * emulator.c — one run of a context: its qemu-system-riscv32 with the
 * trace-unit plugin, from spawn to reaping.
 *
 * The run belongs to the connection thread of the context's client, which
 * spawns QEMU (so the kernel kills QEMU should that thread die) and then
 * waits in one poll() on four things:
 *
 *   the pidfd of QEMU        it ended: reap it, classify the end;
 *   QEMU's standard output   the program's console (the UART): copied to
 *                            the descriptor the client gave, whole lines
 *                            at a time, and the last "cop: " line
 *                            remembered (the runtime's trap and error
 *                            reports) for the fault reason;
 *   QEMU's standard error    what QEMU or the plugin said, kept for errors;
 *   the client's socket      a hang-up means the host program died or gave
 *                            up: QEMU is killed and the context reaped.
 *
 * Before the context may be scheduled, its plugin must have attached to the
 * context's register file block and be waiting at the closed gate: until
 * then poll() wakes every 2 ms to look.  Binding a context whose QEMU is
 * still starting would only keep a slot idle.
 */
#include "emulator/copsim/copsim-int.h"

#include "trace-unit/trace-unit.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ATTACH_POLL_MS      2
#define ATTACH_TIMEOUT_NS   (60ull * 1000000000ull)

struct run_io {
    int pidfd;
    int console;                /* read end of QEMU's stdout */
    int errors;                 /* read end of QEMU's stderr */
    struct console_out out;     /* the console, on its way to the client */
    struct line_tracker error_lines;
};

static int pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Reads what a pipe has; returns 0 at end of file, 1 otherwise. */
static int pump(struct run_io *io, int fd)
{
    char buf[CONSOLE_CHUNK];
    ssize_t got;

    do {
        got = read(fd, buf, sizeof(buf));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
        if (fd == io->console)
            console_out_flush(&io->out);
        return 0;
    }
    if (fd == io->console)
        console_out_feed(&io->out, buf, (size_t)got);
    else
        tracker_feed(&io->error_lines, buf, (size_t)got);
    return 1;
}

/* Whether the plugin of process `emulator` waits at the closed gate. */
static int plugin_waits(const struct trace_regs_context *regs, pid_t emulator,
                        uint32_t gate)
{
    return __atomic_load_n(&regs->pid, __ATOMIC_ACQUIRE) == emulator
        && __atomic_load_n(&regs->status, __ATOMIC_ACQUIRE)
           == TRACE_CONTEXT_HELD
        && __atomic_load_n(&regs->ack, __ATOMIC_ACQUIRE) == gate;
}

/* A message on the socket while the context runs: the client may only hang
 * up (or die); anything else gets EBUSY.  Returns 1 when it is gone. */
int emulator_client_event(int sock)
{
    struct copsim_message *message = malloc(sizeof(*message));
    struct copsim_destroy_reply reply;
    int got;

    if (!message)
        return 0;
    got = copsim_receive(sock, message);
    if (got > 0) {
        copsim_message_close_fds(message);
        memset(&reply, 0, sizeof(reply));
        copsim_header_init(&reply.header,
                           message->u.header.type | COPSIM_REPLY,
                           sizeof(reply));
        copsim_status_set(&reply.status, EBUSY,
                          "the context is running; wait for its run");
        copsim_send(sock, &reply.header, NULL, 0);
    }
    free(message);
    return got == 0 || (got < 0 && errno != EPROTO && errno != EAGAIN);
}

/* How QEMU ended, seen with WNOWAIT: it stays a zombie, so its pid cannot
 * be reused while the scheduler may still signal it. */
static int peek_end(pid_t emulator, struct emulator_end *end)
{
    siginfo_t info;

    memset(&info, 0, sizeof(info));
    if (waitid(P_PID, (id_t)emulator, &info, WEXITED | WNOWAIT | WNOHANG) < 0
        || info.si_pid != emulator)
        return 0;
    end->signaled = info.si_code != CLD_EXITED;
    end->code = info.si_status;
    return 1;
}

/*
 * Waits for QEMU to end, serving its pipes and watching the client.
 * *attached says whether the plugin ever waited at the gate (the program
 * started), *client_gone whether the client left.
 */
static void supervise(struct copsim *sim, struct sim_context *c,
                      pid_t emulator, int client_sock, struct run_io *io,
                      struct emulator_end *end, int *attached,
                      int *client_gone)
{
    struct trace_regs_context *regs = trace_unit_context(sim->unit,
                                                         c->info.trace_context);
    uint32_t gate = __atomic_load_n(&regs->gate, __ATOMIC_ACQUIRE);
    uint64_t give_up = schedlog_monotonic_ns() + ATTACH_TIMEOUT_NS;
    int open_pipes = 2, ended = 0;

    while (!ended || open_pipes > 0) {
        struct pollfd fds[4] = {
            {ended ? -1 : io->pidfd, POLLIN, 0},
            {io->console, POLLIN, 0},
            {io->errors, POLLIN, 0},
            {*client_gone ? -1 : client_sock, POLLIN, 0},
        };
        int timeout = *attached || ended ? -1 : ATTACH_POLL_MS;

        if (poll(fds, 4, timeout) < 0 && errno != EINTR)
            break;
        if (!*attached && !ended && plugin_waits(regs, emulator, gate)) {
            *attached = 1;
            scheduler_make_runnable(&sim->sched, c);
        } else if (!*attached && !ended
                   && schedlog_monotonic_ns() > give_up) {
            scheduler_kill(&sim->sched, c, SIM_KILL_ATTACH);
        }
        for (int i = 1; i <= 2; i++)
            if (fds[i].revents && !pump(io, fds[i].fd)) {
                if (i == 1)
                    io->console = -1;
                else
                    io->errors = -1;
                close(fds[i].fd);
                open_pipes--;
            }
        if (fds[3].revents && emulator_client_event(client_sock)) {
            *client_gone = 1;
            scheduler_kill(&sim->sched, c, SIM_KILL_CLIENT);
        }
        if (fds[0].revents && peek_end(emulator, end))
            ended = 1;
    }
    while (!ended) {
        struct pollfd wait_end = {io->pidfd, POLLIN, 0};

        poll(&wait_end, 1, -1);
        ended = peek_end(emulator, end);
    }
}

/* How the run ended, from the way QEMU ended and what was said. */
static void classify(struct run_io *io, const struct emulator_end *end,
                     enum sim_kill kill_reason, const struct sim_context *c,
                     struct run_result *result)
{
    emulator_classify(tracker_last(&io->out.cop_lines),
                      tracker_last(&io->error_lines), end, kill_reason, c,
                      result);
}

void emulator_classify(const char *cop_line, const char *error_line,
                       const struct emulator_end *end,
                       enum sim_kill kill_reason, const struct sim_context *c,
                       struct run_result *result)
{
    result->stop_reason = COPSIM_STOP_FAULT;
    result->exit_status = end->signaled ? 128 + end->code : end->code;
    if (kill_reason == SIM_KILL_CYCLES)
        snprintf(result->detail, sizeof(result->detail),
                 "looping: stopped after its limit of %llu cycles",
                 (unsigned long long)c->max_cycles);
    else if (kill_reason == SIM_KILL_BIND)
        snprintf(result->detail, sizeof(result->detail),
                 "the trace unit refused to bind it to a slot");
    else if (kill_reason == SIM_KILL_ATTACH)
        snprintf(result->detail, sizeof(result->detail),
                 "the emulator's plugin never reached the run gate");
    else if (kill_reason == SIM_KILL_CLIENT)
        snprintf(result->detail, sizeof(result->detail),
                 "its host process hung up");
    else if (end->signaled)
        snprintf(result->detail, sizeof(result->detail),
                 "emulator killed by signal %d (%s)%s%s", end->code,
                 strsignal(end->code), *error_line ? ": " : "", error_line);
    else if (strncmp(error_line, "coptrace: ", 10) == 0)
        snprintf(result->detail, sizeof(result->detail), "emulator: %s",
                 error_line);
    else if (result->exit_status == COP_STATUS_TRAP
             || result->exit_status == COP_STATUS_FATAL)
        snprintf(result->detail, sizeof(result->detail), "%s",
                 *cop_line ? cop_line
                 : result->exit_status == COP_STATUS_TRAP ? "unhandled trap"
                                                          : "runtime error");
    else
        result->stop_reason = COPSIM_STOP_EXIT;
}

/* Builds the QEMU command with the trace-unit plugin for context c. */
static int build_command(struct copsim *sim, struct sim_context *c,
                         struct cop_argv *command, char *err, size_t errlen)
{
    struct cop_qemu_options options = {
        .program = sim->config.qemu_program,
        .ram_path = c->ram.path,
    };
    char plugin[3 * COPSIM_PATH_MAX], counts[COPSIM_PATH_MAX];

    cop_argv_init(command);
    if (sim->counts_dir
        && copsim_counts_path(sim, c, counts, sizeof(counts)) < 0) {
        snprintf(err, errlen, "%s: path too long",
                 sim->config.exact_counts_dir);
        return -1;
    }
    if (trace_plugin_arg(plugin, sizeof(plugin), sim->plugin_path,
                         sim->regs_path, c->info.trace_context,
                         sim->config.reference_mode ? TRACE_MODE_REFERENCE
                                                    : TRACE_MODE_FAST,
                         sim->counts_dir ? counts : NULL,
                         c->ram.path) < 0) {
        snprintf(err, errlen, "%s: plugin argument too long", sim->regs_path);
        return -1;
    }
    if (cop_qemu_command(command, &options) < 0
        || cop_argv_add(command, "-plugin") < 0
        || cop_argv_add(command, plugin) < 0) {
        snprintf(err, errlen, "out of memory for the QEMU command");
        cop_argv_free(command);
        return -1;
    }
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* Spawns QEMU with its stdout and stderr on two new pipes. */
static int spawn(struct cop_argv *command, struct run_io *io, pid_t *emulator,
                 char *err, size_t errlen)
{
    int console[2], errors[2];
    struct cop_error cerr;
    int status;

    if (pipe2(console, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(errors, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        close(console[0]);
        close(console[1]);
        return -1;
    }
    status = cop_qemu_spawn_io(command, console[1], errors[1], emulator, &cerr);
    close(console[1]);
    close(errors[1]);
    io->console = console[0];
    io->errors = errors[0];
    if (status < 0) {
        snprintf(err, errlen, "%s", cerr.message);
        close_fd(&io->console);
        close_fd(&io->errors);
        return -1;
    }
    io->pidfd = pidfd_open(*emulator);
    if (io->pidfd < 0) {
        snprintf(err, errlen, "pidfd_open: %s", strerror(errno));
        kill(*emulator, SIGKILL);
        waitpid(*emulator, NULL, 0);
        close_fd(&io->console);
        close_fd(&io->errors);
        return -1;
    }
    return 0;
}

/* The run could not start the program: an error for the client. */
static void describe_failed_start(const struct sim_context *c,
                                  struct run_io *io,
                                  const struct emulator_end *end, char *err,
                                  size_t errlen)
{
    const char *line = tracker_last(&io->error_lines);

    snprintf(err, errlen, "emulator for context %llu %s %d before the "
             "program started%s%s", (unsigned long long)c->info.id,
             end->signaled ? "killed by signal" : "exited with status",
             end->code, *line ? ": " : "", line);
}

int emulator_run(struct copsim *sim, struct sim_context *c, int client_sock,
                 int console_fd, int argc, char **argv, uint64_t max_cycles,
                 struct run_result *result, char *err, size_t errlen)
{
    struct trace_regs_context *regs = trace_unit_context(sim->unit,
                                                         c->info.trace_context);
    struct run_io io = {
        .pidfd = -1, .console = -1, .errors = -1,
        .error_lines = {.prefix = ""},
    };
    struct emulator_end end = {0, 0};
    enum copsim_unbind_reason reason;
    struct cop_argv command;
    struct cop_error cerr;
    int attached = 0, started;
    pid_t emulator;

    if (sim->slot_model)
        return slots_run(sim, c, client_sock, console_fd, argc, argv,
                         max_cycles, result, err, errlen);
    memset(result, 0, sizeof(*result));
    console_out_init(&io.out, console_fd);
    if (cop_ram_load(&c->ram, &c->image, argc, argv, &cerr) < 0) {
        snprintf(err, errlen, "%s", cerr.message);
        return -1;
    }
    if (trace_context_watch_guards(sim->unit, c->info.trace_context,
                                   c->info.guard_ls_offset,
                                   trace_watchable_guards(c->info.n_regions),
                                   err, errlen) < 0)
        return -1;
    if (build_command(sim, c, &command, err, errlen) < 0)
        return -1;
    trace_context_hold(regs);
    started = spawn(&command, &io, &emulator, err, errlen);
    cop_argv_free(&command);
    if (started < 0)
        return -1;
    scheduler_starting(&sim->sched, c, emulator, max_cycles);
    schedlog_run(&sim->log, &c->info, (unsigned)argc);
    supervise(sim, c, emulator, client_sock, &io, &end, &attached,
              &result->client_gone);
    result->instructions = __atomic_load_n(&regs->instructions,
                                           __ATOMIC_ACQUIRE);
    classify(&io, &end, scheduler_disarm(&sim->sched, c), c, result);
    if (!attached && !result->client_gone) {
        describe_failed_start(c, &io, &end, err, errlen);
        reason = COPSIM_UNBIND_FAULT;
        snprintf(result->detail, sizeof(result->detail), "%s", err);
    } else {
        reason = result->client_gone ? COPSIM_UNBIND_REAP
                 : result->stop_reason == COPSIM_STOP_EXIT
                     ? COPSIM_UNBIND_EXIT : COPSIM_UNBIND_FAULT;
    }
    scheduler_retire(&sim->sched, c, reason, result->exit_status,
                     result->instructions, result->detail);
    if (end.signaled)           /* killed: count what the slots saw */
        result->instructions = c->cycles_run;
    waitpid(emulator, NULL, 0);
    close_fd(&io.pidfd);
    close_fd(&io.console);
    close_fd(&io.errors);
    return !attached && !result->client_gone ? -1 : 0;
}
