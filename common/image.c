/*
 * image.c — read and validate a coprocessor ELF image.
 *
 * The parser never trusts the file: every header, table and string is
 * checked against the file size before it is read, with 64-bit arithmetic so
 * that offset + size cannot wrap, and every read goes through memcpy so that
 * unaligned tables in a hostile file are harmless.  Validation runs in
 * stages, each with its own function: the ELF header, the program headers
 * (PT_LOAD segments against the file and the local store), the section
 * headers and symbol table, the name note, and finally the overlay tables,
 * whose entries must match the PF_OVERLAY segments one to one.
 *
 * The first problem found is reported as "LABEL: reason" in a struct
 * cop_error, and the partly built image is released.
 */
#include "common/image.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define OVLY_ENTRY_SIZE ((uint32_t)sizeof(struct cop_ovly_entry))

void cop_error_set(struct cop_error *err, const char *format, ...)
{
    va_list args;

    if (!err)
        return;
    va_start(args, format);
    vsnprintf(err->message, sizeof(err->message), format, args);
    va_end(args);
}

/* Whether [offset, offset + len) lies inside a file of size bytes. */
static int in_file(const struct cop_image *image, uint64_t offset, uint64_t len)
{
    return offset <= image->size && len <= image->size - offset;
}

/* Whether [addr, addr + len) lies inside the local store. */
static int in_local_store(uint64_t addr, uint64_t len)
{
    return addr >= COP_LS_BASE && addr + len <= COP_LS_END;
}

static uint32_t read_u32(const struct cop_image *image, uint32_t offset)
{
    uint32_t value;

    memcpy(&value, image->bytes + offset, sizeof(value));
    return value;
}

static int check_header(struct cop_image *image, Elf32_Ehdr *eh,
                        struct cop_error *err)
{
    if (image->size < sizeof(*eh)) {
        cop_error_set(err, "%s: too small for an ELF file (%zu bytes)",
                      image->label, image->size);
        return -1;
    }
    memcpy(eh, image->bytes, sizeof(*eh));
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
        cop_error_set(err, "%s: not an ELF file (bad magic)", image->label);
        return -1;
    }
    if (eh->e_ident[EI_CLASS] != ELFCLASS32) {
        cop_error_set(err, "%s: not a 32-bit ELF file (coprocessor images "
                      "are ELF32 RISC-V)", image->label);
        return -1;
    }
    if (eh->e_ident[EI_DATA] != ELFDATA2LSB) {
        cop_error_set(err, "%s: not a little-endian ELF file", image->label);
        return -1;
    }
    if (eh->e_ident[EI_VERSION] != EV_CURRENT) {
        cop_error_set(err, "%s: unknown ELF version %u", image->label,
                      eh->e_ident[EI_VERSION]);
        return -1;
    }
    if (eh->e_machine != EM_RISCV) {
        cop_error_set(err, "%s: not a RISC-V image (e_machine %u)",
                      image->label, eh->e_machine);
        return -1;
    }
    if (eh->e_type != ET_EXEC) {
        cop_error_set(err, "%s: not an executable (e_type %u)",
                      image->label, eh->e_type);
        return -1;
    }
    if (eh->e_flags & EF_RISCV_RVC) {
        cop_error_set(err, "%s: built with compressed instructions (RVC), "
                      "which the coprocessor ABI forbids", image->label);
        return -1;
    }
    if (eh->e_flags & EF_RISCV_FLOAT_ABI) {
        cop_error_set(err, "%s: uses a hardware floating-point ABI; the "
                      "coprocessor is RV32IM with ilp32", image->label);
        return -1;
    }
    if (image->size > COP_IMAGE_SIZE) {
        cop_error_set(err, "%s: %zu bytes, larger than the %u-byte image "
                      "window", image->label, image->size, COP_IMAGE_SIZE);
        return -1;
    }
    image->entry = eh->e_entry;
    return 0;
}

static int check_segment(const struct cop_image *image, size_t n,
                         const struct cop_segment *seg, struct cop_error *err)
{
    if (!in_file(image, seg->offset, seg->filesz)) {
        cop_error_set(err, "%s: segment %zu (offset 0x%x, %u bytes) extends "
                      "past the end of the file", image->label, n,
                      seg->offset, seg->filesz);
        return -1;
    }
    if (seg->filesz > seg->memsz) {
        cop_error_set(err, "%s: segment %zu has more file bytes (%u) than "
                      "memory bytes (%u)", image->label, n, seg->filesz,
                      seg->memsz);
        return -1;
    }
    if (!in_local_store(seg->vaddr, seg->memsz)) {
        cop_error_set(err, "%s: segment %zu (0x%08x, %u bytes) is outside "
                      "the local store 0x%08x..0x%08x", image->label, n,
                      seg->vaddr, seg->memsz, COP_LS_BASE, COP_LS_END);
        return -1;
    }
    if (seg->vaddr % COP_SEGMENT_ALIGN != 0) {
        cop_error_set(err, "%s: segment %zu at 0x%08x is not aligned to %u "
                      "bytes", image->label, n, seg->vaddr,
                      COP_SEGMENT_ALIGN);
        return -1;
    }
    if (seg->vaddr + seg->memsz > COP_LS_END - COP_STACK_LEAST) {
        cop_error_set(err, "%s: segment %zu (0x%08x..0x%08x) covers the "
                      "stack: at least %u bytes below 0x%08x must stay free",
                      image->label, n, seg->vaddr, seg->vaddr + seg->memsz,
                      COP_STACK_LEAST, COP_LS_END);
        return -1;
    }
    if (seg->overlay && (seg->filesz != seg->memsz || seg->memsz == 0)) {
        cop_error_set(err, "%s: overlay segment %zu must have equal, nonzero "
                      "file and memory sizes (%u, %u)", image->label, n,
                      seg->filesz, seg->memsz);
        return -1;
    }
    /* Code the file does not hold would run as zeros, illegal
     * instructions; with the trap vector among them the coprocessor traps
     * forever instead of ending (issue 32: a trap storm). */
    if (!seg->overlay && (seg->flags & PF_X) && seg->filesz < seg->memsz) {
        cop_error_set(err, "%s: executable segment %zu has %u of its %u "
                      "bytes in the file: the rest would run as zeros "
                      "(illegal instructions)", image->label, n, seg->filesz,
                      seg->memsz);
        return -1;
    }
    return 0;
}

static int ranges_overlap(const struct cop_segment *a,
                          const struct cop_segment *b)
{
    return a->vaddr < b->vaddr + b->memsz && b->vaddr < a->vaddr + a->memsz;
}

/* Resident segments are disjoint; overlays never cover resident memory. */
static int check_segment_overlaps(const struct cop_image *image,
                                  struct cop_error *err)
{
    for (size_t i = 0; i < image->nsegments; i++) {
        const struct cop_segment *a = &image->segments[i];
        for (size_t j = i + 1; j < image->nsegments; j++) {
            const struct cop_segment *b = &image->segments[j];
            if ((a->overlay && b->overlay) || !ranges_overlap(a, b))
                continue;
            cop_error_set(err, "%s: %s segment %zu (0x%08x..0x%08x) overlaps "
                          "%s segment %zu (0x%08x..0x%08x)", image->label,
                          a->overlay ? "overlay" : "resident", i, a->vaddr,
                          a->vaddr + a->memsz,
                          b->overlay ? "overlay" : "resident", j, b->vaddr,
                          b->vaddr + b->memsz);
            return -1;
        }
    }
    return 0;
}

static int check_entry(const struct cop_image *image, struct cop_error *err)
{
    if (image->entry != COP_LS_BASE) {
        cop_error_set(err, "%s: entry point 0x%08x, but the coprocessor starts "
                      "at 0x%08x (link with sdk/cop.ld)", image->label,
                      image->entry, COP_LS_BASE);
        return -1;
    }
    if (cop_image_file_offset(image, image->entry, 4) < 0) {
        cop_error_set(err, "%s: no resident segment holds the entry point "
                      "0x%08x", image->label, image->entry);
        return -1;
    }
    return 0;
}

static int read_segments(struct cop_image *image, const Elf32_Ehdr *eh,
                         struct cop_error *err)
{
    Elf32_Phdr ph;

    if (eh->e_phnum == 0) {
        cop_error_set(err, "%s: no program headers", image->label);
        return -1;
    }
    if (eh->e_phentsize != sizeof(ph) ||
        !in_file(image, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(ph))) {
        cop_error_set(err, "%s: program header table (offset 0x%x, %u "
                      "entries of %u bytes) is malformed or truncated",
                      image->label, eh->e_phoff, eh->e_phnum, eh->e_phentsize);
        return -1;
    }
    image->segments = calloc(eh->e_phnum, sizeof(*image->segments));
    if (!image->segments) {
        cop_error_set(err, "%s: out of memory", image->label);
        return -1;
    }
    for (size_t i = 0; i < eh->e_phnum; i++) {
        memcpy(&ph, image->bytes + eh->e_phoff + i * sizeof(ph), sizeof(ph));
        /* every segment's bytes are in the file, loaded or not (the ELF
         * readers of overlay/ refuse one that is not, and so does this) */
        if (!in_file(image, ph.p_offset, ph.p_filesz)) {
            cop_error_set(err, "%s: segment %zu (offset 0x%x, %u bytes) "
                          "extends past the end of the file", image->label,
                          i, ph.p_offset, ph.p_filesz);
            return -1;
        }
        if (ph.p_type != PT_LOAD)
            continue;
        struct cop_segment *seg = &image->segments[image->nsegments];
        *seg = (struct cop_segment){
            .offset = ph.p_offset, .vaddr = ph.p_vaddr, .paddr = ph.p_paddr,
            .filesz = ph.p_filesz, .memsz = ph.p_memsz, .flags = ph.p_flags,
            .overlay = (ph.p_flags & COP_PF_OVERLAY) != 0,
        };
        if (check_segment(image, i, seg, err) < 0)
            return -1;
        image->nsegments++;
    }
    if (image->nsegments == 0) {
        cop_error_set(err, "%s: no loadable segments", image->label);
        return -1;
    }
    if (check_segment_overlaps(image, err) < 0)
        return -1;
    return check_entry(image, err);
}

static int read_section_header(const struct cop_image *image, uint32_t index,
                               Elf32_Shdr *sh)
{
    if (index >= image->shnum)
        return -1;
    memcpy(sh, image->bytes + image->shoff + index * sizeof(*sh), sizeof(*sh));
    return 0;
}

/* The name of section sh from the section-name string table, or "". */
static const char *section_name(const struct cop_image *image,
                                const Elf32_Shdr *strings, const Elf32_Shdr *sh)
{
    if (!strings || sh->sh_name >= strings->sh_size)
        return "";
    const char *name = (const char *)image->bytes + strings->sh_offset +
                       sh->sh_name;
    if (!memchr(name, '\0', strings->sh_size - sh->sh_name))
        return "";
    return name;
}

/* Whether offset names a NUL-terminated string inside section strings
 * (what libelf's elf_strptr() asks of a name, in overlay/). */
static int valid_string(const struct cop_image *image,
                        const Elf32_Shdr *strings, uint32_t offset)
{
    if (offset >= strings->sh_size)
        return 0;
    return memchr(image->bytes + strings->sh_offset + offset, '\0',
                  strings->sh_size - offset) != NULL;
}

/* Every symbol has a name in the table's string table (a symbol whose
 * name offset is outside it is a damaged table, not a nameless symbol). */
static int check_symbol_names(const struct cop_image *image,
                              const Elf32_Shdr *symtab,
                              const Elf32_Shdr *strings, struct cop_error *err)
{
    Elf32_Sym sym;

    for (uint32_t i = 1; i < image->symtab_count; i++) {
        memcpy(&sym, image->bytes + image->symtab_offset + i * sizeof(sym),
               sizeof(sym));
        if (!valid_string(image, strings, sym.st_name)) {
            cop_error_set(err, "%s: symbol %u has no valid name (offset %u "
                          "in string table section %u)", image->label, i,
                          sym.st_name, symtab->sh_link);
            return -1;
        }
    }
    return 0;
}

/* The first SHT_SYMTAB section (after section 0) is the symbol table: whole
 * entries, and a string table that holds every symbol's name. */
static int find_symbol_table(struct cop_image *image, struct cop_error *err)
{
    Elf32_Shdr sh, link;

    for (uint32_t i = 1; i < image->shnum; i++) {
        read_section_header(image, i, &sh);
        if (sh.sh_type != SHT_SYMTAB)
            continue;
        if (sh.sh_entsize != sizeof(Elf32_Sym) ||
            sh.sh_size % sizeof(Elf32_Sym) != 0 ||
            read_section_header(image, sh.sh_link, &link) < 0 ||
            link.sh_type != SHT_STRTAB || link.sh_size == 0 ||
            image->bytes[link.sh_offset + link.sh_size - 1] != '\0') {
            cop_error_set(err, "%s: malformed symbol table (section %u)",
                          image->label, i);
            return -1;
        }
        image->symtab_offset = sh.sh_offset;
        image->symtab_count = sh.sh_size / sizeof(Elf32_Sym);
        image->strtab_offset = link.sh_offset;
        image->strtab_size = link.sh_size;
        return check_symbol_names(image, &sh, &link, err);
    }
    return 0;
}

/*
 * ELF extended numbering (PN_XNUM program headers, e_shnum 0 with section
 * headers, SHN_XINDEX): the real counts are in section header 0 (sh_info,
 * sh_size, sh_link), put back into eh here, as libelf (overlay/) reads
 * them, so the tools agree on such an image.
 */
static int extended_numbering(const struct cop_image *image, Elf32_Ehdr *eh,
                              struct cop_error *err)
{
    Elf32_Shdr sh0;

    if (eh->e_phnum != PN_XNUM && eh->e_shstrndx != SHN_XINDEX
        && !(eh->e_shnum == 0 && eh->e_shoff != 0))
        return 0;
    if (eh->e_shoff == 0 || eh->e_shentsize != sizeof(sh0)
        || !in_file(image, eh->e_shoff, sizeof(sh0))) {
        cop_error_set(err, "%s: extended ELF numbering without a section "
                      "header 0 to hold the counts", image->label);
        return -1;
    }
    memcpy(&sh0, image->bytes + eh->e_shoff, sizeof(sh0));
    if ((eh->e_phnum == PN_XNUM && sh0.sh_info >= PN_XNUM)
        || (eh->e_shnum == 0 && sh0.sh_size >= SHN_LORESERVE)
        || (eh->e_shstrndx == SHN_XINDEX && sh0.sh_link >= SHN_LORESERVE)) {
        cop_error_set(err, "%s: more program or section headers than a "
                      "coprocessor image can have", image->label);
        return -1;
    }
    if (eh->e_phnum == PN_XNUM)
        eh->e_phnum = (Elf32_Half)sh0.sh_info;
    if (eh->e_shnum == 0)
        eh->e_shnum = (Elf32_Half)sh0.sh_size;
    if (eh->e_shstrndx == SHN_XINDEX)
        eh->e_shstrndx = (Elf32_Half)sh0.sh_link;
    return 0;
}

/* The header tables are read in place by libelf (overlay/), so they must
 * be 4-byte aligned, and the section headers cannot start at the ELF
 * header. */
static int check_table_offsets(const struct cop_image *image,
                               const Elf32_Ehdr *eh, struct cop_error *err)
{
    if (eh->e_phoff % 4 != 0 || eh->e_shoff % 4 != 0) {
        cop_error_set(err, "%s: header table offsets (0x%x, 0x%x) are not "
                      "4-byte aligned", image->label, eh->e_phoff,
                      eh->e_shoff);
        return -1;
    }
    if (eh->e_shoff == 0 && eh->e_shnum != 0) {
        cop_error_set(err, "%s: %u section headers at offset 0, over the "
                      "ELF header", image->label, eh->e_shnum);
        return -1;
    }
    return 0;
}

/* Section names: the name table is a string table among the sections, and
 * every section after 0 has a name in it. */
static int check_section_names(const struct cop_image *image,
                               const Elf32_Ehdr *eh, struct cop_error *err)
{
    Elf32_Shdr strings, sh;

    if (eh->e_shstrndx == SHN_UNDEF ||
        read_section_header(image, eh->e_shstrndx, &strings) < 0 ||
        strings.sh_type != SHT_STRTAB) {
        cop_error_set(err, "%s: bad section-name string table index %u (%u "
                      "sections)", image->label, eh->e_shstrndx, image->shnum);
        return -1;
    }
    for (uint32_t i = 1; i < image->shnum; i++) {
        read_section_header(image, i, &sh);
        if (!valid_string(image, &strings, sh.sh_name)) {
            cop_error_set(err, "%s: section %u has no valid name (offset %u "
                          "in the section name table)", image->label, i,
                          sh.sh_name);
            return -1;
        }
    }
    return 0;
}

/*
 * The section headers, when there are any: the table in the file, every
 * section's bytes in the file, every section named, and the symbol table
 * well formed.  A damaged section table refuses the image in every tool
 * (overlay/ reads names and symbols from it).
 */
static int read_sections(struct cop_image *image, const Elf32_Ehdr *eh,
                         struct cop_error *err)
{
    Elf32_Shdr sh;

    if (check_table_offsets(image, eh, err) < 0)
        return -1;
    if (eh->e_shoff == 0 || eh->e_shnum == 0)
        return 0;
    if (eh->e_shentsize != sizeof(sh) ||
        !in_file(image, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(sh))) {
        cop_error_set(err, "%s: section header table (offset 0x%x, %u "
                      "entries of %u bytes) is malformed or truncated",
                      image->label, eh->e_shoff, eh->e_shnum, eh->e_shentsize);
        return -1;
    }
    image->shoff = eh->e_shoff;
    image->shnum = eh->e_shnum;
    for (uint32_t i = 1; i < image->shnum; i++) {
        read_section_header(image, i, &sh);
        if (sh.sh_type != SHT_NOBITS &&
            !in_file(image, sh.sh_offset, sh.sh_size)) {
            cop_error_set(err, "%s: section %u (offset 0x%x, %u bytes) extends "
                          "past the end of the file", image->label, i,
                          sh.sh_offset, sh.sh_size);
            return -1;
        }
    }
    if (image->shnum > 1 && check_section_names(image, eh, err) < 0)
        return -1;
    return find_symbol_table(image, err);
}

static int valid_name(const char *name, size_t len)
{
    if (len == 0 || len > COP_NAME_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

static uint32_t align4(uint32_t n)
{
    return (n + 3u) & ~3u;
}

/*
 * Scans the notes in [offset, offset + size) for the COPNAME note.  Returns
 * 1 when found (name stored), 0 when absent, -1 on a malformed note.
 */
static int scan_notes(struct cop_image *image, uint32_t offset, uint32_t size,
                      struct cop_error *err)
{
    static const char owner[] = COP_NOTE_OWNER;
    uint64_t pos = offset, end = (uint64_t)offset + size;

    while (pos + sizeof(Elf32_Nhdr) <= end) {
        Elf32_Nhdr nh;
        memcpy(&nh, image->bytes + pos, sizeof(nh));
        uint64_t name_at = pos + sizeof(nh);
        uint64_t desc_at = name_at + align4(nh.n_namesz);
        uint64_t next = desc_at + align4(nh.n_descsz);
        if (nh.n_namesz > size || nh.n_descsz > size || next > end) {
            cop_error_set(err, "%s: malformed note at offset 0x%llx",
                          image->label, (unsigned long long)pos);
            return -1;
        }
        if (nh.n_type == NT_COP_NAME && nh.n_namesz == sizeof(owner) &&
            memcmp(image->bytes + name_at, owner, sizeof(owner)) == 0) {
            const char *name = (const char *)image->bytes + desc_at;
            size_t len = nh.n_descsz ? strnlen(name, nh.n_descsz) : 0;
            if (len == nh.n_descsz || !valid_name(name, len)) {
                cop_error_set(err, "%s: the %s note does not hold a name of "
                              "1 to %u characters [A-Za-z0-9_.-]",
                              image->label, COP_NOTE_OWNER, COP_NAME_MAX);
                return -1;
            }
            memcpy(image->name, name, len);
            image->name[len] = '\0';
            return 1;
        }
        pos = next;
    }
    return 0;
}

/* The name note, looked for in PT_NOTE segments, then in SHT_NOTE sections. */
static int read_name(struct cop_image *image, const Elf32_Ehdr *eh,
                     struct cop_error *err)
{
    Elf32_Phdr ph;
    Elf32_Shdr sh;
    int found;

    for (size_t i = 0; i < eh->e_phnum; i++) {
        memcpy(&ph, image->bytes + eh->e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type != PT_NOTE)
            continue;
        if (!in_file(image, ph.p_offset, ph.p_filesz)) {
            cop_error_set(err, "%s: note segment %zu extends past the end of "
                          "the file", image->label, i);
            return -1;
        }
        found = scan_notes(image, ph.p_offset, ph.p_filesz, err);
        if (found != 0)
            return found < 0 ? -1 : 0;
    }
    for (uint32_t i = 1; i < image->shnum; i++) {
        read_section_header(image, i, &sh);
        if (sh.sh_type != SHT_NOTE)
            continue;
        found = scan_notes(image, sh.sh_offset, sh.sh_size, err);
        if (found != 0)
            return found < 0 ? -1 : 0;
    }
    return 0;
}

int cop_image_symbol(const struct cop_image *image, const char *name,
                     uint32_t *value, uint32_t *size)
{
    Elf32_Sym sym;

    for (uint32_t i = 1; i < image->symtab_count; i++) {
        memcpy(&sym, image->bytes + image->symtab_offset + i * sizeof(sym),
               sizeof(sym));
        if (sym.st_name >= image->strtab_size || sym.st_shndx == SHN_UNDEF)
            continue;
        if (strcmp((const char *)image->bytes + image->strtab_offset +
                   sym.st_name, name) != 0)
            continue;
        if (value)
            *value = sym.st_value;
        if (size)
            *size = sym.st_size;
        return 0;
    }
    return -1;
}

long cop_image_file_offset(const struct cop_image *image, uint32_t addr,
                           uint32_t len)
{
    for (size_t i = 0; i < image->nsegments; i++) {
        const struct cop_segment *seg = &image->segments[i];
        if (seg->overlay || addr < seg->vaddr)
            continue;
        if ((uint64_t)addr + len <= (uint64_t)seg->vaddr + seg->filesz)
            return (long)(seg->offset + (addr - seg->vaddr));
    }
    return -1;
}

size_t cop_image_overlay_segments(const struct cop_image *image)
{
    size_t n = 0;

    for (size_t i = 0; i < image->nsegments; i++)
        n += image->segments[i].overlay;
    return n;
}

/*
 * Finds one table given by its start and end symbols: its address and its
 * number of entries of entry_size bytes, which must lie in the file part of
 * a resident segment.  A table whose symbols are both absent is empty.
 */
static int find_table(struct cop_image *image, const char *start_name,
                      const char *end_name, uint32_t entry_size,
                      uint32_t *addr, uint32_t *count, struct cop_error *err)
{
    uint32_t start, end;
    int has_start = cop_image_symbol(image, start_name, &start, NULL) == 0;
    int has_end = cop_image_symbol(image, end_name, &end, NULL) == 0;

    *addr = 0;
    *count = 0;
    if (!has_start && !has_end)
        return 0;
    if (!has_start || !has_end || end < start ||
        (end - start) % entry_size != 0) {
        cop_error_set(err, "%s: symbols %s and %s do not delimit a table of "
                      "%u-byte entries", image->label, start_name, end_name,
                      entry_size);
        return -1;
    }
    if (end > start && cop_image_file_offset(image, start, end - start) < 0) {
        cop_error_set(err, "%s: %s (0x%08x..0x%08x) is not in the file part "
                      "of a resident segment", image->label, start_name,
                      start, end);
        return -1;
    }
    *addr = start;
    *count = (end - start) / entry_size;
    return 0;
}

static int find_overlay_tables(struct cop_image *image, struct cop_error *err)
{
    uint32_t entries;
    size_t segments = cop_image_overlay_segments(image);

    if (segments > 0 && image->symtab_count == 0) {
        cop_error_set(err, "%s: %zu overlay segments but no symbol table to "
                      "find _ovly_table in (stripped?)", image->label,
                      segments);
        return -1;
    }
    if (find_table(image, "_ovly_table", "_ovly_table_end", OVLY_ENTRY_SIZE,
                   &image->ovly_table, &entries, err) < 0 ||
        find_table(image, "_ovly_buf_table", "_ovly_buf_table_end", 4,
                   &image->ovly_buf_table, &image->nregions, err) < 0)
        return -1;
    if (entries != segments) {
        cop_error_set(err, "%s: _ovly_table has %u entries for %zu overlay "
                      "segments", image->label, entries, segments);
        return -1;
    }
    image->overlays = calloc(entries ? entries : 1, sizeof(*image->overlays));
    if (!image->overlays) {
        cop_error_set(err, "%s: out of memory", image->label);
        return -1;
    }
    image->noverlays = entries;
    return 0;
}

/* The name of the section at (vma, file_off), or "". */
static const char *overlay_section(const struct cop_image *image,
                                   uint32_t vma, uint32_t file_off)
{
    Elf32_Ehdr eh;
    Elf32_Shdr strings, sh;

    memcpy(&eh, image->bytes, sizeof(eh));
    if (extended_numbering(image, &eh, &(struct cop_error){{0}}) < 0
        || read_section_header(image, eh.e_shstrndx, &strings) < 0)
        return "";
    for (uint32_t i = 1; i < image->shnum; i++) {
        read_section_header(image, i, &sh);
        if (sh.sh_type == SHT_PROGBITS && sh.sh_addr == vma &&
            sh.sh_offset == file_off)
            return section_name(image, &strings, &sh);
    }
    return "";
}

/* The overlay segment an entry describes, or -1 with err set. */
static long match_overlay_segment(const struct cop_image *image,
                                  const struct cop_overlay *ovl,
                                  struct cop_error *err)
{
    for (size_t i = 0; i < image->nsegments; i++) {
        const struct cop_segment *seg = &image->segments[i];
        if (seg->overlay && seg->offset == ovl->file_off &&
            seg->vaddr == ovl->vma && seg->filesz == ovl->size)
            return (long)i;
    }
    cop_error_set(err, "%s: _ovly_table entry %u {vma 0x%08x, size %u, "
                  "file_off 0x%x} matches no overlay segment (was the image "
                  "finished by cop-overlays finish?)", image->label,
                  ovl->index, ovl->vma, ovl->size, ovl->file_off);
    return -1;
}

/* Region r's extent in the local store: from its lowest overlay's start
 * to its highest overlay's end; 0 when no overlay uses it. */
static int region_extent(const struct cop_image *image, uint32_t r,
                         uint64_t *start, uint64_t *end)
{
    int found = 0;

    for (size_t i = 0; i < image->noverlays; i++) {
        const struct cop_overlay *ovl = &image->overlays[i];

        if (ovl->buf != r)
            continue;
        if (!found || ovl->vma < *start)
            *start = ovl->vma;
        if (!found || (uint64_t)ovl->vma + ovl->size > *end)
            *end = (uint64_t)ovl->vma + ovl->size;
        found = 1;
    }
    return found;
}

/*
 * Overlay regions are disjoint in the local store: an overlay loaded into
 * one must never overwrite another region's, or the guard words could not
 * say which overlay an address holds (coprofd and copovl would resolve
 * nothing).  The rule overlay/lsmap.c applied alone before issue 32.
 */
static int check_regions_disjoint(const struct cop_image *image,
                                  struct cop_error *err)
{
    for (uint32_t a = 1; a <= image->nregions; a++) {
        uint64_t a0, a1, b0, b1;

        if (!region_extent(image, a, &a0, &a1))
            continue;
        for (uint32_t b = a + 1; b <= image->nregions; b++) {
            if (!region_extent(image, b, &b0, &b1) || a1 <= b0 || b1 <= a0)
                continue;
            cop_error_set(err, "%s: overlay region %u (LS 0x%" PRIx64 "-0x%"
                          PRIx64 ") overlaps overlay region %u (LS 0x%"
                          PRIx64 "-0x%" PRIx64 ") in the local store",
                          image->label, a, a0, a1, b, b0, b1);
            return -1;
        }
    }
    return 0;
}

int cop_image_check_overlays(struct cop_image *image, struct cop_error *err)
{
    long base = cop_image_file_offset(image, image->ovly_table,
                                      (uint32_t)image->noverlays *
                                      OVLY_ENTRY_SIZE);
    long guards = cop_image_file_offset(image, image->ovly_buf_table,
                                        image->nregions * 4);
    unsigned char *used = calloc(image->nsegments + 1, 1);

    if (!used) {
        cop_error_set(err, "%s: out of memory", image->label);
        return -1;
    }
    for (uint32_t i = 0; i < image->noverlays; i++) {
        struct cop_overlay *ovl = &image->overlays[i];
        uint32_t at = (uint32_t)base + i * OVLY_ENTRY_SIZE;
        *ovl = (struct cop_overlay){
            .index = i + 1,
            .vma = read_u32(image, at),
            .size = read_u32(image, at + 4),
            .file_off = read_u32(image, at + 8),
            .buf = read_u32(image, at + 12),
        };
        long seg = match_overlay_segment(image, ovl, err);
        if (seg < 0 || used[seg]) {
            if (seg >= 0)
                cop_error_set(err, "%s: _ovly_table entry %u describes the "
                              "same segment as another entry", image->label,
                              ovl->index);
            free(used);
            return -1;
        }
        used[seg] = 1;
        if (ovl->buf < 1 || ovl->buf > image->nregions) {
            cop_error_set(err, "%s: _ovly_table entry %u names region %u, but "
                          "_ovly_buf_table has %u", image->label, ovl->index,
                          ovl->buf, image->nregions);
            free(used);
            return -1;
        }
        ovl->section = overlay_section(image, ovl->vma, ovl->file_off);
    }
    free(used);
    if (check_regions_disjoint(image, err) < 0)
        return -1;
    for (uint32_t r = 0; r < image->nregions; r++) {
        uint32_t word = read_u32(image, (uint32_t)guards + 4 * r);
        if (word != 0) {
            cop_error_set(err, "%s: guard word %u is %u in the image; it must "
                          "start as 0 (nothing loaded)", image->label, r + 1,
                          word);
            return -1;
        }
    }
    return 0;
}

static int set_label(struct cop_image *image, const char *label,
                     struct cop_error *err)
{
    image->label = strdup(label ? label : "(image)");
    if (!image->label) {
        cop_error_set(err, "%s: out of memory", label ? label : "(image)");
        return -1;
    }
    return 0;
}

int cop_image_parse_layout(const void *bytes, size_t size, const char *label,
                           struct cop_image *image, struct cop_error *err)
{
    Elf32_Ehdr eh;

    memset(image, 0, sizeof(*image));
    image->bytes = bytes;
    image->size = size;
    if (set_label(image, label, err) < 0)
        return -1;
    if (check_header(image, &eh, err) < 0 ||
        extended_numbering(image, &eh, err) < 0 ||
        read_segments(image, &eh, err) < 0 ||
        read_sections(image, &eh, err) < 0 ||
        read_name(image, &eh, err) < 0 ||
        find_overlay_tables(image, err) < 0) {
        cop_image_release(image);
        return -1;
    }
    return 0;
}

int cop_image_parse(const void *bytes, size_t size, const char *label,
                    struct cop_image *image, struct cop_error *err)
{
    if (cop_image_parse_layout(bytes, size, label, image, err) < 0)
        return -1;
    if (cop_image_check_overlays(image, err) < 0) {
        cop_image_release(image);
        return -1;
    }
    return 0;
}

unsigned char *cop_read_file(const char *path, size_t max_size, size_t *size,
                             struct cop_error *err)
{
    FILE *file = fopen(path, "rb");
    struct stat st;
    unsigned char *bytes = NULL;

    if (!file) {
        cop_error_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fileno(file), &st) < 0 || !S_ISREG(st.st_mode)) {
        cop_error_set(err, "%s: not a regular file", path);
    } else if ((unsigned long long)st.st_size > max_size) {
        cop_error_set(err, "%s: %lld bytes, more than the %zu that fit",
                      path, (long long)st.st_size, max_size);
    } else if (!(bytes = malloc(st.st_size ? st.st_size : 1))) {
        cop_error_set(err, "%s: out of memory", path);
    } else if (fread(bytes, 1, st.st_size, file) != (size_t)st.st_size) {
        cop_error_set(err, "%s: read error", path);
        free(bytes);
        bytes = NULL;
    } else {
        *size = st.st_size;
    }
    fclose(file);
    return bytes;
}

int cop_image_read(const char *path, struct cop_image *image,
                   struct cop_error *err)
{
    size_t size = 0;
    unsigned char *bytes = cop_read_file(path, COP_IMAGE_SIZE, &size, err);

    if (!bytes)
        return -1;
    if (cop_image_parse(bytes, size, path, image, err) < 0) {
        free(bytes);
        return -1;
    }
    image->owned = bytes;
    return 0;
}

void cop_image_release(struct cop_image *image)
{
    free(image->label);
    free(image->segments);
    free(image->overlays);
    free(image->owned);
    memset(image, 0, sizeof(*image));
}
