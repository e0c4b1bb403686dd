/*
 * bench-eventlog.c — what a coplog record costs, side by side with fprintf.
 *
 * Cases, timed in interleaved rounds on the same machine in one run, the
 * median of the rounds printed:
 *
 *   1 writer         COPLOG() with two int arguments, one thread
 *   1 writer, 4 args an int, a long, a double and a pointer
 *   1 writer, %s     one 16-byte string argument (copied into the file)
 *   2 writers        two threads on one subsystem, aggregate ns per record
 *                    (wall time / records of both), pinned to CPUs 0 and 1;
 *                    the program reports how many CPUs they kept busy, since
 *                    on a loaded machine they may have taken turns
 *   2 writers shared the same with the subsystem's single shared ring, to
 *                    show what per-CPU rings buy
 *   disabled         COPLOG() on a subsystem switched off
 *   fprintf          the same message formatted into a stdio stream on
 *                    /dev/null (formatting and buffering, no disk)
 *   fprintf + clock  the same with a clock_gettime timestamp, what a
 *                    timestamped text log costs
 *   read back        coplog_reader_next per record of a full log (READ_ALL)
 *
 * The targets: at most 30 ns per timestamped record with one writer,
 * 50 ns aggregate with two, 2 ns for a disabled record.  For reference, the
 * public `recorder` library's own speed test measured 75 ns (one thread) and
 * 72 ns (two, aggregate) per timestamped record on this kind of machine.
 */
#include "eventlog/coplog.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECORDS          2000000
#define DISABLED_RECORDS 50000000
#define ROUNDS           5
#define CAPACITY         (1u << 16)

enum { FAST, SHARED, OFF };

static const struct coplog_subsys_config bench_subsys[] = {
    [FAST] = { .name = "FAST", .capacity = CAPACITY },
    [SHARED] = { .name = "SHARED", .capacity = CAPACITY, .shared_ring = true },
    [OFF] = { .name = "OFF", .capacity = 1024, .disabled = true },
};

static struct coplog *log_handle;

static double now_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec * 1e9 + (double)now.tv_nsec;
}

/* ---------------------------------------------------------------- cases */

static void write_two_ints(unsigned subsys, int count)
{
    for (int i = 0; i < count; i++)
        COPLOG(log_handle, subsys, COPLOG_TERSE, "bind slot %d context %d",
               i & 7, i);
}

static double case_one_writer(void)
{
    double start = now_ns();

    write_two_ints(FAST, RECORDS);
    return (now_ns() - start) / RECORDS;
}

static double case_four_args(void)
{
    double start = now_ns();

    for (int i = 0; i < RECORDS; i++)
        COPLOG(log_handle, FAST, COPLOG_TERSE, "slot %d cycles %ld at %.3f %p",
               i & 7, (long)i * 1000, i * 0.5, (void *)&log_handle);
    return (now_ns() - start) / RECORDS;
}

static double case_string(void)
{
    static const char *const names[] = { "decode-frame-01", "encode-frame-02" };
    double start = now_ns();

    for (int i = 0; i < RECORDS; i++)
        COPLOG(log_handle, FAST, COPLOG_TERSE, "phase %s step %d", names[i & 1],
               i);
    return (now_ns() - start) / RECORDS;
}

struct pair_run {
    pthread_barrier_t start;
    unsigned subsys;
    double cpu_ns[2];           /* CPU time of each writer */
};

struct pair_writer_args {
    struct pair_run *run;
    int index;
};

static double thread_cpu_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return (double)now.tv_sec * 1e9 + (double)now.tv_nsec;
}

/* Writer i runs on CPU i, so that the two contend as two CPUs whenever
 * both run. */
static void pin_to_cpu(int cpu)
{
    cpu_set_t set;

    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static void *pair_writer(void *data)
{
    struct pair_writer_args *args = data;
    double start;

    pin_to_cpu(args->index);
    pthread_barrier_wait(&args->run->start);
    start = thread_cpu_ns();
    write_two_ints(args->run->subsys, RECORDS);
    args->run->cpu_ns[args->index] = thread_cpu_ns() - start;
    return NULL;
}

/* How many CPUs the two writers kept busy at once, on average: 2 when they
 * really ran in parallel, 1 when the machine made them take turns. */
static double parallelism[2];

static double two_writers(unsigned subsys)
{
    struct pair_run run = { .subsys = subsys };
    struct pair_writer_args args[2] = { { &run, 0 }, { &run, 1 } };
    pthread_t threads[2];
    double start, wall;

    pthread_barrier_init(&run.start, NULL, 3);
    for (int i = 0; i < 2; i++)
        pthread_create(&threads[i], NULL, pair_writer, &args[i]);
    pthread_barrier_wait(&run.start);
    start = now_ns();
    for (int i = 0; i < 2; i++)
        pthread_join(threads[i], NULL);
    wall = now_ns() - start;
    pthread_barrier_destroy(&run.start);
    parallelism[subsys == SHARED] += (run.cpu_ns[0] + run.cpu_ns[1]) / wall /
                                     ROUNDS;
    return wall / (2.0 * RECORDS);
}

static double case_two_writers(void)
{
    return two_writers(FAST);
}

static double case_two_writers_shared(void)
{
    return two_writers(SHARED);
}

static double case_disabled(void)
{
    double start = now_ns();

    write_two_ints(OFF, DISABLED_RECORDS);
    return (now_ns() - start) / DISABLED_RECORDS;
}

static FILE *null_stream;

static double case_fprintf(void)
{
    double start = now_ns();

    for (int i = 0; i < RECORDS; i++)
        fprintf(null_stream, "bind slot %d context %d\n", i & 7, i);
    return (now_ns() - start) / RECORDS;
}

static double case_fprintf_clock(void)
{
    double start = now_ns();

    for (int i = 0; i < RECORDS; i++) {
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        fprintf(null_stream, "%ld.%09ld bind slot %d context %d\n",
                (long)t.tv_sec, t.tv_nsec, i & 7, i);
    }
    return (now_ns() - start) / RECORDS;
}

static const char *log_path;

static double case_read_back(void)
{
    char error[COPLOG_ERROR_MAX];
    struct coplog_reader *reader = coplog_reader_open(log_path, error);
    struct coplog_event event;
    double start;
    long count = 0;

    if (reader == NULL) {
        fprintf(stderr, "bench-eventlog: %s\n", error);
        exit(1);
    }
    coplog_reader_select(reader, "FAST");
    start = now_ns();
    while (coplog_reader_next(reader, &event, COPLOG_READ_ALL) > 0)
        count++;
    coplog_reader_close(reader);
    return count ? (now_ns() - start) / (double)count : 0;
}

/* ---------------------------------------------------------------- table */

struct bench_case {
    const char *name;
    double (*run)(void);
    const char *target;
    double samples[ROUNDS];
};

static struct bench_case cases[] = {
    { "COPLOG, 1 writer, 2 int args", case_one_writer, "<= 30", { 0 } },
    { "COPLOG, 1 writer, int long double ptr", case_four_args, "", { 0 } },
    { "COPLOG, 1 writer, one %s (15 chars)", case_string, "", { 0 } },
    { "COPLOG, 2 writers, 1 subsys, aggregate", case_two_writers, "<= 50",
      { 0 } },
    { "  same, one shared ring (no per-CPU)", case_two_writers_shared, "",
      { 0 } },
    { "COPLOG, subsystem off (disabled)", case_disabled, "<= 2", { 0 } },
    { "fprintf to /dev/null, same message", case_fprintf, "", { 0 } },
    { "fprintf + clock_gettime timestamp", case_fprintf_clock, "", { 0 } },
    { "reader: READ_ALL per record returned", case_read_back, "", { 0 } },
};

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static double median(double *samples)
{
    double sorted[ROUNDS];

    memcpy(sorted, samples, sizeof sorted);
    qsort(sorted, ROUNDS, sizeof sorted[0], compare_doubles);
    return sorted[ROUNDS / 2];
}

static void make_log(char *path, size_t size)
{
    struct coplog_config config = { .subsys = bench_subsys,
                                    .subsys_count = 3 };
    char error[COPLOG_ERROR_MAX];
    const char *folder = getenv("TMPDIR");

    snprintf(path, size, "%s/bench-eventlog-%d.coplog",
             folder != NULL ? folder : "/tmp", (int)getpid());
    log_handle = coplog_create(path, &config, error);
    if (log_handle == NULL) {
        fprintf(stderr, "bench-eventlog: %s\n", error);
        exit(1);
    }
}

int main(void)
{
    const size_t count = sizeof cases / sizeof cases[0];
    char path[4096];
    double printf_ns;

    make_log(path, sizeof path);
    log_path = path;
    null_stream = fopen("/dev/null", "w");
    if (null_stream == NULL) {
        perror("bench-eventlog: /dev/null");
        return 1;
    }
    write_two_ints(FAST, RECORDS);      /* warm up: every page touched */
    for (int round = 0; round < ROUNDS; round++)
        for (size_t i = 0; i < count; i++)
            cases[i].samples[round] = cases[i].run();

    printf_ns = median(cases[6].samples);
    printf("ns per record, median of %d interleaved rounds of %d records "
           "(%d for disabled), %ld CPUs\n", ROUNDS, RECORDS, DISABLED_RECORDS,
           sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-42s %10s %11s %8s\n", "case", "ns/record", "/ fprintf",
           "target");
    for (size_t i = 0; i < count; i++) {
        double ns = median(cases[i].samples);
        printf("%-42s %10.2f %11.3f %8s\n", cases[i].name, ns, ns / printf_ns,
               cases[i].target);
    }
    printf("two writers kept %.2f CPUs busy on average (%.2f with the shared "
           "ring): 2 means they ran in parallel\n", parallelism[0],
           parallelism[1]);
    printf("reference, the `recorder` library's speed test on this kind of "
           "machine: 75 ns (1 thread), 72 ns (2, aggregate)\n");
    coplog_close(log_handle);
    fclose(null_stream);
    unlink(path);
    return 0;
}
