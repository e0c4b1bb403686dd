/*
 * host-options.c — the host side's options (host-options.h).
 */
#include "control/host-options.h"

#include "hostprof/samples.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING_MAX    (1L << 26)      /* events: 5 GiB of memory */

void host_options_init(struct host_options *h)
{
    memset(h, 0, sizeof(*h));
    h->call_graph = h->sched = -1;
    h->ring = -1;
}

/* --host-sched's value (NULL: alone) into h->sched; conf: a
 * copcontrol.conf line's, which may also say on and off. */
static int set_sched(struct host_options *h, const char *arg, int conf,
                     char *err, size_t errlen)
{
    if (!arg || strcmp(arg, "command") == 0 ||
        (conf && strcmp(arg, "on") == 0))
        h->sched = HOST_SCHED_COMMAND;
    else if (strcmp(arg, "all") == 0)
        h->sched = HOST_SCHED_ALL;
    else if (conf && strcmp(arg, "off") == 0)
        h->sched = HOST_SCHED_OFF;
    else {
        snprintf(err, errlen, "%s=%s: not %s", conf ? "host-sched" :
                 "--host-sched", arg, conf ? "on, off, command or all" :
                 "command or all");
        return -1;
    }
    return 0;
}

static int set_ring(struct host_options *h, const char *arg, char *err,
                    size_t errlen)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 0 || v > RING_MAX) {
        snprintf(err, errlen, "--host-sched-ring=%s: not a number of events "
                 "from 0 to %ld", arg, RING_MAX);
        return -1;
    }
    h->ring = v;
    return 0;
}

static int set_event(struct host_options *h, const char *arg, char *err,
                     size_t errlen)
{
    if (strlen(arg) >= sizeof(h->event)) {
        snprintf(err, errlen, "--host-event=%.40s...: too long", arg);
        return -1;
    }
    if (host_samples_check(arg, err, errlen) < 0)
        return -1;
    snprintf(h->event, sizeof(h->event), "%s", arg);
    h->event_set = 1;
    return 0;
}

int host_take_option(struct host_options *h, int c, const char *arg,
                     char *err, size_t errlen)
{
    switch (c) {
    case HOST_OPT_EVENT:
        return set_event(h, arg, err, errlen);
    case HOST_OPT_NO_EVENT:
        h->event[0] = '\0';
        h->event_set = 1;
        return 0;
    case HOST_OPT_CALL_GRAPH:
    case HOST_OPT_NO_CALL_GRAPH:
        h->call_graph = c == HOST_OPT_CALL_GRAPH;
        return 0;
    case HOST_OPT_SCHED:
        return set_sched(h, arg, 0, err, errlen);
    case HOST_OPT_RING:
        return set_ring(h, arg, err, errlen);
    default:
        h->sched = HOST_SCHED_OFF;
        return 0;
    }
}

int host_options_check(const struct host_options *h, char *err,
                       size_t errlen)
{
    if (h->call_graph == 1 && !h->event[0]) {
        snprintf(err, errlen, "--host-call-graph: needs --host-event");
        return -1;
    }
    return 0;
}

void host_options_merge(struct host_options *base,
                        const struct host_options *given)
{
    if (given->event_set) {
        memcpy(base->event, given->event, sizeof(base->event));
        base->event_set = 1;
    }
    if (given->call_graph >= 0)
        base->call_graph = given->call_graph;
    if (given->sched >= 0)
        base->sched = given->sched;
    if (given->ring >= 0)
        base->ring = given->ring;
}

int host_wanted(const struct host_options *h)
{
    return h->event[0] || h->sched != 0;
}

void host_args(struct host_options *h, const char **args, int *n)
{
    if (h->event[0]) {
        args[(*n)++] = "--host-event";
        args[(*n)++] = h->event;
        if (h->call_graph == 1)
            args[(*n)++] = "--host-call-graph";
    }
    if (h->sched == HOST_SCHED_OFF)
        args[(*n)++] = "--no-sched";
    if (h->sched == HOST_SCHED_ALL)
        args[(*n)++] = "--sched=all";
    if (h->ring >= 0 && h->sched != HOST_SCHED_OFF) {
        snprintf(h->ring_text, sizeof(h->ring_text), "%ld", h->ring);
        args[(*n)++] = "--sched-ring";
        args[(*n)++] = h->ring_text;
    }
}

size_t host_options_save(const struct host_options *h, char *buf,
                         size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    if (h->event_set)
        n += (size_t)snprintf(buf + n, len - n, "host-event=%s\n", h->event);
    if (n < len && h->call_graph >= 0)
        n += (size_t)snprintf(buf + n, len - n, "host-call-graph=%s\n",
                              h->call_graph ? "on" : "off");
    if (n < len && h->sched >= 0)
        n += (size_t)snprintf(buf + n, len - n, "host-sched=%s\n",
                              h->sched == HOST_SCHED_ALL ? "all" :
                              h->sched ? "on" : "off");
    if (n < len && h->ring >= 0)
        n += (size_t)snprintf(buf + n, len - n, "host-sched-ring=%ld\n",
                              h->ring);
    return n < len ? n : len;
}

/* "on" or "off" into *flag. */
static int on_off(const char *key, const char *value, int *flag, char *err,
                  size_t errlen)
{
    if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0) {
        snprintf(err, errlen, "%s=%s: not on or off", key, value);
        return -1;
    }
    *flag = strcmp(value, "on") == 0;
    return 1;
}

int host_options_load(struct host_options *h, const char *key,
                      const char *value, char *err, size_t errlen)
{
    if (strcmp(key, "host-event") == 0) {
        if (!*value) {
            h->event[0] = '\0';
            h->event_set = 1;
            return 1;
        }
        if (set_event(h, value, err, errlen) < 0)
            return -1;
        return 1;
    }
    if (strcmp(key, "host-call-graph") == 0)
        return on_off(key, value, &h->call_graph, err, errlen);
    if (strcmp(key, "host-sched") == 0)
        return set_sched(h, value, 1, err, errlen) < 0 ? -1 : 1;
    if (strcmp(key, "host-sched-ring") == 0)
        return set_ring(h, value, err, errlen) < 0 ? -1 : 1;
    return 0;
}
