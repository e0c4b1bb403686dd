/*
 * copcontrol — control the coprof profiler, the way opcontrol controls
 * OProfile: start a shared copsim (--init), set the rate (--event,
 * --sample-period, --frequency), start a session whose stream goes to a
 * detached coprofd (--start), dump, stop, reset, shut down, show the state.
 *
 * Each invocation does one action.  The socket is copsim's default
 * ($COPSIM_SOCKET, else the per-user one: copsim_socket_path), and
 * copcontrol's own files live in the socket's directory (state.h).
 * Settings given without an action are saved; an action uses the saved
 * settings with those of its own command line (and saves them once it
 * worked).  The rate is resolved against the running copsim's nominal
 * clock and FIFO depth (rate.c), set and started through the driver's
 * control interface (driver.c); coprofd gets the stream's descriptor and
 * copsim's event log (daemons.c).  --stop waits for coprofd's last flush,
 * --dump for the session's flushes.dump key to move (session.c).  How a
 * session ended is its end_state and end_reason keys; where coprofd could
 * not write them (it died, its disk is full) copcontrol tells from the pid
 * file (a coprofd gone before --stop) and from coprofd's own lines in
 * coprofd.log ("session incomplete: ...", "dump failed: ..."), and writes
 * what it found into the session when it can.
 *
 * Exit status: 0 done, 1 a runtime failure, 2 bad usage; every failure is
 * one line "copcontrol: THING: reason".
 */
#include "control/daemons.h"
#include "control/driver.h"
#include "control/options.h"
#include "control/events.h"
#include "control/rate.h"
#include "control/sampling.h"
#include "control/session.h"
#include "control/state.h"
#include "common/copsim-socket.h"
#include "lfsr/lfsr.h"
#include "abi/trace-regs.h"
#include "escape-protocol/copstream.h"
#include "abi/copdrv-limits.h"
#include "common/cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_OK             0
#define EXIT_FAILED         1
#define EXIT_USAGE          2
#define ERR_MAX             1024
#define COPROFD_STOP_MS     60000
#define DUMP_MS             15000
#define COPSIM_STOP_MS      30000
#define HOST_STOP_MS        120000
#define HOST_DUMP_MARK      "coprof-host: dump "

enum action {
    ACT_NONE, ACT_INIT, ACT_START, ACT_STOP, ACT_DUMP, ACT_RESET,
    ACT_SHUTDOWN, ACT_STATUS, ACT_LIST_EVENTS,
};

struct options {
    enum action action;
    const char *action_name;
    struct settings given;
    int given_any;
    int verbose;
    struct daemon_args copsim_args;
};

/* Where everything is. */
struct control {
    struct options opt;
    struct settings settings;       /* saved, with the given merged in */
    char socket[COPSIM_PATH_MAX];
    char state[PATH_MAX];
    char err[ERR_MAX];
};

static void usage(FILE *out)
{
    fprintf(out,
"NAME\n"
"    copcontrol - control the coprof coprocessor profiler (like opcontrol)\n"
"\n"
"SYNOPSIS\n"
"    copcontrol [SETTINGS] ACTION\n"
"    copcontrol SETTINGS                  (save settings for later actions)\n"
"    copcontrol --serve-pprof=HOST:PORT   (the session's profiles at\n"
"                                          /debug/pprof/profile?seconds=N)\n"
"\n"
"DESCRIPTION\n"
"    copcontrol runs a system-wide profiling session: a shared copsim (the\n"
"    emulated coprocessors, with the kernel driver), whose host programs\n"
"    find it through libcop's default socket, and a coprofd that records\n"
"    the driver's sample stream into a session directory for copreport.\n"
"    The LFSR value and the driver's poll interval are computed here, from\n"
"    the rate asked for and copsim's nominal clock and FIFO depth.\n"
"\n"
"ACTIONS (one at a time)\n"
"    --init            start a shared copsim on the socket unless one\n"
"                      answers there (idempotent)\n"
"    --start           --init, then program the driver and start a session;\n"
"                      coprofd records it in the session directory.  An\n"
"                      existing session there is moved to DIR.old first\n"
"                      (an older DIR.old is replaced), as perf keeps\n"
"                      perf.data.old\n"
"    --stop            stop the session; coprofd reads the stream to its end,\n"
"                      flushes and exits; its summary is printed.  A session\n"
"                      that is not complete (coprofd or copsim died, a full\n"
"                      disk) fails with why, after what it holds\n"
"    --dump            make coprofd flush now (SIGHUP) and wait until it did:\n"
"                      session.db then holds every sample so far\n"
"    --reset           clear the current session's data; a running session\n"
"                      is stopped and started again with the same settings\n"
"    --shutdown        --stop if a session runs, then stop the copsim that\n"
"                      copcontrol --init started\n"
"    --status          what runs: event, count, LFSR value, rate and period\n"
"                      at the nominal clock, poll interval, samples, lost by\n"
"                      cause, contexts, coprofd's pid, the session directory\n"
"    --list-events     SPU_CYCLES and SPU_INSTRUCTIONS with their valid\n"
"                      range, and the host CPU's\n"
"                      events that libpfm4 knows on this machine\n"
"    -h, --help        this text\n"
"\n"
"SETTINGS (saved; given without an action they are only saved)\n"
"    --event=SPU_CYCLES:N, --event=SPU_INSTRUCTIONS:N\n"
"                      one sample every N slot cycles (modelled cycles:\n"
"                      the timing model's, stalls included), or every N\n"
"                      retired instructions; N in 1..16777215, and no\n"
"                      smaller than what keeps the poll interval at or\n"
"                      above the driver's floor of 100 us (157 with\n"
"                      copsim's defaults: 3.2 GHz, 4096-entry FIFO; a\n"
"                      deeper FIFO allows less)\n"
"    --sample-period=TIME\n"
"                      a sample every TIME (ns, us, ms, s: e.g. 50us) at\n"
"                      copsim's nominal clock\n"
"    --frequency=HZ    HZ samples a second per slot (Hz, kHz, MHz, GHz: e.g.\n"
"                      20kHz) at copsim's nominal clock\n"
"                      (one of the three; default " RATE_DEFAULT_EVENT ")\n"
"    --no-dither, --dither\n"
"                      sample at exactly every N cycles, or (the default)\n"
"                      at N plus a small jitter of mean 0 from a seeded\n"
"                      generator in the trace unit, so that code in step\n"
"                      with N (a loop whose length divides N) is not always\n"
"                      sampled at the same instruction (aliasing)\n"
"    --dither-seed=S   the jitter's seed (1..2^63-1), to repeat a capture\n"
"                      sequence; default: a new one drawn at each --start,\n"
"                      shown by --start and --status and kept in the\n"
"                      session\n"
"    --fifo-full=stall|drop\n"
"                      what a capture does when its slot's trace FIFO is\n"
"                      full: stall (default) makes the coprocessor wait\n"
"                      until the driver drains it, so no sample is lost and\n"
"                      only wall time passes; drop loses the capture and\n"
"                      counts it, as the Cell did\n"
"    --session-dir=DIR where coprofd records the session (default\n"
"                      $XDG_DATA_HOME/coprof/current, else\n"
"                      ~/.local/share/coprof/current)\n"
"    --buffer-size=N   the driver's event buffer in 64-bit words, %u..%u\n"
"                      (default %u: 4 MiB)\n"
"    --driver=hosted|linux\n"
"                      the kernel driver that samples: hosted in copsim\n"
"                      (default), or copdrv.ko in a Linux guest under QEMU\n"
"                      with copsim's register file as its PCI device; a\n"
"                      copsim --init starts for linux hosts no driver\n"
"                      (--no-driver), and one that does is refused.  The\n"
"                      guest's console goes to guest.log\n"
HOST_OPTIONS_HELP
"                      The host side follows each host program from the\n"
"                      second after it runs its first context in the\n"
"                      session (with --host-sched=all also copsim and its\n"
"                      QEMUs from --start); --dump also stores what it\n"
"                      aggregated and its raw events\n"
"\n"
"OTHER OPTIONS\n"
"    --call-graph[=DEPTH]\n"
"                      with --init (or an --start that starts copsim):\n"
"                      capture each sample's call stack, up to DEPTH frames\n"
"                      (1..64, default 16); copreport callgraph reads them\n"
"    --copsim-arg=ARG  with --init (or an --start that starts copsim): pass\n"
"                      ARG to copsim, e.g. --copsim-arg=--fifo-depth=65536\n"
"                      (repeatable)\n"
"    --verbose         say what is done\n"
"\n"
"FILES\n"
"    copsim's socket is $COPSIM_SOCKET, else $XDG_RUNTIME_DIR/coprof/\n"
"    copsim.sock, else /tmp/coprof-UID/copsim.sock.  In its directory:\n"
"    copcontrol.conf (saved settings), copsim.pid and copsim.log (the copsim\n"
"    --init started), coprofd.pid (its pid and the session directory) and\n"
"    coprofd.log (its output and summary), coprof-host.pid and\n"
"    coprof-host.log (the host side's recorder); copsim's own copsim.regs and\n"
"    event log copsim.coplog, which coprofd imports into the session.\n"
"\n"
"EXIT STATUS\n"
"    0 done; 1 a runtime failure (nothing answers, a daemon failed, a\n"
"    time-out); 2 bad usage (unknown option, bad count, rate or event).\n"
"    Every failure is one line: copcontrol: THING: reason.\n"
"\n"
"EXAMPLES\n"
"    copcontrol --start --event=SPU_CYCLES:50000\n"
"    ./host-program; copcontrol --dump; copreport ...\n"
"    copcontrol --stop\n"
"    copcontrol --frequency=20kHz --session-dir=/tmp/s   (saved)\n"
"    copcontrol --start; copcontrol --status; copcontrol --shutdown\n",
        DRIVER_BUFFER_WORDS_MIN, DRIVER_BUFFER_WORDS_MAX,
        DRIVER_BUFFER_WORDS_DEFAULT);
}

/* ---- Options -------------------------------------------------------------- */

static int set_action(struct options *o, enum action action,
                      const char *name)
{
    if (o->action != ACT_NONE && o->action != action)
        return cli_fail(EXIT_USAGE, "%s and %s: give one action",
                        o->action_name, name);
    o->action = action;
    o->action_name = name;
    return 0;
}

static int set_buffer(struct options *o, const char *arg)
{
    char err[ERR_MAX];

    if (driver_parse_buffer_words(arg, &o->given.buffer_words, err,
                                  sizeof(err)) < 0)
        return cli_fail(EXIT_USAGE, "%s", err);
    return 0;
}

static int set_session_dir(struct options *o, const char *arg)
{
    char err[ERR_MAX];

    if (session_absolute("--session-dir", arg, o->given.session_dir,
                         sizeof(o->given.session_dir), err, sizeof(err)) < 0)
        return cli_fail(EXIT_USAGE, "%s", err);
    return 0;
}

enum { OPT_SESSION_DIR = 256, OPT_BUFFER, OPT_VERBOSE, OPT_DRIVER };

static const struct cli_option long_options[] = {
    {0, "init", no_argument, ACT_INIT},
    {0, "start", no_argument, ACT_START},
    {0, "stop", no_argument, ACT_STOP},
    {0, "dump", no_argument, ACT_DUMP},
    {0, "reset", no_argument, ACT_RESET},
    {0, "shutdown", no_argument, ACT_SHUTDOWN},
    {0, "status", no_argument, ACT_STATUS},
    {0, "list-events", no_argument, ACT_LIST_EVENTS},
    RATE_LONG_OPTIONS,
    SAMPLING_LONG_OPTIONS,
    HOST_LONG_OPTIONS,
    {0, "session-dir", required_argument, OPT_SESSION_DIR},
    {0, "buffer-size", required_argument, OPT_BUFFER},
    {0, "verbose", no_argument, OPT_VERBOSE},
    {0, "driver", required_argument, OPT_DRIVER},
    OPTIONS_LONG_COMMON,
    CLI_END,
};

/* One option; 0, 1 for --help, or an exit status (cli_fail's). */
static int take_option(struct options *o, int c, const char *arg,
                       const char *word)
{
    char err[ERR_MAX];

    if (RATE_IS_OPTION(c)) {
        o->given_any = 1;
        return rate_take_option(&o->given.rate, c, arg, err, sizeof(err))
               < 0 ? cli_fail(EXIT_USAGE, "%s", err) : 0;
    }
    if (SAMPLING_IS_OPTION(c)) {
        o->given_any = 1;
        return sampling_take_option(&o->given.sampling, c, arg, err,
                                    sizeof(err)) < 0 ?
               cli_fail(EXIT_USAGE, "%s", err) : 0;
    }
    if (HOST_IS_OPTION(c)) {
        o->given_any = 1;
        return host_take_option(&o->given.host, c, arg, err, sizeof(err))
               < 0 ? cli_fail(EXIT_USAGE, "%s", err) : 0;
    }
    switch (c) {
    case ACT_INIT: case ACT_START: case ACT_STOP: case ACT_DUMP:
    case ACT_RESET: case ACT_SHUTDOWN: case ACT_STATUS: case ACT_LIST_EVENTS:
        return set_action(o, (enum action)c, word);
    case OPT_SESSION_DIR:
        o->given_any = 1;
        return set_session_dir(o, arg);
    case OPT_BUFFER:
        o->given_any = 1;
        return set_buffer(o, arg);
    case OPT_VERBOSE:
        o->verbose = 1;
        return 0;
    case OPT_DRIVER:
        o->given_any = 1;
        return settings_driver(&o->given, arg, err, sizeof(err)) < 0 ?
               cli_fail(EXIT_USAGE, "%s", err) : 0;
    default:
        return options_common(c, arg, word, "--help", &o->copsim_args);
    }
}

static int parse_options(int argc, char **argv, struct options *o)
{
    struct cli_parser parser;
    int c, status;

    memset(o, 0, sizeof(*o));
    settings_init(&o->given);
    cli_parser_init(&parser, long_options, ":");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        status = take_option(o, c, optarg, argv[optind - 1]);
        if (status == 1) {
            usage(stdout);
            exit(EXIT_OK);
        }
        if (status)
            return status;
    }
    if (optind < argc)
        return cli_fail(EXIT_USAGE, "%s: unexpected argument (see --help)",
                        argv[optind]);
    if (o->action == ACT_NONE && !o->given_any)
        return cli_fail(EXIT_USAGE, "no action and no setting given (see "
                        "--help)");
    return 0;
}

/* ---- Shared steps ---------------------------------------------------------- */

static void say(const struct control *c, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static void say(const struct control *c, const char *format, ...)
{
    va_list args;

    if (!c->opt.verbose)
        return;
    va_start(args, format);
    fprintf(stderr, "copcontrol: ");
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n");
    va_end(args);
}

static void state_file(const struct control *c, const char *name, char *buf,
                       size_t len)
{
    state_path(c->state, name, buf, len);
}

/* The running session's coprofd (0 when none), and its directory. */
static pid_t running_coprofd(const struct control *c, char *dir, size_t len)
{
    char path[PATH_MAX];
    pid_t pid;

    state_file(c, STATE_COPROFD_PID, path, sizeof(path));
    pid = pidfile_read(path, dir, len);
    return pid > 0 && daemons_alive(pid) ? pid : 0;
}

/* The coprofd the pid file names, alive or not (0 when none). */
static pid_t recorded_coprofd(const struct control *c, char *dir, size_t len)
{
    char path[PATH_MAX];
    pid_t pid;

    state_file(c, STATE_COPROFD_PID, path, sizeof(path));
    pid = pidfile_read(path, dir, len);
    return pid > 0 ? pid : 0;
}

/* Connects to copsim; 0, or -1 (err says why, errno ENOENT/ECONNREFUSED
 * when none answers).  A socket another user serves, or in a directory
 * another user can write, is never "no copsim": every action ends there,
 * with its one line, before anything is sent. */
static int connect_copsim(struct control *c, struct driver *d)
{
    if (driver_connect(d, c->socket, c->err, sizeof(c->err)) == 0) {
        if (strcmp(c->settings.driver, "linux") == 0) {
            char guest_socket[PATH_MAX], guest_log[PATH_MAX];

            state_file(c, STATE_GUEST_SOCKET, guest_socket,
                       sizeof(guest_socket));
            state_file(c, STATE_GUEST_LOG, guest_log, sizeof(guest_log));
            driver_use_linux(d, guest_socket, guest_log, 1);
        }
        return 0;
    }
    if (errno == EACCES)
        exit(cli_fail(EXIT_FAILED, "%s", c->err));
    return -1;
}

/* Starts copsim unless one serves; *started (if given) says whether this
 * call started it, for action_start() to stop it again on a failure. */
static int init_copsim(struct control *c, int announce, int *started)
{
    struct daemon_spec spec = {DAEMON_DETACHED, NULL, -1, 0, 0};
    const char *args[DAEMON_EXTRA_MAX + 4];
    char log[PATH_MAX], pidfile[PATH_MAX];
    struct driver d;
    int n = 0;
    pid_t pid;

    if (started)
        *started = 0;
    if (connect_copsim(c, &d) == 0) {
        driver_close(&d);
        if (announce)
            say(c, "copsim already serves on %s", c->socket);
        return EXIT_OK;
    }
    if (errno != ENOENT && errno != ECONNREFUSED)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    if (state_log_create(c->state, STATE_COPSIM_LOG, c->err,
                         sizeof(c->err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    state_file(c, STATE_COPSIM_LOG, log, sizeof(log));
    spec.log_path = log;
    args[n++] = "--socket";
    args[n++] = c->socket;
    if (strcmp(c->settings.driver, "linux") == 0)
        args[n++] = "--no-driver";      /* the module acks the mailboxes */
    for (int i = 0; i < c->opt.copsim_args.n; i++)
        args[n++] = c->opt.copsim_args.args[i];
    args[n] = NULL;
    pid = daemons_start_copsim(&spec, args, c->err, sizeof(c->err));
    if (pid < 0)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    state_file(c, STATE_COPSIM_PID, pidfile, sizeof(pidfile));
    if (pidfile_write(pidfile, pid, c->socket, c->err, sizeof(c->err)) < 0) {
        daemons_terminate(pid, COPSIM_STOP_MS);     /* nobody could find it */
        return cli_fail(EXIT_FAILED, "%s", c->err);
    }
    if (started)
        *started = 1;
    say(c, "copsim started (pid %ld), its output in %s", (long)pid, log);
    if (announce)
        printf("copcontrol: copsim (pid %ld) serves on %s\n", (long)pid,
               c->socket);
    return EXIT_OK;
}

/* Settings given on the command line are saved for later actions; one
 * line says so, with the session directory made absolute. */
static int save_settings(struct control *c)
{
    char conf[PATH_MAX];

    if (!c->opt.given_any)
        return EXIT_OK;
    if (state_dir_prepare(c->state, c->err, sizeof(c->err)) < 0 ||
        settings_save(c->state, &c->settings, c->err, sizeof(c->err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    state_path(c->state, STATE_CONF, conf, sizeof(conf));
    printf("copcontrol: settings saved in %s for later actions%s%s\n", conf,
           c->opt.given.session_dir[0] ? "; session directory " : "",
           c->opt.given.session_dir);
    return EXIT_OK;
}

/* The rate and session directory in force (defaults filled in). */
static int effective(struct control *c, struct rate_spec *rate, char *dir,
                     size_t len)
{
    char err[ERR_MAX];

    *rate = c->settings.rate;
    if (rate->kind == RATE_NONE &&
        rate_parse(RATE_EVENT, RATE_DEFAULT_EVENT, rate, err,
                   sizeof(err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", err);
    if (c->settings.session_dir[0])
        snprintf(dir, len, "%s", c->settings.session_dir);
    else if (session_default_dir(dir, len) < 0)
        return cli_fail(EXIT_FAILED, "no session directory: set "
                        "--session-dir (neither XDG_DATA_HOME nor HOME "
                        "is set)");
    return EXIT_OK;
}

/* ---- Actions -------------------------------------------------------------- */

/* Starts coprofd on the stream; its pid, or -1 (reported). */
/* The session's key `driver`: which driver samples. */
static void note_driver(struct control *c, const char *dir)
{
    static const char *const key[] = {"driver"};
    const char *value[] = {c->settings.driver[0] ? c->settings.driver :
                           "hosted"};
    char err[ERR_MAX];

    if (session_write_keys(dir, key, value, 1, err, sizeof(err)) < 0)
        cli_fail(EXIT_FAILED, "%s", err);
}

static pid_t start_coprofd(struct control *c, int stream_fd, const char *dir,
                           const char *event_log)
{
    struct daemon_spec spec = {DAEMON_DETACHED, NULL, stream_fd, 0, 0};
    char log[PATH_MAX], pidfile[PATH_MAX];
    int ready_fd;
    pid_t pid;

    if (state_log_create(c->state, STATE_COPROFD_LOG, c->err,
                         sizeof(c->err)) < 0) {
        cli_fail(EXIT_FAILED, "%s", c->err);
        return -1;
    }
    state_file(c, STATE_COPROFD_LOG, log, sizeof(log));
    spec.log_path = log;
    pid = daemons_start_coprofd(&spec, dir, event_log, &ready_fd, c->err,
                                sizeof(c->err));
    if (pid < 0) {
        cli_fail(EXIT_FAILED, "%s", c->err);
        return -1;
    }
    /* At once: a --start killed from here on leaves a coprofd that
     * --status and --stop find. */
    state_file(c, STATE_COPROFD_PID, pidfile, sizeof(pidfile));
    if (pidfile_write(pidfile, pid, dir, c->err, sizeof(c->err)) < 0) {
        /* Nobody could find it again: it does not outlive this start. */
        close(ready_fd);
        daemons_terminate(pid, COPROFD_STOP_MS);
        cli_fail(EXIT_FAILED, "%s", c->err);
        return -1;
    }
    if (daemons_wait_ready(pid, ready_fd, "coprofd", log, c->err,
                           sizeof(c->err)) < 0) {
        daemons_terminate(pid, COPROFD_STOP_MS);
        unlink(pidfile);
        cli_fail(EXIT_FAILED, "%s", c->err);
        return -1;
    }
    say(c, "coprofd started (pid %ld) on the stream, event log %s, its "
        "output in %s", (long)pid, event_log, log);
    note_driver(c, dir);
    return pid;
}

static int stop_session(struct control *c, int quiet);

/*
 * coprof-host for the session: the host programs as they run contexts
 * (--follow-session), with --host-sched=all copsim's threads and QEMUs;
 * copsim's event log gives it the contexts' lives.  What it cannot
 * record it says in its log, relayed here as one line; one that cannot
 * start is one line, and the rest records.
 */
static void start_host(struct control *c, const char *dir, pid_t copsim,
                       const char *event_log)
{
    struct daemon_spec spec = {DAEMON_DETACHED, NULL, -1, 0, 0};
    char log[PATH_MAX], pidfile[PATH_MAX], copsim_pid[32], line[512];
    const char *args[16 + HOST_ARGS_MAX];
    int n = 0;
    pid_t pid;

    if (!host_wanted(&c->settings.host))
        return;
    if (state_log_create(c->state, STATE_HOST_LOG, c->err,
                         sizeof(c->err)) < 0) {
        fprintf(stderr, "copcontrol: %s; the host side is not recorded\n",
                c->err);
        return;
    }
    state_file(c, STATE_HOST_LOG, log, sizeof(log));
    spec.log_path = log;
    snprintf(copsim_pid, sizeof(copsim_pid), "%ld", (long)copsim);
    args[n++] = "--session-dir";
    args[n++] = dir;
    args[n++] = "--copsim";
    args[n++] = copsim_pid;
    args[n++] = "--follow-session";
    if (event_log && *event_log) {
        args[n++] = "--event-log";  /* the contexts' lives */
        args[n++] = event_log;
    }
    host_args(&c->settings.host, args, &n);
    args[n] = NULL;
    pid = daemons_start_host(&spec, args, c->err, sizeof(c->err));
    if (pid < 0) {
        fprintf(stderr, "copcontrol: %s; the host side is not recorded\n",
                c->err);
        return;
    }
    state_file(c, STATE_HOST_PID, pidfile, sizeof(pidfile));
    if (pidfile_write(pidfile, pid, dir, c->err, sizeof(c->err)) < 0) {
        daemons_terminate(pid, HOST_STOP_MS);
        fprintf(stderr, "copcontrol: %s; the host side is not recorded\n",
                c->err);
        return;
    }
    if (daemons_log_line(log, "coprof-host: ", line, sizeof(line)) == 0)
        fprintf(stderr, "copcontrol: %s\n", line + strlen("coprof-host: "));
    if (session_host_begin(dir, c->err, sizeof(c->err)) < 0)
        fprintf(stderr, "copcontrol: %s\n", c->err);
    say(c, "coprof-host started (pid %ld), its output in %s", (long)pid,
        log);
}

/*
 * Why the host side is lost, into buf ("" when coprof-host stored it, or
 * none ran): coprof-host (pid) died before --stop, or ended without
 * storing it, with its last line in coprof-host.log (a full disk); also
 * written into the session where it can be.
 */
static void host_end_reason(struct control *c, const char *dir, pid_t pid,
                            int died, char *buf, size_t len)
{
    char log[PATH_MAX], line[512], err[ERR_MAX];
    struct session_totals t;
    int said;

    buf[0] = '\0';
    if (pid <= 0 || session_read(dir, &t, err, sizeof(err)) < 0 ||
        strcmp(t.host_end_state, "live") != 0)
        return;
    state_file(c, STATE_HOST_LOG, log, sizeof(log));
    said = daemons_log_line(log, "coprof-host: ", line, sizeof(line)) == 0;
    snprintf(buf, len, "coprof-host (pid %ld) %s%s%s", (long)pid, died ?
             "died during the session" : "ended without storing it",
             said ? ": " : "", said ? line + strlen("coprof-host: ") : "");
    session_mark_host_incomplete(dir, buf, err, sizeof(err));
}

/* The session's coprof-host stores the host side; "" in reason, or why it
 * is lost. */
static void stop_host(struct control *c, const char *dir, char *reason,
                      size_t len)
{
    char pidfile[PATH_MAX];
    pid_t pid;
    int died;

    reason[0] = '\0';
    state_file(c, STATE_HOST_PID, pidfile, sizeof(pidfile));
    pid = pidfile_read(pidfile, NULL, 0);
    if (pid <= 0)
        return;
    died = !daemons_alive(pid);
    if (!died) {
        say(c, "waiting for coprof-host (pid %ld) to store the host side",
            (long)pid);
        kill(pid, SIGTERM);
        if (daemons_wait(pid, HOST_STOP_MS, NULL) < 0)
            daemons_terminate(pid, COPSIM_STOP_MS);
    }
    unlink(pidfile);
    host_end_reason(c, dir, pid, died, reason, len);
}

/* What the session holds of the host side, one line (none without);
 * lost: why it holds none. */
static void print_host(const char *dir, const char *lost)
{
    char line[1024], err[ERR_MAX];

    if (lost[0])
        printf("copcontrol: host: the host side is lost: %s\n", lost);
    else if (session_describe_host(dir, line, sizeof(line), err,
                                   sizeof(err)) == 0 && line[0])
        printf("copcontrol: host: %s\n", line);
}

/* --call-graph needs a copsim whose register file has a call-stack area:
 * one --init (or this start) started with it. */
static int check_call_graph(struct control *c, struct driver *d)
{
    struct copdrv_control_reply get;

    if (!options_call_graph(&c->opt.copsim_args))
        return EXIT_OK;
    if (driver_get(d, &get, c->err, sizeof(c->err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    if (!get.stack_depth)
        return cli_fail(EXIT_FAILED, "--call-graph: the copsim serving on %s "
                        "was started without it, so it captures no call "
                        "stacks (copcontrol --shutdown, then --init "
                        "--call-graph)", c->socket);
    return EXIT_OK;
}

/*
 * The start in progress, from before the driver's START until coprofd.pid
 * names its coprofd: a --start killed in between (nothing can read the
 * stream then) is found by --status and --stop from this file.
 */
static int starting_write(struct control *c, const char *dir)
{
    char path[PATH_MAX];

    state_file(c, STATE_STARTING, path, sizeof(path));
    return pidfile_write(path, getpid(), dir, c->err, sizeof(c->err));
}

static void starting_remove(const struct control *c)
{
    char path[PATH_MAX];

    state_file(c, STATE_STARTING, path, sizeof(path));
    unlink(path);
}

/* A --start that died between the START and coprofd.pid: its pid, its
 * session directory in dir; 0 when none (or it still runs: alive). */
static pid_t starting_died(const struct control *c, char *dir, size_t len,
                           int *alive)
{
    char path[PATH_MAX];
    pid_t pid;

    state_file(c, STATE_STARTING, path, sizeof(path));
    pid = pidfile_read(path, dir, len);
    *alive = pid > 0 && daemons_alive(pid);
    return pid > 0 && !*alive ? pid : 0;
}

/* The session on a copsim that serves: SET, START, coprofd, coprof-host. */
static int start_on_copsim(struct control *c, const struct rate_spec *spec,
                           const struct sampling *sampling, char *dir)
{
    struct copsim_info_reply info;
    struct rate rate;
    struct driver d;
    char line[512], how[256], err[ERR_MAX];
    int status, fd = -1, moved;
    pid_t pid;

    if (connect_copsim(c, &d) < 0)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    if ((status = check_call_graph(c, &d)) != EXIT_OK) {
        driver_close(&d);
        return status;
    }
    if (driver_info(&d, &info, c->err, sizeof(c->err)) < 0 ||
        driver_program(&d, spec, c->settings.buffer_words * 8u, sampling,
                       &rate, c->err, sizeof(c->err)) < 0) {
        status = errno == EINVAL ? EXIT_USAGE : EXIT_FAILED;
        driver_close(&d);
        return cli_fail(status, "%s", c->err);
    }
    say(c, "SET: LFSR value 0x%06x for N=%u, poll interval %llu ns, "
        "buffer %u words", rate.value, rate.count,
        (unsigned long long)rate.poll_ns, c->settings.buffer_words);
    if (session_prepare(dir, &moved, c->err, sizeof(c->err)) < 0) {
        driver_close(&d);
        return cli_fail(EXIT_FAILED, "%s", c->err);
    }
    if ((d.kind == DRIVER_LINUX &&
         state_log_create(c->state, STATE_GUEST_LOG, c->err,
                          sizeof(c->err)) < 0) ||
        starting_write(c, dir) < 0 ||
        driver_start(&d, &fd, c->err, sizeof(c->err)) < 0) {
        driver_close(&d);
        starting_remove(c);
        session_restore(dir, moved);
        return cli_fail(EXIT_FAILED, "%s", c->err);
    }
    cli_test_point("copcontrol-after-start");
    pid = start_coprofd(c, fd, dir, info.event_log_path);
    close(fd);
    starting_remove(c);     /* coprofd.pid says it now, or it failed */
    if (pid < 0) {
        driver_stop(&d, err, sizeof(err));
        driver_close(&d);
        session_restore(dir, moved);
        return EXIT_FAILED;
    }
    driver_close(&d);
    start_host(c, dir, (pid_t)info.pid, info.event_log_path);
    if ((status = save_settings(c)) != EXIT_OK) {
        /* Told it failed: nothing of it keeps running. */
        stop_session(c, 1);
        session_restore(dir, moved);
        return status;
    }
    rate_describe(&rate, line, sizeof(line));
    sampling_describe(sampling->dither, sampling->seed,
                      sampling_fifo_name(sampling->fifo_full), how,
                      sizeof(how));
    printf("copcontrol: started %s, %s; coprofd pid %ld, session %s\n",
           line, how, (long)pid, dir);
    return EXIT_OK;
}

/* A copsim this --start started, stopped again after its failure: a start
 * that says it failed leaves nothing of its own running. */
static void stop_started_copsim(struct control *c)
{
    char pidfile[PATH_MAX];
    pid_t pid;

    state_file(c, STATE_COPSIM_PID, pidfile, sizeof(pidfile));
    pid = pidfile_read(pidfile, NULL, 0);
    if (pid <= 0)
        return;
    say(c, "stopping copsim (pid %ld), started for this --start",
        (long)pid);
    daemons_terminate(pid, COPSIM_STOP_MS);
    unlink(pidfile);
}

static int action_start(struct control *c)
{
    struct rate_spec spec;
    struct sampling sampling;
    char dir[PATH_MAX];
    int status, started;

    if ((status = effective(c, &spec, dir, sizeof(dir))) != EXIT_OK)
        return status;
    if (host_options_check(&c->settings.host, c->err, sizeof(c->err)) < 0)
        return cli_fail(EXIT_USAGE, "%s", c->err);
    if (running_coprofd(c, NULL, 0))
        return cli_fail(EXIT_FAILED, "a session runs already (--stop it "
                        "first)");
    if (sampling_resolve(&c->settings.sampling, &sampling, c->err,
                         sizeof(c->err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    if ((status = init_copsim(c, 0, &started)) != EXIT_OK)
        return status;
    status = start_on_copsim(c, &spec, &sampling, dir);
    if (status != EXIT_OK && started)
        stop_started_copsim(c);
    return status;
}

/* The session's dither, FIFO-full policy and stall time, one line. */
static void print_sampling(const char *dir)
{
    struct session_totals t;
    char line[512], err[ERR_MAX];

    if (session_read(dir, &t, err, sizeof(err)) < 0)
        return;
    session_describe_sampling(&t, line, sizeof(line));
    printf("copcontrol: sampling: %s\n", line);
}

/*
 * coprofd's last line "coprofd: DIR: WHAT..." in its log, into line;
 * the length of that prefix, or 0 when there is none.
 */
static size_t coprofd_line(const struct control *c, const char *dir,
                           const char *what, char *line, size_t len)
{
    char log[PATH_MAX], prefix[PATH_MAX + 64];

    state_file(c, STATE_COPROFD_LOG, log, sizeof(log));
    snprintf(prefix, sizeof(prefix), "coprofd: %s: %s", dir, what);
    if (daemons_log_line(log, prefix, line, len) < 0)
        return 0;
    return strlen(prefix);
}

/*
 * Why a session whose coprofd has ended is incomplete, into buf ("" when
 * it is complete): the session's end_reason, else coprofd's own line in
 * its log (its session directory may be full), else what is known of its
 * coprofd (pid; died: it was gone before the stop).  What copcontrol
 * knows more goes into the session keys where they can be written.
 */
static void session_end_reason(struct control *c, const char *dir, pid_t pid,
                               int died, char *buf, size_t len)
{
    char line[1024], err[ERR_MAX];
    struct session_totals t;
    int readable = session_read(dir, &t, err, sizeof(err)) == 0;
    size_t said;

    buf[0] = '\0';
    if (readable && strcmp(t.end_state, "complete") == 0)
        return;
    if (readable && t.end_reason[0]) {
        snprintf(buf, len, "%s", t.end_reason);
        return;
    }
    said = coprofd_line(c, dir, "session incomplete: ", line, sizeof(line));
    if (said && !died)
        snprintf(buf, len, "%s", line + said);
    else if (died)
        snprintf(buf, len, "coprofd (pid %ld) died during the session; "
                 "%s holds %lld samples, what its last flush wrote",
                 (long)pid, dir, readable ? (long long)t.samples : 0LL);
    else
        snprintf(buf, len, "coprofd (pid %ld) ended without completing "
                 "the session", (long)pid);
    if (readable)
        session_mark_incomplete(dir, buf, err, sizeof(err));
}

/* STOP, then coprofd's end; quiet: no summary (for --reset). */
static int stop_session(struct control *c, int quiet)
{
    char dir[PATH_MAX], pidfile[PATH_MAX], line[1024], reason[ERR_MAX];
    char host[ERR_MAX], started[PATH_MAX];
    struct session_totals t;
    pid_t pid = running_coprofd(c, dir, sizeof(dir));
    pid_t dead = pid ? 0 : recorded_coprofd(c, dir, sizeof(dir));
    char guest_err[ERR_MAX] = "";
    struct driver d;
    int stopped = 0, alive;
    pid_t starter;

    if (connect_copsim(c, &d) == 0) {
        stopped = driver_stop(&d, c->err, sizeof(c->err)) == 0;
        if (!stopped && d.kind == DRIVER_LINUX)   /* why, for the reason */
            snprintf(guest_err, sizeof(guest_err), "%s", c->err);
        driver_close(&d);
    }
    if (!pid && (starter = starting_died(c, started, sizeof(started),
                                         &alive))) {
        starting_remove(c);
        return cli_fail(EXIT_FAILED, "session %s was not recorded: "
                        "copcontrol --start (pid %ld) ended after the "
                        "driver's START, before a coprofd read the stream; "
                        "the driver's session is %s", started, (long)starter,
                        stopped ? "stopped" : "gone with its copsim");
    }
    if (!stopped && !pid && !dead)
        return cli_fail(EXIT_FAILED, "no session runs");
    if (!stopped && pid) {
        say(c, "no session in the driver (%s): ending coprofd", c->err);
        kill(pid, SIGTERM);     /* no stream's end will come: end it */
    }
    say(c, "waiting for coprofd (pid %ld) to flush and exit", (long)pid);
    if (pid && daemons_wait(pid, COPROFD_STOP_MS, NULL) < 0)
        return cli_fail(EXIT_FAILED, "coprofd (pid %ld) did not finish "
                        "within %d s; its session %s may be incomplete",
                        (long)pid, COPROFD_STOP_MS / 1000, dir);
    state_file(c, STATE_COPROFD_PID, pidfile, sizeof(pidfile));
    unlink(pidfile);
    stop_host(c, dir, host, sizeof(host));
    session_end_reason(c, dir, pid ? pid : dead, dead != 0, reason,
                       sizeof(reason));
    if (reason[0] && guest_err[0] && !strstr(reason, guest_err)) {
        size_t used = strlen(reason);
        char err[ERR_MAX];

        snprintf(reason + used, sizeof(reason) - used, ": %s", guest_err);
        session_mark_incomplete(dir, reason, err, sizeof(err));
    }
    if (!reason[0]) {
        if (!quiet && coprofd_line(c, dir, "samples=", line, sizeof(line)))
            printf("%s\n", line);
        else if (!quiet)
            printf("copcontrol: stopped\n");
        if (!quiet)
            print_host(dir, host);
        if (!quiet && pid)
            print_sampling(dir);
        if (!host[0])
            return EXIT_OK;
        return cli_fail(EXIT_FAILED, "session %s is incomplete: the host "
                        "side is lost: %s", dir, host);
    }
    if (session_read(dir, &t, c->err, sizeof(c->err)) == 0) {
        session_describe(&t, line, sizeof(line));
        printf("copcontrol: %s holds %s\n", dir, line);
    }
    print_host(dir, host);
    return cli_fail(EXIT_FAILED, "session %s is incomplete: %s%s%s", dir,
                    reason, host[0] ? "; the host side is lost: " : "", host);
}

/*
 * Waits until what the driver held when --dump was asked has reached
 * coprofd: the driver hands its buffer to the reader at the first poll
 * after COPDRV_WAKE_LATENCY_NS without a wake-up (like OProfile's buffer
 * watershed), so one latency and one poll interval are enough.
 */
static void wait_driver_handover(struct control *c)
{
    struct copdrv_control_reply get;
    uint64_t wait_ns = COPDRV_WAKE_LATENCY_NS + LFSR_POLL_MAX_NS;
    struct driver d;
    struct timespec pause;

    if (connect_copsim(c, &d) == 0) {
        if (driver_get(&d, &get, c->err, sizeof(c->err)) == 0)
            wait_ns = COPDRV_WAKE_LATENCY_NS + get.params.poll_interval_ns;
        driver_close(&d);
    }
    wait_ns += wait_ns / 4;             /* the poll thread's own delays */
    pause.tv_sec = (time_t)(wait_ns / 1000000000u);
    pause.tv_nsec = (long)(wait_ns % 1000000000u);
    nanosleep(&pause, NULL);
}

/* How many "dump failed" lines coprofd wrote into its log so far. */
static int coprofd_failures(const struct control *c, const char *dir)
{
    char log[PATH_MAX], prefix[PATH_MAX + 64], line[1024];
    FILE *f;
    int n = 0;

    state_file(c, STATE_COPROFD_LOG, log, sizeof(log));
    snprintf(prefix, sizeof(prefix), "coprofd: %s: dump failed: ", dir);
    if (!(f = fopen(log, "r")))
        return 0;
    while (fgets(line, sizeof(line), f))
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    fclose(f);
    return n;
}

/*
 * After a dump, coprof-host follows the host programs the session now
 * holds (SIGHUP) before --dump returns: it says so in its log, "coprof-host:
 * dump N: following P processes", which is waited for.
 */
static void dump_host(struct control *c)
{
    char path[PATH_MAX], log[PATH_MAX], before[256], now[256];
    struct timespec pause = {0, 20000000};
    pid_t pid;

    state_file(c, STATE_HOST_PID, path, sizeof(path));
    pid = pidfile_read(path, NULL, 0);
    if (pid <= 0 || !daemons_alive(pid))
        return;
    state_file(c, STATE_HOST_LOG, log, sizeof(log));
    if (daemons_log_line(log, HOST_DUMP_MARK, before, sizeof(before)) < 0)
        before[0] = '\0';
    if (kill(pid, SIGHUP) < 0)
        return;
    for (int waited = 0; waited < DUMP_MS; waited += 20) {
        if (daemons_log_line(log, HOST_DUMP_MARK, now, sizeof(now)) == 0 &&
            strcmp(now, before) != 0) {
            printf("copcontrol: host: %s\n", now + strlen("coprof-host: "));
            return;
        }
        nanosleep(&pause, NULL);
    }
    fprintf(stderr, "copcontrol: coprof-host (pid %ld) did not follow the "
            "session's programs within %d s\n", (long)pid, DUMP_MS / 1000);
}

static int action_dump(struct control *c)
{
    struct session_totals before, after;
    char dir[PATH_MAX], summary[512], line[1024];
    int failed_before;
    size_t said;
    struct timespec pause = {0, 20000000};
    pid_t pid = running_coprofd(c, dir, sizeof(dir));

    if (!pid)
        return cli_fail(EXIT_FAILED, "--dump: no coprofd runs (start a "
                        "session with --start)");
    wait_driver_handover(c);
    if (session_read(dir, &before, c->err, sizeof(c->err)) < 0)
        before.dumps = 0;
    failed_before = coprofd_failures(c, dir);
    if (kill(pid, SIGHUP) < 0)
        return cli_fail(EXIT_FAILED, "coprofd (pid %ld): %s", (long)pid,
                        strerror(errno));
    for (int waited = 0; waited < DUMP_MS; waited += 20) {
        if (session_read(dir, &after, c->err, sizeof(c->err)) == 0 &&
            after.dumps > before.dumps) {
            session_describe(&after, summary, sizeof(summary));
            printf("copcontrol: dumped %s: %s\n", dir, summary);
            dump_host(c);
            return EXIT_OK;
        }
        if (coprofd_failures(c, dir) > failed_before &&
            (said = coprofd_line(c, dir, "dump failed: ", line,
                                 sizeof(line))) > 0)
            return cli_fail(EXIT_FAILED, "coprofd (pid %ld) could not dump "
                            "into %s: %s", (long)pid, dir, line + said);
        nanosleep(&pause, NULL);
    }
    return cli_fail(EXIT_FAILED, "coprofd (pid %ld) did not dump within "
                    "%d s%s", (long)pid, DUMP_MS / 1000,
                    daemons_alive(pid) ? "" : ": it ended");
}

static int action_reset(struct control *c)
{
    char dir[PATH_MAX];
    struct rate_spec spec;
    int status;

    if (running_coprofd(c, dir, sizeof(dir))) {
        if ((status = stop_session(c, 1)) != EXIT_OK)
            return status;
        if (session_remove(dir, c->err, sizeof(c->err)) < 0)
            return cli_fail(EXIT_FAILED, "%s", c->err);
        return action_start(c);
    }
    if ((status = effective(c, &spec, dir, sizeof(dir))) != EXIT_OK)
        return status;
    if (session_remove(dir, c->err, sizeof(c->err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", c->err);
    printf("copcontrol: cleared %s\n", dir);
    return EXIT_OK;
}

static int action_shutdown(struct control *c)
{
    struct copsim_info_reply info;
    struct copdrv_control_reply get;
    char pidfile[PATH_MAX];
    struct driver d;
    pid_t ours;
    int status, stopped = EXIT_OK;

    if (connect_copsim(c, &d) < 0) {
        status = running_coprofd(c, NULL, 0) ? stop_session(c, 0) : EXIT_OK;
        say(c, "no copsim runs on %s", c->socket);
        return status;
    }
    if (driver_info(&d, &info, c->err, sizeof(c->err)) < 0 ||
        driver_get(&d, &get, c->err, sizeof(c->err)) < 0) {
        driver_close(&d);
        return cli_fail(EXIT_FAILED, "%s", c->err);
    }
    driver_close(&d);
    if (get.running || running_coprofd(c, NULL, 0))
        stopped = stop_session(c, 0);
    /* An incomplete session was said; a coprofd still running was not
     * stopped: then copsim stays for it. */
    if (stopped != EXIT_OK && running_coprofd(c, NULL, 0))
        return stopped;
    state_file(c, STATE_COPSIM_PID, pidfile, sizeof(pidfile));
    ours = pidfile_read(pidfile, NULL, 0);
    if (ours != info.pid)
        return cli_fail(EXIT_FAILED, "copsim (pid %ld) on %s was not "
                        "started by copcontrol; leaving it running",
                        (long)info.pid, c->socket);
    status = daemons_terminate(info.pid, COPSIM_STOP_MS);
    unlink(pidfile);
    if (status < 0)
        return cli_fail(EXIT_FAILED, "copsim (pid %ld) did not stop within "
                        "%d s: killed", (long)info.pid, COPSIM_STOP_MS / 1000);
    printf("copcontrol: copsim (pid %ld) stopped\n", (long)info.pid);
    return stopped;
}

/* How the session stands: complete, live, or incomplete and why (its
 * end_reason, else coprofd's last word in its log, which a full session
 * directory does not stop). */
static void status_end(const struct control *c, const char *dir,
                       const struct session_totals *t, pid_t coprofd,
                       pid_t dead, char *buf, size_t len)
{
    char line[1024];
    size_t said;

    if (strcmp(t->end_state, "complete") == 0 ||
        (!t->end_state[0] && t->complete))
        snprintf(buf, len, "complete");
    else if (t->end_reason[0])
        snprintf(buf, len, "incomplete: %s", t->end_reason);
    else if (!coprofd && (said = coprofd_line(c, dir, "session incomplete: ",
                                              line, sizeof(line))) > 0)
        snprintf(buf, len, "incomplete: %s", line + said);
    else if (coprofd)
        snprintf(buf, len, "live, as of the last flush");
    else if (dead)
        snprintf(buf, len, "incomplete: coprofd (pid %ld) died; as of its "
                 "last flush", (long)dead);
    else
        snprintf(buf, len, "incomplete: its coprofd ended without "
                 "completing it; as of its last flush");
}

/* The session part of --status. */
static void status_session(struct control *c, pid_t coprofd, const char *dir)
{
    struct session_totals t;
    char summary[512], end[768];
    pid_t dead = coprofd ? 0 : recorded_coprofd(c, NULL, 0);
    char started_dir[PATH_MAX];
    int alive;
    pid_t starter = coprofd ? 0 : starting_died(c, started_dir,
                                                sizeof(started_dir), &alive);

    if (starter) {
        printf("coprofd:        not running: copcontrol --start (pid %ld) "
               "ended after the driver's START, before a coprofd read the "
               "stream (--stop ends that session)\n", (long)starter);
        printf("session:        %s (not recorded)\n", started_dir);
        return;
    }
    if (!coprofd && alive)
        printf("coprofd:        starting (copcontrol --start runs)\n");
    else if (coprofd)
        printf("coprofd:        pid %ld\n", (long)coprofd);
    else if (dead)
        printf("coprofd:        pid %ld ended without --stop\n",
               (long)dead);
    else
        printf("coprofd:        not running\n");
    printf("session:        %s\n", dir[0] ? dir : "(none)");
    if (dir[0] && session_read(dir, &t, c->err, sizeof(c->err)) == 0) {
        session_describe(&t, summary, sizeof(summary));
        status_end(c, dir, &t, coprofd, dead, end, sizeof(end));
        printf("recorded:       %s (%s)\n", summary, end);
        printf("contexts:       %lld\n", (long long)t.contexts);
    }
}

/* The dither, the FIFO-full policy and the stalls, from GET and STATS. */
static void status_sampling(const struct copdrv_control_reply *get,
                            const struct copdrv_control_stats *stats)
{
    char line[512];
    const char *sep = "; ";
    unsigned slots = get->slots;

    sampling_describe(get->params.dither != 0, get->params.dither_seed,
                      sampling_fifo_name(get->params.fifo_full), line,
                      sizeof(line));
    printf("sampling:       %s\n", line);
    sampling_describe_stalls(stats->stalls, stats->stall_ns, 0, 0, line,
                             sizeof(line));
    printf("stalls:         %s", line);
    if (slots > sizeof(stats->slot_stall_ns) / sizeof(*stats->slot_stall_ns))
        slots = sizeof(stats->slot_stall_ns) / sizeof(*stats->slot_stall_ns);
    for (unsigned slot = 0; slot < slots; slot++)
        if (stats->slot_stalls[slot]) {
            printf("%sslot %u %.2f ms", sep, slot,
                   (double)stats->slot_stall_ns[slot] / 1e6);
            sep = ", ";
        }
    printf("\n");
}

static void status_driver(const struct copdrv_control_reply *get,
                          const struct copdrv_control_stats *stats)
{
    struct rate rate = {
        .count = get->params.lfsr_count, .event = get->params.event,
        .value = get->params.lfsr_value,
        .poll_ns = get->params.poll_interval_ns,
        .clock_hz = (double)get->clock_hz,
    };
    char line[512];

    printf("running:        %s\n", get->running ? "yes" : "no");
    if (rate.count) {
        rate_describe(&rate, line, sizeof(line));
        printf("event:          %s\n", line);
    } else {
        printf("event:          (none set)\n");
    }
    printf("driver:         %u slots, %u-entry FIFOs, buffer %llu bytes\n",
           get->slots, get->fifo_depth,
           (unsigned long long)stats->buffer_bytes);
    printf("polls:          %llu, %.3f ms in them, %.0f ns a sample\n",
           (unsigned long long)stats->polls, (double)stats->poll_ns / 1e6,
           stats->samples ? (double)stats->poll_ns / (double)stats->samples :
           0.0);
    if (rate.count)
        status_sampling(get, stats);
    printf("samples:        %llu\n", (unsigned long long)stats->samples);
    printf("lost:           %llu", (unsigned long long)driver_lost(stats));
    for (unsigned cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++) {
        const char *name = copstream_cause_name(cause);

        if (cause != COPSTREAM_LOST_OUTSIDE_LS &&
            (stats->lost_by_cause[cause] || (name && cause)))
            printf(" %s=%llu", name ? name : "other",
                   (unsigned long long)stats->lost_by_cause[cause]);
    }
    printf("\noutside-ls:     %llu\n", (unsigned long long)
           stats->lost_by_cause[COPSTREAM_LOST_OUTSIDE_LS]);
}

/* coprof-host's line: running (its pid), or not. */
static void status_host(const struct control *c)
{
    char path[PATH_MAX];
    pid_t pid;

    state_file(c, STATE_HOST_PID, path, sizeof(path));
    pid = pidfile_read(path, NULL, 0);
    if (pid > 0 && daemons_alive(pid))
        printf("coprof-host:    pid %ld\n", (long)pid);
    else if (pid > 0)
        printf("coprof-host:    pid %ld ended without --stop\n", (long)pid);
    else
        printf("coprof-host:    not running\n");
}

static int action_status(struct control *c)
{
    struct copdrv_control_reply get;
    struct copdrv_control_stats stats;
    struct copsim_info_reply info;
    char dir[PATH_MAX] = "";
    struct driver d;
    pid_t coprofd = running_coprofd(c, dir, sizeof(dir));

    printf("copsim socket:  %s\n", c->socket);
    if (connect_copsim(c, &d) < 0) {
        printf("copsim:         not running\n");
    } else if (driver_info(&d, &info, c->err, sizeof(c->err)) < 0 ||
               driver_get(&d, &get, c->err, sizeof(c->err)) < 0 ||
               driver_stats(&d, &stats, c->err, sizeof(c->err)) < 0) {
        driver_close(&d);
        return cli_fail(EXIT_FAILED, "%s", c->err);
    } else {
        driver_close(&d);
        printf("copsim:         pid %ld, event log %s\n", (long)info.pid,
               info.event_log_path);
        status_driver(&get, &stats);
    }
    if (!dir[0] && c->settings.session_dir[0])
        snprintf(dir, sizeof(dir), "%s", c->settings.session_dir);
    status_session(c, coprofd, dir);
    status_host(c);
    return EXIT_OK;
}

static int action_list_events(struct control *c)
{
    struct copdrv_control_reply get;
    struct driver d;
    double clock = COPSIM_DEFAULT_NOMINAL_HZ;
    uint32_t depth = TRACE_DEFAULT_FIFO_DEPTH;
    int from_copsim = 0;

    if (connect_copsim(c, &d) == 0) {
        if (driver_get(&d, &get, c->err, sizeof(c->err)) == 0) {
            clock = (double)get.clock_hz;
            depth = get.fifo_depth;
            from_copsim = 1;
        }
        driver_close(&d);
    }
    events_list(stdout, clock, depth, from_copsim);
    return EXIT_OK;
}

/* Settings alone: checked against a running copsim if one answers. */
static int action_save(struct control *c)
{
    struct copdrv_control_reply get;
    struct rate rate;
    struct driver d;

    if (c->opt.given.rate.kind != RATE_NONE && connect_copsim(c, &d) == 0) {
        int bad = driver_get(&d, &get, c->err, sizeof(c->err)) == 0 &&
                  rate_resolve(&c->opt.given.rate, (double)get.clock_hz,
                               get.fifo_depth, &rate, c->err,
                               sizeof(c->err)) < 0;

        driver_close(&d);
        if (bad)
            return cli_fail(EXIT_USAGE, "%s", c->err);
    }
    return save_settings(c);
}

static int run_action(struct control *c)
{
    switch (c->opt.action) {
    case ACT_INIT:
        return init_copsim(c, 1, NULL);
    case ACT_START:
        return action_start(c);
    case ACT_STOP:
        return stop_session(c, 0);
    case ACT_DUMP:
        return action_dump(c);
    case ACT_RESET:
        return action_reset(c);
    case ACT_SHUTDOWN:
        return action_shutdown(c);
    case ACT_STATUS:
        return action_status(c);
    case ACT_LIST_EVENTS:
        return action_list_events(c);
    default:
        return action_save(c);
    }
}

/*
 * `copcontrol --serve-pprof=HOST:PORT`: the running session's profiles
 * served as Go's net/http/pprof does, by `copreport serve-pprof`
 * (report/coprof_report/live.py) on the session directory in force.
 */
static int serve_pprof(struct control *c, const char *listen)
{
    char program[PATH_MAX], dir[PATH_MAX], opt[PATH_MAX + 16];
    struct rate_spec rate;

    if (effective(c, &rate, dir, sizeof(dir)) != EXIT_OK)
        return EXIT_USAGE;
    daemons_find("copreport", program, sizeof(program));
    snprintf(opt, sizeof(opt), "--session-dir=%s", dir);
    execl(program, program, "serve-pprof", "--listen", listen, opt,
          (char *)NULL);
    return cli_fail(EXIT_FAILED, "%s: %s (copreport serve-pprof serves "
                    "the profiles)", program, strerror(errno));
}

int main(int argc, char **argv)
{
    static struct control c;
    int status;

    if (argc == 2 && strncmp(argv[1], "--serve-pprof=", 14) == 0) {
        if (copsim_socket_path(c.socket, sizeof(c.socket)) < 0)
            return cli_fail(EXIT_USAGE, "the copsim socket path is too long");
        state_dir_of(c.socket, c.state, sizeof(c.state));
        if (settings_load(c.state, &c.settings, c.err, sizeof(c.err)) < 0)
            return cli_fail(EXIT_FAILED, "%s", c.err);
        return serve_pprof(&c, argv[1] + 14);
    }
    if ((status = parse_options(argc, argv, &c.opt)) != 0)
        return status;
    signal(SIGPIPE, SIG_IGN);
    if (copsim_socket_path(c.socket, sizeof(c.socket)) < 0)
        return cli_fail(EXIT_USAGE, "the copsim socket path is too long");
    state_dir_of(c.socket, c.state, sizeof(c.state));
    if (state_dir_prepare(c.state, c.err, sizeof(c.err)) < 0 ||
        settings_load(c.state, &c.settings, c.err, sizeof(c.err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", c.err);
    settings_merge(&c.settings, &c.opt.given);
    status = run_action(&c);
    if (status == EXIT_OK && c.opt.action != ACT_START &&
        c.opt.action != ACT_RESET && c.opt.action != ACT_NONE)
        status = save_settings(&c);
    return status;
}
