/*
 * stream-rules.c - the writer-rule checker of the driver's tests (see
 * stream-rules.h).
 *
 * Each slot has a phase that the poll-group rule moves forward: OPEN (a
 * group may start: samples allowed), SWITCHED (just after CONTEXT: its
 * first guard reads, then samples), OVERLAY (guard changes: no more
 * samples), LOST (no more samples or guard changes).  TIME, CONTEXT and
 * RELEASE close a group.  A placed OVERLAY (stream 1.1) sits among the
 * samples: it leaves the phase as it is, but may not follow the group's
 * unplaced OVERLAY or LOST records.  A CALLSTACK (stream 1.4) must follow
 * a sample of its slot immediately.
 */
#include "kernel-driver/tests/stream-rules.h"

#include <inttypes.h>
#include <string.h>

enum {
	PHASE_OPEN,
	PHASE_SWITCHED,
	PHASE_OVERLAY,
	PHASE_LOST,
	PHASE_STALL
};

static void violation(struct stream_rules *rules, guint64 offset,
		      const char *format, ...) G_GNUC_PRINTF(3, 4);

static void violation(struct stream_rules *rules, guint64 offset,
		      const char *format, ...)
{
	va_list args;
	char *text;

	rules->violations++;
	if (rules->messages->len >= RULES_KEPT_VIOLATIONS)
		return;
	va_start(args, format);
	text = g_strdup_vprintf(format, args);
	va_end(args);
	g_ptr_array_add(rules->messages,
			g_strdup_printf("offset %" PRIu64 ": %s", offset, text));
	g_free(text);
}

static void free_context(gpointer data)
{
	struct rules_context *context = data;

	g_array_free(context->addresses, TRUE);
	g_array_free(context->overlays, TRUE);
	g_array_free(context->overlay_at, TRUE);
	g_array_free(context->stacks, TRUE);
	g_free(context);
}

static struct rules_context *context_for(struct stream_rules *rules,
					 guint64 id, guint32 slot)
{
	struct rules_context *context;

	context = g_hash_table_lookup(rules->contexts, &id);
	if (context)
		return context;
	context = g_new0(struct rules_context, 1);
	context->id = id;
	context->slot = slot;
	context->addresses = g_array_new(FALSE, FALSE, sizeof(guint32));
	context->overlays = g_array_new(FALSE, FALSE,
					 sizeof(struct copstream_overlay));
	context->overlay_at = g_array_new(FALSE, FALSE, sizeof(guint));
	context->stacks = g_array_new(FALSE, FALSE, sizeof(struct rules_stack));
	g_hash_table_insert(rules->contexts, &context->id, context);
	return context;
}

static int image_sent(const struct stream_rules *rules,
		      const struct copstream_image_id *id)
{
	for (guint i = 0; i < rules->images->len; i++) {
		const struct copstream_image_id *sent = &g_array_index(
			rules->images, struct copstream_image_id, i);

		if (memcmp(sent, id, sizeof(*id)) == 0)
			return 1;
	}
	return 0;
}

/*
 * A slot's cycles only go forward, except that the trace unit's fast mode
 * counts a block when it starts and takes back the block's tail (what
 * follows its last store) when the program exits inside it
 * (docs/trace-unit.md): a record read before the exit may be ahead by up
 * to a block's length.
 */
static void check_cycle(struct stream_rules *rules, guint32 slot,
			guint64 cycle, guint64 offset, const char *what)
{
	struct rules_slot *s = &rules->slots[slot];

	if (cycle + RULES_BLOCK_TAIL_MAX < s->last_cycle)
		violation(rules, offset, "%s of slot %u at cycle %" PRIu64
			  " after cycle %" PRIu64, what, slot, cycle,
			  s->last_cycle);
	else
		s->last_cycle = cycle;
}

static void on_samples(void *user, guint64 offset,
		       const struct copstream_sample *samples, size_t count)
{
	struct stream_rules *rules = user;

	for (size_t i = 0; i < count; i++) {
		struct rules_slot *s = &rules->slots[samples[i].slot];
		guint64 at = offset + 8 * i;

		s->samples++;
		if (!s->has_context) {
			violation(rules, at, "sample of slot %u without a "
				  "context", samples[i].slot);
			continue;
		}
		if (s->phase == PHASE_OVERLAY || s->phase == PHASE_LOST ||
		    s->phase == PHASE_STALL)
			violation(rules, at, "sample of slot %u after the "
				  "%s records of its poll group",
				  samples[i].slot, s->phase == PHASE_LOST ?
				  "LOST" : s->phase == PHASE_STALL ? "STALL" :
				  "OVERLAY");
		s->phase = PHASE_OPEN;
		g_array_append_val(context_for(rules, s->context_id,
					       samples[i].slot)->addresses,
				   samples[i].address);
	}
	if (count) {
		rules->after_sample = 1;
		rules->sample_slot = samples[count - 1].slot;
	}
}

/* CALLSTACK: right after a sample of its slot, kept for its context. */
static void on_callstack(struct stream_rules *rules,
			 const struct copstream_record *rec)
{
	const struct copstream_callstack *c = &rec->u.callstack;
	struct rules_slot *s = &rules->slots[c->slot];
	struct rules_stack stack = { c->depth, c->n_frames, { 0 } };

	s->callstacks++;
	if (!rules->after_sample || rules->sample_slot != c->slot ||
	    !s->has_context) {
		violation(rules, rec->offset, "CALLSTACK of slot %u not right "
			  "after a sample of it", c->slot);
		return;
	}
	for (guint32 i = 0; i < c->n_frames; i++)
		stack.frames[i] = copstream_frame(c->frames, i);
	g_array_append_val(context_for(rules, s->context_id, c->slot)->stacks,
			   stack);
}

static void on_image(struct stream_rules *rules,
		     const struct copstream_record *rec)
{
	if (image_sent(rules, &rec->u.image.id))
		violation(rules, rec->offset, "IMAGE of inode %" PRIu64
			  " sent again", rec->u.image.id.inode);
	else
		g_array_append_val(rules->images, rec->u.image.id);
}

static void on_context(struct stream_rules *rules,
		       const struct copstream_record *rec)
{
	const struct copstream_context *c = &rec->u.context;
	struct rules_slot *s = &rules->slots[c->slot];
	struct rules_context *context;

	if (!image_sent(rules, &c->image))
		violation(rules, rec->offset, "CONTEXT %" PRIu64 " names an "
			  "image not sent before", c->context_id);
	check_cycle(rules, c->slot, c->cycle, rec->offset, "CONTEXT");
	context = context_for(rules, c->context_id, c->slot);
	context->switches++;
	context->slot = c->slot;
	s->has_context = 1;
	s->context_id = c->context_id;
	s->phase = PHASE_SWITCHED;
	s->contexts++;
}

static void on_overlay(struct stream_rules *rules,
		       const struct copstream_record *rec)
{
	const struct copstream_overlay *o = &rec->u.overlay;
	struct rules_slot *s = &rules->slots[o->slot];
	struct rules_context *context;

	s->overlays++;
	check_cycle(rules, o->slot, o->cycle, rec->offset, "OVERLAY");
	if (!s->has_context) {
		violation(rules, rec->offset, "OVERLAY of slot %u without a "
			  "context", o->slot);
		return;
	}
	context = context_for(rules, s->context_id, o->slot);
	if (o->flags & COPSTREAM_OVERLAY_PLACED) {
		s->placed++;
		if (s->phase == PHASE_OVERLAY || s->phase == PHASE_LOST ||
		    s->phase == PHASE_STALL)
			violation(rules, rec->offset, "placed OVERLAY of slot "
				  "%u after the %s records of its poll group",
				  o->slot, s->phase == PHASE_LOST ? "LOST" :
				  "unplaced OVERLAY");
	} else {
		if (s->phase == PHASE_LOST || s->phase == PHASE_STALL)
			violation(rules, rec->offset, "OVERLAY of slot %u "
				  "after the LOST records of its poll group",
				  o->slot);
		if (s->phase != PHASE_SWITCHED)
			s->phase = PHASE_OVERLAY;
	}
	g_array_append_val(context->overlays, *o);
	g_array_append_val(context->overlay_at, context->addresses->len);
}

static void on_lost(struct stream_rules *rules,
		    const struct copstream_record *rec)
{
	const struct copstream_lost *l = &rec->u.lost;
	struct rules_slot *s = &rules->slots[l->slot];
	guint32 cause = l->cause < COPSTREAM_LOST_CAUSE_END ? l->cause : 0;

	check_cycle(rules, l->slot, l->cycle, rec->offset, "LOST");
	s->lost[cause] += l->count;
	s->lost_total += l->count;
	if (s->phase == PHASE_STALL)
		violation(rules, rec->offset, "LOST of slot %u after the "
			  "STALL of its poll group", l->slot);
	s->phase = PHASE_LOST;
}

/* STALL: after the group's LOST records, before its TIME, under a
 * context (escape-protocol/README.md, writer rule 4). */
static void on_stall(struct stream_rules *rules,
		     const struct copstream_record *rec)
{
	const struct copstream_stall *t = &rec->u.stall;
	struct rules_slot *s = &rules->slots[t->slot];

	check_cycle(rules, t->slot, t->cycle, rec->offset, "STALL");
	if (!s->has_context)
		violation(rules, rec->offset, "STALL of slot %u without a "
			  "context", t->slot);
	if (s->phase == PHASE_STALL)
		violation(rules, rec->offset, "two STALLs of slot %u in one "
			  "poll group", t->slot);
	s->stalls += t->count;
	s->stall_ns += t->ns;
	s->phase = PHASE_STALL;
}

static void keep_record(struct stream_rules *rules,
			const struct copstream_record *rec)
{
	struct copstream_record copy = *rec;

	copy.payload = NULL;
	if (copy.code == COPSTREAM_IMAGE)
		copy.u.image.path = NULL;
	if (copy.code == COPSTREAM_CALLSTACK)
		copy.u.callstack.frames = NULL;
	g_array_append_val(rules->records, copy);
}

static void on_record(void *user, const struct copstream_record *rec)
{
	struct stream_rules *rules = user;

	keep_record(rules, rec);
	if (rec->code == COPSTREAM_CALLSTACK)
		on_callstack(rules, rec);
	rules->after_sample = 0;
	switch (rec->code) {
	case COPSTREAM_START:
		if (!rules->started)
			rules->start = rec->u.start;
		rules->started = 1;
		break;
	case COPSTREAM_IMAGE:
		on_image(rules, rec);
		break;
	case COPSTREAM_CONTEXT:
		on_context(rules, rec);
		break;
	case COPSTREAM_OVERLAY:
		on_overlay(rules, rec);
		break;
	case COPSTREAM_LOST:
		on_lost(rules, rec);
		break;
	case COPSTREAM_STALL:
		on_stall(rules, rec);
		break;
	case COPSTREAM_TIME:
		check_cycle(rules, rec->u.time.slot, rec->u.time.cycle,
			    rec->offset, "TIME");
		rules->slots[rec->u.time.slot].phase = PHASE_OPEN;
		rules->slots[rec->u.time.slot].times++;
		break;
	case COPSTREAM_RELEASE:
		check_cycle(rules, rec->u.release.slot, rec->u.release.cycle,
			    rec->offset, "RELEASE");
		rules->slots[rec->u.release.slot].has_context = 0;
		rules->slots[rec->u.release.slot].phase = PHASE_OPEN;
		break;
	case COPSTREAM_STOP:
		rules->stopped = 1;
		rules->stop = rec->u.stop;
		break;
	}
}

static void on_error(void *user, const struct copstream_error *err)
{
	violation(user, err->offset, "decoder: %s",
		  copstream_error_name(err->kind));
}

struct stream_rules *stream_rules_new(void)
{
	struct stream_rules *rules = g_new0(struct stream_rules, 1);
	struct copstream_handler handler = {
		.samples = on_samples,
		.record = on_record,
		.error = on_error,
		.user = rules,
	};

	copstream_decoder_init(&rules->decoder, &handler);
	rules->contexts = g_hash_table_new_full(g_int64_hash, g_int64_equal,
						NULL, free_context);
	rules->images = g_array_new(FALSE, FALSE,
				    sizeof(struct copstream_image_id));
	rules->records = g_array_new(FALSE, FALSE,
				     sizeof(struct copstream_record));
	rules->messages = g_ptr_array_new_with_free_func(g_free);
	return rules;
}

void stream_rules_free(struct stream_rules *rules)
{
	if (!rules)
		return;
	g_hash_table_destroy(rules->contexts);
	g_array_free(rules->images, TRUE);
	g_array_free(rules->records, TRUE);
	g_ptr_array_free(rules->messages, TRUE);
	g_free(rules);
}

void stream_rules_feed(struct stream_rules *rules, const void *bytes,
		       size_t length)
{
	copstream_decoder_feed(&rules->decoder, bytes, length);
}

void stream_rules_finish(struct stream_rules *rules)
{
	copstream_decoder_finish(&rules->decoder);
}

struct rules_context *stream_rules_context(struct stream_rules *rules,
					   guint64 id)
{
	return g_hash_table_lookup(rules->contexts, &id);
}

static gint compare_ids(gconstpointer a, gconstpointer b)
{
	guint64 x = *(const guint64 *)a;
	guint64 y = *(const guint64 *)b;

	return x < y ? -1 : x > y;
}

void stream_rules_print(const struct stream_rules *rules, FILE *out)
{
	GList *ids = g_list_sort(g_hash_table_get_keys(rules->contexts),
				 compare_ids);

	for (guint32 i = 0; i < COPSTREAM_MAX_SLOTS; i++) {
		const struct rules_slot *s = &rules->slots[i];

		if (!s->samples && !s->lost_total && !s->contexts)
			continue;
		fprintf(out, "rules slot=%u samples=%" PRIu64 " lost=%" PRIu64
			" contexts=%" PRIu64 " overlays=%" PRIu64 "\n", i,
			s->samples, s->lost_total, s->contexts, s->overlays);
	}
	for (GList *id = ids; id; id = id->next) {
		const struct rules_context *c = g_hash_table_lookup(
			rules->contexts, id->data);

		fprintf(out, "rules context=%" PRIu64 " samples=%u switches=%"
			PRIu64 "\n", c->id, c->addresses->len, c->switches);
	}
	g_list_free(ids);
	fprintf(out, "violations=%" PRIu64 "\n", rules->violations);
	for (guint i = 0; i < rules->messages->len; i++)
		fprintf(out, "violation: %s\n",
			(const char *)g_ptr_array_index(rules->messages, i));
}
