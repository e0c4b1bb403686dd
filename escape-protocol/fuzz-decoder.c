/*
 * fuzz-decoder.c — libFuzzer target for the stream decoder.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined, so any read outside
 * the input, overflow or undefined behaviour stops the run.  Beyond not
 * crashing, each input must satisfy:
 *
 *   - split invariance: decoded whole, and fed in pieces whose sizes come
 *     from the input's own bytes, the events (as a digest) and statistics
 *     are identical;
 *   - accounting: every byte is in a sample word, a framed record or the
 *     skipped count;
 *   - encoder agreement: every delivered record of a known code with no
 *     words past its fields re-encodes to exactly the bytes it came from,
 *     and every delivered sample is a word the encoder would write.
 *
 * A violation calls abort(), which libFuzzer reports as a crash.
 */
#include "escape-protocol/copstream.h"

#include <stdlib.h>
#include <string.h>

#define DIGEST_MULTIPLIER 0x100000001B3ull

struct observer {
    uint64_t digest;
};

static void mix(struct observer *o, uint64_t value)
{
    o->digest = (o->digest ^ value) * DIGEST_MULTIPLIER;
}

static void require(int condition)
{
    if (!condition)
        abort();
}

static void on_samples(void *user, uint64_t offset,
                       const struct copstream_sample *samples, size_t count)
{
    struct observer *o = user;

    for (size_t i = 0; i < count; i++) {
        require(copstream_sample_word(samples[i].slot, samples[i].address) !=
                COPSTREAM_ESCAPE);
        mix(o, 1);
        mix(o, offset + 8 * i);
        mix(o, (uint64_t)samples[i].slot << 32 | samples[i].address);
    }
}

/* The known fields' words, without any a later version appended. */
static int exact_length(const struct copstream_record *rec)
{
    int bytes = copstream_record_bytes(rec);

    return bytes > 0 && (size_t)bytes == 8 * (2 + (size_t)rec->payload_words);
}

static void on_record(void *user, const struct copstream_record *rec)
{
    struct observer *o = user;
    const uint8_t *framed = rec->payload - 16;
    static uint8_t again[COPSTREAM_MAX_RECORD_BYTES];

    mix(o, 2);
    mix(o, rec->offset);
    mix(o, (uint64_t)rec->code << 16 | rec->payload_words);
    mix(o, rec->repeat);
    for (size_t i = 0; i < 8 * (size_t)rec->payload_words; i++)
        mix(o, rec->payload[i]);
    if (copstream_code_name(rec->code) == NULL)
        return;
    require(copstream_record_bytes(rec) > 0);
    if (exact_length(rec)) {
        int bytes = copstream_encode_record(again, sizeof again, rec);
        require(bytes > 0 && memcmp(again, framed, (size_t)bytes) == 0);
    }
}

static void on_error(void *user, const struct copstream_error *err)
{
    struct observer *o = user;

    mix(o, 3);
    mix(o, err->offset);
    mix(o, (uint64_t)err->kind << 16 | err->code);
}

static void on_resync(void *user, uint64_t offset, uint64_t skipped)
{
    struct observer *o = user;

    mix(o, 4);
    mix(o, offset);
    mix(o, skipped);
}

static struct copstream_decoder decoder;

/* Decodes data in pieces of 1 + data[k] % modulus bytes (whole when 0). */
static struct copstream_stats run(const uint8_t *data, size_t size,
                                  unsigned modulus, uint64_t *digest)
{
    struct observer o = { 0xCBF29CE484222325ull };
    struct copstream_handler handler = {
        on_samples, on_record, on_error, on_resync, &o
    };

    copstream_decoder_init(&decoder, &handler);
    if (modulus == 0) {
        copstream_decoder_feed(&decoder, data, size);
    } else {
        size_t at = 0, k = 0;
        while (at < size) {
            size_t piece = 1 + data[k++ % size] % modulus;
            if (piece > size - at)
                piece = size - at;
            copstream_decoder_feed(&decoder, data + at, piece);
            at += piece;
        }
    }
    copstream_decoder_finish(&decoder);
    *digest = o.digest;
    return decoder.stats;
}

static int stats_equal(const struct copstream_stats *a,
                       const struct copstream_stats *b)
{
    return a->samples == b->samples && a->errors == b->errors &&
           a->record_bytes == b->record_bytes &&
           a->skipped_bytes == b->skipped_bytes && a->lost == b->lost &&
           a->unknown_records == b->unknown_records &&
           a->repeated_starts == b->repeated_starts &&
           a->resyncs == b->resyncs &&
           memcmp(a->errors_by_kind, b->errors_by_kind,
                  sizeof a->errors_by_kind) == 0 &&
           memcmp(a->records, b->records, sizeof a->records) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t whole_digest, split_digest;
    struct copstream_stats whole = run(data, size, 0, &whole_digest);

    require(whole.bytes == size);
    require(8 * whole.samples + whole.record_bytes + whole.skipped_bytes ==
            size);
    static const unsigned moduli[] = { 7, 64, 3000 };
    for (size_t i = 0; i < sizeof moduli / sizeof moduli[0]; i++) {
        struct copstream_stats split = run(data, size, moduli[i],
                                           &split_digest);
        require(split_digest == whole_digest);
        require(stats_equal(&split, &whole));
    }
    return 0;
}
