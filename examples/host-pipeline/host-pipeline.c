/*
 * host-pipeline — a host program that runs the three example coprocessor
 * programs, embedded in it with cop-embed, through libcop: more contexts
 * than copsim has slots, from several threads at once, the way a Cell
 * program ran SPE contexts from pthreads.
 *
 *   host-pipeline [--threads T] [--contexts N] [--frames F] [--rounds R]
 *                 [--console-dir DIR]
 *
 * Context i (0 <= i < N, default 16, run by thread i mod T, default 4)
 * runs, by i mod 4:
 *
 *   0, 1   pipeline: the host makes F frames (default 3) of its own, with a
 *          seed of its own, in the context's data window (frames.h), runs
 *          the program and checks every result record it wrote back
 *          against the same stages (examples/pipeline/stages.c) run here;
 *   2      kernels R (default 1): every kernels context must print the
 *          same line, and exit 0;
 *   3      overlays R: the same, and its line must report 7 overlay loads
 *          per round.
 *
 * Each context's console goes to DIR/context-I.txt (DIR: a temporary
 * directory $TMPDIR/host-pipeline-XXXXXX, removed at the end, unless
 * given), where the checks read it.  A temporary one is removed also when
 * SIGINT, SIGTERM, SIGHUP or SIGQUIT ends the program (a ^C, or coprof
 * passing on a signal it got): every thread blocks them, and one thread
 * waits for them (sigwait), removes the directory, and lets the signal
 * end the program as it would have.
 * One line per context on standard output says what it ran and what was
 * checked, then a summary; the exit status is 0 when every result is
 * right, 1 otherwise, 2 for bad options.
 */
#include "examples/pipeline/stages.h"
#include "examples/xorshift.h"
#include "common/cli.h"
#include "sdk/libcop.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const cop_program_handle_t kernels_program;
extern const cop_program_handle_t overlays_program;
extern const cop_program_handle_t pipeline_program;

#define FRAMES_OFFSET 64
#define LINE_MAX_BYTES 256

struct options {
    int threads;
    int contexts;
    unsigned frames;
    unsigned rounds;
    const char *console_dir;
};

/* A kernels or overlays line that every context of that program must
 * print, set by the first one to finish. */
struct reference_line {
    pthread_mutex_t lock;
    char text[LINE_MAX_BYTES];
};

struct job {
    const struct options *opts;
    int index;
    char console[4096];
    struct cop_stop_info stop;
    char verdict[LINE_MAX_BYTES];
};

static struct reference_line kernels_line = {PTHREAD_MUTEX_INITIALIZER, ""};
static struct reference_line overlays_line = {PTHREAD_MUTEX_INITIALIZER, ""};
static pthread_mutex_t stages_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t output_lock = PTHREAD_MUTEX_INITIALIZER;

static int fail(struct job *job, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(struct job *job, const char *format, ...)
{
    va_list args;

    va_start(args, format);
    vsnprintf(job->verdict, sizeof(job->verdict), format, args);
    va_end(args);
    return -1;
}

/* ---- pipeline contexts --------------------------------------------------- */

/* Frames of context `index`: a gradient at an angle of its own, a bright
 * bar that moves, and noise from a seed of its own. */
static void make_frames(uint8_t *frames, unsigned count, int index)
{
    uint32_t state = 0x2545f491u ^ (uint32_t)(index + 1) * 0x9e3779b9u;

    for (unsigned k = 0; k < count; k++)
        for (int y = 0; y < FRAME_HEIGHT; y++)
            for (int x = 0; x < FRAME_WIDTH; x++) {
                uint32_t v = (uint32_t)(x * (index % 3 + 1) + y * 2);
                if (x >= (int)(5 * k) % FRAME_WIDTH
                    && x < (int)(5 * k) % FRAME_WIDTH + 8)
                    v = 230;
                frames[(k * FRAME_HEIGHT + y) * FRAME_WIDTH + x] =
                    (uint8_t)(v + (xorshift32(&state) & 31));
            }
}

/* Writes the header and the frames into the data window. */
static int put_frames(struct job *job, uint8_t *window, size_t size)
{
    struct frames_header *header = (struct frames_header *)window;
    unsigned count = job->opts->frames;
    size_t needed = FRAMES_OFFSET + (size_t)count *
                    (FRAME_BYTES + sizeof(struct frame_result));

    if (needed > size)
        return fail(job, "%u frames need %zu bytes, the data window has %zu",
                    count, needed, size);
    memset(window, 0, needed);
    header->width = FRAME_WIDTH;
    header->height = FRAME_HEIGHT;
    header->frame_count = count;
    header->frames_offset = FRAMES_OFFSET;
    header->results_offset = FRAMES_OFFSET + count * FRAME_BYTES;
    make_frames(window + FRAMES_OFFSET, count, job->index);
    header->magic = FRAMES_MAGIC;
    return 0;
}

/* Checks every result record against the stages run on the host. */
static int check_results(struct job *job, const uint8_t *window)
{
    const struct frames_header *header = (const void *)window;
    const struct frame_result *results =
        (const void *)(window + header->results_offset);
    const uint8_t *frames = window + header->frames_offset;

    if (header->frames_done != job->opts->frames)
        return fail(job, "the program did %u of %u frames",
                    header->frames_done, job->opts->frames);
    for (unsigned k = 0; k < job->opts->frames; k++) {
        struct frame_result expected;

        pthread_mutex_lock(&stages_lock);   /* stages.c has static buffers */
        stages_process(frames + (size_t)k * FRAME_BYTES, k, &expected);
        pthread_mutex_unlock(&stages_lock);
        if (memcmp(&expected, &results[k], sizeof(expected)) != 0)
            return fail(job, "frame %u: got edges=%u threshold=%u runs=%u "
                        "checksum=%08x, expected edges=%u threshold=%u "
                        "runs=%u checksum=%08x", k, results[k].edges,
                        results[k].threshold, results[k].runs,
                        results[k].checksum, expected.edges,
                        expected.threshold, expected.runs, expected.checksum);
    }
    snprintf(job->verdict, sizeof(job->verdict), "%u frames checked",
             job->opts->frames);
    return 0;
}

/* ---- kernels and overlays contexts --------------------------------------- */

/* The last line of the context's console file. */
static int last_console_line(struct job *job, char *line, size_t len)
{
    FILE *file = fopen(job->console, "r");
    char buf[LINE_MAX_BYTES];

    line[0] = '\0';
    if (!file)
        return fail(job, "%s: %s", job->console, strerror(errno));
    while (fgets(buf, sizeof(buf), file))
        snprintf(line, len, "%s", buf);
    fclose(file);
    line[strcspn(line, "\n")] = '\0';
    if (!line[0])
        return fail(job, "%s: the program printed nothing", job->console);
    return 0;
}

/* The line must equal the first one any context of the program printed. */
static int same_as_others(struct job *job, struct reference_line *reference,
                          const char *line)
{
    int same;

    pthread_mutex_lock(&reference->lock);
    if (!reference->text[0])
        snprintf(reference->text, sizeof(reference->text), "%s", line);
    same = strcmp(reference->text, line) == 0;
    pthread_mutex_unlock(&reference->lock);
    if (!same)
        return fail(job, "printed '%s', another context '%s'", line,
                    reference->text);
    snprintf(job->verdict, sizeof(job->verdict), "%s", line);
    return 0;
}

static int check_kernels(struct job *job)
{
    char line[LINE_MAX_BYTES], expected[64];

    if (last_console_line(job, line, sizeof(line)) < 0)
        return -1;
    snprintf(expected, sizeof(expected), "kernels rounds=%u matrix=",
             job->opts->rounds);
    if (strncmp(line, expected, strlen(expected)) != 0)
        return fail(job, "unexpected output '%s'", line);
    return same_as_others(job, &kernels_line, line);
}

static int check_overlays(struct job *job)
{
    char line[LINE_MAX_BYTES], loads[32];

    if (last_console_line(job, line, sizeof(line)) < 0)
        return -1;
    snprintf(loads, sizeof(loads), " loads=%u ", 7 * job->opts->rounds);
    if (strncmp(line, "overlays rounds=", 16) != 0 || !strstr(line, loads))
        return fail(job, "unexpected output '%s' (expected%s overlay loads)",
                    line, loads);
    return same_as_others(job, &overlays_line, line);
}

/* ---- one context --------------------------------------------------------- */

static const cop_program_handle_t *program_of(int index)
{
    switch (index % 4) {
    case 2:
        return &kernels_program;
    case 3:
        return &overlays_program;
    }
    return &pipeline_program;
}

/* Runs context job->index and checks its results; 0 when all is right. */
static int run_job(struct job *job)
{
    const cop_program_handle_t *program = program_of(job->index);
    cop_context_t *ctx = cop_context_create();
    char rounds[16];
    char *argv[] = {(char *)program->name, rounds, NULL};
    size_t size;
    uint8_t *window;
    int status = -1;

    snprintf(rounds, sizeof(rounds), "%u", job->opts->rounds);
    if (!ctx || cop_context_load(ctx, program) < 0
        || cop_context_set_console_file(ctx, job->console) < 0) {
        fail(job, "%s", cop_last_error());
        cop_context_destroy(ctx);
        return -1;
    }
    window = cop_context_data(ctx, &size);
    if (program == &pipeline_program && put_frames(job, window, size) < 0)
        goto done;
    if (cop_context_run(ctx, program == &pipeline_program ? 1 : 2, argv,
                        &job->stop) < 0) {
        fail(job, "%s", cop_last_error());
        goto done;
    }
    if (job->stop.reason != COP_STOP_EXIT || job->stop.status != 0) {
        fail(job, "%s (status %d)", job->stop.reason == COP_STOP_FAULT
             ? job->stop.fault : "exited", job->stop.status);
        goto done;
    }
    if (program == &pipeline_program)
        status = check_results(job, window);
    else if (program == &kernels_program)
        status = check_kernels(job);
    else
        status = check_overlays(job);
done:
    if (cop_context_destroy(ctx) < 0 && status == 0)
        status = fail(job, "%s", cop_last_error());
    return status;
}

static void report(const struct job *job, int ok)
{
    pthread_mutex_lock(&output_lock);
    printf("context %d %-8s %s binds=%u preemptions=%u: %s\n", job->index,
           program_of(job->index)->name, ok ? "ok" : "FAILED",
           job->stop.binds, job->stop.preemptions, job->verdict);
    fflush(stdout);
    pthread_mutex_unlock(&output_lock);
}

struct worker {
    const struct options *opts;
    int first;
    int failures;
    pthread_t thread;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    for (int i = w->first; i < w->opts->contexts; i += w->opts->threads) {
        struct job job;
        int ok;

        memset(&job, 0, sizeof(job));
        job.opts = w->opts;
        job.index = i;
        snprintf(job.console, sizeof(job.console), "%s/context-%d.txt",
                 w->opts->console_dir, i);
        ok = run_job(&job) == 0;
        report(&job, ok);
        w->failures += !ok;
    }
    return NULL;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *out)
{
    fprintf(out,
        "usage: host-pipeline [--threads T] [--contexts N] [--frames F]\n"
        "                     [--rounds R] [--console-dir DIR]\n"
        "\n"
        "Runs N (default 16) coprocessor contexts from T (default 4) threads\n"
        "through libcop: the pipeline example on F (default 3) frames of its\n"
        "own in the data window, and the kernels and overlays examples for R\n"
        "(default 1) rounds, then checks every result.  Consoles go to\n"
        "DIR/context-I.txt (default: a temporary directory in $TMPDIR,\n"
        "else /tmp, removed).\n"
        "Exit status 0 when every result is right, 1 if not, 2 for bad\n"
        "options.\n");
}

static int positive(const char *text, int *value)
{
    char *end;
    long n = strtol(text, &end, 10);

    if (*text == '\0' || *end != '\0' || n < 1 || n > 100000)
        return -1;
    *value = (int)n;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *opts)
{
    static const struct cli_option long_options[] = {
        {'t', "threads", required_argument, 0},
        {'n', "contexts", required_argument, 0},
        {'f', "frames", required_argument, 0},
        {'r', "rounds", required_argument, 0},
        {'d', "console-dir", required_argument, 0},
        {'h', "help", no_argument, 0},
        CLI_END,
    };
    struct cli_parser parser;
    int c, n, bad = 0;

    *opts = (struct options){.threads = 4, .contexts = 16, .frames = 3,
                             .rounds = 1};
    cli_parser_init(&parser, long_options, "");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        switch (c) {
        case 't':
            bad |= positive(optarg, &opts->threads);
            break;
        case 'n':
            bad |= positive(optarg, &opts->contexts);
            break;
        case 'f':
            bad |= positive(optarg, &n);
            opts->frames = (unsigned)n;
            break;
        case 'r':
            bad |= positive(optarg, &n);
            opts->rounds = (unsigned)n;
            break;
        case 'd':
            opts->console_dir = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            bad = 1;
        }
    }
    if (bad || optind != argc) {
        fprintf(stderr, "host-pipeline: bad arguments (counts are numbers "
                "from 1 to 100000; see --help)\n");
        return -1;
    }
    return 0;
}

/* Removes the temporary console directory and what is in it. */
static void remove_console_dir(const struct options *opts)
{
    char path[4096];

    for (int i = 0; i < opts->contexts; i++) {
        snprintf(path, sizeof(path), "%s/context-%d.txt", opts->console_dir, i);
        unlink(path);
    }
    rmdir(opts->console_dir);
}

static sigset_t ending_signals;     /* SIGINT, SIGTERM, SIGHUP, SIGQUIT */

/* Waits for an ending signal, removes the temporary console directory,
 * then ends the program by that signal. */
static void *remove_on_signal(void *arg)
{
    int sig;

    if (sigwait(&ending_signals, &sig) != 0)
        return NULL;
    remove_console_dir(arg);
    signal(sig, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, &ending_signals, NULL);
    raise(sig);
    return NULL;
}

/* The temporary console directory goes when a signal ends the program:
 * the signals are blocked here (the workers inherit it) for one thread. */
static void remove_on_signals(const struct options *opts)
{
    pthread_t thread;

    sigemptyset(&ending_signals);
    sigaddset(&ending_signals, SIGINT);
    sigaddset(&ending_signals, SIGTERM);
    sigaddset(&ending_signals, SIGHUP);
    sigaddset(&ending_signals, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &ending_signals, NULL);
    if (pthread_create(&thread, NULL, remove_on_signal, (void *)opts) == 0)
        pthread_detach(thread);
    else
        pthread_sigmask(SIG_UNBLOCK, &ending_signals, NULL);
}

int main(int argc, char **argv)
{
    char temp_dir[PATH_MAX];
    struct options opts;
    struct worker *workers;
    int failures = 0, temporary = 0;

    if (parse_options(argc, argv, &opts) < 0)
        return 2;
    if (!opts.console_dir) {
        if (cli_make_temp_dir(temp_dir, sizeof(temp_dir), "host-pipeline",
                              PATH_MAX / 2) < 0) {
            fprintf(stderr, "host-pipeline: %s: %s\n", temp_dir,
                    strerror(errno));
            return 1;
        }
        opts.console_dir = temp_dir;
        temporary = 1;
        remove_on_signals(&opts);
    }
    workers = calloc((size_t)opts.threads, sizeof(*workers));
    if (!workers)
        return 1;
    for (int t = 0; t < opts.threads; t++) {
        workers[t] = (struct worker){.opts = &opts, .first = t};
        pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]);
    }
    for (int t = 0; t < opts.threads; t++) {
        pthread_join(workers[t].thread, NULL);
        failures += workers[t].failures;
    }
    free(workers);
    printf("host-pipeline: %d contexts from %d threads, %d ok, %d failed\n",
           opts.contexts, opts.threads, opts.contexts - failures, failures);
    if (temporary)
        remove_console_dir(&opts);
    return failures ? 1 : 0;
}
