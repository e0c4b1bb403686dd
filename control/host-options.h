/*
 * host-options.h — the host side's options, shared by coprof and
 * copcontrol: --host-event=EVENT[:PERIOD], --host-call-graph and
 * --no-host-sched, checked here (the event through libpfm4, as
 * coprof-host will open it) and passed on to coprof-host (hostprof/).
 */
#ifndef COPROF_CONTROL_HOST_OPTIONS_H
#define COPROF_CONTROL_HOST_OPTIONS_H

#include <stddef.h>

struct host_options {
    const char *event;          /* EVENT[:PERIOD], or NULL: no samples */
    int call_graph;
    int no_sched;
};

#define HOST_OPT_EVENT      0x4000
#define HOST_OPT_CALL_GRAPH 0x4001
#define HOST_OPT_NO_SCHED   0x4002
#define HOST_IS_OPTION(c)   ((c) >= HOST_OPT_EVENT && (c) <= HOST_OPT_NO_SCHED)
#define HOST_LONG_OPTIONS \
    {"host-event", required_argument, NULL, HOST_OPT_EVENT}, \
    {"host-call-graph", no_argument, NULL, HOST_OPT_CALL_GRAPH}, \
    {"no-host-sched", no_argument, NULL, HOST_OPT_NO_SCHED}

/* The option's text for --help. */
#define HOST_OPTIONS_HELP \
"    --host-event=EVENT[:PERIOD]\n" \
"                      also sample the host program's threads on EVENT\n" \
"                      (libpfm4's name: cpu-clock, the default for a\n" \
"                      machine without a CPU PMU, perf::task-clock, or a\n" \
"                      PMU's event; --list-events lists them) every PERIOD\n" \
"                      events (default 250000: for cpu-clock, 250 us),\n" \
"                      user space only; copreport --side=host shows them\n" \
"    --host-call-graph with --host-event: each sample's callchain (frame\n" \
"                      pointers)\n" \
"    --no-host-sched   do not record the Linux scheduler's events of the\n" \
"                      host program's, copsim's and its QEMUs' threads\n" \
"                      (recorded by default where tracefs can be used:\n" \
"                      root; otherwise one line says so)\n"

/* Takes option c (HOST_IS_OPTION).  0, or -1 with one line in err. */
int host_take_option(struct host_options *h, int c, const char *arg,
                     char *err, size_t errlen);

/* Whether coprof-host has anything to record. */
int host_wanted(const struct host_options *h);

/*
 * coprof-host's arguments for h after args[*n] (at most 6); the strings
 * live in h or are constants.
 */
void host_args(const struct host_options *h, const char **args, int *n);

#endif
