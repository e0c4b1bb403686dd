/*
 * test-overlay.c — GTest suite for overlay/, on the RV32 test images that
 * overlay/module.mk links from overlay/tests/ (overlays.elf: three overlays
 * in region 1, two in region 2, an unused region 3, a gap and .bss;
 * plain.elf: no overlays).
 *
 * The resolution tests walk every LS address of every segment and every
 * overlay region under every guard value of interest, and check each result
 * against the image's own tables by the rules in overlay.h.  test_copovl.py
 * checks the same against an independent reader (pyelftools).  The rest
 * feeds the library truncated, corrupted, missing and embedded images.
 */
#include "overlay/overlay.h"

#include <elf.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>

static char *image_path(const char *name)
{
    const char *build = g_getenv("COPROF_BUILD");

    if (build != NULL)
        return g_build_filename(build, "tests", "overlay", name, NULL);
    return g_build_filename(OVERLAY_TEST_IMAGES, name, NULL);
}

static struct ovl_image *open_image(const char *name)
{
    struct ovl_error error;
    char *path = image_path(name);
    struct ovl_image *image = ovl_image_open(path, &error);

    if (image == NULL)
        g_error("%s", error.message);
    g_free(path);
    return image;
}

static guint8 *read_image(const char *name, gsize *size)
{
    char *path = image_path(name), *bytes;
    GError *error = NULL;

    if (!g_file_get_contents(path, &bytes, size, &error))
        g_error("%s", error->message);
    g_free(path);
    return (guint8 *)bytes;
}

/* A failed open's message: one line, starting with the label. */
static void assert_error(const struct ovl_error *error, const char *label)
{
    g_assert_nonnull(strstr(error->message, label));
    g_assert_true(g_str_has_prefix(error->message, label));
    g_assert_null(strchr(error->message, '\n'));
    g_assert_cmpuint(strlen(error->message), >, strlen(label) + 2);
}

static const struct ovl_segment *segment_at(const struct ovl_image *image,
                                            uint32_t vaddr)
{
    for (unsigned i = 0; i < ovl_image_segment_count(image); i++)
        if (ovl_image_segment(image, i)->vaddr == vaddr)
            return ovl_image_segment(image, i);
    return NULL;
}

/* ---- structure ----------------------------------------------------------- */

static void test_structure(void)
{
    struct ovl_image *image = open_image("overlays.elf");

    g_assert_cmpstr(ovl_image_short_name(image), ==, "ovl-test.1");
    g_assert_cmpuint(ovl_image_segment_count(image), ==, 2);
    g_assert_cmpuint(ovl_image_overlay_count(image), ==, 5);
    g_assert_cmpuint(ovl_image_region_count(image), ==, 3);
    g_assert_null(ovl_image_overlay(image, 0));
    g_assert_null(ovl_image_overlay(image, 6));
    g_assert_null(ovl_image_region(image, 0));
    g_assert_null(ovl_image_region(image, 4));
    g_assert_null(ovl_image_segment(image, 2));

    const unsigned expected_region[] = { 0, 1, 1, 1, 2, 2 };
    const char *expected_section[] = { NULL, ".ovl1_a", ".ovl1_b", ".ovl1_c",
                                       ".ovl2_a", ".ovl2_b" };
    for (unsigned i = 1; i <= 5; i++) {
        const struct ovl_overlay *o = ovl_image_overlay(image, i);
        g_assert_cmpuint(o->index, ==, i);
        g_assert_cmpuint(o->region, ==, expected_region[i]);
        g_assert_cmpstr(o->section, ==, expected_section[i]);
        g_assert_cmpuint(o->size, >, 0);
        g_assert_cmpuint(o->file_offset + o->size, <=, ovl_image_size(image));
    }
    /* Overlays of one region share a VMA, and differ in size. */
    const struct ovl_overlay *a = ovl_image_overlay(image, 1);
    const struct ovl_overlay *b = ovl_image_overlay(image, 2);
    const struct ovl_overlay *c = ovl_image_overlay(image, 3);
    g_assert_cmphex(a->vaddr, ==, b->vaddr);
    g_assert_cmphex(a->vaddr, ==, c->vaddr);
    g_assert_cmpuint(a->size, <, c->size);
    g_assert_cmpuint(c->size, <, b->size);
    g_assert_cmphex(ovl_image_overlay(image, 4)->vaddr, ==,
                    ovl_image_overlay(image, 5)->vaddr);

    const struct ovl_region *r1 = ovl_image_region(image, 1);
    g_assert_cmphex(r1->ls_start, ==, a->vaddr - COP_LS_BASE);
    g_assert_cmphex(r1->ls_end, ==, a->vaddr - COP_LS_BASE + b->size);
    g_assert_cmpuint(r1->overlay_count, ==, 3);
    g_assert_cmpuint(ovl_image_region(image, 2)->overlay_count, ==, 2);
    const struct ovl_region *r3 = ovl_image_region(image, 3);
    g_assert_cmpuint(r3->overlay_count, ==, 0);
    g_assert_cmphex(r3->ls_start, ==, r3->ls_end);

    /* Guard words: consecutive, in the file bytes of the data segment. */
    const struct ovl_segment *data = segment_at(image, 0x80001000);
    g_assert_nonnull(data);
    for (unsigned r = 1; r <= 3; r++) {
        uint32_t guard = ovl_image_region(image, r)->guard_ls_addr;
        g_assert_cmphex(guard, ==, r1->guard_ls_addr + 4 * (r - 1));
        g_assert_cmphex(guard + COP_LS_BASE, >=, data->vaddr);
        g_assert_cmphex(guard + COP_LS_BASE + 4, <=, data->vaddr + data->filesz);
    }
    ovl_image_close(image);
}

/* ---- resolution ---------------------------------------------------------- */

static void assert_unmapped(const struct ovl_location *loc, uint32_t ls,
                            enum ovl_reason reason)
{
    g_assert_cmphex(loc->ls_addr, ==, ls);
    g_assert_cmphex(loc->vaddr, ==, ls + COP_LS_BASE);
    g_assert_cmpstr(ovl_reason_name(loc->reason), ==, ovl_reason_name(reason));
    g_assert_cmphex(loc->file_offset, ==, OVL_NO_OFFSET);
    g_assert_cmpuint(loc->overlay, ==, 0);
    g_assert_null(loc->section);
}

/* Every address of the resident segments, under a few guard states. */
static void check_resident(const struct ovl_image *image,
                           const uint32_t *guards, unsigned guard_count)
{
    for (unsigned i = 0; i < ovl_image_segment_count(image); i++) {
        const struct ovl_segment *s = ovl_image_segment(image, i);
        if (s->vaddr >= COP_LS_BASE + COP_LS_SIZE)
            continue;
        uint32_t start = s->vaddr - COP_LS_BASE;
        for (uint32_t ls = start; ls < start + s->memsz; ls++) {
            struct ovl_location loc;
            ovl_resolve(image, ls, guards, guard_count, &loc);
            if (ls - start >= s->filesz) {
                assert_unmapped(&loc, ls, OVL_NO_FILE_BYTES);
                continue;
            }
            g_assert_cmpint(loc.reason, ==, OVL_MAPPED);
            g_assert_cmphex(loc.file_offset, ==, s->file_offset + (ls - start));
            g_assert_cmpuint(loc.overlay, ==, 0);
            g_assert_cmpuint(loc.region, ==, 0);
            g_assert_true(loc.image == image);
            g_assert_nonnull(loc.section);
        }
    }
}

static void test_resident(void)
{
    struct ovl_image *image = open_image("overlays.elf");
    const uint32_t states[][3] = { { 0, 0, 0 }, { 1, 4, 0 }, { 3, 5, 9 } };
    struct ovl_location loc;
    struct ovl_symbol symbol;

    check_resident(image, NULL, 0);
    for (unsigned s = 0; s < G_N_ELEMENTS(states); s++)
        check_resident(image, states[s], 3);

    ovl_resolve(image, 0, NULL, 0, &loc);
    g_assert_cmpstr(loc.section, ==, ".text");
    g_assert_cmpint(ovl_symbol_at(image, loc.file_offset, &symbol), ==, 0);
    g_assert_cmpstr(symbol.name, ==, "_start");
    ovl_resolve(image, 0x1000, NULL, 0, &loc);
    g_assert_cmpstr(loc.section, ==, ".data");
    g_assert_cmpint(ovl_symbol_at(image, loc.file_offset, &symbol), ==, -1);
    ovl_image_close(image);
}

/* Every address of region r with guard g: mapped inside overlay g only. */
static void check_region_with(const struct ovl_image *image, unsigned r,
                              uint32_t g, const uint32_t *guards)
{
    const struct ovl_region *region = ovl_image_region(image, r);
    const struct ovl_overlay *o = ovl_image_overlay(image, g);

    for (uint32_t ls = region->ls_start; ls < region->ls_end; ls++) {
        struct ovl_location loc;
        struct ovl_symbol symbol;
        uint32_t start = o->vaddr - COP_LS_BASE;

        ovl_resolve(image, ls, guards, 3, &loc);
        if (ls < start || ls - start >= o->size) {
            assert_unmapped(&loc, ls, OVL_OUTSIDE_OVERLAY);
            g_assert_cmpuint(loc.region, ==, r);
            g_assert_cmpuint(loc.guard, ==, g);
            continue;
        }
        g_assert_cmpint(loc.reason, ==, OVL_MAPPED);
        g_assert_cmphex(loc.file_offset, ==, o->file_offset + (ls - start));
        g_assert_cmpuint(loc.region, ==, r);
        g_assert_cmpuint(loc.overlay, ==, g);
        g_assert_cmpstr(loc.section, ==, o->section);
        /* Test functions are named after their overlay's section. */
        if (ovl_symbol_at(image, loc.file_offset, &symbol) == 0)
            g_assert_true(g_str_has_prefix(symbol.name, o->section + 1));
    }
}

static void test_overlays(void)
{
    struct ovl_image *image = open_image("overlays.elf");

    for (uint32_t g1 = 1; g1 <= 3; g1++) {
        for (uint32_t g2 = 4; g2 <= 5; g2++) {
            const uint32_t guards[3] = { g1, g2, 0 };
            check_region_with(image, 1, g1, guards);
            check_region_with(image, 2, g2, guards);
        }
    }
    /* The same VMA in two overlays: two offsets, two symbols. */
    const uint32_t with_a[3] = { 1, 0, 0 }, with_b[3] = { 2, 0, 0 };
    uint32_t start = ovl_image_region(image, 1)->ls_start;
    struct ovl_location la, lb;
    struct ovl_symbol sa, sb;
    ovl_resolve(image, start, with_a, 3, &la);
    ovl_resolve(image, start, with_b, 3, &lb);
    g_assert_cmphex(la.vaddr, ==, lb.vaddr);
    g_assert_cmphex(la.file_offset, !=, lb.file_offset);
    g_assert_cmpint(ovl_symbol_at(image, la.file_offset, &sa), ==, 0);
    g_assert_cmpint(ovl_symbol_at(image, lb.file_offset, &sb), ==, 0);
    g_assert_cmpstr(sa.name, ==, "ovl1_a_square");
    g_assert_cmpstr(sb.name, ==, "ovl1_b_checksum");
    g_assert_cmphex(sa.vaddr, ==, sb.vaddr);
    ovl_image_close(image);
}

static void check_region_unmapped(const struct ovl_image *image, unsigned r,
                                  const uint32_t *guards, unsigned count,
                                  enum ovl_reason reason)
{
    const struct ovl_region *region = ovl_image_region(image, r);

    for (uint32_t ls = region->ls_start; ls < region->ls_end; ls++) {
        struct ovl_location loc;
        ovl_resolve(image, ls, guards, count, &loc);
        assert_unmapped(&loc, ls, reason);
        g_assert_cmpuint(loc.region, ==, r);
        if (reason != OVL_GUARD_UNKNOWN)
            g_assert_cmpuint(loc.guard, ==, guards[r - 1]);
    }
}

static void test_guard_rules(void)
{
    struct ovl_image *image = open_image("overlays.elf");
    const uint32_t empty[3] = { 0, 0, 0 };
    const uint32_t other_region[3] = { 4, 1, 0 };
    const uint32_t out_of_range[3] = { 6, 0xffffffffu, 0 };
    const uint32_t only_first[1] = { 2 };

    check_region_unmapped(image, 1, empty, 3, OVL_REGION_EMPTY);
    check_region_unmapped(image, 2, empty, 3, OVL_REGION_EMPTY);
    check_region_unmapped(image, 1, other_region, 3, OVL_GUARD_INVALID);
    check_region_unmapped(image, 2, other_region, 3, OVL_GUARD_INVALID);
    check_region_unmapped(image, 1, out_of_range, 3, OVL_GUARD_INVALID);
    check_region_unmapped(image, 2, out_of_range, 3, OVL_GUARD_INVALID);
    check_region_unmapped(image, 1, NULL, 0, OVL_GUARD_UNKNOWN);
    check_region_unmapped(image, 2, only_first, 1, OVL_GUARD_UNKNOWN);
    check_region_with(image, 1, 2, (const uint32_t[3]) { 2, 0, 0 });
    ovl_image_close(image);
}

static void test_unmapped_places(void)
{
    struct ovl_image *image = open_image("overlays.elf");
    const struct ovl_segment *data = segment_at(image, 0x80001000);
    uint32_t code_end = ovl_image_region(image, 2)->ls_end;
    struct ovl_location loc;

    /* The gap between the overlays and the data segment. */
    for (uint32_t ls = code_end; ls < data->vaddr - COP_LS_BASE; ls++) {
        ovl_resolve(image, ls, NULL, 0, &loc);
        assert_unmapped(&loc, ls, OVL_NO_SEGMENT);
        g_assert_cmpuint(loc.region, ==, 0);
    }
    /* Past the data segment, up to the end of the local store. */
    for (uint32_t ls = data->vaddr - COP_LS_BASE + data->memsz;
         ls < COP_LS_SIZE; ls++) {
        ovl_resolve(image, ls, NULL, 0, &loc);
        assert_unmapped(&loc, ls, OVL_NO_SEGMENT);
    }
    const uint32_t outside[] = { COP_LS_SIZE, COP_LS_SIZE + 4, 0x100000,
                                 0x7fffffff, 0xfffffffc, 0xffffffff };
    for (unsigned i = 0; i < G_N_ELEMENTS(outside); i++) {
        ovl_resolve(image, outside[i], NULL, 0, &loc);
        assert_unmapped(&loc, outside[i], OVL_OUTSIDE_LS);
    }
    g_assert_cmpstr(ovl_reason_name(OVL_OUTSIDE_OVERLAY), ==,
                    "outside-overlay");
    g_assert_cmpstr(ovl_reason_name((enum ovl_reason)99), ==, "unknown");
    ovl_image_close(image);
}

static void test_candidates(void)
{
    struct ovl_image *image = open_image("overlays.elf");
    struct ovl_location found[8];
    const struct ovl_region *r1 = ovl_image_region(image, 1);
    const struct ovl_overlay *a = ovl_image_overlay(image, 1);
    const struct ovl_overlay *c = ovl_image_overlay(image, 3);

    /* Every address of region 1: the overlays that cover it, in order. */
    for (uint32_t ls = r1->ls_start; ls < r1->ls_end; ls++) {
        size_t count = ovl_candidates(image, ls, found, 8);
        unsigned expected = 1 + (ls - r1->ls_start < a->size) +
                            (ls - r1->ls_start < c->size);
        g_assert_cmpuint(count, ==, expected);
        for (size_t i = 0; i < count; i++) {
            struct ovl_location resolved;
            uint32_t guards[3] = { found[i].overlay, 0, 0 };
            g_assert_cmpint(found[i].reason, ==, OVL_MAPPED);
            g_assert_cmpuint(found[i].region, ==, 1);
            g_assert_cmpuint(found[i].guard, ==, found[i].overlay);
            if (i > 0)
                g_assert_cmpuint(found[i].overlay, >, found[i - 1].overlay);
            ovl_resolve(image, ls, guards, 3, &resolved);
            g_assert_cmphex(resolved.file_offset, ==, found[i].file_offset);
        }
        g_assert_cmpuint(ovl_candidates(image, ls, NULL, 0), ==, expected);
    }
    g_assert_cmpuint(ovl_candidates(image, 0x10, found, 8), ==, 1);
    g_assert_cmpuint(found[0].overlay, ==, 0);
    g_assert_cmphex(found[0].file_offset, ==, 0x1010);
    g_assert_cmpuint(ovl_candidates(image, 0x800, found, 8), ==, 0);
    const struct ovl_segment *data = segment_at(image, 0x80001000);
    uint32_t bss = data->vaddr - COP_LS_BASE + data->filesz;
    g_assert_cmpuint(ovl_candidates(image, bss, found, 8), ==, 0);
    g_assert_cmpuint(ovl_candidates(image, COP_LS_SIZE, found, 8), ==, 0);
    g_assert_cmpuint(ovl_candidates(image, r1->ls_start, found, 1), ==, 3);
    g_assert_cmpuint(found[0].overlay, ==, 1);
    ovl_image_close(image);
}

static void test_plain_image(void)
{
    struct ovl_image *image = open_image("plain.elf");
    struct ovl_location loc;
    struct ovl_symbol symbol;

    g_assert_cmpuint(ovl_image_overlay_count(image), ==, 0);
    g_assert_cmpuint(ovl_image_region_count(image), ==, 0);
    g_assert_cmpuint(ovl_image_segment_count(image), ==, 2);
    check_resident(image, NULL, 0);
    /* Functions that are overlays elsewhere are resident here. */
    int seen = 0;
    const struct ovl_segment *text = ovl_image_segment(image, 0);
    for (uint32_t ls = 0; ls < text->filesz; ls += 4) {
        ovl_resolve(image, ls, NULL, 0, &loc);
        if (ovl_symbol_at(image, loc.file_offset, &symbol) == 0 &&
            strcmp(symbol.name, "ovl2_b_mix") == 0)
            seen++;
    }
    g_assert_cmpuint(seen, ==, 14);       /* its 56 bytes, one per word */
    ovl_image_close(image);
}

/* An image none of whose segments meets the local store cannot run:
 * the one validator (common/image.c) that cop-run and copsim load with
 * refuses it, and so does the library, rather than open an image whose
 * every address is unmapped. */
static void test_nothing_in_local_store(void)
{
    struct ovl_error error;
    gsize size;
    guint8 *bytes = read_image("plain.elf", &size);
    const Elf32_Ehdr *header = (const Elf32_Ehdr *)bytes;

    for (unsigned i = 0; i < header->e_phnum; i++) {
        Elf32_Phdr *phdr = (Elf32_Phdr *)(bytes + header->e_phoff) + i;
        phdr->p_vaddr = 0x90000000u + i * 0x10000u;
    }
    struct ovl_image *image = ovl_image_open_memory(bytes, size, "moved",
                                                    &error);
    g_assert_null(image);
    g_assert_nonnull(strstr(error.message, "outside the local store"));
    g_free(bytes);
}

/* plain.elf's data segment moved across the end of the local store: the
 * one validator (common/image.c) refuses it, as cop-run and copsim would,
 * so nothing resolves addresses in an image no tool can run. */
static void test_segment_across_ls_end(void)
{
    struct ovl_error error;
    gsize size;
    guint8 *bytes = read_image("plain.elf", &size);
    const Elf32_Ehdr *header = (const Elf32_Ehdr *)bytes;
    Elf32_Phdr *data = NULL;
    const uint32_t inside = 0x20;

    for (unsigned i = 0; i < header->e_phnum; i++) {
        Elf32_Phdr *phdr = (Elf32_Phdr *)(bytes + header->e_phoff) + i;
        if (phdr->p_type == PT_LOAD && (phdr->p_flags & PF_W))
            data = phdr;
    }
    g_assert_nonnull(data);
    g_assert_cmpuint(data->p_filesz, >, inside);
    data->p_vaddr = COP_LS_BASE + COP_LS_SIZE - inside;
    struct ovl_image *image = ovl_image_open_memory(bytes, size, "moved",
                                                    &error);
    g_assert_null(image);
    g_assert_nonnull(strstr(error.message, "outside the local store"));
    g_free(bytes);
}

/* ---- opening ------------------------------------------------------------- */

static void assert_same_resolution(const struct ovl_image *x,
                                   const struct ovl_image *y)
{
    const uint32_t guards[3] = { 3, 5, 0 };

    for (uint32_t ls = 0; ls < 0x1200; ls++) {
        struct ovl_location lx, ly;
        ovl_resolve(x, ls, guards, 3, &lx);
        ovl_resolve(y, ls, guards, 3, &ly);
        g_assert_cmpint(lx.reason, ==, ly.reason);
        g_assert_cmphex(lx.file_offset, ==, ly.file_offset);
        g_assert_cmpuint(lx.overlay, ==, ly.overlay);
    }
}

static void test_open_memory(void)
{
    struct ovl_image *from_file = open_image("overlays.elf");
    struct ovl_error error;
    gsize size;
    guint8 *bytes = read_image("overlays.elf", &size);
    struct ovl_image *from_memory = ovl_image_open_memory(bytes, size,
                                                          "copy", &error);

    g_assert_nonnull(from_memory);
    g_free(bytes);      /* the image keeps its own copy */
    g_assert_cmpstr(ovl_image_label(from_memory), ==, "copy");
    g_assert_cmpuint(ovl_image_size(from_memory), ==, size);
    g_assert_cmpuint(ovl_image_size(from_file), ==, size);
    assert_same_resolution(from_file, from_memory);
    ovl_image_close(from_memory);
    ovl_image_close(from_file);
    ovl_image_close(NULL);
}

/* A host-executable stand-in: prefix bytes, the image, suffix bytes. */
static char *write_container(const guint8 *image, gsize size, gsize prefix,
                             gsize suffix)
{
    char *path = NULL;
    int fd = g_file_open_tmp("overlay-container-XXXXXX", &path, NULL);
    guint8 *bytes = g_malloc(prefix + size + suffix);

    g_assert_cmpint(fd, >=, 0);
    memset(bytes, 0x5a, prefix + size + suffix);
    memcpy(bytes + prefix, image, size);
    g_assert_true(g_file_set_contents(path, (char *)bytes,
                                      prefix + size + suffix, NULL));
    close(fd);
    g_free(bytes);
    return path;
}

static void test_open_embedded(void)
{
    struct ovl_image *reference = open_image("overlays.elf");
    struct ovl_error error;
    gsize size;
    guint8 *bytes = read_image("overlays.elf", &size);
    char *path = write_container(bytes, size, 4096 + 128, 777);
    uint64_t offset = 4096 + 128;

    struct ovl_image *unknown = ovl_image_open_at(path, offset,
                                                  OVL_SIZE_UNKNOWN, &error);
    g_assert_nonnull(unknown);
    g_assert_cmpuint(ovl_image_size(unknown), ==, size);
    g_assert_cmpuint(ovl_image_container_offset(unknown), ==, offset);
    g_assert_cmpmem(ovl_image_bytes(unknown), size, bytes, size);
    char *label = g_strdup_printf("%s@0x1080", path);
    g_assert_cmpstr(ovl_image_label(unknown), ==, label);
    assert_same_resolution(reference, unknown);

    struct ovl_image *known = ovl_image_open_at(path, offset, size, &error);
    g_assert_nonnull(known);
    assert_same_resolution(reference, known);

    /* Wrong places and sizes. */
    g_assert_null(ovl_image_open_at(path, offset, size + 778, &error));
    assert_error(&error, label);
    g_assert_nonnull(strstr(error.message, "does not fit"));
    g_assert_null(ovl_image_open_at(path, offset + 4, OVL_SIZE_UNKNOWN,
                                    &error));
    g_assert_nonnull(strstr(error.message, "not an ELF file"));
    g_assert_null(ovl_image_open_at(path, offset + size + 777,
                                    OVL_SIZE_UNKNOWN, &error));
    g_assert_nonnull(strstr(error.message, "is not inside the file"));
    g_assert_null(ovl_image_open_at(path, offset, size - 1, &error));
    assert_error(&error, label);

    ovl_image_close(unknown);
    ovl_image_close(known);
    ovl_image_close(reference);
    g_unlink(path);
    g_free(label);
    g_free(path);
    g_free(bytes);
}

/* The image cut short inside its container: the size from the headers
 * reaches past the container's end. */
static void test_open_embedded_truncated(void)
{
    struct ovl_error error;
    gsize size;
    guint8 *bytes = read_image("overlays.elf", &size);

    for (gsize keep = 0; keep < size; keep += 997) {
        char *path = write_container(bytes, keep, 256, 0);
        g_assert_null(ovl_image_open_at(path, 256, OVL_SIZE_UNKNOWN, &error));
        char *label = g_strdup_printf("%s@0x100", path);
        assert_error(&error, label);
        g_unlink(path);
        g_free(label);
        g_free(path);
    }
    g_free(bytes);
}

static void test_open_errors(void)
{
    struct ovl_error error;
    char *dir = g_dir_make_tmp("overlay-XXXXXX", NULL);
    char *missing = g_build_filename(dir, "missing.elf", NULL);
    char *empty = g_build_filename(dir, "empty.elf", NULL);
    char *text = g_build_filename(dir, "text.elf", NULL);

    g_assert_null(ovl_image_open(missing, &error));
    assert_error(&error, missing);
    g_assert_nonnull(strstr(error.message, "No such file"));
    g_assert_null(ovl_image_open(dir, &error));
    g_assert_nonnull(strstr(error.message, "not a regular file"));
    g_assert_true(g_file_set_contents(empty, "", 0, NULL));
    g_assert_null(ovl_image_open(empty, &error));
    assert_error(&error, empty);
    g_assert_true(g_file_set_contents(text, "#!/bin/sh\necho this is not an "
                                      "ELF file at all, but it is long enough"
                                      " to hold a header\n", -1, NULL));
    g_assert_null(ovl_image_open(text, &error));
    assert_error(&error, text);
    g_assert_nonnull(strstr(error.message, "not an ELF file"));
    g_assert_null(ovl_image_open_memory("\177ELF", 4, NULL, &error));
    assert_error(&error, "<memory>");
    g_assert_null(ovl_image_open_memory("", 0, "nothing", &error));
    assert_error(&error, "nothing");
    /* A NULL error is allowed. */
    g_assert_null(ovl_image_open(missing, NULL));

    g_unlink(empty);
    g_unlink(text);
    g_rmdir(dir);
    g_free(missing);
    g_free(empty);
    g_free(text);
    g_free(dir);
}

/* Every prefix of the image is refused, with a message, never a crash. */
static void test_truncated(void)
{
    struct ovl_error error;
    gsize size;
    guint8 *bytes = read_image("overlays.elf", &size);

    for (gsize keep = 0; keep < size; keep++) {
        g_assert_null(ovl_image_open_memory(bytes, keep, "cut", &error));
        assert_error(&error, "cut");
    }
    g_free(bytes);
}

/* Every byte of the header tables set to a few bad values: opens or
 * refuses, and what opens still resolves inside its bytes. */
static void test_corrupted_headers(void)
{
    struct ovl_error error;
    gsize size;
    guint8 *bytes = read_image("overlays.elf", &size);
    const Elf32_Ehdr *header = (const Elf32_Ehdr *)bytes;
    gsize ranges[3][2] = {
        { 0, sizeof *header },
        { header->e_phoff, header->e_phoff + header->e_phnum * 32u },
        { header->e_shoff, header->e_shoff + header->e_shnum * 40u },
    };
    const guint8 values[] = { 0x00, 0xff, 0x80, 0x01 };
    guint refused = 0, opened = 0;

    for (int r = 0; r < 3; r++) {
        for (gsize at = ranges[r][0]; at < ranges[r][1]; at++) {
            for (unsigned v = 0; v < G_N_ELEMENTS(values); v++) {
                guint8 *copy = g_memdup2(bytes, size);
                copy[at] = values[v];
                struct ovl_image *image =
                    ovl_image_open_memory(copy, size, "bad", &error);
                if (image == NULL) {
                    assert_error(&error, "bad");
                    refused++;
                } else {
                    for (uint32_t ls = 0; ls < 0x1200; ls += 4) {
                        struct ovl_location loc;
                        ovl_resolve(image, ls, (uint32_t[3]) { 1, 5, 0 }, 3,
                                    &loc);
                        if (loc.reason == OVL_MAPPED)
                            g_assert_cmpuint(loc.file_offset, <, size);
                    }
                    ovl_image_close(image);
                    opened++;
                }
                g_free(copy);
            }
        }
    }
    g_test_message("corrupted headers: %u refused, %u opened", refused,
                   opened);
    g_assert_cmpuint(refused, >, 0);
    g_assert_cmpuint(opened, >, 0);
    g_free(bytes);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/overlay/structure", test_structure);
    g_test_add_func("/overlay/resident", test_resident);
    g_test_add_func("/overlay/overlays", test_overlays);
    g_test_add_func("/overlay/guard-rules", test_guard_rules);
    g_test_add_func("/overlay/unmapped-places", test_unmapped_places);
    g_test_add_func("/overlay/candidates", test_candidates);
    g_test_add_func("/overlay/plain-image", test_plain_image);
    g_test_add_func("/overlay/nothing-in-local-store",
                    test_nothing_in_local_store);
    g_test_add_func("/overlay/segment-across-ls-end",
                    test_segment_across_ls_end);
    g_test_add_func("/overlay/open-memory", test_open_memory);
    g_test_add_func("/overlay/open-embedded", test_open_embedded);
    g_test_add_func("/overlay/open-embedded-truncated",
                    test_open_embedded_truncated);
    g_test_add_func("/overlay/open-errors", test_open_errors);
    g_test_add_func("/overlay/truncated", test_truncated);
    g_test_add_func("/overlay/corrupted-headers", test_corrupted_headers);
    return g_test_run();
}
