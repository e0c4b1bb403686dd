/*
 * layout.h — the layout of a coplog file, shared by its writers and readers.
 *
 * Every writer and reader maps the whole file MAP_SHARED, and all the state
 * of the log lives in it: a reader in another process sees records while they
 * are written and after their writers died.  Fields are native-endian; a log
 * is read on the machine that wrote it.
 *
 *   0               header (one page): identity, sizes, clock, calibration
 *                   pairs, and the control word (level, on/off, echo) of
 *                   every subsystem
 *   subsys_offset   subsystem descriptors, 64 bytes each
 *   rings_offset    ring descriptors, 128 bytes each: a subsystem has one ring
 *                   per CPU (or one shared ring), each with its own counters
 *   format_slots_offset  the format table: format_slots 64-bit slots ...
 *   format_heap_offset   ... and the heap holding the NUL-terminated formats
 *   data_offset of each subsystem: its rings, ring_stride bytes apart; each
 *                   ring is capacity records of record_bytes, then the
 *                   string area of strings_bytes
 *
 * A record is 8 (or 16) 64-bit words:
 *
 *   0  commit    ((position + 1) << 1) | busy.  Written first (busy) by the
 *                writer that claims the slot, last (not busy) when the record
 *                is complete.  A slot only ever moves to a higher position.
 *   1  clock     raw timestamp: the global order of records
 *   2  origin    caller address (low 48 bits) | format id << 48
 *   3  identity  pid (22 bits) | tid (22) | cpu (12) | level (3) | nargs (4)
 *   4… args      the arguments, 64 bits each: integers sign- or zero-extended,
 *                doubles as their bits, strings as references into the
 *                ring's string area (see below)
 *
 * A string argument is copied into the string area of the ring its record
 * goes to; the argument holds (offset << 16) | length, where offset counts
 * every byte ever allocated in that area (so it also tells whether the text
 * has been overwritten since).  Texts are NUL-terminated and 8-byte aligned.
 */
#ifndef COPROF_EVENTLOG_LAYOUT_H
#define COPROF_EVENTLOG_LAYOUT_H

#include "eventlog/coplog.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LAYOUT_MAGIC            "COPLOG\x01\n"
#define LAYOUT_VERSION          1
#define LAYOUT_PAGE             4096u
#define LAYOUT_CALIBRATIONS     64u
#define LAYOUT_PINNED_PAIRS     2u      /* the pairs taken at creation stay */
#define LAYOUT_MAX_RINGS        64u     /* CPU rings per subsystem */
#define LAYOUT_MAX_CAPACITY     (1u << 24)
#define LAYOUT_MAX_FORMATS      32768u  /* format ids are 16 bits, 0 = none */
#define LAYOUT_MAX_FORMAT_BYTES (1u << 30)
#define LAYOUT_MAX_STRING_BYTES (1u << 30)
#define LAYOUT_STRING_MAX       1023u   /* longest string argument kept */

/* One (raw clock, CLOCK_MONOTONIC ns) pair, guarded like a seqlock. */
struct layout_calibration {
    _Atomic uint64_t seq;               /* odd while being written */
    _Atomic uint64_t clock;
    _Atomic uint64_t ns;
};

struct layout_header {
    /* Fixed at creation. */
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t file_bytes;
    uint32_t subsys_count;
    uint32_t clock_kind;                /* enum coplog_clock, never AUTO */
    uint64_t clock_hz;                  /* raw ticks per second, measured */
    uint64_t subsys_offset;
    uint64_t rings_offset;
    uint32_t ring_count;                /* ring descriptors in all */
    uint32_t cpu_rings;                 /* rings of a per-CPU subsystem */
    uint64_t format_slots_offset;
    uint32_t format_slots;              /* a power of two */
    uint32_t reserved0;
    uint64_t format_heap_offset;
    uint64_t format_heap_bytes;
    uint64_t created_realtime_ns;
    uint32_t creator_pid;
    uint8_t reserved1[20];

    /* 128: the calibration schedule, written about once a second. */
    _Atomic uint64_t next_calibration;  /* raw clock after which to add a pair */
    uint64_t calibration_interval;      /* raw ticks between pairs */
    _Atomic uint64_t calibration_count; /* pairs ever added */
    uint8_t reserved2[40];

    /* 192: the format heap's allocator. */
    _Atomic uint64_t format_heap_used;
    _Atomic uint64_t format_refused;    /* formats that found no room */
    uint8_t reserved3[48];

    /* 256: one control word per subsystem, read by every record. */
    _Atomic uint32_t control[COPLOG_MAX_SUBSYS];

    /* 512: calibration pairs; the first LAYOUT_PINNED_PAIRS never change. */
    struct layout_calibration calibration[LAYOUT_CALIBRATIONS];
};

_Static_assert(offsetof(struct layout_header, next_calibration) == 128,
               "calibration schedule on its own cache line");
_Static_assert(offsetof(struct layout_header, format_heap_used) == 192,
               "format allocator on its own cache line");
_Static_assert(offsetof(struct layout_header, control) == 256,
               "control words on their own cache lines");
_Static_assert(offsetof(struct layout_header, calibration) == 512,
               "calibration pairs after the control words");
_Static_assert(sizeof(struct layout_header) <= LAYOUT_PAGE,
               "the header fits in one page");

struct layout_subsys {
    char name[16];                      /* NUL-terminated */
    uint32_t capacity;                  /* records per ring, a power of two */
    uint32_t record_bytes;              /* 64 or 128 */
    uint32_t policy;                    /* enum coplog_policy */
    uint32_t rings;                     /* 1 or the header's cpu_rings */
    uint32_t first_ring;                /* its first ring descriptor */
    uint32_t strings_bytes;             /* string area per ring, 8-aligned */
    uint64_t data_offset;               /* the first ring's records */
    uint64_t ring_stride;               /* from one ring's records to the next */
    uint8_t reserved[8];
};

_Static_assert(sizeof(struct layout_subsys) == 64, "descriptor size");

struct layout_ring {
    _Atomic uint64_t head;              /* positions ever reserved */
    uint8_t reserved0[56];
    _Atomic uint64_t strings_head;      /* string bytes ever allocated */
    _Atomic uint64_t skipped;           /* positions given up, see writer.c */
    uint8_t reserved1[48];
};

_Static_assert(sizeof(struct layout_ring) == 128, "ring descriptor size");

/* The words of a record. */
enum {
    RECORD_COMMIT,
    RECORD_CLOCK,
    RECORD_ORIGIN,
    RECORD_IDENTITY,
    RECORD_ARGS
};

#define RECORD_BUSY          1u
#define RECORD_ARGS_MAX(b)   ((b) / 8 - RECORD_ARGS)

static inline uint64_t record_commit_word(uint64_t position, int busy)
{
    return ((position + 1) << 1) | (busy ? RECORD_BUSY : 0);
}

/* The position a commit word names, and 0 for "none": position + 1. */
static inline uint64_t record_commit_stamp(uint64_t commit)
{
    return commit >> 1;
}

#define ORIGIN_CALLER_BITS   48
#define ORIGIN_CALLER_MASK   ((1ull << ORIGIN_CALLER_BITS) - 1)

static inline uint64_t record_origin(uint64_t caller, unsigned format_id)
{
    return (caller & ORIGIN_CALLER_MASK) |
           ((uint64_t)format_id << ORIGIN_CALLER_BITS);
}

static inline uint64_t origin_caller(uint64_t origin)
{
    uint64_t caller = origin & ORIGIN_CALLER_MASK;

    /* Canonical x86-64 addresses repeat bit 47 above it. */
    if (caller & (1ull << (ORIGIN_CALLER_BITS - 1)))
        caller |= ~ORIGIN_CALLER_MASK;
    return caller;
}

static inline unsigned origin_format_id(uint64_t origin)
{
    return (unsigned)(origin >> ORIGIN_CALLER_BITS);
}

#define IDENTITY_PID_BITS    22
#define IDENTITY_TID_BITS    22
#define IDENTITY_CPU_BITS    12
#define IDENTITY_LEVEL_BITS  3
#define IDENTITY_NARGS_BITS  4
#define IDENTITY_TID_SHIFT   IDENTITY_PID_BITS
#define IDENTITY_CPU_SHIFT   (IDENTITY_TID_SHIFT + IDENTITY_TID_BITS)
#define IDENTITY_LEVEL_SHIFT (IDENTITY_CPU_SHIFT + IDENTITY_CPU_BITS)
#define IDENTITY_NARGS_SHIFT (IDENTITY_LEVEL_SHIFT + IDENTITY_LEVEL_BITS)

static inline uint64_t field_bits(uint64_t value, unsigned bits)
{
    return value & ((1ull << bits) - 1);
}

/* pid and tid: Linux caps both at 2^22 (PID_MAX_LIMIT). */
static inline uint64_t identity_thread(uint32_t pid, uint32_t tid)
{
    return field_bits(pid, IDENTITY_PID_BITS) |
           field_bits(tid, IDENTITY_TID_BITS) << IDENTITY_TID_SHIFT;
}

static inline uint64_t identity_word(uint64_t thread, unsigned cpu,
                                     unsigned level, unsigned nargs)
{
    return thread |
           field_bits(cpu, IDENTITY_CPU_BITS) << IDENTITY_CPU_SHIFT |
           field_bits(level, IDENTITY_LEVEL_BITS) << IDENTITY_LEVEL_SHIFT |
           field_bits(nargs, IDENTITY_NARGS_BITS) << IDENTITY_NARGS_SHIFT;
}

static inline uint32_t identity_pid(uint64_t identity)
{
    return (uint32_t)field_bits(identity, IDENTITY_PID_BITS);
}

static inline uint32_t identity_tid(uint64_t identity)
{
    return (uint32_t)field_bits(identity >> IDENTITY_TID_SHIFT,
                                IDENTITY_TID_BITS);
}

static inline uint32_t identity_cpu(uint64_t identity)
{
    return (uint32_t)field_bits(identity >> IDENTITY_CPU_SHIFT,
                                IDENTITY_CPU_BITS);
}

static inline unsigned identity_level(uint64_t identity)
{
    return (unsigned)field_bits(identity >> IDENTITY_LEVEL_SHIFT,
                                IDENTITY_LEVEL_BITS);
}

static inline unsigned identity_nargs(uint64_t identity)
{
    return (unsigned)field_bits(identity >> IDENTITY_NARGS_SHIFT,
                                IDENTITY_NARGS_BITS);
}

/* String arguments.  The two values at the top are markers, not texts. */
#define STRING_NULL          UINT64_MAX         /* the writer passed NULL */
#define STRING_LOST          (UINT64_MAX - 1)   /* no room for the text */
#define STRING_OFFSET_LIMIT  (1ull << 47)

static inline uint64_t string_ref(uint64_t offset, unsigned length)
{
    return offset << 16 | length;
}

static inline uint64_t string_ref_offset(uint64_t ref)
{
    return ref >> 16;
}

static inline unsigned string_ref_length(uint64_t ref)
{
    return (unsigned)(ref & 0xFFFF);
}

/* Bytes a text of length bytes takes in a string area, NUL included. */
static inline uint64_t string_chunk_bytes(uint64_t length)
{
    return (length + 1 + 7) & ~7ull;
}

/* Format table slots: hash << 32 | heap offset; 0 is empty. */
static inline uint64_t format_slot_word(uint32_t hash, uint32_t offset)
{
    return (uint64_t)hash << 32 | offset;
}

#endif /* COPROF_EVENTLOG_LAYOUT_H */
