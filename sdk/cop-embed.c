/*
 * cop-embed — turn a coprocessor image into a host object file, as the Cell
 * SDK's embedspu did.
 *
 *   cop-embed IMAGE NAME OUT.o
 *
 * OUT.o is an x86-64 ELF relocatable object that defines the global
 * cop_program_handle_t NAME (sdk/cop-handle.h) in .data.rel.ro, pointing at
 * a copy of IMAGE in .rodata.cop_image, 128-byte aligned, followed by the
 * image's short name.  The two pointers are R_X86_64_64 relocations against
 * that section, so the object links into PIE and non-PIE executables and
 * shared libraries alike.
 *
 * The object is written directly (no assembler needed): the sections are
 * laid out one after the other in a growing buffer, then the section header
 * table, then the ELF header is filled in at the start.
 */
#include "sdk/cop-handle.h"
#include "common/cli.h"
#include "common/image.h"
#include "common/safe-file.h"

#include <elf.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2

/* Section indexes of the object. */
enum {
    SEC_NULL, SEC_IMAGE, SEC_HANDLE, SEC_RELA, SEC_STACK_NOTE, SEC_SYMTAB,
    SEC_STRTAB, SEC_SHSTRTAB, SEC_COUNT
};

/* Symbol indexes: the locals first, then the handle. */
enum { SYM_NULL, SYM_IMAGE_SECTION, SYM_IMAGE, SYM_HANDLE, SYM_COUNT };

struct buffer {
    unsigned char *data;
    size_t size;
    size_t capacity;
    int failed;
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: cop-embed IMAGE NAME OUT.o\n"
        "\n"
        "Writes OUT.o, an x86-64 object defining the program handle NAME\n"
        "(cop_program_handle_t, sdk/cop-handle.h) for the coprocessor image\n"
        "IMAGE, whose bytes it embeds 128-byte aligned in read-only data.\n"
        "Link OUT.o into a host program that declares\n"
        "    extern const cop_program_handle_t NAME;\n"
        "IMAGE is checked as the loader will; NAME must be a C identifier.\n");
}

/* Appends len bytes (or zeros when bytes is NULL); returns their offset. */
static size_t buffer_append(struct buffer *b, const void *bytes, size_t len)
{
    size_t at = b->size;

    if (b->size + len > b->capacity) {
        size_t capacity = b->capacity ? b->capacity : 4096;
        while (capacity < b->size + len)
            capacity *= 2;
        unsigned char *grown = realloc(b->data, capacity);
        if (!grown) {
            b->failed = 1;
            return at;
        }
        b->data = grown;
        b->capacity = capacity;
    }
    if (bytes)
        memcpy(b->data + at, bytes, len);
    else
        memset(b->data + at, 0, len);
    b->size += len;
    return at;
}

static void buffer_align(struct buffer *b, size_t alignment)
{
    size_t pad = (alignment - b->size % alignment) % alignment;

    buffer_append(b, NULL, pad);
}

static int valid_c_identifier(const char *s)
{
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
        return 0;
    for (s++; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* A string table being built: offsets of the strings added. */
static uint32_t add_string(struct buffer *table, const char *s)
{
    return (uint32_t)buffer_append(table, s, strlen(s) + 1);
}

struct object {
    struct buffer file;
    struct buffer strtab;
    struct buffer shstrtab;
    Elf64_Shdr sections[SEC_COUNT];
};

static void add_section(struct object *obj, int index, const char *name,
                        uint32_t type, uint64_t flags, size_t offset,
                        size_t size, uint64_t alignment)
{
    Elf64_Shdr *sh = &obj->sections[index];

    sh->sh_name = add_string(&obj->shstrtab, name);
    sh->sh_type = type;
    sh->sh_flags = flags;
    sh->sh_offset = offset;
    sh->sh_size = size;
    sh->sh_addralign = alignment;
}

/* .rodata.cop_image: the image, then the short name; and .data.rel.ro. */
static void write_data(struct object *obj, const struct cop_image *image,
                       const char *name)
{
    cop_program_handle_t handle = {
        .handle_size = sizeof(cop_program_handle_t),
        .image_size = (uint32_t)image->size,
    };
    size_t at;

    buffer_align(&obj->file, COP_IMAGE_ALIGN);
    at = buffer_append(&obj->file, image->bytes, image->size);
    buffer_append(&obj->file, name, strlen(name) + 1);
    add_section(obj, SEC_IMAGE, ".rodata.cop_image", SHT_PROGBITS, SHF_ALLOC,
                at, obj->file.size - at, COP_IMAGE_ALIGN);

    buffer_align(&obj->file, 8);
    at = buffer_append(&obj->file, &handle, sizeof(handle));
    add_section(obj, SEC_HANDLE, ".data.rel.ro", SHT_PROGBITS,
                SHF_ALLOC | SHF_WRITE, at, sizeof(handle), 8);
}

/* The handle's two pointers, relative to the image section's symbol. */
static void write_relocations(struct object *obj, const struct cop_image *image)
{
    Elf64_Rela relocations[] = {
        {offsetof(cop_program_handle_t, elf_image),
         ELF64_R_INFO(SYM_IMAGE_SECTION, R_X86_64_64), 0},
        {offsetof(cop_program_handle_t, name),
         ELF64_R_INFO(SYM_IMAGE_SECTION, R_X86_64_64),
         (Elf64_Sxword)image->size},
    };
    size_t at;

    buffer_align(&obj->file, 8);
    at = buffer_append(&obj->file, relocations, sizeof(relocations));
    add_section(obj, SEC_RELA, ".rela.data.rel.ro", SHT_RELA, SHF_INFO_LINK,
                at, sizeof(relocations), 8);
    obj->sections[SEC_RELA].sh_link = SEC_SYMTAB;
    obj->sections[SEC_RELA].sh_info = SEC_HANDLE;
    obj->sections[SEC_RELA].sh_entsize = sizeof(Elf64_Rela);
    add_section(obj, SEC_STACK_NOTE, ".note.GNU-stack", SHT_PROGBITS, 0,
                obj->file.size, 0, 1);
}

static void write_symbols(struct object *obj, const struct cop_image *image,
                          const char *handle_name)
{
    char image_symbol[256];
    Elf64_Sym symbols[SYM_COUNT];
    size_t at;

    snprintf(image_symbol, sizeof(image_symbol), "%s.elf_image", handle_name);
    memset(symbols, 0, sizeof(symbols));
    add_string(&obj->strtab, "");
    symbols[SYM_IMAGE_SECTION] = (Elf64_Sym){
        .st_info = ELF64_ST_INFO(STB_LOCAL, STT_SECTION), .st_shndx = SEC_IMAGE,
    };
    symbols[SYM_IMAGE] = (Elf64_Sym){
        .st_name = add_string(&obj->strtab, image_symbol),
        .st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT), .st_shndx = SEC_IMAGE,
        .st_size = image->size,
    };
    symbols[SYM_HANDLE] = (Elf64_Sym){
        .st_name = add_string(&obj->strtab, handle_name),
        .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_OBJECT),
        .st_shndx = SEC_HANDLE,
        .st_size = sizeof(cop_program_handle_t),
    };
    buffer_align(&obj->file, 8);
    at = buffer_append(&obj->file, symbols, sizeof(symbols));
    add_section(obj, SEC_SYMTAB, ".symtab", SHT_SYMTAB, 0, at, sizeof(symbols),
                8);
    obj->sections[SEC_SYMTAB].sh_link = SEC_STRTAB;
    obj->sections[SEC_SYMTAB].sh_info = SYM_HANDLE;    /* first global */
    obj->sections[SEC_SYMTAB].sh_entsize = sizeof(Elf64_Sym);

    at = buffer_append(&obj->file, obj->strtab.data, obj->strtab.size);
    add_section(obj, SEC_STRTAB, ".strtab", SHT_STRTAB, 0, at, obj->strtab.size,
                1);
}

/* The section-name table, the section headers, and the ELF header. */
static void write_headers(struct object *obj)
{
    Elf64_Ehdr eh = {
        .e_ident = {ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB,
                    EV_CURRENT, ELFOSABI_NONE},
        .e_type = ET_REL, .e_machine = EM_X86_64, .e_version = EV_CURRENT,
        .e_ehsize = sizeof(Elf64_Ehdr), .e_shentsize = sizeof(Elf64_Shdr),
        .e_shnum = SEC_COUNT, .e_shstrndx = SEC_SHSTRTAB,
    };
    /* Its own name goes in before the table is copied out. */
    uint32_t name = add_string(&obj->shstrtab, ".shstrtab");
    size_t at = buffer_append(&obj->file, obj->shstrtab.data,
                              obj->shstrtab.size);

    obj->sections[SEC_SHSTRTAB] = (Elf64_Shdr){
        .sh_name = name, .sh_type = SHT_STRTAB, .sh_offset = at,
        .sh_size = obj->shstrtab.size, .sh_addralign = 1,
    };
    buffer_align(&obj->file, 8);
    eh.e_shoff = buffer_append(&obj->file, obj->sections,
                               sizeof(obj->sections));
    if (!obj->file.failed)
        memcpy(obj->file.data, &eh, sizeof(eh));
}

static int build_object(struct object *obj, const struct cop_image *image,
                        const char *handle_name)
{
    const char *short_name = image->name[0] ? image->name : handle_name;

    memset(obj, 0, sizeof(*obj));
    buffer_append(&obj->file, NULL, sizeof(Elf64_Ehdr));
    add_string(&obj->shstrtab, "");
    write_data(obj, image, short_name);
    write_relocations(obj, image);
    write_symbols(obj, image, handle_name);
    write_headers(obj);
    return obj->file.failed || obj->strtab.failed || obj->shstrtab.failed
           ? -1 : 0;
}

/* The object to the path a user named (safe-file.h's rule: no planted
 * link followed; a new private file renamed over it once complete). */
static int write_file(const char *path, const struct buffer *b)
{
    struct safe_out safe;
    char err[512];
    FILE *out;
    int ok;

    if (safe_out_open(&safe, path, 0, err, sizeof(err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", err);
    if (!safe_out_stdio(&safe, &out)) {
        safe_out_close(&safe, NULL, 0, err, sizeof(err));
        return cli_fail(EXIT_FAILED, "%s: %s", path, strerror(errno));
    }
    ok = fwrite(b->data, 1, b->size, out) == b->size;
    if (safe_out_close(&safe, out, ok, err, sizeof(err)) < 0)
        return cli_fail(EXIT_FAILED, "%s", err);
    if (!ok)
        return cli_fail(EXIT_FAILED, "%s: write error", path);
    return 0;
}

int main(int argc, char **argv)
{
    struct cop_image image;
    struct cop_error err;
    struct object obj;
    int status;

    if (argc == 2 && (strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc != 4) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!valid_c_identifier(argv[2]) || strlen(argv[2]) > 200)
        return cli_fail(EXIT_USAGE, "%s: not a C identifier (of at most 200 "
                        "characters) to name the handle", argv[2]);
    if (cop_image_read(argv[1], &image, &err) < 0)
        return cli_fail(EXIT_FAILED, "%s", err.message);
    if (build_object(&obj, &image, argv[2]) < 0)
        status = cli_fail(EXIT_FAILED, "out of memory");
    else
        status = write_file(argv[3], &obj.file);
    free(obj.file.data);
    free(obj.strtab.data);
    free(obj.shstrtab.data);
    cop_image_release(&image);
    return status;
}
