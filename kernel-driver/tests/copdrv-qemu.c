/*
 * copdrv-qemu.c - runs coprocessor images under QEMU and the trace-unit
 * plugin with the hosted driver polling in this process, for the driver's
 * tests before copsim hosts it.
 *
 *   copdrv-qemu --sample-every N --stream FILE [OPTIONS]
 *               -- IMAGE [ARGS...] [+ IMAGE [ARGS...]]...
 *
 * It plays a minimal copsim: one guest RAM (loaded by the SDK's loader)
 * and one QEMU per image, a private register file, and the driver's
 * context-switch hooks called where copsim will call them.  Without
 * --slice-us each image runs on its own slot, all at once, bound before
 * the driver starts (so the start announces them).  With --slice-us all
 * share slot 0, round robin: bind, release the gate, let it run a slice,
 * hold it at a block boundary, unbind.
 *
 * It writes the stream to FILE, checks it against the writer rules, and
 * prints on standard output, one line each: every slot's counters
 * ("slot=S captures=A dropped=B outside=C cycles=D"), every context
 * ("context=ID status=S instructions=N"), then the rule checker's summary.
 * Exit status 0 when every run happened, whatever the programs returned.
 */
#include "kernel-driver/copdrv-hosted.h"
#include "kernel-driver/tests/stream-rules.h"
#include "trace-unit/trace-unit.h"
#include "lfsr/lfsr.h"
#include "common/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_RUNS	8
#define HOLD_TIMEOUT_MS	10000

struct options {
	guint32 sample_every;
	guint32 event;			/* TRACE_EVENT_*: what N counts */
	guint64 poll_us;		/* 0: from lfsr_poll_interval_ns */
	guint64 clock_hz;
	guint32 buffer_bytes;
	guint32 fifo_depth;
	guint64 slice_us;		/* 0: one slot per image */
	int reference;
	const char *stream_path;
	const char *console_path;
};

struct run {
	char **argv;			/* IMAGE ARGS..., NULL-terminated */
	int argc;
	struct cop_image image;
	struct cop_ram ram;
	struct copstream_image_id id;
	guint32 context;		/* register-file context, id - 1 */
	pid_t pid;
	int status;
	int exited;
	int loaded;			/* image read, RAM created */
};

struct harness {
	struct options opts;
	struct run runs[MAX_RUNS];
	int n_runs;
	struct trace_unit *unit;
	struct copdrv_os *os;
	struct copdrv *drv;
	int console_fd;
	int stream_fd;
	FILE *stream_file;
	struct stream_rules *rules;
	GThread *reader;
};

static int fail(const char *format, ...) G_GNUC_PRINTF(1, 2);

static int fail(const char *format, ...)
{
	va_list args;

	fputs("copdrv-qemu: ", stderr);
	va_start(args, format);
	vfprintf(stderr, format, args);
	va_end(args);
	fputc('\n', stderr);
	return -1;
}

static void usage(FILE *out)
{
	fputs("usage: copdrv-qemu --sample-every N --stream FILE [OPTIONS]\n"
	      "                   -- IMAGE [ARGS...] [+ IMAGE [ARGS...]]...\n"
	      "\n"
	      "  -n, --sample-every N  one capture every N events\n"
	      "      --event E         SPU_CYCLES (default: the timing\n"
	      "                        model's cycles) or SPU_INSTRUCTIONS\n"
	      "  -s, --stream FILE     write the driver's stream to FILE\n"
	      "      --poll-us U       poll interval (default: from lfsr/)\n"
	      "      --clock-hz HZ     nominal clock (default 1000000000)\n"
	      "      --buffer BYTES    event buffer size (default: driver's)\n"
	      "      --fifo-depth D    trace FIFO entries (default 1024)\n"
	      "      --slice-us S      share slot 0, S microseconds a slice\n"
	      "      --reference       the plugin's reference mode\n"
	      "      --console FILE    the programs' output (default "
	      "/dev/null)\n", out);
}

static int parse_number(const char *text, guint64 max, guint64 *value)
{
	char *end;

	errno = 0;
	*value = g_ascii_strtoull(text, &end, 10);
	return errno || end == text || *end || *value > max ? -1 : 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	static const struct option long_options[] = {
		{ "sample-every", required_argument, NULL, 'n' },
		{ "stream", required_argument, NULL, 's' },
		{ "poll-us", required_argument, NULL, 'p' },
		{ "clock-hz", required_argument, NULL, 'c' },
		{ "buffer", required_argument, NULL, 'b' },
		{ "fifo-depth", required_argument, NULL, 'f' },
		{ "slice-us", required_argument, NULL, 'S' },
		{ "reference", no_argument, NULL, 'R' },
		{ "console", required_argument, NULL, 'C' },
		{ "event", required_argument, NULL, 'e' },
		{ NULL, 0, NULL, 0 },
	};
	guint64 v;
	int c;

	o->clock_hz = 1000000000;
	o->fifo_depth = TRACE_DEFAULT_FIFO_DEPTH;
	o->console_path = "/dev/null";
	while ((c = getopt_long(argc, argv, "+n:s:", long_options,
				NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 'n':
			bad = parse_number(optarg, LFSR_PERIOD, &v) || !v;
			o->sample_every = (guint32)v;
			break;
		case 's':
			o->stream_path = optarg;
			break;
		case 'p':
			bad = parse_number(optarg, 10000000, &o->poll_us);
			break;
		case 'c':
			bad = parse_number(optarg, G_MAXUINT64, &o->clock_hz);
			break;
		case 'b':
			bad = parse_number(optarg, G_MAXUINT32, &v);
			o->buffer_bytes = (guint32)v;
			break;
		case 'f':
			bad = parse_number(optarg, TRACE_MAX_FIFO_DEPTH, &v);
			o->fifo_depth = (guint32)v;
			break;
		case 'S':
			bad = parse_number(optarg, 10000000, &o->slice_us);
			break;
		case 'R':
			o->reference = 1;
			break;
		case 'e':
			bad = trace_parse_event(optarg, &o->event);
			break;
		case 'C':
			o->console_path = optarg;
			break;
		default:
			usage(stderr);
			return -1;
		}
		if (bad)
			return fail("'%s': not a valid number", optarg);
	}
	if (!o->sample_every || !o->stream_path || optind >= argc) {
		usage(stderr);
		return -1;
	}
	return optind;
}

/* Splits IMAGE ARGS... + IMAGE ARGS... into runs. */
static int split_runs(struct harness *h, int argc, char **argv)
{
	int first = 0;

	for (int i = 0; i <= argc; i++) {
		if (i < argc && strcmp(argv[i], "+") != 0)
			continue;
		if (i == first || h->n_runs == MAX_RUNS)
			return fail("expected at most %d images separated by "
				    "'+'", MAX_RUNS);
		h->runs[h->n_runs].argv = argv + first;
		h->runs[h->n_runs].argc = i - first;
		h->n_runs++;
		if (i < argc)
			argv[i] = NULL;
		first = i + 1;
	}
	return 0;
}

/* ---- Images and emulators ------------------------------------------------ */

/* dev, inode, size and the content hash (escape-protocol/README.md). */
static int image_identity(const char *path, const struct cop_image *image,
			  struct copstream_image_id *id)
{
	GChecksum *sha = g_checksum_new(G_CHECKSUM_SHA256);
	guint8 digest[32];
	gsize length = sizeof(digest);
	struct stat st;

	if (stat(path, &st)) {
		g_checksum_free(sha);
		return fail("%s: %s", path, strerror(errno));
	}
	g_checksum_update(sha, image->bytes, image->size);
	g_checksum_get_digest(sha, digest, &length);
	g_checksum_free(sha);
	id->device = st.st_dev;
	id->inode = st.st_ino;
	id->size = (guint64)st.st_size;
	id->hash = 0;
	for (int i = 7; i >= 0; i--)
		id->hash = id->hash << 8 | digest[i];
	return 0;
}

/* The context watches its image's guard words (trace-regs.h), so every
 * traced run places its overlay loads among its captures. */
static int watch_guards(struct harness *h, struct run *r)
{
	char err[512];

	if (trace_context_watch_guards(h->unit, r->context,
				       cop_image_guard_ls_offset(&r->image),
				       trace_watchable_guards(r->image.nregions),
				       err, sizeof(err)))
		return fail("%s", err);
	return 0;
}

static int spawn_run(struct harness *h, struct run *r, const char *plugin)
{
	struct cop_qemu_options qemu = { .ram_path = NULL };
	char arg[3 * PATH_MAX];
	struct cop_argv command;
	struct cop_error err;
	int result = 0;

	if (cop_image_read(r->argv[0], &r->image, &err))
		return fail("%s", err.message);
	if (cop_ram_create(&r->ram, NULL, &err)) {
		cop_image_release(&r->image);
		return fail("%s", err.message);
	}
	r->loaded = 1;
	if (cop_ram_load(&r->ram, &r->image, r->argc, r->argv, &err))
		return fail("%s", err.message);
	if (image_identity(r->argv[0], &r->image, &r->id) ||
	    watch_guards(h, r))
		return -1;
	/* ram= as cop-run gives it: the overlay guards and the DMA channel */
	if (trace_plugin_arg(arg, sizeof(arg), plugin, h->unit->path,
			     r->context, h->opts.reference ?
			     TRACE_MODE_REFERENCE : TRACE_MODE_FAST, NULL,
			     r->ram.path))
		return fail("%s: path too long", h->unit->path);
	qemu.ram_path = r->ram.path;
	cop_argv_init(&command);
	if (cop_qemu_command(&command, &qemu) ||
	    cop_argv_add(&command, "-plugin") || cop_argv_add(&command, arg))
		result = fail("out of memory");
	else if (cop_qemu_spawn(&command, h->console_fd, &r->pid, &err))
		result = fail("%s", err.message);
	cop_argv_free(&command);
	return result;
}

/* Waits until the run's emulator waits at its first, closed gate. */
static int wait_attached(struct harness *h, struct run *r)
{
	struct trace_regs_context *ctx = trace_unit_context(h->unit,
							     r->context);

	for (int waited = 0; waited < HOLD_TIMEOUT_MS; waited++) {
		guint32 status = __atomic_load_n(&ctx->status,
						 __ATOMIC_ACQUIRE);

		if (status == TRACE_CONTEXT_HELD ||
		    status == TRACE_CONTEXT_EXITED)
			return 0;
		g_usleep(1000);
	}
	return fail("%s: the emulator did not start", r->argv[0]);
}

static void release_run(struct run *r)
{
	if (!r->loaded)
		return;
	cop_ram_close(&r->ram);
	cop_image_release(&r->image);
}

/* ---- The scheduler's side: binding and the driver's hooks ---------------- */

static struct copdrv_context context_of(const struct run *r, guint32 slot)
{
	struct copdrv_context ctx = {
		.slot = slot,
		.pid = (guint32)r->pid,
		.tid = (guint32)r->pid,
		.context_id = r->context + 1,
		.object_id = 0,
		.image = r->id,
		.image_offset = 0,
		.path = (const guint8 *)r->argv[0],
		.path_length = (guint32)strlen(r->argv[0]),
		.ls = r->ram.base,
		.guard_offset = cop_image_guard_ls_offset(&r->image),
		.regions = r->image.nregions,
	};

	return ctx;
}

static int bind_run(struct harness *h, struct run *r, guint32 slot)
{
	struct copdrv_context ctx = context_of(r, slot);
	char err[512];
	int error;

	if (trace_unit_bind(h->unit, r->context, slot, err, sizeof(err)))
		return fail("%s", err);
	error = copdrv_bind(h->drv, &ctx);
	if (error) {
		copdrv_hosted_error(error, "bind", err, sizeof(err));
		return fail("%s", err);
	}
	return 0;
}

static void unbind_run(struct harness *h, struct run *r, guint32 slot)
{
	copdrv_unbind(h->drv, slot);
	trace_unit_unbind(h->unit, r->context);
}

static int wait_run(struct run *r)
{
	struct cop_error err;

	if (cop_qemu_wait(r->pid, &r->status, &err) < 0)
		return fail("%s", err.message);
	r->exited = 1;
	return 0;
}

/* Every image on its own slot, bound before the start, all at once. */
static int run_side_by_side(struct harness *h)
{
	int result = 0;

	for (int i = 0; i < h->n_runs; i++)
		trace_context_release(trace_unit_context(h->unit, i));
	for (int i = 0; i < h->n_runs; i++) {
		if (wait_run(&h->runs[i]))
			result = -1;
		unbind_run(h, &h->runs[i], (guint32)i);
	}
	return result;
}

/* One slice of a run on slot 0; returns 1 once it has exited. */
static int run_slice(struct harness *h, struct run *r)
{
	struct trace_regs_context *ctx = trace_unit_context(h->unit,
							     r->context);
	guint32 gate;
	int held;

	if (bind_run(h, r, 0))
		return -1;
	trace_context_release(ctx);
	g_usleep(h->opts.slice_us);
	gate = trace_context_hold(ctx);
	held = trace_context_wait_held(ctx, gate, HOLD_TIMEOUT_MS);
	if (held == TRACE_WAIT_TIMEOUT)
		return fail("context %u did not stop at its gate", r->context);
	unbind_run(h, r, 0);
	if (held == TRACE_WAIT_HELD)
		return 0;
	return wait_run(r) ? -1 : 1;
}

/* Every image on slot 0 in turn until all have exited. */
static int run_sliced(struct harness *h)
{
	int left = h->n_runs;

	while (left > 0) {
		for (int i = 0; i < h->n_runs; i++) {
			int done;

			if (h->runs[i].exited)
				continue;
			done = run_slice(h, &h->runs[i]);
			if (done < 0)
				return -1;
			left -= done;
		}
	}
	return 0;
}

/* ---- The stream ---------------------------------------------------------- */

static gpointer read_stream(gpointer data)
{
	struct harness *h = data;
	guint8 buf[65536];
	ssize_t got;

	while ((got = read(h->stream_fd, buf, sizeof(buf))) > 0) {
		fwrite(buf, 1, (size_t)got, h->stream_file);
		stream_rules_feed(h->rules, buf, (size_t)got);
	}
	stream_rules_finish(h->rules);
	return NULL;
}

static int start_driver(struct harness *h)
{
	guint32 count = h->opts.sample_every;
	struct copdrv_params params = {
		.lfsr_value = lfsr_value_for_count(count),
		.lfsr_count = count,
		.clock_hz = h->opts.clock_hz,
		.fifo_depth = h->opts.fifo_depth,
		.buffer_bytes = h->opts.buffer_bytes,
		.event = h->opts.event,
	};
	char err[512];

	params.poll_interval_ns = h->opts.poll_us ? h->opts.poll_us * 1000 :
		lfsr_poll_interval_ns(count, (double)h->opts.clock_hz,
				      h->opts.fifo_depth);
	if (params.poll_interval_ns < COPDRV_POLL_MIN_NS)
		params.poll_interval_ns = COPDRV_POLL_MIN_NS;
	if (copdrv_hosted_start(h->os, &params, &h->stream_fd, err,
				sizeof(err)))
		return fail("%s", err);
	h->reader = g_thread_new("stream", read_stream, h);
	return 0;
}

static int stop_driver(struct harness *h)
{
	char err[512];
	int result = 0;

	if (copdrv_hosted_stop(h->os, err, sizeof(err)))
		result = fail("%s", err);
	g_thread_join(h->reader);
	close(h->stream_fd);
	if (fclose(h->stream_file))
		result = fail("%s: %s", h->opts.stream_path, strerror(errno));
	h->stream_file = NULL;
	return result;
}

static void print_results(struct harness *h)
{
	for (guint32 i = 0; i < h->unit->header->n_slots; i++) {
		struct trace_slot_status s;

		trace_slot_status(h->unit, i, &s);
		if (!s.cycles)
			continue;
		printf("slot=%u captures=%" PRIu64 " dropped=%" PRIu64
		       " outside=%" PRIu64 " cycles=%" PRIu64 "\n", i,
		       s.captures, s.dropped, s.outside, s.cycles);
	}
	for (int i = 0; i < h->n_runs; i++) {
		struct trace_regs_context *ctx =
			trace_unit_context(h->unit, h->runs[i].context);

		printf("context=%u status=%d instructions=%" PRIu64 "\n",
		       h->runs[i].context + 1, h->runs[i].status,
		       __atomic_load_n(&ctx->instructions, __ATOMIC_ACQUIRE));
	}
	stream_rules_print(h->rules, stdout);
}

/* ---- Main ---------------------------------------------------------------- */

static int setup(struct harness *h)
{
	struct trace_geometry geo;
	char err[512], plugin[PATH_MAX];

	trace_geometry_default(&geo);
	geo.fifo_depth = h->opts.fifo_depth;
	h->unit = trace_unit_create_temp(NULL, &geo, err, sizeof(err));
	if (!h->unit)
		return fail("%s", err);
	trace_unit_set_controller(h->unit, getpid());
	h->os = copdrv_hosted_create(h->unit->base, h->unit->size, 0, err,
				     sizeof(err));
	if (!h->os)
		return fail("%s", err);
	h->drv = copdrv_hosted_driver(h->os);
	if (trace_plugin_path(plugin, sizeof(plugin)))
		return fail("cannot find libcoptrace.so");
	h->console_fd = open(h->opts.console_path,
			     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (h->console_fd < 0)
		return fail("%s: %s", h->opts.console_path, strerror(errno));
	h->stream_file = fopen(h->opts.stream_path, "wb");
	if (!h->stream_file)
		return fail("%s: %s", h->opts.stream_path, strerror(errno));
	h->rules = stream_rules_new();
	for (int i = 0; i < h->n_runs; i++) {
		h->runs[i].context = (guint32)i;
		if (spawn_run(h, &h->runs[i], plugin))
			return -1;
	}
	for (int i = 0; i < h->n_runs; i++)
		if (wait_attached(h, &h->runs[i]))
			return -1;
	return 0;
}

static int run_all(struct harness *h)
{
	int result;

	if (!h->opts.slice_us) {
		for (int i = 0; i < h->n_runs; i++)
			if (bind_run(h, &h->runs[i], (guint32)i))
				return -1;
	}
	if (start_driver(h))
		return -1;
	result = h->opts.slice_us ? run_sliced(h) : run_side_by_side(h);
	if (stop_driver(h))
		result = -1;
	if (!result)
		print_results(h);
	return result;
}

static void cleanup(struct harness *h)
{
	for (int i = 0; i < h->n_runs; i++) {
		if (h->runs[i].pid > 0 && !h->runs[i].exited) {
			kill(h->runs[i].pid, SIGKILL);
			wait_run(&h->runs[i]);
		}
		release_run(&h->runs[i]);
	}
	copdrv_hosted_destroy(h->os);
	if (h->unit)
		trace_unit_close(h->unit, 1);
	if (h->stream_file)
		fclose(h->stream_file);
	stream_rules_free(h->rules);
}

int main(int argc, char **argv)
{
	struct harness h = { .console_fd = -1, .stream_fd = -1 };
	int first = parse_options(argc, argv, &h.opts);
	int result;

	if (first < 0 || split_runs(&h, argc - first, argv + first))
		return 2;
	if (h.n_runs > TRACE_DEFAULT_SLOTS && !h.opts.slice_us) {
		fail("at most %d images side by side", TRACE_DEFAULT_SLOTS);
		return 2;
	}
	result = setup(&h);
	if (!result)
		result = run_all(&h);
	cleanup(&h);
	return result ? 1 : 0;
}
