/*
 * split-host — a host program with a known split between the host CPU and
 * the coprocessors, for hostprof's tests and bench/hostprof.
 *
 *     split-host [CONTEXTS [ROUNDS [SPIN [--wait]]]]
 *
 * CONTEXTS worker threads (default 2) each run one context of the
 * `kernels` example (ROUNDS rounds, default 4) through libcop and block
 * in cop_context_run() until it exits; meanwhile the main thread spins
 * SPIN iterations (default 200 million) of host_spin(), a busy loop that
 * makes no system call.  So the host's CPU samples fall almost all in
 * host_spin (the workers sleep while their contexts run), and the
 * coprocessor's in the kernels' functions.  Exit status 0 when every
 * context exited 0; the spin's result is printed so it is not optimized
 * away, with the spin's wall time and its thread's CPU time (user and
 * system: what sampling interrupts add shows there; bench/hostprof).
 * With --wait the contexts run first, "split-host: contexts done" is
 * printed, and the spin waits for a byte on standard input (a test drives
 * what happens between).
 */
#include "sdk/libcop.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONTEXTS    16

extern const cop_program_handle_t kernels_program;

struct worker {
    pthread_t thread;
    const char *rounds;
    int status;
};

__attribute__((noinline)) static uint64_t host_spin(uint64_t n)
{
    uint64_t x = 88172645463325252ull;

    for (uint64_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

static double ms_between(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) * 1e3 +
           (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

static void *run_context(void *arg)
{
    struct worker *w = arg;
    char *argv[] = {(char *)"kernels", (char *)w->rounds, NULL};
    struct cop_stop_info stop;
    cop_context_t *ctx = cop_context_create();

    w->status = 1;
    if (!ctx || cop_context_load(ctx, &kernels_program) < 0 ||
        cop_context_run(ctx, 2, argv, &stop) < 0)
        fprintf(stderr, "split-host: %s\n", cop_last_error());
    else
        w->status = stop.reason == COP_STOP_EXIT ? stop.status : 1;
    if (ctx)
        cop_context_destroy(ctx);
    return NULL;
}

int main(int argc, char **argv)
{
    int contexts = argc > 1 ? atoi(argv[1]) : 2, failed = 0;
    int contexts_joined = 0;
    const char *rounds = argc > 2 ? argv[2] : "4";
    uint64_t spin = argc > 3 ? strtoull(argv[3], NULL, 10) : 200000000ull;
    struct worker workers[MAX_CONTEXTS];
    struct timespec start, end, cpu_start, cpu_end;
    uint64_t x;

    if (contexts < 0 || contexts > MAX_CONTEXTS) {
        fprintf(stderr, "split-host: CONTEXTS must be 0..%d\n",
                MAX_CONTEXTS);
        return 2;
    }
    for (int i = 0; i < contexts; i++) {
        workers[i].rounds = rounds;
        if (pthread_create(&workers[i].thread, NULL, run_context,
                           &workers[i]) != 0) {
            fprintf(stderr, "split-host: pthread_create failed\n");
            return 1;
        }
    }
    if (argc > 4 && strcmp(argv[4], "--wait") == 0) {
        /* the contexts first: then a byte on stdin starts the spin */
        for (int i = 0; i < contexts; i++) {
            pthread_join(workers[i].thread, NULL);
            failed += workers[i].status != 0;
        }
        contexts_joined = 1;
        printf("split-host: contexts done\n");
        fflush(stdout);
        if (getchar() == EOF)
            return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &start);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_start);
    x = host_spin(spin);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu_end);
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("split-host: spin %llx in %.3f ms, on CPU %.3f ms\n",
           (unsigned long long)x, ms_between(&start, &end),
           ms_between(&cpu_start, &cpu_end));
    for (int i = 0; i < contexts && !contexts_joined; i++) {
        pthread_join(workers[i].thread, NULL);
        failed += workers[i].status != 0;
    }
    printf("split-host: %d contexts, %d failed\n", contexts, failed);
    return failed ? 1 : 0;
}
