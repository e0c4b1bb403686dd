/*
 * copsim-host.c - the kernel driver hosted in copsim (see copsim-host.h).
 *
 * The hooks.  bind and unbind translate copsim's view of a context
 * (struct copsim_context) into the core's (struct copdrv_context) and call
 * copdrv_bind() and copdrv_unbind(); the glue also remembers which
 * register-file context runs on each slot.  The start hook (called when the
 * hooks are installed) tells the core what is bound now; the stop hook
 * (when they are removed, or copsim stops) ends a running session.
 *
 * Sessions.  A control request to start or stop sets `pending` and removes
 * and installs the hooks again: copsim calls the stop and start hooks
 * under its scheduler lock, so no context is bound or unbound meanwhile.
 * There the glue closes the run gate of every running context on a slot,
 * waits until each has stopped at a block boundary, starts or stops the
 * core (which loads the LFSRs and takes the baselines), and opens the
 * gates it closed.  A context that does not stop within HOLD_TIMEOUT_MS
 * keeps running, with a message: its slot then counts from wherever its
 * LFSR was.
 *
 * The control requests (copdrv-control.h) arrive on the threads of
 * copsim's client connections; `lock` makes them one at a time.
 */
#include "emulator/copsim/copsim-host.h"
#include "kernel-driver/copdrv-hosted.h"
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOLD_TIMEOUT_MS	1000

_Static_assert(offsetof(struct copdrv_control_params, event) ==
	       COPDRV_CONTROL_PARAMS_V2_SIZE, "the second form ends there");
_Static_assert(COPDRV_EVENT_INSTRUCTIONS == TRACE_EVENT_INSTRUCTIONS &&
	       COPDRV_EVENT_CYCLES == TRACE_EVENT_CYCLES, "events");

enum pending_hook {
	HOOK_SYNC,		/* only learn what is bound */
	HOOK_START,		/* start a session */
	HOOK_STOP		/* stop the session */
};

struct copsim_driver {
	struct copsim *sim;
	struct copsim_hooks hooks;
	pthread_mutex_t lock;		/* one control operation at a time */
	const struct copsim_info *info;	/* copsim's, valid while it lives */
	struct copdrv_os *os;		/* the hosted driver */
	struct copdrv *drv;
	u32 on_slot[TRACE_MAX_SLOTS];	/* register-file context, or NONE */

	struct copdrv_control_params params;
	int params_set;
	int running;
	struct trace_slot_status at_stop[TRACE_MAX_SLOTS];	/* counters */
	u32 slots_at_stop;	/* how many of at_stop the last stop filled */

	/* Between a control operation and the hook that carries it out. */
	enum pending_hook pending;
	int hook_failed;
	char hook_err[COPSIM_TEXT_MAX];
	int stream_fd;
};

/* ---- Hooks --------------------------------------------------------------- */

/*
 * Binds the context of the slot's mailbox (its BIND, which copsim posted
 * before this hook or, at a start, when it bound the context) and acks it:
 * the hosted driver learns binds through the same mailbox as copdrv.ko,
 * only the local store is copsim's RAM mapping instead of the mailbox's
 * copy of the guard words.
 */
static void bind_context(struct copsim_driver *d,
			 const struct copsim_switch *change)
{
	struct trace_regs_mailbox *box = trace_unit_mailbox(d->info->unit,
							     change->slot);
	u32 seq = __atomic_load_n(&box->seq, __ATOMIC_ACQUIRE);
	struct copdrv_context ctx;
	int error = copdrv_mailbox_context(box, (void *)change->context->ram,
					   &ctx);

	if (!error)
		error = copdrv_bind(d->drv, &ctx);
	trace_mailbox_ack(box, seq);
	d->on_slot[change->slot] = change->context->trace_context;
	if (error)
		fprintf(stderr, "copsim: kernel driver: context %llu on slot "
			"%u: %s; its samples count as lost (no-context)\n",
			(unsigned long long)change->context->id, change->slot,
			strerror(-error));
}

static void hook_bind(void *data, const struct copsim_switch *change)
{
	bind_context(data, change);
}

static void hook_unbind(void *data, const struct copsim_switch *change)
{
	struct copsim_driver *d = data;
	struct trace_regs_mailbox *box = trace_unit_mailbox(d->info->unit,
							     change->slot);
	u32 seq = __atomic_load_n(&box->seq, __ATOMIC_ACQUIRE);

	if (box->op == TRACE_MAILBOX_UNBIND)
		copdrv_unbind(d->drv, change->slot);
	else
		copdrv_unbind_end(d->drv, change->slot);
	trace_mailbox_ack(box, seq);
	d->on_slot[change->slot] = TRACE_NONE;
}

/*
 * Closes the gate of every context running on a slot and waits until it
 * stops; held[] says whose gate was closed here.
 */
static void hold_running(struct copsim_driver *d, int *held)
{
	struct trace_unit *unit = d->info->unit;

	for (u32 slot = 0; slot < d->info->n_slots; slot++) {
		struct trace_regs_context *ctx;
		u32 gate;

		held[slot] = 0;
		if (d->on_slot[slot] == TRACE_NONE)
			continue;
		ctx = trace_unit_context(unit, d->on_slot[slot]);
		if (!trace_gate_is_open(__atomic_load_n(&ctx->gate,
							__ATOMIC_ACQUIRE)))
			continue;
		gate = trace_context_hold(ctx);
		held[slot] = 1;
		if (trace_context_wait_held(ctx, gate, HOLD_TIMEOUT_MS) ==
		    TRACE_WAIT_TIMEOUT)
			fprintf(stderr, "copsim: kernel driver: the context on "
				"slot %u did not stop within %d ms; its LFSR "
				"is not reloaded\n", slot, HOLD_TIMEOUT_MS);
	}
}

static void release_held(struct copsim_driver *d, const int *held)
{
	for (u32 slot = 0; slot < d->info->n_slots; slot++)
		if (held[slot])
			trace_context_release(trace_unit_context(
				d->info->unit, d->on_slot[slot]));
}

static int create_driver(struct copsim_driver *d,
			 const struct copsim_info *info)
{
	char err[COPSIM_TEXT_MAX];

	d->info = info;
	d->os = copdrv_hosted_create(info->unit->base, info->unit->size, 0,
				     err, sizeof(err));
	if (!d->os) {
		fprintf(stderr, "copsim: %s\n", err);
		return -1;
	}
	d->drv = copdrv_hosted_driver(d->os);
	return 0;
}

static struct copdrv_params core_params(const struct copsim_driver *d)
{
	struct copdrv_params p = {
		.lfsr_value = d->params.lfsr_value,
		.lfsr_count = d->params.lfsr_count,
		.poll_interval_ns = d->params.poll_interval_ns,
		.clock_hz = d->info->nominal_hz,
		.fifo_depth = d->info->unit->header->fifo_depth,
		.buffer_bytes = d->params.buffer_bytes,
		.fifo_full = d->params.fifo_full,
		.watermark = d->params.watermark,
		.dither = d->params.dither,
		.dither_seed = d->params.dither_seed,
		.event = d->params.event,
	};

	return p;
}

/* Under the scheduler lock: what is bound now, and maybe a start. */
static int hook_start(void *data, const struct copsim_info *info,
		      const struct copsim_switch *bound, size_t n_bound)
{
	struct copsim_driver *d = data;
	struct copdrv_params params;
	int held[TRACE_MAX_SLOTS];

	if (!d->os && create_driver(d, info))
		return -1;
	for (u32 slot = 0; slot < info->n_slots; slot++) {
		copdrv_unbind(d->drv, slot);
		d->on_slot[slot] = TRACE_NONE;
	}
	for (size_t i = 0; i < n_bound; i++)
		bind_context(d, &bound[i]);
	if (d->pending != HOOK_START)
		return 0;
	params = core_params(d);
	hold_running(d, held);
	d->hook_failed = copdrv_hosted_start(d->os, &params, &d->stream_fd,
					     d->hook_err,
					     sizeof(d->hook_err)) < 0;
	release_held(d, held);
	return 0;
}

/* Under the scheduler lock: the hooks go, or copsim stops. */
static void hook_stop(void *data, const struct copsim_info *info)
{
	struct copsim_driver *d = data;
	int held[TRACE_MAX_SLOTS];

	if (!d->running || d->pending == HOOK_START)
		return;
	hold_running(d, held);
	d->hook_failed = copdrv_hosted_stop(d->os, d->hook_err,
					    sizeof(d->hook_err)) < 0;
	for (u32 slot = 0; slot < info->n_slots; slot++)
		trace_slot_status(info->unit, slot, &d->at_stop[slot]);
	d->slots_at_stop = info->n_slots;
	release_held(d, held);
	d->running = 0;
}

/* Has the hooks removed and installed again, for `what` to happen. */
static int reinstall(struct copsim_driver *d, enum pending_hook what,
		     char *err, size_t errlen)
{
	int status = 0;

	d->pending = what;
	d->hook_failed = 0;
	copsim_hooks_remove(d->sim);
	if (copsim_hooks_install(d->sim, &d->hooks, err, errlen) < 0) {
		status = -1;
	} else if (d->hook_failed) {
		snprintf(err, errlen, "%s", d->hook_err);
		status = -1;
	}
	d->pending = HOOK_SYNC;
	return status;
}

/* ---- Sessions ------------------------------------------------------------ */

static int params_valid(const struct copsim_driver *d,
			const struct copdrv_control_params *p, char *err,
			size_t errlen)
{
	u32 depth = d->info->unit->header->fifo_depth;
	char why[COPSIM_TEXT_MAX];

	if (p->lfsr_count > LFSR_PERIOD ||
	    (p->lfsr_count && p->lfsr_value != lfsr_value_for_count(
		     p->lfsr_count)) ||
	    (!p->lfsr_count && p->lfsr_value)) {
		snprintf(err, errlen, "kernel driver: LFSR value 0x%06x is not "
			 "the value for one capture every %u cycles",
			 p->lfsr_value, p->lfsr_count);
		return 0;
	}
	if (p->lfsr_count && lfsr_check_count(p->lfsr_count,
					      (double)d->info->nominal_hz,
					      depth, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "kernel driver: %s", why);
		return 0;
	}
	if (p->fifo_full > COPDRV_FIFO_STALL || p->dither > 1) {
		snprintf(err, errlen, "kernel driver: FIFO-full policy %u or "
			 "dither %u is not 0 or 1", p->fifo_full, p->dither);
		return 0;
	}
	if (p->event > COPDRV_EVENT_INSTRUCTIONS || p->reserved) {
		snprintf(err, errlen, "kernel driver: event %u is not 0 "
			 "(SPU_CYCLES) or 1 (SPU_INSTRUCTIONS), or the reserved "
			 "word %u is not 0", p->event, p->reserved);
		return 0;
	}
	if (p->watermark >= depth) {
		snprintf(err, errlen, "kernel driver: watermark %u is not below "
			 "the FIFO depth %u", p->watermark, depth);
		return 0;
	}
	if (p->poll_interval_ns < COPDRV_POLL_MIN_NS ||
	    p->poll_interval_ns > COPDRV_POLL_MAX_NS) {
		snprintf(err, errlen, "kernel driver: poll interval %llu ns is "
			 "outside %llu..%llu", (unsigned long long)
			 p->poll_interval_ns, COPDRV_POLL_MIN_NS,
			 COPDRV_POLL_MAX_NS);
		return 0;
	}
	if (p->buffer_bytes && (p->buffer_bytes < COPDRV_BUFFER_MIN ||
				p->buffer_bytes > COPDRV_BUFFER_MAX)) {
		snprintf(err, errlen, "kernel driver: buffer of %u bytes is "
			 "outside %u..%u", p->buffer_bytes, COPDRV_BUFFER_MIN,
			 COPDRV_BUFFER_MAX);
		return 0;
	}
	return 1;
}

int copsim_driver_set(struct copsim_driver *d,
		      const struct copdrv_control_params *params, char *err,
		      size_t errlen)
{
	int status = -1;

	pthread_mutex_lock(&d->lock);
	if (d->running) {
		errno = EBUSY;
		snprintf(err, errlen, "kernel driver: a session runs; stop it "
			 "first");
	} else if (!params_valid(d, params, err, errlen)) {
		errno = EINVAL;
	} else {
		d->params = *params;
		d->params_set = 1;
		status = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return status;
}

int copsim_driver_fill_params(struct copsim_driver *d, uint32_t count,
			      struct copdrv_control_params *params, char *err,
			      size_t errlen)
{
	u32 depth = d->info->unit->header->fifo_depth;
	u64 interval;

	char why[COPSIM_TEXT_MAX];

	if (lfsr_check_count(count, (double)d->info->nominal_hz, depth, why,
			     sizeof(why)) < 0) {
		snprintf(err, errlen, "kernel driver: %s", why);
		return -1;
	}
	interval = lfsr_poll_interval_ns(count, (double)d->info->nominal_hz,
					 depth);
	if (interval < COPSIM_DRIVER_MIN_POLL_NS)
		interval = COPSIM_DRIVER_MIN_POLL_NS;
	memset(params, 0, sizeof(*params));
	params->lfsr_value = lfsr_value_for_count(count);
	params->lfsr_count = count;
	params->poll_interval_ns = interval;
	return 0;
}

int copsim_driver_start(struct copsim_driver *d, int *stream_fd, char *err,
			size_t errlen)
{
	int status = -1;

	pthread_mutex_lock(&d->lock);
	if (d->running) {
		errno = EBUSY;
		snprintf(err, errlen, "kernel driver: a session runs already");
	} else if (!d->params_set) {
		errno = EINVAL;
		snprintf(err, errlen, "kernel driver: no LFSR value set");
	} else if (reinstall(d, HOOK_START, err, errlen) < 0) {
		errno = EIO;
	} else {
		d->running = 1;
		*stream_fd = d->stream_fd;
		status = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return status;
}

int copsim_driver_stop(struct copsim_driver *d, char *err, size_t errlen)
{
	int status = -1;

	pthread_mutex_lock(&d->lock);
	if (!d->running) {
		errno = EALREADY;
		snprintf(err, errlen, "kernel driver: no session runs");
	} else if (reinstall(d, HOOK_STOP, err, errlen) < 0) {
		errno = EIO;
	} else {
		status = 0;
	}
	pthread_mutex_unlock(&d->lock);
	return status;
}

void copsim_driver_stats(struct copsim_driver *d, struct copdrv_stats *stats,
			 unsigned long long *poll_cpu_ns)
{
	copdrv_get_stats(d->drv, stats);
	*poll_cpu_ns = copdrv_hosted_poll_cpu_ns(d->os);
}

/* Reads only the driver's own copy: copsim may be gone by now. */
void copsim_driver_report_slots(struct copsim_driver *d, FILE *out)
{
	for (u32 slot = 0; slot < d->slots_at_stop; slot++) {
		const struct trace_slot_status *st = &d->at_stop[slot];

		if (!st->cycles && !st->captures)
			continue;
		fprintf(out, "copsim: slot %u: captures=%llu dropped=%llu "
			"outside=%llu cycles=%llu stalls=%llu stall_ns=%llu\n",
			slot, (unsigned long long)st->captures,
			(unsigned long long)st->dropped,
			(unsigned long long)st->outside,
			(unsigned long long)st->cycles,
			(unsigned long long)st->stalls,
			(unsigned long long)st->stall_ns);
	}
}

/* ---- Control requests ---------------------------------------------------- */

static void reply_init(struct copsim_driver *d, unsigned type,
		       struct copdrv_control_reply *reply)
{
	memset(reply, 0, sizeof(*reply));
	copsim_header_init(&reply->header, type | COPSIM_REPLY,
			   sizeof(*reply));
	reply->params = d->params;
	reply->running = (u32)d->running;
	reply->slots = d->info->n_slots;
	reply->fifo_depth = d->info->unit->header->fifo_depth;
	reply->stack_depth = d->info->unit->header->stack_depth;
	reply->clock_hz = d->info->nominal_hz;
}

static int reply_result(struct copsim_driver *d, int sock, unsigned type,
			int status, const char *err, const int *fd)
{
	struct copdrv_control_reply reply;
	int sent;

	reply_init(d, type, &reply);
	copsim_status_set(&reply.status, status < 0 ? errno : 0, "%s",
			  status < 0 ? err : "");
	sent = copsim_send(sock, &reply.header, fd, fd ? 1 : 0);
	return sent < 0 ? -1 : 0;
}

static int reply_stats(struct copsim_driver *d, int sock)
{
	struct copdrv_control_stats reply;
	struct copdrv_stats s;
	unsigned long long cpu;

	memset(&reply, 0, sizeof(reply));
	copsim_header_init(&reply.header, COPDRV_CONTROL_STATS | COPSIM_REPLY,
			   sizeof(reply));
	copsim_status_set(&reply.status, 0, "%s", "");
	copsim_driver_stats(d, &s, &cpu);
	reply.running = s.running;
	reply.ended = s.ended;
	reply.polls = s.polls;
	reply.samples = s.samples;
	for (int cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++)
		reply.lost_by_cause[cause] = s.lost_by_cause[cause];
	reply.lost_pending = s.lost_pending;
	for (int code = 0; code < COPSTREAM_CODE_END; code++)
		reply.records[code] = s.records[code];
	reply.records_waiting = s.records_waiting;
	reply.bytes_written = s.bytes_written;
	reply.bytes_read = s.bytes_read;
	reply.buffer_bytes = s.buffer_bytes;
	reply.buffer_used = s.buffer_used;
	reply.buffer_high_water = s.buffer_high_water;
	reply.fifo_errors = s.fifo_errors;
	reply.guard_errors = s.guard_errors;
	reply.poll_ns = s.poll_ns;
	reply.poll_cpu_ns = cpu;
	reply.overlays_placed = s.overlays_placed;
	reply.overlay_events_lost = s.overlay_events_lost;
	reply.doorbell_polls = s.doorbell_polls;
	reply.stalls = s.stalls;
	reply.stall_ns = s.stall_ns;
	for (u32 slot = 0; slot < COPDRV_MAX_SLOTS; slot++) {
		reply.slot_stalls[slot] = s.slot_stalls[slot];
		reply.slot_stall_ns[slot] = s.slot_stall_ns[slot];
	}
	return copsim_send(sock, &reply.header, NULL, 0) < 0 ? -1 : 0;
}

static int handle_set(struct copsim_driver *d, int sock,
		      const struct copsim_message *m)
{
	const struct copdrv_control_set *set = (const void *)m->u.bytes;
	size_t given = m->size - offsetof(struct copdrv_control_set, params);
	struct copdrv_control_params params;
	char err[COPSIM_TEXT_MAX] = "";
	int status;

	if (m->size < offsetof(struct copdrv_control_set, params) +
		      COPDRV_CONTROL_PARAMS_V1_SIZE) {
		errno = EPROTO;
		return reply_result(d, sock, COPDRV_CONTROL_SET, -1,
				    "kernel driver: SET too short", NULL);
	}
	/* The first form ends at buffer_bytes and a zero word, the second
	 * at dither_seed: what they lack is zero. */
	memset(&params, 0, sizeof(params));
	memcpy(&params, &set->params,
	       given < sizeof(params) ? given : sizeof(params));
	status = copsim_driver_set(d, &params, err, sizeof(err));
	return reply_result(d, sock, COPDRV_CONTROL_SET, status, err, NULL);
}

static int handle_start(struct copsim_driver *d, int sock)
{
	char err[COPSIM_TEXT_MAX] = "";
	int fd = -1;
	int status = copsim_driver_start(d, &fd, err, sizeof(err));
	int sent = reply_result(d, sock, COPDRV_CONTROL_START, status, err,
				status < 0 ? NULL : &fd);

	if (fd >= 0)
		close(fd);
	return sent;
}

static int handle_request(void *data, int sock,
			  const struct copsim_message *m, pid_t peer_pid)
{
	struct copsim_driver *d = data;
	unsigned type = m->u.header.type;
	char err[COPSIM_TEXT_MAX] = "";
	int status;

	switch (type) {
	case COPDRV_CONTROL_SET:
		return handle_set(d, sock, m);
	case COPDRV_CONTROL_GET:
		return reply_result(d, sock, type, 0, "", NULL);
	case COPDRV_CONTROL_START:
		return handle_start(d, sock);
	case COPDRV_CONTROL_STOP:
		status = copsim_driver_stop(d, err, sizeof(err));
		return reply_result(d, sock, type, status, err, NULL);
	case COPDRV_CONTROL_STATS:
		return reply_stats(d, sock);
	}
	errno = ENOSYS;
	snprintf(err, sizeof(err), "kernel driver: unknown request %u", type);
	return reply_result(d, sock, type, -1, err, NULL);
}

/* ---- Life cycle ---------------------------------------------------------- */

struct copsim_driver *copsim_driver_attach(struct copsim *sim, char *err,
					   size_t errlen)
{
	struct copsim_driver *d = calloc(1, sizeof(*d));

	if (!d) {
		snprintf(err, errlen, "kernel driver: out of memory");
		return NULL;
	}
	d->sim = sim;
	d->stream_fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	d->hooks = (struct copsim_hooks){
		.data = d,
		.start = hook_start,
		.bind = hook_bind,
		.unbind = hook_unbind,
		.stop = hook_stop,
	};
	if (copsim_hooks_install(sim, &d->hooks, err, errlen) < 0) {
		copsim_driver_free(d);
		return NULL;
	}
	copsim_set_driver_requests(sim, handle_request, d);
	return d;
}

void copsim_driver_detach(struct copsim_driver *d)
{
	copsim_set_driver_requests(d->sim, NULL, NULL);
	copsim_hooks_remove(d->sim);
}

void copsim_driver_free(struct copsim_driver *d)
{
	if (!d)
		return;
	copdrv_hosted_destroy(d->os);
	pthread_mutex_destroy(&d->lock);
	free(d);
}
