/*
 * main.c — the copsim daemon's command line.
 *
 *   copsim [--socket PATH] [--slots N] [--slice CYCLES] [--event-log FILE]
 *          [...]
 *   copsim --event=SPU_CYCLES:N --stream-out FILE [...] -- COMMAND [ARGS...]
 *
 * Parses the options into a struct copsim_config, creates the copsim
 * (copsim.c), serves until SIGTERM or SIGINT (or, with --private, until the
 * parent process ends) and tears it down.  The kernel driver is hosted in
 * it (emulator/copsim/copsim-host.h): its hooks and control requests are
 * installed at start, unless --no-driver leaves the mailboxes to a driver
 * outside copsim (copdrv.ko in a guest).  With a COMMAND, copsim runs that one command against
 * a private copsim with the driver's session started and writes the whole
 * sample stream to FILE (emulator/copsim/copsim-run.c).  Each option is one
 * entry in long_options, one case in parse_option and one paragraph in
 * usage().  Numbers go through lfsr/'s parsers, as in the rest of the
 * project.
 */
#include "emulator/copsim/copsim.h"
#include "emulator/copsim/copsim-host.h"
#include "abi/trace-regs.h"
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"
#include "common/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define EXIT_USAGE  2

static struct copsim *running;

static void usage(FILE *out)
{
    fprintf(out,
        "usage: copsim [OPTIONS]\n"
        "       copsim --event=SPU_CYCLES:N --stream-out FILE [OPTIONS] -- "
        "COMMAND [ARGS...]\n"
        "\n"
        "The emulated coprocessor complex: a daemon that owns the trace\n"
        "unit's register file and N slots, and runs the coprocessor\n"
        "contexts of host programs (through libcop), each in its own\n"
        "qemu-system-riscv32 with the trace-unit plugin, time-slicing them\n"
        "over the slots.  Every create, load, run, bind, preemption,\n"
        "unbind, exit, fault and reap goes to the kernel event log as a\n"
        "SCHED record.  It serves until SIGTERM or SIGINT.  It hosts the\n"
        "kernel driver, which writes the escape-coded sample stream; clients\n"
        "set, start and stop it over the socket (kernel-driver/README.md).\n"
        "\n"
        "With a COMMAND it runs only that command, against a private copsim\n"
        "whose driver samples from the start, and exits with its status:\n"
        "      --event=SPU_CYCLES:N  one sample every N cycles of each slot\n"
        "                            (the timing model's); SPU_INSTRUCTIONS:N\n"
        "                            every N retired instructions\n"
        "      --stream-out FILE     write the whole sample stream to FILE;\n"
        "                            each slot's trace-unit counters and the\n"
        "                            stream's totals go to stderr\n"
        "      --fifo-full=stall|drop\n"
        "                            a capture that finds the FIFO full\n"
        "                            stalls the coprocessor until the driver\n"
        "                            drains (stall, the default: nothing is\n"
        "                            lost) or is dropped and counted (drop,\n"
        "                            the Cell's way)\n"
        "      --dither=SEED         each sampling interval is N plus a\n"
        "                            jitter from a generator seeded with SEED\n"
        "                            (mean exactly N; docs/trace-unit.md);\n"
        "                            the default, with a seed from getrandom\n"
        "      --no-dither           every interval exactly N\n"
        "\n"
        "  -s, --socket PATH     listen on PATH, mode 0600 (default\n"
        "                        $COPSIM_SOCKET, else\n"
        "                        $XDG_RUNTIME_DIR/coprof/copsim.sock, else\n"
        "                        /tmp/coprof-UID/copsim.sock)\n"
        "  -n, --slots N         slots (1-%u, default %u)\n"
        "  -t, --slice CYCLES    time slice: cycles a context runs on a\n"
        "                        slot before it yields to a waiting one\n"
        "                        (default %u)\n"
        "  -m, --max-cycles N    stop a run after N cycles as a looping\n"
        "                        program (default 0: no limit)\n"
        "  -l, --event-log FILE  write SCHED records to FILE: an existing\n"
        "                        log needs a SCHED subsystem, a missing one\n"
        "                        is created (default $COPSIM_EVENT_LOG, else\n"
        "                        STATE_DIR/copsim.coplog)\n"
        "  -d, --state-dir DIR   register file (copsim.regs) and copies of\n"
        "                        anonymous images (images/) (default: the\n"
        "                        socket's directory)\n"
        "  -r, --ram-dir DIR     guest RAM files in DIR, an existing\n"
        "                        directory (default: anonymous memory\n"
        "                        files); a RAM file per context is the\n"
        "                        process model's, which this picks\n"
        "      --contexts N      contexts in the register file: the most\n"
        "                        that exist at once (default %u, %u with\n"
        "                        the slot model, whose waiting contexts\n"
        "                        take only the memory they use)\n"
        "      --fifo-depth N    entries per slot FIFO, a power of two\n"
        "                        (default %u)\n"
        "      --call-graph[=D]  capture each sample's call stack, up to D\n"
        "                        frames (1..64, default 16): the register\n"
        "                        file gets a call-stack area\n"
        "      --clock HZ        nominal coprocessor clock, for rates given\n"
        "                        as time (default 3.2GHz)\n"
        "      --tick-us N       scheduler period while contexts wait\n"
        "                        (default %u)\n"
        "      --qemu PROG       the emulator (default qemu-system-riscv32)\n"
        "      --plugin PATH     the trace-unit plugin (default\n"
        "                        libcoptrace.so beside copsim, or\n"
        "                        $COPROF_TRACE_PLUGIN)\n"
        "      --reference       run the plugin in its per-instruction\n"
        "                        reference mode\n"
        "      --context-model=process|slot\n"
        "                        slot: one long-lived QEMU per slot, a\n"
        "                        context is saved state (images run\n"
        "                        unmodified in user mode;\n"
        "                        the default, or $COPSIM_CONTEXT_MODEL);\n"
        "                        process: a QEMU per context, from its run\n"
        "                        to its end, which --ram-dir picks\n"
        "                        unless slot is given here\n"
        "      --exact-counts DIR\n"
        "                        count every instruction exactly: each run of\n"
        "                        context ID appends its counts to\n"
        "                        DIR/context-ID.counts (docs/trace-unit.md)\n"
        "      --private PID     stop when process PID ends, leaving nothing\n"
        "                        behind (libcop's private copsim)\n"
        "      --no-driver       do not host the kernel driver: a driver\n"
        "                        outside copsim (copdrv.ko in a guest,\n"
        "                        coprof --driver=linux) reads the register\n"
        "                        file's mailboxes and acks them; the\n"
        "                        driver's control requests are refused\n"
        "      --ready-fd FD     write \"ready\\n\" to FD once serving; FD\n"
        "                        must be open for writing, and copsim\n"
        "                        stops if the write fails\n"
        "  -h, --help            show this help\n"
        "\n"
        "emulator/copsim/README.md describes the socket protocol and the\n"
        "SCHED records.  Errors at start print one line and exit with\n"
        "status 1, bad options with status 2.\n",
        TRACE_MAX_SLOTS, COPSIM_DEFAULT_SLOTS, COPSIM_DEFAULT_SLICE,
        COPSIM_DEFAULT_CONTEXTS, COPSIM_SLOT_DEFAULT_CONTEXTS,
        TRACE_DEFAULT_FIFO_DEPTH,
        COPSIM_DEFAULT_TICK_US);
}

/* process or slot (emulator/copsim/README.md, "Slots as long-lived
 * emulators"). */
static int parse_context_model(const char *what, const char *arg,
                               struct copsim_config *config)
{
    if (!strcmp(arg, "process") || !strcmp(arg, "slot")) {
        config->slot_model = !strcmp(arg, "slot");
        return 0;
    }
    fprintf(stderr, "copsim: %s '%s': process or slot\n", what, arg);
    return -1;
}

struct options {
    struct copsim_config config;
    int ready_fd;
    int no_driver;              /* --no-driver: a driver outside copsim */
    int model_given;            /* --context-model on the command line */
    uint32_t event_count;       /* --event=SPU_CYCLES:N; 0: none */
    struct copsim_run_session session;  /* --fifo-full, --dither */
    int dither_given;           /* --dither or --no-dither */
    const char *stream_out;
    char **command;             /* after the options; NULL: the daemon */
};

/* A count between min and max; -1 with a message otherwise. */
static int parse_number(const char *option, const char *text, uint64_t min,
                        uint64_t max, uint64_t *value)
{
    if (lfsr_parse_count(text, value) < 0 || *value < min || *value > max) {
        cli_fail(EXIT_USAGE, "%s: '%s' is not a number from %llu to %llu",
                 option, text, (unsigned long long)min,
                 (unsigned long long)max);
        return -1;
    }
    return 0;
}

static int parse_u32(const char *option, const char *text, uint64_t min,
                     uint64_t max, uint32_t *value)
{
    uint64_t wide;

    if (parse_number(option, text, min, max, &wide) < 0)
        return -1;
    *value = (uint32_t)wide;
    return 0;
}

static int parse_clock(const char *text, uint64_t *hz)
{
    double value;

    if (lfsr_parse_hz(text, &value) < 0 || value < 1.0 || value > 1e12) {
        cli_fail(EXIT_USAGE, "--clock: '%s' is not a frequency from 1Hz to "
                 "1000GHz", text);
        return -1;
    }
    *hz = (uint64_t)value;
    return 0;
}

/*
 * SPU_CYCLES:N (the OProfile event of the Cell SPU's cycle counter: here
 * the timing model's cycles) or SPU_INSTRUCTIONS:N (retired instructions).
 */
static int parse_event(const char *text, uint32_t *count, uint32_t *event)
{
    const char *colon = strchr(text, ':');
    char name[32];
    uint64_t value;

    if (!colon || (size_t)(colon - text) >= sizeof(name)) {
        name[0] = 0;
    } else {
        memcpy(name, text, (size_t)(colon - text));
        name[colon - text] = 0;
    }
    if (!colon || trace_parse_event(name, event) < 0
        || lfsr_parse_count(colon + 1, &value) < 0
        || value < 1 || value > LFSR_PERIOD) {
        cli_fail(EXIT_USAGE, "--event: '%s' is not SPU_CYCLES:N or "
                 "SPU_INSTRUCTIONS:N with N from 1 to %u", text,
                 LFSR_PERIOD);
        return -1;
    }
    *count = (uint32_t)value;
    return 0;
}

/* --ready-fd FD must be open for writing, checked before copsim starts. */
static int check_ready_fd(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    if (flags < 0) {
        cli_fail(EXIT_USAGE, "--ready-fd %d: %s", fd, strerror(errno));
        return -1;
    }
    if ((flags & O_ACCMODE) == O_RDONLY) {
        cli_fail(EXIT_USAGE, "--ready-fd %d: open for reading only", fd);
        return -1;
    }
    return 0;
}

/* Returns 0, or -1 after a message. */
static int parse_option(int c, const char *arg, struct options *opts)
{
    struct copsim_config *config = &opts->config;
    uint64_t number;

    switch (c) {
    case 's':
        config->socket_path = arg;
        return 0;
    case 'n':
        return parse_u32("--slots", arg, 1, TRACE_MAX_SLOTS, &config->n_slots);
    case 't':
        return parse_number("--slice", arg, 1, UINT64_MAX / 2,
                            &config->slice_cycles);
    case 'm':
        return parse_number("--max-cycles", arg, 0, UINT64_MAX / 2,
                            &config->max_cycles);
    case 'l':
        config->event_log_path = arg;
        return 0;
    case 'd':
        config->state_dir = arg;
        return 0;
    case 'r':
        config->ram_dir = arg;
        return 0;
    case 'C':
        return parse_u32("--contexts", arg, 1, TRACE_MAX_CONTEXTS,
                         &config->n_contexts);
    case 'F':
        return parse_u32("--fifo-depth", arg, TRACE_MIN_FIFO_DEPTH,
                         TRACE_MAX_FIFO_DEPTH, &config->fifo_depth);
    case 'G':
        config->call_graph = COPSIM_DEFAULT_CALL_GRAPH;
        return arg ? parse_u32("--call-graph", arg, 1, TRACE_MAX_STACK_DEPTH,
                               &config->call_graph) : 0;
    case 'H':
        return parse_clock(arg, &config->nominal_hz);
    case 'T':
        return parse_u32("--tick-us", arg, 10, 1000000, &config->tick_us);
    case 'Q':
        config->qemu_program = arg;
        return 0;
    case 'P':
        config->plugin_path = arg;
        return 0;
    case 'R':
        config->reference_mode = 1;
        return 0;
    case 'M':
        opts->model_given = 1;
        return parse_context_model("--context-model", arg, config);
    case 'x':
        config->exact_counts_dir = arg;
        return 0;
    case 'p':
        if (parse_number("--private", arg, 1, INT32_MAX, &number) < 0)
            return -1;
        config->parent_pid = (pid_t)number;
        return 0;
    case 'f':
        if (parse_number("--ready-fd", arg, 0, INT32_MAX, &number) < 0
            || check_ready_fd((int)number) < 0)
            return -1;
        opts->ready_fd = (int)number;
        return 0;
    case 'E':
        opts->no_driver = 1;
        return 0;
    case 'e':
        return parse_event(arg, &opts->event_count, &opts->session.event);
    case 'o':
        opts->stream_out = arg;
        return 0;
    case 'X':
        if (trace_parse_fifo_policy(arg, &opts->session.fifo_full) < 0) {
            cli_fail(EXIT_USAGE, "--fifo-full: '%s' is not stall or drop",
                     arg);
            return -1;
        }
        return 0;
    case 'D':
        if (parse_number("--dither", arg, 0, UINT64_MAX, &number) < 0)
            return -1;
        opts->session.dither = 1;
        opts->session.dither_seed = number;
        opts->dither_given = 1;
        return 0;
    case 'N':
        opts->session.dither = 0;
        opts->dither_given = 1;
        return 0;
    }
    cli_fail(EXIT_USAGE, "unknown option (see copsim --help)");
    return -1;
}

/* Dither on with a fresh seed unless --dither or --no-dither said.
 * Returns -1 to go on, or an exit status. */
static int default_dither(struct options *opts)
{
    uint64_t seed;

    if (opts->dither_given)
        return -1;
    if (getrandom(&seed, sizeof(seed), 0) != (ssize_t)sizeof(seed))
        return cli_fail(EXIT_USAGE, "--dither: no seed from getrandom: %s "
                        "(give --dither=SEED or --no-dither)",
                        strerror(errno));
    opts->session.dither = 1;
    opts->session.dither_seed = seed;
    return -1;
}

/* Returns -1 to go on, or an exit status. */
static int parse_options(int argc, char **argv, struct options *opts)
{
    static const struct cli_option long_options[] = {
        {'s', "socket", required_argument, 0},
        {'n', "slots", required_argument, 0},
        {'t', "slice", required_argument, 0},
        {'m', "max-cycles", required_argument, 0},
        {'l', "event-log", required_argument, 0},
        {'d', "state-dir", required_argument, 0},
        {'r', "ram-dir", required_argument, 0},
        {0, "contexts", required_argument, 'C'},
        {0, "fifo-depth", required_argument, 'F'},
        {0, "call-graph", optional_argument, 'G'},
        {0, "clock", required_argument, 'H'},
        {0, "tick-us", required_argument, 'T'},
        {0, "qemu", required_argument, 'Q'},
        {0, "plugin", required_argument, 'P'},
        {0, "reference", no_argument, 'R'},
        {0, "context-model", required_argument, 'M'},
        {0, "exact-counts", required_argument, 'x'},
        {0, "private", required_argument, 'p'},
        {0, "ready-fd", required_argument, 'f'},
        {0, "no-driver", no_argument, 'E'},
        {0, "event", required_argument, 'e'},
        {0, "stream-out", required_argument, 'o'},
        {0, "fifo-full", required_argument, 'X'},
        {0, "dither", required_argument, 'D'},
        {0, "no-dither", no_argument, 'N'},
        {'h', "help", no_argument, 0},
        CLI_END,
    };
    struct cli_parser parser;
    int c;

    memset(opts, 0, sizeof(*opts));
    opts->ready_fd = -1;
    opts->session.fifo_full = COPDRV_FIFO_STALL;
    opts->config.slot_model = 1;
    opts->config.event_log_path = getenv("COPSIM_EVENT_LOG");
    if (opts->config.event_log_path && !*opts->config.event_log_path)
        opts->config.event_log_path = NULL;
    if (getenv("COPSIM_CONTEXT_MODEL") && *getenv("COPSIM_CONTEXT_MODEL")
        && parse_context_model("COPSIM_CONTEXT_MODEL",
                               getenv("COPSIM_CONTEXT_MODEL"),
                               &opts->config) < 0)
        return EXIT_USAGE;
    cli_parser_init(&parser, long_options, "+");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == '?')
            return cli_fail(EXIT_USAGE, "bad option (see copsim --help)");
        if (parse_option(c, optarg, opts) < 0)
            return EXIT_USAGE;
    }
    if (opts->config.ram_dir && !opts->model_given)
        opts->config.slot_model = 0;    /* what only a QEMU per context has */
    if (opts->config.slot_model && opts->config.ram_dir)
        return cli_fail(EXIT_USAGE, "--ram-dir: a RAM file per context is "
                        "the process model's; the slot model keeps contexts "
                        "in its own memory (use --context-model=process)");
    if (!opts->event_count && !opts->stream_out) {
        if (optind < argc)
            return cli_fail(EXIT_USAGE, "unexpected argument '%s' (see "
                            "copsim --help)", argv[optind]);
        return -1;
    }
    if (opts->no_driver)
        return cli_fail(EXIT_USAGE, "--no-driver: the one-command mode "
                        "needs the hosted driver (see copsim --help)");
    if (!opts->event_count || !opts->stream_out || optind >= argc)
        return cli_fail(EXIT_USAGE, "--event=SPU_CYCLES:N, --stream-out FILE "
                        "and a COMMAND after -- go together (see copsim "
                        "--help)");
    opts->command = argv + optind;
    opts->session.count = opts->event_count;
    return default_dither(opts);
}

static void on_signal(int signo)
{
    (void)signo;
    if (running)
        copsim_shutdown(running);
}

static void install_signals(void)
{
    struct sigaction action;

    memset(&action, 0, sizeof(action));
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* 0, or -1 after a message: whoever waits for "ready" would wait forever,
 * so copsim must not serve. */
static int announce_ready(int fd)
{
    int status = 0;

    if (fd < 0)
        return 0;
    if (cli_say_word(fd, "ready") < 0) {
        cli_fail(1, "--ready-fd %d: %s", fd, strerror(errno));
        status = -1;
    }
    close(fd);
    return status;
}

/* The one-command mode: the terminal's ^C reaches the command, which ends,
 * and then copsim ends cleanly with the stream complete. */
static int run_command(struct options *opts)
{
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    return copsim_driver_run_command(&opts->config, &opts->session,
                                     opts->stream_out, opts->command);
}

int main(int argc, char **argv)
{
    struct copsim_driver *driver = NULL;
    struct options opts;
    char err[1024];
    int status = parse_options(argc, argv, &opts);

    if (status >= 0)
        return status;
    if (opts.command)
        return run_command(&opts);
    install_signals();
    running = copsim_create(&opts.config, err, sizeof(err));
    if (!running) {
        fprintf(stderr, "copsim: %s\n", err);
        return 1;
    }
    if (!opts.no_driver)
        driver = copsim_driver_attach(running, err, sizeof(err));
    if (!opts.no_driver && !driver) {
        fprintf(stderr, "copsim: %s\n", err);
        copsim_destroy(running);
        return 1;
    }
    status = announce_ready(opts.ready_fd);
    if (status == 0)
        status = copsim_serve(running);
    copsim_destroy(running);
    if (driver)
        copsim_driver_free(driver);
    running = NULL;
    return status < 0 ? 1 : 0;
}
