/*
 * coprof — `coprof record [OPTIONS] -- CMD ARGS`: profile one command, the
 * way operf does: a private copsim (with the kernel driver) for CMD alone,
 * a session started before CMD runs, coprofd recording it into a session
 * directory, and a summary when CMD has ended.
 *
 * How: CMD is checked first (execvp's search: a command that cannot run
 * is refused before any session is touched), then the session directory
 * is readied (an existing one moved to DIR.old; session.c replaces an
 * older DIR.old only if it is provably a session).  copsim starts in a fresh temporary directory as a private
 * copsim of this process (--private PID: it ends if coprof dies), in its
 * own process group, with its event log in DIR/events.coplog so that the
 * session keeps its scheduler history.  The rate is resolved at its clock,
 * set and started through driver.c (copcontrol's code); coprofd gets the
 * stream as descriptor 3 and the event log, and its output goes through a
 * pipe that coprof copies into DIR/coprofd.log (the relay), so that what
 * it says reaches coprof even when that log cannot be written.  CMD is
 * forked with
 * COPSIM_SOCKET naming the private socket.  While it runs, STATS gives a
 * progress line (progress_mode(): redrawn in place on a terminal that
 * CMD's output is not, none when it is, a line every 10 s in a log), or
 * --top runs coprof top on the terminal.  When it ends: STOP, coprofd
 * reads to the stream's end and exits after its last flush, copsim is
 * stopped, its temporary directory removed, and the summary is read from
 * DIR/session.db.  A session that is not complete (its end_state) gets a
 * last line saying why: its end_reason, completed with what only coprof
 * knows (how copsim or coprofd ended) and written back into the session.
 *
 * Signals: the daemons are in process groups of their own, so a terminal's
 * ^C reaches CMD (in ours) and not them; SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT sent to coprof itself are forwarded to CMD.  Either way CMD ends
 * and the session is completed as usual.
 *
 * Exit status: CMD's (128 + signal when it was killed; 127 not found, 126
 * not executable); 2 for bad usage; 1 when the recording could not be made
 * or the session is incomplete (when CMD itself failed, its status wins).
 */
#include "control/daemons.h"
#include "control/driver.h"
#include "control/events.h"
#include "control/host-options.h"
#include "control/options.h"
#include "control/rate.h"
#include "control/sampling.h"
#include "control/session.h"
#include "common/copsim-socket.h"
#include "abi/trace-regs.h"
#include "common/cli.h"
#include "common/safe-file.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAILED         1
#define EXIT_USAGE          2
#define EXIT_CANNOT_RUN     126
#define EXIT_NOT_FOUND      127
#define ERR_MAX             1024
#define DEFAULT_OUTPUT      "coprof_data"
#define TICK_MS             100
#define PROGRESS_TTY_MS     1000
#define PROGRESS_LOG_MS     10000
#define COPROFD_STOP_MS     60000
#define COPSIM_STOP_MS      30000
#define HOST_STOP_MS        120000
#define TOP_STOP_MS         5000
#define COMMAND_LOG         "command.log"
#define RELAY_LINE_MAX      1024
#define INCOMPLETE_MARK     ": session incomplete: "

struct options {
    const char *timeline_ms;    /* coprofd --timeline-ms; NULL: default */
    struct rate_spec rate;
    struct sampling_spec sampling;
    struct host_options host;
    const char *output;
    uint32_t buffer_words;
    const char *slots;
    enum driver_kind driver;
    struct daemon_args copsim_args;
    int quiet, verbose;
    int list_events;            /* --list-events: list, record nothing */
    int top;                    /* --top: coprof top while CMD runs */
    char **command;
};

/*
 * A daemon's output read from a pipe and copied on: coprofd's (without
 * --verbose) into DIR/coprofd.log, so that the reason coprofd gives for
 * an incomplete session reaches the terminal also when that log cannot be
 * written (a full disk); coprof-host's onto our standard error, so that
 * why it could not store the host side is known here too.
 */
struct relay {
    int fd;                     /* the pipe's read end, or -1 */
    int log;                    /* where it is copied, or -1 */
    const char *prefix;         /* the daemon's lines: "coprofd: " */
    const char *mark;           /* reason follows it in such a line */
    size_t used;
    char line[RELAY_LINE_MAX];  /* the line being read */
    char last[RELAY_LINE_MAX];  /* the last line with prefix, without it */
    char reason[RELAY_LINE_MAX];  /* from "coprofd: DIR: session
                                     incomplete: REASON", or "" */
};

/* A recording in progress. */
struct record {
    struct options opt;
    char dir[PATH_MAX];         /* the session */
    int moved;                  /* an older session is in DIR.old */
    char tmp[PATH_MAX];         /* copsim's private directory */
    char socket[PATH_MAX];
    char event_log[PATH_MAX];
    char coprofd_log[PATH_MAX];
    pid_t copsim, coprofd, command;
    pid_t host;                 /* coprof-host while it runs, or 0 */
    pid_t host_pid;             /* the coprof-host that was started, or 0 */
    int host_ready_fd;          /* where it says "ready", until it did */
    int host_stored_fd;         /* the same pipe, where it says "stored" */
    int host_status;            /* how it ended; -1: it had to be killed */
    struct relay host_relay;
    pid_t top;                  /* --top's copreport top, or 0 */
    int command_out;            /* --top: DIR/command.log, or -1 */
    int hold_fd;                /* CMD waits for a byte here before exec */
    int copsim_died;            /* copsim ended by itself: status below */
    int copsim_status, coprofd_status;  /* -1: it had to be stopped */
    struct relay relay;
    struct driver driver;
    struct rate rate;
    struct sampling sampling;
    char err[ERR_MAX];
    char driver_err[ERR_MAX];   /* why the driver did not stop, or "" */
    char end_reason[ERR_MAX];   /* why the session is incomplete, or "" */
    char end_note[ERR_MAX];     /* a fault after the STOP that lost
                                   nothing, or "" */
    char host_reason[ERR_MAX];  /* why the host side is lost, or "" */
    uint64_t driver_samples;    /* the driver's count before its STOP */
};

static volatile sig_atomic_t command_pid;
static volatile sig_atomic_t early_signal;  /* one that came before CMD */

static void usage(FILE *out)
{
    fprintf(out,
"NAME\n"
"    coprof record - profile the coprocessor contexts of one command\n"
"\n"
"SYNOPSIS\n"
"    coprof record [OPTIONS] [--] CMD [ARGS...]\n"
"    coprof archive [-d SESSION] [-o FILE]    (coprof archive --help)\n"
"    coprof top [-d SESSION] [--interval S]   (coprof top --help: a live\n"
"                                             view of a session recorded)\n"
"\n"
"DESCRIPTION\n"
"    Runs CMD, a host program using libcop, against a private copsim whose\n"
"    kernel driver samples every coprocessor context of CMD from its start,\n"
"    and records the session with coprofd, like operf.  The session is\n"
"    complete when coprof returns, also when CMD fails or is interrupted;\n"
"    when a fault cut it short (copsim or coprofd died, a full disk), a\n"
"    last line says why: coprof: session DIR is incomplete: REASON.\n"
"    While CMD runs, a progress line on standard error (samples a second,\n"
"    samples, lost) is redrawn in place once a second when standard error\n"
"    is a terminal that CMD's standard output is not (CMD writes there,\n"
"    it would run into the line: then there is none, as with perf record;\n"
"    --top shows the session live); not on a terminal, a line is written\n"
"    every 10 s.  At the end, a summary: samples, lost by cause,\n"
"    contexts, the session's path.\n"
"\n"
"OPTIONS\n"
"    --event=SPU_CYCLES:N, --event=SPU_INSTRUCTIONS:N\n"
"                      one sample every N slot cycles (modelled cycles:\n"
"                      the timing model's, stalls included) or every N\n"
"                      retired instructions, N in 1..16777215 and large\n"
"                      enough for polls of at least 100 us (157 with\n"
"                      copsim's defaults)\n"
"    --sample-period=TIME, --frequency=HZ\n"
"                      the same as a time (50us) or a rate per slot (20kHz)\n"
"                      at copsim's nominal clock (3.2 GHz by default).\n"
"                      One of the three; default " RATE_DEFAULT_EVENT "\n"
"                      (1.6 MHz per slot at 3.2 GHz: about 13,000 samples\n"
"                      of host-pipeline's 26 million instructions)\n"
"    --no-dither       sample at exactly every N cycles.  By default each\n"
"                      interval is N plus a small jitter of mean 0 from a\n"
"                      seeded generator in the trace unit, so that code in\n"
"                      step with N (a loop whose length divides N) is not\n"
"                      always sampled at the same instruction (aliasing)\n"
"    --dither-seed=S   the jitter's seed (1..2^63-1), to repeat a capture\n"
"                      sequence; default: a new one drawn at each start,\n"
"                      shown in the summary and kept in the session\n"
"    --fifo-full=stall|drop\n"
"                      what a capture does when its slot's trace FIFO is\n"
"                      full: stall (default) makes the coprocessor wait\n"
"                      until the driver drains it, so no sample is lost\n"
"                      and only wall time passes; drop loses the capture\n"
"                      and counts it, as the Cell did\n"
HOST_OPTIONS_HELP
"    -o, --output=DIR  the session directory (default ./" DEFAULT_OUTPUT ");\n"
"                      an existing one is moved to DIR.old first (an older\n"
"                      DIR.old is replaced only if it is a coprof session\n"
"                      and holds nothing else)\n"
"    --buffer-size=N   the driver's event buffer in 64-bit words, %u..%u\n"
"                      (default %u: 4 MiB)\n"
"    --slots=N         coprocessor slots of the private copsim (default %d)\n"
"    --driver=hosted|linux\n"
"                      the kernel driver that samples: hosted in copsim\n"
"                      (default), or copdrv.ko in a Linux guest under QEMU\n"
"                      with copsim's register file as its PCI device\n"
"                      (the Debian packages qemu-system-x86\n"
"                      linux-image-amd64 linux-headers-amd64\n"
"                      busybox-static; the guest's console goes to\n"
"                      DIR/guest.log)\n"
"    --call-graph[=DEPTH]\n"
"                      also capture each sample's call stack, up to DEPTH\n"
"                      frames (1..64, default 16), from the trace unit's\n"
"                      shadow stack; copreport callgraph prints callers,\n"
"                      callees and inclusive shares.  Without it nothing\n"
"                      of this runs\n"
"    --copsim-arg=ARG  pass ARG to the private copsim as it is (repeatable),\n"
"                      e.g. --copsim-arg=--fifo-depth=65536\n"
"    --list-events     list the events: SPU_CYCLES and SPU_INSTRUCTIONS\n"
"                      with their valid range at copsim's defaults, and\n"
"                      the host CPU's (libpfm4)\n"
"    --timeline-ms=MS  the width of the session's sample buckets, what\n"
"                      the timeline's function slices are cut from\n"
"                      (1..60000, default 10; copreport timeline\n"
"                      --bucket-ms sums them wider)\n"
"    --top             show coprof top (a live view of the session, like\n"
"                      perf top: samples/s, losses, stalls, the top\n"
"                      functions; keys f c s i, q quits it) on the\n"
"                      terminal while CMD runs.  CMD's standard output and\n"
"                      error then go to DIR/" COMMAND_LOG " and its standard\n"
"                      input is /dev/null; the summary names the file.\n"
"                      ^C still stops CMD.  Standard output must be a\n"
"                      terminal\n"
"    -q, --quiet       no progress line and no summary\n"
"    -v, --verbose     coprofd's output on standard error instead of\n"
"                      DIR/coprofd.log (copsim's goes there always)\n"
"    -h, --help        this text\n"
"\n"
"FILES\n"
"    DIR/session.db, DIR/images/    the session (docs/session-format.md)\n"
"    DIR/events.coplog              copsim's kernel event log (SCHED)\n"
"    DIR/coprofd.log                coprofd's output (without --verbose)\n"
"    DIR/" COMMAND_LOG "                CMD's output (with --top)\n"
"    DIR/guest.log                  the guest's console (--driver=linux)\n"
"    $TMPDIR/coprofd-stream-XXXXXX  the stream, kept when the session\n"
"                                   could not be written (a full disk):\n"
"                                   coprofd --replay FILE --session-dir D\n"
"    copsim's socket and register file live in a temporary directory\n"
"    ($TMPDIR, else /tmp) that is removed at the end; CMD finds it through\n"
"    COPSIM_SOCKET.  COPROF_SESSION names DIR for CMD: libcop then never\n"
"    runs a context on a private copsim of its own (unprofiled).\n"
"\n"
"EXIT STATUS\n"
"    CMD's exit status (128 + N when a signal N killed it, 127 when it was\n"
"    not found, 126 when it could not run: checked before anything is\n"
"    done); 2 for bad usage; 1 when the recording failed or the session is\n"
"    incomplete (when CMD failed too, its status is returned).\n"
"    Every failure is one line: coprof: THING: reason.\n"
"\n"
"NOTES\n"
"    CMD is a host program: a coprocessor image (a RISC-V ELF, e.g. one\n"
"    cop.mk built) is refused with a line saying to run it with cop-run\n"
"    or to embed it with cop-embed in a host program that runs it through\n"
"    libcop.  A command that ran no coprocessor context (it does not use\n"
"    libcop) gets a line saying so after the summary.\n"
"\n"
"EXAMPLES\n"
"    coprof record -- ./host-pipeline --contexts 8\n"
"    coprof record --frequency=10kHz -o /tmp/run1 ./my-host arg\n"
"    coprof record --event=SPU_CYCLES:20000 --copsim-arg=--slice=500000 "
"-- ./my-host\n",
        DRIVER_BUFFER_WORDS_MIN, DRIVER_BUFFER_WORDS_MAX,
        DRIVER_BUFFER_WORDS_DEFAULT, COPSIM_DEFAULT_SLOTS);
}

/* ---- Options -------------------------------------------------------------- */

enum { OPT_BUFFER = 256, OPT_SLOTS, OPT_LIST_EVENTS, OPT_DRIVER,
       OPT_TIMELINE, OPT_TOP };

static const struct cli_option long_options[] = {
    RATE_LONG_OPTIONS,
    SAMPLING_LONG_OPTIONS,
    HOST_LONG_OPTIONS,
    {'o', "output", required_argument, 0},
    {0, "buffer-size", required_argument, OPT_BUFFER},
    {0, "slots", required_argument, OPT_SLOTS},
    {0, "timeline-ms", required_argument, OPT_TIMELINE},
    {0, "list-events", no_argument, OPT_LIST_EVENTS},
    {0, "driver", required_argument, OPT_DRIVER},
    {0, "top", no_argument, OPT_TOP},
    {'q', "quiet", no_argument, 0},
    {'v', "verbose", no_argument, 0},
    OPTIONS_LONG_COMMON,
    CLI_END,
};

static int set_slots(struct options *o, const char *arg)
{
    char *end;
    long n;

    errno = 0;
    n = strtol(arg, &end, 10);
    if (errno || end == arg || *end || n < 1 || n > TRACE_MAX_SLOTS)
        return cli_fail(EXIT_USAGE, "--slots=%s: not a number of slots in "
                        "1..%d", arg, TRACE_MAX_SLOTS);
    o->slots = arg;
    return 0;
}

/* --timeline-ms=MS: coprofd's sample buckets, 1..60000 ms. */
static int set_timeline(struct options *o, const char *arg)
{
    char *end;
    unsigned long ms;

    errno = 0;
    ms = strtoul(arg, &end, 10);
    if (errno || end == arg || *end || ms < 1 || ms > 60000 ||
        arg[0] == '-')
        return cli_fail(EXIT_USAGE, "--timeline-ms=%s: not a width from 1 "
                        "to 60000 ms", arg);
    o->timeline_ms = arg;
    return 0;
}

/* One option; 0, 1 for --help, or an exit status. */
static int take_option(struct options *o, int c, const char *arg,
                       const char *word)
{
    char err[ERR_MAX];

    if (RATE_IS_OPTION(c))
        return rate_take_option(&o->rate, c, arg, err, sizeof(err)) < 0 ?
               cli_fail(EXIT_USAGE, "%s", err) : 0;
    if (SAMPLING_IS_OPTION(c))
        return sampling_take_option(&o->sampling, c, arg, err, sizeof(err))
               < 0 ? cli_fail(EXIT_USAGE, "%s", err) : 0;
    if (HOST_IS_OPTION(c))
        return host_take_option(&o->host, c, arg, err, sizeof(err)) < 0 ?
               cli_fail(EXIT_USAGE, "%s", err) : 0;
    switch (c) {
    case 'o':
        o->output = arg;
        return 0;
    case OPT_BUFFER:
        if (driver_parse_buffer_words(arg, &o->buffer_words, err,
                                      sizeof(err)) < 0)
            return cli_fail(EXIT_USAGE, "%s", err);
        return 0;
    case OPT_SLOTS:
        return set_slots(o, arg);
    case OPT_TIMELINE:
        return set_timeline(o, arg);
    case OPT_LIST_EVENTS:
        o->list_events = 1;
        return 0;
    case OPT_TOP:
        o->top = 1;
        return 0;
    case OPT_DRIVER:
        return driver_parse_kind(arg, &o->driver, err, sizeof(err)) < 0 ?
               cli_fail(EXIT_USAGE, "%s", err) : 0;
    case 'q':
        o->quiet = 1;
        return 0;
    case 'v':
        o->verbose = 1;
        return 0;
    default:
        return options_common(c, arg, word, "coprof --help",
                              &o->copsim_args);
    }
}

/* argv[0] is "record"; options stop at "--" or the first other word. */
static int parse_record(int argc, char **argv, struct options *o)
{
    char err[ERR_MAX];
    struct cli_parser parser;
    int c, status;

    optind = 1;
    cli_parser_init(&parser, long_options, "+:");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        status = take_option(o, c, optarg, argv[optind - 1]);
        if (status == 1) {
            usage(stdout);
            exit(0);
        }
        if (status)
            return status;
    }
    if (o->list_events) {
        events_list(stdout, COPSIM_DEFAULT_NOMINAL_HZ,
                    TRACE_DEFAULT_FIFO_DEPTH, 0);
        exit(0);
    }
    if (optind >= argc)
        return cli_fail(EXIT_USAGE, "record: no command given (coprof "
                        "record [OPTIONS] -- CMD [ARGS...])");
    o->command = argv + optind;
    if (o->top && !isatty(STDOUT_FILENO))
        return cli_fail(EXIT_USAGE, "--top: standard output is not a "
                        "terminal (coprof top draws on one)");
    if (host_options_check(&o->host, err, sizeof(err)) < 0)
        return cli_fail(EXIT_USAGE, "%s", err);
    if (o->rate.kind == RATE_NONE &&
        rate_parse(RATE_EVENT, RATE_DEFAULT_EVENT, &o->rate, err,
                   sizeof(err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", err);
    return 0;
}

/* ---- Signals -------------------------------------------------------------- */

/*
 * A signal sent to coprof goes on to CMD; a terminal's reached it already.
 * One that comes before CMD runs (a ^C while copsim boots) is kept:
 * record() then runs no CMD, or stops the one it just started.
 */
static void forward_signal(int sig, siginfo_t *info, void *context)
{
    if (command_pid > 0) {
        if (info->si_code != SI_KERNEL)
            kill(command_pid, sig);
    } else {
        early_signal = sig;
    }
}

static void catch_signals(void)
{
    static const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction action;

    memset(&action, 0, sizeof(action));
    action.sa_sigaction = forward_signal;
    action.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < sizeof(signals) / sizeof(*signals); i++)
        sigaction(signals[i], &action, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* ---- coprofd's output ----------------------------------------------------- */

/* A pipe for a daemon's output, copied to log (which the relay then
 * owns); *write_end is for the daemon.  -1 with err. */
static int relay_open(struct relay *relay, int log, const char *prefix,
                      const char *mark, int *write_end, char *err,
                      size_t errlen)
{
    int fds[2];

    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        if (log >= 0)
            close(log);
        return -1;
    }
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    relay->fd = fds[0];
    relay->log = log;
    relay->prefix = prefix;
    relay->mark = mark;
    *write_end = fds[1];
    return 0;
}

static void relay_line(struct relay *relay)
{
    size_t len = strlen(relay->prefix);
    const char *mark;

    if (strncmp(relay->line, relay->prefix, len) != 0)
        return;
    snprintf(relay->last, sizeof(relay->last), "%s", relay->line + len);
    if (relay->mark && (mark = strstr(relay->line, relay->mark)))
        snprintf(relay->reason, sizeof(relay->reason), "%s",
                 mark + strlen(relay->mark));
}

/* Takes what coprofd wrote so far: into the log, and its lines read. */
static void relay_drain(struct relay *relay)
{
    char buf[4096];
    ssize_t n = -1;

    while (relay->fd >= 0 && (n = read(relay->fd, buf, sizeof(buf))) > 0) {
        if (relay->log >= 0 && write(relay->log, buf, (size_t)n) != n) {
            close(relay->log);      /* full: the lines are still read */
            relay->log = -1;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] != '\n') {
                if (relay->used < sizeof(relay->line) - 1)
                    relay->line[relay->used++] = buf[i];
                continue;
            }
            relay->line[relay->used] = '\0';
            relay_line(relay);
            relay->used = 0;
        }
    }
    if (relay->fd >= 0 && n == 0) {     /* the daemon's output ended */
        close(relay->fd);
        relay->fd = -1;
    }
}

static void relay_close(struct relay *relay)
{
    relay_drain(relay);
    if (relay->fd >= 0)
        close(relay->fd);
    if (relay->log >= 0)
        close(relay->log);
    relay->fd = relay->log = -1;
}

/* ---- The daemons ---------------------------------------------------------- */

/* A TMPDIR longer than this is passed over for /tmp: the socket's path
 * in the private directory must fit a sockaddr_un (about 100 bytes). */
#define TMPDIR_MAX  64

static int make_private_dir(struct record *r)
{
    if (cli_make_temp_dir(r->tmp, sizeof(r->tmp), "coprof-record",
                          TMPDIR_MAX) < 0) {
        snprintf(r->err, sizeof(r->err), "%s: %s", r->tmp, strerror(errno));
        r->tmp[0] = '\0';
        return -1;
    }
    snprintf(r->socket, sizeof(r->socket), "%s/copsim.sock", r->tmp);
    return 0;
}

static int start_copsim(struct record *r)
{
    struct daemon_spec spec = {DAEMON_GROUP, NULL, -1, 0, 0};
    const char *args[DAEMON_EXTRA_MAX + 12];
    char parent[32];
    int n = 0;

    snprintf(parent, sizeof(parent), "%ld", (long)getpid());
    args[n++] = "--private";
    args[n++] = parent;
    args[n++] = "--socket";
    args[n++] = r->socket;
    args[n++] = "--state-dir";
    args[n++] = r->tmp;
    args[n++] = "--event-log";
    args[n++] = r->event_log;
    if (r->opt.driver == DRIVER_LINUX)
        args[n++] = "--no-driver";      /* the module acks the mailboxes */
    if (r->opt.slots) {
        args[n++] = "--slots";
        args[n++] = r->opt.slots;
    }
    for (int i = 0; i < r->opt.copsim_args.n; i++)
        args[n++] = r->opt.copsim_args.args[i];
    args[n] = NULL;
    r->copsim = daemons_start_copsim(&spec, args, r->err, sizeof(r->err));
    return r->copsim < 0 ? -1 : 0;
}

/* The session's key `driver`: which driver sampled. */
static void note_driver(struct record *r)
{
    static const char *const key[] = {"driver"};
    const char *value[] = {driver_kind_name(r->opt.driver)};
    char err[ERR_MAX];

    if (session_write_keys(r->dir, key, value, 1, err, sizeof(err)) < 0)
        fprintf(stderr, "coprof: %s\n", err);
}

/* SET and START; the stream goes to a new coprofd.  -1, or -2 (usage). */
static int start_session(struct record *r)
{
    struct daemon_spec spec = {DAEMON_GROUP, NULL, -1, 0, 0};
    const char *timeline[] = {"--timeline-ms", r->opt.timeline_ms, NULL};
    char err[ERR_MAX];
    int fd, ready_fd = -1;

    if (!r->opt.timeline_ms)
        timeline[0] = NULL;

    if (sampling_resolve(&r->opt.sampling, &r->sampling, r->err,
                         sizeof(r->err)) < 0 ||
        driver_connect(&r->driver, r->socket, r->err, sizeof(r->err)) < 0)
        return -1;
    if (r->opt.driver == DRIVER_LINUX) {
        char guest_socket[PATH_MAX], guest_log[PATH_MAX];

        snprintf(guest_socket, sizeof(guest_socket), "%s/guest.sock",
                 r->tmp);
        snprintf(guest_log, sizeof(guest_log), "%s/guest.log", r->dir);
        driver_use_linux(&r->driver, guest_socket, guest_log, 0);
    }
    if (driver_program(&r->driver, &r->opt.rate, r->opt.buffer_words * 8u,
                       &r->sampling, &r->rate, r->err, sizeof(r->err)) < 0)
        return errno == EINVAL ? -2 : -1;
    if (driver_start(&r->driver, &fd, r->err, sizeof(r->err)) < 0)
        return -1;
    if (!r->opt.verbose &&
        relay_open(&r->relay, open(r->coprofd_log, O_WRONLY | O_CREAT |
                                   O_TRUNC | O_APPEND | O_NOFOLLOW |
                                   O_CLOEXEC, 0600), "coprofd: ",
                   INCOMPLETE_MARK, &spec.output_fd, r->err,
                   sizeof(r->err)) < 0) {
        close(fd);
        return -1;
    }
    spec.pass_fd = fd;
    r->coprofd = daemons_start_coprofd_with(&spec, r->dir, r->event_log,
                                            timeline, &ready_fd, r->err,
                                            sizeof(r->err));
    close(fd);
    if (spec.output_fd > 0)
        close(spec.output_fd);
    if (r->coprofd > 0 &&
        daemons_wait_ready(r->coprofd, ready_fd, "coprofd", NULL, err,
                           sizeof(err)) < 0) {
        daemons_terminate(r->coprofd, COPROFD_STOP_MS);
        r->coprofd = -1;
        /* Its log goes with the session directory, which is undone: its
         * last line is said here. */
        relay_drain(&r->relay);
        if (r->relay.last[0])
            snprintf(r->err, sizeof(r->err), "coprofd did not start: %s",
                     r->relay.last);
        else
            snprintf(r->err, sizeof(r->err), "%s%s", err,
                     r->opt.verbose ? " (its message is above)" : "");
    }
    if (r->coprofd > 0)
        note_driver(r);
    return r->coprofd > 0 ? 0 : -1;
}

/* Whether copsim ended by itself (it is stopped only by finish()). */
static void check_copsim(struct record *r)
{
    if (r->copsim > 0 && !r->copsim_died &&
        daemons_wait(r->copsim, 0, &r->copsim_status) == 0)
        r->copsim_died = 1;
}

/* coprofd reads the stream to its end; its output relayed meanwhile. */
static void wait_coprofd(struct record *r)
{
    for (int waited = 0;; waited += TICK_MS) {
        relay_drain(&r->relay);
        relay_drain(&r->host_relay);
        if (daemons_wait(r->coprofd, TICK_MS, &r->coprofd_status) == 0)
            return;
        if (waited >= COPROFD_STOP_MS) {
            daemons_terminate(r->coprofd, COPSIM_STOP_MS);
            r->coprofd_status = -1;
            return;
        }
    }
}

/*
 * coprof-host, for CMD (held before its exec, since host sampling starts
 * there) and copsim; started, not waited for: it makes its tracefs
 * instance while copsim boots and coprofd starts (host_ready() waits).
 * It says itself what it cannot record, and CMD runs without it when it
 * cannot start.
 */
static void spawn_host(struct record *r)
{
    struct daemon_spec spec = {DAEMON_GROUP, NULL, -1, 0, 0};
    const char *args[16 + HOST_ARGS_MAX];
    char command[32], copsim[32], err[ERR_MAX];
    int n = 0;

    if (!host_wanted(&r->opt.host) || r->command <= 0)
        return;
    if (relay_open(&r->host_relay, fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3),
                   "coprof-host: ", NULL, &spec.output_fd, err,
                   sizeof(err)) < 0) {
        fprintf(stderr, "coprof: %s; the host side is not recorded\n", err);
        return;
    }
    snprintf(command, sizeof(command), "%ld", (long)r->command);
    snprintf(copsim, sizeof(copsim), "%ld", (long)r->copsim);
    args[n++] = "--session-dir";
    args[n++] = r->dir;
    args[n++] = "--command";
    args[n++] = command;
    if (r->copsim > 0) {
        args[n++] = "--copsim";
        args[n++] = copsim;
    }
    args[n++] = "--event-log";  /* the contexts' lives */
    args[n++] = r->event_log;
    args[n++] = "--quiet";      /* its totals are in our summary */
    args[n++] = "--end-with-parent";
    host_args(&r->opt.host, args, &n);
    args[n] = NULL;
    r->host = daemons_spawn_host(&spec, args, &r->host_ready_fd, err,
                                 sizeof(err));
    close(spec.output_fd);
    if (r->host < 0) {
        relay_close(&r->host_relay);
        fprintf(stderr, "coprof: %s; the host side is not recorded\n", err);
        r->host = 0;
        return;
    }
    r->host_pid = r->host;
}

static void close_host_stored(struct record *r)
{
    if (r->host_stored_fd >= 0)
        close(r->host_stored_fd);
    r->host_stored_fd = -1;
}

/* coprof-host recording (CMD may go on), or given up on and said. */
static void host_ready(struct record *r)
{
    char err[ERR_MAX];
    int rc;

    if (r->host <= 0 || r->host_ready_fd < 0)
        return;
    r->host_stored_fd = fcntl(r->host_ready_fd, F_DUPFD_CLOEXEC, 0);
    rc = daemons_wait_ready(r->host, r->host_ready_fd, "coprof-host", NULL,
                            err, sizeof(err));
    r->host_ready_fd = -1;
    relay_drain(&r->host_relay);
    if (rc < 0) {
        close_host_stored(r);
        relay_close(&r->host_relay);
        fprintf(stderr, "coprof: %s; the host side is not recorded\n", err);
        r->host = r->host_pid = 0;
        return;
    }
    if (session_host_begin(r->dir, err, sizeof(err)) < 0)
        fprintf(stderr, "coprof: %s\n", err);
}

/*
 * CMD has ended: coprof-host told (SIGUSR2), so that it stops tracing as
 * soon as nothing it traces runs and removes its tracefs instance while
 * coprofd and copsim finish; it stores at stop_host().
 */
static void host_command_over(struct record *r)
{
    if (r->host > 0)
        kill(r->host, SIGUSR2);
}

/*
 * coprof-host told to stop and store nothing (SIGUSR1): the recording
 * was not made (coprof record failed before CMD ran).
 */
static void discard_host(struct record *r)
{
    if (r->host_ready_fd >= 0)
        close(r->host_ready_fd);
    r->host_ready_fd = -1;
    close_host_stored(r);
    if (r->host <= 0)
        return;
    kill(r->host, SIGUSR1);
    if (daemons_wait(r->host, HOST_STOP_MS, NULL) < 0)
        daemons_terminate(r->host, COPSIM_STOP_MS);
    relay_close(&r->host_relay);
    r->host = r->host_pid = 0;
}

/* CMD goes on to its exec. */
static void release_command(struct record *r)
{
    if (r->hold_fd < 0)
        return;
    if (write(r->hold_fd, "", 1) < 0) {
        /* CMD is gone: waitpid says how */
    }
    close(r->hold_fd);
    r->hold_fd = -1;
}

/* CMD, held and not run: it ends (EOF on its pipe) and is reaped. */
static void drop_command(struct record *r)
{
    if (r->hold_fd < 0)
        return;
    close(r->hold_fd);
    r->hold_fd = -1;
    daemons_wait(r->command, COPSIM_STOP_MS, NULL);
    r->command = 0;
}

static uint64_t monotonic_ms(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

/* A child of ours (coprof-host, --top's copreport) sent SIGTERM and given
 * wait_ms to end, then stopped; *pid is 0 after, and *how (unless NULL)
 * its exit status, -1 when it had to be killed. */
static void stop_child(pid_t *pid, int wait_ms, int *how)
{
    int status;

    if (*pid <= 0)
        return;
    kill(*pid, SIGTERM);
    if (daemons_wait(*pid, wait_ms, &status) < 0) {
        daemons_terminate(*pid, COPSIM_STOP_MS);
        status = -1;
    }
    if (how)
        *how = status;
    *pid = 0;
}

/*
 * coprof-host stores the host side once the session's daemons ended (it
 * was sent SIGTERM in finish()) and says "stored" before it waits for its
 * tracefs instance's removal (about 0.1 s of the kernel's RCU grace
 * periods, after the command's end): coprof goes on at "stored" and
 * leaves that wait to coprof-host, which ends by itself.  Without the
 * word (it died, or could not store), how it ended is kept for
 * settle_host().
 */
static void stop_host(struct record *r)
{
    uint64_t begin = monotonic_ms();
    int stored, left;

    if (r->host <= 0)
        return;
    stored = r->host_stored_fd >= 0 &&
             copsim_wait_word(r->host_stored_fd, "stored", HOST_STOP_MS) == 0;
    close_host_stored(r);
    if (stored) {
        r->host_status = 0;
        r->host = 0;
    } else {
        /* what is left of the one HOST_STOP_MS, not another one */
        left = HOST_STOP_MS - (int)(monotonic_ms() - begin);
        stop_child(&r->host, left > 0 ? left : 0, &r->host_status);
    }
    relay_close(&r->host_relay);
}

/*
 * Stops copsim (SIGTERM); one that ends by another signal (a kill -9 that
 * came as it was being stopped, a crash in its shutdown) died by itself,
 * as check_copsim() would have seen a moment later.
 */
static void stop_copsim(struct record *r)
{
    int status;

    kill(r->copsim, SIGTERM);
    if (daemons_wait(r->copsim, COPSIM_STOP_MS, &status) < 0) {
        daemons_terminate(r->copsim, COPSIM_STOP_MS);
        return;
    }
    if (status > 128 && status != 128 + SIGTERM) {
        r->copsim_died = 1;
        r->copsim_status = status;
    }
}

/* Stops whatever runs, removes the private directory. */
static void finish(struct record *r)
{
    char err[ERR_MAX];

    check_copsim(r);
    if (r->driver.sock >= 0) {
        struct copdrv_control_stats stats;

        if (driver_stats(&r->driver, &stats, err, sizeof(err)) == 0)
            r->driver_samples = stats.samples;
        if (driver_stop(&r->driver, err, sizeof(err)) < 0 &&
            r->opt.driver == DRIVER_LINUX)
            snprintf(r->driver_err, sizeof(r->driver_err), "%s", err);
        driver_close(&r->driver);
    }
    if (r->coprofd > 0)
        wait_coprofd(r);
    relay_close(&r->relay);
    cli_test_point("coprof-after-coprofd");
    check_copsim(r);
    if (r->host > 0)    /* it stores while copsim stops */
        kill(r->host, SIGTERM);
    if (r->copsim > 0 && !r->copsim_died)
        stop_copsim(r);
    stop_host(r);
    if (r->tmp[0])      /* what a copsim that died left: socket, regs */
        session_remove_tree(r->tmp, err, sizeof(err));
}

/* ---- The command ---------------------------------------------------------- */

/* ---- --top ---------------------------------------------------------------- */

/*
 * --top: `copreport top -d DIR` (what coprof top runs) owns the terminal
 * while CMD runs.  CMD's standard output and error go to DIR/command.log
 * and its standard input is /dev/null, so that it neither writes over the
 * screen nor reads its keys.  top starts with SIGINT ignored (Python then
 * keeps it ignored): a ^C is CMD's, as without --top, and top goes on
 * until CMD has ended; then a SIGTERM ends it and it restores the
 * terminal (live.py) before the summary is written.  A top that quits
 * (q) leaves CMD running, and coprof says so.
 */
static int open_command_log(struct record *r)
{
    int dirfd = safe_dir_open(r->dir, 0, r->err, sizeof(r->err));

    if (dirfd < 0)
        return -1;
    r->command_out = safe_file_create(dirfd, r->dir, COMMAND_LOG, O_TRUNC,
                                      r->err, sizeof(r->err));
    close(dirfd);
    return r->command_out < 0 ? -1 : 0;
}

/* In CMD's child: stdin from /dev/null, stdout and stderr to the log. */
static void command_to_log(struct record *r)
{
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        close(null);
    }
    dup2(r->command_out, STDOUT_FILENO);
    dup2(r->command_out, STDERR_FILENO);
}

static void start_top(struct record *r)
{
    char path[PATH_MAX];
    pid_t pid;

    daemons_find("copreport", path, sizeof(path));
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        fprintf(stderr, "coprof: --top: fork: %s\n", strerror(errno));
        return;
    }
    if (pid == 0) {
        signal(SIGINT, SIG_IGN);
        signal(SIGQUIT, SIG_IGN);
        execl(path, path, "top", "-d", r->dir, (char *)NULL);
        fprintf(stderr, "coprof: %s: %s (copreport top draws --top)\n",
                path, strerror(errno));
        _exit(EXIT_FAILED);
    }
    r->top = pid;
}

/* Whether top quit by itself (q): said once, CMD goes on. */
static void check_top(struct record *r)
{
    int status;

    if (r->top <= 0 || waitpid(r->top, &status, WNOHANG) != r->top)
        return;
    r->top = 0;
    fprintf(stderr, "coprof: top ended; %s still runs (its output in "
            "%s/" COMMAND_LOG ", ^C stops it)\n", r->opt.command[0], r->dir);
}

static void stop_top(struct record *r)
{
    stop_child(&r->top, TOP_STOP_MS, NULL);
}

/* CMD, forked; with a host side it waits on a pipe before its exec. */
static pid_t start_command(struct record *r)
{
    int hold[2] = {-1, -1};
    char go;
    pid_t pid;

    if (host_wanted(&r->opt.host) && pipe2(hold, O_CLOEXEC) < 0)
        hold[0] = hold[1] = -1;
    fflush(NULL);
    pid = fork();
    if (pid != 0) {
        if (hold[0] >= 0)
            close(hold[0]);
        r->hold_fd = hold[1];
        return pid;
    }
    /* held: a signal for CMD (ours forwarded, a terminal's) ends it */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    if (hold[0] >= 0) {
        close(hold[1]);
        if (read(hold[0], &go, 1) != 1)
            _exit(EXIT_FAILED);     /* coprof died before CMD ran */
    }
    if (r->command_out >= 0)
        command_to_log(r);
    setenv("COPSIM_SOCKET", r->socket, 1);
    setenv("COPROF_SESSION", r->dir, 1);    /* libcop: no private copsim */
    signal(SIGPIPE, SIG_DFL);
    execvp(r->opt.command[0], r->opt.command);
    fprintf(stderr, "coprof: %s: %s\n", r->opt.command[0], strerror(errno));
    _exit(errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN);
}

/*
 * The progress line.  On a terminal that CMD's standard output is not
 * (its output redirected, or --top's log) it is redrawn in place once a
 * second ("\r", clear to the end of the line, no newline, so the terminal
 * does not scroll) and erased when CMD ends, before the summary.  When
 * CMD's output goes to the same terminal there is none while it runs (as
 * perf record and operf): CMD's text would run into a line redrawn under
 * it; the summary follows, and coprof top shows the session live.  Not on
 * a terminal (a log): a line of its own every 10 s.
 */
enum progress_mode { PROGRESS_NONE, PROGRESS_REDRAW, PROGRESS_LINES };

/* Whether descriptors a and b are the same terminal. */
static int same_terminal(int a, int b)
{
    struct stat sa, sb;

    return isatty(a) && isatty(b) && fstat(a, &sa) == 0 &&
           fstat(b, &sb) == 0 && sa.st_rdev == sb.st_rdev;
}

static enum progress_mode progress_mode(const struct record *r)
{
    if (r->opt.quiet || r->opt.top)
        return PROGRESS_NONE;
    if (!isatty(STDERR_FILENO))
        return PROGRESS_LINES;
    return same_terminal(STDOUT_FILENO, STDERR_FILENO) ? PROGRESS_NONE :
           PROGRESS_REDRAW;
}

/* One progress line from STATS. */
static void progress(struct record *r, enum progress_mode mode,
                     uint64_t *last, int elapsed_ms)
{
    struct copdrv_control_stats s;
    char err[ERR_MAX];
    double per_s;

    if (driver_stats(&r->driver, &s, err, sizeof(err)) < 0)
        return;
    per_s = elapsed_ms > 0 ? (double)(s.samples - *last) * 1000.0 /
            elapsed_ms : 0;
    *last = s.samples;
    fprintf(stderr, "%scoprof: recording: %.0f samples/s, %llu samples, "
            "%llu lost%s", mode == PROGRESS_REDRAW ? "\r\033[K" : "",
            per_s, (unsigned long long)s.samples,
            (unsigned long long)driver_lost(&s),
            mode == PROGRESS_REDRAW ? "" : "\n");
}

/*
 * Up to TICK_MS: woken early when CMD ends (its pidfd) or a daemon says
 * something (the relays' pipes), so that the end of CMD is seen at once;
 * the milliseconds that passed.
 */
static int tick(struct record *r, int pidfd)
{
    struct pollfd fds[3] = {{pidfd, POLLIN, 0}, {r->relay.fd, POLLIN, 0},
                            {r->host_relay.fd, POLLIN, 0}};
    uint64_t start = monotonic_ms();

    if (poll(fds, 3, TICK_MS) < 0 && errno != EINTR) {
        struct timespec pause = {0, TICK_MS * 1000000L};

        nanosleep(&pause, NULL);
    }
    return (int)(monotonic_ms() - start);
}

/* Waits for CMD with progress lines; its exit status. */
static int wait_command(struct record *r)
{
    enum progress_mode mode = progress_mode(r);
    int every, since = 0, drawn = 0, wstatus, status = EXIT_FAILED;
    int pidfd = daemons_pidfd(r->command);
    uint64_t last = 0;

    every = mode == PROGRESS_REDRAW ? PROGRESS_TTY_MS : PROGRESS_LOG_MS;
    for (;;) {
        pid_t got = waitpid(r->command, &wstatus, WNOHANG);

        if (got == r->command) {
            status = daemons_exit_status(wstatus);
            break;
        }
        if (got < 0 && errno != EINTR)
            break;
        relay_drain(&r->relay);
        relay_drain(&r->host_relay);
        check_top(r);
        since += tick(r, pidfd);
        if (mode != PROGRESS_NONE && since >= every) {
            progress(r, mode, &last, since);
            drawn = 1;
            since = 0;
        }
    }
    if (pidfd >= 0)
        close(pidfd);
    if (drawn && mode == PROGRESS_REDRAW)
        fputs("\r\033[K", stderr);   /* the summary takes its place */
    return status;
}

/*
 * What the session's totals do not show: where the samples of a session
 * that could not be written are (the kept stream), what the driver
 * counted that an incomplete session lacks; and, for a complete session
 * only, a command that ran no context at all.
 */
static void summary_missing(const struct record *r,
                            const struct session_totals *t)
{
    const char *kept = strstr(r->end_reason, " samples kept in /");
    const char *from = kept;

    while (from && from > r->end_reason && from[-1] >= '0' &&
           from[-1] <= '9')
        from--;
    if (kept)
        fprintf(stderr, "coprof: the session holds only what was flushed "
                "before the failure; all %.*s samples are in the kept "
                "stream %s: coprofd --replay %s --session-dir NEWDIR "
                "stores them\n", (int)(kept - from), from,
                kept + strlen(" samples kept in "),
                kept + strlen(" samples kept in "));
    else if (r->end_reason[0] && r->driver_samples > (uint64_t)t->samples)
        fprintf(stderr, "coprof: the driver counted %llu samples; the "
                "session holds %lld (it is incomplete: below)\n",
                (unsigned long long)r->driver_samples,
                (long long)t->samples);
    if (t->contexts == 0 && !r->end_reason[0] && r->driver_samples == 0)
        fprintf(stderr, "coprof: %s ran no coprocessor context: coprof "
                "profiles the contexts a host program runs through libcop "
                "(pkg-config libcop; cop-run for a coprocessor image)\n",
                r->opt.command[0]);
}

static void summary(struct record *r)
{
    struct session_totals t;
    char line[1024], rate[512], sampling[512];

    if (session_read(r->dir, &t, r->err, sizeof(r->err)) < 0) {
        fprintf(stderr, "coprof: %s\n", r->err);
        return;
    }
    rate_describe(&r->rate, rate, sizeof(rate));
    session_describe(&t, line, sizeof(line));
    session_describe_sampling(&t, sampling, sizeof(sampling));
    fprintf(stderr, "coprof: %s\n", rate);
    fprintf(stderr, "coprof: sampling: %s\n", sampling);
    fprintf(stderr, "coprof: %s images=%lld sched_events=%lld\n", line,
            (long long)t.images, (long long)t.sched_events);
    if (r->host_reason[0])
        fprintf(stderr, "coprof: host: the host side is lost: %s\n",
                r->host_reason);
    else if (session_describe_host(r->dir, line, sizeof(line), r->err,
                                   sizeof(r->err)) == 0 && line[0])
        fprintf(stderr, "coprof: host: %s\n", line);
    if (t.callstacks)
        fprintf(stderr, "coprof: call stacks: %lld samples with their stack "
                "(copreport callgraph)\n", (long long)t.callstacks);
    fprintf(stderr, "coprof: session %s\n", r->dir);
    if (r->opt.top)
        fprintf(stderr, "coprof: %s's output: %s/" COMMAND_LOG "\n",
                r->opt.command[0], r->dir);
    summary_missing(r, &t);
}

/* Why the session is not complete, with what coprof knows that coprofd
 * could not: how copsim or coprofd ended.  "" when it is complete. */
static void find_end_reason(struct record *r, const struct session_totals *t,
                            int readable)
{
    const char *said = readable && t->end_reason[0] ? t->end_reason :
                       r->relay.reason;
    char how[128];

    r->end_reason[0] = r->end_note[0] = '\0';
    if (r->copsim_died && readable && strcmp(t->end_state, "complete") == 0) {
        /* coprofd decoded the STOP and its totals matched: whatever
         * happened to copsim after it cost no sample. */
        daemons_describe_status(r->copsim_status, how, sizeof(how));
        snprintf(r->end_note, sizeof(r->end_note), "copsim (pid %ld) %s "
                 "after the driver's STOP: no sample was lost (the STOP's "
                 "totals are the session's)", (long)r->copsim, how);
    } else if (r->copsim_died) {
        daemons_describe_status(r->copsim_status, how, sizeof(how));
        snprintf(r->end_reason, sizeof(r->end_reason), "%s: copsim (pid "
                 "%ld) %s", said[0] ? said : "the driver's stream ended "
                 "without STOP", (long)r->copsim, how);
    } else if (r->driver_err[0] && (!readable ||
                                     strcmp(t->end_state, "complete"))) {
        snprintf(r->end_reason, sizeof(r->end_reason), "%s: %s", said[0] ?
                 said : "the driver's stream ended without STOP",
                 r->driver_err);
    } else if (said[0]) {
        snprintf(r->end_reason, sizeof(r->end_reason), "%s", said);
    } else if (r->coprofd_status != 0) {
        if (r->coprofd_status < 0)
            snprintf(how, sizeof(how), "did not finish within %d s",
                     COPROFD_STOP_MS / 1000);
        else
            daemons_describe_status(r->coprofd_status, how, sizeof(how));
        snprintf(r->end_reason, sizeof(r->end_reason), "coprofd (pid %ld) "
                 "%s; the session holds what its last flush wrote",
                 (long)r->coprofd, how);
    } else if (!readable || strcmp(t->end_state, "complete") != 0) {
        snprintf(r->end_reason, sizeof(r->end_reason), "coprofd did not "
                 "say the session was complete");
    }
}

/*
 * The session's end: the keys completed where coprof knows more (when
 * the database can still be written); "" in r->end_reason when complete.
 */
static void settle_end(struct record *r)
{
    struct session_totals t;
    char err[ERR_MAX];
    int readable = session_read(r->dir, &t, err, sizeof(err)) == 0;

    find_end_reason(r, &t, readable);
    if (r->end_reason[0] && readable &&
        strcmp(t.end_reason, r->end_reason) != 0)
        session_mark_incomplete(r->dir, r->end_reason, err, sizeof(err));
}

/*
 * The host side's end: coprof-host stored it (host.end_state complete),
 * or r->host_reason says how coprof-host ended without it, also written
 * into the session where it can be.
 */
static void settle_host(struct record *r)
{
    struct session_totals t;
    char how[128], err[ERR_MAX];
    const char *said = r->host_relay.last;

    r->host_reason[0] = '\0';
    if (r->host_pid <= 0)
        return;
    if (session_read(r->dir, &t, err, sizeof(err)) == 0 &&
        strcmp(t.host_end_state, "complete") == 0)
        return;
    if (r->host_status < 0)
        snprintf(how, sizeof(how), "did not store it within %d s",
                 HOST_STOP_MS / 1000);
    else if (r->host_status > 128)
        daemons_describe_status(r->host_status, how, sizeof(how));
    else
        snprintf(how, sizeof(how), "exited with status %d without storing "
                 "it", r->host_status);
    snprintf(r->host_reason, sizeof(r->host_reason), "coprof-host (pid %ld) "
             "%s%s%s", (long)r->host_pid, how, said[0] ? ": " : "", said);
    if (session_mark_host_incomplete(r->dir, r->host_reason, err,
                                     sizeof(err)) < 0 && !r->opt.quiet)
        fprintf(stderr, "coprof: %s\n", err);
}

/* ---- record --------------------------------------------------------------- */

static int prepare(struct record *r)
{
    if (session_absolute("--output", r->opt.output ? r->opt.output :
                         DEFAULT_OUTPUT, r->dir, sizeof(r->dir), r->err,
                         sizeof(r->err)) < 0)
        return EXIT_USAGE;
    if (session_prepare(r->dir, &r->moved, r->err, sizeof(r->err)) < 0)
        return EXIT_FAILED;
    snprintf(r->event_log, sizeof(r->event_log), "%s/events.coplog", r->dir);
    snprintf(r->coprofd_log, sizeof(r->coprofd_log), "%s/coprofd.log",
             r->dir);
    return 0;
}

/*
 * CMD forked and held before its exec, and coprof-host started for it
 * without waiting: when the host side is wanted, before copsim starts
 * (after it with --host-sched=all, whose threads coprof-host reads at its
 * start), so that coprof-host's set-up runs while copsim boots and
 * coprofd starts.  --top forks CMD later (its output goes to
 * DIR/command.log).  0, or -1 with err.
 */
static int launch(struct record *r, int after_copsim)
{
    if (!host_wanted(&r->opt.host) || r->opt.top || r->command ||
        (r->opt.host.sched == HOST_SCHED_ALL) != after_copsim)
        return 0;
    if ((r->command = start_command(r)) < 0) {
        snprintf(r->err, sizeof(r->err), "fork: %s", strerror(errno));
        r->command = 0;
        return -1;
    }
    spawn_host(r);
    return 0;
}

/* Everything before CMD; on failure, everything undone. */
static int begin(struct record *r)
{
    int status = prepare(r);

    if (status)
        return cli_fail(status, "%s", r->err);
    if (make_private_dir(r) == 0 && launch(r, 0) == 0 &&
        start_copsim(r) == 0 && launch(r, 1) == 0)
        status = start_session(r);
    else
        status = -1;
    if (status == 0)
        return 0;
    drop_command(r);
    discard_host(r);
    finish(r);
    session_restore(r->dir, r->moved);
    return cli_fail(status == -2 ? EXIT_USAGE : EXIT_FAILED, "%s", r->err);
}

/* Whether file is an executable regular file: 0, or why not (errno). */
static int check_file(const char *file)
{
    struct stat st;

    if (stat(file, &st) < 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EACCES;
    return access(file, X_OK) < 0 ? errno : 0;
}

/*
 * A coprocessor image (a 32-bit RISC-V ELF, what cop.mk builds) is not a
 * host program: execvp would hand it to the shell.  0, or 126 with a line
 * saying what to do with it.
 */
static int check_not_image(const char *file)
{
    Elf32_Ehdr header;
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : read(fd, &header, sizeof(header));

    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof(header) ||
        memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 ||
        header.e_ident[EI_CLASS] != ELFCLASS32 ||
        header.e_machine != EM_RISCV)
        return 0;
    return cli_fail(EXIT_CANNOT_RUN, "%s: a coprocessor image, not a host "
                    "program: run it alone with cop-run (cop-run "
                    "--sample-every=N samples it), or embed it with "
                    "cop-embed in a host program that runs it through "
                    "libcop and record that", file);
}

/*
 * CMD as execvp will find it: a path must name an executable file, a name
 * one in PATH, and neither a coprocessor image.  0, or the status coprof
 * exits with (127 not found, 126 not executable) with its line printed,
 * before any session is touched.
 */
static int check_command(const char *name)
{
    const char *dir = getenv("PATH");
    char file[PATH_MAX];
    int error, denied = 0;

    if (strchr(name, '/')) {
        if ((error = check_file(name)) == 0)
            return check_not_image(name);
        return cli_fail(error == ENOENT || error == ENOTDIR ?
                        EXIT_NOT_FOUND : EXIT_CANNOT_RUN, "%s: %s", name,
                        strerror(error));
    }
    for (dir = dir ? dir : "/bin:/usr/bin";; dir++) {
        size_t len = strcspn(dir, ":");

        snprintf(file, sizeof(file), "%.*s/%s", (int)len, len ? dir : ".",
                 name);
        if ((error = check_file(file)) == 0)
            return check_not_image(file);
        denied |= error != ENOENT && error != ENOTDIR;
        dir += len;
        if (!*dir)
            break;
    }
    if (denied)
        return cli_fail(EXIT_CANNOT_RUN, "%s: %s", name, strerror(EACCES));
    return cli_fail(EXIT_NOT_FOUND, "%s: not found in PATH", name);
}

/* CMD run and waited for (unless a signal came first); its status. */
static int run_command(struct record *r)
{
    int status;

    if (!r->command && !early_signal) {     /* not launched early */
        if ((r->command = start_command(r)) < 0) {
            r->command = 0;
            cli_fail(EXIT_FAILED, "fork: %s", strerror(errno));
            return EXIT_FAILED;
        }
        spawn_host(r);
    }
    command_pid = r->command;
    if (early_signal) {  /* before CMD ran, or before command_pid was set */
        command_pid = 0;
        drop_command(r);
        discard_host(r);
        fprintf(stderr, "coprof: %s before %s ran: not running it\n",
                strsignal(early_signal), r->opt.command[0]);
        return 128 + early_signal;
    }
    host_ready(r);
    if (r->opt.top)
        start_top(r);
    release_command(r);
    status = wait_command(r);
    command_pid = 0;
    host_command_over(r);
    return status;
}

static int record(struct record *r)
{
    int status, cmd_status;

    catch_signals();
    if ((status = check_command(r->opt.command[0])) != 0)
        return status;
    if ((status = begin(r)) != 0)
        return status;
    if (r->opt.top && open_command_log(r) < 0)
        cmd_status = cli_fail(EXIT_FAILED, "%s", r->err);
    else
        cmd_status = run_command(r);
    stop_top(r);
    if (r->command_out >= 0)
        close(r->command_out);
    finish(r);
    settle_end(r);
    settle_host(r);
    if (!r->opt.quiet)
        summary(r);
    if (r->end_note[0])
        fprintf(stderr, "coprof: %s\n", r->end_note);
    if (r->end_reason[0] || r->host_reason[0]) {
        /* (the summary's host line said why; -q: this line says it) */
        cli_fail(EXIT_FAILED, "session %s is incomplete: %s%s%s%s%s",
                 r->dir, r->end_reason, r->end_reason[0] &&
                 r->host_reason[0] ? "; " : "", r->host_reason[0] ?
                 "the host side is lost" : "", r->host_reason[0] &&
                 r->opt.quiet ? ": " : "", r->opt.quiet ? r->host_reason :
                 "");
        return cmd_status ? cmd_status : EXIT_FAILED;
    }
    return cmd_status;
}

/*
 * `coprof archive [-d SESSION] [-o FILE]`: the session and the images it
 * needs in one file, like oparchive; `coprof top [-d SESSION]`: a live
 * view of a session being recorded (copcontrol's, or another terminal's
 * coprof record), like perf top.  copreport, beside this program, does
 * both (`copreport archive`, report/coprof_report/archive.py; `copreport
 * top`, live.py), so that each is made by the code that reads sessions.
 */
static int run_copreport(int argc, char **argv)
{
    char path[PATH_MAX];
    char **args = calloc((size_t)argc + 1, sizeof(*args));

    if (!args)
        return cli_fail(EXIT_FAILED, "archive: out of memory");
    daemons_find("copreport", path, sizeof(path));
    args[0] = path;
    for (int i = 1; i < argc; i++)     /* "archive" and its options */
        args[i] = argv[i];
    setenv("COPREPORT_PROG", "coprof", 1);  /* usage: coprof top ... */
    execvp(path, args);
    free(args);
    return cli_fail(EXIT_FAILED, "%s: %s (copreport %s does it)", path,
                    strerror(errno), argv[1]);
}

int main(int argc, char **argv)
{
    static struct record r;
    int status;

    r.driver.sock = -1;
    sampling_spec_init(&r.opt.sampling);
    host_options_init(&r.opt.host);
    r.relay.fd = r.relay.log = -1;
    r.host_relay.fd = r.host_relay.log = -1;
    r.hold_fd = -1;
    r.host_ready_fd = -1;
    r.host_stored_fd = -1;
    r.command_out = -1;
    if (argc < 2)
        return cli_fail(EXIT_USAGE, "no subcommand: coprof record [OPTIONS] "
                        "-- CMD [ARGS...] (see coprof --help)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "archive") == 0 || strcmp(argv[1], "top") == 0)
        return run_copreport(argc, argv);
    if (strcmp(argv[1], "record") != 0)
        return cli_fail(EXIT_USAGE, "%s: unknown subcommand (coprof record "
                        "[OPTIONS] -- CMD [ARGS...], coprof archive, "
                        "coprof top)", argv[1]);
    if ((status = parse_record(argc - 1, argv + 1, &r.opt)) != 0)
        return status;
    return record(&r);
}
