/*
 * pingpong-host.c — the host half of the mailbox ping-pong example: runs
 * the embedded pingpong program (examples/pingpong/pingpong.c) through
 * libcop and answers each of its messages v with v * v + 1.
 *
 *   pingpong-host [ROUNDS]      (default 100)
 *
 * cop_context_run blocks until the program ends, so it runs on a thread
 * of its own while the main thread plays the host through the context's
 * mailboxes (cop_mailbox_write, cop_mailbox_read), as a Cell program ran
 * spe_context_run in a pthread and talked to it through spe_*_mbox_*.
 * Exits 0 when the program ran and exited 0.
 */
#include "sdk/libcop.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

extern const cop_program_handle_t pingpong_program;

struct run {
    cop_context_t *ctx;
    int status;
    struct cop_stop_info stop;
};

static void *run_program(void *arg)
{
    struct run *r = arg;

    r->status = cop_context_run(r->ctx, 0, NULL, &r->stop);
    return NULL;
}

/* Answers `rounds` messages; -1 with the reason printed on failure. */
static int answer(cop_context_t *ctx, uint32_t rounds)
{
    for (uint32_t i = 0; i < rounds; i++) {
        uint32_t v;

        if (cop_mailbox_read(ctx, &v, 60000) < 0
            || cop_mailbox_write(ctx, v * v + 1) < 0) {
            fprintf(stderr, "pingpong-host: %s\n", cop_last_error());
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
    struct run r = { 0 };
    pthread_t thread;
    int ok;

    if (argc > 2 || rounds < 1 || rounds > 1000000) {
        fprintf(stderr, "usage: pingpong-host [ROUNDS]  (1..1000000)\n");
        return 2;
    }
    r.ctx = cop_context_create();
    if (!r.ctx || cop_context_load(r.ctx, &pingpong_program) < 0
        || cop_mailbox_write(r.ctx, (uint32_t)rounds) < 0) {
        fprintf(stderr, "pingpong-host: %s\n", cop_last_error());
        return 1;
    }
    if (pthread_create(&thread, NULL, run_program, &r) != 0) {
        fprintf(stderr, "pingpong-host: cannot start a thread\n");
        return 1;
    }
    ok = answer(r.ctx, (uint32_t)rounds) == 0;
    pthread_join(thread, NULL);
    if (r.status < 0) {
        fprintf(stderr, "pingpong-host: %s\n", cop_last_error());
        return 1;
    }
    if (r.stop.reason != COP_STOP_EXIT)
        fprintf(stderr, "pingpong-host: fault: %s\n", r.stop.fault);
    cop_context_destroy(r.ctx);
    return ok && r.stop.reason == COP_STOP_EXIT && r.stop.status == 0 ? 0 : 1;
}
