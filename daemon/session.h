/*
 * session.h — what coprofd makes of a stream: contexts, overlay states and
 * attributed sample counts, waiting in memory to be flushed.
 *
 * Bytes of the stream go in (session_feed, in any split); the decoder of
 * escape-protocol/ turns them into samples and records, and the session
 * keeps, per slot, the context bound to it and the samples of its open
 * poll group, and per context its overlay guard state and timeline.  When
 * a group closes, each distinct LS address of it is judged, and its count
 * added to the count table (samples that the guards decide are resolved
 * once per guard state, see session.c):
 *
 *   - exact: the address's region (if any) kept its guard between the
 *     guard reads around the samples: (context, image, file offset);
 *   - ambiguous: the guard changed in that window: (context, image, LS
 *     address, region, guard before, guard after), with the candidates the
 *     overlay library lists — never dropped, never guessed;
 *   - unmapped: no file bytes there, or the image cannot be used (raw LS
 *     address kept, with the reason);
 *   - orphan: a sample of a slot with no context.
 *
 * Samples drained at a context switch after the slot's last guard read
 * (its trailing group) cannot be judged yet when they lie in an overlay
 * region: the context's next first read (when it is bound again; its local
 * store does not change meanwhile) tells whether the guard changed after
 * the last read.  Until then they are "pending"; at the end of the stream
 * the remaining ones become ambiguous with an unknown "after".
 * daemon/README.md gives the rules with examples.
 *
 * The exact samples of each poll group also go, by function, into time
 * buckets of the context (the sample timeline), at the group's TIME.
 *
 * session_write() puts everything that changed since the last flush into
 * the store's open transaction; session_written() forgets it once the
 * transaction committed.  If it did not, the next flush writes it again.
 */
#ifndef COPROF_DAEMON_SESSION_H
#define COPROF_DAEMON_SESSION_H

#include "daemon/store.h"
#include "escape-protocol/copstream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct session;

/*
 * Images are cached under session_dir.  timeline_ns: the width of the
 * sample timeline's buckets (0: no timeline).  quiet: no warnings.
 */
struct session *session_new(const char *session_dir, uint64_t timeline_ns,
                            bool quiet);
void session_free(struct session *session);

void session_feed(struct session *session, const uint8_t *bytes,
                  size_t length);
/* The end of the stream (or of the daemon): decodes the tail, closes every
 * open group and binding, and judges the pending samples. */
void session_finish(struct session *session);

int session_write(struct session *session, struct store *store);
void session_written(struct session *session);

/* Samples by what became of them, for summaries and tests. */
struct session_totals {
    uint64_t samples;           /* sample words decoded */
    uint64_t exact, ambiguous, unmapped, orphan;
    uint64_t pending;           /* waiting for a guard read */
    uint64_t open;              /* in open poll groups */
    uint64_t lost;
    uint64_t contexts, images, errors;
    uint64_t ignored_overlays;  /* OVERLAY records of impossible regions */
    /* What the session holds now (memory O(live contexts + places)): */
    uint64_t live_contexts;     /* contexts held: not ended, or not flushed */
    uint64_t context_bytes;     /* bytes held for them, its own accounting */
    uint64_t count_entries;     /* entries of the count table */
};
/* (Resolves the samples decided but not yet counted, first.) */
void session_get_totals(struct session *session,
                        struct session_totals *totals);
const struct copstream_stats *session_stream_stats(
    const struct session *session);
bool session_stopped(const struct session *session);
/*
 * Whether the STOP's totals (the writer's count of samples and losses)
 * differ from what was decoded up to it; then one line saying both into
 * buf.  False before a STOP.
 */
bool session_stop_mismatch(const struct session *session, char *buf,
                           size_t len);
/* The START's start_time_ns (CLOCK_MONOTONIC when the driver started) in
 * *ns; false before a START was read. */
bool session_start_time(const struct session *session, uint64_t *ns);

#endif /* COPROF_DAEMON_SESSION_H */
