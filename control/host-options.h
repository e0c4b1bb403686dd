/*
 * host-options.h — the host side's options, shared by coprof and
 * copcontrol: --host-event=EVENT[:PERIOD] (--no-host-event),
 * --host-call-graph (--no-host-call-graph), --host-sched[=command|all]
 * (--no-host-sched) and --host-sched-ring=EVENTS, checked here (the event through libpfm4, as coprof-host
 * will open it) and passed on to coprof-host (hostprof/).  Each is unset
 * until given, so copcontrol's saved settings and those of a command line
 * merge (host_options_merge) the way its other settings do.
 */
#ifndef COPROF_CONTROL_HOST_OPTIONS_H
#define COPROF_CONTROL_HOST_OPTIONS_H

#include <stddef.h>

#define HOST_EVENT_MAX      128

struct host_options {
    char event[HOST_EVENT_MAX]; /* EVENT[:PERIOD]; "": no host samples */
    int event_set;              /* event given (else: none) */
    int call_graph;             /* -1 unset (off), 0, 1 */
    int sched;                  /* -1 unset (command), HOST_SCHED_* */
    long ring;                  /* -1 unset (coprof-host's default) */
    char ring_text[24];         /* host_args' */
};

#define HOST_SCHED_OFF      0
#define HOST_SCHED_COMMAND  1   /* the command's threads */
#define HOST_SCHED_ALL      2   /* also copsim's and its QEMUs' */

#define HOST_OPT_EVENT          0x4000
#define HOST_OPT_NO_EVENT       0x4001
#define HOST_OPT_CALL_GRAPH     0x4002
#define HOST_OPT_NO_CALL_GRAPH  0x4003
#define HOST_OPT_SCHED          0x4004
#define HOST_OPT_NO_SCHED       0x4005
#define HOST_OPT_RING           0x4006
#define HOST_IS_OPTION(c)   ((c) >= HOST_OPT_EVENT && (c) <= HOST_OPT_RING)
#define HOST_LONG_OPTIONS \
    {0, "host-event", required_argument, HOST_OPT_EVENT}, \
    {0, "no-host-event", no_argument, HOST_OPT_NO_EVENT}, \
    {0, "host-call-graph", no_argument, HOST_OPT_CALL_GRAPH}, \
    {0, "no-host-call-graph", no_argument, HOST_OPT_NO_CALL_GRAPH}, \
    {0, "host-sched", optional_argument, HOST_OPT_SCHED}, \
    {0, "no-host-sched", no_argument, HOST_OPT_NO_SCHED}, \
    {0, "host-sched-ring", required_argument, HOST_OPT_RING}

/* The options' text for --help. */
#define HOST_OPTIONS_HELP \
"    --host-event=EVENT[:PERIOD]\n" \
"                      also sample the host program's threads on EVENT\n" \
"                      (libpfm4's name: cpu-clock, the default for a\n" \
"                      machine without a CPU PMU, perf::task-clock, or a\n" \
"                      PMU's event: copcontrol --list-events lists\n" \
"                      them) every PERIOD events (default 250000: for\n" \
"                      cpu-clock, 250 us), user space only; copreport\n" \
"                      --side=host shows them.\n" \
"                      --no-host-event: none (the default)\n" \
"    --host-call-graph with --host-event: each sample's callchain (frame\n" \
"                      pointers); --no-host-call-graph: none (default)\n" \
"    --host-sched[=command|all]\n" \
"                      record the Linux scheduler's events of the host\n" \
"                      program's threads and every thread and process\n" \
"                      it creates (command, the default where tracefs\n" \
"                      can be used: root; otherwise one line says so);\n" \
"                      all: also of copsim's and its QEMUs' threads, the\n" \
"                      emulator's machinery (about 100 times as many\n" \
"                      events: some 180,000 a second with 8 busy slots,\n" \
"                      and the recording's CPU time with them)\n" \
"    --no-host-sched   do not record them\n" \
"    --host-sched-ring=EVENTS\n" \
"                      keep the newest EVENTS scheduler events raw for\n" \
"                      the timeline (default 131072, about 10 MiB);\n" \
"                      older ones are in the aggregates only\n"

void host_options_init(struct host_options *h);

/* Takes option c (HOST_IS_OPTION).  0, or -1 with one line in err. */
int host_take_option(struct host_options *h, int c, const char *arg,
                     char *err, size_t errlen);

/* --host-call-graph without an event: 0, or -1 with one line in err. */
int host_options_check(const struct host_options *h, char *err,
                       size_t errlen);

/* Whatever `given` sets replaces base's. */
void host_options_merge(struct host_options *base,
                        const struct host_options *given);

/* Whether coprof-host has anything to record. */
int host_wanted(const struct host_options *h);

#define HOST_ARGS_MAX   6

/*
 * coprof-host's arguments for h after args[*n] (at most HOST_ARGS_MAX);
 * the strings live in h or are constants.
 */
void host_args(struct host_options *h, const char **args, int *n);

/* The settings as copcontrol.conf lines ("host-event=...\n" ...) into
 * buf; and one such key=value taken: 1, 0 (not a host key), -1 (bad,
 * with err). */
size_t host_options_save(const struct host_options *h, char *buf,
                         size_t len);
int host_options_load(struct host_options *h, const char *key,
                      const char *value, char *err, size_t errlen);

#endif
