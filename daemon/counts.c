/*
 * counts.c — the address tally and the count table (see counts.h).
 *
 * Both are open-addressed with linear probing and kept at most half full,
 * so a probe sequence is short; both grow by doubling.  An address tally
 * never shrinks (a group's working set is its hot addresses, which stay);
 * the count table is rebuilt smaller when the entries of ended contexts
 * leave it (count_table_retain).  Memory
 * failures abort through GLib's allocator, as everywhere in coprofd.
 */
#include "daemon/counts.h"

#include <glib.h>
#include <string.h>

#define TALLY_INITIAL_BITS  10
#define TABLE_INITIAL       1024

/* ---- address tally ------------------------------------------------------ */

static void tally_allocate(struct addr_tally *tally, unsigned bits)
{
    uint32_t capacity = 1u << bits;

    tally->keys = g_new0(uint64_t, capacity);
    tally->counts = g_new(uint32_t, capacity);
    tally->used = g_new(uint32_t, capacity / 2 + 1);
    tally->mask = capacity - 1;
    tally->shift = 32 - bits;
    tally->used_count = 0;
}

void addr_tally_init(struct addr_tally *tally)
{
    tally_allocate(tally, TALLY_INITIAL_BITS);
}

void addr_tally_free(struct addr_tally *tally)
{
    g_free(tally->keys);
    g_free(tally->counts);
    g_free(tally->used);
    memset(tally, 0, sizeof *tally);
}

void addr_tally_clear(struct addr_tally *tally)
{
    for (uint32_t i = 0; i < tally->used_count; i++)
        tally->keys[tally->used[i]] = 0;
    tally->used_count = 0;
}

void addr_tally_grow(struct addr_tally *tally)
{
    struct addr_tally old = *tally;
    unsigned bits = 32 - old.shift + 1;

    tally_allocate(tally, bits);
    for (uint32_t i = 0; i < old.used_count; i++) {
        uint32_t cell = old.used[i];
        addr_tally_add_n(tally, (uint32_t)old.keys[cell] & ~1u,
                         (uint32_t)(old.keys[cell] >> 32), old.counts[cell]);
    }
    addr_tally_free(&old);
}

/* ---- count table -------------------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static size_t key_hash(const struct count_key *key)
{
    uint64_t h = (uint64_t)key->context << 32 | key->image;

    h = mix(h, (uint64_t)key->kind << 32 | key->detail);
    h = mix(h, key->cause);
    h = mix(h, key->position);
    h = mix(h, (uint64_t)key->guard_from);
    h = mix(h, (uint64_t)key->guard_to);
    return (size_t)(h ^ (h >> 32));
}

static bool key_equal(const struct count_key *a, const struct count_key *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

static void table_allocate(struct count_table *table, size_t capacity)
{
    table->entries = g_new0(struct count_entry, capacity);
    table->dirty = g_new(uint32_t, capacity / 2 + 1);
    table->mask = capacity - 1;
    table->occupied = 0;
    table->dirty_count = 0;
}

void count_table_init(struct count_table *table)
{
    table_allocate(table, TABLE_INITIAL);
}

void count_table_free(struct count_table *table)
{
    g_free(table->entries);
    g_free(table->dirty);
    memset(table, 0, sizeof *table);
}

/* The cell holding key, or the empty cell where it belongs. */
static size_t table_probe(const struct count_table *table,
                          const struct count_key *key)
{
    size_t cell = key_hash(key) & table->mask;

    while (table->entries[cell].occupied &&
           !key_equal(&table->entries[cell].key, key))
        cell = (cell + 1) & table->mask;
    return cell;
}

static void table_grow(struct count_table *table)
{
    struct count_table old = *table;

    table_allocate(table, (old.mask + 1) * 2);
    for (size_t i = 0; i <= old.mask; i++) {
        const struct count_entry *entry = &old.entries[i];
        if (!entry->occupied)
            continue;
        size_t cell = table_probe(table, &entry->key);
        table->entries[cell] = *entry;
        table->occupied++;
        if (entry->unflushed > 0)
            table->dirty[table->dirty_count++] = (uint32_t)cell;
    }
    count_table_free(&old);
}

void count_table_add(struct count_table *table, const struct count_key *key,
                     uint32_t overlay, int64_t issuer_offset, uint64_t n)
{
    size_t cell = table_probe(table, key);
    struct count_entry *entry = &table->entries[cell];

    if (!entry->occupied) {
        entry->key = *key;
        entry->overlay = overlay;
        entry->issuer_offset = issuer_offset;
        entry->occupied = true;
        table->occupied++;
    }
    if (n > 0 && entry->unflushed == 0)
        table->dirty[table->dirty_count++] = (uint32_t)cell;
    entry->total += n;
    entry->unflushed += n;
    if (table->occupied * 2 > table->mask)
        table_grow(table);
}

const struct count_entry *count_table_find(const struct count_table *table,
                                           const struct count_key *key)
{
    size_t cell = table_probe(table, key);

    return table->entries[cell].occupied ? &table->entries[cell] : NULL;
}

void count_table_mark_flushed(struct count_table *table)
{
    for (size_t i = 0; i < table->dirty_count; i++)
        table->entries[table->dirty[i]].unflushed = 0;
    table->dirty_count = 0;
}

void count_table_retain(struct count_table *table,
                        bool (*keep)(const struct count_entry *entry,
                                     void *data),
                        void *data)
{
    struct count_table old = *table;
    size_t kept = 0, capacity = TABLE_INITIAL;

    g_assert(old.dirty_count == 0);
    for (size_t i = 0; i <= old.mask; i++)
        if (old.entries[i].occupied && keep(&old.entries[i], data))
            kept++;
        else
            old.entries[i].occupied = false;
    while (capacity < kept * 4)
        capacity *= 2;
    table_allocate(table, capacity);
    for (size_t i = 0; i <= old.mask; i++) {
        if (!old.entries[i].occupied)
            continue;
        table->entries[table_probe(table, &old.entries[i].key)] =
            old.entries[i];
        table->occupied++;
    }
    count_table_free(&old);
}
