/*
 * overlays.c — read the overlay table and the guard table of an image.
 *
 * The SPU toolchain's convention (docs/coprocessor-abi.md): the symbols
 * _ovly_table and _ovly_table_end bound an array of 16-byte entries
 * {vma, size, file_off, buf}, one per overlay, little-endian; buf is the
 * 1-based index of the overlay region the overlay is loaded into.  The
 * symbols _ovly_buf_table and _ovly_buf_table_end bound one 32-bit guard word
 * per region, in the local store: the overlay manager writes there the
 * 1-based index of the overlay it loaded, 0 for none.
 *
 * How it works
 * ------------
 * The overlay table is data the image initialises, so its bytes are read
 * from the file, at the position the resident load segment holding its
 * vaddr gives.  The guard table is only located (it may be .bss): its words
 * change at run time and the driver reads them from the local store.
 * Each entry is checked: buf names a region, the overlay lies inside the
 * local store, and its file bytes inside the image.  Then the entries and
 * the PF_OVERLAY segments must match one to one, as the coprocessor ABI
 * (docs/coprocessor-abi.md) promises: a table that disagrees with the
 * segments describes bytes that are not the overlay.  A region's extent is
 * the union of its overlays' ranges.
 */
#include "overlay/overlay-internal.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>

static uint32_t read_le32(const uint8_t *bytes)
{
    return (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 |
           (uint32_t)bytes[2] << 16 | (uint32_t)bytes[3] << 24;
}

/* Does [vaddr, vaddr + length) lie inside the local store? */
static int inside_ls(uint32_t vaddr, uint32_t length)
{
    return vaddr >= COP_LS_BASE && vaddr - COP_LS_BASE <= COP_LS_SIZE &&
           length <= COP_LS_SIZE - (vaddr - COP_LS_BASE);
}

/* The file position of [vaddr, vaddr + length) in a resident segment's
 * file bytes; 0, or -1 when no segment holds all of it. */
static int file_position(const struct ovl_image *image, uint32_t vaddr,
                         uint32_t length, uint64_t *offset)
{
    for (unsigned i = 0; i < image->segment_count; i++) {
        const struct ovl_segment *s = &image->segments[i];
        if (vaddr >= s->vaddr && vaddr - s->vaddr <= s->filesz &&
            length <= s->filesz - (vaddr - s->vaddr)) {
            *offset = s->file_offset + (vaddr - s->vaddr);
            return 0;
        }
    }
    return -1;
}

/* Takes a start/end symbol pair: both defined or neither; *present says. */
static int symbol_range(const struct ovl_image *image,
                        const struct overlay_symbols *found,
                        enum overlay_symbol first, int *present,
                        uint32_t *start, uint32_t *length,
                        struct ovl_error *error)
{
    enum overlay_symbol last = first + 1;
    const char *first_name = ovl_overlay_symbol_names[first];
    const char *last_name = ovl_overlay_symbol_names[last];

    *present = found->defined[first];
    if (found->defined[first] != found->defined[last])
        return ovl_fail(error, image->label, "defines %s but not %s",
                        found->defined[first] ? first_name : last_name,
                        found->defined[first] ? last_name : first_name);
    if (!*present)
        return 0;
    *start = found->value[first];
    if (found->value[last] < *start)
        return ovl_fail(error, image->label, "%s (0x%" PRIx32 ") is before "
                        "%s (0x%" PRIx32 ")", last_name, found->value[last],
                        first_name, *start);
    *length = found->value[last] - *start;
    return 0;
}

static int load_guard_table(struct ovl_image *image,
                            const struct overlay_symbols *found,
                            struct ovl_error *error)
{
    int present;
    uint32_t start = 0, length = 0;

    if (symbol_range(image, found, SYM_OVLY_BUF_TABLE, &present, &start,
                     &length, error) != 0)
        return -1;
    if (!present)
        return 0;
    if (start % OVL_GUARD_SIZE != 0 || length % OVL_GUARD_SIZE != 0)
        return ovl_fail(error, image->label, "_ovly_buf_table (0x%" PRIx32
                        ", %" PRIu32 " bytes) is not a whole number of "
                        "aligned 4-byte words", start, length);
    if (!inside_ls(start, length))
        return ovl_fail(error, image->label, "_ovly_buf_table (0x%" PRIx32
                        ", %" PRIu32 " bytes) is not inside the local store "
                        "0x%x-0x%x", start, length, COP_LS_BASE,
                        COP_LS_BASE + COP_LS_SIZE);
    image->region_count = length / OVL_GUARD_SIZE;
    image->regions = calloc(image->region_count ? image->region_count : 1,
                            sizeof *image->regions);
    if (image->regions == NULL)
        return ovl_fail(error, image->label, "out of memory for %u regions",
                        image->region_count);
    for (unsigned r = 0; r < image->region_count; r++) {
        image->regions[r].index = r + 1;
        image->regions[r].guard_ls_addr =
            start - COP_LS_BASE + r * OVL_GUARD_SIZE;
    }
    return 0;
}

/* Checks one table entry and adds it to its region. */
static int add_overlay(struct ovl_image *image, unsigned index,
                       const uint8_t *entry, struct ovl_error *error)
{
    struct ovl_overlay *overlay = &image->overlays[index - 1];
    *overlay = (struct ovl_overlay) {
        .index = index,
        .vaddr = read_le32(entry + offsetof(struct cop_ovly_entry, vma)),
        .size = read_le32(entry + offsetof(struct cop_ovly_entry, size)),
        .file_offset =
            read_le32(entry + offsetof(struct cop_ovly_entry, file_off)),
        .region = read_le32(entry + offsetof(struct cop_ovly_entry, buf)),
    };
    if (overlay->region < 1 || overlay->region > image->region_count)
        return ovl_fail(error, image->label, "overlay %u: buf %u is not a "
                        "region (the image has %u)", index, overlay->region,
                        image->region_count);
    if (!inside_ls(overlay->vaddr, overlay->size))
        return ovl_fail(error, image->label, "overlay %u (vma 0x%" PRIx32
                        ", size 0x%" PRIx32 ") is not inside the local "
                        "store", index, overlay->vaddr, overlay->size);
    if (overlay->file_offset > image->size ||
        overlay->size > image->size - overlay->file_offset)
        return ovl_fail(error, image->label, "overlay %u (file offset 0x%"
                        PRIx64 ", size 0x%" PRIx32 ") extends past the end "
                        "of the image (%zu bytes)", index,
                        overlay->file_offset, overlay->size, image->size);
    overlay->section = ovl_section_at(image, overlay->file_offset);

    struct ovl_region *region = &image->regions[overlay->region - 1];
    uint32_t start = overlay->vaddr - COP_LS_BASE;
    uint32_t end = start + overlay->size;
    region->overlay_count++;
    if (overlay->size == 0)
        return 0;
    if (region->ls_start == region->ls_end) {
        region->ls_start = start;
        region->ls_end = end;
    }
    if (start < region->ls_start)
        region->ls_start = start;
    if (end > region->ls_end)
        region->ls_end = end;
    return 0;
}

static int compare_overlay_segments(const void *a, const void *b)
{
    const struct overlay_segment *x = a, *y = b;

    if (x->vaddr != y->vaddr)
        return x->vaddr < y->vaddr ? -1 : 1;
    if (x->file_offset != y->file_offset)
        return x->file_offset < y->file_offset ? -1 : 1;
    return x->filesz < y->filesz ? -1 : x->filesz > y->filesz;
}

/* The first of the segments equal to overlay's (vma, file_off, size), or
 * NULL; the array is sorted. */
static struct overlay_segment *first_segment_of(struct ovl_image *image,
                                                const struct ovl_overlay *o)
{
    struct overlay_segment key = {
        .vaddr = o->vaddr, .filesz = o->size, .file_offset = o->file_offset,
    };
    size_t low = 0, high = image->overlay_segment_count;

    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (compare_overlay_segments(&image->overlay_segments[middle],
                                     &key) < 0)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == image->overlay_segment_count ||
        compare_overlay_segments(&image->overlay_segments[low], &key) != 0)
        return NULL;
    return &image->overlay_segments[low];
}

/* Pairs entry o with the first unpaired segment equal to it. */
static int match_entry(struct ovl_image *image, const struct ovl_overlay *o,
                       struct ovl_error *error)
{
    struct overlay_segment *first = first_segment_of(image, o);
    const struct overlay_segment *end =
        image->overlay_segments + image->overlay_segment_count;

    if (first == NULL)
        return ovl_fail(error, image->label, "overlay %u (vma 0x%" PRIx32
                        ", size 0x%" PRIx32 ", file offset 0x%" PRIx64
                        ") matches no PF_OVERLAY segment", o->index, o->vaddr,
                        o->size, o->file_offset);
    struct overlay_segment *segment = first;
    while (segment < end && segment->entry != 0 &&
           compare_overlay_segments(segment, first) == 0)
        segment++;
    if (segment == end || compare_overlay_segments(segment, first) != 0)
        return ovl_fail(error, image->label, "overlays %u and %u describe the "
                        "same PF_OVERLAY segment", first->entry, o->index);
    segment->entry = o->index;
    return 0;
}

/*
 * The overlay table and the PF_OVERLAY segments must agree one to one
 * (docs/coprocessor-abi.md): each entry's (vma, size, file_off) is one
 * segment's (p_vaddr, p_filesz, p_offset), and each segment has an entry.
 */
static int match_overlay_segments(struct ovl_image *image,
                                  struct ovl_error *error)
{
    qsort(image->overlay_segments, image->overlay_segment_count,
          sizeof *image->overlay_segments, compare_overlay_segments);
    for (unsigned i = 0; i < image->overlay_count; i++)
        if (match_entry(image, &image->overlays[i], error) != 0)
            return -1;
    for (unsigned i = 0; i < image->overlay_segment_count; i++) {
        const struct overlay_segment *segment = &image->overlay_segments[i];
        if (segment->entry == 0)
            return ovl_fail(error, image->label, "PF_OVERLAY segment %u "
                            "(vaddr 0x%" PRIx32 ", file offset 0x%" PRIx64
                            ") has no _ovly_table entry",
                            segment->program_header, segment->vaddr,
                            segment->file_offset);
    }
    return 0;
}

static int load_overlay_table(struct ovl_image *image,
                              const struct overlay_symbols *found,
                              struct ovl_error *error)
{
    int present;
    uint32_t start = 0, length = 0;
    uint64_t offset = 0;

    if (symbol_range(image, found, SYM_OVLY_TABLE, &present, &start,
                     &length, error) != 0)
        return -1;
    if (!present) {
        if (image->overlay_segment_count > 0)
            return ovl_fail(error, image->label, "has %u overlay segments "
                            "(PF_OVERLAY) but no _ovly_table symbol to tell "
                            "which overlay is where (stripped?)",
                            image->overlay_segment_count);
        return 0;
    }
    if (!found->defined[SYM_OVLY_BUF_TABLE])
        return ovl_fail(error, image->label, "defines _ovly_table but not "
                        "_ovly_buf_table");
    if (length % OVL_ENTRY_SIZE != 0)
        return ovl_fail(error, image->label, "_ovly_table is %" PRIu32
                        " bytes, not a whole number of %u-byte entries",
                        length, OVL_ENTRY_SIZE);
    /* an empty table has no bytes to be anywhere (common/image.c agrees) */
    if (length > 0 && file_position(image, start, length, &offset) != 0)
        return ovl_fail(error, image->label, "_ovly_table (0x%" PRIx32 ", %"
                        PRIu32 " bytes) is not in the file bytes of a "
                        "resident load segment", start, length);
    image->overlay_count = length / OVL_ENTRY_SIZE;
    image->overlays = calloc(image->overlay_count ? image->overlay_count : 1,
                             sizeof *image->overlays);
    if (image->overlays == NULL)
        return ovl_fail(error, image->label, "out of memory for %u overlays",
                        image->overlay_count);
    for (unsigned i = 0; i < image->overlay_count; i++)
        if (add_overlay(image, i + 1,
                        image->bytes + offset + (uint64_t)i * OVL_ENTRY_SIZE,
                        error) != 0)
            return -1;
    return match_overlay_segments(image, error);
}

int ovl_load_overlays(struct ovl_image *image,
                      const struct overlay_symbols *found,
                      struct ovl_error *error)
{
    if (load_guard_table(image, found, error) != 0)
        return -1;
    return load_overlay_table(image, found, error);
}
