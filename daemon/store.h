/*
 * store.h — the session database: an SQLite file in WAL mode.
 *
 * A session directory holds session.db (docs/session-format.md gives the
 * schema), images/, the image cache, and .lock, on which the daemon that
 * records it holds an flock(): abi/session-dir.h names them.  The daemon
 * writes the database only in flushes: store_begin(), any number of
 * store_put_*() calls, then store_commit() — one transaction, so a reader
 * (or a daemon killed mid-flush) sees every flush whole or not at all.  On failure the caller
 * calls store_rollback() and keeps its data for the next try.
 *
 * The put functions take plain rows; they know SQL, not the daemon's
 * state.  Counts are added (an upsert adds the delta), every other row is
 * inserted or replaced whole.
 */
#ifndef COPROF_DAEMON_STORE_H
#define COPROF_DAEMON_STORE_H

#include "abi/session-dir.h"
#include "daemon/counts.h"
#include "escape-protocol/copstream.h"
#include "overlay/overlay.h"

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct store;

/*
 * Opens DIR/session.db, creating DIR and the schema when needed.  A
 * database that already holds a profile is refused unless overwrite is
 * set, in which case the session (database and image cache) is removed
 * first.  NULL with *error set on failure.
 */
struct store *store_open(const char *session_dir, bool overwrite,
                         GError **error);
void store_close(struct store *store);
const char *store_dir(const struct store *store);
/* How long a transaction waits for another writer (default 5000 ms). */
void store_set_busy_timeout(struct store *store, unsigned ms);
const char *store_db_path(const struct store *store);

int store_begin(struct store *store, GError **error);
int store_commit(struct store *store, GError **error);
void store_rollback(struct store *store);

/* A session key (docs/session-format.md lists them). */
int store_put_meta_text(struct store *store, const char *key,
                        const char *value);
int store_put_meta_int(struct store *store, const char *key, int64_t value);
/* The value of a session key, or fallback when absent. */
int64_t store_get_meta_int(struct store *store, const char *key,
                           int64_t fallback);

struct store_image {
    uint32_t id;
    const char *path;           /* NULL when no IMAGE record named it */
    uint64_t offset;            /* of the ELF header in the file */
    struct copstream_image_id identity;
    const char *status;         /* "ok", "no-path", "unreadable", "changed" */
    const char *message;        /* why it cannot be used, or NULL */
    const char *cache_file;     /* relative to the session dir, or NULL */
    const struct ovl_image *ovl;  /* NULL unless usable */
};
int store_put_image(struct store *store, const struct store_image *image);

struct store_context {
    uint32_t id;
    uint64_t context_id;
    uint32_t pid, tid;
    uint64_t object_id;
    uint32_t image;             /* images.id */
    uint32_t first_slot;
    uint64_t first_cycle;
};
int store_put_context(struct store *store,
                      const struct store_context *context);

#define STORE_TIME_NONE  (-1)   /* a time not known */

struct store_binding {
    uint32_t id;
    uint32_t slot;
    uint32_t context;           /* contexts.id */
    uint64_t start_cycle;
    uint64_t end_cycle;
    int64_t start_time_ns;      /* or STORE_TIME_NONE */
    int64_t end_time_ns;        /* or STORE_TIME_NONE */
    const char *end_reason;     /* NULL while bound */
};
int store_put_binding(struct store *store,
                      const struct store_binding *binding);

/*
 * Adds delta samples to the row of entry's key; an exact entry's also to
 * sample_stalls under its cause's stall, and a DMA wait's to
 * dma_wait_samples.
 */
int store_add_count(struct store *store, const struct count_entry *entry,
                    const struct count_cause *cause, uint64_t delta);
/* Records the candidates of an ambiguous LS address of an image once. */
int store_put_candidates(struct store *store, uint32_t image,
                         const struct ovl_image *ovl, uint32_t ls_addr);

/* Adds count exact samples of one function to a timeline bucket. */
int store_add_timeline(struct store *store, uint32_t context, uint32_t image,
                       uint64_t bucket_start_ns, uint64_t function_offset,
                       uint64_t count);
/* Adds count exact samples of one stall reason to a timeline bucket. */
int store_add_stall_timeline(struct store *store, uint32_t context,
                             uint32_t image, uint64_t bucket_start_ns,
                             uint32_t stall, uint64_t count);

/* pending_samples is replaced whole at each flush. */
int store_clear_pending(struct store *store);
int store_put_pending(struct store *store, uint32_t context, uint32_t image,
                      uint32_t ls_addr, uint32_t region, int64_t guard,
                      uint64_t count);

struct store_overlay_event {
    uint32_t context;
    uint32_t slot;
    uint32_t region;            /* 1-based */
    uint32_t guard;
    uint64_t cycle;
    bool initial;               /* the first read after a bind */
    bool placed;                /* placed in the sample sequence (1.1) */
};
int store_put_overlay_event(struct store *store,
                            const struct store_overlay_event *event);

struct store_lost {
    uint32_t slot;
    uint32_t context;           /* 0 when the slot had none */
    uint32_t cause;
    uint64_t count;
    uint64_t cycle;
};
int store_put_lost(struct store *store, const struct store_lost *lost);

/* A STALL record: the slot's producer waited for a full FIFO. */
struct store_stall {
    uint32_t slot;
    uint32_t context;           /* 0 when the slot had none */
    uint64_t count;
    uint64_t ns;
    uint64_t cycle;
};
int store_put_stall(struct store *store, const struct store_stall *stall);

int store_put_time(struct store *store, uint32_t slot, uint64_t cycle,
                   uint64_t time_ns);

/* Adds count samples to a call stack of a context (tables stacks and, by
 * the samples' stall, stack_stalls; frames: docs/session-format.md). */
int store_add_stack(struct store *store, uint32_t context, uint32_t image,
                    uint32_t stall, const char *frames, uint64_t count);

/* Sets the count of an error kind (a total, not a delta). */
int store_put_error_count(struct store *store, const char *kind,
                          uint64_t count);
int store_put_error(struct store *store, uint64_t offset, const char *kind,
                    uint16_t code);

struct store_sched_event {
    uint64_t order;
    uint32_t ring;
    uint64_t seq;
    uint64_t time_ns;
    unsigned level;
    uint32_t pid, tid, cpu;     /* of the writer (copsim) */
    const char *kind;           /* first word of the message, or NULL */
    int64_t slot, context_id, cycle, host_pid, host_tid;  /* -1: absent */
    const char *stack;          /* "stack=" field, or NULL */
    const char *message;
};
int store_put_sched_event(struct store *store,
                          const struct store_sched_event *event);
/* Copies creation stacks from "create" events into contexts lacking one. */
int store_link_creation_stacks(struct store *store);
/* The creation stack of the context copsim numbers context_id, when it
 * has none yet (one created before the session's START). */
int store_set_creation_stack(struct store *store, int64_t context_id,
                             const char *stack);

/* The format version of the sessions written (abi/session-schema.sql's
 * @format_version): the session key format_version and user_version. */
int store_format_version(void);

/* The message of the last SQLite failure, for warnings. */
const char *store_last_error(const struct store *store);
/* The OS error (errno) behind the last SQLite failure, or 0. */
int store_last_errno(const struct store *store);

#endif /* COPROF_DAEMON_STORE_H */
