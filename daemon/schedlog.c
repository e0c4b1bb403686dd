/*
 * schedlog.c — SCHED events from the event log into the session (see
 * schedlog.h).
 *
 * The reader is opened on first use and kept; a log that does not exist
 * yet is tried again at the next flush (the daemon may start before
 * copsim), with one warning.  Positions are event orders: after an import
 * the position is the largest order copied, and a rollback seeks back to
 * the last committed one.  Events of that very order are read again then,
 * and the table's key (order, ring, seq) drops the copies.
 *
 * The log may be older than the session (copcontrol's copsim keeps one log
 * for all its sessions, and a log file outlives a copsim that did not
 * remove it), so a session starts at its stream's START:
 * schedlog_start_at() turns START's CLOCK_MONOTONIC time into the log's
 * order and no event before it is imported.  One thing before the START
 * is the session's all the same: where its contexts were created
 * (copcontrol --start while the program runs).  The skipped part is read
 * once for the `create` events of the copsim that wrote last (a `start`
 * event begins a copsim, whose contexts are numbered anew), and
 * schedlog_import() gives each context of the session without a creation
 * stack the one of its `create`, without importing the event.
 */
#include "daemon/schedlog.h"
#include "eventlog/coplog.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MESSAGE_MAX 2048

struct schedlog {
    char *path;
    bool quiet;
    bool warned;                    /* about an unusable log, once */
    bool unusable;                  /* no SCHED subsystem: stop trying */
    struct coplog_reader *reader;
    uint64_t committed;             /* position of the last commit */
    uint64_t position;              /* after the imports since then */
    uint64_t imported;              /* events committed */
    uint64_t uncommitted;           /* events imported since the commit */
    bool has_start;                 /* schedlog_start_at() was called */
    uint64_t start_ns;              /* its CLOCK_MONOTONIC time */
    GArray *early_creates;          /* struct early_create, before START */
};

/* A context's creation before the session's START: its copsim id, the
 * stack= of its `create` event. */
struct early_create {
    int64_t context_id;
    char *stack;
};

static void early_create_clear(gpointer data)
{
    g_free(((struct early_create *)data)->stack);
}

struct schedlog *schedlog_new(const char *path, uint64_t position, bool quiet)
{
    struct schedlog *log = g_new0(struct schedlog, 1);

    log->path = g_strdup(path);
    log->quiet = quiet;
    log->committed = log->position = position;
    log->early_creates = g_array_new(FALSE, FALSE,
                                     sizeof(struct early_create));
    g_array_set_clear_func(log->early_creates, early_create_clear);
    return log;
}

void schedlog_free(struct schedlog *log)
{
    if (log == NULL)
        return;
    if (log->reader != NULL)
        coplog_reader_close(log->reader);
    g_array_free(log->early_creates, TRUE);
    g_free(log->path);
    g_free(log);
}

static void warn(struct schedlog *log, const char *message)
{
    if (!log->quiet && !log->warned)
        g_printerr("coprofd: %s; scheduler events are not imported yet\n",
                   message);
    log->warned = true;
}

static void remember_create(struct schedlog *log, const char *message)
{
    struct store_sched_event row;
    char *kind, *stack;

    schedlog_parse_message(message, &row, &kind, &stack);
    if (kind != NULL && strcmp(kind, "start") == 0) {
        g_array_set_size(log->early_creates, 0);    /* a new copsim */
    } else if (kind != NULL && strcmp(kind, "create") == 0 &&
               stack != NULL && row.context_id >= 0) {
        struct early_create c = {row.context_id, stack};

        g_array_append_val(log->early_creates, c);
        stack = NULL;
    }
    g_free(kind);
    g_free(stack);
}

/* The `create` events from the reader's position up to order. */
static void read_early_creates(struct schedlog *log, uint64_t order)
{
    char message[MESSAGE_MAX];
    struct coplog_event event;

    coplog_reader_seek(log->reader, log->committed);
    while (coplog_reader_next(log->reader, &event, COPLOG_READ_ALL) > 0 &&
           event.order < order) {
        coplog_event_format(&event, message, sizeof message);
        remember_create(log, message);
    }
}

/* Moves a position before the session's start up to it, remembering the
 * creations it skips. */
static void skip_to_start(struct schedlog *log)
{
    if (!log->has_start)
        return;
    uint64_t order = coplog_reader_ns_order(log->reader, log->start_ns);
    if (log->committed < order) {
        read_early_creates(log, order);
        log->committed = log->position = order;
    }
}

/* Creation stacks for the session's contexts created before its START. */
static int link_early_creates(struct schedlog *log, struct store *store)
{
    for (guint i = 0; i < log->early_creates->len; i++) {
        struct early_create *c = &g_array_index(log->early_creates,
                                                struct early_create, i);

        if (store_set_creation_stack(store, c->context_id, c->stack) != 0)
            return -1;
    }
    return 0;
}

static bool open_reader(struct schedlog *log)
{
    char error[COPLOG_ERROR_MAX];

    if (log->reader != NULL)
        return true;
    if (log->unusable)
        return false;
    log->reader = coplog_reader_open(log->path, error);
    if (log->reader == NULL) {
        warn(log, error);
        return false;
    }
    if (coplog_reader_select(log->reader, "SCHED") != 0) {
        warn(log, coplog_reader_error(log->reader));
        coplog_reader_close(log->reader);
        log->reader = NULL;
        log->unusable = true;
        return false;
    }
    skip_to_start(log);
    coplog_reader_seek(log->reader, log->committed);
    return true;
}

void schedlog_start_at(struct schedlog *log, uint64_t start_ns)
{
    if (log->has_start)
        return;
    log->has_start = true;
    log->start_ns = start_ns;
    if (log->reader != NULL) {
        skip_to_start(log);
        coplog_reader_seek(log->reader, log->committed);
    }
}

/* ---- messages ----------------------------------------------------------- */

static int64_t parse_number(const char *text)
{
    char *end;
    gint64 value = g_ascii_strtoll(text, &end, 0);

    return end != text && *end == '\0' && value >= 0 ? value : -1;
}

static void parse_field(const char *key, const char *value,
                        struct store_sched_event *event)
{
    if (strcmp(key, "slot") == 0)
        event->slot = parse_number(value);
    else if (strcmp(key, "context") == 0 || strcmp(key, "ctx") == 0 ||
             strcmp(key, "context_id") == 0)
        event->context_id = parse_number(value);
    else if (strcmp(key, "cycle") == 0 || strcmp(key, "cycles") == 0)
        event->cycle = parse_number(value);
    else if (strcmp(key, "pid") == 0)
        event->host_pid = parse_number(value);
    else if (strcmp(key, "tid") == 0)
        event->host_tid = parse_number(value);
}

/* The value of the last field, stack=, runs to the end of the message:
 * copsim writes a call stack as space-separated MODULE+0xOFFSET entries. */
static char *take_stack(char *message)
{
    char *stack = strstr(message, "stack=");

    while (stack != NULL && stack != message && stack[-1] != ' ')
        stack = strstr(stack + 1, "stack=");
    if (stack == NULL)
        return NULL;
    if (stack != message)
        stack[-1] = '\0';
    *stack = '\0';
    char *value = g_strstrip(g_strdup(stack + strlen("stack=")));
    if (*value == '\0') {
        g_free(value);
        return NULL;                /* copsim could not read the stack */
    }
    return value;
}

void schedlog_parse_message(const char *message,
                            struct store_sched_event *event,
                            char **kind, char **stack)
{
    char *copy = g_strdup(message);
    char **words;

    *kind = NULL;
    event->slot = event->context_id = event->cycle = -1;
    event->host_pid = event->host_tid = -1;
    *stack = take_stack(copy);
    words = g_strsplit_set(copy, " \t\n", -1);
    for (char **w = words; *w != NULL; w++) {
        char *equal = strchr(*w, '=');
        if (equal == NULL) {
            if (*kind == NULL && w == words && **w != '\0')
                *kind = g_strdup(*w);
            continue;
        }
        *equal = '\0';
        parse_field(*w, equal + 1, event);
    }
    g_strfreev(words);
    g_free(copy);
}

/* ---- importing ---------------------------------------------------------- */

static int put_event(struct store *store, const struct coplog_event *e)
{
    char message[MESSAGE_MAX];
    struct store_sched_event row = {
        .order = e->order,
        .ring = e->ring,
        .seq = e->seq,
        .time_ns = e->time_ns,
        .level = e->level,
        .pid = e->pid,
        .tid = e->tid,
        .cpu = e->cpu,
        .message = message,
    };
    char *kind, *stack;

    coplog_event_format(e, message, sizeof message);
    schedlog_parse_message(message, &row, &kind, &stack);
    row.kind = kind;
    row.stack = stack;
    int rc = store_put_sched_event(store, &row);
    g_free(kind);
    g_free(stack);
    return rc;
}

int64_t schedlog_import(struct schedlog *log, struct store *store, bool live)
{
    struct coplog_event event;
    int64_t copied = 0;
    int rc;

    if (!open_reader(log))
        return 0;
    while ((rc = coplog_reader_next(log->reader, &event,
                                    live ? COPLOG_READ_LIVE
                                         : COPLOG_READ_ALL)) > 0) {
        if (put_event(store, &event) != 0)
            return -1;
        if (event.order > log->position)
            log->position = event.order;
        copied++;
    }
    if (rc < 0 && !log->quiet)
        g_printerr("coprofd: %s\n", coplog_reader_error(log->reader));
    log->uncommitted += (uint64_t)copied;
    if (link_early_creates(log, store) != 0)
        return -1;
    if (store_put_meta_text(store, "eventlog.path", log->path) != 0 ||
        store_put_meta_int(store, "eventlog.position",
                           (int64_t)log->position) != 0)
        return -1;
    return copied;
}

void schedlog_committed(struct schedlog *log)
{
    log->committed = log->position;
    log->imported += log->uncommitted;
    log->uncommitted = 0;
}

void schedlog_rolled_back(struct schedlog *log)
{
    log->position = log->committed;
    log->uncommitted = 0;
    if (log->reader != NULL)
        coplog_reader_seek(log->reader, log->committed);
}

uint64_t schedlog_imported(const struct schedlog *log)
{
    return log->imported;
}
