/*
 * test-loader.c — GLib tests of the loader library (image.c, loader.c,
 * qemu.c).
 *
 * The images under test are the real ones the build makes in
 * build/tests/cop/ (found through COPROF_BUILD).  Bad images are made
 * by changing one field of a good one, so each check of the parser is hit
 * by exactly the fault it names; every prefix of an image and thousands of
 * random corruptions must be refused or accepted cleanly, never crash.
 */
#include "common/loader.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OVERLAY_IMAGE "overlay-calls.elf"
#define PLAIN_IMAGE "runtime-probe.elf"

struct image_file {
    guchar *bytes;
    gsize size;
};

static char *image_path(const char *name)
{
    const char *build = g_getenv("COPROF_BUILD");

    return g_build_filename(build ? build : "build", "tests", "cop", name, NULL);
}

static struct image_file read_image(const char *name)
{
    struct image_file file = {0};
    char *path = image_path(name);
    GError *error = NULL;

    if (!g_file_get_contents(path, (char **)&file.bytes, &file.size, &error))
        g_error("%s: %s (run make first)", path, error->message);
    g_free(path);
    return file;
}

static int parse(const struct image_file *file, struct cop_image *image,
                 struct cop_error *err)
{
    return cop_image_parse(file->bytes, file->size, "test.elf", image, err);
}

static Elf32_Ehdr *header(struct image_file *file)
{
    return (Elf32_Ehdr *)file->bytes;
}

static Elf32_Phdr *program_header(struct image_file *file, int i)
{
    return (Elf32_Phdr *)(file->bytes + header(file)->e_phoff) + i;
}

/* The index of the n-th program header with (or without) PF_OVERLAY. */
static int find_load(struct image_file *file, int overlay, int n)
{
    for (int i = 0; i < header(file)->e_phnum; i++) {
        Elf32_Phdr *ph = program_header(file, i);
        if (ph->p_type == PT_LOAD && !!(ph->p_flags & COP_PF_OVERLAY) == overlay &&
            n-- == 0)
            return i;
    }
    g_error("no such segment");
}

/* The file bytes of _ovly_table entry i (0-based) or guard word r. */
static guint32 *table_word(struct image_file *file, const char *symbol,
                           guint32 offset)
{
    struct cop_image image;
    struct cop_error err;
    guint32 addr;
    long at;

    g_assert_cmpint(cop_image_parse_layout(file->bytes, file->size, "t", &image,
                                           &err), ==, 0);
    g_assert_cmpint(cop_image_symbol(&image, symbol, &addr, NULL), ==, 0);
    at = cop_image_file_offset(&image, addr + offset, 4);
    cop_image_release(&image);
    g_assert_cmpint(at, >, 0);
    return (guint32 *)(file->bytes + at);
}

static void test_parse_overlay_image(void)
{
    struct image_file file = read_image(OVERLAY_IMAGE);
    struct cop_image image;
    struct cop_error err;
    static const char *const sections[] = {
        ".overlay.left", ".overlay.right", ".overlay.other",
    };
    static const guint32 regions[] = {1, 1, 2};

    g_assert_cmpint(parse(&file, &image, &err), ==, 0);
    g_assert_cmpstr(image.name, ==, "overlay-calls");
    g_assert_cmphex(image.entry, ==, COP_LS_BASE);
    g_assert_cmpuint(image.noverlays, ==, 3);
    g_assert_cmpuint(image.nregions, ==, 2);
    g_assert_cmpuint(cop_image_overlay_segments(&image), ==, 3);
    for (guint i = 0; i < 3; i++) {
        const struct cop_overlay *ovl = &image.overlays[i];
        g_assert_cmpuint(ovl->index, ==, i + 1);
        g_assert_cmpuint(ovl->buf, ==, regions[i]);
        g_assert_cmpstr(ovl->section, ==, sections[i]);
    }
    g_assert_cmphex(image.overlays[0].vma, ==, image.overlays[1].vma);
    g_assert_cmphex(image.overlays[0].vma, !=, image.overlays[2].vma);
    cop_image_release(&image);
    g_free(file.bytes);
}

static void test_parse_plain_image(void)
{
    struct image_file file = read_image(PLAIN_IMAGE);
    struct cop_image image;
    struct cop_error err;
    guint32 value;

    g_assert_cmpint(parse(&file, &image, &err), ==, 0);
    g_assert_cmpstr(image.name, ==, "runtime-probe");
    g_assert_cmpuint(image.noverlays, ==, 0);
    g_assert_cmpuint(image.nregions, ==, 0);
    g_assert_cmpint(cop_image_symbol(&image, "main", &value, NULL), ==, 0);
    g_assert_cmpint(cop_image_symbol(&image, "no_such_symbol", NULL, NULL), ==, -1);
    cop_image_release(&image);
    g_free(file.bytes);
}

static void test_read_missing_file(void)
{
    struct cop_image image;
    struct cop_error err;

    g_assert_cmpint(cop_image_read("/nonexistent/x.elf", &image, &err), ==, -1);
    g_assert_cmpstr(err.message, ==,
                    "/nonexistent/x.elf: No such file or directory");
    g_assert_cmpint(cop_image_read("/", &image, &err), ==, -1);
    g_assert_cmpstr(err.message, ==, "/: not a regular file");
}

/* One way to break an image, and the words the error must contain. */
struct fault {
    const char *name;
    void (*apply)(struct image_file *file);
    const char *message;
};

static void truncate_to_header(struct image_file *f) { f->size = 20; }
static void bad_magic(struct image_file *f) { f->bytes[1] = 'X'; }
static void elf64(struct image_file *f) { f->bytes[EI_CLASS] = ELFCLASS64; }
static void big_endian(struct image_file *f) { f->bytes[EI_DATA] = ELFDATA2MSB; }
static void x86(struct image_file *f) { header(f)->e_machine = EM_386; }
static void relocatable(struct image_file *f) { header(f)->e_type = ET_REL; }
static void compressed(struct image_file *f) { header(f)->e_flags |= EF_RISCV_RVC; }
static void hard_float(struct image_file *f) { header(f)->e_flags |= 4; }
static void moved_entry(struct image_file *f) { header(f)->e_entry += 0x100; }
static void no_phdrs(struct image_file *f) { header(f)->e_phnum = 0; }
static void phdrs_outside(struct image_file *f) { header(f)->e_phoff = f->size - 8; }
static void shdrs_outside(struct image_file *f) { header(f)->e_shoff = f->size - 8; }
static void shstrndx_bad(struct image_file *f) { header(f)->e_shstrndx = 999; }

static void segment_past_end(struct image_file *f)
{
    program_header(f, find_load(f, 0, 0))->p_filesz = (Elf32_Word)f->size;
}

static void segment_outside_ls(struct image_file *f)
{
    program_header(f, find_load(f, 0, 1))->p_vaddr = COP_LS_END - 4;
}

/* The code moved by 2 bytes, as in an image placed at 0x80000162. */
static void segment_unaligned(struct image_file *f)
{
    program_header(f, find_load(f, 0, 1))->p_vaddr += 2;
}

/* The data segment's .bss grown up to the top of the LS. */
static void bss_over_stack(struct image_file *f)
{
    Elf32_Phdr *ph = program_header(f, find_load(f, 0, 2));

    ph->p_memsz = COP_LS_END - ph->p_vaddr;
}

static void filesz_over_memsz(struct image_file *f)
{
    Elf32_Phdr *ph = program_header(f, find_load(f, 0, 0));

    ph->p_memsz = ph->p_filesz - 4;
}

static void overlay_not_flagged(struct image_file *f)
{
    program_header(f, find_load(f, 1, 1))->p_flags &= ~COP_PF_OVERLAY;
}

static void overlay_sizes_differ(struct image_file *f)
{
    program_header(f, find_load(f, 1, 0))->p_memsz += 4;
}

static void entry_file_offset(struct image_file *f)
{
    table_word(f, "_ovly_table", 8)[0] += 4;
}

static void entry_region(struct image_file *f)
{
    table_word(f, "_ovly_table", 12)[0] = 9;
}

static void entry_duplicated(struct image_file *f)
{
    memcpy(table_word(f, "_ovly_table", 16), table_word(f, "_ovly_table", 0), 16);
}

static void guard_word_set(struct image_file *f)
{
    table_word(f, "_ovly_buf_table", 4)[0] = 1;
}

static guchar *name_note(struct image_file *f)
{
    guchar *note = memmem(f->bytes, f->size, "COPNAME", 8);

    g_assert_nonnull(note);
    return note;
}

static void note_bad_name(struct image_file *f) { name_note(f)[8] = '/'; }

static void note_huge(struct image_file *f)
{
    guint32 descsz = 0x7fffffff;

    memcpy(name_note(f) - 8, &descsz, 4);
}

static const struct fault faults[] = {
    {"truncated", truncate_to_header, "too small for an ELF file"},
    {"magic", bad_magic, "not an ELF file"},
    {"class", elf64, "not a 32-bit ELF file"},
    {"endian", big_endian, "not a little-endian ELF file"},
    {"machine", x86, "not a RISC-V image"},
    {"type", relocatable, "not an executable"},
    {"rvc", compressed, "compressed instructions"},
    {"float", hard_float, "floating-point ABI"},
    {"entry", moved_entry, "entry point 0x80000100"},
    {"no-phdrs", no_phdrs, "no program headers"},
    {"phdrs", phdrs_outside, "program header table"},
    {"shdrs", shdrs_outside, "section header table"},
    {"shstrndx", shstrndx_bad, "section-name string table"},
    {"segment-end", segment_past_end, "extends past the end of the file"},
    {"segment-ls", segment_outside_ls, "outside the local store"},
    {"segment-align", segment_unaligned, "is not aligned to 4 bytes"},
    {"bss-stack", bss_over_stack, "covers the stack"},
    {"filesz", filesz_over_memsz, "more file bytes"},
    {"overlap", overlay_not_flagged, "overlaps"},
    {"overlay-size", overlay_sizes_differ, "equal, nonzero file and memory"},
    {"file-off", entry_file_offset, "matches no overlay segment"},
    {"region", entry_region, "names region 9"},
    {"duplicate", entry_duplicated, "same segment as another entry"},
    {"guard", guard_word_set, "guard word 2 is 1"},
    {"note-name", note_bad_name, "note does not hold a name"},
    {"note-size", note_huge, "malformed note"},
};

static void test_fault(gconstpointer data)
{
    const struct fault *fault = data;
    struct image_file file = read_image(OVERLAY_IMAGE);
    struct cop_image image;
    struct cop_error err;

    fault->apply(&file);
    g_assert_cmpint(parse(&file, &image, &err), ==, -1);
    g_test_message("%s", err.message);
    g_assert_true(g_str_has_prefix(err.message, "test.elf: "));
    g_assert_nonnull(strstr(err.message, fault->message));
    g_assert_null(strchr(err.message, '\n'));
    g_free(file.bytes);
}

static void test_every_prefix_is_refused(void)
{
    struct image_file file = read_image(OVERLAY_IMAGE);
    struct cop_image image;
    struct cop_error err;
    gsize accepted = 0;

    for (gsize size = 0; size < file.size; size++) {
        if (cop_image_parse(file.bytes, size, "t", &image, &err) == 0) {
            accepted++;
            cop_image_release(&image);
        }
    }
    g_assert_cmpuint(accepted, ==, 0);
    g_free(file.bytes);
}

/* Random byte changes in the headers and tables: refused or sane. */
static void test_random_corruption(void)
{
    struct image_file good = read_image(OVERLAY_IMAGE);
    GRand *rand = g_rand_new_with_seed(20240601);
    guint32 table_at = (guint32)((guchar *)table_word(&good, "_ovly_table", 0) -
                                 good.bytes);
    guint accepted = 0;

    for (int round = 0; round < 4000; round++) {
        struct image_file file = {g_memdup2(good.bytes, good.size), good.size};
        struct cop_image image;
        struct cop_error err;
        for (int n = g_rand_int_range(rand, 1, 5); n > 0; n--) {
            /* Headers, program headers and the overlay table. */
            guint32 at = g_rand_boolean(rand)
                ? (guint32)g_rand_int_range(rand, 0, 52 + 32 * header(&good)->e_phnum)
                : table_at + (guint32)g_rand_int_range(rand, 0, 3 * 16 + 8);
            file.bytes[at] = (guchar)g_rand_int(rand);
        }
        if (parse(&file, &image, &err) == 0) {
            accepted++;
            for (gsize i = 0; i < image.nsegments; i++)
                g_assert_cmphex(image.segments[i].vaddr + image.segments[i].memsz,
                                <=, COP_LS_END);
            cop_image_release(&image);
        } else {
            g_assert_true(g_str_has_prefix(err.message, "test.elf: "));
        }
        g_free(file.bytes);
    }
    g_test_message("%u of 4000 corrupted images accepted", accepted);
    g_rand_free(rand);
    g_free(good.bytes);
}

static void check_loaded(const struct cop_ram *ram, const struct cop_image *image)
{
    for (gsize i = 0; i < image->nsegments; i++) {
        const struct cop_segment *seg = &image->segments[i];
        const guchar *ls = cop_ram_at(ram, seg->vaddr, seg->memsz);
        if (seg->overlay)
            continue;
        g_assert_cmpmem(ls, seg->filesz, image->bytes + seg->offset, seg->filesz);
        for (guint32 b = seg->filesz; b < seg->memsz; b++)
            g_assert_cmpuint(ls[b], ==, 0);
    }
    /* Overlay regions stay empty: the overlay manager fills them. */
    for (gsize i = 0; i < image->noverlays; i++) {
        const guchar *region = cop_ram_at(ram, image->overlays[i].vma,
                                          image->overlays[i].size);
        for (guint32 b = 0; b < image->overlays[i].size; b++)
            g_assert_cmpuint(region[b], ==, 0);
    }
    g_assert_cmpmem(cop_ram_at(ram, COP_IMAGE_BASE, image->size), image->size,
                    image->bytes, image->size);
}

static void check_boot_block(const struct cop_ram *ram,
                             const struct cop_image *image, int argc,
                             char **argv)
{
    const struct cop_boot_block *boot = cop_ram_at(ram, COP_BOOT_BASE,
                                                   sizeof(*boot));
    const guint32 *pointers;

    g_assert_cmphex(boot->magic, ==, COP_BOOT_MAGIC);
    g_assert_cmpuint(boot->version, ==, COP_BOOT_VERSION);
    g_assert_cmphex(boot->image_addr, ==, COP_IMAGE_BASE);
    g_assert_cmpuint(boot->image_size, ==, image->size);
    g_assert_cmphex(boot->data_addr, ==, COP_DATA_BASE);
    g_assert_cmpuint(boot->data_size, ==, COP_DATA_SIZE);
    g_assert_cmpuint(boot->argc, ==, argc);
    g_assert_cmphex(boot->argv_addr, ==, COP_BOOT_BASE + COP_BOOT_ARGS_OFFSET);
    pointers = cop_ram_at(ram, boot->argv_addr, 4 * (argc + 1));
    for (int i = 0; i < argc; i++)
        g_assert_cmpstr(cop_ram_at(ram, pointers[i], 1), ==, argv[i]);
    g_assert_cmpuint(pointers[argc], ==, 0);
}

static void test_ram_load(void)
{
    char *path = image_path(OVERLAY_IMAGE);
    char *argv[] = {"overlay-calls.elf", "chain", "", "x y", NULL};
    struct cop_image image;
    struct cop_ram ram;
    struct cop_error err;
    char *expected_path;
    int fd;

    g_assert_cmpint(cop_image_read(path, &image, &err), ==, 0);
    g_assert_cmpint(cop_ram_create(&ram, NULL, &err), ==, 0);
    expected_path = g_strdup_printf("/proc/%d/fd/%d", (int)getpid(), ram.fd);
    g_assert_cmpstr(ram.path, ==, expected_path);
    memset(cop_ram_at(&ram, COP_LS_BASE, 64), 0xa5, 64);
    g_assert_cmpint(cop_ram_load(&ram, &image, 4, argv, &err), ==, 0);
    check_loaded(&ram, &image);
    check_boot_block(&ram, &image, 4, argv);
    g_assert_cmpuint(cop_ram_guard_word(&ram, &image, 1), ==, 0);
    g_assert_cmpuint(cop_ram_guard_word(&ram, &image, 3), ==, 0);

    /* QEMU opens the memfd by that path and sees the same bytes. */
    fd = open(ram.path, O_RDONLY);
    g_assert_cmpint(fd, >=, 0);
    guint32 magic = 0;
    g_assert_cmpint(pread(fd, &magic, 4, COP_BOOT_BASE - COP_RAM_BASE), ==, 4);
    g_assert_cmphex(magic, ==, COP_BOOT_MAGIC);
    close(fd);

    g_assert_null(cop_ram_at(&ram, COP_RAM_BASE - 4, 4));
    g_assert_null(cop_ram_at(&ram, COP_RAM_BASE + COP_RAM_SIZE - 2, 4));
    g_assert_nonnull(cop_ram_at(&ram, COP_RAM_BASE + COP_RAM_SIZE - 4, 4));
    cop_ram_close(&ram);
    cop_image_release(&image);
    g_free(expected_path);
    g_free(path);
}

static void test_ram_file_and_attach(void)
{
    char *dir = g_dir_make_tmp("test-loader-XXXXXX", NULL);
    char *file = g_build_filename(dir, "ram", NULL);
    char *small = g_build_filename(dir, "small", NULL);
    char *path = image_path(OVERLAY_IMAGE);
    char *argv[] = {"x", NULL};
    struct cop_image image;
    struct cop_ram ram, reader;
    struct cop_error err;
    GStatBuf st;

    g_assert_cmpint(cop_image_read(path, &image, &err), ==, 0);
    g_assert_cmpint(cop_ram_create(&ram, file, &err), ==, 0);
    g_assert_cmpstr(ram.path, ==, file);
    g_assert_cmpint(cop_ram_load(&ram, &image, 1, argv, &err), ==, 0);
    check_loaded(&ram, &image);
    *(guint32 *)cop_ram_at(&ram, image.ovly_buf_table + 4, 4) = 3;
    cop_ram_close(&ram);
    g_assert_cmpint(g_stat(file, &st), ==, 0);
    g_assert_cmpint(st.st_size, ==, COP_RAM_SIZE);

    g_assert_cmpint(cop_ram_attach(&reader, file, &err), ==, 0);
    g_assert_cmpuint(cop_ram_guard_word(&reader, &image, 2), ==, 3);
    g_assert_cmpuint(cop_ram_guard_word(&reader, &image, 1), ==, 0);
    g_assert_cmpmem(cop_ram_at(&reader, COP_IMAGE_BASE, image.size), image.size,
                    image.bytes, image.size);
    cop_ram_close(&reader);

    g_assert_true(g_file_set_contents(small, "tiny", 4, NULL));
    g_assert_cmpint(cop_ram_attach(&reader, small, &err), ==, -1);
    g_assert_nonnull(strstr(err.message, "not a coprocessor RAM file"));
    g_assert_cmpint(cop_ram_create(&ram, "/nonexistent/dir/ram", &err), ==, -1);
    g_assert_cmpstr(err.message, ==,
                    "/nonexistent/dir/ram: No such file or directory");

    g_unlink(file);
    g_unlink(small);
    g_rmdir(dir);
    cop_image_release(&image);
    g_free(path);
    g_free(file);
    g_free(small);
    g_free(dir);
}

/* cop_ram_create_new never opens what is already there: a file, or a
 * symbolic link to one, which stays as it was. */
static void test_ram_create_new(void)
{
    char *dir = g_dir_make_tmp("test-loader-XXXXXX", NULL);
    char *victim = g_build_filename(dir, "victim", NULL);
    char *link = g_build_filename(dir, "ram", NULL);
    struct cop_ram ram;
    struct cop_error err;
    gchar *text;

    g_assert_true(g_file_set_contents(victim, "precious", 8, NULL));
    g_assert_cmpint(symlink(victim, link), ==, 0);
    g_assert_cmpint(cop_ram_create_new(&ram, link, &err), ==, -1);
    g_assert_nonnull(strstr(err.message, "File exists"));
    g_assert_cmpint(cop_ram_create_new(&ram, victim, &err), ==, -1);
    g_assert_true(g_file_get_contents(victim, &text, NULL, NULL));
    g_assert_cmpstr(text, ==, "precious");
    g_free(text);
    g_unlink(link);
    g_assert_cmpint(cop_ram_create_new(&ram, link, &err), ==, 0);
    cop_ram_close(&ram);
    g_unlink(link);
    g_unlink(victim);
    g_rmdir(dir);
    g_free(link);
    g_free(victim);
    g_free(dir);
}

static void test_arguments_too_long(void)
{
    char *path = image_path(PLAIN_IMAGE);
    char *big = g_strnfill(COP_BOOT_SIZE, 'a');
    char *argv[] = {"probe", big, NULL};
    struct cop_image image;
    struct cop_ram ram;
    struct cop_error err;

    g_assert_cmpint(cop_image_read(path, &image, &err), ==, 0);
    g_assert_cmpint(cop_ram_create(&ram, NULL, &err), ==, 0);
    g_assert_cmpint(cop_ram_load(&ram, &image, 2, argv, &err), ==, -1);
    g_assert_nonnull(strstr(err.message, "arguments too long"));
    big[COP_BOOT_ARGS_END - COP_BOOT_ARGS_OFFSET - 12 - 7] = '\0';
    g_assert_cmpint(cop_ram_load(&ram, &image, 2, argv, &err), ==, 0);
    check_boot_block(&ram, &image, 2, argv);
    g_assert_cmpint(cop_ram_load(&ram, &image, 0, argv, &err), ==, -1);
    cop_ram_close(&ram);
    cop_image_release(&image);
    g_free(big);
    g_free(path);
}

static gboolean argv_has_pair(const struct cop_argv *v, const char *a,
                              const char *b)
{
    for (gsize i = 0; i + 1 < v->argc; i++)
        if (strcmp(v->argv[i], a) == 0 && strcmp(v->argv[i + 1], b) == 0)
            return TRUE;
    return FALSE;
}

static void test_qemu_command(void)
{
    struct cop_qemu_options options = {.ram_path = "/tmp/ram"};
    struct cop_argv v;

    cop_argv_init(&v);
    g_assert_cmpint(cop_qemu_command(&v, &options), ==, 0);
    g_assert_cmpstr(v.argv[0], ==, "qemu-system-riscv32");
    g_assert_true(argv_has_pair(&v, "-M", "virt,memory-backend=cop-ram"));
    g_assert_true(argv_has_pair(&v, "-m", "16M"));
    g_assert_true(argv_has_pair(&v, "-object", "memory-backend-file,id=cop-ram,"
                                "size=16M,mem-path=/tmp/ram,share=on"));
    g_assert_true(argv_has_pair(&v, "-bios", "none"));
    g_assert_true(argv_has_pair(&v, "-cpu", "rv32,c=off"));
    g_assert_true(argv_has_pair(&v, "-chardev",
                                "stdio,signal=off,id=cop-console"));
    g_assert_null(v.argv[v.argc]);
    for (int i = 0; i < 100; i++)
        g_assert_cmpint(cop_argv_addf(&v, "-extra%d", i), ==, 0);
    g_assert_cmpstr(v.argv[v.argc - 1], ==, "-extra99");
    g_assert_null(v.argv[v.argc]);
    cop_argv_free(&v);
    g_assert_cmpuint(v.argc, ==, 0);

    options.program = "/opt/qemu";
    options.console = "pipe,path=/tmp/uart";
    g_assert_cmpint(cop_qemu_command(&v, &options), ==, 0);
    g_assert_cmpstr(v.argv[0], ==, "/opt/qemu");
    g_assert_true(argv_has_pair(&v, "-chardev", "pipe,path=/tmp/uart,id=cop-console"));
    cop_argv_free(&v);
}

static void run_command(const char *const *words, int *status, int *result)
{
    struct cop_argv v;
    struct cop_error err;
    pid_t pid;

    cop_argv_init(&v);
    for (; *words; words++)
        g_assert_cmpint(cop_argv_add(&v, *words), ==, 0);
    g_assert_cmpint(cop_qemu_spawn(&v, -1, &pid, &err), ==, 0);
    *result = cop_qemu_wait(pid, status, &err);
    cop_argv_free(&v);
}

static void test_spawn_and_wait(void)
{
    static const char *const exits[] = {"sh", "-c", "exit 7", NULL};
    static const char *const killed[] = {"sh", "-c", "kill -9 $$", NULL};
    static const char *const reads[] = {"sh", "-c", "read x; exit 3", NULL};
    int status, result;

    run_command(exits, &status, &result);
    g_assert_cmpint(result, ==, 0);
    g_assert_cmpint(status, ==, 7);
    run_command(killed, &status, &result);
    g_assert_cmpint(result, ==, 1);
    g_assert_cmpint(status, ==, 128 + 9);
    /* stdin is /dev/null: read fails at once. */
    run_command(reads, &status, &result);
    g_assert_cmpint(status, ==, 3);
}

static void test_spawn_missing_qemu(void)
{
    struct cop_qemu_options options = {
        .program = "/nonexistent/qemu-system-riscv32", .ram_path = "/tmp/x",
    };
    struct cop_argv v;
    struct cop_error err;
    pid_t pid;

    cop_argv_init(&v);
    g_assert_cmpint(cop_qemu_command(&v, &options), ==, 0);
    g_assert_cmpint(cop_qemu_spawn(&v, -1, &pid, &err), ==, -1);
    g_assert_cmpint(errno, ==, ENOENT);
    g_assert_cmpstr(err.message, ==, "/nonexistent/qemu-system-riscv32: not "
                    "found (install the Debian package qemu-system-misc)");
    cop_argv_free(&v);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/image/overlay-image", test_parse_overlay_image);
    g_test_add_func("/image/plain-image", test_parse_plain_image);
    g_test_add_func("/image/missing-file", test_read_missing_file);
    for (gsize i = 0; i < G_N_ELEMENTS(faults); i++) {
        char *name = g_strdup_printf("/image/refuses/%s", faults[i].name);
        g_test_add_data_func(name, &faults[i], test_fault);
        g_free(name);
    }
    g_test_add_func("/image/every-prefix", test_every_prefix_is_refused);
    g_test_add_func("/image/random-corruption", test_random_corruption);
    g_test_add_func("/ram/load", test_ram_load);
    g_test_add_func("/ram/file-and-attach", test_ram_file_and_attach);
    g_test_add_func("/ram/create-new", test_ram_create_new);
    g_test_add_func("/ram/arguments-too-long", test_arguments_too_long);
    g_test_add_func("/qemu/command", test_qemu_command);
    g_test_add_func("/qemu/spawn-and-wait", test_spawn_and_wait);
    g_test_add_func("/qemu/missing", test_spawn_missing_qemu);
    return g_test_run();
}
