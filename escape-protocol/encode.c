// SPDX-License-Identifier: GPL-2.0
/*
 * encode.c — the writing half of the escape-coded stream, and the record
 * layout table both halves read.
 *
 * A record is written in place: its payload words go to out + 16, one per
 * entry of the code's layout (IMAGE then appends its path, zero-padded to a
 * whole word, CALLSTACK its frames), the check is computed over what was written, and ESCAPE and
 * the header go in front.  Nothing is written unless the whole record fits
 * and every field is in range, so a caller can retry into a fresh buffer or
 * count the record as lost.
 *
 * Samples bypass all this: one word each, slot << 32 | address, written by
 * a loop that the compiler turns into a shift, an OR and a store per sample.
 *
 * Freestanding: no libc, only the fixed-width types of copstream.h.
 */
#include "escape-protocol/layout.h"

#define CHECK_MULTIPLIER 0x9E3779B97F4A7C15ull

#define FIELD(type, member, name, style) \
    { (uint16_t)__builtin_offsetof(type, member), \
      (uint8_t)sizeof(((type *)0)->member), style, name }

static const struct field_layout start_fields[COPSTREAM_START_WORDS] = {
    FIELD(struct copstream_start, version, "version", FIELD_VERSION),
    FIELD(struct copstream_start, slots, "slots", FIELD_DECIMAL),
    FIELD(struct copstream_start, lfsr_value, "lfsr_value", FIELD_HEX6),
    FIELD(struct copstream_start, lfsr_count, "lfsr_count", FIELD_DECIMAL),
    FIELD(struct copstream_start, clock_hz, "clock_hz", FIELD_DECIMAL),
    FIELD(struct copstream_start, fifo_depth, "fifo_depth", FIELD_DECIMAL),
    FIELD(struct copstream_start, ls_size, "ls_size", FIELD_DECIMAL),
    FIELD(struct copstream_start, poll_interval_ns, "poll_interval_ns",
          FIELD_DECIMAL),
    FIELD(struct copstream_start, start_time_ns, "start_time_ns",
          FIELD_DECIMAL),
    FIELD(struct copstream_start, fifo_full, "fifo_full", FIELD_DECIMAL),
    FIELD(struct copstream_start, dither, "dither", FIELD_DECIMAL),
    FIELD(struct copstream_start, dither_seed, "dither_seed", FIELD_DECIMAL),
    FIELD(struct copstream_start, watermark, "watermark", FIELD_DECIMAL),
    FIELD(struct copstream_start, event, "event", FIELD_DECIMAL),
};

static const struct field_layout context_fields[COPSTREAM_CONTEXT_WORDS] = {
    FIELD(struct copstream_context, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_context, pid, "pid", FIELD_DECIMAL),
    FIELD(struct copstream_context, tid, "tid", FIELD_DECIMAL),
    FIELD(struct copstream_context, context_id, "context_id", FIELD_DECIMAL),
    FIELD(struct copstream_context, object_id, "object_id", FIELD_HEX),
    FIELD(struct copstream_context, image.device, "device", FIELD_DECIMAL),
    FIELD(struct copstream_context, image.inode, "inode", FIELD_DECIMAL),
    FIELD(struct copstream_context, image.size, "size", FIELD_DECIMAL),
    FIELD(struct copstream_context, image.hash, "hash", FIELD_HEX16),
    FIELD(struct copstream_context, image_offset, "image_offset",
          FIELD_DECIMAL),
    FIELD(struct copstream_context, cycle, "cycle", FIELD_DECIMAL),
};

static const struct field_layout overlay_fields[COPSTREAM_OVERLAY_WORDS] = {
    FIELD(struct copstream_overlay, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_overlay, region, "region", FIELD_DECIMAL),
    FIELD(struct copstream_overlay, guard, "guard", FIELD_DECIMAL),
    FIELD(struct copstream_overlay, cycle, "cycle", FIELD_DECIMAL),
    FIELD(struct copstream_overlay, flags, "placed", FIELD_DECIMAL),
};

static const struct field_layout lost_fields[COPSTREAM_LOST_WORDS] = {
    FIELD(struct copstream_lost, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_lost, cause, "cause", FIELD_CAUSE),
    FIELD(struct copstream_lost, count, "count", FIELD_DECIMAL),
    FIELD(struct copstream_lost, cycle, "cycle", FIELD_DECIMAL),
};

static const struct field_layout time_fields[COPSTREAM_TIME_WORDS] = {
    FIELD(struct copstream_time, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_time, cycle, "cycle", FIELD_DECIMAL),
    FIELD(struct copstream_time, time_ns, "time_ns", FIELD_DECIMAL),
};

static const struct field_layout stop_fields[COPSTREAM_STOP_WORDS] = {
    FIELD(struct copstream_stop, time_ns, "time_ns", FIELD_DECIMAL),
    FIELD(struct copstream_stop, samples, "samples", FIELD_DECIMAL),
    FIELD(struct copstream_stop, lost, "lost", FIELD_DECIMAL),
};

static const struct field_layout image_fields[COPSTREAM_IMAGE_WORDS] = {
    FIELD(struct copstream_image, id.device, "device", FIELD_DECIMAL),
    FIELD(struct copstream_image, id.inode, "inode", FIELD_DECIMAL),
    FIELD(struct copstream_image, id.size, "size", FIELD_DECIMAL),
    FIELD(struct copstream_image, id.hash, "hash", FIELD_HEX16),
    FIELD(struct copstream_image, path_length, "path", FIELD_PATH),
};

static const struct field_layout release_fields[COPSTREAM_RELEASE_WORDS] = {
    FIELD(struct copstream_release, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_release, cycle, "cycle", FIELD_DECIMAL),
};

static const struct field_layout stall_fields[COPSTREAM_STALL_WORDS] = {
    FIELD(struct copstream_stall, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_stall, count, "count", FIELD_DECIMAL),
    FIELD(struct copstream_stall, ns, "ns", FIELD_DECIMAL),
    FIELD(struct copstream_stall, cycle, "cycle", FIELD_DECIMAL),
};

static const struct field_layout end_fields[COPSTREAM_END_WORDS] = {
    FIELD(struct copstream_end, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_end, context_id, "context_id", FIELD_DECIMAL),
    FIELD(struct copstream_end, cycle, "cycle", FIELD_DECIMAL),
};

static const struct field_layout callstack_fields[COPSTREAM_CALLSTACK_WORDS] = {
    FIELD(struct copstream_callstack, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_callstack, depth, "depth", FIELD_DECIMAL),
    FIELD(struct copstream_callstack, n_frames, "frames", FIELD_FRAMES),
};

static const struct field_layout reasons_fields[COPSTREAM_REASONS_WORDS] = {
    FIELD(struct copstream_reasons, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_reasons, count, "stalls", FIELD_REASONS),
};

static const struct field_layout transfer_fields[COPSTREAM_TRANSFER_WORDS] = {
    FIELD(struct copstream_transfer, slot, "slot", FIELD_DECIMAL),
    FIELD(struct copstream_transfer, flags, "known", FIELD_DECIMAL),
    FIELD(struct copstream_transfer, tag, "tag", FIELD_DECIMAL),
    FIELD(struct copstream_transfer, issuer, "issuer", FIELD_HEX),
};

const struct record_layout copstream_layouts[COPSTREAM_CODE_END] = {
    [COPSTREAM_START]   = { COPSTREAM_START_WORDS, COPSTREAM_START_WORDS_1_1,
                            start_fields },
    [COPSTREAM_CONTEXT] = { COPSTREAM_CONTEXT_WORDS, COPSTREAM_CONTEXT_WORDS,
                            context_fields },
    [COPSTREAM_OVERLAY] = { COPSTREAM_OVERLAY_WORDS,
                            COPSTREAM_OVERLAY_WORDS_1_0, overlay_fields },
    [COPSTREAM_LOST]    = { COPSTREAM_LOST_WORDS, COPSTREAM_LOST_WORDS,
                            lost_fields },
    [COPSTREAM_TIME]    = { COPSTREAM_TIME_WORDS, COPSTREAM_TIME_WORDS,
                            time_fields },
    [COPSTREAM_STOP]    = { COPSTREAM_STOP_WORDS, COPSTREAM_STOP_WORDS,
                            stop_fields },
    [COPSTREAM_IMAGE]   = { COPSTREAM_IMAGE_WORDS, COPSTREAM_IMAGE_WORDS,
                            image_fields },
    [COPSTREAM_RELEASE] = { COPSTREAM_RELEASE_WORDS, COPSTREAM_RELEASE_WORDS,
                            release_fields },
    [COPSTREAM_STALL]   = { COPSTREAM_STALL_WORDS, COPSTREAM_STALL_WORDS,
                            stall_fields },
    [COPSTREAM_END]     = { COPSTREAM_END_WORDS, COPSTREAM_END_WORDS,
                            end_fields },
    [COPSTREAM_CALLSTACK] = { COPSTREAM_CALLSTACK_WORDS,
                              COPSTREAM_CALLSTACK_WORDS, callstack_fields },
    [COPSTREAM_REASONS] = { COPSTREAM_REASONS_WORDS, COPSTREAM_REASONS_WORDS,
                            reasons_fields },
    [COPSTREAM_TRANSFER] = { COPSTREAM_TRANSFER_WORDS,
                             COPSTREAM_TRANSFER_WORDS, transfer_fields },
};

uint16_t copstream_check(uint16_t code, uint16_t length,
                         const uint8_t *payload)
{
    uint64_t h = (uint64_t)code | (uint64_t)length << 16;

    for (uint32_t i = 0; i < length; i++)
        h = (h ^ load_word(payload + COPSTREAM_WORD_BYTES * i)) *
            CHECK_MULTIPLIER;
    h ^= h >> 32;
    h ^= h >> 16;
    return (uint16_t)h;
}

static int start_check(const struct copstream_start *s)
{
    if (s->version >> 16 != COPSTREAM_VERSION_MAJOR)
        return COPSTREAM_ERR_BAD_VERSION;
    if (s->slots < 1 || s->slots > COPSTREAM_MAX_SLOTS)
        return COPSTREAM_ERR_BAD_FIELD;
    if (s->lfsr_value > 0xFFFFFF || s->lfsr_count > 0xFFFFFF ||
        (s->lfsr_value == 0) != (s->lfsr_count == 0))
        return COPSTREAM_ERR_BAD_FIELD;
    if (s->clock_hz < 1 || s->fifo_depth < 1)
        return COPSTREAM_ERR_BAD_FIELD;
    if (s->ls_size < COPSTREAM_ADDRESS_ALIGN || s->ls_size > 1ull << 32 ||
        s->ls_size % COPSTREAM_ADDRESS_ALIGN != 0)
        return COPSTREAM_ERR_BAD_FIELD;
    return 0;
}

static int path_check(const struct copstream_image *image)
{
    if (image->path_length < 1 || image->path_length > COPSTREAM_MAX_PATH)
        return COPSTREAM_ERR_BAD_FIELD;
    for (uint32_t i = 0; i < image->path_length; i++)
        if (image->path[i] == 0)
            return COPSTREAM_ERR_BAD_FIELD;
    return 0;
}

static int slot_check(uint32_t slot, uint32_t slot_limit)
{
    return slot < slot_limit ? 0 : COPSTREAM_ERR_BAD_FIELD;
}

/* At most COPSTREAM_MAX_FRAMES frames, no more than the depth, each an
 * aligned address with a 16-bit overlay. */
static int callstack_check(const struct copstream_callstack *c,
                           uint32_t slot_limit)
{
    if (c->n_frames > COPSTREAM_MAX_FRAMES || c->n_frames > c->depth)
        return COPSTREAM_ERR_BAD_FIELD;
    for (uint32_t i = 0; i < c->n_frames; i++) {
        uint64_t w = copstream_frame(c->frames, i);

        if (w >> 48 || (uint32_t)w % COPSTREAM_ADDRESS_ALIGN)
            return COPSTREAM_ERR_BAD_FIELD;
    }
    return slot_check(c->slot, slot_limit);
}

/* At least one reason, no more than a record holds. */
static int reasons_check(const struct copstream_reasons *r,
                         uint32_t slot_limit)
{
    if (r->count == 0 || r->count > COPSTREAM_MAX_REASONS)
        return COPSTREAM_ERR_BAD_FIELD;
    return slot_check(r->slot, slot_limit);
}

/* Only the KNOWN flag; a transfer's tag below 32 and its issuer an
 * aligned address; without one, tag and issuer 0. */
static int transfer_check(const struct copstream_transfer *r,
                          uint32_t slot_limit)
{
    if (r->flags & ~COPSTREAM_TRANSFER_KNOWN)
        return COPSTREAM_ERR_BAD_FIELD;
    if (r->flags ? r->tag >= COPSTREAM_DMA_TAGS
                   || r->issuer % COPSTREAM_ADDRESS_ALIGN
                 : r->tag || r->issuer)
        return COPSTREAM_ERR_BAD_FIELD;
    return slot_check(r->slot, slot_limit);
}

int copstream_fields_check(const struct copstream_record *rec,
                           uint32_t slot_limit)
{
    switch (rec->code) {
    case COPSTREAM_START:
        return start_check(&rec->u.start);
    case COPSTREAM_CONTEXT:
        return slot_check(rec->u.context.slot, slot_limit);
    case COPSTREAM_OVERLAY:
        return slot_check(rec->u.overlay.slot, slot_limit);
    case COPSTREAM_LOST:
        if (rec->u.lost.count == 0)
            return COPSTREAM_ERR_BAD_FIELD;
        return slot_check(rec->u.lost.slot, slot_limit);
    case COPSTREAM_TIME:
        return slot_check(rec->u.time.slot, slot_limit);
    case COPSTREAM_STOP:
        return 0;
    case COPSTREAM_IMAGE:
        return path_check(&rec->u.image);
    case COPSTREAM_RELEASE:
        return slot_check(rec->u.release.slot, slot_limit);
    case COPSTREAM_STALL:
        if (rec->u.stall.count == 0)
            return COPSTREAM_ERR_BAD_FIELD;
        return slot_check(rec->u.stall.slot, slot_limit);
    case COPSTREAM_END:
        return slot_check(rec->u.end.slot, slot_limit);
    case COPSTREAM_CALLSTACK:
        return callstack_check(&rec->u.callstack, slot_limit);
    case COPSTREAM_REASONS:
        return reasons_check(&rec->u.reasons, slot_limit);
    case COPSTREAM_TRANSFER:
        return transfer_check(&rec->u.transfer, slot_limit);
    default:
        return COPSTREAM_ERR_BAD_FIELD;
    }
}

/* The fixed words rec is written with: its code's, or an earlier form's. */
static uint32_t fixed_words(const struct copstream_record *rec)
{
    const struct record_layout *layout = &copstream_layouts[rec->code];

    if (rec->payload_words >= layout->min_words &&
        rec->payload_words < layout->words)
        return rec->payload_words;
    return layout->words;
}

static uint32_t record_words(const struct copstream_record *rec)
{
    return fixed_words(rec) + variable_words(rec);
}

int copstream_record_bytes(const struct copstream_record *rec)
{
    if (!code_known(rec->code) ||
        copstream_fields_check(rec, COPSTREAM_MAX_SLOTS) != 0)
        return COPSTREAM_INVALID;
    return (int)(COPSTREAM_WORD_BYTES * (2 + record_words(rec)));
}

/* ESCAPE and the header in front of the payload already at out + 16. */
static void frame(uint8_t *out, uint16_t code, uint16_t length)
{
    uint8_t *payload = out + 2 * COPSTREAM_WORD_BYTES;

    store_word(out, COPSTREAM_ESCAPE);
    store_word(out + COPSTREAM_WORD_BYTES,
               header_word(code, length, copstream_check(code, length,
                                                         payload)));
}

/* The path bytes, then zeros up to the end of the last word. */
static void put_path(uint8_t *at, const struct copstream_image *image)
{
    uint32_t padded = COPSTREAM_WORD_BYTES * path_words(image->path_length);

    for (uint32_t i = 0; i < padded; i++)
        at[i] = i < image->path_length ? image->path[i] : 0;
}

/* The stalls, a word at a time, then zero bits up to the end of the last
 * word (built in a register: a zeroing loop would become a libc memset). */
static void put_stalls(uint8_t *at, const struct copstream_reasons *r)
{
    uint32_t words = copstream_reasons_words(r->count);

    for (uint32_t w = 0; w < words; w++) {
        uint64_t word = 0;

        for (uint32_t j = 0; j < COPSTREAM_REASONS_PER_WORD; j++) {
            uint32_t i = COPSTREAM_REASONS_PER_WORD * w + j;

            if (i < r->count)
                word |= (uint64_t)copstream_reason_at(r->stalls, i)
                        << (4 * j);
        }
        store_word(at + COPSTREAM_WORD_BYTES * w, word);
    }
}

int copstream_encode_record(uint8_t *out, size_t room,
                            const struct copstream_record *rec)
{
    int bytes = copstream_record_bytes(rec);

    if (bytes < 0)
        return bytes;
    if (room < (size_t)bytes)
        return COPSTREAM_NO_ROOM;

    const struct record_layout *layout = &copstream_layouts[rec->code];
    uint8_t *payload = out + 2 * COPSTREAM_WORD_BYTES;
    uint32_t fixed = fixed_words(rec);
    for (uint32_t i = 0; i < fixed; i++)
        store_word(payload + COPSTREAM_WORD_BYTES * i,
                   field_get(&rec->u, &layout->fields[i]));
    if (rec->code == COPSTREAM_IMAGE)
        put_path(payload + COPSTREAM_WORD_BYTES * fixed, &rec->u.image);
    for (uint32_t i = 0; rec->code == COPSTREAM_CALLSTACK &&
                         i < COPSTREAM_WORD_BYTES * rec->u.callstack.n_frames;
         i++)
        payload[COPSTREAM_WORD_BYTES * fixed + i] = rec->u.callstack.frames[i];
    if (rec->code == COPSTREAM_REASONS)
        put_stalls(payload + COPSTREAM_WORD_BYTES * fixed, &rec->u.reasons);
    frame(out, rec->code, (uint16_t)record_words(rec));
    return bytes;
}

int copstream_encode_raw(uint8_t *out, size_t room, uint16_t code,
                         const uint64_t *words, size_t count)
{
    if (count > COPSTREAM_MAX_PAYLOAD)
        return COPSTREAM_INVALID;
    size_t bytes = COPSTREAM_WORD_BYTES * (2 + count);
    if (room < bytes)
        return COPSTREAM_NO_ROOM;
    for (size_t i = 0; i < count; i++)
        store_word(out + COPSTREAM_WORD_BYTES * (2 + i), words[i]);
    frame(out, code, (uint16_t)count);
    return (int)bytes;
}

uint64_t copstream_sample_word(uint32_t slot, uint32_t address)
{
    if (slot >= COPSTREAM_MAX_SLOTS || address % COPSTREAM_ADDRESS_ALIGN != 0)
        return COPSTREAM_ESCAPE;
    return (uint64_t)slot << 32 | address;
}

size_t copstream_encode_pc_fields(uint8_t *out, size_t room, uint32_t slot,
                                  const uint16_t *fields, size_t count)
{
    size_t fit = room / COPSTREAM_WORD_BYTES;
    uint64_t high = (uint64_t)slot << 32;

    if (slot >= COPSTREAM_MAX_SLOTS)
        return 0;
    if (count > fit)
        count = fit;
    for (size_t i = 0; i < count; i++)
        store_word(out + COPSTREAM_WORD_BYTES * i,
                   high | (uint32_t)fields[i] << 2);
    return count;
}
