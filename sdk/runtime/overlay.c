/*
 * overlay.c — the overlay manager, SPU style.
 *
 * The link (cop.ld, cop-overlays) leaves one _ovly_table entry {vma, size,
 * file_off, buf} per overlay and one guard word per region in
 * _ovly_buf_table, 0 at start.  Loading overlay i copies its bytes from the
 * ELF image in main memory (the image window) at file_off to vma, runs
 * fence.i so the new code is fetched, and only then writes i into the
 * region's guard word, which the profiler reads to know what is loaded.
 *
 * Calls arrive from the stubs through __cop_overlay_call (overlay-call.S).
 * __cop_overlay_enter loads the callee's overlay.  If the caller itself runs
 * in an overlay region, the callee (or something it calls) may replace the
 * caller's code, so the callee returns through __cop_overlay_return and a
 * frame {return address, caller's overlay} on a small stack of its own
 * (not the C stack, so stack-passed arguments stay where the callee expects
 * them); __cop_overlay_leave pops it and reloads the caller's overlay if
 * needed.  Calls from resident code return directly.
 *
 * Anything inconsistent (an index or region out of range, a stub whose
 * target is not in its overlay, an overlay outside the image, too deep a
 * nesting) is a fatal error rather than a jump into the wrong code.
 */
#include "sdk/cop.h"

#include <stddef.h>
#include <string.h>

#define RETURN_STACK_DEPTH 256

struct return_frame {
    uintptr_t return_address;
    unsigned overlay;           /* the caller's overlay index */
};

extern const struct cop_ovly_entry _ovly_table[], _ovly_table_end[];
extern volatile uint32_t _ovly_buf_table[], _ovly_buf_table_end[];
extern void __cop_overlay_return(void);

uintptr_t __cop_overlay_enter(unsigned index, uintptr_t target,
                              uintptr_t return_address);
uintptr_t __cop_overlay_leave(void);

static struct return_frame return_stack[RETURN_STACK_DEPTH];
static unsigned return_depth;
static unsigned long load_count;

static unsigned overlay_count(void)
{
    return (unsigned)(_ovly_table_end - _ovly_table);
}

static unsigned region_count(void)
{
    return (unsigned)(_ovly_buf_table_end - _ovly_buf_table);
}

/* The table entry of overlay index, checked. */
static const struct cop_ovly_entry *overlay_entry(unsigned index)
{
    const struct cop_ovly_entry *entry;

    if (index < 1 || index > overlay_count())
        cop_fatal("overlay index %u out of range 1..%u", index,
                  overlay_count());
    entry = &_ovly_table[index - 1];
    if (entry->buf < 1 || entry->buf > region_count())
        cop_fatal("overlay %u names region %u of %u", index,
                  (unsigned)entry->buf, region_count());
    return entry;
}

unsigned cop_overlay_loaded(unsigned region)
{
    if (region < 1 || region > region_count())
        return 0;
    return _ovly_buf_table[region - 1];
}

static void overlay_load(unsigned index)
{
    const struct cop_ovly_entry *entry = overlay_entry(index);
    volatile uint32_t *guard = &_ovly_buf_table[entry->buf - 1];
    const unsigned char *image;
    size_t image_size;

    if (*guard == index)
        return;
    image = cop_image_window(&image_size);
    if (entry->file_off > image_size ||
        entry->size > image_size - entry->file_off)
        cop_fatal("overlay %u (file offset 0x%x, %u bytes) lies outside the "
                  "%zu-byte image", index, (unsigned)entry->file_off,
                  (unsigned)entry->size, image_size);
    memcpy((void *)(uintptr_t)entry->vma, image + entry->file_off, entry->size);
    __asm__ volatile("fence.i" ::: "memory");
    *guard = index;
    load_count++;
}

unsigned long cop_overlay_load_count(void)
{
    return load_count;
}

/* The loaded overlay whose code contains addr, or 0 (resident code). */
static unsigned overlay_running_at(uintptr_t addr)
{
    for (unsigned region = 1; region <= region_count(); region++) {
        unsigned index = _ovly_buf_table[region - 1];
        if (index == 0)
            continue;
        const struct cop_ovly_entry *entry = overlay_entry(index);
        if (addr >= entry->vma && addr - entry->vma < entry->size)
            return index;
    }
    return 0;
}

uintptr_t __cop_overlay_enter(unsigned index, uintptr_t target,
                              uintptr_t return_address)
{
    const struct cop_ovly_entry *entry = overlay_entry(index);
    /* The call instruction is the one before the return address. */
    unsigned caller = overlay_running_at(return_address - 4);

    if (target < entry->vma || target - entry->vma >= entry->size)
        cop_fatal("overlay call to %p, outside overlay %u (0x%08x, %u bytes)",
                  (void *)target, index, (unsigned)entry->vma,
                  (unsigned)entry->size);
    overlay_load(index);
    if (caller == 0)
        return return_address;
    if (return_depth == RETURN_STACK_DEPTH)
        cop_fatal("overlay calls nested deeper than %d", RETURN_STACK_DEPTH);
    return_stack[return_depth].return_address = return_address;
    return_stack[return_depth].overlay = caller;
    return_depth++;
    return (uintptr_t)__cop_overlay_return;
}

uintptr_t __cop_overlay_leave(void)
{
    if (return_depth == 0)
        cop_fatal("overlay return without a call");
    return_depth--;
    overlay_load(return_stack[return_depth].overlay);
    return return_stack[return_depth].return_address;
}
