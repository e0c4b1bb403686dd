/*
 * lsmap.c — the map from local-store address to image file offset, and the
 * resolution of an (LS address, guard state) pair through it.
 *
 * How it works
 * ------------
 * The map is a sorted array of disjoint pieces of the local store:
 *   - the file bytes of a resident load segment (PIECE_FILE): the file
 *     offset is the piece's base plus the distance from its start;
 *   - the zero-filled tail of a resident segment, past its file bytes
 *     (PIECE_ZERO, .bss): no file offset;
 *   - an overlay region (PIECE_REGION): the union of its overlays' ranges,
 *     resolved through the region's guard word.
 * Segments are clipped to the local store; parts outside it (the
 * main-memory window) are not in the map.  Pieces that overlap mean the
 * image cannot be resolved, so building the map fails on them.
 *
 * File pieces are split where sections begin and end, so a piece also
 * names its section.  A look-up is one binary search over a few dozen
 * pieces; in a region it then takes the overlay the guard names, which
 * must be an overlay of that region and cover the address.  Anything else
 * is "unmapped", with a reason (overlay.h, enum ovl_reason) and never a
 * made-up offset.
 */
#include "overlay/overlay-internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

/* A growing array of pieces. */
struct piece_list {
    struct ls_piece *items;
    size_t count;
    size_t capacity;
};

static int push_piece(struct piece_list *list, const struct ls_piece *piece)
{
    if (piece->start >= piece->end)
        return 0;
    if (list->count == list->capacity) {
        size_t capacity = list->capacity ? 2 * list->capacity : 16;
        struct ls_piece *items = realloc(list->items,
                                         capacity * sizeof *items);
        if (items == NULL)
            return -1;
        list->items = items;
        list->capacity = capacity;
    }
    list->items[list->count++] = *piece;
    return 0;
}

/* [start, end) in guest addresses, clipped to the LS, as LS addresses. */
static void clip_to_ls(uint64_t *start, uint64_t *end)
{
    uint64_t ls_end = (uint64_t)COP_LS_BASE + COP_LS_SIZE;

    if (*start < COP_LS_BASE)
        *start = COP_LS_BASE;
    if (*end > ls_end)
        *end = ls_end;
    if (*end < *start)
        *end = *start;
    *start -= COP_LS_BASE;
    *end -= COP_LS_BASE;
}

/* The file-backed and zero-filled pieces of a resident segment. */
static int add_segment(struct piece_list *list,
                       const struct ovl_segment *segment)
{
    uint64_t start = segment->vaddr;
    uint64_t file_end = start + segment->filesz;
    uint64_t zero_start = file_end;
    uint64_t end = start + segment->memsz;

    clip_to_ls(&start, &file_end);
    clip_to_ls(&zero_start, &end);
    struct ls_piece file = {
        .start = (uint32_t)start,
        .end = (uint32_t)file_end,
        .kind = PIECE_FILE,
        .index = segment->program_header,
        .file_base = segment->file_offset +
                     (start + COP_LS_BASE - segment->vaddr),
    };
    struct ls_piece zero = {
        .start = (uint32_t)zero_start,
        .end = (uint32_t)end,
        .kind = PIECE_ZERO,
        .index = segment->program_header,
    };
    return push_piece(list, &file) != 0 || push_piece(list, &zero) != 0
           ? -1 : 0;
}

static int add_region(struct piece_list *list, const struct ovl_region *region)
{
    struct ls_piece piece = {
        .start = region->ls_start,
        .end = region->ls_end,
        .kind = PIECE_REGION,
        .index = region->index,
    };
    return push_piece(list, &piece);
}

static int compare_pieces(const void *a, const void *b)
{
    const struct ls_piece *x = a, *y = b;

    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static void describe(const struct ls_piece *piece, char *text, size_t size)
{
    if (piece->kind == PIECE_REGION)
        snprintf(text, size, "overlay region %u (LS 0x%" PRIx32 "-0x%" PRIx32
                 ")", piece->index, piece->start, piece->end);
    else
        snprintf(text, size, "load segment %u (LS 0x%" PRIx32 "-0x%" PRIx32
                 ")", piece->index, piece->start, piece->end);
}

static int check_disjoint(const struct ovl_image *image,
                          const struct piece_list *list,
                          struct ovl_error *error)
{
    for (size_t i = 1; i < list->count; i++) {
        const struct ls_piece *before = &list->items[i - 1];
        const struct ls_piece *after = &list->items[i];
        if (before->end > after->start) {
            char first[96], second[96];
            describe(before, first, sizeof first);
            describe(after, second, sizeof second);
            return ovl_fail(error, image->label, "%s overlaps %s in the "
                            "local store", first, second);
        }
    }
    return 0;
}

/* The first section ending after file_offset (sections are disjoint, so
 * their ends are sorted too). */
static size_t first_section_after(const struct ovl_image *image,
                                  uint64_t file_offset)
{
    size_t low = 0, high = image->section_count;

    while (low < high) {
        size_t middle = low + (high - low) / 2;
        const struct section_span *span = &image->sections[middle];
        if (span->file_offset + span->size <= file_offset)
            low = middle + 1;
        else
            high = middle;
    }
    return low;
}

/* Adds the part of file piece whole from file offset from to to. */
static int add_part(struct piece_list *list, const struct ls_piece *whole,
                    uint64_t from, uint64_t to, const char *section)
{
    struct ls_piece part = *whole;

    part.start = whole->start + (uint32_t)(from - whole->file_base);
    part.end = whole->start + (uint32_t)(to - whole->file_base);
    part.file_base = from;
    part.section = section;
    return push_piece(list, &part);
}

/* Splits a file piece where its sections begin and end, so a look-up
 * finds the section with the piece. */
static int split_by_section(const struct ovl_image *image,
                            const struct ls_piece *whole,
                            struct piece_list *list)
{
    uint64_t at = whole->file_base;
    uint64_t end = whole->file_base + (whole->end - whole->start);

    for (size_t i = first_section_after(image, at);
         i < image->section_count && image->sections[i].file_offset < end;
         i++) {
        const struct section_span *span = &image->sections[i];
        uint64_t from = span->file_offset > at ? span->file_offset : at;
        uint64_t to = span->file_offset + span->size;
        if (to > end)
            to = end;
        if (add_part(list, whole, at, from, NULL) != 0 ||
            add_part(list, whole, from, to, span->name) != 0)
            return -1;
        at = to;
    }
    return add_part(list, whole, at, end, NULL);
}

static int split_pieces(struct ovl_image *image, const struct piece_list *whole,
                        struct piece_list *split)
{
    for (size_t i = 0; i < whole->count; i++) {
        const struct ls_piece *piece = &whole->items[i];
        int status = piece->kind == PIECE_FILE
                     ? split_by_section(image, piece, split)
                     : push_piece(split, piece);
        if (status != 0)
            return -1;
    }
    return 0;
}

int ovl_build_ls_map(struct ovl_image *image, struct ovl_error *error)
{
    struct piece_list whole = { 0 }, split = { 0 };
    int status = 0;

    for (unsigned i = 0; status == 0 && i < image->segment_count; i++)
        status = add_segment(&whole, &image->segments[i]);
    for (unsigned r = 0; status == 0 && r < image->region_count; r++)
        status = add_region(&whole, &image->regions[r]);
    if (status == 0 && whole.count > 0) {
        qsort(whole.items, whole.count, sizeof *whole.items, compare_pieces);
        if (check_disjoint(image, &whole, error) != 0) {
            free(whole.items);
            return -1;
        }
        status = split_pieces(image, &whole, &split);
    }
    free(whole.items);
    if (status != 0) {
        free(split.items);
        return ovl_fail(error, image->label, "out of memory for the LS map");
    }
    image->pieces = split.items;
    image->piece_count = split.count;
    return 0;
}

/* The piece holding ls_addr: a binary search without branches on the
 * data, since sample addresses are hard to predict. */
static const struct ls_piece *find_piece(const struct ovl_image *image,
                                         uint32_t ls_addr)
{
    const struct ls_piece *base = image->pieces;
    size_t count = image->piece_count;

    if (count == 0)
        return NULL;
    while (count > 1) {
        size_t half = count / 2;
        base = base[half].start <= ls_addr ? base + half : base;
        count -= half;
    }
    return base->start <= ls_addr && ls_addr < base->end ? base : NULL;
}

static void unmapped(const struct ovl_image *image, uint32_t ls_addr,
                     enum ovl_reason reason, struct ovl_location *location)
{
    *location = (struct ovl_location) {
        .image = image,
        .ls_addr = ls_addr,
        .vaddr = ls_addr + COP_LS_BASE,
        .reason = reason,
        .file_offset = OVL_NO_OFFSET,
    };
}

/* ls_addr inside overlay (the caller checked): its mapped location. */
static void map_overlay(const struct ovl_image *image,
                        const struct ovl_overlay *overlay, uint32_t ls_addr,
                        struct ovl_location *location)
{
    unmapped(image, ls_addr, OVL_MAPPED, location);
    location->file_offset = overlay->file_offset +
                            (ls_addr - (overlay->vaddr - COP_LS_BASE));
    location->region = overlay->region;
    location->overlay = overlay->index;
    location->guard = overlay->index;
    location->section = overlay->section;
}

static int overlay_covers(const struct ovl_overlay *overlay, uint32_t ls_addr)
{
    return ls_addr - (overlay->vaddr - COP_LS_BASE) < overlay->size;
}

static void resolve_in_region(const struct ovl_image *image, unsigned region,
                              uint32_t ls_addr, const uint32_t *guards,
                              unsigned guard_count,
                              struct ovl_location *location)
{
    if (guards == NULL || region > guard_count) {
        unmapped(image, ls_addr, OVL_GUARD_UNKNOWN, location);
        location->region = region;
        return;
    }
    uint32_t guard = guards[region - 1];
    const struct ovl_overlay *overlay =
        guard - 1 < image->overlay_count ? &image->overlays[guard - 1] : NULL;
    enum ovl_reason reason;

    if (overlay && overlay->region == region &&
        overlay_covers(overlay, ls_addr)) {
        map_overlay(image, overlay, ls_addr, location);
        return;
    }
    if (guard == 0)
        reason = OVL_REGION_EMPTY;
    else if (overlay == NULL || overlay->region != region)
        reason = OVL_GUARD_INVALID;
    else
        reason = OVL_OUTSIDE_OVERLAY;
    unmapped(image, ls_addr, reason, location);
    location->region = region;
    location->guard = guard;
}

static void map_resident(const struct ovl_image *image,
                         const struct ls_piece *piece, uint32_t ls_addr,
                         struct ovl_location *location)
{
    unmapped(image, ls_addr, OVL_MAPPED, location);
    location->file_offset = piece->file_base + (ls_addr - piece->start);
    location->section = piece->section;
}

void ovl_resolve(const struct ovl_image *image, uint32_t ls_addr,
                 const uint32_t *guards, unsigned guard_count,
                 struct ovl_location *location)
{
    if (ls_addr >= COP_LS_SIZE) {
        unmapped(image, ls_addr, OVL_OUTSIDE_LS, location);
        return;
    }
    const struct ls_piece *piece = find_piece(image, ls_addr);
    if (piece == NULL) {
        unmapped(image, ls_addr, OVL_NO_SEGMENT, location);
        return;
    }
    switch (piece->kind) {
    case PIECE_FILE:
        map_resident(image, piece, ls_addr, location);
        break;
    case PIECE_ZERO:
        unmapped(image, ls_addr, OVL_NO_FILE_BYTES, location);
        break;
    case PIECE_REGION:
        resolve_in_region(image, piece->index, ls_addr, guards, guard_count,
                          location);
        break;
    }
}

size_t ovl_candidates(const struct ovl_image *image, uint32_t ls_addr,
                      struct ovl_location *candidates, size_t max)
{
    const struct ls_piece *piece =
        ls_addr < COP_LS_SIZE ? find_piece(image, ls_addr) : NULL;
    size_t count = 0;

    if (piece == NULL || piece->kind == PIECE_ZERO)
        return 0;
    if (piece->kind == PIECE_FILE) {
        if (max > 0)
            map_resident(image, piece, ls_addr, &candidates[0]);
        return 1;
    }
    for (unsigned i = 0; i < image->overlay_count; i++) {
        const struct ovl_overlay *overlay = &image->overlays[i];
        if (overlay->region != piece->index ||
            !overlay_covers(overlay, ls_addr))
            continue;
        if (count < max)
            map_overlay(image, overlay, ls_addr, &candidates[count]);
        count++;
    }
    return count;
}

const char *ovl_reason_name(enum ovl_reason reason)
{
    switch (reason) {
    case OVL_MAPPED:
        return "mapped";
    case OVL_OUTSIDE_LS:
        return "outside-ls";
    case OVL_NO_SEGMENT:
        return "no-segment";
    case OVL_NO_FILE_BYTES:
        return "no-file-bytes";
    case OVL_REGION_EMPTY:
        return "region-empty";
    case OVL_GUARD_UNKNOWN:
        return "guard-unknown";
    case OVL_GUARD_INVALID:
        return "guard-invalid";
    case OVL_OUTSIDE_OVERLAY:
        return "outside-overlay";
    }
    return "unknown";
}
