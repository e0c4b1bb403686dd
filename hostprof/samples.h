/*
 * samples.h — host CPU samples of the profiled command's threads.
 *
 * The event (--host-event=EVENT[:PERIOD]) is named and encoded by libpfm4
 * (pfm_get_os_event_encoding, user level only), so any event libpfm4 knows
 * on this machine works: the kernel's software events (perf::cpu-clock,
 * the default, since a virtual machine may expose no PMU) or a PMU's.
 * host_samples_start() opens it with perf_event_open on a process that
 * has not yet exec'd its program (coprof holds it): on each CPU, inherit
 * (every thread and child it creates later is counted, into the same
 * ring buffer), enabled at exec, on CLOCK_MONOTONIC, with the executable
 * mmaps, comm and fork records that symbols.c needs to name addresses
 * after the processes are gone, and with the user-space callchain (frame
 * pointers) when call_graph is set.  host_samples_read() drains the ring
 * buffer into hp (call it often; what overflows is hp->lost_samples).
 */
#ifndef COPROF_HOSTPROF_SAMPLES_H
#define COPROF_HOSTPROF_SAMPLES_H

#include "hostprof/hostprof.h"

#include <linux/perf_event.h>

#define HOST_EVENT_DEFAULT      "cpu-clock"
#define HOST_PERIOD_DEFAULT     250000      /* cpu-clock: ns, 4 kHz */

/* One event of one task on one CPU (the kernel maps no ring of an
 * inherited event that follows a task on every CPU) and its ring. */
struct host_ring {
    int fd;
    void *base;
};

struct host_sampler {
    struct vec rings;           /* struct host_ring */
    struct perf_event_attr attr;
    int cpus;
    size_t data_size;
    struct hostprof *hp;
};

/*
 * EVENT[:PERIOD] into hp->event and hp->period (PERIOD a positive count;
 * default HOST_PERIOD_DEFAULT).  0, or -1 with one line in err.
 */
int host_samples_parse(struct hostprof *hp, const char *spec, char *err,
                       size_t errlen);

/* Whether spec is an EVENT[:PERIOD] libpfm4 encodes here: 0, or -1 with
 * one line in err (for coprof's and copcontrol's option checks). */
int host_samples_check(const char *spec, char *err, size_t errlen);

/* Encodes hp->event; no task yet.  0, or -1 with one line in err. */
int host_samples_open(struct host_sampler *s, struct hostprof *hp,
                      char *err, size_t errlen);

/* Samples task tid (and what it creates) on every CPU: from its next
 * exec when at_exec, else now.  0, or -1 with one line in err. */
int host_samples_add_task(struct host_sampler *s, pid_t tid, int at_exec,
                          char *err, size_t errlen);

/* open, then the command pid from its exec.  0, or -1 with err. */
int host_samples_start(struct host_sampler *s, struct hostprof *hp,
                       pid_t pid, char *err, size_t errlen);

/* A running process: each of its threads, from now on, and its
 * executable mappings from /proc/PID/maps.  0, or -1 with err. */
int host_samples_attach(struct host_sampler *s, pid_t pid, char *err,
                        size_t errlen);
void host_samples_read(struct host_sampler *s);
void host_samples_stop(struct host_sampler *s);

#endif
