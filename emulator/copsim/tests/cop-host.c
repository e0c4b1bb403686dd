/*
 * cop-host.c — a host program for copsim's tests, built on libcop.
 *
 *   cop-host [OPTIONS] SOURCE [ARGS...]
 *
 * SOURCE says where the image comes from:
 *
 *   embedded     the copsim-probe image embedded in this executable
 *                (cop-embed), object-id in its read-only data
 *   library      the same image embedded in libcop-host-probe.so, which
 *                this program links, so the mapping has a page offset
 *   anonymous    the embedded image copied into heap memory first
 *   FILE         an image file (cop_context_load_file)
 *
 * It runs --contexts N contexts (default 1) from --threads T threads
 * (default 1), each loading SOURCE and running it with argv = {SOURCE,
 * ARGS...}, and prints
 * one line per context:
 *
 *   context=ID index=I object=0xADDR path=P offset=O anonymous=A
 *   hash=H status=S reason=exit|fault instructions=N binds=B
 *   preemptions=P data=ok|bad|- fault=TEXT
 *
 * --rendezvous (for copsim-probe's "rendezvous N") starts the work of
 * every context at once: it sets data word 0 of every context once every
 * one of them has set its data word 1, i.e. has run on a slot.
 * --data-words N fills the first N words of each context's data window
 * with index * 100000 + i before the run and checks afterwards that the
 * program (copsim-probe's "data N") left data[i] * 3 + 1 there.
 * --console-file PATTERN sends each context's console to a file, %d in
 * PATTERN standing for its index; --cycle-limit N limits each run.
 * --all-live creates, loads and fills every context before any runs, so
 * that all N are alive at once, and destroys them only once every run
 * has ended (it raises the open-files limit: a context is a connection).
 * --time prints, after each context's line, its round trip (create, load,
 * run and destroy through libcop, CLOCK_MONOTONIC) as
 * "round-trip index=I us=N" (not with --all-live, which creates them all
 * first).
 * The exit status is 0 when every context ran, exited 0 and (with
 * --data-words) left the right data; 1 otherwise.  Errors from libcop are
 * printed as "cop-host: context I: REASON".
 */
#include "sdk/libcop.h"

#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

extern const cop_program_handle_t copsim_probe;
extern const cop_program_handle_t copsim_probe_in_library;

struct options {
    int threads;
    int contexts;
    unsigned data_words;
    const char *console_pattern;
    uint64_t cycle_limit;
    int rendezvous;
    int all_live;
    int timed;
    const char *source;
    int argc;
    char **argv;
};

struct worker {
    const struct options *opts;
    cop_context_t **live;       /* --all-live: every context, created */
    char *run_failed;           /* per context: its run failed (said) */
    int first;                  /* contexts first, first + threads, ... */
    int failures;
    pthread_t thread;
};

static pthread_mutex_t output_lock = PTHREAD_MUTEX_INITIALIZER;

/* The data windows of the contexts that take part in the rendezvous. */
static struct {
    pthread_mutex_t lock;
    int count;
    uint32_t **windows;
} meeting = {PTHREAD_MUTEX_INITIALIZER, 0, NULL};

static void join_meeting(cop_context_t *ctx)
{
    pthread_mutex_lock(&meeting.lock);
    meeting.windows[meeting.count++] = cop_context_data(ctx, NULL);
    pthread_mutex_unlock(&meeting.lock);
}

/* Waits until all n contexts have joined and run, then lets them go. */
static void hold_meeting(int n)
{
    for (;;) {
        int arrived = 0;

        pthread_mutex_lock(&meeting.lock);
        for (int i = 0; i < meeting.count; i++)
            arrived += __atomic_load_n(&meeting.windows[i][1],
                                       __ATOMIC_ACQUIRE) == 1;
        if (arrived == n)
            for (int i = 0; i < n; i++)
                __atomic_store_n(&meeting.windows[i][0], 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&meeting.lock);
        if (arrived == n)
            return;
        usleep(1000);
    }
}

/* Loads SOURCE into ctx; anonymous images go to *copy (freed later). */
static int load_source(cop_context_t *ctx, const char *source, void **copy)
{
    cop_program_handle_t handle;

    if (strcmp(source, "embedded") == 0)
        return cop_context_load(ctx, &copsim_probe);
    if (strcmp(source, "library") == 0)
        return cop_context_load(ctx, &copsim_probe_in_library);
    if (strcmp(source, "anonymous") == 0) {
        handle = copsim_probe;
        *copy = malloc(handle.image_size);
        if (!*copy)
            return -1;
        memcpy(*copy, copsim_probe.elf_image, handle.image_size);
        handle.elf_image = *copy;
        return cop_context_load(ctx, &handle);
    }
    return cop_context_load_file(ctx, source);
}

static void fill_data(cop_context_t *ctx, int index, unsigned words)
{
    uint32_t *data = cop_context_data(ctx, NULL);

    for (unsigned i = 0; i < words; i++)
        data[i] = (uint32_t)index * 100000u + i;
}

static const char *check_data(cop_context_t *ctx, int index, unsigned words)
{
    const uint32_t *data = cop_context_data(ctx, NULL);

    if (words == 0)
        return "-";
    for (unsigned i = 0; i < words; i++)
        if (data[i] != ((uint32_t)index * 100000u + i) * 3u + 1u)
            return "bad";
    return "ok";
}

static int set_console(cop_context_t *ctx, const char *pattern, int index)
{
    char path[4096];

    if (!pattern)
        return 0;
    snprintf(path, sizeof(path), pattern, index);
    return cop_context_set_console_file(ctx, path);
}

static void report(int index, const cop_context_t *ctx,
                   const struct cop_stop_info *stop, const char *data)
{
    struct cop_context_image image;

    cop_context_image(ctx, &image);
    pthread_mutex_lock(&output_lock);
    printf("context=%" PRIu64 " index=%d path=%s offset=%" PRIu64
           " anonymous=%d hash=%016" PRIx64 " status=%d reason=%s "
           "instructions=%" PRIu64 " binds=%u preemptions=%u data=%s "
           "fault=%s\n", cop_context_id(ctx), index, image.path, image.offset,
           image.anonymous, image.hash, stop->status,
           stop->reason == COP_STOP_EXIT ? "exit" : "fault",
           stop->instructions, stop->binds, stop->preemptions, data,
           stop->fault);
    fflush(stdout);
    pthread_mutex_unlock(&output_lock);
}

/* Creates and loads context number index, its data filled (an anonymous
 * image's copy in *copy, to free once it is destroyed); NULL after saying
 * why. */
static cop_context_t *create_one(const struct options *opts, int index,
                                 void **copy)
{
    cop_context_t *ctx = cop_context_create();

    *copy = NULL;
    if (!ctx || load_source(ctx, opts->source, copy) < 0
        || set_console(ctx, opts->console_pattern, index) < 0) {
        fprintf(stderr, "cop-host: context %d: %s\n", index, cop_last_error());
        cop_context_destroy(ctx);
        free(*copy);
        return NULL;
    }
    fill_data(ctx, index, opts->data_words);
    return ctx;
}

/* Runs a created context and reports it: 0 when it exited 0 with the
 * right data, 1 when not, -1 when the run failed (said why). */
static int run_created(const struct options *opts, cop_context_t *ctx,
                       int index)
{
    struct cop_stop_info stop;
    const char *data;

    if (opts->rendezvous)
        join_meeting(ctx);
    cop_context_set_cycle_limit(ctx, opts->cycle_limit);
    if (cop_context_run(ctx, opts->argc, opts->argv, &stop) < 0) {
        fprintf(stderr, "cop-host: context %d: %s\n", index, cop_last_error());
        return -1;
    }
    data = check_data(ctx, index, opts->data_words);
    report(index, ctx, &stop, data);
    return stop.reason == COP_STOP_EXIT && stop.status == 0
           && strcmp(data, "bad") != 0 ? 0 : 1;
}

/* Destroys a context; after a failed run (quiet) without a word, since
 * its connection's end was said. */
static int destroy_one(cop_context_t *ctx, int index, int quiet)
{
    if (cop_context_destroy(ctx) < 0 && !quiet) {
        fprintf(stderr, "cop-host: context %d: %s\n", index, cop_last_error());
        return 1;
    }
    return 0;
}

static uint64_t monotonic_us(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
}

/* Creates, loads, runs and destroys context number index (--time: and
 * says how long that took). */
static int run_one(const struct options *opts, int index)
{
    uint64_t start = monotonic_us();
    void *copy;
    cop_context_t *ctx = create_one(opts, index, &copy);
    int failed;

    if (!ctx)
        return 1;
    failed = run_created(opts, ctx, index);
    if (destroy_one(ctx, index, failed < 0))
        failed = 1;
    free(copy);
    if (opts->timed && !failed) {
        pthread_mutex_lock(&output_lock);
        printf("round-trip index=%d us=%" PRIu64 "\n", index,
               monotonic_us() - start);
        fflush(stdout);
        pthread_mutex_unlock(&output_lock);
    }
    return failed ? 1 : 0;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    for (int i = w->first; i < w->opts->contexts; i += w->opts->threads) {
        int failed = w->live ? run_created(w->opts, w->live[i], i)
                             : run_one(w->opts, i);

        if (failed < 0)
            w->run_failed[i] = 1;
        w->failures += failed != 0;
    }
    return NULL;
}

/* --all-live: every context created before any runs; NULL (having said
 * why) when one cannot be. */
static cop_context_t **create_all(const struct options *opts, void **copies)
{
    cop_context_t **live = calloc((size_t)opts->contexts, sizeof(*live));
    struct rlimit limit;

    if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
    for (int i = 0; live && i < opts->contexts; i++)
        if (!(live[i] = create_one(opts, i, &copies[i]))) {
            for (int j = 0; j < i; j++) {
                destroy_one(live[j], j, 0);
                free(copies[j]);
            }
            free(live);
            return NULL;
        }
    return live;
}

static void usage(FILE *out)
{
    fprintf(out,
        "usage: cop-host [--threads T] [--contexts N] [--data-words N]\n"
        "                [--console-file PATTERN] [--cycle-limit N]\n"
        "                [--rendezvous] [--all-live] [--time]\n"
        "                embedded|library|anonymous|IMAGE [ARGS...]\n");
}

static int parse_options(int argc, char **argv, struct options *opts)
{
    static const struct option long_options[] = {
        {"threads", required_argument, NULL, 't'},
        {"contexts", required_argument, NULL, 'n'},
        {"data-words", required_argument, NULL, 'd'},
        {"console-file", required_argument, NULL, 'c'},
        {"cycle-limit", required_argument, NULL, 'l'},
        {"rendezvous", no_argument, NULL, 'r'},
        {"all-live", no_argument, NULL, 'a'},
        {"time", no_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    memset(opts, 0, sizeof(*opts));
    opts->threads = 1;
    opts->contexts = 1;
    while ((c = getopt_long(argc, argv, "+t:n:d:c:l:raTh", long_options,
                            NULL)) != -1) {
        switch (c) {
        case 't':
            opts->threads = atoi(optarg);
            break;
        case 'n':
            opts->contexts = atoi(optarg);
            break;
        case 'd':
            opts->data_words = (unsigned)strtoul(optarg, NULL, 0);
            break;
        case 'c':
            opts->console_pattern = optarg;
            break;
        case 'l':
            opts->cycle_limit = strtoull(optarg, NULL, 0);
            break;
        case 'r':
            opts->rendezvous = 1;
            break;
        case 'a':
            opts->all_live = 1;
            break;
        case 'T':
            opts->timed = 1;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return -1;
        }
    }
    if (optind >= argc || opts->threads < 1 || opts->contexts < 1
        || (opts->rendezvous && opts->threads != opts->contexts))
        return -1;
    opts->source = argv[optind];
    opts->argc = argc - optind;     /* argv[0] of the program is SOURCE */
    opts->argv = argv + optind;
    return 0;
}

int main(int argc, char **argv)
{
    struct options opts;
    struct worker *workers;
    cop_context_t **live = NULL;
    void **copies;
    char *run_failed;
    int failures = 0;

    if (parse_options(argc, argv, &opts) < 0) {
        usage(stderr);
        return 2;
    }
    copies = calloc((size_t)opts.contexts, sizeof(*copies));
    run_failed = calloc((size_t)opts.contexts, 1);
    if (opts.all_live && !(live = create_all(&opts, copies))) {
        free(copies);
        free(run_failed);
        return 1;
    }
    workers = calloc((size_t)opts.threads, sizeof(*workers));
    meeting.windows = calloc((size_t)opts.contexts, sizeof(*meeting.windows));
    for (int t = 0; t < opts.threads; t++) {
        workers[t].opts = &opts;
        workers[t].first = t;
        workers[t].live = live;
        workers[t].run_failed = run_failed;
        pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]);
    }
    if (opts.rendezvous)
        hold_meeting(opts.contexts);
    for (int t = 0; t < opts.threads; t++) {
        pthread_join(workers[t].thread, NULL);
        failures += workers[t].failures;
    }
    for (int i = 0; live && i < opts.contexts; i++) {
        failures += destroy_one(live[i], i, run_failed[i]);
        free(copies[i]);
    }
    free(live);
    free(copies);
    free(run_failed);
    free(workers);
    free(meeting.windows);
    return failures ? 1 : 0;
}
