/*
 * cop-run — run one coprocessor image standalone under qemu-system-riscv32.
 *
 *   cop-run [--ram-file F] [--data-file D] [--qemu PROG] [--qemu-arg ARG]...
 *           [--sample-every N [--reference] [--samples-out FILE]
 *            [--reasons-out R] [--events-out E] [--no-watch] [--fifo-depth D]
 *            [--fifo-full stall|drop] [--dither SEED [--slot S]]
 *            [--exact-counts C] [--no-trace]]
 *           IMAGE [ARGS...]
 *
 * It validates IMAGE, creates the guest RAM file (F, kept afterwards, or an
 * anonymous one), places the image and the arguments {IMAGE, ARGS...} in it
 * with the loader library, copies D to the start of the data window, and
 * runs QEMU with the UART on standard output.
 *
 * With --sample-every it attaches the trace unit (emulator/, docs/
 * trace-unit.md): a private register file whose slot 0 captures every N-th
 * instruction, the libcoptrace.so plugin on the QEMU command line, and a
 * simple consumer that drains the slot's FIFO into FILE while QEMU runs
 * (and each capture's stall reason into R with --reasons-out).
 * --exact-counts C also has the plugin count every instruction exactly and
 * write the counts to C at the end (counts=, docs/trace-unit.md).  For an
 * image with overlays the context watches its guard words (the plugin's
 * ram=), and the consumer drains the overlay events after the FIFO, into
 * E with --events-out; --no-watch turns the watch off.  The capture is
 * exactly every N-th instruction unless --dither SEED randomizes each
 * interval (docs/trace-unit.md, "Dither") with the jitter a session seeded
 * with SEED draws on its slot 0, or with --slot S on its slot S
 * (trace_dither_slot_seed); a capture that finds the FIFO
 * full is dropped and counted, or with --fifo-full stall waits for the
 * consumer.
 * A trap storm (trap-watch.h) ends QEMU with one line naming the image and
 * the trap vector, and status 132, as an unhandled trap.
 * Its exit status is the program's; its own failures exit with 125, a QEMU
 * that cannot run with 126 (127 when not installed), as env(1) does.  A
 * QEMU that ends without having started the program (the runtime marks the
 * boot block when it starts) is such a QEMU too, with one line saying so.
 *
 * Options stop at IMAGE, so ARGS may start with '-'.  Each option is one
 * entry in long_options, one case in parse_options and one line in usage().
 */
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"
#include "common/cli.h"
#include "common/loader.h"
#include "common/safe-file.h"
#include "sdk/trap-watch.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_RUN_FAILED   125
#define EXIT_CANNOT_EXEC  126
#define EXIT_NOT_FOUND    127
#define EXIT_TRAP_STORM   132     /* as the runtime's unhandled trap */

struct run_options {
    const char *ram_file;           /* NULL: anonymous RAM */
    const char *data_file;          /* NULL: the data window starts zeroed */
    const char *qemu;               /* NULL: qemu-system-riscv32 */
    struct cop_argv qemu_args;      /* appended to the QEMU command */
    uint32_t sample_every;          /* 0: no trace unit */
    int reference;                  /* the plugin's reference mode */
    const char *samples_out;        /* NULL: count captures only */
    const char *reasons_out;        /* NULL: stall reasons not written */
    const char *events_out;         /* NULL: overlay events counted only */
    int no_watch;                   /* no overlay watch after all */
    uint32_t fifo_depth;
    uint32_t call_graph;        /* frames per capture; 0: no stacks */
    struct trace_sampling sampling; /* FIFO-full policy and dither */
    uint32_t dither_slot;           /* --slot: whose jitter to draw */
    int has_dither_slot;
    const char *exact_counts;       /* NULL: no exact counts */
    int no_trace;                   /* run without the plugin after all */
    const char *image;
    int argc;                       /* the program's argv, IMAGE first */
    char **argv;
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: cop-run [OPTIONS] IMAGE [ARGS...]\n"
        "\n"
        "Runs the coprocessor image IMAGE (an ELF file built with sdk/cop.mk)\n"
        "under qemu-system-riscv32 -M virt, with argv = {IMAGE, ARGS...}.\n"
        "The program's console goes to standard output and its exit status\n"
        "becomes cop-run's.  cop-run's own errors exit with 125; a QEMU that\n"
        "cannot run, or ends before the program starts, exits with 126, or\n"
        "127 when it is not installed.\n"
        "\n"
        "  -r, --ram-file F    use the file F as guest RAM and keep it after\n"
        "                      the run, to read the local store and the\n"
        "                      overlay guard words (default: an anonymous\n"
        "                      file)\n"
        "  -d, --data-file D   copy the file D to the start of the data\n"
        "                      window (at most 6 MiB), as a host program\n"
        "                      would\n"
        "  -q, --qemu PROG     the QEMU program (default qemu-system-riscv32)\n"
        "  -a, --qemu-arg ARG  append ARG to the QEMU command line; repeat it\n"
        "                      for several arguments\n"
        "  -n, --sample-every N\n"
        "                      attach the trace unit: capture the PC every N\n"
        "                      ticks of --event (1 to 16777215), exactly; on\n"
        "                      exit print \"captures=A dropped=B\n"
        "                      instructions=C outside_ls=D\" on stderr\n"
        "      --event E       what N counts: SPU_CYCLES (the timing model's\n"
        "                      cycles, the default) or SPU_INSTRUCTIONS\n"
        "                      (retired instructions)\n"
        "      --reference     use the plugin's per-instruction reference\n"
        "                      mode (slow; the same captures, to check the\n"
        "                      fast one)\n"
        "  -o, --samples-out FILE\n"
        "                      write the captured local-store addresses to\n"
        "                      FILE, one per line in hex, in capture order\n"
        "      --reasons-out R write each capture's stall reason to R, one\n"
        "                      line per capture in capture order: \"PC STALL\"\n"
        "                      (PC as in --samples-out, STALL the reason: 0\n"
        "                      issue, 1 dependency, 2 branch, 3 DMA wait,\n"
        "                      4 mailbox wait, 5 memory), a DMA wait's\n"
        "                      followed by \" TAG ISSUER\": the tag waited on\n"
        "                      and the LS address of the get/put that issued\n"
        "                      it (docs/trace-unit.md, \"Stall reasons\")\n"
        "  -e, --events-out E  write the overlay events to E, one per line:\n"
        "                      \"POS REGION GUARD\", guard word REGION (from\n"
        "                      0) became GUARD before the capture on line POS\n"
        "                      (from 0) of --samples-out; for an image with\n"
        "                      overlays, whose guard words the trace unit\n"
        "                      watches (on exit \"events=E events_dropped=F\"\n"
        "                      on stderr)\n"
        "      --no-watch      do not watch the guard words: the baseline\n"
        "                      to check that the watch changes no capture\n"
        "      --fifo-depth D  entries of the trace FIFO, a power of two\n"
        "                      (default %u)\n"
        "      --fifo-full stall|drop\n"
        "                      what a capture that finds the FIFO full does:\n"
        "                      drop (the default, the Cell's way: counted in\n"
        "                      dropped=) or stall (the program waits for the\n"
        "                      consumer, losing nothing; on exit \"stalls=S\n"
        "                      stall_ns=T\" on stderr)\n"
        "      --dither SEED   randomize each sampling interval: N plus a\n"
        "                      jitter drawn from a generator seeded with SEED\n"
        "                      (mean exactly N; docs/trace-unit.md); without\n"
        "                      it every interval is exactly N; the same\n"
        "                      jitter as slot 0 of a session recorded with\n"
        "                      --dither-seed=SEED\n"
        "      --slot S        with --dither: the jitter of the session's\n"
        "                      slot S instead (0 to %u), to reproduce what a\n"
        "                      context that ran alone on slot S was sampled\n"
        "                      at\n"
        "      --call-graph D  also capture each sample's call stack, up to D\n"
        "                      frames (1 to 64), written after its address\n"
        "                      on its --samples-out line, innermost first\n"
        "                      (docs/trace-unit.md, \"Call stacks\")\n"
        "  -c, --exact-counts C\n"
        "                      also count every instruction exactly and write\n"
        "                      the counts to the file C at the end\n"
        "                      (docs/trace-unit.md); needs --sample-every\n"
        "      --no-trace      run without the plugin even with the options\n"
        "                      above: the baseline to measure its cost\n"
        "  -h, --help          show this help\n"
        "\n"
        "docs/coprocessor-abi.md describes the memory map and the boot block\n"
        "through which the arguments reach main(); docs/trace-unit.md the\n"
        "trace unit.\n", TRACE_DEFAULT_FIFO_DEPTH, TRACE_MAX_SLOTS - 1);
}

/* Returns -1 to go on, or an exit status. */
static int parse_options(int argc, char **argv, struct run_options *opts)
{
    static const struct cli_option long_options[] = {
        {'r', "ram-file", required_argument, 0},
        {'d', "data-file", required_argument, 0},
        {'q', "qemu", required_argument, 0},
        {'a', "qemu-arg", required_argument, 0},
        {'n', "sample-every", required_argument, 0},
        {0, "event", required_argument, 'E'},
        {0, "reference", no_argument, 'R'},
        {'o', "samples-out", required_argument, 0},
        {0, "reasons-out", required_argument, 'Y'},
        {'e', "events-out", required_argument, 0},
        {0, "no-watch", no_argument, 'W'},
        {0, "fifo-depth", required_argument, 'D'},
        {0, "fifo-full", required_argument, 'F'},
        {0, "dither", required_argument, 'S'},
        {0, "slot", required_argument, 's'},
        {'c', "exact-counts", required_argument, 0},
        {0, "call-graph", required_argument, 'G'},
        {0, "no-trace", no_argument, 'T'},
        {'h', "help", no_argument, 0},
        CLI_END,
    };
    uint64_t number;
    struct cli_parser parser;
    int c;

    opts->fifo_depth = TRACE_DEFAULT_FIFO_DEPTH;
    cli_parser_init(&parser, long_options, "+");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        switch (c) {
        case 'r':
            opts->ram_file = optarg;
            break;
        case 'd':
            opts->data_file = optarg;
            break;
        case 'q':
            opts->qemu = optarg;
            break;
        case 'a':
            if (cop_argv_add(&opts->qemu_args, optarg) < 0)
                return cli_fail(EXIT_RUN_FAILED, "out of memory");
            break;
        case 'n':
            if (lfsr_parse_count(optarg, &number) < 0 || number < 1
                || number > LFSR_PERIOD)
                return cli_fail(EXIT_RUN_FAILED, "--sample-every '%s': not "
                                "a count from 1 to %u", optarg, LFSR_PERIOD);
            opts->sample_every = (uint32_t)number;
            break;
        case 'E':
            if (trace_parse_event(optarg, &opts->sampling.event) < 0)
                return cli_fail(EXIT_RUN_FAILED, "--event '%s': not "
                                TRACE_EVENT_NAMES, optarg);
            break;
        case 'R':
            opts->reference = 1;
            break;
        case 'o':
            opts->samples_out = optarg;
            break;
        case 'Y':
            opts->reasons_out = optarg;
            break;
        case 'e':
            opts->events_out = optarg;
            break;
        case 'W':
            opts->no_watch = 1;
            break;
        case 'D':
            if (lfsr_parse_count(optarg, &number) < 0 || number > UINT32_MAX)
                return cli_fail(EXIT_RUN_FAILED, "--fifo-depth '%s': not a "
                                "count", optarg);
            opts->fifo_depth = (uint32_t)number;
            break;
        case 'F':
            if (trace_parse_fifo_policy(optarg,
                                        &opts->sampling.fifo_policy) < 0)
                return cli_fail(EXIT_RUN_FAILED, "--fifo-full '%s': not "
                                "stall or drop", optarg);
            break;
        case 'S':
            if (lfsr_parse_count(optarg, &number) < 0)
                return cli_fail(EXIT_RUN_FAILED, "--dither '%s': not a "
                                "decimal seed", optarg);
            opts->sampling.dither = 1;
            opts->sampling.dither_seed = number;
            break;
        case 's':
            if (lfsr_parse_count(optarg, &number) < 0
                || number >= TRACE_MAX_SLOTS)
                return cli_fail(EXIT_RUN_FAILED, "--slot '%s': not a slot "
                                "from 0 to %u", optarg, TRACE_MAX_SLOTS - 1);
            opts->dither_slot = (uint32_t)number;
            opts->has_dither_slot = 1;
            break;
        case 'G':
            if (lfsr_parse_count(optarg, &number) < 0 || number < 1
                || number > TRACE_MAX_STACK_DEPTH)
                return cli_fail(EXIT_RUN_FAILED, "--call-graph '%s': not a "
                                "depth from 1 to %u", optarg,
                                TRACE_MAX_STACK_DEPTH);
            opts->call_graph = (uint32_t)number;
            break;
        case 'c':
            opts->exact_counts = optarg;
            break;
        case 'T':
            opts->no_trace = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_RUN_FAILED;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_RUN_FAILED;
    }
    if (!opts->sample_every
        && (opts->reference || opts->samples_out || opts->events_out
            || opts->reasons_out || opts->no_watch || opts->exact_counts
            || opts->call_graph))
        return cli_fail(EXIT_RUN_FAILED, "--reference, --samples-out, "
                        "--reasons-out, --events-out, --no-watch, "
                        "--exact-counts and --call-graph need "
                        "--sample-every N");
    if (opts->has_dither_slot && !opts->sampling.dither)
        return cli_fail(EXIT_RUN_FAILED, "--slot needs --dither SEED");
    opts->sampling.dither_seed =
        trace_dither_slot_seed(opts->sampling.dither_seed, opts->dither_slot);
    opts->image = argv[optind];
    opts->argc = argc - optind;
    opts->argv = argv + optind;
    return -1;
}

static int build_command(const struct run_options *opts,
                         const struct cop_ram *ram, struct cop_argv *command)
{
    struct cop_qemu_options qemu = {
        .program = opts->qemu, .ram_path = ram->path, .console = NULL,
    };

    if (cop_qemu_command(command, &qemu) < 0)
        return -1;
    for (size_t i = 0; i < opts->qemu_args.argc; i++)
        if (cop_argv_add(command, opts->qemu_args.argv[i]) < 0)
            return -1;
    return 0;
}

/* A traced run: context 0 on slot 0 of a private register file, and the
 * files the captures and the overlay events go to (NULL: counted only). */
struct traced {
    struct trace_run run;
    FILE *samples;
    FILE *reasons;
    FILE *events;
    struct safe_out samples_out;
    struct safe_out reasons_out;
    struct safe_out events_out;
};

/* Runs QEMU; with a trace unit, drains its FIFO until QEMU ends. */
/* Whether the runtime ever ran: it marks the boot block at its start. */
static int program_started(const struct cop_ram *ram)
{
    const volatile struct cop_boot_block *boot =
        cop_ram_at(ram, COP_BOOT_BASE, sizeof(*boot));

    return boot->started == COP_BOOT_STARTED;
}

/* A storm the watch saw: the program's end, as an unhandled trap's. */
static int storm_status(const char *image, const struct trap_watch *watch,
                        int status)
{
    if (!watch->storm)
        return status;
    return cli_fail(EXIT_TRAP_STORM, "%s: trap storm at 0x%08x (mtvec "
                    "0x%08x)", image, watch->pc, watch->mtvec);
}

static int run_qemu(const char *image, struct cop_argv *command,
                    const struct cop_ram *ram, struct traced *trace)
{
    struct trap_watch watch;
    struct cop_error err;
    char reason[512];
    pid_t pid;
    int status, waited;

    if (trap_watch_prepare(&watch, command) < 0) {
        trap_watch_end(&watch);
        return cli_fail(EXIT_RUN_FAILED, "QEMU's monitor: %s",
                        strerror(errno));
    }
    if (cop_qemu_spawn(command, -1, &pid, &err) < 0) {
        trap_watch_end(&watch);
        return cli_fail(errno == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC,
                        "%s", err.message);
    }
    if (trap_watch_start(&watch) < 0)
        cli_fail(0, "no watch for a trap storm: %s", strerror(errno));
    if (trace && trace_run_consume(&trace->run, pid, 1, trace->samples,
                                   trace->reasons, trace->events, reason,
                                   sizeof(reason)) < 0)
        cli_fail(0, "%s", reason);
    waited = cop_qemu_wait(pid, &status, &err);
    trap_watch_end(&watch);
    if (watch.storm && waited >= 0)
        return storm_status(image, &watch, status);
    switch (waited) {
    case 0:
        if (!program_started(ram))
            return cli_fail(EXIT_CANNOT_EXEC, "%s exited with status %d "
                            "before the program started", command->argv[0],
                            status);
        return status;
    case 1:
        cli_fail(0, "%s", err.message);
        return status;
    default:
        return cli_fail(EXIT_RUN_FAILED, "%s", err.message);
    }
}

/*
 * Opens an output file a user named (safe-file.h's rule: no planted link
 * followed, a new private file put in place at once, so a run that stops
 * keeps what it wrote); NULL path: none.
 */
static int open_output(const char *path, struct safe_out *safe, FILE **out)
{
    char err[512];

    *out = NULL;
    safe->fd = -1;
    safe->dirfd = -1;
    if (!path)
        return 0;
    if (safe_out_open(safe, path, SAFE_OUT_PLACE, err, sizeof(err)) < 0)
        return cli_fail(-1, "%s", err);
    if (!safe_out_stdio(safe, out)) {
        safe_out_close(safe, NULL, 0, err, sizeof(err));
        return cli_fail(-1, "%s: %s", path, strerror(errno));
    }
    return 0;
}

/* Closes it; a failed write makes the status a failure. */
static void close_output(struct safe_out *safe, FILE *out, int *status)
{
    char err[512];

    if (out && safe_out_close(safe, out, 1, err, sizeof(err)) < 0) {
        cli_fail(0, "write failed: %s", err);
        *status = *status ? *status : EXIT_RUN_FAILED;
    }
}

/*
 * The exact counts' file C, made by open_output's rule; the plugin (in
 * QEMU, a child) appends to it through this process's descriptor
 * (/proc/PID/fd/N, into path), never by its name.  0 or -1.
 */
static int open_counts(const char *name, struct safe_out *safe, char *path,
                       size_t len)
{
    char err[512];

    safe->fd = -1;
    safe->dirfd = -1;
    if (!name)
        return 0;
    if (safe_out_open(safe, name, SAFE_OUT_PLACE, err, sizeof(err)) < 0)
        return cli_fail(-1, "%s", err);
    safe_out_fd_path(safe, path, len);
    return 0;
}

/* Runs QEMU with the trace unit attached and prints its counters.  An
 * image with overlays has its guard words watched in the RAM file (unless
 * --no-watch). */
static int run_traced(const struct run_options *opts,
                      const struct cop_image *image, const struct cop_ram *ram,
                      struct cop_argv *command)
{
    struct trace_watch watch = {
        .ram = ram->path,
        .guard_ls_offset = cop_image_guard_ls_offset(image),
        .guard_count = opts->no_watch ? 0
                       : trace_watchable_guards(image->nregions),
    };
    struct trace_geometry geo;
    struct traced trace = { .samples = NULL, .reasons = NULL,
                            .events = NULL };
    struct safe_out counts;
    char err[512], counts_path[64];
    int status = EXIT_RUN_FAILED;

    trace_geometry_default(&geo);
    geo.fifo_depth = opts->fifo_depth;
    geo.stack_depth = opts->call_graph;
    if (open_counts(opts->exact_counts, &counts, counts_path,
                    sizeof(counts_path)) < 0)
        return EXIT_RUN_FAILED;
    if (trace_run_start(&trace.run, NULL, &geo, 0, 0, opts->sample_every,
                        opts->reference ? TRACE_MODE_REFERENCE
                                        : TRACE_MODE_FAST,
                        opts->exact_counts ? counts_path : NULL, &watch,
                        &opts->sampling, err, sizeof(err)) < 0) {
        safe_out_close(&counts, NULL, 1, err, sizeof(err));
        return cli_fail(EXIT_RUN_FAILED, "%s", err);
    }
    if (cop_argv_add(command, "-plugin") < 0
        || cop_argv_add(command, trace.run.plugin_arg) < 0) {
        trace_run_end(&trace.run);
        safe_out_close(&counts, NULL, 1, err, sizeof(err));
        return cli_fail(EXIT_RUN_FAILED, "out of memory");
    }
    if (open_output(opts->samples_out, &trace.samples_out, &trace.samples) < 0
        || open_output(opts->reasons_out, &trace.reasons_out,
                       &trace.reasons) < 0
        || open_output(opts->events_out, &trace.events_out,
                       &trace.events) < 0) {
        close_output(&trace.samples_out, trace.samples, &status);
        close_output(&trace.reasons_out, trace.reasons, &status);
        trace_run_end(&trace.run);
        safe_out_close(&counts, NULL, 1, err, sizeof(err));
        return EXIT_RUN_FAILED;
    }
    status = run_qemu(opts->image, command, ram, &trace);
    close_output(&trace.samples_out, trace.samples, &status);
    close_output(&trace.reasons_out, trace.reasons, &status);
    close_output(&trace.events_out, trace.events, &status);
    if (safe_out_close(&counts, NULL, 1, err, sizeof(err)) < 0)
        status = cli_fail(status ? status : EXIT_RUN_FAILED, "%s", err);
    trace_run_report(&trace.run, stderr);
    trace_run_end(&trace.run);
    return status;
}

/* Copies the data file, if any, to the start of the data window. */
static int fill_data_window(const struct run_options *opts, struct cop_ram *ram,
                            struct cop_error *err)
{
    unsigned char *bytes;
    size_t size;

    if (!opts->data_file)
        return 0;
    bytes = cop_read_file(opts->data_file, COP_DATA_SIZE, &size, err);
    if (!bytes)
        return -1;
    memcpy(cop_ram_at(ram, COP_DATA_BASE, size), bytes, size);
    free(bytes);
    return 0;
}

/*
 * The guest RAM: anonymous, or the file F of --ram-file made by
 * open_output's rule and handed to QEMU through this process's descriptor.
 */
static int create_ram(struct cop_ram *ram, const char *path,
                      struct cop_error *err)
{
    struct safe_out safe;
    char why[512];
    int fd;

    if (!path)
        return cop_ram_create(ram, NULL, err);
    if (safe_out_open(&safe, path, SAFE_OUT_PLACE | SAFE_OUT_RDWR, why,
                      sizeof(why)) < 0) {
        cop_error_set(err, "%s", why);
        return -1;
    }
    fd = safe.fd;
    safe.fd = -1;               /* the RAM keeps it; only the folder goes */
    safe_out_close(&safe, NULL, 1, why, sizeof(why));
    return cop_ram_create_fd(ram, fd, path, err);
}

static int run(const struct run_options *opts)
{
    struct cop_image image;
    struct cop_ram ram;
    struct cop_argv command;
    struct cop_error err;
    int status;

    if (cop_image_read(opts->image, &image, &err) < 0)
        return cli_fail(EXIT_RUN_FAILED, "%s", err.message);
    if (create_ram(&ram, opts->ram_file, &err) < 0) {
        cop_image_release(&image);
        return cli_fail(EXIT_RUN_FAILED, "%s", err.message);
    }
    cop_argv_init(&command);
    if (cop_ram_load(&ram, &image, opts->argc, opts->argv, &err) < 0 ||
        fill_data_window(opts, &ram, &err) < 0)
        status = cli_fail(EXIT_RUN_FAILED, "%s", err.message);
    else if (build_command(opts, &ram, &command) < 0)
        status = cli_fail(EXIT_RUN_FAILED, "out of memory");
    else if (opts->sample_every && !opts->no_trace)
        status = run_traced(opts, &image, &ram, &command);
    else
        status = run_qemu(opts->image, &command, &ram, NULL);
    cop_argv_free(&command);
    cop_ram_close(&ram);
    cop_image_release(&image);
    return status;
}

int main(int argc, char **argv)
{
    struct run_options opts = {0};
    int status;

    cop_argv_init(&opts.qemu_args);
    status = parse_options(argc, argv, &opts);
    if (status < 0)
        status = run(&opts);
    cop_argv_free(&opts.qemu_args);
    return status;
}
