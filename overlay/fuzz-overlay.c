/*
 * fuzz-overlay.c — libFuzzer target for overlay/: any bytes, as an image in
 * memory and as an image embedded in a container file of unknown size.
 *
 * Each input is opened twice: from memory, and from a memory-backed file
 * where it follows CONTAINER_PREFIX bytes of padding (so the size-from-
 * headers path runs).  An image that opens is then resolved at the edges of
 * every segment, region and overlay under several guard states, with its
 * candidates and symbols, and the results are checked against the rules in
 * overlay.h: a mapped location's offset lies inside the image, an unmapped
 * one has none, an overlay belongs to the region it is resolved in.  A
 * failed open must leave a one-line message.  Violations abort, so the
 * fuzzer reports them as crashes.
 *
 * Built with clang -fsanitize=fuzzer,address,undefined (overlay/module.mk).
 */
#include "overlay/overlay.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CONTAINER_PREFIX 24
#define MAX_CANDIDATES 8

static void require(int condition, const char *what)
{
    if (!condition) {
        fprintf(stderr, "fuzz-overlay: broken rule: %s\n", what);
        abort();
    }
}

static void check_error(const struct ovl_error *error)
{
    size_t length = strnlen(error->message, sizeof error->message);

    require(length > 0 && length < sizeof error->message,
            "a failed open leaves a message");
    require(strchr(error->message, '\n') == NULL,
            "the message is one line");
}

static void check_location(const struct ovl_image *image,
                           const struct ovl_location *location)
{
    struct ovl_symbol symbol;

    if (location->reason != OVL_MAPPED) {
        require(location->file_offset == OVL_NO_OFFSET,
                "an unmapped address has no file offset");
        require(location->overlay == 0, "an unmapped address has no overlay");
        return;
    }
    require(location->file_offset < ovl_image_size(image),
            "a mapped offset lies inside the image");
    if (location->overlay) {
        const struct ovl_overlay *overlay =
            ovl_image_overlay(image, location->overlay);
        require(overlay && overlay->region == location->region,
                "an overlay is resolved in its own region");
    }
    if (ovl_symbol_at(image, location->file_offset, &symbol) == 0)
        require(location->file_offset >= symbol.file_offset &&
                location->file_offset - symbol.file_offset < symbol.size,
                "a symbol covers the offset it was found for");
}

static void probe(const struct ovl_image *image, uint32_t ls_addr,
                  const uint32_t *guards, unsigned guard_count)
{
    struct ovl_location location, candidates[MAX_CANDIDATES];

    for (int delta = -1; delta <= 1; delta++) {
        uint32_t at = ls_addr + (uint32_t)delta;
        ovl_resolve(image, at, guards, guard_count, &location);
        require(location.ls_addr == at, "the LS address is kept");
        check_location(image, &location);
        size_t count = ovl_candidates(image, at, candidates, MAX_CANDIDATES);
        for (size_t i = 0; i < count && i < MAX_CANDIDATES; i++) {
            require(candidates[i].reason == OVL_MAPPED,
                    "candidates are mapped");
            check_location(image, &candidates[i]);
        }
    }
}

/* Guard states: every region empty, then every overlay in its region. */
static void probe_all(const struct ovl_image *image, uint32_t ls_addr)
{
    unsigned regions = ovl_image_region_count(image);
    uint32_t *guards = calloc(regions ? regions : 1, sizeof *guards);

    if (guards == NULL)
        return;
    probe(image, ls_addr, guards, regions);
    probe(image, ls_addr, NULL, 0);
    for (unsigned i = 1; i <= ovl_image_overlay_count(image) && i <= 64; i++) {
        const struct ovl_overlay *overlay = ovl_image_overlay(image, i);
        guards[overlay->region - 1] = i;
        probe(image, ls_addr, guards, regions);
    }
    for (unsigned r = 0; r < regions; r++)
        guards[r] = 0xffffffffu - r;
    probe(image, ls_addr, guards, regions);
    free(guards);
}

static void exercise(const struct ovl_image *image)
{
    for (unsigned i = 0; i < ovl_image_segment_count(image); i++) {
        const struct ovl_segment *s = ovl_image_segment(image, i);
        probe_all(image, s->vaddr - COP_LS_BASE);
        probe_all(image, s->vaddr - COP_LS_BASE + s->filesz);
        probe_all(image, s->vaddr - COP_LS_BASE + s->memsz);
    }
    for (unsigned i = 1; i <= ovl_image_overlay_count(image) && i <= 64; i++) {
        const struct ovl_overlay *o = ovl_image_overlay(image, i);
        probe_all(image, o->vaddr - COP_LS_BASE);
        probe_all(image, o->vaddr - COP_LS_BASE + o->size / 2);
        probe_all(image, o->vaddr - COP_LS_BASE + o->size);
    }
    for (unsigned r = 1; r <= ovl_image_region_count(image) && r <= 64; r++) {
        const struct ovl_region *region = ovl_image_region(image, r);
        require(region->guard_ls_addr < COP_LS_SIZE,
                "a guard word lies in the local store");
        probe_all(image, region->ls_end);
    }
    probe_all(image, COP_LS_SIZE);
}

static void open_from_memory(const uint8_t *data, size_t size)
{
    struct ovl_error error;
    struct ovl_image *image = ovl_image_open_memory(data, size, "input",
                                                    &error);
    if (image == NULL) {
        check_error(&error);
        return;
    }
    require(ovl_image_size(image) == size, "the whole input is the image");
    exercise(image);
    ovl_image_close(image);
}

static void open_from_container(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static const uint8_t padding[CONTAINER_PREFIX];
    struct ovl_error error;

    if (fd < 0 && (fd = memfd_create("fuzz-overlay", 0)) < 0)
        abort();
    if (ftruncate(fd, 0) != 0 ||
        pwrite(fd, padding, sizeof padding, 0) != (ssize_t)sizeof padding ||
        (size > 0 && pwrite(fd, data, size, sizeof padding) != (ssize_t)size))
        abort();
    struct ovl_image *image = ovl_image_open_fd(fd, "container",
                                                CONTAINER_PREFIX,
                                                OVL_SIZE_UNKNOWN, &error);
    if (image == NULL) {
        check_error(&error);
        return;
    }
    require(ovl_image_size(image) <= size, "the image lies in the container");
    exercise(image);
    ovl_image_close(image);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    open_from_memory(data, size);
    open_from_container(data, size);
    return 0;
}
