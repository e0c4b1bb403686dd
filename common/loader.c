/*
 * loader.c — the guest RAM file: create it, map it, place an image in it.
 *
 * The RAM is one file of COP_RAM_SIZE bytes that QEMU maps as the virt
 * machine's DRAM (memory-backend-file, share=on), so a byte at guest address
 * A is at file offset A - COP_RAM_BASE.  This module maps the same file and
 * writes the program into it before QEMU starts: QEMU neither loads nor
 * clears anything in it (it only copies its device tree to the top of RAM).
 *
 * Placement follows docs/coprocessor-abi.md: resident PT_LOAD segments at
 * their local-store addresses, the ELF file byte for byte in the image
 * window, the boot block (window addresses, argc, argv) at COP_BOOT_BASE.
 * Overlay segments are skipped; the coprocessor fetches them itself.
 */
#include "common/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int map_ram(struct cop_ram *ram, const char *label,
                   struct cop_error *err)
{
    ram->base = mmap(NULL, COP_RAM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                     ram->fd, 0);
    if (ram->base == MAP_FAILED) {
        cop_error_set(err, "%s: cannot map: %s", label, strerror(errno));
        ram->base = NULL;
        return -1;
    }
    return 0;
}

/* flags: O_TRUNC for a file that may exist, O_EXCL for a new one. */
static int open_named(struct cop_ram *ram, const char *path, int flags,
                      struct cop_error *err)
{
    if (strlen(path) >= sizeof(ram->path)) {
        cop_error_set(err, "%s: path too long", path);
        return -1;
    }
    ram->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | flags, 0600);
    if (ram->fd < 0) {
        cop_error_set(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    strcpy(ram->path, path);
    return 0;
}

/* The path by which QEMU opens ram->fd: through this process's fd table. */
static void name_by_fd(struct cop_ram *ram)
{
    snprintf(ram->path, sizeof(ram->path), "/proc/%ld/fd/%d",
             (long)getpid(), ram->fd);
}

/* An anonymous file, which QEMU opens through this process's fd table. */
static int open_anonymous(struct cop_ram *ram, struct cop_error *err)
{
    ram->fd = memfd_create("cop-ram", MFD_CLOEXEC);
    if (ram->fd < 0) {
        cop_error_set(err, "cop-ram: memfd_create: %s", strerror(errno));
        return -1;
    }
    name_by_fd(ram);
    return 0;
}

/*
 * Sizes the new file with every page reserved: a full file system or tmpfs
 * is an error here rather than a SIGBUS when the loader or the guest first
 * touches a page of a sparse file.
 */
static int reserve_ram(struct cop_ram *ram, const char *label,
                       struct cop_error *err)
{
    int error = posix_fallocate(ram->fd, 0, COP_RAM_SIZE);

    if (!error)
        return 0;
    cop_error_set(err, "%s: cannot reserve %u MiB of guest RAM: %s", label,
                  COP_RAM_SIZE >> 20, strerror(error));
    errno = error;
    return -1;
}

/* Sizes and maps the opened ram->fd (label names it in messages). */
static int size_and_map(struct cop_ram *ram, const char *label,
                        struct cop_error *err)
{
    if (reserve_ram(ram, label, err) < 0 || map_ram(ram, label, err) < 0) {
        cop_ram_close(ram);
        return -1;
    }
    return 0;
}

static int create_ram(struct cop_ram *ram, const char *path, int flags,
                      struct cop_error *err)
{
    memset(ram, 0, sizeof(*ram));
    ram->fd = -1;
    if ((path ? open_named(ram, path, flags, err)
              : open_anonymous(ram, err)) < 0)
        return -1;
    return size_and_map(ram, path ? ram->path : "guest RAM (memfd)", err);
}

int cop_ram_create_fd(struct cop_ram *ram, int fd, const char *label,
                      struct cop_error *err)
{
    memset(ram, 0, sizeof(*ram));
    ram->fd = fd;
    name_by_fd(ram);
    return size_and_map(ram, label, err);
}

int cop_ram_create(struct cop_ram *ram, const char *path,
                   struct cop_error *err)
{
    return create_ram(ram, path, O_TRUNC, err);
}

int cop_ram_create_new(struct cop_ram *ram, const char *path,
                       struct cop_error *err)
{
    return create_ram(ram, path, O_EXCL | O_NOFOLLOW, err);
}

int cop_ram_attach(struct cop_ram *ram, const char *path,
                   struct cop_error *err)
{
    struct stat st;

    memset(ram, 0, sizeof(*ram));
    if (strlen(path) >= sizeof(ram->path)) {
        cop_error_set(err, "%s: path too long", path);
        return -1;
    }
    ram->fd = open(path, O_RDWR | O_CLOEXEC);
    if (ram->fd < 0) {
        cop_error_set(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    strcpy(ram->path, path);
    if (fstat(ram->fd, &st) < 0 || st.st_size != COP_RAM_SIZE) {
        cop_error_set(err, "%s: not a coprocessor RAM file (%lld bytes, "
                      "expected %u)", path, (long long)st.st_size,
                      COP_RAM_SIZE);
        cop_ram_close(ram);
        return -1;
    }
    if (map_ram(ram, path, err) < 0) {
        cop_ram_close(ram);
        return -1;
    }
    return 0;
}

void cop_ram_close(struct cop_ram *ram)
{
    if (ram->base)
        munmap(ram->base, COP_RAM_SIZE);
    if (ram->fd >= 0)
        close(ram->fd);
    ram->base = NULL;
    ram->fd = -1;
}

void *cop_ram_at(const struct cop_ram *ram, uint32_t addr, size_t len)
{
    if (addr < COP_RAM_BASE || len > COP_RAM_SIZE ||
        addr - COP_RAM_BASE > COP_RAM_SIZE - len)
        return NULL;
    return ram->base + (addr - COP_RAM_BASE);
}

static void write_word(unsigned char *at, uint32_t value)
{
    memcpy(at, &value, sizeof(value));
}

/*
 * The boot block: header, then argv[] as guest pointers, then the strings.
 */
static int write_boot_block(struct cop_ram *ram, const struct cop_image *image,
                            int argc, char *const argv[], struct cop_error *err)
{
    unsigned char *block = cop_ram_at(ram, COP_BOOT_BASE, COP_BOOT_SIZE);
    uint32_t pointers = COP_BOOT_ARGS_OFFSET;
    uint64_t strings = pointers + 4ull * ((uint64_t)argc + 1);

    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]) + 1;
        if (strings + len > COP_BOOT_ARGS_END) {
            cop_error_set(err, "%s: arguments too long: argv and its strings "
                          "must fit in the %u bytes of the boot block before "
                          "its DMA channel", image->label,
                          COP_BOOT_ARGS_END - COP_BOOT_ARGS_OFFSET);
            return -1;
        }
        memcpy(block + strings, argv[i], len);
        write_word(block + pointers + 4 * i, COP_BOOT_BASE + (uint32_t)strings);
        strings += len;
    }
    write_word(block + pointers + 4 * argc, 0);

    struct cop_boot_block header = {
        .magic = COP_BOOT_MAGIC, .version = COP_BOOT_VERSION,
        .image_addr = COP_IMAGE_BASE, .image_size = (uint32_t)image->size,
        .data_addr = COP_DATA_BASE, .data_size = COP_DATA_SIZE,
        .argc = (uint32_t)argc, .argv_addr = COP_BOOT_BASE + pointers,
    };
    memcpy(block, &header, sizeof(header));
    return 0;
}

int cop_ram_load(struct cop_ram *ram, const struct cop_image *image,
                 int argc, char *const argv[], struct cop_error *err)
{
    memset(cop_ram_at(ram, COP_LS_BASE, COP_LS_SIZE), 0, COP_LS_SIZE);
    memset(cop_ram_at(ram, COP_BOOT_BASE, COP_BOOT_SIZE), 0, COP_BOOT_SIZE);

    if (argc < 1) {
        cop_error_set(err, "%s: no program name (argv[0])", image->label);
        return -1;
    }
    for (size_t i = 0; i < image->nsegments; i++) {
        const struct cop_segment *seg = &image->segments[i];
        if (seg->overlay)
            continue;
        memcpy(cop_ram_at(ram, seg->vaddr, seg->memsz),
               image->bytes + seg->offset, seg->filesz);
    }
    memcpy(cop_ram_at(ram, COP_IMAGE_BASE, image->size), image->bytes,
           image->size);
    return write_boot_block(ram, image, argc, argv, err);
}

uint32_t cop_ram_guard_word(const struct cop_ram *ram,
                            const struct cop_image *image, uint32_t region)
{
    const _Atomic uint32_t *word;

    if (region < 1 || region > image->nregions)
        return 0;
    word = cop_ram_at(ram, image->ovly_buf_table + 4 * (region - 1), 4);
    return atomic_load_explicit(word, memory_order_acquire);
}
