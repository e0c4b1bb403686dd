/*
 * schedlog.h — copsim's SCHED records in the kernel event log.
 *
 * Every create, load, run, bind, preemption, unbind, exit, fault, reap and
 * destroy of a context is one record of the SCHED subsystem (eventlog/),
 * with the context id, the host pid and tid, CLOCK_MONOTONIC nanoseconds
 * (mono=, read when the event happened; the record's own timestamp is the
 * log's clock) and, for events on a slot, the slot and its cycle counter.
 * Each kind of record has one fixed format whose fields are key=value, so
 * a reader (coplog dump, the daemon, copreport) parses them by the text
 * before the first space; README.md lists them.
 */
#ifndef COPROF_COPSIM_SCHEDLOG_H
#define COPROF_COPSIM_SCHEDLOG_H

#include "emulator/copsim/copsim-hooks.h"

#include <stddef.h>
#include <stdint.h>

struct coplog;

struct schedlog {
    struct coplog *log;
    unsigned subsys;            /* index of SCHED in the log */
};

#define SCHEDLOG_SUBSYS     "SCHED"
#define SCHEDLOG_RECORDS    65536       /* per ring, when copsim creates it */

/*
 * Opens the log at path for writing: an existing log must have a SCHED
 * subsystem (records then join what others write there, e.g. the driver's);
 * a missing one is created with SCHED only.  Returns 0, or -1 with err set.
 */
int schedlog_open(struct schedlog *sl, const char *path, char *err,
                  size_t errlen);
void schedlog_close(struct schedlog *sl);

uint64_t schedlog_monotonic_ns(void);

void schedlog_start(struct schedlog *sl, uint32_t n_slots,
                    uint64_t slice_cycles, uint64_t nominal_hz);
void schedlog_stop(struct schedlog *sl);

void schedlog_create(struct schedlog *sl, const struct copsim_context *c);
void schedlog_load(struct schedlog *sl, const struct copsim_context *c);
void schedlog_run(struct schedlog *sl, const struct copsim_context *c,
                  unsigned argc);
void schedlog_bind(struct schedlog *sl, const struct copsim_switch *change);
/* ran: cycles on the slot since the bind; hold_ns: from closing the gate
 * until the emulator stopped at it. */
void schedlog_preempt(struct schedlog *sl, const struct copsim_switch *change,
                      uint64_t ran, uint64_t hold_ns);
void schedlog_unbind(struct schedlog *sl, const struct copsim_switch *change);

/* Exit and fault of a context that may not be on a slot (slot -1). */
void schedlog_exit(struct schedlog *sl, const struct copsim_context *c,
                   int slot, uint64_t cycles, int status,
                   uint64_t instructions);
void schedlog_fault(struct schedlog *sl, const struct copsim_context *c,
                    int slot, uint64_t cycles, int status, const char *reason);

void schedlog_reap(struct schedlog *sl, const struct copsim_context *c);
void schedlog_destroy(struct schedlog *sl, const struct copsim_context *c);

/* A request that failed: what and why (level error). */
void schedlog_error(struct schedlog *sl, uint64_t context, int pid,
                    const char *what);

/* The name of an unbind reason as the records spell it. */
const char *schedlog_reason_name(enum copsim_unbind_reason reason);

#endif /* COPROF_COPSIM_SCHEDLOG_H */
