/*
 * decode.c — the reading half of the escape-coded stream: an incremental
 * decoder that takes bytes in any split and never trusts them.
 *
 * How it works
 * ------------
 * The core, decode_span(), decodes as much of one contiguous byte span as
 * forms whole units and returns the bytes it consumed; when it stops it has
 * set dec->need, the bytes it needs at the first unconsumed one to make
 * progress (8 for a word, 16 for ESCAPE and header, the whole record once
 * the header is known).  copstream_decoder_feed() runs the core straight on
 * the caller's buffer and keeps only the unconsumed tail, shorter than one
 * record, in dec->carry; on the next call it tops the carry up to exactly
 * `need` bytes, decodes it, and returns to the caller's buffer.  So bytes
 * are copied only around buffer boundaries, and any split of the same
 * stream gives the same events.
 *
 * The core has two modes.  In SYNC it is at a word boundary: a run of
 * samples is taken by a tight loop that loads a word, range-checks slot and
 * address, tests that the slot has a context and appends it to a batch;
 * any other word (ESCAPE, a bad or orphan sample) leaves the loop for the
 * slow path.  A record is delivered once its header is valid and its check
 * matches.  A word or record that cannot be parsed is an error and switches
 * to HUNT, which scans byte by byte (so a stream shifted by a partial word
 * is recovered too) for ESCAPE followed by a valid header and a record
 * whose check matches, then returns to SYNC there and reports the bytes it
 * skipped.  Writers emit a record at every poll, so a reader regains sync
 * within one poll interval.
 *
 * Every byte fed ends up counted in exactly one of: sample words, framed
 * records, skipped bytes (the fuzz target checks this).
 *
 * Freestanding: no libc.  copy_bytes() below replaces memcpy.
 */
#include "escape-protocol/layout.h"

#define NEED_MORE ((size_t)-1)           /* a step that cannot progress */
#define HEAD_BYTES (2 * COPSTREAM_WORD_BYTES)

/* Copies n bytes; safe for overlapping ranges when to < from. */
static void copy_bytes(uint8_t *to, const uint8_t *from, size_t n)
{
    for (size_t i = 0; i < n; i++)
        to[i] = from[i];
}

/* ---- Events ------------------------------------------------------------- */

static void flush_samples(struct copstream_decoder *dec)
{
    if (dec->batch_count > 0 && dec->handler.samples)
        dec->handler.samples(dec->handler.user, dec->batch_offset,
                             dec->batch, dec->batch_count);
    dec->batch_count = 0;
}

static void report(struct copstream_decoder *dec,
                   enum copstream_error_kind kind, uint64_t offset,
                   uint16_t code)
{
    struct copstream_error err = { kind, offset, code };

    flush_samples(dec);
    dec->stats.errors++;
    dec->stats.errors_by_kind[kind]++;
    if (dec->handler.error)
        dec->handler.error(dec->handler.user, &err);
}

/* The once-per-stream errors: data before START, data after STOP. */
static void check_started(struct copstream_decoder *dec, uint64_t offset)
{
    if (!dec->started && !dec->no_start_reported) {
        dec->no_start_reported = 1;
        report(dec, COPSTREAM_ERR_NO_START, offset, 0);
    }
}

static void check_not_stopped(struct copstream_decoder *dec, uint64_t offset)
{
    if (dec->stopped && !dec->after_stop_reported) {
        dec->after_stop_reported = 1;
        report(dec, COPSTREAM_ERR_AFTER_STOP, offset, 0);
    }
}

static void enter_hunt(struct copstream_decoder *dec)
{
    dec->mode = COPSTREAM_MODE_HUNT;
    dec->hunt_start = dec->offset;
}

/* ---- Samples ------------------------------------------------------------ */

/* Whether a word that is not ESCAPE is out of the limits of a sample. */
static inline int sample_invalid(uint64_t slot, uint32_t address,
                                 uint32_t slot_limit, uint64_t ls_limit)
{
    return slot >= slot_limit || address >= ls_limit ||
           address % COPSTREAM_ADDRESS_ALIGN != 0;
}

static void add_sample(struct copstream_decoder *dec, uint64_t offset,
                       uint32_t slot, uint32_t address)
{
    if (dec->batch_count == COPSTREAM_BATCH)
        flush_samples(dec);
    if (dec->batch_count == 0)
        dec->batch_offset = offset;
    dec->batch[dec->batch_count].slot = slot;
    dec->batch[dec->batch_count].address = address;
    dec->batch_count++;
    dec->stats.samples++;
}

/*
 * The fast path: takes the sound samples of slots with a context from the
 * start of p (words complete words) and returns how many.
 */
static size_t take_samples(struct copstream_decoder *dec, const uint8_t *p,
                           size_t words)
{
    const uint32_t slot_limit = dec->slot_limit;
    const uint64_t ls_limit = dec->ls_limit;
    const uint8_t *bound = dec->bound;
    struct copstream_sample *batch = dec->batch;
    size_t n = dec->batch_count, i;

    for (i = 0; i < words; i++) {
        uint64_t w = load_word(p + COPSTREAM_WORD_BYTES * i);
        uint64_t slot = w >> 32;
        uint32_t address = (uint32_t)w;

        if (sample_invalid(slot, address, slot_limit, ls_limit) ||
            !bound[slot])
            break;
        if (n == COPSTREAM_BATCH) {
            dec->batch_count = n;
            flush_samples(dec);
            n = 0;
        }
        if (n == 0)
            dec->batch_offset = dec->offset + COPSTREAM_WORD_BYTES * i;
        batch[n].slot = (uint32_t)slot;
        batch[n].address = address;
        n++;
    }
    dec->batch_count = n;
    dec->stats.samples += i;
    return i;
}

/* A sample word the fast path refused: bad (an error, HUNT) or orphan. */
static size_t slow_sample(struct copstream_decoder *dec, uint64_t w)
{
    uint64_t slot = w >> 32;
    uint32_t address = (uint32_t)w;

    if (sample_invalid(slot, address, dec->slot_limit, dec->ls_limit)) {
        report(dec, COPSTREAM_ERR_BAD_SAMPLE, dec->offset, 0);
        enter_hunt(dec);
        return 0;
    }
    check_started(dec, dec->offset);
    check_not_stopped(dec, dec->offset);
    report(dec, COPSTREAM_ERR_ORPHAN, dec->offset, 0);
    add_sample(dec, dec->offset, (uint32_t)slot, address);
    return COPSTREAM_WORD_BYTES;
}

/* ---- Records ------------------------------------------------------------ */

static int starts_equal(const struct copstream_start *a,
                        const struct copstream_start *b)
{
    return a->version == b->version && a->slots == b->slots &&
           a->lfsr_value == b->lfsr_value && a->lfsr_count == b->lfsr_count &&
           a->clock_hz == b->clock_hz && a->fifo_depth == b->fifo_depth &&
           a->ls_size == b->ls_size &&
           a->poll_interval_ns == b->poll_interval_ns &&
           a->start_time_ns == b->start_time_ns &&
           a->fifo_full == b->fifo_full && a->dither == b->dither &&
           a->dither_seed == b->dither_seed && a->watermark == b->watermark &&
           a->event == b->event;
}

/* The path of an IMAGE record: 0, or the error kind. */
static int parse_path(struct copstream_record *rec)
{
    struct copstream_image *image = &rec->u.image;
    uint32_t fixed = COPSTREAM_IMAGE_WORDS;

    if (image->path_length < 1 || image->path_length > COPSTREAM_MAX_PATH)
        return COPSTREAM_ERR_BAD_FIELD;
    if (rec->payload_words < fixed + path_words(image->path_length))
        return COPSTREAM_ERR_SHORT_RECORD;
    image->path = rec->payload + COPSTREAM_WORD_BYTES * fixed;
    uint32_t padded = COPSTREAM_WORD_BYTES * path_words(image->path_length);
    for (uint32_t i = image->path_length; i < padded; i++)
        if (image->path[i] != 0)
            return COPSTREAM_ERR_BAD_FIELD;
    return 0;
}

/* The frames of a CALLSTACK record: 0, or the error kind. */
static int parse_frames(struct copstream_record *rec)
{
    struct copstream_callstack *c = &rec->u.callstack;

    if (c->n_frames > COPSTREAM_MAX_FRAMES)
        return COPSTREAM_ERR_BAD_FIELD;
    if (rec->payload_words < COPSTREAM_CALLSTACK_WORDS + c->n_frames)
        return COPSTREAM_ERR_SHORT_RECORD;
    c->frames = rec->payload + COPSTREAM_WORD_BYTES * COPSTREAM_CALLSTACK_WORDS;
    return 0;
}

/* The stalls of a REASONS record: 0, or the error kind.  The bits after
 * the last stall must be zero, so a sound record has one form. */
static int parse_stalls(struct copstream_record *rec)
{
    struct copstream_reasons *r = &rec->u.reasons;
    uint32_t words;

    if (r->count == 0 || r->count > COPSTREAM_MAX_REASONS)
        return COPSTREAM_ERR_BAD_FIELD;
    words = copstream_reasons_words(r->count);
    if (rec->payload_words < COPSTREAM_REASONS_WORDS + words)
        return COPSTREAM_ERR_SHORT_RECORD;
    r->stalls = rec->payload + COPSTREAM_WORD_BYTES * COPSTREAM_REASONS_WORDS;
    for (uint32_t i = r->count; i < COPSTREAM_REASONS_PER_WORD * words; i++)
        if (copstream_reason_at(r->stalls, i) != 0)
            return COPSTREAM_ERR_BAD_FIELD;
    return 0;
}

/* Fills rec->u from the payload words: 0, or the error kind. */
static int parse_fields(struct copstream_record *rec, uint32_t slot_limit)
{
    const struct record_layout *layout = &copstream_layouts[rec->code];

    uint32_t present = layout_fields_present(layout, rec->payload_words);

    if (rec->payload_words < layout->min_words)
        return COPSTREAM_ERR_SHORT_RECORD;
    for (uint32_t i = 0; i < present; i++) {
        uint64_t w = load_word(rec->payload + COPSTREAM_WORD_BYTES * i);
        if (layout->fields[i].width == 4 && w > 0xFFFFFFFFu)
            return COPSTREAM_ERR_BAD_FIELD;
        field_set(&rec->u, &layout->fields[i], w);
    }
    if (rec->code == COPSTREAM_IMAGE || rec->code == COPSTREAM_CALLSTACK) {
        int kind = rec->code == COPSTREAM_IMAGE ? parse_path(rec)
                                                : parse_frames(rec);
        if (kind != 0)
            return kind;
    }
    if (rec->code == COPSTREAM_REASONS) {
        int kind = parse_stalls(rec);
        if (kind != 0)
            return kind;
    }
    return copstream_fields_check(rec, slot_limit);
}

/* A second START: a no-op when identical, an error when not. */
static int repeat_start(struct copstream_decoder *dec,
                        struct copstream_record *rec)
{
    if (!starts_equal(&dec->start, &rec->u.start)) {
        report(dec, COPSTREAM_ERR_START_CONFLICT, rec->offset, rec->code);
        return 0;
    }
    rec->repeat = 1;
    dec->stats.repeated_starts++;
    return 1;
}

static void adopt_start(struct copstream_decoder *dec,
                        const struct copstream_start *start)
{
    dec->start = *start;
    dec->started = 1;
    dec->slot_limit = start->slots;
    dec->ls_limit = start->ls_size;
}

static void end_session(struct copstream_decoder *dec,
                        const struct copstream_record *rec)
{
    const struct copstream_stop *stop = &rec->u.stop;

    if (stop->samples != dec->stats.samples || stop->lost != dec->stats.lost)
        report(dec, COPSTREAM_ERR_COUNT_MISMATCH, rec->offset, rec->code);
    dec->stopped = 1;
    for (uint32_t slot = 0; slot < COPSTREAM_MAX_SLOTS; slot++)
        dec->bound[slot] = 0;
}

static void count_lost(struct copstream_decoder *dec,
                       const struct copstream_lost *lost)
{
    uint32_t cause = lost->cause < COPSTREAM_LOST_CAUSE_END ? lost->cause : 0;

    dec->stats.lost += lost->count;
    dec->stats.lost_by_cause[cause] += lost->count;
}

/*
 * The effects of a sound record on the stream state, in the order the
 * events come out (errors before the record they are about).  Returns 0
 * when the record is not to be delivered.
 */
static int apply_record(struct copstream_decoder *dec,
                        struct copstream_record *rec)
{
    if (rec->code != COPSTREAM_START)
        check_started(dec, rec->offset);
    check_not_stopped(dec, rec->offset);
    switch (rec->code) {
    case COPSTREAM_START:
        if (dec->started)
            return repeat_start(dec, rec);
        adopt_start(dec, &rec->u.start);
        break;
    case COPSTREAM_CONTEXT:
        dec->bound[rec->u.context.slot] = 1;
        break;
    case COPSTREAM_RELEASE:
        dec->bound[rec->u.release.slot] = 0;
        break;
    case COPSTREAM_OVERLAY:
        if (!dec->bound[rec->u.overlay.slot])
            report(dec, COPSTREAM_ERR_ORPHAN, rec->offset, rec->code);
        break;
    case COPSTREAM_LOST:
        count_lost(dec, &rec->u.lost);
        break;
    case COPSTREAM_STOP:
        end_session(dec, rec);
        break;
    }
    return 1;
}

static void deliver(struct copstream_decoder *dec,
                    const struct copstream_record *rec)
{
    flush_samples(dec);
    if (code_known(rec->code))
        dec->stats.records[rec->code]++;
    if (dec->handler.record)
        dec->handler.record(dec->handler.user, rec);
}

/* A well-framed record whose check matched, at p (ESCAPE) in the span. */
static void handle_record(struct copstream_decoder *dec, const uint8_t *p,
                          uint64_t header)
{
    struct copstream_record rec = { 0 };

    rec.code = header_code(header);
    rec.payload_words = header_length(header);
    rec.offset = dec->offset;
    rec.payload = p + HEAD_BYTES;
    dec->stats.record_bytes += HEAD_BYTES +
                               COPSTREAM_WORD_BYTES * rec.payload_words;
    if (!code_known(rec.code)) {
        dec->stats.unknown_records++;
        check_started(dec, rec.offset);
        check_not_stopped(dec, rec.offset);
        deliver(dec, &rec);
        return;
    }
    int kind = parse_fields(&rec, dec->slot_limit);
    if (kind != 0) {
        report(dec, kind, rec.offset, rec.code);
        return;
    }
    if (apply_record(dec, &rec))
        deliver(dec, &rec);
}

/* ESCAPE at p in SYNC: the record, or an error and HUNT. */
static size_t take_record(struct copstream_decoder *dec, const uint8_t *p,
                          size_t len)
{
    if (len < HEAD_BYTES) {
        dec->need = HEAD_BYTES;
        return NEED_MORE;
    }
    uint64_t header = load_word(p + COPSTREAM_WORD_BYTES);
    if (!header_valid(header)) {
        report(dec, COPSTREAM_ERR_BAD_HEADER, dec->offset, 0);
        enter_hunt(dec);
        return 0;
    }
    size_t size = HEAD_BYTES + COPSTREAM_WORD_BYTES * header_length(header);
    if (len < size) {
        dec->need = size;
        return NEED_MORE;
    }
    if (copstream_check(header_code(header), header_length(header),
                        p + HEAD_BYTES) != header_check(header)) {
        report(dec, COPSTREAM_ERR_BAD_CHECK, dec->offset,
               header_code(header));
        enter_hunt(dec);
        return 0;
    }
    handle_record(dec, p, header);
    return size;
}

/* One SYNC step: a run of samples, else the one word that ended it. */
static size_t sync_step(struct copstream_decoder *dec, const uint8_t *p,
                        size_t len)
{
    size_t words = len / COPSTREAM_WORD_BYTES;

    if (words == 0) {
        dec->need = COPSTREAM_WORD_BYTES;
        return NEED_MORE;
    }
    size_t taken = take_samples(dec, p, words);
    if (taken > 0)
        return COPSTREAM_WORD_BYTES * taken;

    uint64_t w = load_word(p);
    if (w == COPSTREAM_ESCAPE)
        return take_record(dec, p, len);
    return slow_sample(dec, w);
}

/* ---- Hunting ------------------------------------------------------------ */

enum candidate { NOT_RECORD, MAYBE_RECORD, RECORD };

/*
 * Whether a record starts at p: RECORD when ESCAPE, a valid header and a
 * matching check are all there, MAYBE_RECORD when the bytes present agree
 * but more are needed (dec->need set), NOT_RECORD otherwise.
 */
static enum candidate record_at(struct copstream_decoder *dec,
                                const uint8_t *p, size_t len)
{
    size_t prefix = len < COPSTREAM_WORD_BYTES ? len : COPSTREAM_WORD_BYTES;

    for (size_t i = 0; i < prefix; i++)
        if (p[i] != 0xFF)
            return NOT_RECORD;
    if (len < HEAD_BYTES) {
        dec->need = HEAD_BYTES;
        return MAYBE_RECORD;
    }
    uint64_t header = load_word(p + COPSTREAM_WORD_BYTES);
    if (!header_valid(header))
        return NOT_RECORD;
    size_t size = HEAD_BYTES + COPSTREAM_WORD_BYTES * header_length(header);
    if (len < size) {
        dec->need = size;
        return MAYBE_RECORD;
    }
    if (copstream_check(header_code(header), header_length(header),
                        p + HEAD_BYTES) != header_check(header))
        return NOT_RECORD;
    return RECORD;
}

/* One HUNT step: skips bytes up to a record (then SYNC) or a maybe. */
static size_t hunt_step(struct copstream_decoder *dec, const uint8_t *p,
                        size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != 0xFF)
            continue;
        enum candidate found = record_at(dec, p + i, len - i);
        if (found == NOT_RECORD)
            continue;
        if (found == RECORD) {
            uint64_t at = dec->offset + i;
            uint64_t skipped = at - dec->hunt_start;
            flush_samples(dec);
            dec->stats.skipped_bytes += skipped;
            dec->stats.resyncs++;
            if (dec->handler.resync)
                dec->handler.resync(dec->handler.user, at, skipped);
            dec->mode = COPSTREAM_MODE_SYNC;
            return i;
        }
        return i > 0 ? i : NEED_MORE;
    }
    dec->need = HEAD_BYTES;
    return len > 0 ? len : NEED_MORE;
}

/* ---- Driving ------------------------------------------------------------ */

static size_t decode_span(struct copstream_decoder *dec, const uint8_t *p,
                          size_t len)
{
    size_t used = 0;

    for (;;) {
        size_t step = dec->mode == COPSTREAM_MODE_SYNC
                          ? sync_step(dec, p + used, len - used)
                          : hunt_step(dec, p + used, len - used);
        if (step == NEED_MORE)
            return used;
        used += step;
        dec->offset += step;
    }
}

void copstream_decoder_init(struct copstream_decoder *dec,
                            const struct copstream_handler *handler)
{
    static const struct copstream_stats no_stats;

    dec->handler = *handler;
    dec->stats = no_stats;
    dec->mode = COPSTREAM_MODE_SYNC;
    dec->offset = 0;
    dec->hunt_start = 0;
    dec->need = COPSTREAM_WORD_BYTES;
    dec->slot_limit = COPSTREAM_MAX_SLOTS;
    dec->ls_limit = 1ull << 32;
    dec->started = dec->stopped = 0;
    dec->no_start_reported = dec->after_stop_reported = 0;
    dec->finished = 0;
    for (uint32_t slot = 0; slot < COPSTREAM_MAX_SLOTS; slot++)
        dec->bound[slot] = 0;
    dec->batch_count = 0;
    dec->batch_offset = 0;
    dec->carry_length = 0;
}

/* Tops the carry up from *bytes and decodes it while it is complete. */
static void drain_carry(struct copstream_decoder *dec, const uint8_t **bytes,
                        size_t *length)
{
    while (dec->carry_length > 0 && *length > 0) {
        size_t take = dec->need - dec->carry_length;
        if (take > *length)
            take = *length;
        copy_bytes(dec->carry + dec->carry_length, *bytes, take);
        dec->carry_length += take;
        *bytes += take;
        *length -= take;
        if (dec->carry_length < dec->need)
            return;
        size_t used = decode_span(dec, dec->carry, dec->carry_length);
        copy_bytes(dec->carry, dec->carry + used, dec->carry_length - used);
        dec->carry_length -= used;
    }
}

void copstream_decoder_feed(struct copstream_decoder *dec,
                            const uint8_t *bytes, size_t length)
{
    if (dec->finished)
        return;
    dec->stats.bytes += length;
    drain_carry(dec, &bytes, &length);
    if (dec->carry_length == 0 && length > 0) {
        size_t used = decode_span(dec, bytes, length);
        copy_bytes(dec->carry, bytes + used, length - used);
        dec->carry_length = length - used;
    }
    flush_samples(dec);
}

void copstream_decoder_finish(struct copstream_decoder *dec)
{
    if (dec->finished)
        return;
    dec->finished = 1;
    uint64_t end = dec->offset + dec->carry_length;
    if (dec->mode == COPSTREAM_MODE_HUNT) {
        dec->stats.skipped_bytes += end - dec->hunt_start;
    } else if (dec->carry_length > 0) {
        report(dec, COPSTREAM_ERR_TRUNCATED, dec->offset, 0);
        dec->stats.skipped_bytes += dec->carry_length;
    }
    dec->offset = end;
    dec->carry_length = 0;
    check_started(dec, end);
    if (!dec->stopped)
        report(dec, COPSTREAM_ERR_NO_STOP, end, 0);
    flush_samples(dec);
}

/* ---- Names -------------------------------------------------------------- */

const char *copstream_code_name(uint16_t code)
{
    static const char *const names[COPSTREAM_CODE_END] = {
        [COPSTREAM_START] = "start",     [COPSTREAM_CONTEXT] = "context",
        [COPSTREAM_OVERLAY] = "overlay", [COPSTREAM_LOST] = "lost",
        [COPSTREAM_TIME] = "time",       [COPSTREAM_STOP] = "stop",
        [COPSTREAM_IMAGE] = "image",     [COPSTREAM_RELEASE] = "release",
        [COPSTREAM_STALL] = "stall",     [COPSTREAM_END] = "end",
        [COPSTREAM_CALLSTACK] = "callstack", [COPSTREAM_REASONS] = "reasons",
        [COPSTREAM_TRANSFER] = "transfer",
    };

    return code < COPSTREAM_CODE_END ? names[code] : NULL;
}

const char *copstream_error_name(enum copstream_error_kind kind)
{
    static const char *const names[COPSTREAM_ERR_KIND_END] = {
        [COPSTREAM_ERR_BAD_SAMPLE] = "bad-sample",
        [COPSTREAM_ERR_BAD_HEADER] = "bad-header",
        [COPSTREAM_ERR_BAD_CHECK] = "bad-check",
        [COPSTREAM_ERR_SHORT_RECORD] = "short-record",
        [COPSTREAM_ERR_BAD_FIELD] = "bad-field",
        [COPSTREAM_ERR_BAD_VERSION] = "bad-version",
        [COPSTREAM_ERR_START_CONFLICT] = "start-conflict",
        [COPSTREAM_ERR_NO_START] = "no-start",
        [COPSTREAM_ERR_ORPHAN] = "orphan",
        [COPSTREAM_ERR_AFTER_STOP] = "after-stop",
        [COPSTREAM_ERR_COUNT_MISMATCH] = "count-mismatch",
        [COPSTREAM_ERR_TRUNCATED] = "truncated",
        [COPSTREAM_ERR_NO_STOP] = "no-stop",
    };

    if ((unsigned)kind < COPSTREAM_ERR_KIND_END && names[kind])
        return names[kind];
    return "unknown-error";
}

const char *copstream_cause_name(uint32_t cause)
{
    static const char *const names[COPSTREAM_LOST_CAUSE_END] = {
        [COPSTREAM_LOST_FIFO_OVERFLOW] = "fifo-overflow",
        [COPSTREAM_LOST_BUFFER_FULL] = "buffer-full",
        [COPSTREAM_LOST_NO_CONTEXT] = "no-context",
        [COPSTREAM_LOST_OUTSIDE_LS] = "outside-ls",
    };

    return cause < COPSTREAM_LOST_CAUSE_END ? names[cause] : NULL;
}
