/*
 * counts.h — the two hash tables on coprofd's sample path.
 *
 * An address tally counts the samples of one poll group of one slot by
 * local-store address and cause (the session's index of the stall reason
 * they were taken under, stream 1.6; 0 is ISSUE).  It is the only thing
 * touched per sample, so it is small, open-addressed and inline: a
 * multiply, a probe or two, an add.
 * When the group closes, the daemon judges each distinct address once and
 * moves its count on (a context's settled samples are tallied the same
 * way until they are resolved).
 *
 * The count table is the session's aggregate: one entry per (context,
 * image, kind, position, ...) key — an exact sample at a file offset under
 * one cause, an
 * unmapped LS address with its reason, an ambiguous LS address with its
 * guard window, an orphan sample of a slot without context.  Each entry
 * keeps its total and the part not yet written to the session database;
 * the entries with unwritten counts are listed so that a flush visits only
 * them.  Nothing here allocates per sample.
 */
#ifndef COPROF_DAEMON_COUNTS_H
#define COPROF_DAEMON_COUNTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- address tally ------------------------------------------------------ */

#define ADDR_TALLY_HASH 0x9E3779B1u
#define ADDR_TALLY_CAUSE 0x85EBCA77u

struct addr_tally {
    uint64_t *keys;             /* cause << 32 | address | 1 (addresses are
                                   multiples of 4); 0 marks an empty cell */
    uint32_t *counts;
    uint32_t *used;             /* cells in use, in order of first use */
    uint32_t mask;              /* capacity - 1; capacity a power of two */
    uint32_t shift;             /* 32 - log2(capacity) */
    uint32_t used_count;
};

void addr_tally_init(struct addr_tally *tally);
void addr_tally_free(struct addr_tally *tally);
/* Empties the tally, keeping its memory. */
void addr_tally_clear(struct addr_tally *tally);
/* Doubles the capacity; called by addr_tally_add when half full. */
void addr_tally_grow(struct addr_tally *tally);

static inline void addr_tally_add_n(struct addr_tally *tally,
                                    uint32_t address, uint32_t cause,
                                    uint32_t n)
{
    uint64_t key = (uint64_t)cause << 32 | address | 1u;
    uint32_t cell = ((address ^ cause * ADDR_TALLY_CAUSE) * ADDR_TALLY_HASH)
                    >> tally->shift;

    for (;;) {
        uint64_t k = tally->keys[cell];
        if (k == key) {
            tally->counts[cell] += n;
            return;
        }
        if (k == 0)
            break;
        cell = (cell + 1) & tally->mask;
    }
    tally->keys[cell] = key;
    tally->counts[cell] = n;
    tally->used[tally->used_count++] = cell;
    if (tally->used_count * 2 > tally->mask)
        addr_tally_grow(tally);
}

static inline void addr_tally_add(struct addr_tally *tally, uint32_t address,
                                  uint32_t cause)
{
    addr_tally_add_n(tally, address, cause, 1);
}

/* The i-th distinct (address, cause) (0 <= i < used_count), its count. */
static inline uint32_t addr_tally_address(const struct addr_tally *tally,
                                          uint32_t i)
{
    return (uint32_t)tally->keys[tally->used[i]] & ~1u;
}

static inline uint32_t addr_tally_cause(const struct addr_tally *tally,
                                        uint32_t i)
{
    return (uint32_t)(tally->keys[tally->used[i]] >> 32);
}

static inline uint32_t addr_tally_count(const struct addr_tally *tally,
                                        uint32_t i)
{
    return tally->counts[tally->used[i]];
}

/* ---- count table -------------------------------------------------------- */

enum count_kind {
    COUNT_EXACT = 1,        /* position: file offset in the image */
    COUNT_UNMAPPED,         /* position: LS address; detail: reason */
    COUNT_AMBIGUOUS,        /* position: LS address; detail: region */
    COUNT_ORPHAN,           /* position: LS address; detail: slot */
};

#define COUNT_GUARD_NONE    (-1)    /* guard_from/guard_to not known */

/* An unmapped reason beyond enum ovl_reason: the context's image could not
 * be used (unreadable, changed, never named); the raw LS address is kept. */
#define COUNT_REASON_NO_IMAGE 64u

/*
 * A cause: what a sample's slot was doing when it was taken (stream 1.6's
 * REASON; docs/session-format.md, "Stall reasons").  The session numbers
 * the distinct causes; index 0 is ISSUE without a transfer.
 */
struct count_cause {
    uint32_t stall;         /* enum trace_stall_reason, or another number */
    uint32_t transfer;      /* 1: a DMA wait on the transfer below */
    uint32_t tag;           /* 0..31 */
    uint32_t issuer;        /* LS address of the get/put that issued it */
};

/* Every field is part of the key; unused ones are 0 (no padding bytes). */
struct count_key {
    uint32_t context;       /* contexts.id, 0 for orphans */
    uint32_t image;         /* images.id, 0 for orphans */
    uint32_t kind;          /* enum count_kind */
    uint32_t detail;        /* see enum count_kind */
    uint32_t cause;         /* exact: the session's cause index; else 0 */
    uint32_t zero;          /* always 0 */
    uint64_t position;
    int64_t guard_from;     /* unmapped: the guard used; ambiguous: before */
    int64_t guard_to;       /* ambiguous: after, or COUNT_GUARD_NONE */
};

struct count_entry {
    struct count_key key;
    uint32_t overlay;       /* exact: overlay index, 0 for resident code */
    int64_t issuer_offset;  /* exact, a transfer's cause: the issuer's file
                               offset, or -1 when it did not resolve */
    bool occupied;
    uint64_t total;         /* samples in all */
    uint64_t unflushed;     /* of which not yet in the database */
};

struct count_table {
    struct count_entry *entries;
    size_t mask;            /* capacity - 1 */
    size_t occupied;
    uint32_t *dirty;        /* entries with unflushed > 0 */
    size_t dirty_count;
};

void count_table_init(struct count_table *table);
void count_table_free(struct count_table *table);
/*
 * Adds n samples under key (overlay and issuer_offset only matter for a new
 * exact entry).
 */
void count_table_add(struct count_table *table, const struct count_key *key,
                     uint32_t overlay, int64_t issuer_offset, uint64_t n);
/* The entry of key, or NULL. */
const struct count_entry *count_table_find(const struct count_table *table,
                                           const struct count_key *key);
/* The entries with unflushed counts: dirty[i] indexes entries. */
static inline const struct count_entry *
count_table_dirty_entry(const struct count_table *table, size_t i)
{
    return &table->entries[table->dirty[i]];
}
/* After a flush: every count is in the database. */
void count_table_mark_flushed(struct count_table *table);
/*
 * Keeps only the entries keep() accepts, in a table sized for them (so it
 * also shrinks).  Only after count_table_mark_flushed(): entries dropped
 * here must be in the database already.
 */
void count_table_retain(struct count_table *table,
                        bool (*keep)(const struct count_entry *entry,
                                     void *data),
                        void *data);

#endif /* COPROF_DAEMON_COUNTS_H */
