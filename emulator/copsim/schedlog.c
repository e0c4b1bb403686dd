/*
 * schedlog.c — the SCHED records (schedlog.h).
 *
 * One function per kind of record, each one COPLOG() call with a literal
 * format, so the event log registers each format once and stores only the
 * arguments.  Records have up to 12 arguments, hence 128-byte records in a
 * SCHED subsystem that copsim creates.
 */
#include "emulator/copsim/schedlog.h"

#include "eventlog/coplog.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef unsigned long long ull;

static int create_log(struct schedlog *sl, const char *path, char *err,
                      size_t errlen)
{
    static const struct coplog_subsys_config sched = {
        .name = SCHEDLOG_SUBSYS,
        .capacity = SCHEDLOG_RECORDS,
        .args = 12,
        .level = COPLOG_VERBOSE,
    };
    struct coplog_config config = {.subsys = &sched, .subsys_count = 1};
    char error[COPLOG_ERROR_MAX];

    sl->log = coplog_create(path, &config, error);
    if (!sl->log) {
        snprintf(err, errlen, "%s", error);
        return -1;
    }
    sl->subsys = 0;
    return 0;
}

int schedlog_open(struct schedlog *sl, const char *path, char *err,
                  size_t errlen)
{
    char error[COPLOG_ERROR_MAX];
    int index;

    if (access(path, F_OK) < 0 && errno == ENOENT)
        return create_log(sl, path, err, errlen);
    sl->log = coplog_open(path, error);
    if (!sl->log) {
        snprintf(err, errlen, "%s", error);
        return -1;
    }
    index = coplog_subsys(sl->log, SCHEDLOG_SUBSYS);
    if (index < 0) {
        snprintf(err, errlen, "%s: the event log has no %s subsystem", path,
                 SCHEDLOG_SUBSYS);
        coplog_close(sl->log);
        sl->log = NULL;
        return -1;
    }
    sl->subsys = (unsigned)index;
    return 0;
}

void schedlog_close(struct schedlog *sl)
{
    coplog_close(sl->log);
    sl->log = NULL;
}

uint64_t schedlog_monotonic_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

const char *schedlog_reason_name(enum copsim_unbind_reason reason)
{
    switch (reason) {
    case COPSIM_UNBIND_PREEMPT:
        return "preempt";
    case COPSIM_UNBIND_EXIT:
        return "exit";
    case COPSIM_UNBIND_FAULT:
        return "fault";
    case COPSIM_UNBIND_REAP:
        return "reap";
    }
    return "unknown";
}

void schedlog_start(struct schedlog *sl, uint32_t n_slots,
                    uint64_t slice_cycles, uint64_t nominal_hz)
{
    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "start slots=%u slice=%llu nominal_hz=%llu pid=%d mono=%llu",
           n_slots, (ull)slice_cycles, (ull)nominal_hz, (int)getpid(),
           (ull)schedlog_monotonic_ns());
}

void schedlog_stop(struct schedlog *sl)
{
    COPLOG(sl->log, sl->subsys, COPLOG_TERSE, "stop pid=%d mono=%llu",
           (int)getpid(), (ull)schedlog_monotonic_ns());
}

void schedlog_create(struct schedlog *sl, const struct copsim_context *c)
{
    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "create context=%llu pid=%d tid=%d mono=%llu trace_context=%u "
           "stack=%s", (ull)c->id, (int)c->pid, (int)c->tid,
           (ull)schedlog_monotonic_ns(), c->trace_context, c->creation_stack);
}

void schedlog_load(struct schedlog *sl, const struct copsim_context *c)
{
    const struct copsim_image *i = &c->image;

    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "load context=%llu pid=%d tid=%d mono=%llu object=0x%llx "
           "offset=%llu dev=%llu inode=%llu size=%llu hash=0x%016llx "
           "name=%s path=%s", (ull)c->id, (int)c->pid, (int)c->tid,
           (ull)schedlog_monotonic_ns(), (ull)c->object_id, (ull)i->offset,
           (ull)i->device, (ull)i->inode, (ull)i->file_size, (ull)i->hash,
           i->name, i->path);
}

void schedlog_run(struct schedlog *sl, const struct copsim_context *c,
                  unsigned argc)
{
    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "run context=%llu pid=%d tid=%d mono=%llu argc=%u", (ull)c->id,
           (int)c->pid, (int)c->tid, (ull)schedlog_monotonic_ns(), argc);
}

void schedlog_bind(struct schedlog *sl, const struct copsim_switch *change)
{
    const struct copsim_context *c = change->context;

    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "bind slot=%u context=%llu pid=%d tid=%d mono=%llu cycles=%llu",
           change->slot, (ull)c->id, (int)c->pid, (int)c->tid,
           (ull)change->monotonic_ns, (ull)change->cycle);
}

void schedlog_preempt(struct schedlog *sl, const struct copsim_switch *change,
                      uint64_t ran, uint64_t hold_ns)
{
    const struct copsim_context *c = change->context;

    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "preempt slot=%u context=%llu pid=%d tid=%d mono=%llu cycles=%llu "
           "ran=%llu hold_ns=%llu", change->slot, (ull)c->id, (int)c->pid,
           (int)c->tid, (ull)change->monotonic_ns, (ull)change->cycle,
           (ull)ran, (ull)hold_ns);
}

void schedlog_unbind(struct schedlog *sl, const struct copsim_switch *change)
{
    const struct copsim_context *c = change->context;

    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "unbind slot=%u context=%llu pid=%d tid=%d mono=%llu cycles=%llu "
           "reason=%s", change->slot, (ull)c->id, (int)c->pid, (int)c->tid,
           (ull)change->monotonic_ns, (ull)change->cycle,
           schedlog_reason_name(change->reason));
}

void schedlog_exit(struct schedlog *sl, const struct copsim_context *c,
                   int slot, uint64_t cycles, int status,
                   uint64_t instructions)
{
    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "exit slot=%d context=%llu pid=%d tid=%d mono=%llu cycles=%llu "
           "status=%d instructions=%llu", slot, (ull)c->id, (int)c->pid,
           (int)c->tid, (ull)schedlog_monotonic_ns(), (ull)cycles, status,
           (ull)instructions);
}

void schedlog_fault(struct schedlog *sl, const struct copsim_context *c,
                    int slot, uint64_t cycles, int status, const char *reason)
{
    COPLOG(sl->log, sl->subsys, COPLOG_WARNING,
           "fault slot=%d context=%llu pid=%d tid=%d mono=%llu cycles=%llu "
           "status=%d reason=%s", slot, (ull)c->id, (int)c->pid, (int)c->tid,
           (ull)schedlog_monotonic_ns(), (ull)cycles, status, reason);
}

void schedlog_reap(struct schedlog *sl, const struct copsim_context *c)
{
    COPLOG(sl->log, sl->subsys, COPLOG_WARNING,
           "reap context=%llu pid=%d tid=%d mono=%llu", (ull)c->id,
           (int)c->pid, (int)c->tid, (ull)schedlog_monotonic_ns());
}

void schedlog_destroy(struct schedlog *sl, const struct copsim_context *c)
{
    COPLOG(sl->log, sl->subsys, COPLOG_TERSE,
           "destroy context=%llu pid=%d tid=%d mono=%llu", (ull)c->id,
           (int)c->pid, (int)c->tid, (ull)schedlog_monotonic_ns());
}

void schedlog_error(struct schedlog *sl, uint64_t context, int pid,
                    const char *what)
{
    COPLOG(sl->log, sl->subsys, COPLOG_ERROR,
           "error context=%llu pid=%d mono=%llu what=%s", (ull)context, pid,
           (ull)schedlog_monotonic_ns(), what);
}
