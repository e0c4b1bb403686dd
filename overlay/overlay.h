/*
 * overlay.h — resolve coprocessor local-store addresses to ELF image offsets,
 * through the image's load segments and its code overlays.
 *
 * A coprocessor runs out of a 256 KiB local store (LS) at guest address
 * COP_LS_BASE; the trace unit captures LS addresses, not file positions.  An
 * LS address names different code at different times when overlays share a
 * region of the store, so a sample is resolved from the pair (LS address,
 * overlay guard state): the guard word of each overlay region holds the
 * 1-based index of the overlay loaded there (0 for none), and the driver
 * reads those words from the local store (docs/coprocessor-abi.md, kernel-driver/README.md).
 *
 * The result is a position in the image file (an offset from the image's
 * first byte), which stays distinct for overlays that share a VMA, or
 * "unmapped" with a reason and the LS address, never mixed with real
 * offsets.
 *
 * Images come from a file, from a container file at an offset (an image
 * embedded in a host executable, of known or unknown size), from an open
 * descriptor or from memory.  Everything read from an image is
 * bounds-checked: a malformed or hostile ELF file gives a one-line error
 * naming the file and the reason.  overlay/README.md gives the rules.
 *
 * An open image is immutable, so it may be shared between threads.
 */
#ifndef COPROF_OVERLAY_H
#define COPROF_OVERLAY_H

#include "abi/cop-abi.h"

#include <stddef.h>
#include <stdint.h>

/* The local store (COP_LS_BASE, COP_LS_SIZE), PF_OVERLAY (COP_PF_OVERLAY),
 * the overlay table entry (struct cop_ovly_entry) and the name note
 * (COP_NOTE_OWNER, NT_COP_NAME, COP_NAME_MAX) are the ABI's, in
 * abi/cop-abi.h. */
#define OVL_ENTRY_SIZE     ((uint32_t)sizeof(struct cop_ovly_entry))
#define OVL_GUARD_SIZE     4u           /* bytes per _ovly_buf_table word */
#define OVL_SIZE_UNKNOWN   0u           /* image size to derive from headers */
#define OVL_NO_OFFSET      UINT64_MAX   /* file_offset of an unmapped address */
#define OVL_ERROR_MAX      512

/* Where a failed call puts its one-line message ("NAME: reason"). */
struct ovl_error {
    char message[OVL_ERROR_MAX];
};

struct ovl_image;

/* ---- opening -------------------------------------------------------------
 *
 * Each returns NULL and fills *error on failure (error may be NULL).
 *
 * ovl_image_open_at reads an image embedded in a container file: offset is
 * where its ELF header starts; size is its length in bytes, or
 * OVL_SIZE_UNKNOWN to derive it from the ELF headers (the end of the
 * furthest of the header tables, segments and sections), checked against
 * the container's end.  ovl_image_open_fd does the same on a descriptor the
 * caller opened (it is not closed; name labels the messages).
 * ovl_image_open_memory copies size bytes.  The image's bytes are read once
 * into memory; later changes to the file do not affect an open image.
 */
struct ovl_image *ovl_image_open(const char *path, struct ovl_error *error);
struct ovl_image *ovl_image_open_at(const char *path, uint64_t offset,
                                    uint64_t size, struct ovl_error *error);
struct ovl_image *ovl_image_open_fd(int fd, const char *name, uint64_t offset,
                                    uint64_t size, struct ovl_error *error);
struct ovl_image *ovl_image_open_memory(const void *bytes, size_t size,
                                        const char *name,
                                        struct ovl_error *error);
void ovl_image_close(struct ovl_image *image);

/* ---- what an image holds ------------------------------------------------ */

/* The label used in messages: the name, with "@0xOFFSET" when embedded. */
const char *ovl_image_label(const struct ovl_image *image);
uint64_t ovl_image_container_offset(const struct ovl_image *image);
/* The short name from the image's name note (owner "COPNAME", type 1, as
 * .note.spu_name was on Cell), or NULL when it has none. */
const char *ovl_image_short_name(const struct ovl_image *image);
uint64_t ovl_image_size(const struct ovl_image *image);
const uint8_t *ovl_image_bytes(const struct ovl_image *image);

/* A resident load segment: PT_LOAD without COP_PF_OVERLAY. */
struct ovl_segment {
    uint32_t vaddr;
    uint32_t memsz;
    uint32_t filesz;
    uint64_t file_offset;
    uint32_t flags;             /* p_flags */
    unsigned program_header;    /* its index in the program header table */
};

/* An overlay: one _ovly_table entry, its index 1-based in table order. */
struct ovl_overlay {
    unsigned index;
    unsigned region;            /* the entry's buf: 1-based region */
    uint32_t vaddr;             /* the entry's vma */
    uint32_t size;
    uint64_t file_offset;       /* the entry's file_off */
    const char *section;        /* section holding file_offset, or NULL */
};

/* An overlay region: one _ovly_buf_table word, 1-based. */
struct ovl_region {
    unsigned index;
    uint32_t ls_start;          /* extent of its overlays, [start, end); */
    uint32_t ls_end;            /* start == end when no overlay uses it */
    uint32_t guard_ls_addr;     /* LS address of its guard word */
    unsigned overlay_count;
};

unsigned ovl_image_segment_count(const struct ovl_image *image);
const struct ovl_segment *ovl_image_segment(const struct ovl_image *image,
                                            unsigned i);      /* 0-based */
unsigned ovl_image_overlay_count(const struct ovl_image *image);
const struct ovl_overlay *ovl_image_overlay(const struct ovl_image *image,
                                            unsigned index);  /* 1-based */
unsigned ovl_image_region_count(const struct ovl_image *image);
const struct ovl_region *ovl_image_region(const struct ovl_image *image,
                                          unsigned index);    /* 1-based */
/* Out-of-range indexes give NULL. */

/* ---- resolution ---------------------------------------------------------- */

enum ovl_reason {
    OVL_MAPPED = 0,         /* resolved: file_offset is valid */
    OVL_OUTSIDE_LS,         /* address >= COP_LS_SIZE */
    OVL_NO_SEGMENT,         /* no load segment or overlay region covers it */
    OVL_NO_FILE_BYTES,      /* in a segment's zero-filled tail (.bss) */
    OVL_REGION_EMPTY,       /* in an overlay region whose guard is 0 */
    OVL_GUARD_UNKNOWN,      /* in a region the caller gave no guard for */
    OVL_GUARD_INVALID,      /* the guard names no overlay of this region */
    OVL_OUTSIDE_OVERLAY,    /* past the end of the overlay loaded there */
};

/* Where an LS address lies.  For an unmapped address only ls_addr, vaddr,
 * reason and (for addresses in an overlay region) region and guard are
 * set; file_offset is OVL_NO_OFFSET, overlay 0 and section NULL. */
struct ovl_location {
    const struct ovl_image *image;
    uint32_t ls_addr;
    uint32_t vaddr;             /* ls_addr + COP_LS_BASE */
    enum ovl_reason reason;
    uint64_t file_offset;       /* from the image's first byte */
    unsigned region;            /* 1-based, 0 outside overlay regions */
    unsigned overlay;           /* 1-based, 0 for resident code */
    uint32_t guard;             /* the region's guard value used */
    const char *section;        /* section name, NULL if none */
};

/*
 * Resolves ls_addr under a guard state: guards[r - 1] is the guard word of
 * region r, for the first guard_count regions; regions beyond guard_count
 * are unknown (guards may be NULL when guard_count is 0).  Resident
 * addresses need no guard.  Never fails: every address gets a location.
 */
void ovl_resolve(const struct ovl_image *image, uint32_t ls_addr,
                 const uint32_t *guards, unsigned guard_count,
                 struct ovl_location *location);

/*
 * Every mapped location ls_addr could have whatever the guard state: one for
 * resident code, one per overlay of its region that covers it (in index
 * order), none for an unmapped address.  Fills at most max entries and
 * returns how many there are.
 */
size_t ovl_candidates(const struct ovl_image *image, uint32_t ls_addr,
                      struct ovl_location *candidates, size_t max);

/* A short fixed name for a reason: "mapped", "outside-ls", ... */
const char *ovl_reason_name(enum ovl_reason reason);

/* ---- symbols ------------------------------------------------------------- */

/* A function symbol, by its position in the image file. */
struct ovl_symbol {
    const char *name;
    uint64_t file_offset;
    uint32_t vaddr;
    uint32_t size;              /* the extent used for look-ups */
};

/*
 * The function symbol (STT_FUNC or STT_NOTYPE in an executable section)
 * covering file_offset, found by file position so overlays that share a VMA
 * stay apart.  A sized symbol covers [start, start + st_size); a zero-sized
 * label covers up to the next symbol or the end of its section.  Returns 0
 * and fills *symbol, or -1 when no symbol covers the offset.
 */
int ovl_symbol_at(const struct ovl_image *image, uint64_t file_offset,
                  struct ovl_symbol *symbol);

#endif /* COPROF_OVERLAY_H */
