/*
 * container.c — read an image's bytes from a file, or from a container file
 * that embeds it at some offset (a coprocessor image inside a host
 * executable, as cop-embed and embedspu make them).
 *
 * How it works
 * ------------
 * The image is read once, whole, into memory with pread(), and everything
 * after that (image.c) works on that copy, so no later read can reach past
 * the image, and a file that changes or shrinks afterwards cannot hurt.
 *
 * When the caller does not know the image's size, it is derived from the ELF
 * headers alone, before anything else is read: the image ends at the end of
 * the furthest of its ELF header, program header table, section header
 * table, segment file bytes and section file bytes.  Each of those is
 * checked against the end of the container as it is read, and the header
 * tables are read only once their extent is known to fit.  This is the only
 * place that reads ELF structures without libelf, because libelf needs to
 * know the image's size before it starts.
 */
#include "overlay/overlay-internal.h"

#include <elf.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * Reads exactly length bytes at offset.  Returns 0, or -1 with errno set
 * (errno 0 when the file ended first).
 */
static int read_exact(int fd, void *buffer, size_t length, uint64_t offset)
{
    uint8_t *at = buffer;

    while (length > 0) {
        ssize_t got = pread(fd, at, length, (off_t)offset);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = 0;
            return -1;
        }
        at += got;
        length -= (size_t)got;
        offset += (uint64_t)got;
    }
    return 0;
}

static int fail_read(struct ovl_error *error, const char *label,
                     const char *what, uint64_t offset)
{
    if (errno == 0)
        return ovl_fail(error, label, "the file ended while reading the %s "
                        "at offset 0x%" PRIx64, what, offset);
    return ovl_fail(error, label, "cannot read the %s at offset 0x%" PRIx64
                    ": %s", what, offset, strerror(errno));
}

/* Reads a header table of count entries of entry_size bytes at table_offset
 * (relative to the image), after checking it fits in available bytes. */
static void *read_table(int fd, const char *label, const char *what,
                        uint64_t image_offset, uint64_t available,
                        uint64_t table_offset, uint64_t count,
                        uint64_t entry_size, struct ovl_error *error)
{
    uint64_t length = count * entry_size;   /* count < 2^32, size < 2^16 */

    if (table_offset > available || length > available - table_offset) {
        ovl_fail(error, label, "the %s (offset 0x%" PRIx64 ", %" PRIu64
                 " bytes) extends past the end of the file", what,
                 table_offset, length);
        return NULL;
    }
    void *table = malloc(length ? length : 1);
    if (table == NULL) {
        ovl_fail(error, label, "out of memory reading the %s", what);
        return NULL;
    }
    if (read_exact(fd, table, length, image_offset + table_offset) != 0) {
        fail_read(error, label, what, image_offset + table_offset);
        free(table);
        return NULL;
    }
    return table;
}

/* Extends *end to cover [offset, offset + size), checked against available. */
static int cover(uint64_t *end, uint64_t offset, uint64_t size,
                 uint64_t available, const char *label, const char *what,
                 unsigned index, struct ovl_error *error)
{
    if (offset > available || size > available - offset)
        return ovl_fail(error, label, "%s %u (offset 0x%" PRIx64 ", size 0x%"
                        PRIx64 ") extends past the end of the file", what,
                        index, offset, size);
    if (offset + size > *end)
        *end = offset + size;
    return 0;
}

static int cover_segments(int fd, const char *label, uint64_t image_offset,
                          uint64_t available, const Elf32_Ehdr *header,
                          uint64_t phnum, uint64_t *end,
                          struct ovl_error *error)
{
    uint64_t phoff = le32toh(header->e_phoff);

    if (phnum == 0)
        return 0;
    if (le16toh(header->e_phentsize) != sizeof(Elf32_Phdr))
        return ovl_fail(error, label, "program header entries are %u bytes, "
                        "not %zu", le16toh(header->e_phentsize),
                        sizeof(Elf32_Phdr));
    Elf32_Phdr *phdrs = read_table(fd, label, "program header table",
                                   image_offset, available, phoff, phnum,
                                   sizeof(Elf32_Phdr), error);
    if (phdrs == NULL)
        return -1;
    int status = cover(end, phoff, phnum * sizeof(Elf32_Phdr), available,
                       label, "program header table", 0, error);
    for (uint64_t i = 0; status == 0 && i < phnum; i++)
        status = cover(end, le32toh(phdrs[i].p_offset),
                       le32toh(phdrs[i].p_filesz), available, label,
                       "segment", (unsigned)i, error);
    free(phdrs);
    return status;
}

static int cover_sections(int fd, const char *label, uint64_t image_offset,
                          uint64_t available, const Elf32_Ehdr *header,
                          uint64_t shnum, uint64_t *end,
                          struct ovl_error *error)
{
    uint64_t shoff = le32toh(header->e_shoff);
    /* extended numbering read the count from section header 0, which is
     * then part of the image even when it says there are no sections */
    uint64_t headers = shnum == 0 && shoff != 0 ? 1 : shnum;

    if (headers == 0)
        return 0;
    Elf32_Shdr *shdrs = read_table(fd, label, "section header table",
                                   image_offset, available, shoff, headers,
                                   sizeof(Elf32_Shdr), error);
    if (shdrs == NULL)
        return -1;
    int status = cover(end, shoff, headers * sizeof(Elf32_Shdr), available,
                       label, "section header table", 0, error);
    for (uint64_t i = 1; status == 0 && i < shnum; i++)
        if (le32toh(shdrs[i].sh_type) != SHT_NOBITS)
            status = cover(end, le32toh(shdrs[i].sh_offset),
                           le32toh(shdrs[i].sh_size), available, label,
                           "section", (unsigned)i, error);
    free(shdrs);
    return status;
}

/*
 * The header counts, with ELF extended numbering: when there are 0xffff or
 * more sections, e_shnum is 0 and section header 0 holds the count in
 * sh_size; when there are PN_XNUM or more segments, its sh_info does.
 */
static int header_counts(int fd, const char *label, uint64_t image_offset,
                         uint64_t available, const Elf32_Ehdr *header,
                         uint64_t *phnum, uint64_t *shnum,
                         struct ovl_error *error)
{
    uint64_t shoff = le32toh(header->e_shoff);

    *phnum = le16toh(header->e_phnum);
    *shnum = le16toh(header->e_shnum);
    if (shoff == 0) {
        *shnum = 0;
        if (*phnum == PN_XNUM)
            return ovl_fail(error, label, "e_phnum is PN_XNUM but there is "
                            "no section header 0 to hold the count");
        return 0;
    }
    if (le16toh(header->e_shentsize) != sizeof(Elf32_Shdr))
        return ovl_fail(error, label, "section header entries are %u bytes, "
                        "not %zu", le16toh(header->e_shentsize),
                        sizeof(Elf32_Shdr));
    if (*shnum != 0 && *phnum != PN_XNUM)
        return 0;
    Elf32_Shdr *first = read_table(fd, label, "section header table",
                                   image_offset, available, shoff, 1,
                                   sizeof(Elf32_Shdr), error);
    if (first == NULL)
        return -1;
    if (*shnum == 0)
        *shnum = le32toh(first->sh_size);
    if (*phnum == PN_XNUM)
        *phnum = le32toh(first->sh_info);
    free(first);
    return 0;
}

/* The image's length derived from its headers, within available bytes. */
static int image_extent(int fd, const char *label, uint64_t image_offset,
                        uint64_t available, uint64_t *extent,
                        struct ovl_error *error)
{
    Elf32_Ehdr header;
    uint64_t phnum, shnum, end = sizeof header;

    if (available < sizeof header)
        return ovl_fail(error, label, "only %" PRIu64 " bytes: too small for "
                        "an ELF header", available);
    if (read_exact(fd, &header, sizeof header, image_offset) != 0)
        return fail_read(error, label, "ELF header", image_offset);
    if (ovl_check_ident(header.e_ident, label, error) != 0 ||
        ovl_check_table_offsets(le32toh(header.e_phoff),
                                le32toh(header.e_shoff), label, error) != 0)
        return -1;
    if (header_counts(fd, label, image_offset, available, &header, &phnum,
                      &shnum, error) != 0)
        return -1;
    if (cover_segments(fd, label, image_offset, available, &header, phnum,
                       &end, error) != 0)
        return -1;
    if (cover_sections(fd, label, image_offset, available, &header, shnum,
                       &end, error) != 0)
        return -1;
    *extent = end;
    return 0;
}

/* "path" for a whole file, "path@0xOFFSET" for an embedded image. */
static char *make_label(const char *name, uint64_t offset)
{
    char *label;
    int length = offset ? asprintf(&label, "%s@0x%" PRIx64, name, offset)
                        : asprintf(&label, "%s", name);
    return length < 0 ? NULL : label;
}

static struct ovl_image *open_labelled(int fd, const char *label,
                                       uint64_t offset, uint64_t size,
                                       struct ovl_error *error)
{
    struct stat st;

    if (fstat(fd, &st) != 0) {
        ovl_fail(error, label, "cannot stat: %s", strerror(errno));
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        ovl_fail(error, label, "not a regular file");
        return NULL;
    }
    uint64_t file_size = (uint64_t)st.st_size;
    if (file_size == 0) {
        ovl_fail(error, label, "empty file");
        return NULL;
    }
    if (offset >= file_size) {
        ovl_fail(error, label, "offset 0x%" PRIx64 " is not inside the file "
                 "(%" PRIu64 " bytes)", offset, file_size);
        return NULL;
    }
    uint64_t available = file_size - offset;
    if (size == OVL_SIZE_UNKNOWN) {
        if (image_extent(fd, label, offset, available, &size, error) != 0)
            return NULL;
    } else if (size > available) {
        ovl_fail(error, label, "an image of %" PRIu64 " bytes does not fit in "
                 "the %" PRIu64 " bytes after offset 0x%" PRIx64, size,
                 available, offset);
        return NULL;
    }
    if (size > OVL_IMAGE_MAX) {
        ovl_fail(error, label, "image of %" PRIu64 " bytes is larger than "
                 "the %u-byte limit", size, OVL_IMAGE_MAX);
        return NULL;
    }
    uint8_t *bytes = malloc(size);
    if (bytes == NULL) {
        ovl_fail(error, label, "out of memory for %" PRIu64 " bytes", size);
        return NULL;
    }
    if (read_exact(fd, bytes, size, offset) != 0) {
        fail_read(error, label, "image", offset);
        free(bytes);
        return NULL;
    }
    return ovl_image_from_bytes(bytes, size, label, offset, error);
}

struct ovl_image *ovl_image_open_fd(int fd, const char *name, uint64_t offset,
                                    uint64_t size, struct ovl_error *error)
{
    char *label = make_label(name, offset);

    if (label == NULL) {
        ovl_fail(error, name, "out of memory");
        return NULL;
    }
    struct ovl_image *image = open_labelled(fd, label, offset, size, error);
    free(label);
    return image;
}

struct ovl_image *ovl_image_open_at(const char *path, uint64_t offset,
                                    uint64_t size, struct ovl_error *error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        ovl_fail(error, path, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct ovl_image *image = ovl_image_open_fd(fd, path, offset, size, error);
    close(fd);
    return image;
}

struct ovl_image *ovl_image_open(const char *path, struct ovl_error *error)
{
    return ovl_image_open_at(path, 0, OVL_SIZE_UNKNOWN, error);
}

struct ovl_image *ovl_image_open_memory(const void *bytes, size_t size,
                                        const char *name,
                                        struct ovl_error *error)
{
    const char *label = name ? name : "<memory>";

    if (size > OVL_IMAGE_MAX) {
        ovl_fail(error, label, "image of %zu bytes is larger than the "
                 "%u-byte limit", size, OVL_IMAGE_MAX);
        return NULL;
    }
    uint8_t *copy = malloc(size ? size : 1);
    if (copy == NULL) {
        ovl_fail(error, label, "out of memory for %zu bytes", size);
        return NULL;
    }
    memcpy(copy, bytes, size);
    return ovl_image_from_bytes(copy, size, label, 0, error);
}
