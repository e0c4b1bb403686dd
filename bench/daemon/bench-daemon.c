/*
 * bench-daemon.c — coprofd's replay throughput: decode, resolve,
 * aggregate and store, beside a decode-only pass over the same stream in
 * the same run.
 *
 * The stream: 8 slots shared by 12 contexts of one overlay image (the
 * overlay/ test image: resident code, a region with three overlays and one
 * with two), 512 samples per slot per poll, a TIME record closing every
 * poll group, a context switch on a slot every 16 polls (with the first
 * guard read of the incoming context), an overlay swap in region 1 every
 * 3 polls and in region 2 every 5, so some samples are ambiguous, a poll
 * every millisecond (the sample timeline has 10 ms buckets).  Sample addresses are drawn from the image's
 * code with a skew (hot loops), as a profile has.  At least 50 M samples.
 *
 * The full pass feeds the stream in 1 MiB pieces to a recorder (what
 * `coprofd --replay` runs) writing a session in a temporary directory,
 * flushing every second of wall time and once at the end.  The decode-only
 * pass feeds the same pieces to a bare decoder whose handler sums the
 * samples.  Each is the best of a few runs; the target is 30 M samples/s
 * for the full pass on one core.
 */
#include "daemon/images.h"
#include "daemon/recorder.h"
#include "escape-protocol/copstream.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define SLOTS           8
#define CONTEXTS        12
#define SAMPLES         (50u * 1000 * 1000)
#define POLL_SAMPLES    512
#define SWITCH_POLLS    16
#define PIECE           (1u << 20)
#define REPEATS         3
#define TARGET          30e6

#ifndef BENCH_IMAGE
#define BENCH_IMAGE "build/tests/overlay/overlays.elf"
#endif

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *message)
{
    fprintf(stderr, "bench-daemon: %s\n", message);
    exit(1);
}

/* ---- the stream --------------------------------------------------------- */

struct stream {
    uint8_t *bytes;
    size_t length, capacity;
    uint64_t samples;
};

struct layout {
    struct copstream_image_id identity;
    uint32_t code_end;              /* resident code and regions: [0, end) */
    uint32_t region_start[2], region_end[2];
};

static void put(struct stream *s, const struct copstream_record *rec)
{
    int bytes = copstream_encode_record(s->bytes + s->length,
                                        s->capacity - s->length, rec);
    if (bytes < 0)
        die("cannot encode a record");
    s->length += (size_t)bytes;
}

static void put_image(struct stream *s, const struct layout *l)
{
    struct copstream_record rec = { .code = COPSTREAM_IMAGE };

    rec.u.image.id = l->identity;
    rec.u.image.path = (const uint8_t *)BENCH_IMAGE;
    rec.u.image.path_length = (uint32_t)strlen(BENCH_IMAGE);
    put(s, &rec);
}

static void put_guard(struct stream *s, uint32_t slot, uint32_t region,
                      uint32_t guard, uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_OVERLAY };

    /* Unplaced, as read at a poll without the overlay watch: the costlier
     * path, where a change makes its window's samples ambiguous. */
    rec.u.overlay = (struct copstream_overlay){ slot, region, guard, cycle,
                                                0 };
    put(s, &rec);
}

/* Guards of each context: region 1 cycles overlays 1-3, region 2 4-5. */
static uint32_t guards[CONTEXTS][3];

static void put_context(struct stream *s, const struct layout *l,
                        uint32_t slot, uint32_t context, uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_CONTEXT };

    rec.u.context = (struct copstream_context){
        .slot = slot, .pid = 100 + context % 3, .tid = 1000 + context,
        .context_id = context + 1, .object_id = 0x400000,
        .image = l->identity, .image_offset = 0, .cycle = cycle,
    };
    put(s, &rec);
    for (uint32_t r = 0; r < 3; r++)
        put_guard(s, slot, r, guards[context][r], cycle);
}

/* A skewed address in the code: half the samples in 1/8 of it. */
static uint32_t draw_address(const struct layout *l, uint32_t *seed)
{
    *seed = *seed * 1103515245 + 12345;
    uint32_t r = *seed >> 8;
    uint32_t words = l->code_end / 4;
    uint32_t word = r & 1 ? (r >> 1) % (words / 8 + 1) : (r >> 1) % words;

    return word * 4;
}

static void put_poll(struct stream *s, const struct layout *l, uint32_t slot,
                     uint32_t context, uint64_t poll, uint32_t *seed)
{
    uint64_t *words = (uint64_t *)(s->bytes + s->length);
    uint64_t cycle = (poll + 1) * POLL_SAMPLES;
    struct copstream_record rec = { .code = COPSTREAM_TIME };

    for (int i = 0; i < POLL_SAMPLES; i++)
        words[i] = copstream_sample_word(slot, draw_address(l, seed));
    s->length += 8 * POLL_SAMPLES;
    s->samples += POLL_SAMPLES;
    if (poll % 3 == 2) {
        guards[context][0] = guards[context][0] % 3 + 1;
        put_guard(s, slot, 0, guards[context][0], cycle);
    }
    if (poll % 5 == 4) {
        guards[context][1] = guards[context][1] == 4 ? 5 : 4;
        put_guard(s, slot, 1, guards[context][1], cycle);
    }
    rec.u.time = (struct copstream_time){ slot, cycle, (poll + 1) * 1000000 };
    put(s, &rec);
}

static struct stream make_stream(const struct layout *l)
{
    struct stream s = { .capacity = (size_t)SAMPLES * 8 * 11 / 10 + 65536 };
    struct copstream_record rec = { .code = COPSTREAM_START };
    uint32_t on_slot[SLOTS], waiting[CONTEXTS - SLOTS], seed = 7;

    s.bytes = malloc(s.capacity);
    if (s.bytes == NULL)
        die("out of memory");
    rec.u.start = (struct copstream_start){
        COPSTREAM_VERSION, SLOTS, 0xFFFFFE, 1, 1000000000, 1024, 262144,
        1000000, 0,
    };
    put(&s, &rec);
    put_image(&s, l);
    for (uint32_t c = 0; c < CONTEXTS; c++) {
        guards[c][0] = 1 + c % 3;
        guards[c][1] = 4 + c % 2;
        guards[c][2] = 0;
    }
    for (uint32_t slot = 0; slot < SLOTS; slot++) {
        on_slot[slot] = slot;
        put_context(&s, l, slot, slot, 0);
    }
    for (uint32_t i = 0; i < CONTEXTS - SLOTS; i++)
        waiting[i] = SLOTS + i;
    for (uint64_t poll = 0; s.samples < SAMPLES; poll++) {
        for (uint32_t slot = 0; slot < SLOTS; slot++)
            put_poll(&s, l, slot, on_slot[slot], poll, &seed);
        if (poll % SWITCH_POLLS != SWITCH_POLLS - 1)
            continue;
        /* The slot's context goes to the back of the queue of waiting
         * contexts and the one at its front comes in. */
        uint64_t turn = poll / SWITCH_POLLS;
        uint32_t slot = (uint32_t)(turn % SLOTS);
        uint32_t *front = &waiting[turn % (CONTEXTS - SLOTS)];
        uint32_t incoming = *front;
        *front = on_slot[slot];
        on_slot[slot] = incoming;
        put_context(&s, l, slot, incoming, (poll + 1) * POLL_SAMPLES);
    }
    rec = (struct copstream_record){ .code = COPSTREAM_STOP };
    rec.u.stop = (struct copstream_stop){ 1, s.samples, 0 };
    put(&s, &rec);
    return s;
}

static struct layout read_layout(void)
{
    struct ovl_error error;
    struct ovl_image *image = ovl_image_open(BENCH_IMAGE, &error);
    struct layout l;
    gchar *bytes;
    gsize length;
    struct stat st;

    if (image == NULL)
        die(error.message);
    if (ovl_image_region_count(image) < 2)
        die(BENCH_IMAGE ": needs two overlay regions");
    for (unsigned r = 0; r < 2; r++) {
        l.region_start[r] = ovl_image_region(image, r + 1)->ls_start;
        l.region_end[r] = ovl_image_region(image, r + 1)->ls_end;
    }
    l.code_end = l.region_end[1];
    ovl_image_close(image);
    if (stat(BENCH_IMAGE, &st) != 0 ||
        !g_file_get_contents(BENCH_IMAGE, &bytes, &length, NULL))
        die(BENCH_IMAGE ": cannot read");
    l.identity = (struct copstream_image_id){
        (uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
        image_content_hash((const uint8_t *)bytes, length),
    };
    g_free(bytes);
    return l;
}

/* ---- the passes --------------------------------------------------------- */

static void sum_samples(void *user, uint64_t offset,
                        const struct copstream_sample *samples, size_t count)
{
    uint64_t *sum = user;

    for (size_t i = 0; i < count; i++)
        *sum += samples[i].address;
}

static struct copstream_decoder decoder;
static volatile uint64_t sink;

static double time_decode_only(const struct stream *s)
{
    uint64_t sum = 0;
    struct copstream_handler handler = {
        .samples = sum_samples, .user = &sum,
    };
    double begin = now();

    copstream_decoder_init(&decoder, &handler);
    for (size_t at = 0; at < s->length; at += PIECE)
        copstream_decoder_feed(&decoder, s->bytes + at,
                               MIN(PIECE, s->length - at));
    copstream_decoder_finish(&decoder);
    double seconds = now() - begin;
    if (decoder.stats.samples != s->samples || decoder.stats.errors != 0)
        die("the decode-only pass did not decode the stream cleanly");
    sink = sum;
    return seconds;
}

static void check_totals(const struct session_totals *t,
                         const struct stream *s)
{
    if (t->samples != s->samples || t->errors != 0 ||
        t->exact + t->ambiguous + t->unmapped + t->orphan != s->samples ||
        t->orphan != 0 || t->pending != 0 || t->contexts != CONTEXTS)
        die("the full pass lost or misplaced samples");
}

static double time_full(const struct stream *s, const char *dir,
                        struct session_totals *totals, uint64_t *flushes)
{
    struct recorder_options options = {
        .session_dir = dir, .source = "bench", .overwrite = true,
        .quiet = true, .timeline_ns = 10000000,
    };
    GError *error = NULL;
    double begin = now(), last_flush = begin;
    struct recorder *r = recorder_open(&options, &error);

    if (r == NULL)
        die(error->message);
    for (size_t at = 0; at < s->length; at += PIECE) {
        recorder_feed(r, s->bytes + at, MIN(PIECE, s->length - at));
        if (now() - last_flush >= 1.0) {
            if (recorder_flush(r, "timer", &error) != 0)
                die(error->message);
            last_flush = now();
        }
    }
    recorder_finish(r);
    if (recorder_flush(r, "end", &error) != 0)
        die(error->message);
    double seconds = now() - begin;
    session_get_totals(recorder_session(r), totals);
    *flushes = recorder_flushes(r);
    recorder_close(r);
    check_totals(totals, s);
    return seconds;
}

/* Removes the session the full pass wrote. */
static void remove_session(const char *dir, uint64_t image_hash)
{
    static const char *const files[] = {
        "session.db", "session.db-wal", "session.db-shm", ".lock",
    };
    g_autofree char *cached = g_strdup_printf("%s/images/%016" PRIx64
                                              "-0.elf", dir, image_hash);
    g_autofree char *cache = g_build_filename(dir, "images", NULL);

    for (size_t i = 0; i < G_N_ELEMENTS(files); i++) {
        g_autofree char *path = g_build_filename(dir, files[i], NULL);
        g_unlink(path);
    }
    g_unlink(cached);
    g_rmdir(cache);
    g_rmdir(dir);
}

int main(void)
{
    struct layout layout = read_layout();
    struct stream s = make_stream(&layout);
    struct session_totals totals;
    double decode = 1e9, full = 1e9;
    uint64_t flushes = 0;
    char *dir = g_dir_make_tmp("bench-daemon-XXXXXX", NULL);

    if (dir == NULL)
        die("cannot make a temporary directory");
    for (int r = 0; r < REPEATS; r++) {
        decode = MIN(decode, time_decode_only(&s));
        full = MIN(full, time_full(&s, dir, &totals, &flushes));
    }
    double n = (double)s.samples;
    printf("daemon: %" PRIu64 " samples, %d slots, %d contexts, %.0f MB "
           "replayed in %u KiB pieces\n", s.samples, SLOTS, CONTEXTS,
           s.length / 1e6, PIECE / 1024);
    printf("daemon: attributed exact=%" PRIu64 " ambiguous=%" PRIu64
           " unmapped=%" PRIu64 "; %" PRIu64 " flushes in the last run\n",
           totals.exact, totals.ambiguous, totals.unmapped, flushes);
    printf("daemon: full replay (decode, resolve, aggregate, store) %.1f M "
           "samples/s (%.2f ns/sample); decode only %.1f M samples/s "
           "(%.2f ns/sample); full/decode time ratio %.2f; target >= 30 M "
           "samples/s: %s\n", n / full / 1e6, full / n * 1e9,
           n / decode / 1e6, decode / n * 1e9, full / decode,
           n / full >= TARGET ? "met" : "NOT met");
    remove_session(dir, layout.identity.hash);
    g_free(dir);
    free(s.bytes);
    return 0;
}
