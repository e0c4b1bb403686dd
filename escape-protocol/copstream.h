/* SPDX-License-Identifier: GPL-2.0 */
/*
 * copstream.h — the escape-coded sample stream: format, encoder, decoder.
 *
 * The kernel driver writes, and the daemon reads, a stream of 64-bit
 * little-endian words.  A word that is not ESCAPE (all ones) is a sample:
 * slot << 32 | local-store address.  ESCAPE starts a record: a header word
 * (marker, check, length, code) and `length` payload words.  The format,
 * record by record, and its rules are in escape-protocol/README.md; this
 * header is its C form.
 *
 * Both halves are freestanding: fixed-width integer types only, no libc, no
 * allocation.  The encoder writes into caller buffers and returns what it
 * wrote or a negative status.  The decoder is incremental: feed it bytes as
 * they arrive (any split, even mid-word), it calls the handler for sample
 * batches, records, errors and resynchronisations, and counts everything in
 * its statistics.  It never trusts its input: any byte sequence gives
 * counted errors, never a crash or a read outside the caller's buffer.
 *
 * The decoder is one caller-owned struct (about 13 KiB, no pointers to
 * free): declare it static, on the heap or in a larger object.
 */
#ifndef COPROF_COPSTREAM_H
#define COPROF_COPSTREAM_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif

/* ---- Framing: fixed for every version ---------------------------------- */

#define COPSTREAM_ESCAPE         0xFFFFFFFFFFFFFFFFull
#define COPSTREAM_MARKER         0xE5C0u     /* header bits 48..63 */
#define COPSTREAM_MAX_PAYLOAD    1024u       /* payload words in one record */
#define COPSTREAM_WORD_BYTES     8u
#define COPSTREAM_MAX_RECORD_BYTES \
    (COPSTREAM_WORD_BYTES * (2u + COPSTREAM_MAX_PAYLOAD))

/* Limits every sample word respects, whatever the start record says. */
#define COPSTREAM_MAX_SLOTS      256u
#define COPSTREAM_ADDRESS_ALIGN  4u          /* PC fields are address >> 2 */

/* ---- Version 1.6 -------------------------------------------------------- */

#define COPSTREAM_VERSION_MAJOR  1u
#define COPSTREAM_VERSION_MINOR  6u
#define COPSTREAM_VERSION \
    (COPSTREAM_VERSION_MAJOR << 16 | COPSTREAM_VERSION_MINOR)

enum copstream_code {
    COPSTREAM_START    = 1,
    COPSTREAM_CONTEXT  = 2,
    COPSTREAM_OVERLAY  = 3,
    COPSTREAM_LOST     = 4,
    COPSTREAM_TIME     = 5,
    COPSTREAM_STOP     = 6,
    COPSTREAM_IMAGE    = 7,
    COPSTREAM_RELEASE  = 8,
    COPSTREAM_STALL    = 9,           /* 1.2 */
    COPSTREAM_END      = 10,          /* 1.3 */
    COPSTREAM_CALLSTACK = 11,         /* 1.4 */
    COPSTREAM_REASONS  = 12,          /* 1.6 */
    COPSTREAM_TRANSFER = 13,          /* 1.6 */
    COPSTREAM_CODE_END = 14           /* codes at or above are unknown in 1.6 */
};

/*
 * Payload words of each record in version 1.5 (IMAGE: plus the path).  1.1
 * appended OVERLAY's flags word, 1.2 START's sampling words (FIFO-full
 * policy, dither, seed, watermark), 1.5 START's event; a record in its
 * earlier form (without them) is still sound and reads them as 0.
 */
#define COPSTREAM_START_WORDS    14u
#define COPSTREAM_START_WORDS_1_1 9u
#define COPSTREAM_CONTEXT_WORDS  11u
#define COPSTREAM_OVERLAY_WORDS  5u
#define COPSTREAM_OVERLAY_WORDS_1_0 4u
#define COPSTREAM_LOST_WORDS     4u
#define COPSTREAM_TIME_WORDS     3u
#define COPSTREAM_STOP_WORDS     3u
#define COPSTREAM_IMAGE_WORDS    5u      /* fixed part, before the path */
#define COPSTREAM_RELEASE_WORDS  2u
#define COPSTREAM_STALL_WORDS    4u
#define COPSTREAM_END_WORDS      3u
#define COPSTREAM_CALLSTACK_WORDS 3u     /* fixed part, before the frames */
#define COPSTREAM_REASONS_WORDS  2u     /* fixed part, before the stalls */
#define COPSTREAM_TRANSFER_WORDS 4u
#define COPSTREAM_REASONS_PER_WORD 16u   /* 4-bit stalls in a word */
#define COPSTREAM_MAX_REASONS    16352u  /* (1024 - 2) * 16 */
#define COPSTREAM_MAX_FRAMES     64u     /* frames one CALLSTACK carries */
#define COPSTREAM_MAX_PATH \
    (COPSTREAM_WORD_BYTES * (COPSTREAM_MAX_PAYLOAD - COPSTREAM_IMAGE_WORDS))

/*
 * Why samples were lost (LOST records).  Readers accept any other value.
 *   FIFO_OVERFLOW  the trace FIFO was full: the hardware dropped the capture
 *   BUFFER_FULL    drained, but the driver's event buffer had no room
 *   NO_CONTEXT     drained for a slot whose context the driver does not know
 *   OUTSIDE_LS     captured, but the PC lay outside the local store, so it
 *                  has no address a sample word can carry
 */
enum copstream_lost_cause {
    COPSTREAM_LOST_FIFO_OVERFLOW = 1,
    COPSTREAM_LOST_BUFFER_FULL   = 2,
    COPSTREAM_LOST_NO_CONTEXT    = 3,
    COPSTREAM_LOST_OUTSIDE_LS    = 4,
    COPSTREAM_LOST_CAUSE_END     = 5
};

/* Image file identity, as in IMAGE and CONTEXT records. */
struct copstream_image_id {
    uint64_t device;       /* st_dev of the image file */
    uint64_t inode;        /* st_ino */
    uint64_t size;         /* st_size, bytes */
    uint64_t hash;         /* first 8 bytes of its SHA-256, little-endian */
};

struct copstream_start {
    uint32_t version;             /* major << 16 | minor */
    uint32_t slots;               /* 1 .. COPSTREAM_MAX_SLOTS */
    uint32_t lfsr_value;          /* programmed 24-bit value; 0: capture off */
    uint32_t lfsr_count;          /* cycles per capture N; 0 iff value is 0 */
    uint64_t clock_hz;            /* nominal coprocessor clock, >= 1 */
    uint32_t fifo_depth;          /* trace FIFO entries per slot, >= 1 */
    uint64_t ls_size;             /* local-store bytes, 4 .. 2^32, by 4s */
    uint64_t poll_interval_ns;    /* the driver's poll period */
    uint64_t start_time_ns;       /* CLOCK_MONOTONIC when the driver started */
    /* 1.2; 0 in an earlier START. */
    uint32_t fifo_full;           /* COPSTREAM_FIFO_DROP or _STALL */
    uint32_t dither;              /* 1: each interval N plus a jitter */
    uint64_t dither_seed;         /* the jitter generator's seed */
    uint32_t watermark;           /* FIFO fill that rings the doorbell */
    /* 1.5; 0 (SPU_CYCLES) in an earlier START. */
    uint32_t event;               /* COPSTREAM_EVENT_*: what N counts */
};

/* START's event (1.5; the trace unit's TRACE_EVENT_* values). */
#define COPSTREAM_EVENT_CYCLES       0u  /* SPU_CYCLES: modelled cycles */
#define COPSTREAM_EVENT_INSTRUCTIONS 1u  /* SPU_INSTRUCTIONS */

/* START's fifo_full (the trace unit's TRACE_FIFO_* values). */
#define COPSTREAM_FIFO_DROP      0u
#define COPSTREAM_FIFO_STALL     1u

struct copstream_context {
    uint32_t slot;
    uint32_t pid, tid;            /* of the host thread that runs the context */
    uint64_t context_id;
    uint64_t object_id;           /* address of the ELF header in the host */
    struct copstream_image_id image;
    uint64_t image_offset;        /* file offset of the ELF header */
    uint64_t cycle;               /* slot cycle at the switch */
};

/*
 * OVERLAY flags (1.1).  PLACED: the change sits exactly at this point of
 * the slot's sample sequence (the trace unit saw it between two captures):
 * every sample of the slot before the record was taken under the previous
 * guard, every one after it under this one.
 */
#define COPSTREAM_OVERLAY_PLACED 0x1u

struct copstream_overlay {
    uint32_t slot;
    uint32_t region;              /* index into _ovly_buf_table, from 0 */
    uint32_t guard;               /* 1-based overlay index loaded; 0: none */
    uint64_t cycle;               /* slot cycle when the guard was read */
    uint32_t flags;               /* COPSTREAM_OVERLAY_*; 0 in a 1.0 record */
};

struct copstream_lost {
    uint32_t slot;
    uint32_t cause;               /* enum copstream_lost_cause */
    uint64_t count;
    uint64_t cycle;               /* slot cycle when the loss was seen */
};

struct copstream_time {
    uint32_t slot;
    uint64_t cycle;               /* slot cycles ... */
    uint64_t time_ns;             /* ... at this CLOCK_MONOTONIC time */
};

struct copstream_stop {
    uint64_t time_ns;             /* CLOCK_MONOTONIC at the stop */
    uint64_t samples;             /* sample words the writer wrote in all */
    uint64_t lost;                /* sum of the counts of its LOST records */
};

struct copstream_image {
    struct copstream_image_id id;
    uint32_t path_length;         /* bytes, 1 .. COPSTREAM_MAX_PATH, no NUL */
    const uint8_t *path;          /* not NUL-terminated */
};

struct copstream_release {
    uint32_t slot;
    uint64_t cycle;               /* slot cycle when the context left */
};

/* 1.2: the slot's producer stalled on a full FIFO since the last STALL. */
struct copstream_stall {
    uint32_t slot;
    uint64_t count;               /* stalls, >= 1 */
    uint64_t ns;                  /* wall time stalled */
    uint64_t cycle;               /* slot cycle when they were seen */
};

/*
 * 1.3: the context ended (copsim destroyed it): it will never be bound
 * again, so a reader may write out and forget everything it holds for it.
 * Written after the RELEASE or CONTEXT that closed its last binding.
 */
struct copstream_end {
    uint32_t slot;                /* the slot it last left */
    uint64_t context_id;          /* as in its CONTEXT records */
    uint64_t cycle;               /* that slot's cycle when it left */
};

/*
 * 1.4: the call stack of the slot's sample written just before this
 * record (--call-graph).  frames points at n_frames little-endian words,
 * innermost first, each copstream_frame_word(): a return address and the
 * overlay that held it when the call was made.
 */
struct copstream_callstack {
    uint32_t slot;
    uint32_t depth;               /* frames on the stack; >= n_frames */
    uint32_t n_frames;            /* 0 .. COPSTREAM_MAX_FRAMES */
    const uint8_t *frames;
};

/*
 * 1.6: the stall reasons of the slot's next `count` sample words, in
 * order, 4 bits each (the trace unit's enum trace_stall_reason: 0 issue,
 * 1 dependency, 2 branch, 3 DMA wait, 4 mailbox wait, 5 memory; readers
 * show another value as a number).  stalls points at ceil(count / 16)
 * little-endian words: stall i is bits 4 * (i % 16) of word i / 16
 * (copstream_reason_at()), the unused bits of the last word zero.  A
 * sample of the slot beyond them, or after its CONTEXT, RELEASE or the
 * START, is ISSUE; a REASONS, CONTEXT, RELEASE or STOP that comes while
 * some of a slot's reasons are still unread is a writer's error
 * (escape-protocol/README.md, "REASONS").
 */
struct copstream_reasons {
    uint32_t slot;
    uint32_t count;               /* 1 .. COPSTREAM_MAX_REASONS */
    const uint8_t *stalls;
};

/*
 * 1.6: the DMA transfer the slot's DMA-wait samples from here on wait on:
 * with COPSTREAM_TRANSFER_KNOWN in flags its tag (0..31) and the
 * local-store byte address of the get/put that issued it; without, none
 * is known (tag and issuer 0).  None after the START and each CONTEXT.
 */
#define COPSTREAM_TRANSFER_KNOWN  0x1u
#define COPSTREAM_STALL_ISSUE     0u    /* the reasons a reader must know */
#define COPSTREAM_STALL_DMA_WAIT  3u
#define COPSTREAM_DMA_TAGS        32u

struct copstream_transfer {
    uint32_t slot;
    uint32_t flags;               /* COPSTREAM_TRANSFER_* */
    uint32_t tag;                 /* with KNOWN; else 0 */
    uint32_t issuer;              /* with KNOWN: LS address; else 0 */
};

/* Payload words the stalls of `count` reasons take. */
static inline uint32_t copstream_reasons_words(uint32_t count)
{
    return (count + COPSTREAM_REASONS_PER_WORD - 1) /
           COPSTREAM_REASONS_PER_WORD;
}

/* Stall i of a stalls array. */
static inline uint32_t copstream_reason_at(const uint8_t *stalls, uint32_t i)
{
    return (uint32_t)(stalls[i / 2] >> (4 * (i % 2))) & 0xFu;
}

/* Stores stall (0..15) as stall i of a stalls array (whose bytes start
 * zeroed). */
static inline void copstream_put_reason(uint8_t *stalls, uint32_t i,
                                        uint32_t stall)
{
    stalls[i / 2] = (uint8_t)((stalls[i / 2] & ~(0xFu << (4 * (i % 2)))) |
                              (stall & 0xFu) << (4 * (i % 2)));
}

/* A frame word: the return address's local-store byte address (a multiple
 * of 4) in bits 0..31, the overlay's 1-based index (0: resident or not
 * known) in bits 32..47, zero above. */
static inline uint64_t copstream_frame_word(uint32_t address,
                                            uint32_t overlay)
{
    return (uint64_t)(overlay & 0xFFFFu) << 32 | address;
}

/* Stores frame word w as frame i of a frames array (little-endian). */
static inline void copstream_put_frame(uint8_t *frames, uint32_t i,
                                       uint64_t w)
{
    for (uint32_t b = 0; b < COPSTREAM_WORD_BYTES; b++)
        frames[COPSTREAM_WORD_BYTES * i + b] = (uint8_t)(w >> (8 * b));
}

/* Frame i of a frames array. */
static inline uint64_t copstream_frame(const uint8_t *frames, uint32_t i)
{
    uint64_t w = 0;

    for (uint32_t b = COPSTREAM_WORD_BYTES; b-- > 0;)
        w = w << 8 | frames[COPSTREAM_WORD_BYTES * i + b];
    return w;
}

/*
 * One record.  The encoder reads code and the matching member of the
 * union, and payload_words only to write a record in an earlier minor
 * version's shorter form (a value from that form's length up to below the
 * current one; anything else, e.g. 0, writes the current form).  The
 * decoder fills everything; payload points at the record's payload_words
 * raw little-endian words (known fields first, then any words a later minor
 * version added), valid only during the callback.
 */
struct copstream_record {
    uint16_t code;
    uint16_t payload_words;
    uint8_t repeat;               /* a START identical to the first one */
    uint64_t offset;              /* stream byte offset of the ESCAPE word */
    const uint8_t *payload;
    union {
        struct copstream_start start;
        struct copstream_context context;
        struct copstream_overlay overlay;
        struct copstream_lost lost;
        struct copstream_time time;
        struct copstream_stop stop;
        struct copstream_image image;
        struct copstream_release release;
        struct copstream_stall stall;
        struct copstream_end end;
        struct copstream_callstack callstack;
        struct copstream_reasons reasons;
        struct copstream_transfer transfer;
    } u;
};

struct copstream_sample {
    uint32_t slot;
    uint32_t address;             /* local-store byte address */
};

/* ---- Encoder ------------------------------------------------------------ */

enum copstream_status {
    COPSTREAM_NO_ROOM = -1,       /* the output buffer is too small */
    COPSTREAM_INVALID = -2        /* a field is out of range, or unknown code */
};

/* The encoded size in bytes of rec, or COPSTREAM_INVALID. */
int copstream_record_bytes(const struct copstream_record *rec);

/*
 * Writes rec (its code and union member) into out[0 .. room).  Returns the
 * bytes written, or COPSTREAM_NO_ROOM / COPSTREAM_INVALID with nothing
 * written.  The fields are checked as the decoder checks them, except
 * slot < start.slots, which the encoder cannot know.
 */
int copstream_encode_record(uint8_t *out, size_t room,
                            const struct copstream_record *rec);

/*
 * Writes a record of any code from ready payload words (for tools and
 * tests: unknown codes, later minor versions).  Returns as above.
 */
int copstream_encode_raw(uint8_t *out, size_t room, uint16_t code,
                         const uint64_t *words, size_t count);

/* The sample word, or COPSTREAM_ESCAPE (never a sample) when out of range. */
uint64_t copstream_sample_word(uint32_t slot, uint32_t address);

/*
 * Writes samples of one slot from trace-unit PC fields (address = field << 2)
 * as long as they fit in room.  Returns the number of samples written; the
 * caller counts the rest as lost (COPSTREAM_LOST_BUFFER_FULL).  Returns 0
 * when slot >= COPSTREAM_MAX_SLOTS.
 */
size_t copstream_encode_pc_fields(uint8_t *out, size_t room, uint32_t slot,
                                  const uint16_t *fields, size_t count);

/* The 16-bit record check over code, length and payload bytes. */
uint16_t copstream_check(uint16_t code, uint16_t length,
                         const uint8_t *payload);

/* ---- Decoder ------------------------------------------------------------ */

enum copstream_error_kind {
    COPSTREAM_ERR_BAD_SAMPLE = 1,  /* neither ESCAPE nor a valid sample */
    COPSTREAM_ERR_BAD_HEADER,      /* ESCAPE not followed by a valid header */
    COPSTREAM_ERR_BAD_CHECK,       /* record check mismatch */
    COPSTREAM_ERR_SHORT_RECORD,    /* known record with too few words */
    COPSTREAM_ERR_BAD_FIELD,       /* known record with a field out of range */
    COPSTREAM_ERR_BAD_VERSION,     /* START of a major version not known */
    COPSTREAM_ERR_START_CONFLICT,  /* a second START that differs */
    COPSTREAM_ERR_NO_START,        /* data before the START (reported once) */
    COPSTREAM_ERR_ORPHAN,          /* sample or OVERLAY of a slot, no context */
    COPSTREAM_ERR_AFTER_STOP,      /* data after the STOP (reported once) */
    COPSTREAM_ERR_COUNT_MISMATCH,  /* STOP totals differ from what was read */
    COPSTREAM_ERR_TRUNCATED,       /* the stream ends inside a word or record */
    COPSTREAM_ERR_NO_STOP,         /* the stream ends without a STOP */
    COPSTREAM_ERR_KIND_END
};

struct copstream_error {
    enum copstream_error_kind kind;
    uint64_t offset;              /* stream byte offset where it was found */
    uint16_t code;                /* record code for record errors, else 0 */
};

/*
 * What the decoder calls; any may be NULL.  samples: count consecutive
 * sample words, the first at stream offset `offset`.  resync: the decoder
 * lost synchronisation after an error and found a record again at offset,
 * having skipped `skipped` bytes.
 */
struct copstream_handler {
    void (*samples)(void *user, uint64_t offset,
                    const struct copstream_sample *samples, size_t count);
    void (*record)(void *user, const struct copstream_record *rec);
    void (*error)(void *user, const struct copstream_error *err);
    void (*resync)(void *user, uint64_t offset, uint64_t skipped);
    void *user;
};

struct copstream_stats {
    uint64_t bytes;               /* fed in all */
    uint64_t samples;             /* valid sample words (orphans included) */
    uint64_t records[COPSTREAM_CODE_END];   /* accepted, by code */
    uint64_t unknown_records;     /* well-framed, code not known: skipped */
    uint64_t repeated_starts;     /* identical START records after the first */
    uint64_t lost;                /* sum of LOST counts */
    uint64_t lost_by_cause[COPSTREAM_LOST_CAUSE_END];  /* [0]: other causes */
    uint64_t errors;              /* all errors */
    uint64_t errors_by_kind[COPSTREAM_ERR_KIND_END];
    uint64_t record_bytes;        /* bytes of well-framed records */
    uint64_t skipped_bytes;       /* bytes of no sample nor framed record */
    uint64_t resyncs;
};

#define COPSTREAM_BATCH 512       /* samples per samples() call at most */

enum copstream_mode {
    COPSTREAM_MODE_SYNC,          /* at a word boundary of a sound stream */
    COPSTREAM_MODE_HUNT           /* looking for ESCAPE + valid header */
};

/* Only the decoder's functions touch these fields. */
struct copstream_decoder {
    struct copstream_handler handler;
    struct copstream_stats stats;
    enum copstream_mode mode;
    uint64_t offset;              /* stream offset of the next byte to use */
    uint64_t hunt_start;          /* where the current hunt began */
    size_t need;                  /* bytes the next step needs at least */
    uint32_t slot_limit;          /* slots of START, or COPSTREAM_MAX_SLOTS */
    uint64_t ls_limit;            /* ls_size of START, or 2^32 */
    uint8_t started, stopped;
    uint8_t no_start_reported, after_stop_reported, finished;
    uint8_t bound[COPSTREAM_MAX_SLOTS];      /* slot has a context */
    struct copstream_start start;            /* the first START */
    size_t batch_count;
    uint64_t batch_offset;
    struct copstream_sample batch[COPSTREAM_BATCH];
    size_t carry_length;
    uint8_t carry[COPSTREAM_MAX_RECORD_BYTES];
};

void copstream_decoder_init(struct copstream_decoder *dec,
                            const struct copstream_handler *handler);

/* Decodes bytes[0 .. length); keeps an incomplete tail for the next call. */
void copstream_decoder_feed(struct copstream_decoder *dec,
                            const uint8_t *bytes, size_t length);

/* The end of the stream: reports a truncated tail and a missing STOP. */
void copstream_decoder_finish(struct copstream_decoder *dec);

/* Short names, as copstream dump prints them ("bad-check", "fifo-overflow"). */
const char *copstream_code_name(uint16_t code);       /* NULL when unknown */
const char *copstream_error_name(enum copstream_error_kind kind);
const char *copstream_cause_name(uint32_t cause);     /* NULL when unknown */

#endif /* COPROF_COPSTREAM_H */
