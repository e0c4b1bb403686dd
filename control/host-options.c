/*
 * host-options.c — the host side's options (host-options.h).
 */
#include "control/host-options.h"

#include "hostprof/samples.h"

#include <stdio.h>

int host_take_option(struct host_options *h, int c, const char *arg,
                     char *err, size_t errlen)
{
    switch (c) {
    case HOST_OPT_EVENT:
        if (host_samples_check(arg, err, errlen) < 0)
            return -1;
        h->event = arg;
        return 0;
    case HOST_OPT_CALL_GRAPH:
        h->call_graph = 1;
        return 0;
    default:
        h->no_sched = 1;
        return 0;
    }
}

int host_wanted(const struct host_options *h)
{
    return h->event || !h->no_sched;
}

void host_args(const struct host_options *h, const char **args, int *n)
{
    if (h->event) {
        args[(*n)++] = "--host-event";
        args[(*n)++] = h->event;
        if (h->call_graph)
            args[(*n)++] = "--host-call-graph";
    }
    if (h->no_sched)
        args[(*n)++] = "--no-sched";
}
