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
 * A look-up is one binary search over a handful of pieces; in a region it
 * then takes the overlay the guard names, which must be an overlay of that
 * region and cover the address.  Anything else is "unmapped", with a reason
 * (overlay.h, enum ovl_reason) and never a made-up offset.
 */
#include "overlay/overlay-internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static void add_piece(struct ovl_image *image, uint64_t start, uint64_t end,
                      enum piece_kind kind, unsigned index,
                      uint64_t file_base)
{
    if (start >= end)
        return;
    image->pieces[image->piece_count++] = (struct ls_piece) {
        .start = (uint32_t)start,
        .end = (uint32_t)end,
        .kind = kind,
        .index = index,
        .file_base = file_base,
    };
}

/* [start, end) in guest addresses, clipped to the LS, as LS addresses. */
static void clip_to_ls(uint64_t *start, uint64_t *end)
{
    uint64_t ls_end = (uint64_t)OVL_LS_BASE + OVL_LS_SIZE;

    if (*start < OVL_LS_BASE)
        *start = OVL_LS_BASE;
    if (*end > ls_end)
        *end = ls_end;
    if (*end < *start)
        *end = *start;
    *start -= OVL_LS_BASE;
    *end -= OVL_LS_BASE;
}

static void add_segment(struct ovl_image *image,
                        const struct ovl_segment *segment)
{
    uint64_t start = segment->vaddr;
    uint64_t file_end = start + segment->filesz;
    uint64_t zero_start = file_end;
    uint64_t end = start + segment->memsz;

    clip_to_ls(&start, &file_end);
    add_piece(image, start, file_end, PIECE_FILE, segment->program_header,
              segment->file_offset +
                  (start + OVL_LS_BASE - segment->vaddr));
    clip_to_ls(&zero_start, &end);
    add_piece(image, zero_start, end, PIECE_ZERO, segment->program_header,
              0);
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
                          struct ovl_error *error)
{
    for (size_t i = 1; i < image->piece_count; i++) {
        const struct ls_piece *before = &image->pieces[i - 1];
        const struct ls_piece *after = &image->pieces[i];
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

int ovl_build_ls_map(struct ovl_image *image, struct ovl_error *error)
{
    size_t most = 2 * (size_t)image->segment_count + image->region_count;

    image->pieces = calloc(most ? most : 1, sizeof *image->pieces);
    if (image->pieces == NULL)
        return ovl_fail(error, image->label, "out of memory for the LS map");
    for (unsigned i = 0; i < image->segment_count; i++)
        add_segment(image, &image->segments[i]);
    for (unsigned r = 0; r < image->region_count; r++)
        add_piece(image, image->regions[r].ls_start, image->regions[r].ls_end,
                  PIECE_REGION, r + 1, 0);
    qsort(image->pieces, image->piece_count, sizeof *image->pieces,
          compare_pieces);
    return check_disjoint(image, error);
}

static const struct ls_piece *find_piece(const struct ovl_image *image,
                                         uint32_t ls_addr)
{
    size_t low = 0, high = image->piece_count;

    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (image->pieces[middle].start <= ls_addr)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == 0 || ls_addr >= image->pieces[low - 1].end)
        return NULL;
    return &image->pieces[low - 1];
}

static void unmapped(const struct ovl_image *image, uint32_t ls_addr,
                     enum ovl_reason reason, struct ovl_location *location)
{
    *location = (struct ovl_location) {
        .image = image,
        .ls_addr = ls_addr,
        .vaddr = ls_addr + OVL_LS_BASE,
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
                            (ls_addr - (overlay->vaddr - OVL_LS_BASE));
    location->region = overlay->region;
    location->overlay = overlay->index;
    location->guard = overlay->index;
    location->section = overlay->section;
}

static int overlay_covers(const struct ovl_overlay *overlay, uint32_t ls_addr)
{
    return ls_addr - (overlay->vaddr - OVL_LS_BASE) < overlay->size;
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
    const struct ovl_overlay *overlay = ovl_image_overlay(image, guard);
    enum ovl_reason reason = OVL_MAPPED;

    if (guard == 0)
        reason = OVL_REGION_EMPTY;
    else if (overlay == NULL || overlay->region != region)
        reason = OVL_GUARD_INVALID;
    else if (!overlay_covers(overlay, ls_addr))
        reason = OVL_OUTSIDE_OVERLAY;
    if (reason == OVL_MAPPED) {
        map_overlay(image, overlay, ls_addr, location);
        return;
    }
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
    location->section = ovl_section_at(image, location->file_offset);
}

void ovl_resolve(const struct ovl_image *image, uint32_t ls_addr,
                 const uint32_t *guards, unsigned guard_count,
                 struct ovl_location *location)
{
    if (ls_addr >= OVL_LS_SIZE) {
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
        ls_addr < OVL_LS_SIZE ? find_piece(image, ls_addr) : NULL;
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
