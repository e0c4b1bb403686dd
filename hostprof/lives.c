/*
 * lives.c — copsim's SCHED records of the contexts into HOST_MARK events
 * (lives.h).  A record's message is `KIND key=value ...` (the last field,
 * stack=, name= or path=, may hold anything: the keys are looked for
 * before it).
 */
#include "hostprof/lives.h"
#include "hostprof/aggregate.h"
#include "eventlog/coplog.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESSAGE_MAX     2048

/* The number after " key=" in text, or -1. */
static long long field(const char *text, const char *key)
{
    const char *at = strstr(text, key);
    char *end;
    long long v;

    if (!at)
        return -1;
    v = strtoll(at + strlen(key), &end, 10);
    return end == at + strlen(key) || v < 0 ? -1 : v;
}

static void take(struct hostprof *hp, const struct coplog_event *e)
{
    char text[MESSAGE_MAX], *cut;
    long long context, tid, mono;
    int ends;

    coplog_event_format(e, text, sizeof(text));
    if ((cut = strstr(text, " stack=")) != NULL ||
        (cut = strstr(text, " name=")) != NULL ||
        (cut = strstr(text, " path=")) != NULL)
        *cut = '\0';
    if ((context = field(text, " context=")) < 0)
        return;
    tid = field(text, " tid=");
    mono = field(text, " mono=");
    ends = strncmp(text, "destroy ", 8) == 0 ||
           strncmp(text, "reap ", 5) == 0;
    host_agg_mark(hp, mono >= 0 ? (uint64_t)mono : e->time_ns,
                  (uint64_t)context, tid > 0 ? (pid_t)tid : 0, ends);
}

static int open_log(struct host_lives *l, const struct hostprof *hp)
{
    char error[COPLOG_ERROR_MAX];

    if (l->reader)
        return 0;
    if (!l->path || l->unusable ||
        !(l->reader = coplog_reader_open(l->path, error)))
        return -1;
    if (coplog_reader_select(l->reader, "SCHED") != 0) {
        coplog_reader_close(l->reader);
        l->reader = NULL;
        l->unusable = 1;
        return -1;
    }
    coplog_reader_seek(l->reader, coplog_reader_ns_order(l->reader,
                                                         hp->start_ns));
    return 0;
}

void host_lives_read(struct host_lives *l, struct hostprof *hp, int all)
{
    struct coplog_event e;

    if (open_log(l, hp) < 0)
        return;
    while (coplog_reader_next(l->reader, &e, all ? COPLOG_READ_ALL :
                              COPLOG_READ_LIVE) > 0)
        take(hp, &e);
}

void host_lives_close(struct host_lives *l)
{
    if (l->reader)
        coplog_reader_close(l->reader);
    l->reader = NULL;
}
