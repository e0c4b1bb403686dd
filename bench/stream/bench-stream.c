/*
 * bench-stream.c — speed of the stream decoder and of the sample encoder,
 * each beside a plain loop over the same memory measured in the same run.
 *
 * Decoder: a synthetic session of 8 slots (a context on each, a time
 * record per slot every 512 samples, as a driver polling at that rate
 * writes) is fed in 64 KiB pieces, as from a socket, to a decoder whose
 * handler counts samples per slot.  The baseline is a loop that only loads
 * and sums the words.  The daemon's target is 30 M samples/s for all its
 * work, so decoding should take a small part of that.
 *
 * Encoder: a full trace FIFO of 1024 PC fields is turned into sample words
 * with copstream_encode_pc_fields, against a plain widening copy of the
 * same fields.  The driver's target is 10 ns per sample drained and
 * encoded, of which this is the encoding part.
 *
 * Each figure is the best of several repetitions (the machine is shared).
 */
#include "escape-protocol/copstream.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS          8
#define SAMPLES        (4u << 20)    /* per stream */
#define POLL_SAMPLES   512           /* samples between time records */
#define PIECE          65536
#define FIFO_DEPTH     1024
#define REPEATS        7

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- The synthetic stream ----------------------------------------------- */

struct stream {
    uint8_t *bytes;
    size_t length, capacity;
};

static void put(struct stream *s, const struct copstream_record *rec)
{
    int bytes = copstream_encode_record(s->bytes + s->length,
                                        s->capacity - s->length, rec);
    if (bytes < 0) {
        fprintf(stderr, "bench-stream: cannot encode record %u\n", rec->code);
        exit(1);
    }
    s->length += (size_t)bytes;
}

static void put_samples(struct stream *s, uint32_t slot, const uint16_t *fields,
                        size_t count)
{
    s->length += 8 * copstream_encode_pc_fields(s->bytes + s->length,
                                                s->capacity - s->length, slot,
                                                fields, count);
}

static struct stream make_stream(void)
{
    struct stream s = { NULL, 0, 8 * (size_t)SAMPLES * 2 };
    struct copstream_record rec = { .code = COPSTREAM_START };
    uint16_t fields[POLL_SAMPLES];
    uint32_t seed = 1;

    s.bytes = malloc(s.capacity);
    if (s.bytes == NULL) {
        fprintf(stderr, "bench-stream: out of memory\n");
        exit(1);
    }
    rec.u.start = (struct copstream_start){
        COPSTREAM_VERSION, SLOTS, 0xFFFFFE, 1, 1000000000, FIFO_DEPTH,
        262144, 512, 0,
    };
    put(&s, &rec);
    for (uint32_t slot = 0; slot < SLOTS; slot++) {
        rec = (struct copstream_record){ .code = COPSTREAM_CONTEXT };
        rec.u.context.slot = slot;
        rec.u.context.context_id = slot + 1;
        put(&s, &rec);
    }
    for (uint64_t n = 0; n < SAMPLES; n += POLL_SAMPLES) {
        uint32_t slot = (uint32_t)(n / POLL_SAMPLES % SLOTS);
        for (int i = 0; i < POLL_SAMPLES; i++) {
            seed = seed * 1103515245 + 12345;
            fields[i] = (uint16_t)(seed >> 16);
        }
        put_samples(&s, slot, fields, POLL_SAMPLES);
        rec = (struct copstream_record){ .code = COPSTREAM_TIME };
        rec.u.time = (struct copstream_time){ slot, n, n };
        put(&s, &rec);
    }
    rec = (struct copstream_record){ .code = COPSTREAM_STOP };
    rec.u.stop = (struct copstream_stop){ 1, SAMPLES, 0 };
    put(&s, &rec);
    return s;
}

/* ---- Decoding ----------------------------------------------------------- */

struct tally {
    uint64_t per_slot[COPSTREAM_MAX_SLOTS];
    uint64_t records;
};

static void count_samples(void *user, uint64_t offset,
                          const struct copstream_sample *samples, size_t count)
{
    struct tally *t = user;

    for (size_t i = 0; i < count; i++)
        t->per_slot[samples[i].slot]++;
}

static void count_record(void *user, const struct copstream_record *rec)
{
    ((struct tally *)user)->records++;
}

static struct copstream_decoder decoder;

static double time_decode(const struct stream *s)
{
    struct tally tally = { { 0 }, 0 };
    struct copstream_handler handler = {
        count_samples, count_record, NULL, NULL, &tally
    };
    double begin = now();

    copstream_decoder_init(&decoder, &handler);
    for (size_t at = 0; at < s->length; at += PIECE) {
        size_t n = s->length - at < PIECE ? s->length - at : PIECE;
        copstream_decoder_feed(&decoder, s->bytes + at, n);
    }
    copstream_decoder_finish(&decoder);
    double seconds = now() - begin;

    uint64_t total = 0;
    for (int slot = 0; slot < SLOTS; slot++)
        total += tally.per_slot[slot];
    if (total != SAMPLES || decoder.stats.errors != 0) {
        fprintf(stderr, "bench-stream: decoded %" PRIu64 " samples, %" PRIu64
                " errors\n", total, decoder.stats.errors);
        exit(1);
    }
    return seconds;
}

static volatile uint64_t sink;

static double time_scan(const struct stream *s)
{
    double begin = now();
    uint64_t sum = 0;

    for (size_t at = 0; at + 8 <= s->length; at += 8) {
        uint64_t w;
        memcpy(&w, s->bytes + at, 8);
        sum += w;
    }
    sink = sum;
    return now() - begin;
}

/* ---- Encoding ----------------------------------------------------------- */

#define ENCODE_ROUNDS 20000

static double time_encode(const uint16_t *fifo, uint8_t *out)
{
    double begin = now();

    for (int r = 0; r < ENCODE_ROUNDS; r++) {
        size_t n = copstream_encode_pc_fields(out, 8 * FIFO_DEPTH,
                                              (uint32_t)r % SLOTS, fifo,
                                              FIFO_DEPTH);
        sink += n + out[r % (8 * FIFO_DEPTH)];
    }
    return now() - begin;
}

static double time_widen(const uint16_t *fifo, uint64_t *out)
{
    double begin = now();

    for (int r = 0; r < ENCODE_ROUNDS; r++) {
        for (int i = 0; i < FIFO_DEPTH; i++)
            out[i] = fifo[i];
        __asm__ volatile("" : : "r"(out) : "memory");
        sink += out[r % FIFO_DEPTH];
    }
    return now() - begin;
}

static double best(double a, double b)
{
    return a < b ? a : b;
}

int main(void)
{
    struct stream s = make_stream();
    double decode = 1e9, scan = 1e9, encode = 1e9, widen = 1e9;
    static uint16_t fifo[FIFO_DEPTH];
    static uint8_t encoded[8 * FIFO_DEPTH];
    static uint64_t widened[FIFO_DEPTH];

    for (int i = 0; i < FIFO_DEPTH; i++)
        fifo[i] = (uint16_t)(i * 7919);
    for (int r = 0; r < REPEATS; r++) {
        scan = best(scan, time_scan(&s));
        decode = best(decode, time_decode(&s));
        widen = best(widen, time_widen(fifo, widened));
        encode = best(encode, time_encode(fifo, encoded));
    }

    double words = s.length / 8.0;
    double encoded_samples = (double)ENCODE_ROUNDS * FIFO_DEPTH;
    printf("stream: %u samples on %d slots, %.1f MB, fed in %d KiB pieces\n",
           SAMPLES, SLOTS, s.length / 1e6, PIECE / 1024);
    printf("decode: %.0f M samples/s (%.2f ns/sample); plain word scan "
           "%.0f M words/s; decode/scan time ratio %.2f\n",
           SAMPLES / decode / 1e6, decode / SAMPLES * 1e9,
           words / scan / 1e6, decode / scan);
    printf("encode: %.2f ns/sample (PC fields to words); plain widening "
           "copy %.2f ns/field; ratio %.2f; driver target <= 10 ns/sample "
           "drained and encoded\n", encode / encoded_samples * 1e9,
           widen / encoded_samples * 1e9, encode / widen);
    free(s.bytes);
    return 0;
}
