/*
 * test-driver.c - GTest suite of the driver core over the hosted shim,
 * with a synthetic producer: the test pushes captures into a real trace
 * register file with the trace unit's own producer primitive
 * (trace_slot_push), acts as the scheduler by calling the context-switch
 * hooks, and reads the stream from the driver's socket.
 *
 * Every stream is decoded with the escape-protocol decoder and checked
 * against the writer rules (stream-rules.c).  A pushed PC field carries
 * the context that pushed it (context << 10 | sequence), so the tests can
 * tell that every sample went to the context that produced it, in order.
 */
#include "kernel-driver/copdrv-hosted.h"
#include "kernel-driver/tests/stream-rules.h"
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"

#include <glib.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LS_SIZE		TRACE_DEFAULT_LS_SIZE
#define GUARD_OFFSET	0x100u
#define MAX_CONTEXTS	16

struct fixture {
	char *dir;
	struct trace_unit *unit;
	struct copdrv_os *os;
	struct copdrv *drv;
	guint32 *ls[MAX_CONTEXTS];	/* a local store per context */
	int fd;
	GThread *reader;
	GByteArray *stream;
	struct stream_rules *rules;
	/* What the producer queued, per context, in order. */
	GArray *queued[MAX_CONTEXTS];
};

/* ---- Fixture ------------------------------------------------------------- */

static void setup_stacks(struct fixture *f, guint32 slots, guint32 depth,
			 guint32 stack_depth, unsigned int flags)
{
	struct trace_geometry geo;
	char err[512] = "";

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->dir = g_dir_make_tmp("test-driver-XXXXXX", NULL);
	g_assert_nonnull(f->dir);
	trace_geometry_default(&geo);
	geo.n_slots = slots;
	geo.fifo_depth = depth;
	geo.stack_depth = stack_depth;
	f->unit = trace_unit_create_temp(f->dir, &geo, err, sizeof(err));
	g_assert_nonnull(f->unit);
	f->os = copdrv_hosted_create(f->unit->base, f->unit->size, flags,
				     err, sizeof(err));
	if (!f->os)
		g_test_message("%s", err);
	g_assert_nonnull(f->os);
	f->drv = copdrv_hosted_driver(f->os);
	for (int i = 0; i < MAX_CONTEXTS; i++) {
		f->ls[i] = g_malloc0(LS_SIZE);
		f->queued[i] = g_array_new(FALSE, FALSE, sizeof(guint32));
	}
}

static void setup_with(struct fixture *f, guint32 slots, guint32 depth,
		       unsigned int flags)
{
	setup_stacks(f, slots, depth, 0, flags);
}

static void teardown(struct fixture *f)
{
	copdrv_hosted_destroy(f->os);
	if (f->reader)
		g_thread_join(f->reader);
	if (f->fd >= 0)
		close(f->fd);
	if (f->stream)
		g_byte_array_free(f->stream, TRUE);
	stream_rules_free(f->rules);
	trace_unit_close(f->unit, 1);
	g_rmdir(f->dir);
	g_free(f->dir);
	for (int i = 0; i < MAX_CONTEXTS; i++) {
		g_free(f->ls[i]);
		g_array_free(f->queued[i], TRUE);
	}
}

static gpointer read_stream(gpointer data)
{
	struct fixture *f = data;
	guint8 buf[65536];
	ssize_t got;

	while ((got = read(f->fd, buf, sizeof(buf))) > 0)
		g_byte_array_append(f->stream, buf, (guint)got);
	return NULL;
}

static void start_reader(struct fixture *f)
{
	if (!f->stream)
		f->stream = g_byte_array_new();
	f->reader = g_thread_new("reader", read_stream, f);
}

/* Reads what the socket holds now, up to max bytes, without waiting. */
static void read_some(struct fixture *f, gsize max)
{
	guint8 buf[65536];
	ssize_t got;

	if (!f->stream)
		f->stream = g_byte_array_new();
	while (max > 0 && (got = recv(f->fd, buf, MIN(max, sizeof(buf)),
				      MSG_DONTWAIT)) > 0) {
		g_byte_array_append(f->stream, buf, (guint)got);
		max -= (gsize)got;
	}
}

static struct copdrv_params params_for(const struct fixture *f,
				       guint64 poll_ns, guint32 buffer)
{
	struct copdrv_params p = {
		.lfsr_count = 1000,
		.lfsr_value = lfsr_value_for_count(1000),
		.poll_interval_ns = poll_ns,
		.clock_hz = 1000000000,
		.fifo_depth = f->unit->header->fifo_depth,
		.buffer_bytes = buffer,
	};

	return p;
}

static void start(struct fixture *f, guint64 poll_ns, guint32 buffer,
		  int read_now)
{
	struct copdrv_params p = params_for(f, poll_ns, buffer);
	char err[512] = "";

	g_assert_cmpint(copdrv_hosted_start(f->os, &p, &f->fd, err,
					    sizeof(err)), ==, 0);
	if (read_now)
		start_reader(f);
}

/* Stops, reads the whole stream and checks it against the rules. */
static void stop_and_check(struct fixture *f)
{
	char err[512] = "";

	g_assert_cmpint(copdrv_hosted_stop(f->os, err, sizeof(err)), ==, 0);
	if (!f->reader)
		start_reader(f);
	g_thread_join(f->reader);
	f->reader = NULL;
	f->rules = stream_rules_new();
	stream_rules_feed(f->rules, f->stream->data, f->stream->len);
	stream_rules_finish(f->rules);
	if (f->rules->violations)
		stream_rules_print(f->rules, stderr);
	g_assert_cmpuint(f->rules->violations, ==, 0);
	g_assert_true(f->rules->started);
	g_assert_true(f->rules->stopped);
}

/* ---- Synthetic contexts and producer ------------------------------------- */

static const char *const image_paths[] = {
	"/opt/images/first.elf", "/opt/images/second image.elf",
};

static struct copdrv_context context_for(struct fixture *f, guint32 slot,
					 guint32 id, guint32 regions)
{
	guint32 image = id % 2;
	struct copdrv_context ctx = {
		.slot = slot,
		.pid = 4000 + id,
		.tid = 5000 + id,
		.context_id = id,
		.object_id = 0x10000 + id,
		.image = { .device = 2049, .inode = 700 + image,
			   .size = 4096 * (image + 1), .hash = 0xabc + image },
		.image_offset = 128 * image,
		.path = (const guint8 *)image_paths[image],
		.path_length = (guint32)strlen(image_paths[image]),
		.ls = f->ls[id],
		.guard_offset = GUARD_OFFSET,
		.regions = regions,
	};

	return ctx;
}

static void bind_context(struct fixture *f, guint32 slot, guint32 id)
{
	struct copdrv_context ctx = context_for(f, slot, id, 2);

	g_assert_cmpint(copdrv_bind(f->drv, &ctx), ==, 0);
}

/* The PC field context `id` pushes as its n-th capture. */
static guint16 field_of(guint32 id, guint32 n)
{
	return (guint16)(id << 10 | (n & 1023));
}

/* Pushes count captures of context id on slot, remembering the queued. */
static void push(struct fixture *f, guint32 slot, guint32 id, guint32 count)
{
	struct trace_regs_slot *s = trace_unit_slot(f->unit, slot);
	guint32 depth = f->unit->header->fifo_depth;

	for (guint32 i = 0; i < count; i++) {
		guint16 field = field_of(id, f->queued[id]->len + i);
		guint32 address = (guint32)field << 2;

		if (trace_slot_push(s, depth, field))
			g_array_append_val(f->queued[id], address);
	}
}

/* The same through the trace unit's capture entry point, under the
 * slot's FIFO-full policy (stall: it waits for the driver to drain). */
static void capture(struct fixture *f, guint32 slot, guint32 id,
		    guint32 count)
{
	struct trace_regs_slot *s = trace_unit_slot(f->unit, slot);

	for (guint32 i = 0; i < count; i++) {
		guint16 field = field_of(id, f->queued[id]->len);
		guint32 address = (guint32)field << 2;

		if (trace_slot_capture(f->unit, s, field))
			g_array_append_val(f->queued[id], address);
	}
}

static void assert_addresses(struct fixture *f, guint32 id)
{
	struct rules_context *c = stream_rules_context(f->rules, id);
	GArray *want = f->queued[id];

	g_assert_nonnull(c);
	g_assert_cmpuint(c->addresses->len, ==, want->len);
	if (want->len)
		g_assert_cmpmem(c->addresses->data, want->len * 4,
				want->data, want->len * 4);
}

/* For every slot: capture counter = samples in the stream + lost. */
static void assert_conservation(struct fixture *f, guint32 slots)
{
	for (guint32 i = 0; i < slots; i++) {
		struct trace_slot_status status;
		const struct rules_slot *s = &f->rules->slots[i];

		trace_slot_status(f->unit, i, &status);
		g_assert_cmpuint(status.captures, ==, s->samples + s->lost_total);
		g_assert_cmpuint(status.dropped, ==,
				 s->lost[COPSTREAM_LOST_FIFO_OVERFLOW]);
		g_assert_cmpuint(status.outside, ==,
				 s->lost[COPSTREAM_LOST_OUTSIDE_LS]);
	}
}

static guint count_records(struct fixture *f, guint16 code)
{
	guint n = 0;

	for (guint i = 0; i < f->rules->records->len; i++)
		if (g_array_index(f->rules->records, struct copstream_record,
				  i).code == code)
			n++;
	return n;
}

/* ---- Tests --------------------------------------------------------------- */

/* START once, with the parameters; IMAGE once per image, then CONTEXT,
 * for every context bound before the start; the LFSRs programmed. */
/*
 * A controller that announces a new image identity at every bind cannot
 * grow the driver's memory without bound: COPDRV_MAX_IMAGES are kept,
 * one more is refused.
 */
static void test_image_identities_bounded(void)
{
	struct fixture f;
	struct copdrv_context ctx;

	setup_with(&f, 2, 1024, COPDRV_HOSTED_MANUAL_POLL);
	ctx = context_for(&f, 0, 1, 0);
	for (guint32 i = 0; i < COPDRV_MAX_IMAGES; i++) {
		ctx.image.inode = 1000 + i;
		g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, 0);
	}
	ctx.image.inode = 1000 + COPDRV_MAX_IMAGES;
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, -ENOSPC);
	ctx.image.inode = 1000;         /* a known one still binds */
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, 0);
	teardown(&f);
}

/*
 * copdrv_create reads the header once and checks it with the trace
 * unit's validator: a FIFO depth of 2^31, whose slot stride wrapped to a
 * small value in 32 bits, is refused, and so is any stride or offset that
 * is not the geometry's.
 */
static void test_create_refuses_a_bad_header(void)
{
	struct fixture f;
	struct trace_regs_header *h;
	struct copdrv *drv;
	guint8 *copy;
	int error = 0;

	setup_with(&f, 2, 1024, COPDRV_HOSTED_MANUAL_POLL);
	copy = g_memdup2(f.unit->base, f.unit->size);
	h = (struct trace_regs_header *)copy;
	drv = copdrv_create(f.os, copy, f.unit->size, &error);
	g_assert_nonnull(drv);
	copdrv_destroy(drv);
	h->fifo_depth = 1u << 31;
	h->slot_stride = (guint32)(256 + 1024 * 16);    /* the 32-bit wrap */
	g_assert_null(copdrv_create(f.os, copy, f.unit->size, &error));
	g_assert_cmpint(error, ==, -EINVAL);
	memcpy(copy, f.unit->base, sizeof(*h));
	h->slot_stride += 64;
	g_assert_null(copdrv_create(f.os, copy, f.unit->size, &error));
	g_assert_cmpint(error, ==, -EINVAL);
	g_free(copy);
	teardown(&f);
}

static void test_start_announces_bound(void)
{
	struct fixture f;
	const struct copstream_record *rec;
	struct trace_slot_status status;

	setup_with(&f, 8, 1024, COPDRV_HOSTED_MANUAL_POLL);
	bind_context(&f, 0, 1);
	bind_context(&f, 3, 3);
	bind_context(&f, 5, 2);
	start(&f, 1000000, 0, 1);
	trace_slot_status(f.unit, 6, &status);
	g_assert_cmphex(status.programmed_value, ==, lfsr_value_for_count(1000));
	g_assert_cmphex(status.lfsr_state, ==, lfsr_value_for_count(1000));
	stop_and_check(&f);
	trace_slot_status(f.unit, 6, &status);
	g_assert_cmphex(status.programmed_value, ==, 0);
	g_assert_cmphex(status.lfsr_state, ==, 0);

	rec = &g_array_index(f.rules->records, struct copstream_record, 0);
	g_assert_cmpuint(rec->code, ==, COPSTREAM_START);
	g_assert_cmpuint(rec->u.start.slots, ==, 8);
	g_assert_cmpuint(rec->u.start.lfsr_count, ==, 1000);
	g_assert_cmphex(rec->u.start.lfsr_value, ==, lfsr_value_for_count(1000));
	g_assert_cmpuint(rec->u.start.fifo_depth, ==, 1024);
	g_assert_cmpuint(rec->u.start.ls_size, ==, LS_SIZE);
	g_assert_cmpuint(rec->u.start.poll_interval_ns, ==, 1000000);
	g_assert_cmpuint(rec->u.start.clock_hz, ==, 1000000000);
	rec = &g_array_index(f.rules->records, struct copstream_record, 1);
	g_assert_cmpuint(rec->code, ==, COPSTREAM_IMAGE);
	rec = &g_array_index(f.rules->records, struct copstream_record, 2);
	g_assert_cmpuint(rec->code, ==, COPSTREAM_CONTEXT);
	g_assert_cmpuint(rec->u.context.context_id, ==, 1);
	g_assert_cmpuint(rec->u.context.pid, ==, 4001);
	g_assert_cmpuint(count_records(&f, COPSTREAM_START), ==, 1);
	g_assert_cmpuint(count_records(&f, COPSTREAM_IMAGE), ==, 2);
	g_assert_cmpuint(count_records(&f, COPSTREAM_CONTEXT), ==, 3);
	/* Two guard words per context, first read right after CONTEXT. */
	g_assert_cmpuint(count_records(&f, COPSTREAM_OVERLAY), ==, 6);
	teardown(&f);
}

/* A hook drains the slot before its CONTEXT or RELEASE: every sample
 * goes to the context that pushed it, whether a context is unbound
 * first or replaced directly. */
static void test_switch_drains_first(void)
{
	struct fixture f;

	setup_with(&f, 2, 1024, COPDRV_HOSTED_MANUAL_POLL);
	bind_context(&f, 0, 1);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 1, 5);
	copdrv_unbind(f.drv, 0);
	bind_context(&f, 0, 2);
	push(&f, 0, 2, 3);
	bind_context(&f, 0, 3);
	push(&f, 0, 3, 2);
	copdrv_poll(f.drv);
	push(&f, 0, 3, 4);
	copdrv_unbind(f.drv, 0);
	bind_context(&f, 1, 1);
	push(&f, 1, 1, 6);
	stop_and_check(&f);
	for (guint32 id = 1; id <= 3; id++)
		assert_addresses(&f, id);
	g_assert_cmpuint(count_records(&f, COPSTREAM_RELEASE), ==, 2);
	assert_conservation(&f, 2);
	teardown(&f);
}

/* Guard words: read at CONTEXT, then reported at each poll only when
 * changed, after the poll group's samples; no sample is dropped. */
static void test_overlay_changes(void)
{
	struct fixture f;
	struct rules_context *c;
	const struct copstream_overlay *o;
	struct copdrv_context ctx;
	guint32 *guards;

	setup_with(&f, 1, 1024, COPDRV_HOSTED_MANUAL_POLL);
	guards = f.ls[4] + GUARD_OFFSET / 4;
	guards[0] = 1;
	ctx = context_for(&f, 0, 4, 3);
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, 0);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 4, 10);
	copdrv_poll(f.drv);
	guards[1] = 2;
	push(&f, 0, 4, 10);
	copdrv_poll(f.drv);
	guards[0] = 3;
	guards[2] = 5;
	push(&f, 0, 4, 10);
	copdrv_poll(f.drv);
	copdrv_poll(f.drv);
	stop_and_check(&f);
	assert_addresses(&f, 4);
	c = stream_rules_context(f.rules, 4);
	g_assert_cmpuint(c->overlays->len, ==, 6);
	o = (const struct copstream_overlay *)c->overlays->data;
	g_assert_cmpuint(o[0].region, ==, 0);
	g_assert_cmpuint(o[0].guard, ==, 1);
	g_assert_cmpuint(o[1].guard, ==, 0);
	g_assert_cmpuint(o[2].region, ==, 2);
	g_assert_cmpuint(o[3].region, ==, 1);
	g_assert_cmpuint(o[3].guard, ==, 2);
	g_assert_cmpuint(o[4].region, ==, 0);
	g_assert_cmpuint(o[4].guard, ==, 3);
	g_assert_cmpuint(o[5].region, ==, 2);
	g_assert_cmpuint(o[5].guard, ==, 5);
	teardown(&f);
}

/* ---- Overlay watch ------------------------------------------------------- */

/*
 * Binds context id to the slot in the register file too, with the trace
 * unit watching its `regions` guard words, as copsim does for an image
 * with overlays; then the driver's bind.
 */
static void bind_watched(struct fixture *f, guint32 slot, guint32 id,
			 guint32 regions)
{
	struct copdrv_context ctx = context_for(f, slot, id, regions);
	struct trace_regs_context *c = trace_unit_context(f->unit, id);
	char err[256] = "";

	c->guard_ls_offset = GUARD_OFFSET;
	c->guard_count = regions;
	g_assert_cmpint(trace_unit_bind(f->unit, id, slot, err, sizeof(err)),
			==, 0);
	g_assert_cmpint(copdrv_bind(f->drv, &ctx), ==, 0);
}

/*
 * The synthetic trace unit's overlay watch: guard word `region` of context
 * id becomes `guard` in its local store, and the event is pushed before the
 * next capture.  Returns whether the ring took it.
 */
static int change_guard(struct fixture *f, guint32 slot, guint32 id,
			guint32 region, guint32 guard)
{
	f->ls[id][GUARD_OFFSET / 4 + region] = guard;
	return trace_slot_push_event(trace_unit_slot(f->unit, slot),
				     f->unit->header->fifo_depth, region,
				     guard);
}

struct want_overlay {
	guint32 region, guard, placed;
	guint at;			/* the context's samples before it */
};

static void assert_overlays(struct fixture *f, guint32 id,
			    const struct want_overlay *want, guint n)
{
	struct rules_context *c = stream_rules_context(f->rules, id);
	const struct copstream_overlay *o;

	g_assert_nonnull(c);
	g_assert_cmpuint(c->overlays->len, ==, n);
	o = (const struct copstream_overlay *)c->overlays->data;
	for (guint i = 0; i < n; i++) {
		g_test_message("overlay %u", i);
		g_assert_cmpuint(o[i].region, ==, want[i].region);
		g_assert_cmpuint(o[i].guard, ==, want[i].guard);
		g_assert_cmpuint(o[i].flags & COPSTREAM_OVERLAY_PLACED, ==,
				 want[i].placed);
		g_assert_cmpuint(g_array_index(c->overlay_at, guint, i), ==,
				 want[i].at);
	}
}

/*
 * With the watch on, every change goes out placed at its FIFO position
 * among the samples: several in one drain, at the drained end, a region
 * changing twice between two captures; a change the poll read sees alone
 * is not reported; the unbind's read is placed after the last sample.
 */
static void test_overlay_placed(void)
{
	static const struct want_overlay want[] = {
		{ 0, 1, 0, 0 }, { 1, 0, 0, 0 }, { 2, 0, 0, 0 },
		{ 0, 2, 1, 3 }, { 1, 7, 1, 5 }, { 2, 5, 1, 5 },
		{ 0, 3, 1, 9 }, { 0, 4, 1, 11 }, { 0, 1, 1, 11 },
		{ 1, 9, 1, 14 },
	};
	struct copdrv_stats st;
	struct fixture f;

	setup_with(&f, 1, 1024, COPDRV_HOSTED_MANUAL_POLL);
	f.ls[4][GUARD_OFFSET / 4] = 1;
	bind_watched(&f, 0, 4, 3);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 4, 3);
	change_guard(&f, 0, 4, 0, 2);
	push(&f, 0, 4, 2);
	change_guard(&f, 0, 4, 1, 7);
	change_guard(&f, 0, 4, 2, 5);
	push(&f, 0, 4, 4);
	change_guard(&f, 0, 4, 0, 3);		/* at the drained end */
	copdrv_poll(f.drv);
	push(&f, 0, 4, 2);
	change_guard(&f, 0, 4, 0, 4);		/* twice before one capture */
	change_guard(&f, 0, 4, 0, 1);
	push(&f, 0, 4, 1);
	copdrv_poll(f.drv);
	f.ls[4][GUARD_OFFSET / 4 + 1] = 9;	/* not captured yet */
	copdrv_poll(f.drv);
	push(&f, 0, 4, 2);
	copdrv_poll(f.drv);
	copdrv_unbind(f.drv, 0);		/* stopped: placed at the end */
	stop_and_check(&f);
	assert_addresses(&f, 4);
	assert_overlays(&f, 4, want, G_N_ELEMENTS(want));
	assert_conservation(&f, 1);
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.overlays_placed, ==, 7);
	g_assert_cmpuint(st.overlay_events_lost, ==, 0);
	teardown(&f);
}

/*
 * Events the trace unit dropped (its ring full): those it kept are still
 * placed, the poll read of that group is reported unplaced, and the next
 * groups are placed only again.  Without the watch the unbind's read is
 * unplaced, as every poll read.
 */
static void test_overlay_event_overflow(void)
{
	struct want_overlay want[TRACE_EVENT_DEPTH + 4];
	guint n = 0, dropped = 0;
	struct copdrv_stats st;
	struct fixture f;

	/* A FIFO deeper than the event ring, so only the events overflow. */
	setup_with(&f, 2, 4 * TRACE_EVENT_DEPTH, COPDRV_HOSTED_MANUAL_POLL);
	bind_watched(&f, 0, 4, 1);
	bind_context(&f, 1, 5);
	start(&f, 1000000, 0, 1);
	want[n++] = (struct want_overlay){ 0, 0, 0, 0 };
	for (guint32 i = 1; i <= TRACE_EVENT_DEPTH + 3; i++) {
		if (change_guard(&f, 0, 4, 0, i))
			want[n++] = (struct want_overlay){ 0, i, 1, i - 1 };
		else
			dropped++;
		push(&f, 0, 4, 1);
	}
	g_assert_cmpuint(dropped, ==, 3);
	want[n++] = (struct want_overlay){ 0, TRACE_EVENT_DEPTH + 3, 0,
					   TRACE_EVENT_DEPTH + 3 };
	copdrv_poll(f.drv);
	f.ls[4][GUARD_OFFSET / 4] = 500;	/* read only: not reported */
	copdrv_poll(f.drv);
	change_guard(&f, 0, 4, 0, 501);
	push(&f, 0, 4, 2);
	want[n++] = (struct want_overlay){ 0, 501, 1, TRACE_EVENT_DEPTH + 3 };
	copdrv_poll(f.drv);
	f.ls[5][GUARD_OFFSET / 4 + 1] = 3;	/* no watch on slot 1 */
	push(&f, 1, 5, 2);
	copdrv_unbind(f.drv, 1);
	stop_and_check(&f);
	assert_addresses(&f, 4);
	assert_addresses(&f, 5);
	assert_overlays(&f, 4, want, n);
	{
		static const struct want_overlay want5[] = {
			{ 0, 0, 0, 0 }, { 1, 0, 0, 0 }, { 1, 3, 0, 2 },
		};
		assert_overlays(&f, 5, want5, G_N_ELEMENTS(want5));
	}
	assert_conservation(&f, 2);
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.overlay_events_lost, ==, 3);
	g_assert_cmpuint(st.overlays_placed, ==, TRACE_EVENT_DEPTH + 1);
	teardown(&f);
}

/* The guard the stall test's context runs under at its n-th capture: a
 * function of the PC field it pushes (n & 1023), so a sample tells it. */
static guint32 stall_guard(guint32 n)
{
	return n / 64 % 4 + 1;
}

/*
 * A full buffer with the watch on: the placed OVERLAYs keep their places
 * among the samples that are written (one that does not fit waits, and
 * the samples after it are lost), so every written sample is under the
 * guard it was taken under; conservation stays exact.
 */
static void test_overlay_placed_buffer_full(void)
{
	struct rules_context *c;
	const struct copstream_overlay *o;
	struct trace_regs_slot *slot;
	struct copdrv_stats st;
	struct fixture f;
	guint32 guard, n = 0, depth, j = 1;

	setup_with(&f, 1, 1024, COPDRV_HOSTED_MANUAL_POLL);
	slot = trace_unit_slot(f.unit, 0);
	depth = f.unit->header->fifo_depth;
	guard = stall_guard(0);
	f.ls[1][GUARD_OFFSET / 4] = guard;
	bind_watched(&f, 0, 1, 1);
	start(&f, 1000000, COPDRV_BUFFER_MIN, 0);
	for (guint32 poll = 0; poll < 300; poll++) {
		for (guint32 i = 0; i < 700; i++, n++) {
			guint16 field = field_of(1, n);
			guint32 address = (guint32)field << 2;

			if (stall_guard(n) != guard) {
				guard = stall_guard(n);
				change_guard(&f, 0, 1, 0, guard);
			}
			if (trace_slot_push(slot, depth, field))
				g_array_append_val(f.queued[1], address);
		}
		copdrv_poll(f.drv);
		if (poll % 40 == 39)
			read_some(&f, 200000);
	}
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.records_waiting, >, 0);
	g_assert_cmpuint(st.overlay_events_lost, ==, 0);
	stop_and_check(&f);
	assert_conservation(&f, 1);
	g_assert_cmpuint(f.rules->slots[0].lost[COPSTREAM_LOST_BUFFER_FULL],
			 >, 0);
	c = stream_rules_context(f.rules, 1);
	o = (const struct copstream_overlay *)c->overlays->data;
	g_assert_cmpuint(c->overlays->len, >, 1);
	guard = o[0].guard;
	for (guint i = 0; i < c->addresses->len; i++) {
		guint32 a = g_array_index(c->addresses, guint32, i);

		while (j < c->overlays->len &&
		       g_array_index(c->overlay_at, guint, j) <= i) {
			g_assert_cmpuint(o[j].flags, ==, COPSTREAM_OVERLAY_PLACED);
			guard = o[j++].guard;
		}
		g_assert_cmpuint(guard, ==, stall_guard((a >> 2) & 1023));
	}
	teardown(&f);
}

struct slicing {
	struct fixture *f;
	guint32 slots;
	guint32 rounds;
	GRand *rand;
};

/*
 * The scheduler and the emulators at once: each round binds a context to
 * every slot (moving contexts between slots), pushes a burst of captures
 * (some outside the local store, bursts longer than the FIFO), and
 * sometimes unbinds, while the poll thread drains concurrently.
 */
static void run_slicing(struct slicing *s)
{
	struct fixture *f = s->f;
	guint32 contexts = 2 * s->slots + 1;

	for (guint32 round = 0; round < s->rounds; round++) {
		for (guint32 slot = 0; slot < s->slots; slot++) {
			guint32 id = (round + slot * 2) % contexts + 1;
			guint32 burst = g_rand_int_range(s->rand, 0, 200);

			bind_context(f, slot, id);
			push(f, slot, id, burst);
			if (g_rand_int_range(s->rand, 0, 8) == 0)
				trace_slot_count_outside(
					trace_unit_slot(f->unit, slot));
			if (g_rand_int_range(s->rand, 0, 3) == 0)
				copdrv_unbind(f->drv, slot);
		}
		if (round % 16 == 0)
			g_usleep(200);
	}
}

/* Conservation, exactly, for every slot, with FIFO overflows and a poll
 * thread racing the producer; every sample attributed to its context. */
static void test_conservation_slicing(void)
{
	struct fixture f;
	struct slicing s = { &f, 4, 1500, g_rand_new_with_seed(7) };
	guint64 dropped = 0;

	setup_with(&f, 4, 64, 0);
	start(&f, 20000, 0, 1);
	run_slicing(&s);
	stop_and_check(&f);
	assert_conservation(&f, 4);
	for (guint32 id = 1; id <= 9; id++)
		assert_addresses(&f, id);
	for (guint32 i = 0; i < 4; i++)
		dropped += f.rules->slots[i].lost[COPSTREAM_LOST_FIFO_OVERFLOW];
	g_assert_cmpuint(dropped, >, 0);
	g_assert_cmpuint(f.rules->stop.samples, ==,
			 f.rules->decoder.stats.samples);
	g_rand_free(s.rand);
	teardown(&f);
}

/*
 * Stall and doorbell: with a poll interval of 10 s, a producer pushing
 * 1300 captures into 64-entry FIFOs under the stall policy can only get
 * on when the doorbell (watermark or stall) makes the poll thread drain
 * early.  Nothing is lost, every sample is its context's and in order,
 * and the stalls the producer counted are the STALL records' sums and
 * the statistics'.
 */
static void test_stall_doorbell(void)
{
	struct fixture f;
	struct copdrv_params p;
	struct copdrv_stats stats;
	char err[512] = "";

	setup_with(&f, 2, 64, 0);
	trace_unit_set_controller(f.unit, getpid());
	bind_context(&f, 0, 1);
	bind_context(&f, 1, 2);
	p = params_for(&f, COPDRV_POLL_MAX_NS, 0);
	p.fifo_full = COPSTREAM_FIFO_STALL;
	g_assert_cmpint(copdrv_hosted_start(f.os, &p, &f.fd, err,
					    sizeof(err)), ==, 0);
	start_reader(&f);
	g_assert_cmpuint(trace_unit_slot(f.unit, 0)->fifo_policy, ==,
			 TRACE_FIFO_STALL);
	g_assert_cmpuint(trace_unit_slot(f.unit, 0)->watermark, ==, 32);
	for (guint32 round = 0; round < 10; round++) {
		capture(&f, 0, 1, 100);
		capture(&f, 1, 2, 30);
	}
	copdrv_get_stats(f.drv, &stats);
	g_assert_cmpuint(stats.doorbell_polls, >=, 1);
	stop_and_check(&f);
	g_assert_cmpuint(trace_unit_slot(f.unit, 0)->fifo_policy, ==,
			 TRACE_FIFO_DROP);	/* no stall after the session */
	assert_conservation(&f, 2);
	assert_addresses(&f, 1);
	assert_addresses(&f, 2);
	g_assert_cmpuint(f.queued[1]->len, ==, 1000);
	g_assert_cmpuint(f.queued[2]->len, ==, 300);
	copdrv_get_stats(f.drv, &stats);
	g_assert_cmpuint(stats.stalls, ==, f.rules->slots[0].stalls +
			 f.rules->slots[1].stalls);
	for (guint32 i = 0; i < 2; i++) {
		struct trace_slot_status status;

		trace_slot_status(f.unit, i, &status);
		g_assert_cmpuint(f.rules->slots[i].lost_total, ==, 0);
		g_assert_cmpuint(f.rules->slots[i].stalls, ==, status.stalls);
		g_assert_cmpuint(f.rules->slots[i].stall_ns, ==,
				 status.stall_ns);
		g_assert_cmpuint(stats.slot_stalls[i], ==, status.stalls);
		g_assert_cmpuint(stats.slot_stall_ns[i], ==, status.stall_ns);
	}
	g_assert_cmpuint(f.rules->slots[0].stalls, >=, 1);
	g_assert_cmpuint(f.rules->start.fifo_full, ==, COPSTREAM_FIFO_STALL);
	g_assert_cmpuint(f.rules->start.watermark, ==, 32);
	teardown(&f);
}

/* A reader that does not read: the event buffer fills, the samples that
 * do not fit are reported lost buffer-full, context switches still come
 * through in order, and the totals stay exact. */
static void test_buffer_full(void)
{
	struct fixture f;
	struct copdrv_stats stats;
	guint64 lost_full = 0;

	setup_with(&f, 2, 1024, COPDRV_HOSTED_MANUAL_POLL);
	start(&f, 1000000, COPDRV_BUFFER_MIN, 0);
	for (guint32 poll = 0; poll < 600; poll++) {
		if (poll % 50 == 0) {
			bind_context(&f, 0, 1 + poll / 50 % 3);
			bind_context(&f, 1, 4 + poll / 50 % 3);
		}
		push(&f, 0, 1 + poll / 50 % 3, 1000);
		push(&f, 1, 4 + poll / 50 % 3, 500);
		copdrv_poll(f.drv);
		if (poll % 40 == 39) {
			read_some(&f, 200000);
			g_usleep(5000);
		}
	}
	copdrv_get_stats(f.drv, &stats);
	g_assert_cmpuint(stats.records_waiting, >, 0);
	stop_and_check(&f);
	assert_conservation(&f, 2);
	for (guint32 i = 0; i < 2; i++)
		lost_full += f.rules->slots[i].lost[COPSTREAM_LOST_BUFFER_FULL];
	g_assert_cmpuint(lost_full, >, 0);
	g_assert_cmpuint(f.rules->decoder.stats.samples, >, 0);
	/* What was written went to the right context, in order. */
	for (guint32 id = 1; id <= 6; id++) {
		struct rules_context *c = stream_rules_context(f.rules, id);
		guint32 at = 0;

		for (guint i = 0; c && i < c->addresses->len; i++) {
			guint32 a = g_array_index(c->addresses, guint32, i);

			while (at < f.queued[id]->len &&
			       g_array_index(f.queued[id], guint32, at) != a)
				at++;
			g_assert_cmpuint(at, <, f.queued[id]->len);
		}
	}
	teardown(&f);
}

/*
 * Pushes captures of context id on slot while its FIFO has room, as a
 * producer under the stall policy does before it stalls; returns how many.
 */
static guint32 push_while_room(struct fixture *f, guint32 slot, guint32 id,
			       guint32 count)
{
	struct trace_regs_slot *s = trace_unit_slot(f->unit, slot);
	guint32 depth = f->unit->header->fifo_depth, n;

	for (n = 0; n < count; n++) {
		guint16 field = field_of(id, f->queued[id]->len);
		guint32 address = (guint32)field << 2;

		if (!trace_slot_try_push(s, depth, field))
			break;
		g_array_append_val(f->queued[id], address);
	}
	return n;
}

/*
 * The stall policy with a reader that falls behind: a poll drains only
 * what the buffer holds, the rest waits in the FIFO (the producer would
 * stall), and once the reader reads, everything comes through: no sample
 * is lost buffer-full, and every one is its context's, in order.
 */
static void test_stall_buffer_full(void)
{
	struct fixture f;
	struct copdrv_params p;
	char err[512] = "";
	guint32 depth, waits = 0;

	setup_with(&f, 2, 1024, COPDRV_HOSTED_MANUAL_POLL);
	depth = f.unit->header->fifo_depth;
	bind_context(&f, 0, 1);
	bind_context(&f, 1, 2);
	p = params_for(&f, 1000000, COPDRV_BUFFER_MIN);
	p.fifo_full = COPSTREAM_FIFO_STALL;
	g_assert_cmpint(copdrv_hosted_start(f.os, &p, &f.fd, err,
					    sizeof(err)), ==, 0);
	/*
	 * No reader: the producer offers captures until a poll leaves both
	 * FIFOs full (the buffer, and the socket behind it, hold no more).
	 */
	for (;;) {
		push_while_room(&f, 0, 1, depth);
		push_while_room(&f, 1, 2, depth);
		copdrv_poll(f.drv);
		if (trace_slot_queued(trace_unit_slot(f.unit, 0)) == depth &&
		    trace_slot_queued(trace_unit_slot(f.unit, 1)) == depth)
			break;
		/* a driver that drains whole FIFOs never leaves them full */
		g_assert_cmpuint(++waits, <, 20000);
		g_usleep(200);
	}
	g_assert_cmpuint(push_while_room(&f, 0, 1, 1), ==, 0);
	g_assert_cmpuint(f.queued[1]->len + f.queued[2]->len, >,
			 COPDRV_BUFFER_MIN / 8);
	/* The reader catches up; polls drain what waited. */
	start_reader(&f);
	while (trace_slot_queued(trace_unit_slot(f.unit, 0)) ||
	       trace_slot_queued(trace_unit_slot(f.unit, 1))) {
		g_assert_cmpuint(++waits, <, 40000);
		copdrv_poll(f.drv);
		g_usleep(500);
	}
	stop_and_check(&f);
	assert_conservation(&f, 2);
	for (guint32 i = 0; i < 2; i++)
		g_assert_cmpuint(f.rules->slots[i].lost_total, ==, 0);
	assert_addresses(&f, 1);
	assert_addresses(&f, 2);
	teardown(&f);
}

/* ---- Call stacks ---------------------------------------------------------- */

#define STACK_DEPTH	4	/* frames per record in these tests */

/* The stack the producer records with PC field `field`: depth field % 7
 * (so some are deeper than the records), frames from the field, the
 * second in overlay 2.  Returns the depth. */
static guint32 stack_of(guint16 field, guint32 *frames)
{
	guint32 depth = field % 7;

	for (guint32 i = 0; i < depth && i < STACK_DEPTH; i++)
		frames[i] = TRACE_STACK_FRAME((0x200u + 3u * field + i) &
					      0x3FFFu, i == 1 ? 2 : 0);
	return depth;
}

/* capture() with each capture's call stack. */
static void capture_stacked(struct fixture *f, guint32 slot, guint32 id,
			    guint32 count)
{
	struct trace_regs_slot *s = trace_unit_slot(f->unit, slot);
	guint32 *area = trace_stack_area(f->unit->base, f->unit->header, slot);
	guint32 frames[STACK_DEPTH];

	for (guint32 i = 0; i < count; i++) {
		guint16 field = field_of(id, f->queued[id]->len);
		guint32 address = (guint32)field << 2;
		guint32 depth = stack_of(field, frames);

		if (trace_slot_capture_stack(f->unit, s, area, field, depth,
					     frames))
			g_array_append_val(f->queued[id], address);
	}
}

/* Every sample of context id in the stream has its CALLSTACK, and it
 * holds the frames recorded with that capture. */
static void assert_stacks(struct fixture *f, guint32 id)
{
	struct rules_context *c = stream_rules_context(f->rules, id);
	guint32 frames[STACK_DEPTH];

	g_assert_nonnull(c);
	g_assert_cmpuint(c->stacks->len, ==, c->addresses->len);
	for (guint i = 0; i < c->addresses->len; i++) {
		guint16 field = (guint16)(g_array_index(c->addresses, guint32,
							i) >> 2);
		const struct rules_stack *got = &g_array_index(
			c->stacks, struct rules_stack, i);
		guint32 depth = stack_of(field, frames);

		g_assert_cmpuint(got->depth, ==, depth);
		g_assert_cmpuint(got->n_frames, ==, MIN(depth, STACK_DEPTH));
		for (guint32 k = 0; k < got->n_frames; k++)
			g_assert_cmphex(got->frames[k], ==, copstream_frame_word(
				(guint32)TRACE_STACK_FRAME_FIELD(frames[k]) << 2,
				TRACE_STACK_FRAME_OVERLAY(frames[k])));
	}
}

/* With a call-stack area every sample goes out with its CALLSTACK right
 * after it, deeper stacks cut to the area's depth (stream 1.4). */
static void test_call_stacks(void)
{
	struct fixture f;

	setup_stacks(&f, 2, 1024, STACK_DEPTH, COPDRV_HOSTED_MANUAL_POLL);
	bind_context(&f, 0, 1);
	bind_context(&f, 1, 2);
	start(&f, 1000000, 0, 1);
	for (guint32 poll = 0; poll < 6; poll++) {
		capture_stacked(&f, 0, 1, 500);
		capture_stacked(&f, 1, 2, 300);
		copdrv_poll(f.drv);
	}
	stop_and_check(&f);
	assert_addresses(&f, 1);
	assert_addresses(&f, 2);
	assert_stacks(&f, 1);
	assert_stacks(&f, 2);
	assert_conservation(&f, 2);
	g_assert_cmpuint(count_records(&f, COPSTREAM_CALLSTACK), ==, 4800);
	teardown(&f);
}

/* The cause word the test gives a capture of PC field `field`: runs of
 * 7 of one reason, a DMA wait naming the tag and issuer, some ISSUE. */
static guint32 cause_of(guint16 field)
{
	guint32 run = field / 7u % 8u;

	if (run == 3)
		return trace_cause_transfer(field % 32u, 0x3000u + run);
	return run < TRACE_STALL_REASONS ? run : TRACE_STALL_ISSUE;
}

/*
 * Reads the stream back (stream 1.6): each slot's pending reasons as its
 * last REASONS gave them, one per sample word, ISSUE beyond them; the
 * transfer as its last TRANSFER named it.  Every sample must read as the
 * cause it was captured with, and no REASONS, CONTEXT or STOP may come
 * while reasons of its slot are unread (a count that does not match).
 */
struct reason_reader {
	guint8 stalls[COPSTREAM_MAX_SLOTS][COPSTREAM_MAX_REASONS / 2];
	guint32 count[COPSTREAM_MAX_SLOTS], next[COPSTREAM_MAX_SLOTS];
	guint32 transfer[COPSTREAM_MAX_SLOTS];
	guint64 samples, mismatches, unread, reasons;
};

/* A record ending the slot's reasons: none may be left. */
static void reason_reset(struct reason_reader *r, guint32 slot)
{
	if (r->next[slot] < r->count[slot])
		r->unread++;
	r->count[slot] = r->next[slot] = 0;
}

static void reason_record(void *user, const struct copstream_record *rec)
{
	struct reason_reader *r = user;
	const struct copstream_reasons *why = &rec->u.reasons;
	const struct copstream_transfer *t = &rec->u.transfer;

	switch (rec->code) {
	case COPSTREAM_CONTEXT:
		reason_reset(r, rec->u.context.slot);
		r->transfer[rec->u.context.slot] = 0;
		break;
	case COPSTREAM_STOP:
		for (guint32 slot = 0; slot < COPSTREAM_MAX_SLOTS; slot++)
			reason_reset(r, slot);
		break;
	case COPSTREAM_REASONS:
		reason_reset(r, why->slot);
		memcpy(r->stalls[why->slot], why->stalls, (why->count + 1) / 2);
		r->count[why->slot] = why->count;
		r->reasons++;
		break;
	case COPSTREAM_TRANSFER:
		r->transfer[t->slot] = t->flags ?
			trace_cause_transfer(t->tag, t->issuer >> 2) : 0;
		break;
	}
}

/* The cause a sample of the slot reads as, taking its reason. */
static guint32 reason_next(struct reason_reader *r, guint32 slot)
{
	guint32 stall = TRACE_STALL_ISSUE;

	if (r->next[slot] < r->count[slot])
		stall = copstream_reason_at(r->stalls[slot], r->next[slot]++);
	if (stall == TRACE_STALL_DMA_WAIT && r->transfer[slot])
		return r->transfer[slot];
	return stall;
}

static void reason_samples(void *user, guint64 offset,
			   const struct copstream_sample *samples, size_t n)
{
	struct reason_reader *r = user;

	for (size_t i = 0; i < n; i++, r->samples++)
		if (cause_of((guint16)(samples[i].address >> 2)) !=
		    reason_next(r, samples[i].slot))
			r->mismatches++;
}

/* Decodes the fixture's stream through the reason reader. */
static struct reason_reader *read_reasons(struct fixture *f)
{
	struct copstream_handler h = { .samples = reason_samples,
				       .record = reason_record };
	struct reason_reader *r = g_new0(struct reason_reader, 1);
	static struct copstream_decoder dec;

	copstream_decoder_init(&dec, &h);
	dec.handler.user = r;
	copstream_decoder_feed(&dec, f->stream->data, f->stream->len);
	copstream_decoder_finish(&dec);
	g_assert_cmpuint(dec.stats.errors, ==, 0);
	return r;
}

/* Captures n entries on the slot of context id, each with cause_of(). */
static void capture_caused(struct fixture *f, guint32 slot, guint32 id,
			   guint32 n)
{
	struct trace_regs_slot *s = trace_unit_slot(f->unit, slot);

	for (guint32 i = 0; i < n; i++) {
		guint16 field = field_of(id, f->queued[id]->len);
		guint32 address = (guint32)field << 2;

		if (trace_slot_capture_entry(f->unit, s, NULL, field,
					     cause_of(field), 0, NULL))
			g_array_append_val(f->queued[id], address);
	}
}

/* Every sample is read under the reason it was captured with (stream
 * 1.6), through runs, DMA transfers and a context switch, with one
 * REASONS per slot's drain. */
static void test_stall_reasons(void)
{
	struct reason_reader *r;
	struct fixture f;

	setup_with(&f, 2, 1024, COPDRV_HOSTED_MANUAL_POLL);
	bind_context(&f, 0, 1);
	bind_context(&f, 1, 2);
	start(&f, 1000000, 0, 1);
	for (guint32 poll = 0; poll < 4; poll++) {
		capture_caused(&f, 0, 1, 200);
		capture_caused(&f, 1, 2, 200);
		copdrv_poll(f.drv);
	}
	stop_and_check(&f);
	assert_addresses(&f, 1);
	assert_addresses(&f, 2);
	assert_conservation(&f, 2);
	r = read_reasons(&f);
	g_assert_cmpuint(r->samples, ==, 1600);
	g_assert_cmpuint(r->mismatches, ==, 0);
	g_assert_cmpuint(r->unread, ==, 0);
	g_assert_cmpuint(r->reasons, ==, 8);	/* one a drain of a slot */
	g_free(r);
	teardown(&f);
}

/*
 * A buffer that runs out of room mid-drain: the REASONS of a drain counts
 * only the samples that fit, so every written sample keeps its reason and
 * no count is left unread; with and without call stacks.
 */
static void test_stall_reasons_buffer_full(void)
{
	for (guint32 stacked = 0; stacked < 2; stacked++) {
		struct reason_reader *r;
		guint64 lost_full = 0;
		struct fixture f;

		if (stacked)
			setup_stacks(&f, 2, 1024, STACK_DEPTH,
				     COPDRV_HOSTED_MANUAL_POLL);
		else
			setup_with(&f, 2, 1024, COPDRV_HOSTED_MANUAL_POLL);
		bind_context(&f, 0, 1);
		bind_context(&f, 1, 2);
		start(&f, 1000000, COPDRV_BUFFER_MIN, 0);
		for (guint32 poll = 0; poll < 40; poll++) {
			capture_caused(&f, 0, 1, 1000);
			capture_caused(&f, 1, 2, 700);
			copdrv_poll(f.drv);
		}
		stop_and_check(&f);
		for (guint32 i = 0; i < 2; i++)
			lost_full += f.rules->slots[i].lost[
				COPSTREAM_LOST_BUFFER_FULL];
		g_assert_cmpuint(lost_full, >, 0);
		assert_conservation(&f, 2);
		r = read_reasons(&f);
		g_assert_cmpuint(r->samples, >, 0);
		g_assert_cmpuint(r->samples, ==,
				 f.rules->decoder.stats.samples);
		g_assert_cmpuint(r->mismatches, ==, 0);
		g_assert_cmpuint(r->unread, ==, 0);
		g_free(r);
		teardown(&f);
	}
}

/* A buffer that cannot take everything loses whole samples: never a
 * sample without its stack, nor a stack without its sample. */
static void test_call_stacks_buffer_full(void)
{
	struct fixture f;
	guint64 lost_full = 0;

	setup_stacks(&f, 2, 1024, STACK_DEPTH, COPDRV_HOSTED_MANUAL_POLL);
	bind_context(&f, 0, 1);
	bind_context(&f, 1, 2);
	start(&f, 1000000, COPDRV_BUFFER_MIN, 0);
	for (guint32 poll = 0; poll < 40; poll++) {
		capture_stacked(&f, 0, 1, 1000);
		capture_stacked(&f, 1, 2, 700);
		copdrv_poll(f.drv);
	}
	stop_and_check(&f);
	for (guint32 i = 0; i < 2; i++)
		lost_full += f.rules->slots[i].lost[COPSTREAM_LOST_BUFFER_FULL];
	g_assert_cmpuint(lost_full, >, 0);
	g_assert_cmpuint(f.rules->decoder.stats.samples, >, 0);
	assert_stacks(&f, 1);
	assert_stacks(&f, 2);
	assert_conservation(&f, 2);
	teardown(&f);
}

/* Samples drained from a slot nothing is bound to are lost, no-context. */
static void test_no_context(void)
{
	struct fixture f;

	setup_with(&f, 1, 64, COPDRV_HOSTED_MANUAL_POLL);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 1, 7);
	copdrv_poll(f.drv);
	stop_and_check(&f);
	g_assert_cmpuint(f.rules->slots[0].samples, ==, 0);
	g_assert_cmpuint(f.rules->slots[0].lost[COPSTREAM_LOST_NO_CONTEXT],
			 ==, 7);
	assert_conservation(&f, 1);
	teardown(&f);
}

/*
 * A head-tail gap larger than the FIFO (a corrupt or hostile register
 * file) is a refused drain counted in fifo_errors, on the FIFO and on the
 * overlay event ring alike; nothing of it is read, the tail stays, and
 * the other slot's samples all arrive.
 */
static void test_fifo_errors_corrupt_gap(void)
{
	struct trace_regs_slot *s0, *s1;
	struct copdrv_stats st;
	struct fixture f;

	setup_with(&f, 2, 64, COPDRV_HOSTED_MANUAL_POLL);
	s0 = trace_unit_slot(f.unit, 0);
	s1 = trace_unit_slot(f.unit, 1);
	bind_context(&f, 0, 1);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 1, 3);
	s1->fifo_head = s1->fifo_tail + 64 + 1;
	copdrv_poll(f.drv);
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.fifo_errors, ==, 1);
	g_assert_cmpuint(s1->fifo_head - s1->fifo_tail, ==, 65);
	g_assert_cmpuint(s0->fifo_tail, ==, s0->fifo_head);
	s1->fifo_head = s1->fifo_tail;
	s0->event_head = s0->event_tail + TRACE_EVENT_DEPTH + 1;
	push(&f, 0, 1, 2);
	copdrv_poll(f.drv);
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.fifo_errors, ==, 2);
	g_assert_cmpuint(s0->event_head - s0->event_tail, ==,
			 TRACE_EVENT_DEPTH + 1);
	s0->event_head = s0->event_tail;
	stop_and_check(&f);
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.fifo_errors, ==, 2);
	g_assert_cmpuint(f.rules->slots[0].samples, ==, 5);
	assert_addresses(&f, 1);
	teardown(&f);
}

/*
 * A slot whose LFSR seqlock stays held (lfsr_seq odd: a producer killed
 * inside it, a hostile file) keeps its LFSR state; the start and the stop
 * count each skipped load in lfsr_busy, and the other slot is loaded.
 */
static void test_lfsr_busy_counted(void)
{
	struct trace_regs_slot *s0, *s1;
	struct copdrv_params p;
	struct copdrv_stats st;
	struct fixture f;

	setup_with(&f, 2, 64, COPDRV_HOSTED_MANUAL_POLL);
	s0 = trace_unit_slot(f.unit, 0);
	s1 = trace_unit_slot(f.unit, 1);
	s1->lfsr_seq = 7;
	s1->reload_state = 0x123;
	p = params_for(&f, 1000000, 0);
	start(&f, 1000000, 0, 1);
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.lfsr_busy, ==, 1);
	g_assert_cmpuint(s0->reload_state, ==, p.lfsr_value);
	g_assert_cmpuint(s1->reload_state, ==, 0x123);
	g_assert_cmpuint(s1->lfsr_seq, ==, 7);
	stop_and_check(&f);
	copdrv_get_stats(f.drv, &st);
	g_assert_cmpuint(st.lfsr_busy, ==, 2);
	g_assert_cmpuint(s0->reload_state, ==, 0);
	g_assert_cmpuint(s0->lfsr_seq % 2, ==, 0);
	teardown(&f);
}

/* Drops a finished session's stream and its checks, for another start. */
static void forget_stream(struct fixture *f)
{
	close(f->fd);
	g_byte_array_free(f->stream, TRUE);
	f->stream = NULL;
	stream_rules_free(f->rules);
	f->rules = NULL;
}

/* Two sessions: each a whole stream, IMAGE sent again in the second;
 * captures before a start are not counted in it. */
static void test_restart(void)
{
	struct fixture f;

	setup_with(&f, 1, 64, COPDRV_HOSTED_MANUAL_POLL);
	bind_context(&f, 0, 1);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 1, 9);
	stop_and_check(&f);
	g_assert_cmpuint(f.rules->slots[0].samples, ==, 9);
	push(&f, 0, 1, 4);
	forget_stream(&f);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 1, 3);
	stop_and_check(&f);
	g_assert_cmpuint(f.rules->slots[0].samples, ==, 3);
	g_assert_cmpuint(f.rules->slots[0].lost_total, ==, 0);
	g_assert_cmpuint(count_records(&f, COPSTREAM_IMAGE), ==, 1);
	teardown(&f);
}

/* The descriptors open in this process, as a bit per number below 1024. */
static void open_fds(guint8 open[1024])
{
	for (int fd = 0; fd < 1024; fd++)
		open[fd] = fcntl(fd, F_GETFD) >= 0;
}

/* A start after a finished stream leaves alone the descriptor number its
 * finisher closed: another file has it now (copsim's connection to the
 * client asking for that start was shut down under it). */
static void test_restart_spares_reused_fd(void)
{
	struct fixture f;
	guint8 before[1024], after[1024];
	int victim[2], reused = -1;

	setup_with(&f, 1, 64, COPDRV_HOSTED_MANUAL_POLL);
	bind_context(&f, 0, 1);
	start(&f, 1000000, 0, 1);
	push(&f, 0, 1, 2);
	open_fds(before);
	stop_and_check(&f);	/* read to its end: the finisher closed */
	open_fds(after);
	for (int fd = 0; fd < 1024; fd++)
		if (before[fd] && !after[fd]) {
			g_assert_cmpint(reused, ==, -1);
			reused = fd;
		}
	g_assert_cmpint(reused, >=, 0);
	g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM, 0, victim), ==, 0);
	g_assert_cmpint(dup2(victim[0], reused), ==, reused);
	forget_stream(&f);
	start(&f, 1000000, 0, 1);
	g_assert_cmpint(send(reused, "x", 1, MSG_NOSIGNAL), ==, 1);
	stop_and_check(&f);
	close(reused);
	close(victim[0]);
	close(victim[1]);
	teardown(&f);
}

/* A reader that closes its end does not block the driver. */
static void test_reader_gone(void)
{
	struct fixture f;
	char err[512];

	setup_with(&f, 1, 1024, 0);
	bind_context(&f, 0, 1);
	start(&f, 50000, COPDRV_BUFFER_MIN, 0);
	close(f.fd);
	f.fd = -1;
	for (int i = 0; i < 200; i++) {
		push(&f, 0, 1, 1000);
		g_usleep(100);
	}
	g_assert_cmpint(copdrv_hosted_stop(f.os, err, sizeof(err)), ==, 0);
	teardown(&f);
}

static void expect_start_error(struct fixture *f, struct copdrv_params p,
			       const char *reason)
{
	char err[512] = "";
	int fd = -1;

	g_assert_cmpint(copdrv_hosted_start(f->os, &p, &fd, err, sizeof(err)),
			==, -1);
	g_assert_cmpstr(err, ==, reason);
	g_assert_cmpint(fd, ==, -1);
}

/* Bad parameters and contexts are refused with one line. */
static void test_refusals(void)
{
	struct fixture f;
	struct copdrv_params p;
	struct copdrv_context ctx;
	char err[512] = "";
	const char *invalid = "kernel driver: start: Invalid argument";

	setup_with(&f, 2, 64, COPDRV_HOSTED_MANUAL_POLL);
	p = params_for(&f, 1000000, 0);
	p.fifo_depth = 1024;
	expect_start_error(&f, p, invalid);
	p = params_for(&f, 1000000, 0);
	p.lfsr_count = 0;
	expect_start_error(&f, p, invalid);
	p = params_for(&f, 1000, 0);
	expect_start_error(&f, p, invalid);
	p = params_for(&f, 1000000, 4096);
	expect_start_error(&f, p, invalid);
	p = params_for(&f, 1000000, 0);
	p.lfsr_value = 0x1000000;
	expect_start_error(&f, p, invalid);
	g_assert_cmpint(copdrv_hosted_stop(f.os, err, sizeof(err)), ==, -1);
	g_assert_cmpstr(err, ==, "kernel driver: stop: not started");

	start(&f, 1000000, 0, 1);
	expect_start_error(&f, params_for(&f, 1000000, 0),
			   "kernel driver: start: Device or resource busy");
	ctx = context_for(&f, 2, 1, 2);
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, -EINVAL);
	ctx = context_for(&f, 0, 1, 2);
	ctx.guard_offset = LS_SIZE - 4;
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, -EINVAL);
	ctx = context_for(&f, 0, 1, COPDRV_MAX_REGIONS + 1);
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, -EINVAL);
	ctx = context_for(&f, 0, 1, 2);
	ctx.path = (const guint8 *)"a\0b";
	ctx.path_length = 3;
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, -EINVAL);
	ctx.path_length = 0;
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, -EINVAL);
	/* A refused context still ends the previous one's time on the slot:
	 * its samples are lost, never given to the old context. */
	bind_context(&f, 1, 2);
	push(&f, 1, 2, 3);
	ctx = context_for(&f, 1, 3, 2);
	ctx.guard_offset = 2;
	g_assert_cmpint(copdrv_bind(f.drv, &ctx), ==, -EINVAL);
	push(&f, 1, 3, 4);
	stop_and_check(&f);
	g_assert_cmpuint(count_records(&f, COPSTREAM_CONTEXT), ==, 1);
	g_assert_cmpuint(count_records(&f, COPSTREAM_RELEASE), ==, 1);
	assert_addresses(&f, 2);
	g_assert_cmpuint(f.rules->slots[1].lost[COPSTREAM_LOST_NO_CONTEXT], ==,
			 4);
	teardown(&f);
}

/* A damaged register file is refused before anything is touched. */
static void test_bad_register_file(void)
{
	char err[512] = "";
	guint8 junk[4096] = { 0 };

	g_assert_null(copdrv_hosted_create(junk, sizeof(junk), 0, err,
					   sizeof(err)));
	g_assert_cmpstr(err, !=, "");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/driver/image-identities-bounded",
			test_image_identities_bounded);
	g_test_add_func("/driver/create-refuses-a-bad-header",
			test_create_refuses_a_bad_header);
	g_test_add_func("/driver/start-announces-bound",
			test_start_announces_bound);
	g_test_add_func("/driver/switch-drains-first", test_switch_drains_first);
	g_test_add_func("/driver/overlay-changes", test_overlay_changes);
	g_test_add_func("/driver/overlay-placed", test_overlay_placed);
	g_test_add_func("/driver/overlay-event-overflow",
			test_overlay_event_overflow);
	g_test_add_func("/driver/overlay-placed-buffer-full",
			test_overlay_placed_buffer_full);
	g_test_add_func("/driver/conservation-slicing",
			test_conservation_slicing);
	g_test_add_func("/driver/stall-doorbell", test_stall_doorbell);
	g_test_add_func("/driver/buffer-full", test_buffer_full);
	g_test_add_func("/driver/stall-buffer-full", test_stall_buffer_full);
	g_test_add_func("/driver/stall-reasons", test_stall_reasons);
	g_test_add_func("/driver/stall-reasons-buffer-full",
			test_stall_reasons_buffer_full);
	g_test_add_func("/driver/call-stacks", test_call_stacks);
	g_test_add_func("/driver/call-stacks-buffer-full",
			test_call_stacks_buffer_full);
	g_test_add_func("/driver/no-context", test_no_context);
	g_test_add_func("/driver/fifo-errors-corrupt-gap",
			test_fifo_errors_corrupt_gap);
	g_test_add_func("/driver/lfsr-busy-counted", test_lfsr_busy_counted);
	g_test_add_func("/driver/restart", test_restart);
	g_test_add_func("/driver/restart-spares-reused-fd",
			test_restart_spares_reused_fd);
	g_test_add_func("/driver/reader-gone", test_reader_gone);
	g_test_add_func("/driver/refusals", test_refusals);
	g_test_add_func("/driver/bad-register-file", test_bad_register_file);
	return g_test_run();
}
