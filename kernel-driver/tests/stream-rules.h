/*
 * stream-rules.h - checks a driver's stream against the writer rules of
 * escape-protocol/README.md §3, for the driver's tests.
 *
 * The stream is decoded with the escape-protocol decoder; on top of its
 * own errors (every one is a violation here) the checker follows each slot
 * and reports:
 *
 *   - an IMAGE sent twice, or a CONTEXT naming an image not sent before;
 *   - a sample or OVERLAY of a slot with no CONTEXT (or after RELEASE);
 *   - a poll group out of order: within a slot, between two TIME (or
 *     CONTEXT, RELEASE) records, samples (with placed OVERLAY records
 *     among them), then unplaced OVERLAY, then LOST;
 *   - a slot's cycles going backwards across its records (by more than a
 *     block's provisional tail, which the trace unit takes back at exit).
 *
 * It also keeps, per context, the sample addresses in stream order, and
 * per slot the samples and LOST counts, for conservation checks.
 */
#ifndef COPROF_COPDRV_STREAM_RULES_H
#define COPROF_COPDRV_STREAM_RULES_H

#include "escape-protocol/copstream.h"

#include <glib.h>
#include <stdio.h>

#define RULES_KEPT_VIOLATIONS 20

/* Instructions in one QEMU translation block, at most. */
#define RULES_BLOCK_TAIL_MAX 512

struct rules_slot {
	int has_context;
	guint64 context_id;
	int phase;
	guint64 last_cycle;
	guint64 samples;
	guint64 lost[COPSTREAM_LOST_CAUSE_END];
	guint64 lost_total;
	guint64 contexts;		/* CONTEXT records */
	guint64 overlays;		/* OVERLAY records */
	guint64 placed;			/* of them placed */
	guint64 times;			/* TIME records */
	guint64 stalls;			/* sum of STALL counts */
	guint64 stall_ns;		/* sum of STALL times */
	guint64 callstacks;		/* CALLSTACK records (1.4) */
};

/* A sample's CALLSTACK (1.4), frames innermost first. */
struct rules_stack {
	guint32 depth;
	guint32 n_frames;
	guint64 frames[COPSTREAM_MAX_FRAMES];
};

struct rules_context {
	guint64 id;
	guint32 slot;
	GArray *addresses;		/* guint32, in stream order */
	guint64 switches;		/* CONTEXT records naming it */
	GArray *overlays;		/* struct copstream_overlay */
	GArray *overlay_at;		/* guint: addresses before each one */
	GArray *stacks;			/* struct rules_stack, one per sample
					 * that had one, in stream order */
};

struct stream_rules {
	struct copstream_decoder decoder;
	struct copstream_start start;
	int started;
	int stopped;
	struct copstream_stop stop;
	struct rules_slot slots[COPSTREAM_MAX_SLOTS];
	GArray *records;		/* struct copstream_record, in order;
					 * payload and path pointers NULL */
	GHashTable *contexts;		/* id -> struct rules_context */
	GArray *images;			/* struct copstream_image_id */
	int after_sample;		/* the last item was a sample ... */
	guint32 sample_slot;		/* ... of this slot */
	guint64 violations;
	GPtrArray *messages;		/* the first RULES_KEPT_VIOLATIONS */
};

struct stream_rules *stream_rules_new(void);
void stream_rules_free(struct stream_rules *rules);

void stream_rules_feed(struct stream_rules *rules, const void *bytes,
		       size_t length);
void stream_rules_finish(struct stream_rules *rules);

/* The context with that id, or NULL if no CONTEXT named it. */
struct rules_context *stream_rules_context(struct stream_rules *rules,
					   guint64 id);

/* Per slot and per context counts, then the violations, one per line. */
void stream_rules_print(const struct stream_rules *rules, FILE *out);

#endif /* COPROF_COPDRV_STREAM_RULES_H */
