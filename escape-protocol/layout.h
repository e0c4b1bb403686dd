/* SPDX-License-Identifier: GPL-2.0 */
/*
 * layout.h — what encode.c, decode.c and text.c share: little-endian word
 * access, the header word, and the table of record layouts (which struct
 * field each payload word carries, its name and how copstream dump prints
 * it), so that the encoder, the decoder and the text form are readings of
 * one table rather than hand-written lists.
 *
 * Freestanding like the rest of the library.  Not installed.
 */
#ifndef COPROF_COPSTREAM_LAYOUT_H
#define COPROF_COPSTREAM_LAYOUT_H

#include "escape-protocol/copstream.h"

/*
 * Little-endian words at any alignment.  The load's byte assembly compiles
 * to one move.  The store is the kernel's put_unaligned_le64() in
 * copdrv.ko; in user space it goes through a packed struct, as
 * put_unaligned does, because compilers split byte-wise stores whose value
 * has bytes known to be zero.
 */
static inline uint64_t load_word(const uint8_t *p)
{
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
           (uint64_t)p[3] << 24 | (uint64_t)p[4] << 32 |
           (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

#ifdef __KERNEL__
#include <asm/unaligned.h>

static inline void store_word(uint8_t *p, uint64_t w)
{
    put_unaligned_le64(w, p);
}
#else
struct unaligned_word {
    uint64_t value;
} __attribute__((packed, may_alias));

static inline void store_word(uint8_t *p, uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    ((struct unaligned_word *)p)->value = w;
}
#endif

/* Header word: marker 48..63, check 32..47, length 16..31, code 0..15. */
static inline uint64_t header_word(uint16_t code, uint16_t length,
                                   uint16_t check)
{
    return (uint64_t)COPSTREAM_MARKER << 48 | (uint64_t)check << 32 |
           (uint64_t)length << 16 | code;
}

static inline uint16_t header_code(uint64_t header)
{
    return (uint16_t)header;
}

static inline uint16_t header_length(uint64_t header)
{
    return (uint16_t)(header >> 16);
}

static inline uint16_t header_check(uint64_t header)
{
    return (uint16_t)(header >> 32);
}

/* A header that frames a record: the marker and a length in range. */
static inline int header_valid(uint64_t header)
{
    return (header >> 48) == COPSTREAM_MARKER &&
           header_length(header) <= COPSTREAM_MAX_PAYLOAD;
}

/* How the text form writes a field (escape-protocol/README.md, "dump"). */
enum field_style {
    FIELD_DECIMAL,
    FIELD_HEX,          /* 0x, no padding */
    FIELD_HEX6,         /* 0x and 6 digits: an LFSR value */
    FIELD_HEX16,        /* 0x and 16 digits: a hash */
    FIELD_VERSION,      /* major.minor */
    FIELD_CAUSE,        /* a lost cause's name, or its number */
    FIELD_PATH,         /* IMAGE's path_length: written as path=BYTES */
    FIELD_FRAMES,       /* CALLSTACK's n_frames: written as frames=LIST */
    FIELD_REASONS       /* REASONS' count: written as stalls=DIGITS */
};

/*
 * One payload word: the field at `offset` in the union member, 4 or 8
 * bytes wide, its name in the text form and its style there.
 */
struct field_layout {
    uint16_t offset;
    uint8_t width;
    uint8_t style;
    const char *name;
};

/*
 * The fixed payload words of a record code (IMAGE adds its path after).
 * min_words: the fields a sound record must have (the 1.0 form); the later
 * ones read as zero when absent.
 */
struct record_layout {
    uint16_t words;
    uint16_t min_words;
    const struct field_layout *fields;
};

/* The fields a record of this code and payload length holds. */
static inline uint32_t layout_fields_present(const struct record_layout *l,
                                             uint32_t payload_words)
{
    return payload_words < l->words ? payload_words : l->words;
}

/* The value of field f of a union member (struct copstream_start, ...). */
static inline uint64_t field_get(const void *member,
                                 const struct field_layout *f)
{
    const uint8_t *at = (const uint8_t *)member + f->offset;

    if (f->width == 8)
        return *(const uint64_t *)at;
    return *(const uint32_t *)at;
}

/* Sets field f; a 4-byte field keeps the low 32 bits of value. */
static inline void field_set(void *member, const struct field_layout *f,
                             uint64_t value)
{
    uint8_t *at = (uint8_t *)member + f->offset;

    if (f->width == 8)
        *(uint64_t *)at = value;
    else
        *(uint32_t *)at = (uint32_t)value;
}

/* Indexed by code; entry 0 is empty.  Defined in encode.c. */
extern const struct record_layout copstream_layouts[COPSTREAM_CODE_END];

static inline int code_known(uint16_t code)
{
    return code > 0 && code < COPSTREAM_CODE_END;
}

/* Payload words the path of an IMAGE record takes. */
static inline uint32_t path_words(uint32_t path_length)
{
    return (path_length + COPSTREAM_WORD_BYTES - 1) / COPSTREAM_WORD_BYTES;
}

/* Payload words after the fixed ones: IMAGE's path, CALLSTACK's frames,
 * REASONS' stalls. */
static inline uint32_t variable_words(const struct copstream_record *rec)
{
    if (rec->code == COPSTREAM_IMAGE)
        return path_words(rec->u.image.path_length);
    if (rec->code == COPSTREAM_CALLSTACK)
        return rec->u.callstack.n_frames;
    if (rec->code == COPSTREAM_REASONS)
        return copstream_reasons_words(rec->u.reasons.count);
    return 0;
}

/*
 * Checks the fields of a known record as both sides must: 0 when sound,
 * else COPSTREAM_ERR_BAD_FIELD or COPSTREAM_ERR_BAD_VERSION.  Slots must be
 * below slot_limit.
 */
int copstream_fields_check(const struct copstream_record *rec,
                           uint32_t slot_limit);

#endif /* COPROF_COPSTREAM_LAYOUT_H */
