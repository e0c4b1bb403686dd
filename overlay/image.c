/*
 * image.c — check a coprocessor ELF image and load what resolution needs:
 * its resident load segments and its allocated sections.
 *
 * How it works
 * ------------
 * container.c hands over the image's bytes, owned by the image; libelf
 * parses them in memory (elf_memory), so it never reads a file itself.
 *
 * Whether the image is accepted is decided first, and only, by the one
 * validator of images, common/image.c's cop_image_parse(), which cop-embed,
 * cop-run and copsim's loader run too (check_as_loader): the header, the
 * segments and overlay regions, the section table (every section in the
 * file and named, the symbol table's names), the name note and the overlay
 * tables.  What follows reads what that accepted: header, sections (names
 * and file extents), segments, the name note (note.c), symbols
 * (symbols.c), the overlay table (overlays.c), then the LS map (lsmap.c).
 * Their error paths are for what libelf itself may fail at (memory); any
 * failure frees everything and reports one line "label: reason".
 */
#include "overlay/overlay-internal.h"
#include "common/image.h"

#include <elf.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef EM_RISCV
#define EM_RISCV 243
#endif

static pthread_once_t libelf_once = PTHREAD_ONCE_INIT;
static int libelf_ready;

static void init_libelf(void)
{
    libelf_ready = elf_version(EV_CURRENT) != EV_NONE;
}

int ovl_fail(struct ovl_error *error, const char *label, const char *format,
             ...)
{
    va_list args;

    if (error == NULL)
        return -1;
    int used = snprintf(error->message, sizeof error->message, "%s: ", label);
    if (used < 0 || (size_t)used >= sizeof error->message)
        return -1;
    va_start(args, format);
    vsnprintf(error->message + used, sizeof error->message - (size_t)used,
              format, args);
    va_end(args);
    return -1;
}

int ovl_check_ident(const unsigned char *ident, const char *label,
                    struct ovl_error *error)
{
    if (memcmp(ident, ELFMAG, SELFMAG) != 0)
        return ovl_fail(error, label, "not an ELF file (bad magic number)");
    if (ident[EI_CLASS] != ELFCLASS32)
        return ovl_fail(error, label, "not a 32-bit ELF file (class %u): "
                        "coprocessor images are ELF32", ident[EI_CLASS]);
    if (ident[EI_DATA] != ELFDATA2LSB)
        return ovl_fail(error, label, "not a little-endian ELF file (data "
                        "encoding %u)", ident[EI_DATA]);
    if (ident[EI_VERSION] != EV_CURRENT)
        return ovl_fail(error, label, "unknown ELF version %u",
                        ident[EI_VERSION]);
    return 0;
}

/* The header tables are read in place, so they must be aligned. */
int ovl_check_table_offsets(uint32_t phoff, uint32_t shoff, const char *label,
                            struct ovl_error *error)
{
    if (phoff % 4 != 0 || shoff % 4 != 0)
        return ovl_fail(error, label, "header table offsets (0x%" PRIx32
                        ", 0x%" PRIx32 ") are not 4-byte aligned", phoff,
                        shoff);
    return 0;
}

static int fail_libelf(struct ovl_image *image, struct ovl_error *error,
                       const char *what)
{
    return ovl_fail(error, image->label, "%s: %s", what, elf_errmsg(-1));
}

/* The ELF header, already checked by check_as_loader(), read by libelf. */
static int open_elf(struct ovl_image *image, struct ovl_error *error)
{
    image->elf = elf_memory((char *)image->bytes, image->size);
    if (image->elf == NULL)
        return fail_libelf(image, error, "cannot parse the ELF file");
    if (elf_kind(image->elf) != ELF_K_ELF)
        return ovl_fail(error, image->label, "not an ELF file");

    if (elf32_getehdr(image->elf) == NULL)
        return fail_libelf(image, error, "cannot read the ELF header");
    return 0;
}

static int compare_sections(const void *a, const void *b)
{
    const struct section_span *x = a, *y = b;

    if (x->file_offset != y->file_offset)
        return x->file_offset < y->file_offset ? -1 : 1;
    return x->size < y->size ? -1 : x->size > y->size;
}

/*
 * Allocated sections never share file bytes in a well-formed image; in a
 * hostile one, the first of overlapping sections keeps the bytes.  Disjoint
 * sections make every look-up by file offset a plain binary search, and
 * bound the work of splitting segments by section (lsmap.c).
 */
static void drop_overlapping_sections(struct ovl_image *image)
{
    size_t kept = 0;
    uint64_t end = 0;

    for (size_t i = 0; i < image->section_count; i++) {
        const struct section_span *span = &image->sections[i];
        if (kept > 0 && span->file_offset < end)
            continue;
        image->sections[kept++] = *span;
        end = span->file_offset + span->size;
    }
    image->section_count = kept;
}

/* Adds an allocated section with file bytes (the validator saw every
 * section in the file and named). */
static int load_section(struct ovl_image *image, size_t index,
                        size_t shstrndx, struct ovl_error *error)
{
    Elf_Scn *scn = elf_getscn(image->elf, index);
    const Elf32_Shdr *shdr = scn ? elf32_getshdr(scn) : NULL;

    if (shdr == NULL)
        return fail_libelf(image, error, "cannot read a section header");
    const char *name = elf_strptr(image->elf, shstrndx, shdr->sh_name);
    if (name == NULL)
        return fail_libelf(image, error, "cannot read a section name");
    if (!(shdr->sh_flags & SHF_ALLOC) || shdr->sh_type == SHT_NOBITS ||
        shdr->sh_size == 0)
        return 0;
    image->sections[image->section_count++] = (struct section_span) {
        .file_offset = shdr->sh_offset,
        .size = shdr->sh_size,
        .name = name,
    };
    return 0;
}

static int load_sections(struct ovl_image *image, struct ovl_error *error)
{
    size_t count, shstrndx;

    if (elf_getshdrnum(image->elf, &count) != 0)
        return fail_libelf(image, error, "cannot count the sections");
    if (count <= 1)
        return 0;
    if (elf_getshdrstrndx(image->elf, &shstrndx) != 0)
        return fail_libelf(image, error, "cannot find the section name "
                           "table");
    image->sections = calloc(count, sizeof *image->sections);
    if (image->sections == NULL)
        return ovl_fail(error, image->label, "out of memory for %zu "
                        "sections", count);
    for (size_t i = 1; i < count; i++)
        if (load_section(image, i, shstrndx, error) != 0)
            return -1;
    qsort(image->sections, image->section_count, sizeof *image->sections,
          compare_sections);
    drop_overlapping_sections(image);
    return 0;
}

static int load_segments(struct ovl_image *image, struct ovl_error *error)
{
    size_t count;

    if (elf_getphdrnum(image->elf, &count) != 0)
        return fail_libelf(image, error, "cannot count the segments");
    const Elf32_Phdr *phdrs = elf32_getphdr(image->elf);
    if (phdrs == NULL)
        return fail_libelf(image, error, "cannot read the program headers");
    image->segments = calloc(count, sizeof *image->segments);
    image->overlay_segments = calloc(count,
                                     sizeof *image->overlay_segments);
    if (image->segments == NULL || image->overlay_segments == NULL)
        return ovl_fail(error, image->label, "out of memory for %zu "
                        "segments", count);
    for (size_t i = 0; i < count; i++) {
        const Elf32_Phdr *phdr = &phdrs[i];
        if (phdr->p_type != PT_LOAD)
            continue;
        if (phdr->p_flags & COP_PF_OVERLAY) {
            image->overlay_segments[image->overlay_segment_count++] =
                (struct overlay_segment) {
                    .vaddr = phdr->p_vaddr,
                    .filesz = phdr->p_filesz,
                    .file_offset = phdr->p_offset,
                    .program_header = (unsigned)i,
                };
            continue;
        }
        image->segments[image->segment_count++] = (struct ovl_segment) {
            .vaddr = phdr->p_vaddr,
            .memsz = phdr->p_memsz,
            .filesz = phdr->p_filesz,
            .file_offset = phdr->p_offset,
            .flags = phdr->p_flags,
            .program_header = (unsigned)i,
        };
    }
    return 0;
}

/*
 * The one validator of images (common/image.h, cop_image_parse()) that
 * cop-embed, cop-run and copsim's loader use: what they refuse is refused
 * here too, so coprofd and copovl never accept an image the tools that
 * run it would not (or the reverse: lsmap.c's rules are in it as well).
 */
static int check_as_loader(struct ovl_image *image, struct ovl_error *error)
{
    struct cop_image checked;
    struct cop_error err;
    size_t n = strlen(image->label);
    const char *why = err.message;

    if (cop_image_parse(image->bytes, image->size, image->label, &checked,
                        &err) == 0) {
        cop_image_release(&checked);
        return 0;
    }
    if (strncmp(why, image->label, n) == 0 && strncmp(why + n, ": ", 2) == 0)
        why += n + 2;
    return ovl_fail(error, image->label, "%s", why);
}

struct ovl_image *ovl_image_from_bytes(uint8_t *bytes, size_t size,
                                       const char *label,
                                       uint64_t container_offset,
                                       struct ovl_error *error)
{
    struct overlay_symbols found;
    struct ovl_image *image = calloc(1, sizeof *image);

    if (image == NULL || (image->label = strdup(label)) == NULL) {
        free(image);
        free(bytes);
        ovl_fail(error, label, "out of memory");
        return NULL;
    }
    image->bytes = bytes;
    image->size = size;
    image->container_offset = container_offset;

    pthread_once(&libelf_once, init_libelf);
    if (!libelf_ready) {
        ovl_fail(error, label, "libelf does not support ELF version %d",
                 EV_CURRENT);
        goto failed;
    }
    if (check_as_loader(image, error) != 0 ||
        open_elf(image, error) != 0 ||
        load_sections(image, error) != 0 ||
        load_segments(image, error) != 0 ||
        ovl_load_name_note(image, error) != 0 ||
        ovl_load_symbols(image, &found, error) != 0 ||
        ovl_load_overlays(image, &found, error) != 0 ||
        ovl_build_ls_map(image, error) != 0)
        goto failed;
    return image;

failed:
    ovl_image_close(image);
    return NULL;
}

void ovl_image_close(struct ovl_image *image)
{
    if (image == NULL)
        return;
    if (image->elf)
        elf_end(image->elf);
    free(image->bytes);
    free(image->label);
    free(image->short_name);
    free(image->segments);
    free(image->overlay_segments);
    free(image->overlays);
    free(image->regions);
    free(image->sections);
    free(image->pieces);
    free(image->functions);
    free(image->labels);
    free(image);
}

/* The allocated section whose file bytes hold file_offset (binary search). */
const char *ovl_section_at(const struct ovl_image *image, uint64_t file_offset)
{
    size_t low = 0, high = image->section_count;

    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (image->sections[middle].file_offset <= file_offset)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == 0)
        return NULL;
    const struct section_span *span = &image->sections[low - 1];
    return file_offset - span->file_offset < span->size ? span->name : NULL;
}

/* ---- accessors ----------------------------------------------------------- */

const char *ovl_image_label(const struct ovl_image *image)
{
    return image->label;
}

const char *ovl_image_short_name(const struct ovl_image *image)
{
    return image->short_name;
}

uint64_t ovl_image_container_offset(const struct ovl_image *image)
{
    return image->container_offset;
}

uint64_t ovl_image_size(const struct ovl_image *image)
{
    return image->size;
}

const uint8_t *ovl_image_bytes(const struct ovl_image *image)
{
    return image->bytes;
}

unsigned ovl_image_segment_count(const struct ovl_image *image)
{
    return image->segment_count;
}

const struct ovl_segment *ovl_image_segment(const struct ovl_image *image,
                                            unsigned i)
{
    return i < image->segment_count ? &image->segments[i] : NULL;
}

unsigned ovl_image_overlay_count(const struct ovl_image *image)
{
    return image->overlay_count;
}

const struct ovl_overlay *ovl_image_overlay(const struct ovl_image *image,
                                            unsigned index)
{
    if (index < 1 || index > image->overlay_count)
        return NULL;
    return &image->overlays[index - 1];
}

unsigned ovl_image_region_count(const struct ovl_image *image)
{
    return image->region_count;
}

const struct ovl_region *ovl_image_region(const struct ovl_image *image,
                                          unsigned index)
{
    if (index < 1 || index > image->region_count)
        return NULL;
    return &image->regions[index - 1];
}
