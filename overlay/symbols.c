/*
 * symbols.c — the image's symbol table: function symbols indexed by file
 * position, and the four symbols that locate the overlay tables.
 *
 * How it works
 * ------------
 * Overlays that share a VMA have symbols with equal values, so symbols are
 * indexed by where their bytes lie in the image file instead: for a symbol
 * defined in section S, file offset = S.sh_offset + (st_value - S.sh_addr).
 * Only symbols of allocated, executable sections with file bytes count, and
 * their value must lie inside the section.
 *
 * Extents: a symbol with a size covers [start, start + st_size), clipped to
 * its section; one without (an assembly label) covers up to the next
 * symbol's start or its section's end.  Of several symbols at one start, a
 * sized one wins, then GLOBAL over WEAK over LOCAL, then the smaller name.
 * STT_FUNC symbols and STT_NOTYPE labels go into two sorted arrays;
 * ovl_symbol_at looks in the functions first, so a label never hides the
 * function around it.
 *
 * The table was checked by the one validator of images (common/image.c:
 * whole 16-byte entries, every name inside its string table, NUL
 * terminated); names come from elf_strptr and every symbol is copied out
 * of the section data, whose size libelf checked against the image.
 */
#include "overlay/overlay-internal.h"

#include <elf.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *const ovl_overlay_symbol_names[SYM_OVERLAY_COUNT] = {
    [SYM_OVLY_TABLE] = "_ovly_table",
    [SYM_OVLY_TABLE_END] = "_ovly_table_end",
    [SYM_OVLY_BUF_TABLE] = "_ovly_buf_table",
    [SYM_OVLY_BUF_TABLE_END] = "_ovly_buf_table_end",
};

/* A symbol that may name code, while the index is built. */
struct candidate {
    struct symbol_span span;
    uint64_t section_end;
    int sized;
    int is_function;
    int binding_rank;       /* 0 GLOBAL, 1 WEAK, 2 LOCAL and others */
};

static Elf_Scn *find_symtab(Elf *elf)
{
    Elf_Scn *scn = NULL;

    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        const Elf32_Shdr *shdr = elf32_getshdr(scn);
        if (shdr && shdr->sh_type == SHT_SYMTAB)
            return scn;
    }
    return NULL;
}

static void note_overlay_symbol(struct overlay_symbols *found,
                                const char *name, const Elf32_Sym *sym)
{
    if (sym->st_shndx == SHN_UNDEF)
        return;
    for (int i = 0; i < SYM_OVERLAY_COUNT; i++) {
        if (!found->defined[i] &&
            strcmp(name, ovl_overlay_symbol_names[i]) == 0) {
            found->defined[i] = 1;
            found->value[i] = sym->st_value;
        }
    }
}

static int binding_rank(unsigned char info)
{
    switch (ELF32_ST_BIND(info)) {
    case STB_GLOBAL:
        return 0;
    case STB_WEAK:
        return 1;
    default:
        return 2;
    }
}

/* Fills *out when sym names code in an executable section; 1 if it does. */
static int code_symbol(const struct ovl_image *image, const char *name,
                       const Elf32_Sym *sym, size_t section_count,
                       struct candidate *out)
{
    int type = ELF32_ST_TYPE(sym->st_info);

    if (type != STT_FUNC && type != STT_NOTYPE)
        return 0;
    if (name[0] == '\0' || name[0] == '$' || strncmp(name, ".L", 2) == 0)
        return 0;
    if (sym->st_shndx == SHN_UNDEF || sym->st_shndx >= SHN_LORESERVE ||
        sym->st_shndx >= section_count)
        return 0;
    Elf_Scn *scn = elf_getscn(image->elf, sym->st_shndx);
    const Elf32_Shdr *shdr = scn ? elf32_getshdr(scn) : NULL;
    if (shdr == NULL || shdr->sh_type == SHT_NOBITS ||
        (shdr->sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) !=
            (SHF_ALLOC | SHF_EXECINSTR))
        return 0;
    if (sym->st_value < shdr->sh_addr ||
        sym->st_value - shdr->sh_addr >= shdr->sh_size)
        return 0;

    uint64_t start = (uint64_t)shdr->sh_offset + (sym->st_value - shdr->sh_addr);
    uint64_t section_end = (uint64_t)shdr->sh_offset + shdr->sh_size;
    uint64_t end = start + sym->st_size;
    *out = (struct candidate) {
        .span = { .start = start, .end = end < section_end ? end : section_end,
                  .vaddr = sym->st_value, .name = name },
        .section_end = section_end,
        .sized = sym->st_size > 0,
        .is_function = type == STT_FUNC,
        .binding_rank = binding_rank(sym->st_info),
    };
    return 1;
}

static int compare_starts(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;

    if (x->span.start != y->span.start)
        return x->span.start < y->span.start ? -1 : 1;
    return 0;
}

/* Which of two candidates at one start names it: sized, bound, by name. */
static int better(const struct candidate *x, const struct candidate *y)
{
    if (x->sized != y->sized)
        return x->sized;
    if (x->binding_rank != y->binding_rank)
        return x->binding_rank < y->binding_rank;
    return strcmp(x->span.name, y->span.name) < 0;
}

/* Unsized symbols end at the next greater start or their section's end. */
static void extend_labels(struct candidate *all, size_t count)
{
    size_t next = 0;

    for (size_t i = 0; i < count; i++) {
        if (all[i].sized)
            continue;
        if (next <= i)
            next = i + 1;
        while (next < count && all[next].span.start == all[i].span.start)
            next++;
        uint64_t end = all[i].section_end;
        if (next < count && all[next].span.start < end)
            end = all[next].span.start;
        all[i].span.end = end;
    }
}

/* Copies the candidates of one kind, one per start, into a new array. */
static struct symbol_span *pick(const struct candidate *all, size_t count,
                                int functions, size_t *picked)
{
    struct symbol_span *spans = malloc((count ? count : 1) * sizeof *spans);
    const struct candidate *best = NULL;

    *picked = 0;
    if (spans == NULL)
        return NULL;
    for (size_t i = 0; i <= count; i++) {
        const struct candidate *c = i < count ? &all[i] : NULL;
        if (c && c->is_function != functions)
            continue;
        if (best && (c == NULL || c->span.start != best->span.start)) {
            spans[(*picked)++] = best->span;
            best = NULL;
        }
        if (c && (best == NULL || better(c, best)))
            best = c;
    }
    return spans;
}

static int build_index(struct ovl_image *image, struct candidate *all,
                       size_t count, struct ovl_error *error)
{
    qsort(all, count, sizeof *all, compare_starts);
    extend_labels(all, count);
    image->functions = pick(all, count, 1, &image->function_count);
    image->labels = pick(all, count, 0, &image->label_count);
    if (image->functions == NULL || image->labels == NULL)
        return ovl_fail(error, image->label, "out of memory for %zu symbols",
                        count);
    return 0;
}

static int read_symbols(struct ovl_image *image, Elf_Scn *scn,
                        struct overlay_symbols *found,
                        struct ovl_error *error)
{
    const Elf32_Shdr *shdr = elf32_getshdr(scn);
    size_t section_count;

    if (shdr == NULL || elf_getshdrnum(image->elf, &section_count) != 0)
        return ovl_fail(error, image->label, "cannot read the symbol table "
                        "header: %s", elf_errmsg(-1));
    Elf_Data *data = elf_getdata(scn, NULL);
    if (data == NULL)
        return ovl_fail(error, image->label, "cannot read the symbol table: "
                        "%s", elf_errmsg(-1));

    size_t count = data->d_size / sizeof(Elf32_Sym), used = 0;
    struct candidate *all = malloc((count ? count : 1) * sizeof *all);
    if (all == NULL)
        return ovl_fail(error, image->label, "out of memory for %zu symbols",
                        count);
    for (size_t i = 1; i < count; i++) {
        Elf32_Sym sym;
        memcpy(&sym, (const uint8_t *)data->d_buf + i * sizeof sym,
               sizeof sym);
        const char *name = elf_strptr(image->elf, shdr->sh_link, sym.st_name);
        if (name == NULL) {     /* the validator saw every name */
            free(all);
            return ovl_fail(error, image->label, "cannot read the name of "
                            "symbol %zu: %s", i, elf_errmsg(-1));
        }
        note_overlay_symbol(found, name, &sym);
        if (code_symbol(image, name, &sym, section_count, &all[used]))
            used++;
    }
    int status = build_index(image, all, used, error);
    free(all);
    return status;
}

int ovl_load_symbols(struct ovl_image *image, struct overlay_symbols *found,
                     struct ovl_error *error)
{
    memset(found, 0, sizeof *found);
    Elf_Scn *scn = find_symtab(image->elf);
    if (scn == NULL)
        return 0;
    return read_symbols(image, scn, found, error);
}

/* The last span starting at or before offset, if it covers offset. */
static const struct symbol_span *find_span(const struct symbol_span *spans,
                                           size_t count, uint64_t offset)
{
    size_t low = 0, high = count;

    while (low < high) {
        size_t middle = low + (high - low) / 2;
        if (spans[middle].start <= offset)
            low = middle + 1;
        else
            high = middle;
    }
    if (low == 0 || offset >= spans[low - 1].end)
        return NULL;
    return &spans[low - 1];
}

int ovl_symbol_at(const struct ovl_image *image, uint64_t file_offset,
                  struct ovl_symbol *symbol)
{
    const struct symbol_span *span =
        find_span(image->functions, image->function_count, file_offset);

    if (span == NULL)
        span = find_span(image->labels, image->label_count, file_offset);
    if (span == NULL)
        return -1;
    *symbol = (struct ovl_symbol) {
        .name = span->name,
        .file_offset = span->start,
        .vaddr = span->vaddr,
        .size = (uint32_t)(span->end - span->start),
    };
    return 0;
}
