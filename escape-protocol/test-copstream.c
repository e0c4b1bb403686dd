/*
 * test-copstream.c — GTest suite for the stream encoder and decoder.
 *
 * Streams are built with the encoder into a GByteArray; the decoder's
 * events are recorded as the text lines copstream dump prints (text.c), so
 * a whole decode compares as one string.  Beyond one test per record and
 * per error kind, the central tests cut a realistic stream at every byte
 * offset, feed it in every kind of split, and inject garbage at many
 * places, checking each time that what the decoder delivers is exactly the
 * intact part of the stream and that every byte is accounted for.
 */
#include "escape-protocol/copstream.h"
#include "escape-protocol/layout.h"
#include "escape-protocol/text.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>

/* ---- Building streams --------------------------------------------------- */

static void add_record(GByteArray *s, const struct copstream_record *rec)
{
    guint8 buffer[COPSTREAM_MAX_RECORD_BYTES];
    int bytes = copstream_encode_record(buffer, sizeof buffer, rec);

    g_assert_cmpint(bytes, >, 0);
    g_byte_array_append(s, buffer, (guint)bytes);
}

static void add_raw(GByteArray *s, uint16_t code, const uint64_t *words,
                    size_t count)
{
    guint8 buffer[COPSTREAM_MAX_RECORD_BYTES];
    int bytes = copstream_encode_raw(buffer, sizeof buffer, code, words, count);

    g_assert_cmpint(bytes, >, 0);
    g_byte_array_append(s, buffer, (guint)bytes);
}

static void add_word(GByteArray *s, uint64_t w)
{
    guint8 bytes[8];

    for (int i = 0; i < 8; i++)
        bytes[i] = (guint8)(w >> (8 * i));
    g_byte_array_append(s, bytes, 8);
}

static void add_sample(GByteArray *s, uint32_t slot, uint32_t address)
{
    uint64_t w = copstream_sample_word(slot, address);

    g_assert_cmphex(w, !=, COPSTREAM_ESCAPE);
    add_word(s, w);
}

static struct copstream_start test_start(void)
{
    struct copstream_start start = {
        .version = COPSTREAM_VERSION, .slots = 8, .lfsr_value = 0xFFFFFE,
        .lfsr_count = 1, .clock_hz = 1000000000, .fifo_depth = 1024,
        .ls_size = 262144, .poll_interval_ns = 512, .start_time_ns = 1000,
        .fifo_full = COPSTREAM_FIFO_STALL, .dither = 1,
        .dither_seed = 18446744073709551557ull, .watermark = 512,
        .event = COPSTREAM_EVENT_INSTRUCTIONS,
    };
    return start;
}

static void add_start(GByteArray *s)
{
    struct copstream_record rec = { .code = COPSTREAM_START };

    rec.u.start = test_start();
    add_record(s, &rec);
}

static const struct copstream_image_id test_image = {
    .device = 2049, .inode = 77, .size = 40960, .hash = 0x0123456789ABCDEFull,
};

static void add_image(GByteArray *s, const char *path)
{
    struct copstream_record rec = { .code = COPSTREAM_IMAGE };

    rec.u.image.id = test_image;
    rec.u.image.path = (const uint8_t *)path;
    rec.u.image.path_length = (uint32_t)strlen(path);
    add_record(s, &rec);
}

static void add_context(GByteArray *s, uint32_t slot, uint64_t context_id,
                        uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_CONTEXT };

    rec.u.context = (struct copstream_context){
        .slot = slot, .pid = 4000, .tid = 4001 + slot,
        .context_id = context_id, .object_id = 0x55550000 + context_id,
        .image = test_image, .image_offset = 4096, .cycle = cycle,
    };
    add_record(s, &rec);
}

static void add_stall(GByteArray *s, uint32_t slot, uint64_t count,
                      uint64_t ns)
{
    struct copstream_record rec = { .code = COPSTREAM_STALL };

    rec.u.stall = (struct copstream_stall){ slot, count, ns, 350 };
    add_record(s, &rec);
}

static void add_release(GByteArray *s, uint32_t slot, uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_RELEASE };

    rec.u.release = (struct copstream_release){ slot, cycle };
    add_record(s, &rec);
}

/* An OVERLAY of version 1.1 with its flags, or (words 4) in 1.0's form. */
/* 1.3: the context ended. */
static void add_end(GByteArray *s, uint32_t slot, uint64_t context_id,
                    uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_END };

    rec.u.end = (struct copstream_end){ slot, context_id, cycle };
    add_record(s, &rec);
}

/* 1.6: the stall reasons of the slot's next samples, one hex digit a
 * sample in `digits`. */
static void add_reasons(GByteArray *s, uint32_t slot, const char *digits)
{
    struct copstream_record rec = { .code = COPSTREAM_REASONS };
    guint8 raw[COPSTREAM_MAX_REASONS / 2] = { 0 };
    uint32_t n = (uint32_t)strlen(digits);

    for (uint32_t i = 0; i < n; i++)
        copstream_put_reason(raw, i, (uint32_t)g_ascii_xdigit_value(digits[i]));
    rec.u.reasons = (struct copstream_reasons){ slot, n, raw };
    add_record(s, &rec);
}

/* 1.6: the transfer of the slot's DMA-wait samples from here on. */
static void add_transfer(GByteArray *s, uint32_t slot, uint32_t flags,
                         uint32_t tag, uint32_t issuer)
{
    struct copstream_record rec = { .code = COPSTREAM_TRANSFER };

    rec.u.transfer = (struct copstream_transfer){ slot, flags, tag, issuer };
    add_record(s, &rec);
}

/* 1.4: the call stack of the sample before it. */
static void add_callstack(GByteArray *s, uint32_t slot, uint32_t depth,
                          const uint64_t *frames, uint32_t n)
{
    struct copstream_record rec = { .code = COPSTREAM_CALLSTACK };
    guint8 raw[COPSTREAM_MAX_FRAMES * COPSTREAM_WORD_BYTES];

    for (uint32_t i = 0; i < n; i++)
        copstream_put_frame(raw, i, frames[i]);
    rec.u.callstack = (struct copstream_callstack){ slot, depth, n, raw };
    add_record(s, &rec);
}

static void add_overlay_words(GByteArray *s, uint32_t slot, uint32_t region,
                              uint32_t guard, uint32_t flags, uint16_t words)
{
    struct copstream_record rec = { .code = COPSTREAM_OVERLAY };

    rec.payload_words = words;
    rec.u.overlay = (struct copstream_overlay){
        .slot = slot, .region = region, .guard = guard, .cycle = 200,
        .flags = flags };
    add_record(s, &rec);
}

static void add_overlay(GByteArray *s, uint32_t slot, uint32_t region,
                        uint32_t guard, uint64_t cycle)
{
    struct copstream_record rec = { .code = COPSTREAM_OVERLAY };

    rec.u.overlay = (struct copstream_overlay){
        .slot = slot, .region = region, .guard = guard, .cycle = cycle };
    add_record(s, &rec);
}

static void add_lost(GByteArray *s, uint32_t slot, uint32_t cause,
                     uint64_t count)
{
    struct copstream_record rec = { .code = COPSTREAM_LOST };

    rec.u.lost = (struct copstream_lost){ slot, cause, count, 999 };
    add_record(s, &rec);
}

static void add_time(GByteArray *s, uint32_t slot, uint64_t cycle,
                     uint64_t time_ns)
{
    struct copstream_record rec = { .code = COPSTREAM_TIME };

    rec.u.time = (struct copstream_time){ slot, cycle, time_ns };
    add_record(s, &rec);
}

static void add_stop(GByteArray *s, uint64_t samples, uint64_t lost)
{
    struct copstream_record rec = { .code = COPSTREAM_STOP };

    rec.u.stop = (struct copstream_stop){ 5000000, samples, lost };
    add_record(s, &rec);
}

/*
 * A stream as the driver writes it: start, image, a context on each of two
 * slots, then polls of samples, overlay changes, losses and time records,
 * a context switch on slot 1, releases and the stop with right totals.
 */
static GByteArray *realistic_stream(guint polls, guint per_poll)
{
    GByteArray *s = g_byte_array_new();
    GRand *rand = g_rand_new_with_seed(7);
    uint64_t samples = 0, lost = 0;

    add_start(s);
    add_image(s, "/opt/coprof examples/host-pipeline");
    add_context(s, 0, 1, 0);
    add_overlay(s, 0, 0, 1, 0);
    add_context(s, 1, 2, 0);
    for (guint poll = 1; poll <= polls; poll++) {
        for (uint32_t slot = 0; slot < 2; slot++) {
            for (guint i = 0; i < per_poll; i++, samples++)
                add_sample(s, slot, 4 * g_rand_int_range(rand, 0, 65536));
            if (slot == 0 && poll % 3 == 0)
                add_overlay(s, 0, 0, 1 + poll % 2, poll * 1000);
            if (poll % 4 == 0) {
                add_lost(s, slot, COPSTREAM_LOST_FIFO_OVERFLOW, poll);
                lost += poll;
            }
            add_time(s, slot, poll * 1000, 1000 + poll * 512);
        }
        if (poll == polls / 2)
            add_context(s, 1, 3, poll * 1000);
    }
    add_release(s, 0, polls * 1000 + 1);
    add_release(s, 1, polls * 1000 + 1);
    add_stop(s, samples, lost);
    g_rand_free(rand);
    return s;
}

/* ---- Decoding into text ------------------------------------------------- */

struct decoded {
    char *text;                     /* the dump lines */
    struct copstream_stats stats;
};

static void on_samples(void *user, uint64_t offset,
                       const struct copstream_sample *samples, size_t count)
{
    copstream_text_samples(user, offset, samples, count);
}

static void on_record(void *user, const struct copstream_record *rec)
{
    copstream_text_record(user, rec);
}

static void on_error(void *user, const struct copstream_error *err)
{
    copstream_text_error(user, err);
}

static void on_resync(void *user, uint64_t offset, uint64_t skipped)
{
    copstream_text_resync(user, offset, skipped);
}

/*
 * Decodes bytes fed in pieces: piece sizes from `pieces` (cycled), or the
 * whole at once when pieces is NULL.  Checks that every byte is accounted.
 */
static struct decoded decode_pieces(const guint8 *bytes, gsize length,
                                    const gsize *pieces, gsize piece_count)
{
    static struct copstream_decoder dec;
    struct decoded out;
    size_t text_size;
    FILE *text = open_memstream(&out.text, &text_size);
    struct copstream_handler handler = {
        on_samples, on_record, on_error, on_resync, text
    };

    copstream_decoder_init(&dec, &handler);
    if (pieces == NULL) {
        copstream_decoder_feed(&dec, bytes, length);
    } else {
        for (gsize at = 0, i = 0; at < length; i++) {
            gsize n = MIN(pieces[i % piece_count], length - at);
            copstream_decoder_feed(&dec, bytes + at, n);
            at += n;
        }
    }
    copstream_decoder_finish(&dec);
    fclose(text);
    out.stats = dec.stats;
    g_assert_cmpuint(out.stats.bytes, ==, length);
    g_assert_cmpuint(8 * out.stats.samples + out.stats.record_bytes +
                     out.stats.skipped_bytes, ==, length);
    return out;
}

static struct decoded decode(const guint8 *bytes, gsize length)
{
    return decode_pieces(bytes, length, NULL, 0);
}

static struct decoded decode_array(GByteArray *s)
{
    return decode(s->data, s->len);
}

/* The number of lines of text that contain `word` as a whole token. */
static guint count_word(const char *text, const char *word)
{
    guint n = 0;
    size_t len = strlen(word);

    for (const char *p = strstr(text, word); p; p = strstr(p + 1, word))
        if ((p == text || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\n'))
            n++;
    return n;
}

static void assert_errors(const struct decoded *d, guint64 errors)
{
    if (d->stats.errors != errors)
        g_test_message("decoded:\n%s", d->text);
    g_assert_cmpuint(d->stats.errors, ==, errors);
}

/* ---- Encoder ------------------------------------------------------------ */

/* Pins the wire format: a change here is a change of the protocol. */
static void test_golden_bytes(void)
{
    static const guint8 expected[] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,   /* ESCAPE */
        0x05, 0x00, 0x03, 0x00, 0x00, 0x00, 0xc0, 0xe5,   /* header, check 0 */
        0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   /* slot 3 */
        0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe,   /* cycle */
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,   /* time_ns 1 */
    };
    struct copstream_record rec = { .code = COPSTREAM_TIME };
    guint8 out[64];

    rec.u.time = (struct copstream_time){ 3, 0xFEDCBA9876543210ull, 1 };
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==, 40);
    uint16_t check = copstream_check(COPSTREAM_TIME, 3, expected + 16);
    g_assert_cmpuint(out[12] | out[13] << 8, ==, check);
    out[12] = out[13] = 0;
    g_assert_cmpmem(out, 40, expected, sizeof expected);
    /* The check itself, computed by hand from its definition. */
    g_assert_cmphex(check, ==, 0xd5b8);

    g_assert_cmphex(copstream_sample_word(7, 0x3fffc), ==, 0x70003fffcull);
}

/* A TRANSFER's fields must agree with its flags word; a REASONS holds 1
 * to COPSTREAM_MAX_REASONS stalls, 16 a word, an unknown stall kept for
 * the reader to show as a number. */
static void test_reason_fields(void)
{
    struct copstream_record rec = { .code = COPSTREAM_TRANSFER };
    static const struct copstream_transfer bad[] = {
        { 0, COPSTREAM_TRANSFER_KNOWN, 32, 0x100 },       /* tag */
        { 0, COPSTREAM_TRANSFER_KNOWN, 1, 0x102 },        /* unaligned */
        { 0, 0x2, 0, 0 },                                 /* flag */
        { 0, 0, 5, 0 },                     /* tag without a transfer */
        { 8, 0, 0, 0 },                                   /* slot */
    };
    guint8 out[COPSTREAM_WORD_BYTES * (COPSTREAM_MAX_PAYLOAD + 2)];
    static guint8 stalls[COPSTREAM_MAX_REASONS / 2];

    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        rec.u.transfer = bad[i];
        g_assert_cmpint(copstream_fields_check(&rec, 8), ==,
                        COPSTREAM_ERR_BAD_FIELD);
    }
    rec.u.transfer = (struct copstream_transfer){ 7, 1, 31, 0x3fffc };
    g_assert_cmpint(copstream_fields_check(&rec, 8), ==, 0);
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    16 + 8 * COPSTREAM_TRANSFER_WORDS);

    rec.code = COPSTREAM_REASONS;
    rec.u.reasons = (struct copstream_reasons){ 7, 0, stalls };
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    COPSTREAM_INVALID);
    rec.u.reasons.count = COPSTREAM_MAX_REASONS + 1;
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    COPSTREAM_INVALID);
    rec.u.reasons.count = COPSTREAM_MAX_REASONS;
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    16 + 8 * COPSTREAM_MAX_PAYLOAD);
    /* 17 stalls take two words; 16 one; the 17th is word 1's low bits. */
    memset(stalls, 0xff, sizeof stalls);
    rec.u.reasons = (struct copstream_reasons){ 0, 17, stalls };
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    16 + 8 * 4);
    g_assert_cmphex(out[16 + 8 * 2 + 7], ==, 0xff);
    g_assert_cmphex(out[16 + 8 * 3], ==, 0x0f);     /* padding zeroed */
    g_assert_cmphex(out[16 + 8 * 3 + 1], ==, 0);
    rec.u.reasons.count = 16;
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    16 + 8 * 3);
}

/* A REASONS whose unused stall bits are not zero, or whose words are
 * fewer than its count needs, is refused. */
static void test_reasons_form(void)
{
    GByteArray *s = g_byte_array_new();
    uint64_t padded[] = { 0, 3, 0x4321 };       /* a 4th stall of 3 */
    uint64_t shorter[] = { 0, 17, 0 };                    /* needs 2 words */

    add_start(s);
    add_raw(s, COPSTREAM_REASONS, padded, 3);
    add_raw(s, COPSTREAM_REASONS, shorter, 3);
    add_reasons(s, 0, "321");
    add_stop(s, 0, 0);
    struct decoded d = decode_array(s);
    g_assert_cmpuint(d.stats.errors_by_kind[COPSTREAM_ERR_BAD_FIELD], ==, 1);
    g_assert_cmpuint(d.stats.errors_by_kind[COPSTREAM_ERR_SHORT_RECORD], ==, 1);
    g_assert_cmpuint(d.stats.records[COPSTREAM_REASONS], ==, 1);
    g_assert_nonnull(strstr(d.text, "reasons slot=0 stalls=321\n"));
    g_free(d.text);
    g_byte_array_free(s, TRUE);
}

static void test_round_trip_every_record(void)
{
    GByteArray *s = g_byte_array_new();
    static const char *const expected =
        "0 start version=1.6 slots=8 lfsr_value=0xfffffe lfsr_count=1 "
        "clock_hz=1000000000 fifo_depth=1024 ls_size=262144 "
        "poll_interval_ns=512 start_time_ns=1000 fifo_full=1 dither=1 "
        "dither_seed=18446744073709551557 watermark=512 event=1\n"
        "128 image device=2049 inode=77 size=40960 hash=0x0123456789abcdef "
        "path=/a\\x20b\\x5c\\x0a\\xff\n"
        "192 context slot=5 pid=4000 tid=4006 context_id=9 "
        "object_id=0x55550009 device=2049 inode=77 size=40960 "
        "hash=0x0123456789abcdef image_offset=4096 cycle=123\n"
        "296 overlay slot=5 region=2 guard=3 cycle=200 placed=1\n"
        "352 overlay slot=5 region=1 guard=0 cycle=200\n"
        "400 sample slot=5 address=0x3fffc\n"
        "408 callstack slot=5 depth=3 frames=0x00238,0x3fffc@65535\n"
        "464 sample slot=5 address=0x00000\n"
        "472 callstack slot=5 depth=0 frames=-\n"
        "512 reasons slot=5 stalls=0123456789abcdef3\n"
        "560 transfer slot=5 known=1 tag=31 issuer=0x3fffc\n"
        "608 lost slot=5 cause=buffer-full count=4 cycle=999\n"
        "656 lost slot=5 cause=77 count=1 cycle=999\n"
        "704 stall slot=5 count=3 ns=120000 cycle=350\n"
        "752 time slot=5 cycle=300 time_ns=1234567\n"
        "792 release slot=5 cycle=400\n"
        "824 end slot=5 context_id=9 cycle=400\n"
        "864 stop time_ns=5000000 samples=2 lost=5\n";
    static const uint64_t frames[] = { 0x238, 0xFFFFull << 32 | 0x3fffc };

    add_start(s);
    add_image(s, "/a b\\\n\xff");
    add_context(s, 5, 9, 123);
    add_overlay_words(s, 5, 2, 3, COPSTREAM_OVERLAY_PLACED, 0);
    add_overlay_words(s, 5, 1, 0, 0, COPSTREAM_OVERLAY_WORDS_1_0);
    add_sample(s, 5, 0x3fffc);
    add_callstack(s, 5, 3, frames, 2);
    add_sample(s, 5, 0);
    add_callstack(s, 5, 0, NULL, 0);
    add_reasons(s, 5, "0123456789abcdef3");
    add_transfer(s, 5, COPSTREAM_TRANSFER_KNOWN, 31, 0x3fffc);
    add_lost(s, 5, COPSTREAM_LOST_BUFFER_FULL, 4);
    add_lost(s, 5, 77, 1);
    add_stall(s, 5, 3, 120000);
    add_time(s, 5, 300, 1234567);
    add_release(s, 5, 400);
    add_end(s, 5, 9, 400);
    add_stop(s, 2, 5);
    struct decoded d = decode_array(s);
    g_assert_cmpstr(d.text, ==, expected);
    assert_errors(&d, 0);
    g_assert_cmpuint(d.stats.samples, ==, 2);
    g_assert_cmpuint(d.stats.lost, ==, 5);
    g_assert_cmpuint(d.stats.lost_by_cause[COPSTREAM_LOST_BUFFER_FULL], ==, 4);
    g_assert_cmpuint(d.stats.lost_by_cause[0], ==, 1);
    for (int code = 1; code < COPSTREAM_CODE_END; code++)
        g_assert_cmpuint(d.stats.records[code], >=, 1);
    g_free(d.text);
    g_byte_array_unref(s);
}

/* Decoded fields, compared as values rather than text. */
static struct copstream_record last_record;
static guint8 last_path[COPSTREAM_MAX_PATH];

static void keep_record(void *user, const struct copstream_record *rec)
{
    last_record = *rec;
    if (rec->code == COPSTREAM_IMAGE) {
        memcpy(last_path, rec->u.image.path, rec->u.image.path_length);
        last_record.u.image.path = last_path;
    }
}

static struct copstream_record decode_one(const struct copstream_record *rec)
{
    static struct copstream_decoder dec;
    struct copstream_handler handler = { NULL, keep_record, NULL, NULL, NULL };
    guint8 buffer[COPSTREAM_MAX_RECORD_BYTES];
    int bytes = copstream_encode_record(buffer, sizeof buffer, rec);

    g_assert_cmpint(bytes, ==, copstream_record_bytes(rec));
    memset(&last_record, 0, sizeof last_record);
    copstream_decoder_init(&dec, &handler);
    copstream_decoder_feed(&dec, buffer, (size_t)bytes);
    return last_record;
}

static void test_round_trip_values(void)
{
    struct copstream_record rec = { .code = COPSTREAM_CONTEXT }, got;

    rec.u.context = (struct copstream_context){
        .slot = 255, .pid = UINT32_MAX, .tid = 1, .context_id = UINT64_MAX,
        .object_id = 0x7fffdeadbeef, .image = { 1, 2, 3, UINT64_MAX },
        .image_offset = 1ull << 40, .cycle = UINT64_MAX - 1,
    };
    got = decode_one(&rec);
    g_assert_cmpint(got.code, ==, COPSTREAM_CONTEXT);
    g_assert_cmpint(got.payload_words, ==, COPSTREAM_CONTEXT_WORDS);
    g_assert_cmpmem(&got.u.context, sizeof got.u.context, &rec.u.context,
                    sizeof rec.u.context);

    char path[COPSTREAM_MAX_PATH];
    memset(path, 'p', sizeof path);
    rec = (struct copstream_record){ .code = COPSTREAM_IMAGE };
    rec.u.image.id = test_image;
    rec.u.image.path = (const uint8_t *)path;
    for (uint32_t length = 1; length <= COPSTREAM_MAX_PATH; length += 331) {
        rec.u.image.path_length = length;
        got = decode_one(&rec);
        g_assert_cmpint(got.code, ==, COPSTREAM_IMAGE);
        g_assert_cmpuint(got.u.image.path_length, ==, length);
        g_assert_cmpmem(got.u.image.path, length, path, length);
    }
    rec.u.image.path_length = COPSTREAM_MAX_PATH;
    g_assert_cmpint(copstream_record_bytes(&rec), ==,
                    COPSTREAM_MAX_RECORD_BYTES);
    got = decode_one(&rec);
    g_assert_cmpuint(got.u.image.path_length, ==, COPSTREAM_MAX_PATH);
}

static void test_encoder_errors(void)
{
    struct copstream_record rec = { .code = COPSTREAM_START };
    guint8 out[256];

    rec.u.start = test_start();
    int size = copstream_record_bytes(&rec);
    g_assert_cmpint(size, ==, 8 * (2 + COPSTREAM_START_WORDS));
    memset(out, 0xAA, sizeof out);
    g_assert_cmpint(copstream_encode_record(out, (size_t)size - 1, &rec), ==,
                    COPSTREAM_NO_ROOM);
    for (size_t i = 0; i < sizeof out; i++)
        g_assert_cmphex(out[i], ==, 0xAA);        /* nothing written */

    struct copstream_start bad[] = {
        test_start(), test_start(), test_start(), test_start(), test_start(),
        test_start(), test_start(), test_start(),
    };
    bad[0].slots = 0;
    bad[1].slots = COPSTREAM_MAX_SLOTS + 1;
    bad[2].lfsr_value = 0;                       /* count 1 with value 0 */
    bad[3].lfsr_value = 0x1000000;
    bad[4].ls_size = 262146;
    bad[5].ls_size = (1ull << 32) + 4;
    bad[6].version = 2 << 16;
    bad[7].fifo_depth = 0;
    for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
        rec.u.start = bad[i];
        g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                        COPSTREAM_INVALID);
    }

    rec = (struct copstream_record){ .code = COPSTREAM_IMAGE };
    rec.u.image.path = (const uint8_t *)"a\0b";
    rec.u.image.path_length = 3;
    g_assert_cmpint(copstream_record_bytes(&rec), ==, COPSTREAM_INVALID);
    rec.u.image.path_length = 0;
    g_assert_cmpint(copstream_record_bytes(&rec), ==, COPSTREAM_INVALID);
    rec.u.image.path_length = COPSTREAM_MAX_PATH + 1;
    g_assert_cmpint(copstream_record_bytes(&rec), ==, COPSTREAM_INVALID);

    rec = (struct copstream_record){ .code = COPSTREAM_LOST };
    rec.u.lost = (struct copstream_lost){ 0, 1, 0, 0 };    /* count 0 */
    g_assert_cmpint(copstream_record_bytes(&rec), ==, COPSTREAM_INVALID);
    rec = (struct copstream_record){ .code = COPSTREAM_TIME };
    rec.u.time.slot = COPSTREAM_MAX_SLOTS;
    g_assert_cmpint(copstream_record_bytes(&rec), ==, COPSTREAM_INVALID);
    rec = (struct copstream_record){ .code = COPSTREAM_CODE_END };
    g_assert_cmpint(copstream_record_bytes(&rec), ==, COPSTREAM_INVALID);

    uint64_t words[COPSTREAM_MAX_PAYLOAD + 1] = { 0 };
    g_assert_cmpint(copstream_encode_raw(out, sizeof out, 99, words,
                                         COPSTREAM_MAX_PAYLOAD + 1), ==,
                    COPSTREAM_INVALID);
    g_assert_cmpint(copstream_encode_raw(out, 15, 99, words, 0), ==,
                    COPSTREAM_NO_ROOM);
}

static void test_sample_words(void)
{
    guint16 fields[65536];
    static guint8 out[8 * 65536];

    for (guint i = 0; i < 65536; i++)
        fields[i] = (guint16)i;
    g_assert_cmphex(copstream_sample_word(COPSTREAM_MAX_SLOTS, 0), ==,
                    COPSTREAM_ESCAPE);
    g_assert_cmphex(copstream_sample_word(0, 2), ==, COPSTREAM_ESCAPE);
    g_assert_cmphex(copstream_sample_word(UINT32_MAX, 0xFFFFFFFC), ==,
                    COPSTREAM_ESCAPE);
    for (uint32_t slot = 0; slot < COPSTREAM_MAX_SLOTS; slot += 51) {
        g_assert_cmpuint(copstream_encode_pc_fields(out, sizeof out, slot,
                                                    fields, 65536), ==, 65536);
        for (guint i = 0; i < 65536; i++) {
            uint64_t w = 0;
            for (int b = 7; b >= 0; b--)
                w = w << 8 | out[8 * i + b];
            g_assert_cmphex(w, ==, copstream_sample_word(slot, 4 * i));
            g_assert_cmphex(w, !=, COPSTREAM_ESCAPE);
        }
    }
    /* A partial write when the room runs out; nothing for a bad slot. */
    g_assert_cmpuint(copstream_encode_pc_fields(out, 8 * 10 + 7, 0, fields,
                                                65536), ==, 10);
    g_assert_cmpuint(copstream_encode_pc_fields(out, sizeof out,
                                                COPSTREAM_MAX_SLOTS, fields,
                                                5), ==, 0);
}

/* ---- Decoder: stream rules ---------------------------------------------- */

static void test_idempotent_start(void)
{
    GByteArray *s = g_byte_array_new();

    add_start(s);
    add_context(s, 0, 1, 0);
    add_sample(s, 0, 16);
    add_start(s);                 /* a repeat: no effect, no error */
    add_sample(s, 0, 20);
    add_stop(s, 2, 0);
    struct decoded d = decode_array(s);
    assert_errors(&d, 0);
    g_assert_cmpuint(d.stats.repeated_starts, ==, 1);
    g_assert_cmpuint(d.stats.records[COPSTREAM_START], ==, 2);
    g_assert_cmpuint(count_word(d.text, "repeat=1"), ==, 1);
    g_assert_cmpuint(d.stats.samples, ==, 2);
    g_free(d.text);

    /* A differing start is refused; the first one's limits still hold. */
    g_byte_array_set_size(s, 0);
    add_start(s);
    add_context(s, 0, 1, 0);
    struct copstream_record rec = { .code = COPSTREAM_START };
    rec.u.start = test_start();
    rec.u.start.slots = 16;
    add_record(s, &rec);
    add_context(s, 12, 1, 0);      /* slot 12 of the refused start */
    add_sample(s, 0, 16);
    add_stop(s, 1, 0);
    d = decode_array(s);
    assert_errors(&d, 2);
    g_assert_cmpuint(d.stats.errors_by_kind[COPSTREAM_ERR_START_CONFLICT], ==,
                     1);
    g_assert_cmpuint(d.stats.errors_by_kind[COPSTREAM_ERR_BAD_FIELD], ==, 1);
    g_assert_cmpuint(d.stats.records[COPSTREAM_START], ==, 1);
    g_free(d.text);
    g_byte_array_unref(s);
}

static void test_unknown_codes_skipped(void)
{
    GByteArray *s = g_byte_array_new();
    uint64_t words[40];

    for (guint i = 0; i < G_N_ELEMENTS(words); i++)
        words[i] = i % 3 ? COPSTREAM_ESCAPE : i;    /* ESCAPE words inside */
    add_start(s);
    add_raw(s, 0, NULL, 0);
    add_context(s, 0, 1, 0);
    add_sample(s, 0, 16);
    add_raw(s, COPSTREAM_CODE_END, words, 3);
    add_raw(s, 0xFFFF, words, G_N_ELEMENTS(words));
    add_sample(s, 0, 20);
    /* A later minor version's longer TIME: the extra words are ignored. */
    uint64_t time_words[5] = { 0, 77, 88, COPSTREAM_ESCAPE, 5 };
    add_raw(s, COPSTREAM_TIME, time_words, 5);
    add_stop(s, 2, 0);
    struct decoded d = decode_array(s);
    assert_errors(&d, 0);
    g_assert_cmpuint(d.stats.unknown_records, ==, 3);
    g_assert_cmpuint(d.stats.samples, ==, 2);
    g_assert_cmpuint(d.stats.records[COPSTREAM_TIME], ==, 1);
    g_assert_nonnull(strstr(d.text, " time slot=0 cycle=77 time_ns=88 "
                            "extra=0xffffffffffffffff,0x5\n"));
    g_assert_nonnull(strstr(d.text, " unknown code=14 "
                            "words=0x0,0xffffffffffffffff,0xffffffffffffffff\n"));
    g_assert_nonnull(strstr(d.text, " unknown code=0\n"));
    g_free(d.text);
    g_byte_array_unref(s);
}

static void expect_kind(GByteArray *s, enum copstream_error_kind kind,
                        guint64 of_kind, guint64 all);

/* The OVERLAY record a test decoder saw last, and how many it saw. */
static struct copstream_record last_overlay;
static int overlays_seen;

static void keep_overlay(void *user, const struct copstream_record *rec)
{
    if (rec->code == COPSTREAM_OVERLAY) {
        last_overlay = *rec;
        overlays_seen++;
    }
}

static void decode_overlays(GByteArray *s)
{
    static struct copstream_decoder dec;
    struct copstream_handler h = { .record = keep_overlay };

    overlays_seen = 0;
    copstream_decoder_init(&dec, &h);
    copstream_decoder_feed(&dec, s->data, s->len);
    copstream_decoder_finish(&dec);
    g_assert_cmpuint(dec.stats.errors, ==, 0);
}

/* The START a decoder adopted. */
static struct copstream_start decode_start(GByteArray *s)
{
    static struct copstream_decoder dec;
    struct copstream_handler h = { 0 };

    copstream_decoder_init(&dec, &h);
    copstream_decoder_feed(&dec, s->data, s->len);
    copstream_decoder_finish(&dec);
    g_assert_cmpuint(dec.stats.errors, ==, 0);
    return dec.start;
}

/* A START of an older version, `words` payload words, then STOP, in s
 * (emptied first): its decoded START. */
static struct copstream_start decode_short_start(GByteArray *s, uint32_t words)
{
    struct copstream_record rec = { .code = COPSTREAM_START };

    rec.u.start = test_start();
    rec.payload_words = words;
    g_byte_array_set_size(s, 0);
    add_record(s, &rec);
    add_stop(s, 0, 0);
    g_assert_cmpuint(s->len, ==, 8 * (2 + words) + 8 * (2 + 3));
    return decode_start(s);
}

/*
 * START of 1.2: the sampling words (FIFO-full policy, dither, seed,
 * watermark) round-trip; a 1.1 START (9 words) reads them as 0, and is
 * 32 bytes shorter.
 */
static void test_start_sampling(void)
{
    GByteArray *s = g_byte_array_new();
    struct copstream_record rec = { .code = COPSTREAM_START };
    struct copstream_start got;

    add_start(s);
    add_stop(s, 0, 0);
    got = decode_start(s);
    g_assert_cmpuint(got.fifo_full, ==, COPSTREAM_FIFO_STALL);
    g_assert_cmpuint(got.dither, ==, 1);
    g_assert_cmpuint(got.dither_seed, ==, 18446744073709551557ull);
    g_assert_cmpuint(got.watermark, ==, 512);

    rec.u.start = test_start();
    g_assert_cmpint(copstream_record_bytes(&rec), ==, 8 * (2 + 14));
    got = decode_short_start(s, COPSTREAM_START_WORDS_1_1);
    g_assert_cmpuint(got.version, ==, COPSTREAM_VERSION);
    g_assert_cmpuint(got.fifo_full, ==, 0);
    g_assert_cmpuint(got.dither, ==, 0);
    g_assert_cmpuint(got.dither_seed, ==, 0);
    g_assert_cmpuint(got.watermark, ==, 0);
    g_assert_cmpuint(got.event, ==, COPSTREAM_EVENT_CYCLES);
    g_byte_array_unref(s);
}

/*
 * START of 1.5: the event round-trips; a 1.4 START (13 words) is sound
 * and reads it as 0, SPU_CYCLES, with its 1.2 words intact.
 */
static void test_start_event(void)
{
    GByteArray *s = g_byte_array_new();
    struct copstream_start got;

    add_start(s);
    add_stop(s, 0, 0);
    got = decode_start(s);
    g_assert_cmpuint(got.event, ==, COPSTREAM_EVENT_INSTRUCTIONS);

    got = decode_short_start(s, COPSTREAM_START_WORDS - 1);
    g_assert_cmpuint(got.event, ==, COPSTREAM_EVENT_CYCLES);
    g_assert_cmpuint(got.watermark, ==, 512);
    g_byte_array_unref(s);
}

/*
 * OVERLAY of 1.1: the flags word round-trips; a 1.0 OVERLAY (4 words) reads
 * as flags 0; words a later version appends after flags are ignored, as a
 * 1.0 reader ignores the flags word itself (the extra-words rule); 3 words
 * are short.
 */
static void test_overlay_flags(void)
{
    GByteArray *s = g_byte_array_new();
    uint64_t longer[7] = { 0, 1, 2, 50, COPSTREAM_OVERLAY_PLACED, 9, 9 };
    uint8_t out[128];

    add_start(s);
    add_context(s, 0, 1, 0);
    add_overlay_words(s, 0, 4, 7, COPSTREAM_OVERLAY_PLACED, 0);
    add_stop(s, 0, 0);
    decode_overlays(s);
    g_assert_cmpint(overlays_seen, ==, 1);
    g_assert_cmpuint(last_overlay.payload_words, ==, 5);
    g_assert_cmpuint(last_overlay.u.overlay.region, ==, 4);
    g_assert_cmpuint(last_overlay.u.overlay.guard, ==, 7);
    g_assert_cmphex(last_overlay.u.overlay.flags, ==,
                    COPSTREAM_OVERLAY_PLACED);

    g_byte_array_set_size(s, 0);
    add_start(s);
    add_context(s, 0, 1, 0);
    add_overlay_words(s, 0, 4, 7, COPSTREAM_OVERLAY_PLACED,
                      COPSTREAM_OVERLAY_WORDS_1_0);
    add_raw(s, COPSTREAM_OVERLAY, longer, 7);
    add_stop(s, 0, 0);
    decode_overlays(s);
    g_assert_cmpint(overlays_seen, ==, 2);
    g_assert_cmpuint(last_overlay.payload_words, ==, 7);
    g_assert_cmpuint(last_overlay.u.overlay.guard, ==, 2);
    g_assert_cmphex(last_overlay.u.overlay.flags, ==,
                    COPSTREAM_OVERLAY_PLACED);

    /* The 1.0 form is 48 bytes, the flags word is 0 in it. */
    struct copstream_record rec = { .code = COPSTREAM_OVERLAY };
    rec.u.overlay.flags = COPSTREAM_OVERLAY_PLACED;
    g_assert_cmpint(copstream_record_bytes(&rec), ==, 56);
    rec.payload_words = COPSTREAM_OVERLAY_WORDS_1_0;
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==, 48);

    g_byte_array_set_size(s, 0);
    add_start(s);
    add_context(s, 0, 1, 0);
    add_raw(s, COPSTREAM_OVERLAY, longer, 3);
    add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_SHORT_RECORD, 1, 1);
    g_byte_array_unref(s);
}

/* One stream per error kind: how many of that kind, and of all kinds. */
static void expect_kind(GByteArray *s, enum copstream_error_kind kind,
                        guint64 of_kind, guint64 all)
{
    struct decoded d = decode_array(s);

    if (d.stats.errors_by_kind[kind] != of_kind || d.stats.errors != all)
        g_test_message("%s:\n%s", copstream_error_name(kind), d.text);
    g_assert_cmpuint(d.stats.errors_by_kind[kind], ==, of_kind);
    g_assert_cmpuint(d.stats.errors, ==, all);
    g_free(d.text);
    g_byte_array_set_size(s, 0);
}

static void test_error_kinds(void)
{
    GByteArray *s = g_byte_array_new();
    uint64_t words[16] = { 0 };

    /* bad-sample: slot beyond START's 8; resync at the next record. */
    add_start(s); add_context(s, 0, 1, 0);
    add_word(s, (uint64_t)8 << 32 | 16); add_sample(s, 0, 16);
    add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_BAD_SAMPLE, 1, 1);
    /* bad-sample: address beyond the local store; misaligned. */
    add_start(s); add_context(s, 0, 1, 0);
    add_word(s, 262144); add_time(s, 0, 1, 1); add_word(s, 2);
    add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_BAD_SAMPLE, 2, 2);
    /* bad-header: wrong marker, then length beyond the maximum. */
    add_start(s); add_word(s, COPSTREAM_ESCAPE); add_word(s, 0x1234);
    add_time(s, 0, 1, 1); add_word(s, COPSTREAM_ESCAPE);
    add_word(s, (uint64_t)COPSTREAM_MARKER << 48 | 2000 << 16 | 5);
    add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_BAD_HEADER, 2, 2);
    /* bad-check: one bit flipped in a payload. */
    add_start(s); add_time(s, 0, 1, 1);
    s->data[s->len - 3] ^= 0x10;
    add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_BAD_CHECK, 1, 1);
    /* short-record: a CONTEXT of 10 words. */
    add_start(s); add_raw(s, COPSTREAM_CONTEXT, words, 10); add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_SHORT_RECORD, 1, 1);
    /* short-record: an IMAGE whose path runs past its words. */
    uint64_t image[6] = { 1, 2, 3, 4, 9, 0x41414141 };
    add_start(s); add_raw(s, COPSTREAM_IMAGE, image, 6); add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_SHORT_RECORD, 1, 1);
    /* bad-field: a 32-bit field with high bits; a slot beyond 8; padding. */
    uint64_t overlay[4] = { 0, 1ull << 32, 1, 1 };
    add_start(s); add_raw(s, COPSTREAM_OVERLAY, overlay, 4);
    add_context(s, 8, 1, 0);
    image[4] = 3;
    add_raw(s, COPSTREAM_IMAGE, image, 6);
    image[5] = 0x636261;                     /* "abc" */
    add_raw(s, COPSTREAM_IMAGE, image, 6);   /* sound: no error */
    add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_BAD_FIELD, 3, 3);
    /* bad-version: major 2; the stream then has no START. */
    uint64_t start[9] = { 2 << 16, 8, 0xfffffe, 1, 1, 1, 1024, 1, 1 };
    add_raw(s, COPSTREAM_START, start, 9); add_stop(s, 0, 0);
    expect_kind(s, COPSTREAM_ERR_BAD_VERSION, 1, 2);
    /* no-start: once, whatever follows; orphans are counted too. */
    add_context(s, 0, 1, 0); add_sample(s, 0, 4); add_sample(s, 1, 4);
    add_stop(s, 2, 0);
    expect_kind(s, COPSTREAM_ERR_NO_START, 1, 2);
    /* orphan: before a context, after its release; an overlay too. */
    add_start(s); add_sample(s, 0, 4); add_context(s, 0, 1, 0);
    add_sample(s, 0, 4); add_release(s, 0, 1); add_sample(s, 0, 4);
    add_overlay(s, 0, 0, 1, 1); add_stop(s, 3, 0);
    expect_kind(s, COPSTREAM_ERR_ORPHAN, 3, 3);
    /* after-stop: once; the STOP unbinds every slot. */
    add_start(s); add_context(s, 0, 1, 0); add_stop(s, 0, 0);
    add_sample(s, 0, 4); add_time(s, 0, 1, 1); add_start(s);
    expect_kind(s, COPSTREAM_ERR_AFTER_STOP, 1, 2);
    /* count-mismatch: the writer says 3 samples, the stream has 2. */
    add_start(s); add_context(s, 0, 1, 0); add_sample(s, 0, 4);
    add_sample(s, 0, 8); add_stop(s, 3, 0);
    expect_kind(s, COPSTREAM_ERR_COUNT_MISMATCH, 1, 1);
    /* truncated, and no-stop. */
    add_start(s); add_word(s, 0); g_byte_array_set_size(s, s->len - 1);
    expect_kind(s, COPSTREAM_ERR_TRUNCATED, 1, 2);
    add_start(s);
    expect_kind(s, COPSTREAM_ERR_NO_STOP, 1, 1);
    /* The empty stream. */
    expect_kind(s, COPSTREAM_ERR_NO_START, 1, 2);
    g_byte_array_unref(s);
}

/* ---- Decoder: any split, any cut, any garbage --------------------------- */

static void test_any_split(void)
{
    GByteArray *s = realistic_stream(40, 50);
    struct decoded whole = decode_array(s);
    static const gsize splits[][4] = {
        { 1 }, { 3 }, { 7 }, { 8 }, { 9 }, { 15 }, { 17 }, { 4096 },
        { 1, 8, 100, 3 }, { 5, 13, 2, 40 },
    };

    assert_errors(&whole, 0);
    g_assert_cmpuint(whole.stats.samples, ==, 40 * 2 * 50);
    for (gsize i = 0; i < G_N_ELEMENTS(splits); i++) {
        gsize count = splits[i][1] ? 4 : 1;
        struct decoded d = decode_pieces(s->data, s->len, splits[i], count);
        g_assert_cmpstr(d.text, ==, whole.text);
        g_free(d.text);
    }
    GRand *rand = g_rand_new_with_seed(11);
    gsize random[64];
    for (gsize i = 0; i < G_N_ELEMENTS(random); i++)
        random[i] = g_rand_int_range(rand, 1, 600);
    struct decoded d = decode_pieces(s->data, s->len, random, 64);
    g_assert_cmpstr(d.text, ==, whole.text);
    g_free(d.text);
    g_free(whole.text);
    g_rand_free(rand);
    g_byte_array_unref(s);
}

/* The lines of text whose item (by offset and size) ends at or before cut. */
static GString *items_before(const char *text, guint64 cut, GArray *ends)
{
    GString *kept = g_string_new(NULL);
    gchar **lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i] && lines[i][0]; i++)
        if (g_array_index(ends, guint64, i) <= cut)
            g_string_append_printf(kept, "%s\n", lines[i]);
    g_strfreev(lines);
    return kept;
}

/* Each line's end offset: the next line's offset, the last one's total. */
static GArray *item_ends(const char *text, guint64 total)
{
    GArray *ends = g_array_new(FALSE, FALSE, sizeof(guint64));
    gchar **lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i] && lines[i][0]; i++) {
        guint64 end = lines[i + 1] && lines[i + 1][0]
                          ? g_ascii_strtoull(lines[i + 1], NULL, 10) : total;
        g_array_append_val(ends, end);
    }
    g_strfreev(lines);
    return ends;
}

/*
 * Cutting the stream at every byte: what is delivered is exactly the items
 * that lie wholly before the cut, then "truncated" at the start of the item
 * the cut is inside (if any), "no-start" when the START itself is cut, and
 * "no-stop".
 */
static void test_truncation_everywhere(void)
{
    GByteArray *s = realistic_stream(6, 3);
    struct decoded whole = decode_array(s);
    GArray *ends = item_ends(whole.text, s->len);
    guint64 start_end = g_array_index(ends, guint64, 0);

    assert_errors(&whole, 0);
    for (guint64 cut = 0; cut < s->len; cut++) {
        struct decoded d = decode(s->data, cut);
        GString *expect = items_before(whole.text, cut, ends);
        guint64 begin = 0;
        for (guint i = 0; i < ends->len; i++)
            if (g_array_index(ends, guint64, i) <= cut)
                begin = g_array_index(ends, guint64, i);
        if (begin != cut)
            g_string_append_printf(expect, "%" G_GUINT64_FORMAT
                                   " error truncated\n", begin);
        if (cut < start_end)
            g_string_append_printf(expect, "%" G_GUINT64_FORMAT
                                   " error no-start\n", cut);
        g_string_append_printf(expect, "%" G_GUINT64_FORMAT
                               " error no-stop\n", cut);
        if (g_strcmp0(d.text, expect->str) != 0)
            g_test_message("cut at %" G_GUINT64_FORMAT, cut);
        g_assert_cmpstr(d.text, ==, expect->str);
        g_string_free(expect, TRUE);
        g_free(d.text);
    }
    g_array_unref(ends);
    g_free(whole.text);
    g_byte_array_unref(s);
}

/* The lines of text from the first at or after offset, offsets shifted. */
static GString *lines_from(const char *text, guint64 from, gint64 shift)
{
    GString *kept = g_string_new(NULL);
    gchar **lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i] && lines[i][0]; i++) {
        char *rest;
        guint64 offset = g_ascii_strtoull(lines[i], &rest, 10);
        if (offset >= from)
            g_string_append_printf(kept, "%" G_GUINT64_FORMAT "%s\n",
                                   offset + shift, rest);
    }
    g_strfreev(lines);
    return kept;
}

/* The offset of the first record line at or after `from`. */
static guint64 next_record(const char *text, guint64 from)
{
    gchar **lines = g_strsplit(text, "\n", -1);
    guint64 found = G_MAXUINT64;

    for (guint i = 0; lines[i] && lines[i][0] && found == G_MAXUINT64; i++) {
        char *rest;
        guint64 offset = g_ascii_strtoull(lines[i], &rest, 10);
        if (offset >= from && !g_str_has_prefix(rest, " sample "))
            found = offset;
    }
    g_strfreev(lines);
    return found;
}

/* text without the lines that contain `marker`. */
static char *without_lines(const char *text, const char *marker)
{
    GString *kept = g_string_new(NULL);
    gchar **lines = g_strsplit(text, "\n", -1);

    for (guint i = 0; lines[i] && lines[i][0]; i++)
        if (strstr(lines[i], marker) == NULL)
            g_string_append_printf(kept, "%s\n", lines[i]);
    g_strfreev(lines);
    return g_string_free(kept, FALSE);
}

/*
 * Garbage of many lengths (word multiples or not) and kinds (random bytes,
 * runs of 0xFF, fake ESCAPEs) at many places: an error is counted, the
 * decoder resynchronises at the next record, and from there on it
 * delivers exactly what the intact stream has.
 */
static void test_garbage_injection(void)
{
    GByteArray *s = realistic_stream(30, 20);
    struct decoded whole = decode_array(s);
    GRand *rand = g_rand_new_with_seed(3);
    guint64 resyncs = 0;
    const guint stop_bytes = 8 * (2 + COPSTREAM_STOP_WORDS);

    for (guint t = 0; t < 300; t++) {
        /* Anywhere from the word after START's ESCAPE up to the STOP. */
        guint at = 8 * g_rand_int_range(rand, 1, (s->len - stop_bytes) / 8 + 1);
        guint length = g_rand_int_range(rand, 1, 100);
        guint kind = t % 3;
        GByteArray *bad = g_byte_array_new();
        g_byte_array_append(bad, s->data, at);
        for (guint i = 0; i < length; i++) {
            guint8 b = (guint8)g_rand_int(rand);
            if (kind == 1 || (kind == 2 && i % 8 < 7 && i < 16))
                b = 0xFF;
            g_byte_array_append(bad, &b, 1);
        }
        g_byte_array_append(bad, s->data + at, s->len - at);

        struct decoded d = decode(bad->data, bad->len);
        guint64 resume = next_record(whole.text, at);
        GString *tail = lines_from(whole.text, resume, length);
        /*
         * The samples skipped while hunting make the STOP's count differ;
         * a CONTEXT record lost in the garbage makes its slot's samples
         * orphans.  Those aside, the tail is delivered as it was written.
         */
        char *no_count = without_lines(d.text, " error count-mismatch ");
        char *seen = without_lines(no_count, " error orphan");
        g_free(no_count);
        g_assert_cmpuint(d.stats.errors, >=, 1);
        if (!g_str_has_suffix(seen, tail->str))
            g_test_message("garbage of %u bytes at %u:\n%s", length, at, seen);
        g_assert_true(g_str_has_suffix(seen, tail->str));
        g_assert_cmpuint(d.stats.records[COPSTREAM_STOP], ==, 1);
        resyncs += d.stats.resyncs;
        g_free(seen);
        g_string_free(tail, TRUE);
        g_free(d.text);
        g_byte_array_unref(bad);
    }
    g_assert_cmpuint(resyncs, >, 250);
    g_free(whole.text);
    g_rand_free(rand);
    g_byte_array_unref(s);
}

/* Pure noise of every length never crashes and is all accounted for. */
static void test_noise(void)
{
    GRand *rand = g_rand_new_with_seed(5);
    guint8 noise[4096];

    for (guint t = 0; t < 200; t++) {
        gsize n = g_rand_int_range(rand, 0, sizeof noise);
        for (gsize i = 0; i < n; i++)
            noise[i] = (guint8)(t % 2 ? g_rand_int(rand)
                                      : (g_rand_int(rand) % 3 ? 0xFF : 0));
        struct decoded d = decode(noise, n);
        g_assert_cmpuint(d.stats.errors, >=, 2);   /* no-start, no-stop */
        g_free(d.text);
    }
    g_rand_free(rand);
}

/* 1.4's CALLSTACK: the encoder refuses what the decoder would, and the
 * decoder judges raw records: too many frames, more frames than the depth,
 * a frame with bits above the overlay or an unaligned address, fewer
 * words than its frames. */
static void test_callstack_fields(void)
{
    GByteArray *s = g_byte_array_new();
    struct copstream_record rec = { .code = COPSTREAM_CALLSTACK };
    guint8 raw[(COPSTREAM_MAX_FRAMES + 1) * COPSTREAM_WORD_BYTES] = { 0 };
    guint8 out[1024];
    uint64_t words[8];

    rec.u.callstack = (struct copstream_callstack){ 0, 2, 3, raw };
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    COPSTREAM_INVALID);
    rec.u.callstack.depth = 100;
    rec.u.callstack.n_frames = COPSTREAM_MAX_FRAMES + 1;
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    COPSTREAM_INVALID);
    copstream_put_frame(raw, 0, 1ull << 48);
    rec.u.callstack.n_frames = 1;
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    COPSTREAM_INVALID);
    copstream_put_frame(raw, 0, copstream_frame_word(0x102, 0));
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    COPSTREAM_INVALID);
    copstream_put_frame(raw, 0, copstream_frame_word(0x100, 7));
    g_assert_cmpint(copstream_encode_record(out, sizeof out, &rec), ==,
                    6 * COPSTREAM_WORD_BYTES);

    words[0] = 0; words[1] = 1; words[2] = 2;               /* short */
    words[3] = 0x100;
    add_start(s);
    add_raw(s, COPSTREAM_CALLSTACK, words, 4);
    expect_kind(s, COPSTREAM_ERR_SHORT_RECORD, 1, 2);       /* + no-stop */
    words[1] = 0; words[2] = 1;                             /* deeper */
    add_start(s);
    add_raw(s, COPSTREAM_CALLSTACK, words, 4);
    expect_kind(s, COPSTREAM_ERR_BAD_FIELD, 1, 2);
    words[1] = 1; words[3] = 0x100 | 1ull << 50;            /* high bits */
    add_start(s);
    add_raw(s, COPSTREAM_CALLSTACK, words, 4);
    expect_kind(s, COPSTREAM_ERR_BAD_FIELD, 1, 2);
    words[2] = COPSTREAM_MAX_FRAMES + 1;                    /* too many */
    add_start(s);
    add_raw(s, COPSTREAM_CALLSTACK, words, 4);
    expect_kind(s, COPSTREAM_ERR_BAD_FIELD, 1, 2);
    words[2] = 1; words[3] = 0x100 | 3ull << 32;            /* sound */
    add_start(s);
    add_raw(s, COPSTREAM_CALLSTACK, words, 4);
    expect_kind(s, COPSTREAM_ERR_BAD_FIELD, 0, 1);
    g_byte_array_unref(s);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/copstream/golden-bytes", test_golden_bytes);
    g_test_add_func("/copstream/callstack-fields", test_callstack_fields);
    g_test_add_func("/copstream/start-event", test_start_event);
    g_test_add_func("/copstream/reason-fields", test_reason_fields);
    g_test_add_func("/copstream/reasons-form", test_reasons_form);
    g_test_add_func("/copstream/round-trip-every-record",
                    test_round_trip_every_record);
    g_test_add_func("/copstream/round-trip-values", test_round_trip_values);
    g_test_add_func("/copstream/encoder-errors", test_encoder_errors);
    g_test_add_func("/copstream/overlay-flags", test_overlay_flags);
    g_test_add_func("/copstream/start-sampling", test_start_sampling);
    g_test_add_func("/copstream/sample-words", test_sample_words);
    g_test_add_func("/copstream/idempotent-start", test_idempotent_start);
    g_test_add_func("/copstream/unknown-codes-skipped",
                    test_unknown_codes_skipped);
    g_test_add_func("/copstream/error-kinds", test_error_kinds);
    g_test_add_func("/copstream/any-split", test_any_split);
    g_test_add_func("/copstream/truncation-everywhere",
                    test_truncation_everywhere);
    g_test_add_func("/copstream/garbage-injection", test_garbage_injection);
    g_test_add_func("/copstream/noise", test_noise);
    return g_test_run();
}
