/*
 * mbox-host.c — the host side of test_mailbox.py: runs the embedded
 * mbox-probe image through libcop and plays the host's part of a case:
 *
 *   mbox-host pingpong N   answers each of the N messages v with 3v + 1
 *   mbox-host order        before the run: writes 10, 20, 30, 40, then a
 *                          fifth (refused: full) and reads with timeout 0
 *                          (refused: empty), printing both errors
 *   mbox-host full         reads the two messages of the probe's "full"
 *   mbox-host corrupt      before the run: says 100 messages are in the
 *                          inbound mailbox, then runs the probe's "read"
 *
 * The run is on a thread of its own while the main thread plays the host.
 * Prints the host's lines, then "status=S reason=exit|fault fault=TEXT";
 * exits 0 when the run happened (whatever its end), 1 otherwise.
 */
#include "abi/cop-abi.h"
#include "sdk/libcop.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const cop_program_handle_t mbox_probe;

struct run {
    cop_context_t *ctx;
    char *argv[3];
    int argc;
    int status;
    struct cop_stop_info stop;
};

static void *run_thread(void *arg)
{
    struct run *r = arg;

    r->status = cop_context_run(r->ctx, r->argc, r->argv, &r->stop);
    if (r->status < 0)
        fprintf(stderr, "mbox-host: run: %s\n", cop_last_error());
    return NULL;
}

static int host_pingpong(cop_context_t *ctx, unsigned rounds)
{
    for (unsigned i = 0; i < rounds; i++) {
        uint32_t v;

        if (cop_mailbox_read(ctx, &v, 60000) < 0
            || cop_mailbox_write(ctx, 3 * v + 1) < 0) {
            printf("host: %s\n", cop_last_error());
            return -1;
        }
    }
    return 0;
}

static void host_order(cop_context_t *ctx)
{
    uint32_t v;

    for (uint32_t i = 1; i <= 4; i++)
        if (cop_mailbox_write(ctx, 10 * i) < 0)
            printf("host: write %u: %s\n", 10 * i, cop_last_error());
    if (cop_mailbox_write(ctx, 50) < 0)
        printf("host: fifth: %s\n", cop_last_error());
    if (cop_mailbox_read(ctx, &v, 0) < 0)
        printf("host: read: %s\n", cop_last_error());
}

static void host_full(cop_context_t *ctx)
{
    uint32_t a = 0, b = 0;

    if (cop_mailbox_read(ctx, &a, 60000) < 0
        || cop_mailbox_read(ctx, &b, 60000) < 0)
        printf("host: %s\n", cop_last_error());
    printf("host: got %lu %lu\n", (unsigned long)a, (unsigned long)b);
}

int main(int argc, char **argv)
{
    struct run r = { .argv = { "mbox-probe" } };
    const char *which = argc > 1 ? argv[1] : "";
    pthread_t thread;

    r.ctx = cop_context_create();
    if (!r.ctx || cop_context_load(r.ctx, &mbox_probe) < 0) {
        fprintf(stderr, "mbox-host: %s\n", cop_last_error());
        return 1;
    }
    r.argc = 2;
    r.argv[1] = argv[1];
    if (!strcmp(which, "pingpong") && argc == 3) {
        r.argv[2] = argv[2];
        r.argc = 3;
    } else if (!strcmp(which, "order")) {
        host_order(r.ctx);
    } else if (!strcmp(which, "corrupt")) {
        volatile struct cop_mbox *mb = (volatile struct cop_mbox *)
            ((char *)cop_context_data(r.ctx, NULL) + COP_MBOX_OFFSET);

        mb->in_put = 100;
        r.argv[1] = "read";
    } else if (strcmp(which, "full")) {
        fprintf(stderr, "usage: mbox-host pingpong N | order | full | "
                "corrupt\n");
        return 2;
    }
    pthread_create(&thread, NULL, run_thread, &r);
    if (!strcmp(which, "pingpong"))
        host_pingpong(r.ctx, (unsigned)atoi(argv[2]));
    else if (!strcmp(which, "full"))
        host_full(r.ctx);
    pthread_join(thread, NULL);
    if (r.status < 0)
        return 1;
    printf("status=%d reason=%s fault=%s\n", r.stop.status,
           r.stop.reason == COP_STOP_EXIT ? "exit" : "fault", r.stop.fault);
    cop_context_destroy(r.ctx);
    return 0;
}
