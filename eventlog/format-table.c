/*
 * format-table.c — the deduplicated table of format strings in a log file.
 *
 * Records refer to their printf format by a 16-bit id, so that a reader in
 * another process, or one running after the writers died, can format them.
 * The table is an open-addressing hash table of 64-bit slots in the file,
 * each holding (hash << 32 | offset) of a NUL-terminated format in the
 * format heap beside it; the id is the slot index + 1.  Equal formats get
 * one id, whichever process or call site registers them.
 *
 * Inserting takes no lock.  A writer copies its format to a fresh place in
 * the heap (an atomic add reserves it), then installs the slot word with a
 * compare-and-swap (release, so whoever sees the slot sees the text).  If it
 * loses the race for an empty slot it compares with the winner, which may be
 * the same format; the heap bytes of a lost race are simply left unused.
 * Slots and heap bytes are never freed or reused.
 *
 * COPLOG() call sites register once per log (coplog_site caches the id);
 * this runs only then.
 */
#include "eventlog/format-table.h"

#include <string.h>

/* FNV-1a, 32 bits. */
static uint32_t format_hash(const char *text)
{
    uint32_t hash = 2166136261u;

    for (; *text != '\0'; text++)
        hash = (hash ^ (uint8_t)*text) * 16777619u;
    return hash;
}

static _Atomic uint64_t *table_slots(const struct log_file *file)
{
    return (_Atomic uint64_t *)(file->base + file->header->format_slots_offset);
}

static char *table_heap(const struct log_file *file)
{
    return (char *)file->base + file->header->format_heap_offset;
}

/* Copies text (length bytes and its NUL) into the heap; 0 when full. */
static uint32_t heap_store(const struct log_file *file, const char *text,
                           size_t length)
{
    struct layout_header *header = file->header;
    uint64_t offset = atomic_fetch_add_explicit(&header->format_heap_used,
                                                length + 1,
                                                memory_order_relaxed);

    if (offset > header->format_heap_bytes ||
        length + 1 > header->format_heap_bytes - offset)
        return 0;
    memcpy(table_heap(file) + offset, text, length + 1);
    return (uint32_t)offset;
}

static bool heap_holds(const struct log_file *file, uint32_t offset,
                       const char *text, size_t length)
{
    uint64_t heap_bytes = file->header->format_heap_bytes;

    return offset < heap_bytes && length + 1 <= heap_bytes - offset &&
           memcmp(table_heap(file) + offset, text, length + 1) == 0;
}

unsigned format_table_insert(const struct log_file *file, const char *format)
{
    struct layout_header *header = file->header;
    _Atomic uint64_t *slots = table_slots(file);
    uint32_t mask = header->format_slots - 1;
    uint32_t hash = format_hash(format);
    size_t length = strlen(format);
    uint32_t offset = 0;

    for (uint32_t probe = 0; probe <= mask; probe++) {
        uint32_t index = (hash + probe) & mask;
        uint64_t word = atomic_load_explicit(&slots[index],
                                             memory_order_acquire);

        if (word == 0) {
            if (offset == 0 && (offset = heap_store(file, format, length)) == 0)
                break;
            if (atomic_compare_exchange_strong_explicit(
                    &slots[index], &word, format_slot_word(hash, offset),
                    memory_order_release, memory_order_acquire))
                return index + 1;
        }
        if ((uint32_t)(word >> 32) == hash &&
            heap_holds(file, (uint32_t)word, format, length))
            return index + 1;
    }
    atomic_fetch_add_explicit(&header->format_refused, 1, memory_order_relaxed);
    return 0;
}

const char *format_table_lookup(const struct log_file *file, unsigned id)
{
    const struct layout_header *header = file->header;
    uint64_t heap_bytes = header->format_heap_bytes;
    uint64_t word;
    uint32_t offset;

    if (id == 0 || id > header->format_slots)
        return NULL;
    word = atomic_load_explicit(&table_slots(file)[id - 1],
                                memory_order_acquire);
    offset = (uint32_t)word;
    if (word == 0 || offset >= heap_bytes ||
        memchr(table_heap(file) + offset, '\0', heap_bytes - offset) == NULL)
        return NULL;
    return table_heap(file) + offset;
}

unsigned format_table_count(const struct log_file *file)
{
    _Atomic uint64_t *slots = table_slots(file);
    unsigned count = 0;

    for (uint32_t i = 0; i < file->header->format_slots; i++)
        if (atomic_load_explicit(&slots[i], memory_order_relaxed) != 0)
            count++;
    return count;
}
