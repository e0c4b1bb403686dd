/*
 * image.h — read and validate a coprocessor ELF image (host side).
 *
 * cop_image_parse() checks everything the loader, copsim and the profiler
 * rely on, bounds-checked against the file size, and fails with one line
 * naming the image and the reason: an ELF32 little-endian RISC-V executable
 * without compressed instructions, its entry point at the start of the local
 * store, every PT_LOAD segment inside the file and the local store, resident
 * segments disjoint, overlay segments (PF_OVERLAY) clear of them, the
 * section table whole (sections in the file and named, the symbol table's
 * entries whole and named), the name note well formed, and the overlay
 * tables (docs/coprocessor-abi.md) agreeing with the overlay segments one
 * to one.  It is the one validator: overlay/ (copovl, coprofd) runs it and
 * checks nothing of its own, so every tool accepts the same images.
 *
 * The image keeps pointers into the bytes it was given, so those must
 * outlive it; cop_image_read() reads a file and owns its copy.
 */
#ifndef COPROF_SDK_IMAGE_H
#define COPROF_SDK_IMAGE_H

#include "abi/cop-abi.h"

#include <stddef.h>
#include <stdint.h>

#define COP_ERROR_SIZE 512

/* A one-line error message, filled by a function that failed. */
struct cop_error {
    char message[COP_ERROR_SIZE];
};

void cop_error_set(struct cop_error *err, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* A PT_LOAD segment. */
struct cop_segment {
    uint32_t offset;
    uint32_t vaddr;
    uint32_t paddr;
    uint32_t filesz;
    uint32_t memsz;
    uint32_t flags;
    int overlay;                /* PF_OVERLAY is set */
};

/* One _ovly_table entry, checked against its segment. */
struct cop_overlay {
    uint32_t index;             /* 1-based position in _ovly_table */
    uint32_t vma;
    uint32_t size;
    uint32_t file_off;
    uint32_t buf;               /* 1-based region */
    const char *section;        /* its section's name, or "" when unknown */
};

struct cop_image {
    char *label;                /* the file name, for messages */
    const unsigned char *bytes; /* the whole ELF file */
    size_t size;
    unsigned char *owned;       /* bytes read by cop_image_read, else NULL */

    uint32_t entry;
    char name[COP_NAME_MAX + 1];    /* from the note; "" when there is none */

    struct cop_segment *segments;   /* every PT_LOAD, in file order */
    size_t nsegments;

    /* Section headers and the symbol table, when the image has them. */
    uint32_t shoff;
    uint32_t shnum;
    uint32_t symtab_offset;
    uint32_t symtab_count;
    uint32_t strtab_offset;
    uint32_t strtab_size;

    /* Overlay tables; all zero for an image without them. */
    uint32_t ovly_table;        /* LS address of _ovly_table */
    uint32_t ovly_buf_table;    /* LS address of _ovly_buf_table */
    uint32_t nregions;          /* guard words */
    struct cop_overlay *overlays;
    size_t noverlays;
};

/*
 * Validates size bytes of an image; label names it in messages.  Returns 0,
 * or -1 with err set (image then needs no release).
 */
int cop_image_parse(const void *bytes, size_t size, const char *label,
                    struct cop_image *image, struct cop_error *err);

/*
 * Reads a whole regular file of at most max_size bytes into memory that the
 * caller frees; NULL with err set on failure.
 */
unsigned char *cop_read_file(const char *path, size_t max_size, size_t *size,
                             struct cop_error *err);

/* Reads the file at path and parses it; the image owns the bytes. */
int cop_image_read(const char *path, struct cop_image *image,
                   struct cop_error *err);

/*
 * The two halves of cop_image_parse, for cop-overlays finish, which must
 * read an image whose _ovly_table does not hold file offsets yet:
 * cop_image_parse_layout() checks all but the overlay table entries (it
 * finds the tables), cop_image_check_overlays() checks the entries.
 */
int cop_image_parse_layout(const void *bytes, size_t size, const char *label,
                           struct cop_image *image, struct cop_error *err);
int cop_image_check_overlays(struct cop_image *image, struct cop_error *err);

void cop_image_release(struct cop_image *image);

/* The value (and size) of a symbol; 0 when found, -1 when not. */
int cop_image_symbol(const struct cop_image *image, const char *name,
                     uint32_t *value, uint32_t *size);

/*
 * The file offset of len bytes at LS address addr when they lie in the
 * file part of one resident segment; -1 when they do not.
 */
long cop_image_file_offset(const struct cop_image *image, uint32_t addr,
                           uint32_t len);

/* Local-store byte offset of the guard words (_ovly_buf_table), what the
 * trace unit's overlay watch and the driver take; 0 without overlays. */
static inline uint32_t cop_image_guard_ls_offset(const struct cop_image *image)
{
    return image->nregions ? image->ovly_buf_table - COP_LS_BASE : 0;
}

/* Number of PF_OVERLAY segments. */
size_t cop_image_overlay_segments(const struct cop_image *image);

#endif
