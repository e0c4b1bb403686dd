/*
 * overlay-internal.h — the representation of an open image, shared by the
 * files of overlay/ and by nothing else.
 *
 *   container.c  reads an image's bytes from a file or a container file
 *   image.c      checks the ELF file (through libelf) and loads its
 *                segments and sections
 *   note.c       the image's short name, from its COPNAME note
 *   symbols.c    the symbol table: function symbols by file position and
 *                the four overlay-table symbols
 *   overlays.c   the overlay table and the regions
 *   lsmap.c      the map from LS address to file offset; resolution and
 *                candidates
 */
#ifndef COPROF_OVERLAY_INTERNAL_H
#define COPROF_OVERLAY_INTERNAL_H

#include "overlay/overlay.h"

#include <libelf.h>
#include <stdarg.h>

#define OVL_IMAGE_MAX  (256u << 20)   /* largest image accepted: 256 MiB */

/* An allocated section with file bytes: what a file offset falls in. */
struct section_span {
    uint64_t file_offset;
    uint64_t size;
    const char *name;
};

/* One piece of the LS map, [start, end) in LS addresses. */
enum piece_kind {
    PIECE_FILE,     /* resident bytes backed by the file at file_base */
    PIECE_ZERO,     /* resident zero-filled tail of a segment */
    PIECE_REGION,   /* an overlay region; index is the region */
};

struct ls_piece {
    uint32_t start;
    uint32_t end;
    enum piece_kind kind;
    unsigned index;         /* program header index, or region index */
    uint64_t file_base;     /* file offset of start, for PIECE_FILE */
    const char *section;    /* the section of a PIECE_FILE, or NULL */
};

/* A PF_OVERLAY load segment, matched one to one with an _ovly_table entry. */
struct overlay_segment {
    uint32_t vaddr;
    uint32_t filesz;
    uint64_t file_offset;
    unsigned program_header;
    unsigned entry;         /* the 1-based entry that matched it, or 0 */
};

/* A symbol with the file extent used for look-ups, [start, end). */
struct symbol_span {
    uint64_t start;
    uint64_t end;
    uint32_t vaddr;
    const char *name;
};

struct ovl_image {
    char *label;
    uint64_t container_offset;
    uint8_t *bytes;
    size_t size;
    Elf *elf;

    char *short_name;                   /* from the name note, or NULL */
    struct ovl_segment *segments;       /* resident PT_LOAD segments */
    unsigned segment_count;
    struct overlay_segment *overlay_segments;   /* sorted, see overlays.c */
    unsigned overlay_segment_count;
    struct ovl_overlay *overlays;       /* overlays[i] has index i + 1 */
    unsigned overlay_count;
    struct ovl_region *regions;         /* regions[i] has index i + 1 */
    unsigned region_count;

    struct section_span *sections;      /* sorted by file_offset, disjoint */
    size_t section_count;
    struct ls_piece *pieces;            /* sorted by start, disjoint */
    size_t piece_count;
    struct symbol_span *functions;      /* STT_FUNC, sorted, disjoint starts */
    size_t function_count;
    struct symbol_span *labels;         /* STT_NOTYPE, the same */
    size_t label_count;
};

/* Writes "label: reason" into *error (if not NULL); returns -1. */
int ovl_fail(struct ovl_error *error, const char *label, const char *format,
             ...) __attribute__((format(printf, 3, 4)));

/* Checks e_ident for a 32-bit little-endian ELF file; 0 or -1. */
int ovl_check_ident(const unsigned char *ident, const char *label,
                    struct ovl_error *error);

/* Checks that e_phoff and e_shoff are 4-byte aligned; 0 or -1. */
int ovl_check_table_offsets(uint32_t phoff, uint32_t shoff, const char *label,
                            struct ovl_error *error);

/*
 * Builds an image from size bytes that it takes ownership of (freed on
 * failure too).  label is copied.
 */
struct ovl_image *ovl_image_from_bytes(uint8_t *bytes, size_t size,
                                       const char *label,
                                       uint64_t container_offset,
                                       struct ovl_error *error);

/* image.c: the name of the section holding file_offset, or NULL. */
const char *ovl_section_at(const struct ovl_image *image,
                           uint64_t file_offset);

/* note.c: the image's short name from its name note, if it has one. */
int ovl_load_name_note(struct ovl_image *image, struct ovl_error *error);

/* The four symbols that locate the overlay tables (symbols.c finds them). */
enum overlay_symbol {
    SYM_OVLY_TABLE,
    SYM_OVLY_TABLE_END,
    SYM_OVLY_BUF_TABLE,
    SYM_OVLY_BUF_TABLE_END,
    SYM_OVERLAY_COUNT
};

struct overlay_symbols {
    int defined[SYM_OVERLAY_COUNT];
    uint32_t value[SYM_OVERLAY_COUNT];
};

extern const char *const ovl_overlay_symbol_names[SYM_OVERLAY_COUNT];

/* symbols.c: reads .symtab, if any, into the function and label indexes. */
int ovl_load_symbols(struct ovl_image *image, struct overlay_symbols *found,
                     struct ovl_error *error);

/* overlays.c: reads the overlay and guard tables the symbols locate. */
int ovl_load_overlays(struct ovl_image *image,
                      const struct overlay_symbols *found,
                      struct ovl_error *error);

/* lsmap.c: built once the segments and overlays are loaded. */
int ovl_build_ls_map(struct ovl_image *image, struct ovl_error *error);

#endif /* COPROF_OVERLAY_INTERNAL_H */
