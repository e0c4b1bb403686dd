/*
 * test-copsim-resolve.c — GLib tests of copsim's object-id resolution
 * (resolve.c) and of its message framing (protocol.c), in this process's
 * own address space and on socket pairs.
 *
 * The image bytes used here need not be a valid ELF file: resolution only
 * finds where bytes come from; copsim validates the image afterwards.
 */
#include "common/copsim-socket.h"
#include "emulator/copsim/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096
#define IMAGE_AT (2 * PAGE + 0x100)     /* file offset of the test image */
#define IMAGE_SIZE 3000

/* A directory with a 4-page file whose bytes at IMAGE_AT are the image. */
struct fixture {
    char *dir;
    char *file;
    char *copies;
    unsigned char bytes[4 * PAGE];
    struct hash_cache cache;
};

static void fixture_set_up(struct fixture *f, gconstpointer data)
{
    (void)data;
    f->dir = g_dir_make_tmp("copsim-resolve-XXXXXX", NULL);
    f->file = g_build_filename(f->dir, "host-binary", NULL);
    f->copies = g_build_filename(f->dir, "images", NULL);
    g_assert_cmpint(g_mkdir(f->copies, 0700), ==, 0);
    for (size_t i = 0; i < sizeof(f->bytes); i++)
        f->bytes[i] = (unsigned char)(i * 7 + i / 256);
    g_assert_true(g_file_set_contents(f->file, (const char *)f->bytes,
                                      sizeof(f->bytes), NULL));
    hash_cache_init(&f->cache);
}

static void remove_tree(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    const char *name;

    while (d && (name = g_dir_read_name(d))) {
        char *path = g_build_filename(dir, name, NULL);

        if (g_file_test(path, G_FILE_TEST_IS_DIR))
            remove_tree(path);
        else
            g_unlink(path);
        g_free(path);
    }
    if (d)
        g_dir_close(d);
    g_rmdir(dir);
}

static void fixture_tear_down(struct fixture *f, gconstpointer data)
{
    (void)data;
    hash_cache_free(&f->cache);
    remove_tree(f->dir);
    g_free(f->dir);
    g_free(f->file);
    g_free(f->copies);
}

/* The content hash computed independently: GLib's hex digest, first 8
 * bytes read little-endian. */
static uint64_t expected_hash(const void *bytes, size_t size)
{
    gchar *hex = g_compute_checksum_for_data(G_CHECKSUM_SHA256, bytes, size);
    uint64_t value = 0;

    for (int i = 7; i >= 0; i--) {
        char byte[3] = {hex[2 * i], hex[2 * i + 1], 0};

        value = value << 8 | g_ascii_strtoull(byte, NULL, 16);
    }
    g_free(hex);
    return value;
}

/* Maps `pages` pages of the file from page `first`, read-only. */
static unsigned char *map_pages(const char *file, int first, int pages)
{
    int fd = open(file, O_RDONLY);
    void *map;

    g_assert_cmpint(fd, >=, 0);
    map = mmap(NULL, (size_t)pages * PAGE, PROT_READ, MAP_PRIVATE, fd,
               (off_t)first * PAGE);
    close(fd);
    g_assert_true(map != MAP_FAILED);
    return map;
}

/* The file's first page, followed by a page that cannot be read. */
static unsigned char *map_before_hole(const char *file)
{
    int fd = open(file, O_RDONLY);
    void *area, *map;

    g_assert_cmpint(fd, >=, 0);
    area = mmap(NULL, 2 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                0);
    g_assert_true(area != MAP_FAILED);
    map = mmap(area, PAGE, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    close(fd);
    g_assert_true(map == area);
    return map;
}

/* ---- maps lines ---------------------------------------------------------- */

static void test_parse_lines(void)
{
    char file_line[] = "7f12a000-7f12c000 r--p 00002000 fd:01 123456   "
                       "/usr/lib/with space/libx.so";
    char anon_line[] = "55d0e000-55d2f000 rw-p 00000000 00:00 0   [heap]";
    char deleted[] = "7f00-8f00 r-xp 00001000 08:02 77 /tmp/gone (deleted)";
    char bad_range[] = "9000-8000 r--p 0 00:00 0";
    char garbage[] = "not a maps line";
    struct proc_mapping m;

    g_assert_cmpint(proc_mapping_parse(file_line, &m), ==, 0);
    g_assert_cmphex(m.start, ==, 0x7f12a000);
    g_assert_cmphex(m.end, ==, 0x7f12c000);
    g_assert_cmphex(m.page_offset, ==, 0x2000);
    g_assert_cmpuint(m.device, ==, makedev(0xfd, 0x01));
    g_assert_cmpuint(m.inode, ==, 123456);
    g_assert_cmpstr(m.perms, ==, "r--p");
    g_assert_cmpstr(m.path, ==, "/usr/lib/with space/libx.so");
    g_assert_false(m.deleted);
    g_assert_cmpint(proc_mapping_parse(anon_line, &m), ==, 0);
    g_assert_cmpstr(m.path, ==, "[heap]");
    g_assert_cmpuint(m.inode, ==, 0);
    g_assert_cmpint(proc_mapping_parse(deleted, &m), ==, 0);
    g_assert_true(m.deleted);
    g_assert_cmpstr(m.path, ==, "/tmp/gone");
    g_assert_cmpint(proc_mapping_parse(bad_range, &m), ==, -1);
    g_assert_cmpint(proc_mapping_parse(garbage, &m), ==, -1);
}

static void test_own_maps_and_call_stack(void)
{
    struct proc_maps maps;
    char err[256], stack[512], exe[4096];
    const struct proc_mapping *m;
    uint64_t frames[2] = {(uint64_t)(uintptr_t)test_parse_lines, 0x10};
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

    g_assert_cmpint(n, >, 0);
    exe[n] = '\0';
    g_assert_cmpint(proc_maps_read(getpid(), &maps, err, sizeof(err)), ==, 0);
    m = proc_maps_find(&maps, frames[0]);
    g_assert_nonnull(m);
    g_assert_cmpstr(m->path, ==, exe);
    g_assert_null(proc_maps_find(&maps, 0x10));
    format_call_stack(&maps, frames, 2, stack, sizeof(stack));
    g_assert_true(g_str_has_prefix(stack, exe));
    g_assert_true(g_str_has_suffix(stack, " ?+0x10"));
    /* Cut at whole entries when the buffer is short. */
    format_call_stack(&maps, frames, 2, stack, strlen(stack));
    g_assert_true(g_str_has_prefix(stack, exe));
    g_assert_null(strchr(stack, ' '));
    proc_maps_free(&maps);
    g_assert_cmpint(proc_maps_read(999999999, &maps, err, sizeof(err)), ==, -1);
    g_assert_true(strstr(err, "process 999999999: cannot read its maps"));
    g_assert_true(proc_is_thread_of(getpid(), getpid()));
    g_assert_false(proc_is_thread_of(getpid(), 1));
}

/* ---- images -------------------------------------------------------------- */

/* An image in a file mapping that starts at page 2: the file offset
 * counts the mapping's page offset. */
static void test_file_mapping_with_page_offset(struct fixture *f,
                                               gconstpointer data)
{
    unsigned char *map = map_pages(f->file, 2, 2);
    struct image_source source;
    struct stat st;
    char err[256];

    (void)data;
    g_assert_cmpint(image_source_resolve(getpid(), (uintptr_t)map + 0x100,
                                         IMAGE_SIZE, f->copies, &f->cache,
                                         &source, err, sizeof(err)), ==, 0);
    g_assert_cmpstr(source.path, ==, f->file);
    g_assert_cmpuint(source.offset, ==, IMAGE_AT);
    g_assert_false(source.anonymous);
    g_assert_cmpmem(source.bytes, source.size, f->bytes + IMAGE_AT,
                    IMAGE_SIZE);
    g_assert_cmpint(stat(f->file, &st), ==, 0);
    g_assert_cmpuint(source.inode, ==, st.st_ino);
    g_assert_cmpuint(source.device, ==, st.st_dev);
    g_assert_cmpuint(source.file_size, ==, sizeof(f->bytes));
    g_assert_cmphex(source.hash, ==, expected_hash(f->bytes, sizeof(f->bytes)));
    image_source_free(&source);
    munmap(map, 2 * PAGE);
}

/* An image across two mappings of the file at consecutive offsets is still
 * the file's; across mappings of different offsets it is copied. */
static void test_image_across_mappings(struct fixture *f, gconstpointer data)
{
    unsigned char *map = map_pages(f->file, 0, 4);
    int fd = open(f->file, O_RDONLY);
    struct image_source source;
    char err[256];
    uint64_t object = (uintptr_t)map + 2 * PAGE - 100;

    (void)data;
    /* Split the mapping in two by re-mapping its second half in place. */
    g_assert_true(mmap(map + 2 * PAGE, 2 * PAGE, PROT_READ,
                       MAP_PRIVATE | MAP_FIXED, fd, 2 * PAGE) != MAP_FAILED);
    g_assert_cmpint(image_source_resolve(getpid(), object, 200, f->copies,
                                         &f->cache, &source, err,
                                         sizeof(err)), ==, 0);
    g_assert_false(source.anonymous);
    g_assert_cmpuint(source.offset, ==, 2 * PAGE - 100);
    image_source_free(&source);
    /* Now the second half shows page 0 of the file: not consecutive. */
    g_assert_true(mmap(map + 2 * PAGE, 2 * PAGE, PROT_READ,
                       MAP_PRIVATE | MAP_FIXED, fd, 0) != MAP_FAILED);
    g_assert_cmpint(image_source_resolve(getpid(), object, 200, f->copies,
                                         &f->cache, &source, err,
                                         sizeof(err)), ==, 0);
    g_assert_true(source.anonymous);
    g_assert_cmpmem(source.bytes, 100, f->bytes + 2 * PAGE - 100, 100);
    g_assert_cmpmem(source.bytes + 100, 100, f->bytes, 100);
    image_source_free(&source);
    close(fd);
    munmap(map, 4 * PAGE);
}

/* Anonymous memory is copied into a file named by its content. */
static void test_anonymous_memory_is_copied(struct fixture *f,
                                            gconstpointer data)
{
    unsigned char *heap = g_memdup2(f->bytes + IMAGE_AT, IMAGE_SIZE);
    struct image_source source, again;
    char err[256], *expected_path, *copy;
    gsize length;

    (void)data;
    g_assert_cmpint(image_source_resolve(getpid(), (uintptr_t)heap,
                                         IMAGE_SIZE, f->copies, &f->cache,
                                         &source, err, sizeof(err)), ==, 0);
    g_assert_true(source.anonymous);
    g_assert_cmpuint(source.offset, ==, 0);
    g_assert_cmphex(source.hash, ==, expected_hash(heap, IMAGE_SIZE));
    expected_path = g_strdup_printf("%s/image-%016" PRIx64 ".elf", f->copies,
                                    source.hash);
    g_assert_cmpstr(source.path, ==, expected_path);
    g_assert_true(g_file_get_contents(source.path, &copy, &length, NULL));
    g_assert_cmpmem(copy, length, heap, IMAGE_SIZE);
    /* A second context of the same bytes shares the copy. */
    g_assert_cmpint(image_source_resolve(getpid(), (uintptr_t)heap,
                                         IMAGE_SIZE, f->copies, &f->cache,
                                         &again, err, sizeof(err)), ==, 0);
    g_assert_cmpuint(again.inode, ==, source.inode);
    image_source_free(&again);
    image_source_free(&source);
    g_free(copy);
    g_free(expected_path);
    g_free(heap);
}

/* A file replaced after it was mapped does not hold the mapped bytes: they
 * are copied from memory instead. */
static void test_replaced_file_is_not_trusted(struct fixture *f,
                                              gconstpointer data)
{
    unsigned char *map = map_pages(f->file, 2, 1);
    char *replacement = g_build_filename(f->dir, "new", NULL);
    struct image_source source;
    char err[256];

    (void)data;
    g_assert_true(g_file_set_contents(replacement, "different", 9, NULL));
    g_assert_cmpint(g_rename(replacement, f->file), ==, 0);
    g_assert_cmpint(image_source_resolve(getpid(), (uintptr_t)map + 0x100,
                                         1000, f->copies, &f->cache, &source,
                                         err, sizeof(err)), ==, 0);
    g_assert_true(source.anonymous);
    g_assert_cmpmem(source.bytes, 1000, f->bytes + IMAGE_AT, 1000);
    image_source_free(&source);
    g_free(replacement);
    munmap(map, PAGE);
}

static void test_resolution_errors(struct fixture *f, gconstpointer data)
{
    unsigned char *map = map_pages(f->file, 0, 1);
    struct image_source source;
    char err[256], *expected;

    (void)data;
    g_assert_cmpint(image_source_resolve(getpid(), 0x10, 100, f->copies,
                                         &f->cache, &source, err,
                                         sizeof(err)), ==, -1);
    expected = g_strdup_printf("object-id 0x10 is not mapped in process %d",
                               (int)getpid());
    g_assert_cmpstr(err, ==, expected);
    g_free(expected);
    g_assert_cmpint(image_source_resolve(getpid(), (uintptr_t)map, 0,
                                         f->copies, &f->cache, &source, err,
                                         sizeof(err)), ==, -1);
    g_assert_true(strstr(err, "is not between 1 and"));
    /* Past the end of the mapping, into memory that cannot be read (a
     * reserved page, not whatever the allocator placed there): copying
     * fails. */
    munmap(map, PAGE);
    map = map_before_hole(f->file);
    g_assert_cmpint(image_source_resolve(getpid(), (uintptr_t)map + PAGE - 8,
                                         64 * PAGE, f->copies, &f->cache,
                                         &source, err, sizeof(err)), ==, -1);
    g_assert_true(strstr(err, "cannot read"));
    munmap(map, 2 * PAGE);
}

/* ---- framing ------------------------------------------------------------- */

static void socket_pair(int sv[2])
{
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), ==, 0);
}

static void test_messages_carry_descriptors(void)
{
    struct copsim_message *m = g_new0(struct copsim_message, 1);
    struct copsim_load_request request = {.object_id = 0x1234};
    int sv[2], fds[2] = {0, 1};
    struct stat a, b;

    socket_pair(sv);
    copsim_header_init(&request.header, COPSIM_LOAD, sizeof(request));
    g_assert_cmpint(copsim_send(sv[0], &request.header, fds, 2), ==, 0);
    g_assert_cmpint(copsim_receive(sv[1], m), ==, 1);
    g_assert_cmpuint(m->size, ==, sizeof(request));
    g_assert_cmpuint(m->u.header.type, ==, COPSIM_LOAD);
    g_assert_cmpuint(((struct copsim_load_request *)m->u.bytes)->object_id,
                     ==, 0x1234);
    g_assert_cmpuint(m->n_fds, ==, 2);
    g_assert_cmpint(fstat(m->fds[0], &a), ==, 0);
    g_assert_cmpint(fstat(0, &b), ==, 0);
    g_assert_cmpuint(a.st_ino, ==, b.st_ino);
    g_assert_cmpint(fcntl(m->fds[0], F_GETFD) & FD_CLOEXEC, !=, 0);
    copsim_message_close_fds(m);
    g_assert_cmpuint(m->n_fds, ==, 0);
    close(sv[0]);
    g_assert_cmpint(copsim_receive(sv[1], m), ==, 0);
    close(sv[1]);
    g_free(m);
}

static void test_malformed_messages_are_refused(void)
{
    struct copsim_message *m = g_new0(struct copsim_message, 1);
    struct copsim_header header;
    int sv[2], fd = 0;

    socket_pair(sv);
    copsim_header_init(&header, COPSIM_INFO, sizeof(header));
    header.version = 2;
    g_assert_cmpint(send(sv[0], &header, sizeof(header), 0), ==,
                    sizeof(header));
    errno = 0;
    g_assert_cmpint(copsim_receive(sv[1], m), ==, -1);
    g_assert_cmpint(errno, ==, EPROTO);
    header.version = COPSIM_PROTOCOL_VERSION;
    header.size = 100;      /* says more than was sent */
    g_assert_cmpint(send(sv[0], &header, sizeof(header), 0), ==,
                    sizeof(header));
    g_assert_cmpint(copsim_receive(sv[1], m), ==, -1);
    g_assert_cmpint(errno, ==, EPROTO);
    g_assert_cmpint(send(sv[0], "abc", 3, 0), ==, 3);
    g_assert_cmpint(copsim_receive(sv[1], m), ==, -1);
    g_assert_cmpint(errno, ==, EPROTO);
    /* Sending refuses what the protocol cannot carry. */
    header.size = 2;
    g_assert_cmpint(copsim_send(sv[0], &header, NULL, 0), ==, -1);
    header.size = sizeof(header);
    g_assert_cmpint(copsim_send(sv[0], &header, &fd, COPSIM_FDS_MAX + 1), ==,
                    -1);
    close(sv[0]);
    close(sv[1]);
    g_free(m);
}

static void test_socket_path_defaults(void)
{
    char path[256], expected[64];

    g_setenv("COPSIM_SOCKET", "/run/x/copsim.sock", TRUE);
    g_assert_cmpint(copsim_socket_path(path, sizeof(path)), ==, 0);
    g_assert_cmpstr(path, ==, "/run/x/copsim.sock");
    g_unsetenv("COPSIM_SOCKET");
    g_setenv("XDG_RUNTIME_DIR", "/run/user/1000", TRUE);
    g_assert_cmpint(copsim_socket_path(path, sizeof(path)), ==, 0);
    g_assert_cmpstr(path, ==, "/run/user/1000/coprof/copsim.sock");
    g_unsetenv("XDG_RUNTIME_DIR");
    g_assert_cmpint(copsim_socket_path(path, sizeof(path)), ==, 0);
    snprintf(expected, sizeof(expected), "/tmp/coprof-%d/copsim.sock",
             (int)getuid());
    g_assert_cmpstr(path, ==, expected);
    g_assert_cmpint(copsim_socket_path(path, 8), ==, -1);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/copsim/maps/parse", test_parse_lines);
    g_test_add_func("/copsim/maps/own-and-call-stack",
                    test_own_maps_and_call_stack);
    g_test_add("/copsim/image/file-page-offset", struct fixture, NULL,
               fixture_set_up, test_file_mapping_with_page_offset,
               fixture_tear_down);
    g_test_add("/copsim/image/across-mappings", struct fixture, NULL,
               fixture_set_up, test_image_across_mappings, fixture_tear_down);
    g_test_add("/copsim/image/anonymous", struct fixture, NULL,
               fixture_set_up, test_anonymous_memory_is_copied,
               fixture_tear_down);
    g_test_add("/copsim/image/replaced-file", struct fixture, NULL,
               fixture_set_up, test_replaced_file_is_not_trusted,
               fixture_tear_down);
    g_test_add("/copsim/image/errors", struct fixture, NULL, fixture_set_up,
               test_resolution_errors, fixture_tear_down);
    g_test_add_func("/copsim/protocol/descriptors",
                    test_messages_carry_descriptors);
    g_test_add_func("/copsim/protocol/malformed",
                    test_malformed_messages_are_refused);
    g_test_add_func("/copsim/protocol/socket-path", test_socket_path_defaults);
    return g_test_run();
}
