/*
 * cop-overlays — the overlay steps of building a coprocessor program.
 *
 *   cop-overlays script TEMPLATE OUT.ld SPEC...
 *   cop-overlays stubs OUT.S OUT.wrap SPEC... [--resident OBJECT...]
 *   cop-overlays finish IMAGE
 *   cop-overlays list IMAGE
 *
 * A SPEC is REGION:NAME:OBJECT[,OBJECT...]: the overlay NAME holds the
 * code, read-only data and data of those objects and is loaded into region
 * REGION (1, 2, ...).  The order of the SPECs gives the overlays' indexes,
 * so `script` and `stubs` must get the same list (sdk/cop.mk does that).
 *
 * script  copies the linker script TEMPLATE (sdk/cop.ld), replacing its
 *         marker comments with one PF_OVERLAY program header per overlay,
 *         one OVERLAY statement per region, the _ovly_table entries (the
 *         file_off field holds the load address until `finish`) and the
 *         guard words.
 * stubs   reads the overlay objects (with libelf) and writes one call stub
 *         __wrap_F per global function F (overlay-call.S explains them) and
 *         the matching ld options, one "--wrap=F" per line, for -Wl,@FILE.
 *         An overlay object that exports data is refused: that data only
 *         exists while the overlay is loaded.  So is any object, overlay or
 *         resident, that calls __real_F, the way around F's stub.
 * finish  replaces each _ovly_table file_off placeholder with the file
 *         offset of the overlay segment linked at that load address, then
 *         checks the whole image as the loader will.
 * list    prints an image's overlay table and where its guard words are.
 */
#include "common/cli.h"
#include "common/image.h"
#include "common/safe-file.h"

#include <errno.h>
#include <gelf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2

/* Region r's overlays are linked at load addresses from
 * LMA_BASE + (r - 1) * LMA_STEP on. */
#define LMA_BASE 0x90000000u
#define LMA_STEP 0x01000000u

#define OVERLAY_INPUT_SECTIONS \
    ".text .text.* .rodata .rodata.* .srodata .srodata.* " \
    ".data .data.* .sdata .sdata.*"

struct overlay_spec {
    uint32_t region;
    char *name;
    char **objects;
    size_t nobjects;
};

struct spec_list {
    struct overlay_spec *items;
    size_t count;
    uint32_t nregions;
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: cop-overlays script TEMPLATE OUT.ld SPEC...\n"
        "       cop-overlays stubs OUT.S OUT.wrap SPEC... [--resident OBJ...]\n"
        "       cop-overlays finish IMAGE\n"
        "       cop-overlays list IMAGE\n"
        "\n"
        "The overlay steps of linking a coprocessor program (sdk/cop.mk runs\n"
        "them).  A SPEC is REGION:NAME:OBJECT[,OBJECT...]; the order of the\n"
        "SPECs gives the overlays' 1-based indexes.\n"
        "\n"
        "  script  write the linker script: TEMPLATE (sdk/cop.ld) with the\n"
        "          overlay segments, OVERLAY statements and tables filled in\n"
        "  stubs   write a call stub for every global function of the\n"
        "          overlay objects, and the ld --wrap options for them;\n"
        "          refuse objects that call around a stub (__real_F) and\n"
        "          overlays that export data\n"
        "  finish  put the overlays' file offsets into _ovly_table and check\n"
        "          the image as the loader will\n"
        "  list    print the overlay table and the guard words' address\n");
}

static int valid_identifier(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

static void free_specs(struct spec_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        free(list->items[i].name);
        for (size_t j = 0; j < list->items[i].nobjects; j++)
            free(list->items[i].objects[j]);
        free(list->items[i].objects);
    }
    free(list->items);
}

/* Splits "a,b,c" into a new array of strings. */
static int split_objects(const char *text, struct overlay_spec *spec)
{
    char *copy = strdup(text), *save = NULL;

    if (!copy)
        return -1;
    for (char *obj = strtok_r(copy, ",", &save); obj;
         obj = strtok_r(NULL, ",", &save)) {
        char **grown = realloc(spec->objects,
                               (spec->nobjects + 1) * sizeof(*grown));
        if (!grown || !(grown[spec->nobjects] = strdup(obj))) {
            if (grown)
                spec->objects = grown;
            free(copy);
            return -1;
        }
        spec->objects = grown;
        spec->nobjects++;
    }
    free(copy);
    return 0;
}

static int parse_spec(const char *text, struct overlay_spec *spec)
{
    char *end;
    const char *name, *objects;
    unsigned long region = strtoul(text, &end, 10);

    if (end == text || *end != ':' || region < 1 || region > 1000)
        return cli_fail(EXIT_USAGE, "%s: expected REGION:NAME:OBJECTS with "
                        "REGION from 1", text);
    name = end + 1;
    objects = strchr(name, ':');
    if (!objects || objects[1] == '\0')
        return cli_fail(EXIT_USAGE, "%s: expected REGION:NAME:OBJECTS", text);
    spec->region = (uint32_t)region;
    spec->name = strndup(name, (size_t)(objects - name));
    if (!spec->name || split_objects(objects + 1, spec) < 0)
        return cli_fail(EXIT_FAILED, "out of memory");
    if (!valid_identifier(spec->name))
        return cli_fail(EXIT_USAGE, "%s: overlay name '%s' is not "
                        "[A-Za-z0-9_]+", text, spec->name);
    for (size_t i = 0; i < spec->nobjects; i++)
        if (strpbrk(spec->objects[i], "\"\n"))
            return cli_fail(EXIT_USAGE, "%s: object path with a quote or "
                            "newline", text);
    if (spec->nobjects == 0)
        return cli_fail(EXIT_USAGE, "%s: overlay %s has no objects", text,
                        spec->name);
    return 0;
}

/* Every region from 1 to the highest must hold an overlay; names unique. */
static int check_specs(struct spec_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        if (list->items[i].region > list->nregions)
            list->nregions = list->items[i].region;
        for (size_t j = 0; j < i; j++)
            if (strcmp(list->items[i].name, list->items[j].name) == 0)
                return cli_fail(EXIT_USAGE, "overlay name '%s' given twice",
                                list->items[i].name);
    }
    for (uint32_t r = 1; r <= list->nregions; r++) {
        size_t i = 0;
        while (i < list->count && list->items[i].region != r)
            i++;
        if (i == list->count)
            return cli_fail(EXIT_USAGE, "region %u has no overlay (regions are "
                            "numbered 1 to %u)", r, list->nregions);
    }
    return 0;
}

static int parse_specs(char **args, int n, struct spec_list *list)
{
    int status;

    memset(list, 0, sizeof(*list));
    list->items = calloc(n > 0 ? (size_t)n : 1, sizeof(*list->items));
    if (!list->items)
        return cli_fail(EXIT_FAILED, "out of memory");
    for (int i = 0; i < n; i++) {
        list->count++;
        status = parse_spec(args[i], &list->items[i]);
        if (status)
            return status;
    }
    return check_specs(list);
}

static void emit_phdrs(FILE *out, const struct spec_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        fprintf(out, "    ovl_%zu PT_LOAD FLAGS(0x%08x);   /* overlay %zu: %s, "
                "region %u */\n", i + 1, COP_PF_OVERLAY | 7u, i + 1,
                list->items[i].name, list->items[i].region);
}

static void emit_sections(FILE *out, const struct spec_list *list)
{
    for (uint32_t r = 1; r <= list->nregions; r++) {
        fprintf(out, "    . = ALIGN(16);\n"
                "    OVERLAY : NOCROSSREFS AT(0x%08x) {     /* region %u */\n",
                LMA_BASE + (r - 1) * LMA_STEP, r);
        for (size_t i = 0; i < list->count; i++) {
            const struct overlay_spec *spec = &list->items[i];
            if (spec->region != r)
                continue;
            fprintf(out, "        .overlay.%s {\n", spec->name);
            for (size_t j = 0; j < spec->nobjects; j++)
                fprintf(out, "            \"%s\"(" OVERLAY_INPUT_SECTIONS ")\n",
                        spec->objects[j]);
            fprintf(out, "        } :ovl_%zu\n", i + 1);
        }
        fprintf(out, "    } >LS\n");
    }
}

static void emit_table(FILE *out, const struct spec_list *list)
{
    for (size_t i = 0; i < list->count; i++) {
        const char *name = list->items[i].name;
        fprintf(out, "        LONG(ADDR(.overlay.%s)) "
                "LONG(SIZEOF(.overlay.%s)) LONG(LOADADDR(.overlay.%s)) "
                "LONG(%u)\n", name, name, name, list->items[i].region);
    }
}

static void emit_guard_words(FILE *out, const struct spec_list *list)
{
    for (uint32_t r = 1; r <= list->nregions; r++)
        fprintf(out, "        LONG(0)     /* region %u */\n", r);
}

static const struct {
    const char *marker;
    void (*emit)(FILE *out, const struct spec_list *list);
} script_markers[] = {
    {"/* @overlay-phdrs@ */", emit_phdrs},
    {"/* @overlay-sections@ */", emit_sections},
    {"/* @overlay-table@ */", emit_table},
    {"/* @overlay-guard-words@ */", emit_guard_words},
};

#define NMARKERS (sizeof(script_markers) / sizeof(script_markers[0]))

/* Copies template to out, replacing marker lines; counts what it replaced. */
static void copy_template(FILE *template, FILE *out,
                          const struct spec_list *list, int *seen)
{
    char line[1024];

    while (fgets(line, sizeof(line), template)) {
        size_t m = 0;
        while (m < NMARKERS && !strstr(line, script_markers[m].marker))
            m++;
        if (m == NMARKERS) {
            fputs(line, out);
            continue;
        }
        seen[m]++;
        script_markers[m].emit(out, list);
    }
}

/*
 * Opens an output the build named by common/safe-file.h's rule (no planted
 * link followed; a new file renamed over it by close_output() when
 * complete, so a failed step leaves no half-written output).  0 or -1
 * (reported).
 */
static int open_output(const char *path, struct safe_out *safe, FILE **out)
{
    char err[512];

    *out = NULL;
    if (safe_out_open(safe, path, 0, err, sizeof(err)) < 0)
        return cli_fail(-1, "%s", err);
    if (!safe_out_stdio(safe, out)) {
        safe_out_close(safe, NULL, 0, err, sizeof(err));
        return cli_fail(-1, "%s: %s", path, strerror(errno));
    }
    return 0;
}

/* Closes an output: kept when status is 0; the status afterwards. */
static int close_output(struct safe_out *safe, FILE *out, int status)
{
    char err[512];

    if (out && safe_out_close(safe, out, status == 0, err, sizeof(err)) < 0
        && status == 0)
        return cli_fail(EXIT_FAILED, "write error: %s", err);
    return status;
}

static int command_script(int argc, char **argv)
{
    struct spec_list list;
    int seen[NMARKERS] = {0};
    FILE *template, *out;
    struct safe_out safe;
    int status;

    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    status = parse_specs(argv + 2, argc - 2, &list);
    if (status) {
        free_specs(&list);
        return status;
    }
    template = fopen(argv[0], "r");
    if (!template) {
        free_specs(&list);
        return cli_fail(EXIT_FAILED, "%s: %s", argv[0], strerror(errno));
    }
    if (open_output(argv[1], &safe, &out) < 0) {
        fclose(template);
        free_specs(&list);
        return EXIT_FAILED;
    }
    fprintf(out, "/* Written by cop-overlays script from %s: do not edit. */\n",
            argv[0]);
    copy_template(template, out, &list, seen);
    fclose(template);
    status = 0;
    for (size_t m = 0; m < NMARKERS && status == 0; m++)
        if (seen[m] != 1)
            status = cli_fail(EXIT_FAILED, "%s: marker %s found %d times, "
                              "expected once", argv[0],
                              script_markers[m].marker, seen[m]);
    status = close_output(&safe, out, status);
    free_specs(&list);
    return status;
}

/* Where a defined symbol's bytes go: into the overlay, or resident .bss. */
static int section_is_overlay_data(Elf *elf, GElf_Sym *sym)
{
    GElf_Shdr shdr;
    Elf_Scn *scn;

    if (sym->st_shndx == SHN_COMMON)
        return 0;
    scn = elf_getscn(elf, sym->st_shndx);
    if (!scn || !gelf_getshdr(scn, &shdr))
        return 0;
    return shdr.sh_type != SHT_NOBITS;
}

static void emit_stub(FILE *stubs, FILE *wrap, const char *function,
                      size_t index)
{
    fprintf(stubs,
            "\n    .balign 4\n"
            "    .globl __wrap_%s\n"
            "    .type __wrap_%s, @function\n"
            "__wrap_%s:\n"
            "    li      t0, %zu\n"
            "    la      t1, __real_%s\n"
            "    j       __cop_overlay_call\n"
            "    .size __wrap_%s, . - __wrap_%s\n",
            function, function, function, index, function, function, function);
    fprintf(wrap, "--wrap=%s\n", function);
}

/*
 * One symbol of an object of overlay index (0 for a resident object): no
 * object may call around a stub; an overlay object gets a stub for each
 * function and may not export data.
 */
static int stub_symbol(Elf *elf, GElf_Sym *sym, const char *name,
                       const char *object, size_t index, FILE *stubs,
                       FILE *wrap)
{
    int binding = GELF_ST_BIND(sym->st_info), type = GELF_ST_TYPE(sym->st_info);

    if (sym->st_shndx == SHN_UNDEF && strncmp(name, "__real_", 7) == 0)
        return cli_fail(EXIT_FAILED, "%s: refers to %s, which goes around the "
                        "overlay call stub: call %s", object, name, name + 7);
    if (index == 0 || (binding != STB_GLOBAL && binding != STB_WEAK) ||
        sym->st_shndx == SHN_UNDEF || sym->st_shndx == SHN_ABS)
        return 0;
    if (type == STT_OBJECT && section_is_overlay_data(elf, sym))
        return cli_fail(EXIT_FAILED, "%s: exports data '%s', which would only "
                        "exist while its overlay is loaded: make it static or "
                        "move it to resident code", object, name);
    if (type != STT_FUNC)
        return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9') || *c == '_' || *c == '.' || *c == '$'))
            return cli_fail(EXIT_FAILED, "%s: function name '%s' cannot get a "
                            "stub", object, name);
    emit_stub(stubs, wrap, name, index);
    return 0;
}

static int stub_symbols(Elf *elf, const char *object, size_t index,
                        FILE *stubs, FILE *wrap)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr shdr;
    GElf_Sym sym;

    while ((scn = elf_nextscn(elf, scn))) {
        if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_SYMTAB)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        size_t count = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
        for (size_t i = 1; data && i < count; i++) {
            if (!gelf_getsym(data, (int)i, &sym))
                continue;
            const char *name = elf_strptr(elf, shdr.sh_link, sym.st_name);
            if (!name)
                return cli_fail(EXIT_FAILED, "%s: bad symbol name", object);
            int status = stub_symbol(elf, &sym, name, object, index, stubs,
                                     wrap);
            if (status)
                return status;
        }
    }
    return 0;
}

static int stub_object(const char *object, size_t index, FILE *stubs,
                       FILE *wrap)
{
    int fd = open(object, O_RDONLY);
    Elf *elf;
    GElf_Ehdr ehdr;
    int status;

    if (fd < 0)
        return cli_fail(EXIT_FAILED, "%s: %s", object, strerror(errno));
    elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &ehdr) ||
        ehdr.e_type != ET_REL || ehdr.e_machine != EM_RISCV ||
        gelf_getclass(elf) != ELFCLASS32) {
        status = cli_fail(EXIT_FAILED, "%s: not a RISC-V ELF32 object file",
                          object);
    } else {
        status = stub_symbols(elf, object, index, stubs, wrap);
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return status;
}

static int command_stubs(int argc, char **argv)
{
    struct spec_list list;
    FILE *stubs = NULL, *wrap = NULL;
    struct safe_out stubs_out, wrap_out;
    int nspecs = 2, status;

    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    while (nspecs < argc && strcmp(argv[nspecs], "--resident") != 0)
        nspecs++;
    status = parse_specs(argv + 2, nspecs - 2, &list);
    if (status == 0 && elf_version(EV_CURRENT) == EV_NONE)
        status = cli_fail(EXIT_FAILED, "libelf: %s", elf_errmsg(-1));
    if (status == 0 && open_output(argv[0], &stubs_out, &stubs) < 0)
        status = EXIT_FAILED;
    if (status == 0 && open_output(argv[1], &wrap_out, &wrap) < 0)
        status = EXIT_FAILED;
    if (status == 0)
        fprintf(stubs, "/* Overlay call stubs written by cop-overlays stubs: "
                "do not edit. */\n    .text\n");
    for (size_t i = 0; status == 0 && i < list.count; i++)
        for (size_t j = 0; status == 0 && j < list.items[i].nobjects; j++)
            status = stub_object(list.items[i].objects[j], i + 1, stubs, wrap);
    for (int i = nspecs + 1; status == 0 && i < argc; i++)
        status = stub_object(argv[i], 0, stubs, wrap);
    status = close_output(&stubs_out, stubs, status);
    status = close_output(&wrap_out, wrap, status);
    free_specs(&list);
    return status;
}

static void write_u32(unsigned char *at, uint32_t value)
{
    memcpy(at, &value, sizeof(value));
}

static uint32_t read_u32(const unsigned char *at)
{
    uint32_t value;

    memcpy(&value, at, sizeof(value));
    return value;
}

/*
 * The overlay segment an _ovly_table entry's file_off field stands for: the
 * one linked at that load address, or, when the image was finished already,
 * the one at that file offset.  -1 when there is none.
 */
static long segment_for_placeholder(const struct cop_image *image,
                                    uint32_t placeholder)
{
    for (size_t s = 0; s < image->nsegments; s++) {
        const struct cop_segment *seg = &image->segments[s];
        if (seg->overlay && (seg->paddr == placeholder ||
                             seg->offset == placeholder))
            return (long)s;
    }
    return -1;
}

/* Replaces each entry's load-address placeholder with its file offset. */
static int patch_file_offsets(struct cop_image *image, unsigned char *bytes)
{
    const size_t entry_size = sizeof(struct cop_ovly_entry);
    uint32_t table_size = (uint32_t)(image->noverlays * entry_size);
    long table = cop_image_file_offset(image, image->ovly_table, table_size);

    for (size_t i = 0; i < image->noverlays; i++) {
        unsigned char *file_off = bytes + table + i * entry_size + 8;
        uint32_t placeholder = read_u32(file_off);
        long s = segment_for_placeholder(image, placeholder);
        if (s < 0)
            return cli_fail(EXIT_FAILED, "%s: _ovly_table entry %zu: no "
                            "overlay segment is linked at 0x%08x",
                            image->label, i + 1, placeholder);
        write_u32(file_off, image->segments[s].offset);
    }
    return 0;
}

/* Writes size bytes to path through a new file (open_output) renamed over
 * it, executable like the linker's output. */
static int replace_file(const char *path, const unsigned char *bytes,
                        size_t size)
{
    struct safe_out safe;
    FILE *out;
    int status = 0;

    if (open_output(path, &safe, &out) < 0)
        return EXIT_FAILED;
    if (fwrite(bytes, 1, size, out) != size || fchmod(safe.fd, 0755) < 0)
        status = cli_fail(EXIT_FAILED, "%s: cannot write: %s", path,
                          strerror(errno));
    return close_output(&safe, out, status);
}

static int command_finish(int argc, char **argv)
{
    struct cop_image image;
    struct cop_error err;
    unsigned char *bytes;
    size_t size = 0;
    int status;

    if (argc != 1) {
        usage(stderr);
        return EXIT_USAGE;
    }
    bytes = cop_read_file(argv[0], COP_IMAGE_SIZE, &size, &err);
    if (!bytes)
        return cli_fail(EXIT_FAILED, "%s", err.message);
    if (cop_image_parse_layout(bytes, size, argv[0], &image, &err) < 0) {
        free(bytes);
        return cli_fail(EXIT_FAILED, "%s", err.message);
    }
    status = patch_file_offsets(&image, bytes);
    cop_image_release(&image);
    if (status == 0 && cop_image_parse(bytes, size, argv[0], &image, &err) < 0)
        status = cli_fail(EXIT_FAILED, "%s", err.message);
    else if (status == 0)
        cop_image_release(&image);
    if (status == 0)
        status = replace_file(argv[0], bytes, size);
    free(bytes);
    return status;
}

static int command_list(int argc, char **argv)
{
    struct cop_image image;
    struct cop_error err;

    if (argc != 1) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (cop_image_read(argv[0], &image, &err) < 0)
        return cli_fail(EXIT_FAILED, "%s", err.message);
    printf("image %s name %s size %zu\n", argv[0],
           image.name[0] ? image.name : "-", image.size);
    printf("ovly_table 0x%08x entries %zu\n", image.ovly_table,
           image.noverlays);
    printf("ovly_buf_table 0x%08x ls_offset 0x%05x regions %u\n",
           image.ovly_buf_table,
           cop_image_guard_ls_offset(&image),
           image.nregions);
    printf("%-5s %-6s %-10s %-8s %-10s %s\n", "index", "region", "vma",
           "size", "file_off", "section");
    for (size_t i = 0; i < image.noverlays; i++) {
        const struct cop_overlay *ovl = &image.overlays[i];
        printf("%-5u %-6u 0x%08x %-8u 0x%08x %s\n", ovl->index, ovl->buf,
               ovl->vma, ovl->size, ovl->file_off,
               ovl->section[0] ? ovl->section : "-");
    }
    cop_image_release(&image);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "script") == 0)
        return command_script(argc - 2, argv + 2);
    if (strcmp(argv[1], "stubs") == 0)
        return command_stubs(argc - 2, argv + 2);
    if (strcmp(argv[1], "finish") == 0)
        return command_finish(argc - 2, argv + 2);
    if (strcmp(argv[1], "list") == 0)
        return command_list(argc - 2, argv + 2);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    return cli_fail(EXIT_USAGE, "unknown command '%s' (script, stubs, finish, "
                    "list)", argv[1]);
}
