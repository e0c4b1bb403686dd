/*
 * coptrace — create, inspect and use trace-unit register files.
 *
 *   coptrace create FILE [--slots N] [--contexts N] [--fifo-depth N]
 *                        [--ls-base ADDR] [--ls-size BYTES] [--stack-depth N]
 *   coptrace show FILE
 *   coptrace run [--regs FILE] [--context C] [--slot S] --sample-every N
 *                [--reference] [--samples-out FILE] [--fifo-depth N]
 *                [--no-drain] [--exact-counts FILE] [--ram FILE]
 *                -- EMULATOR [ARGS...]
 *
 * `run` is the trace unit's simple consumer for any emulator command line:
 * it binds the context to the slot, loads the slot's LFSR for one capture
 * every N instructions, appends the plugin's -plugin option to the command,
 * drains the slot's FIFO while the emulator runs and writes one captured
 * local-store address per line.  On exit it prints the slot's counters for
 * the run on stderr and exits with the emulator's status.  Without --regs it
 * uses a private register file that it removes afterwards.
 */
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"
#include "common/cli.h"
#include "common/safe-file.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_USAGE 2

static const char *const context_status_names[] = {
    "idle", "running", "held", "exited",
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: coptrace create FILE [--slots N] [--contexts N]\n"
        "                [--fifo-depth N] [--ls-base ADDR] [--ls-size BYTES]\n"
        "                [--stack-depth N]\n"
        "       coptrace show FILE\n"
        "       coptrace run [--regs FILE] [--context C] [--slot S]\n"
        "                --sample-every N [--reference] [--samples-out FILE]\n"
        "                [--fifo-depth N] [--no-drain] [--exact-counts FILE]\n"
        "                [--ram FILE] [--event SPU_CYCLES|SPU_INSTRUCTIONS]\n"
        "                -- EMULATOR [ARGS...]\n"
        "\n"
        "Creates, shows and uses the register file of the coprocessor trace\n"
        "unit (docs/trace-unit.md): the shared file through which the\n"
        "libcoptrace.so QEMU plugin, copsim and the driver exchange LFSR\n"
        "settings, counters and captured PCs.\n"
        "\n"
        "create  makes a new file: by default %u slots, %u contexts,\n"
        "        %u-entry FIFOs, the local store at 0x%08x, 0x%x bytes,\n"
        "        no call-stack area.\n"
        "        --stack-depth N  a call-stack area: one record of N frames\n"
        "                      (at most %u) per FIFO entry, as copsim's\n"
        "                      --call-graph makes\n"
        "show    prints the header, every slot and every context in use.\n"
        "run     runs EMULATOR with the trace unit attached as context C on\n"
        "        slot S (default 0 and 0), one capture every N ticks of the\n"
        "        event: SPU_CYCLES (the timing model's cycles, the default)\n"
        "        or SPU_INSTRUCTIONS (retired instructions).\n"
        "        It drains the FIFO while the emulator runs, writes the\n"
        "        captured local-store addresses (hex, capture order, one per\n"
        "        line) to --samples-out, prints \"captures=A dropped=B\n"
        "        instructions=C outside_ls=D\" for the run on stderr and\n"
        "        exits with the emulator's status.\n"
        "        --reference   the plugin's per-instruction reference mode\n"
        "        --no-drain    drain only after the emulator ended (a stalled\n"
        "                      consumer: the FIFO keeps its oldest entries)\n"
        "        --fifo-depth  the FIFO of the private file used without\n"
        "                      --regs\n"
        "        --exact-counts FILE  also count every instruction exactly\n"
        "                      into FILE (the plugin's counts=)\n"
        "        --ram FILE    the emulator's guest RAM file (the plugin's\n"
        "                      ram=): on a slot stub's RAM the exact\n"
        "                      counts are kept per context\n"
        "\n"
        "The plugin is found beside this program (../lib) or in\n"
        "$COPROF_TRACE_PLUGIN.  Errors print one line and exit with\n"
        "status 2.\n",
        TRACE_DEFAULT_SLOTS, TRACE_DEFAULT_CONTEXTS, TRACE_DEFAULT_FIFO_DEPTH,
        TRACE_DEFAULT_LS_BASE, TRACE_DEFAULT_LS_SIZE, TRACE_MAX_STACK_DEPTH);
}

/* Parses a whole-string unsigned number (decimal, or hex with 0x). */
static int parse_u32(const char *text, uint32_t *value)
{
    uint64_t v;

    if (lfsr_parse_value(text, &v) < 0 || v > UINT32_MAX)
        return -1;
    *value = (uint32_t)v;
    return 0;
}

/* ---- create ------------------------------------------------------------- */

static int cmd_create(int argc, char **argv)
{
    static const struct cli_option options[] = {
        { 0, "slots", required_argument, 's' },
        { 0, "contexts", required_argument, 'c' },
        { 0, "fifo-depth", required_argument, 'd' },
        { 0, "ls-base", required_argument, 'b' },
        { 0, "ls-size", required_argument, 'z' },
        { 0, "stack-depth", required_argument, 'k' },
        CLI_END,
    };
    struct trace_geometry geo;
    struct trace_unit *unit;
    char err[512];
    struct cli_parser parser;
    int c;

    trace_geometry_default(&geo);
    cli_parser_init(&parser, options, "");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        uint32_t *field = c == 's' ? &geo.n_slots
                        : c == 'c' ? &geo.n_contexts
                        : c == 'd' ? &geo.fifo_depth
                        : c == 'b' ? &geo.ls_base
                        : c == 'z' ? &geo.ls_size
                        : c == 'k' ? &geo.stack_depth : NULL;

        if (!field)
            return EXIT_USAGE;
        if (parse_u32(optarg, field) < 0)
            return cli_fail(EXIT_USAGE, "bad number '%s'", optarg);
    }
    if (optind != argc - 1)
        return cli_fail(EXIT_USAGE, "create needs exactly one FILE");
    unit = trace_unit_create(argv[optind], &geo, err, sizeof(err));
    if (!unit) {
        cli_fail(0, "%s", err);
        return EXIT_USAGE;
    }
    trace_unit_close(unit, 0);
    return 0;
}

/* ---- show --------------------------------------------------------------- */

static void show_slot(const struct trace_unit *unit, uint32_t i)
{
    struct trace_slot_status s;

    trace_slot_status(unit, i, &s);
    printf("slot %u: context ", i);
    if (s.bound_context == TRACE_NONE)
        printf("none");
    else
        printf("%u", s.bound_context);
    printf(" programmed=0x%06x lfsr=0x%06x cycles=%" PRIu64 " captures=%"
           PRIu64 " dropped=%" PRIu64 " outside_ls=%" PRIu64 " queued=%u\n",
           s.programmed_value, s.lfsr_state, s.cycles, s.captures, s.dropped,
           s.outside, s.queued);
}

static void show_context(const struct trace_unit *unit, uint32_t i)
{
    const struct trace_regs_context *ctx = trace_unit_context(unit, i);
    uint32_t status = __atomic_load_n(&ctx->status, __ATOMIC_ACQUIRE);
    uint32_t slot = __atomic_load_n(&ctx->slot, __ATOMIC_ACQUIRE);
    uint32_t gate = __atomic_load_n(&ctx->gate, __ATOMIC_ACQUIRE);

    if (status == TRACE_CONTEXT_IDLE && slot == TRACE_NONE && gate == 0)
        return;
    printf("context %u: slot ", i);
    if (slot == TRACE_NONE)
        printf("none");
    else
        printf("%u", slot);
    printf(" status=%s gate=%u(%s) ack=%u pid=%d mode=%s instructions=%"
           PRIu64 " guards=%u@0x%05x\n",
           status < 4 ? context_status_names[status] : "corrupt", gate,
           trace_gate_is_open(gate) ? "open" : "closed",
           __atomic_load_n(&ctx->ack, __ATOMIC_ACQUIRE),
           (int)__atomic_load_n(&ctx->pid, __ATOMIC_ACQUIRE),
           ctx->mode == TRACE_MODE_REFERENCE ? "reference"
           : ctx->mode == TRACE_MODE_FAST ? "fast" : "none",
           __atomic_load_n(&ctx->instructions, __ATOMIC_ACQUIRE),
           __atomic_load_n(&ctx->guard_count, __ATOMIC_ACQUIRE),
           __atomic_load_n(&ctx->guard_ls_offset, __ATOMIC_ACQUIRE));
}

static int cmd_show(int argc, char **argv)
{
    const struct trace_regs_header *h;
    struct trace_unit *unit;
    char err[512];

    if (argc != 2)
        return cli_fail(EXIT_USAGE, "show needs exactly one FILE");
    unit = trace_unit_open(argv[1], err, sizeof(err));
    if (!unit) {
        cli_fail(0, "%s", err);
        return EXIT_USAGE;
    }
    h = unit->header;
    printf("%s: version %u, %u slots, %u contexts, fifo depth %u, local "
           "store 0x%08x+0x%x, controller pid %d", unit->path, h->version,
           h->n_slots, h->n_contexts, h->fifo_depth, h->ls_base, h->ls_size,
           (int)h->controller_pid);
    if (h->stack_depth)
        printf(", call stacks of %u frames", h->stack_depth);
    putchar('\n');
    for (uint32_t i = 0; i < h->n_slots; i++)
        show_slot(unit, i);
    for (uint32_t i = 0; i < h->n_contexts; i++)
        show_context(unit, i);
    trace_unit_close(unit, 0);
    return 0;
}

/* ---- run ---------------------------------------------------------------- */

struct run_options {
    const char *regs;
    const char *samples_out;
    const char *exact_counts;
    const char *ram;
    uint32_t context;
    uint32_t slot;
    uint32_t count;
    uint32_t fifo_depth;
    struct trace_sampling sampling; /* --event; drop, no dither */
    int reference;
    int drain;
    char **command;
};

static int parse_run(int argc, char **argv, struct run_options *opt)
{
    static const struct cli_option options[] = {
        { 0, "regs", required_argument, 'r' },
        { 0, "context", required_argument, 'c' },
        { 0, "slot", required_argument, 's' },
        { 0, "sample-every", required_argument, 'n' },
        { 0, "reference", no_argument, 'R' },
        { 0, "samples-out", required_argument, 'o' },
        { 0, "fifo-depth", required_argument, 'd' },
        { 0, "no-drain", no_argument, 'D' },
        { 0, "exact-counts", required_argument, 'x' },
        { 0, "ram", required_argument, 'm' },
        { 0, "event", required_argument, 'e' },
        CLI_END,
    };
    struct cli_parser parser;
    int c;

    memset(opt, 0, sizeof(*opt));
    opt->drain = 1;
    opt->fifo_depth = TRACE_DEFAULT_FIFO_DEPTH;
    cli_parser_init(&parser, options, "+");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        switch (c) {
        case 'r': opt->regs = optarg; break;
        case 'o': opt->samples_out = optarg; break;
        case 'R': opt->reference = 1; break;
        case 'D': opt->drain = 0; break;
        case 'x': opt->exact_counts = optarg; break;
        case 'm': opt->ram = optarg; break;
        case 'e':
            if (trace_parse_event(optarg, &opt->sampling.event) < 0)
                return cli_fail(EXIT_USAGE, "--event '%s' is not "
                                TRACE_EVENT_NAMES, optarg);
            break;
        case 'c':
        case 's':
        case 'd':
            if (parse_u32(optarg, c == 'c' ? &opt->context
                                  : c == 's' ? &opt->slot
                                             : &opt->fifo_depth) < 0)
                return cli_fail(EXIT_USAGE, "bad number '%s'", optarg);
            break;
        case 'n':
            if (parse_u32(optarg, &opt->count) < 0 || opt->count < 1
                || opt->count > LFSR_PERIOD)
                return cli_fail(EXIT_USAGE, "--sample-every '%s' is outside "
                                "1..%u", optarg, LFSR_PERIOD);
            break;
        default:
            return EXIT_USAGE;
        }
    }
    if (!opt->count)
        return cli_fail(EXIT_USAGE, "run needs --sample-every N");
    if (optind >= argc)
        return cli_fail(EXIT_USAGE, "run needs an emulator command after --");
    opt->command = argv + optind;
    return 0;
}

static pid_t spawn(char **command, const char *plugin_arg)
{
    int n = 0;
    char **argv;
    pid_t pid;

    while (command[n])
        n++;
    argv = calloc((size_t)n + 3, sizeof(*argv));
    if (!argv)
        return -1;
    memcpy(argv, command, (size_t)n * sizeof(*argv));
    argv[n] = "-plugin";
    argv[n + 1] = (char *)plugin_arg;
    pid = fork();
    if (pid == 0) {
        execvp(argv[0], argv);
        cli_fail(0, "cannot run %s: %s", argv[0],
                strerror(errno));
        _exit(127);
    }
    free(argv);
    return pid;
}

static int exit_code_of(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 1;
}

/* Runs the emulator with the consumer; returns its exit code. */
static int run_emulator(struct trace_run *run, const struct run_options *opt,
                        FILE *samples)
{
    char err[512];
    int status = 0;
    pid_t child = spawn(opt->command, run->plugin_arg);

    if (child < 0) {
        cli_fail(0, "cannot start %s: %s", opt->command[0],
                strerror(errno));
        return EXIT_USAGE;
    }
    if (trace_run_consume(run, child, opt->drain, samples, NULL, NULL, err,
                          sizeof(err)) < 0)
        cli_fail(0, "%s", err);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR)
        continue;
    trace_run_report(run, stderr);
    return exit_code_of(status);
}

static int cmd_run(int argc, char **argv)
{
    struct trace_geometry geo;
    struct run_options opt;
    struct trace_run run;
    struct safe_out counts = { .fd = -1, .dirfd = -1 };
    struct safe_out samples_out = { .fd = -1, .dirfd = -1 };
    FILE *samples = NULL;
    char err[512], counts_path[64];
    int rc;

    rc = parse_run(argc, argv, &opt);
    if (rc)
        return rc;
    trace_geometry_default(&geo);
    geo.fifo_depth = opt.fifo_depth;
    /* the counts and samples files by safe-file.h's rule; the plugin
     * appends to the counts through this process's descriptor */
    if (opt.exact_counts
        && safe_out_open(&counts, opt.exact_counts, SAFE_OUT_PLACE, err,
                         sizeof(err)) < 0) {
        cli_fail(0, "%s", err);
        return EXIT_USAGE;
    }
    safe_out_fd_path(&counts, counts_path, sizeof(counts_path));
    if (trace_run_start(&run, opt.regs, &geo, opt.context, opt.slot,
                        opt.count, opt.reference ? TRACE_MODE_REFERENCE
                                                 : TRACE_MODE_FAST,
                        opt.exact_counts ? counts_path : NULL,
                        opt.ram ? &(struct trace_watch){ opt.ram, 0, 0 }
                                : NULL,
                        &opt.sampling, err, sizeof(err)) < 0) {
        cli_fail(0, "%s", err);
        safe_out_close(&counts, NULL, 1, err, sizeof(err));
        return EXIT_USAGE;
    }
    if (opt.samples_out
        && (safe_out_open(&samples_out, opt.samples_out, SAFE_OUT_PLACE, err,
                          sizeof(err)) < 0
            || !safe_out_stdio(&samples_out, &samples))) {
        if (samples_out.fd >= 0)
            snprintf(err, sizeof(err), "%s: %s", opt.samples_out,
                     strerror(errno));
        cli_fail(0, "%s", err);
        safe_out_close(&samples_out, NULL, 1, err, sizeof(err));
        safe_out_close(&counts, NULL, 1, err, sizeof(err));
        trace_run_end(&run);
        return EXIT_USAGE;
    }
    rc = run_emulator(&run, &opt, samples);
    if (samples && safe_out_close(&samples_out, samples, 1, err,
                                  sizeof(err)) < 0) {
        cli_fail(0, "write failed: %s", err);
        rc = rc ? rc : EXIT_USAGE;
    }
    if (safe_out_close(&counts, NULL, 1, err, sizeof(err)) < 0) {
        cli_fail(0, "write failed: %s", err);
        rc = rc ? rc : EXIT_USAGE;
    }
    trace_run_end(&run);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    if (argc < 2)
        return cli_fail(EXIT_USAGE, "missing command: create, show or run "
                        "(see coptrace --help)");
    if (!strcmp(argv[1], "create"))
        return cmd_create(argc - 1, argv + 1);
    if (!strcmp(argv[1], "show"))
        return cmd_show(argc - 1, argv + 1);
    if (!strcmp(argv[1], "run"))
        return cmd_run(argc - 1, argv + 1);
    return cli_fail(EXIT_USAGE, "unknown command '%s' (see coptrace --help)",
                    argv[1]);
}
