/*
 * resolve.c — object-ids and return addresses in a client's address space
 * (resolve.h).
 *
 * /proc/PID/maps lists the process's mappings with, for file mappings, the
 * file's device, inode, path and the file offset of the mapping's start.
 * An address A in a mapping [start, end) with page offset P lies at file
 * offset A - start + P.  The image of a handle may cross into the next
 * mapping (an image larger than one segment, say); every mapping it covers
 * must then be of the same file at consecutive offsets.
 *
 * The file is opened by its path and checked against the device and inode
 * the mapping shows: a binary rebuilt (replaced) or deleted since it was
 * mapped no longer holds the bytes the process runs, so the image is then
 * copied out of the process as for anonymous memory.  Copies are named by
 * their content hash, so many contexts of one anonymous image share a copy.
 */
#include "emulator/copsim/resolve.h"

#include "abi/cop-abi.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#define DELETED_SUFFIX " (deleted)"
#define HASH_CHUNK 65536

struct hash_cache_entry {
    uint64_t device;
    uint64_t inode;
    uint64_t size;
    int64_t mtime_sec;
    int64_t mtime_nsec;
    uint64_t hash;
};

/* ---- /proc/PID/maps ------------------------------------------------------ */

int proc_mapping_parse(char *line, struct proc_mapping *mapping)
{
    unsigned long long start, end, offset, inode;
    unsigned major, minor;
    char perms[5];
    int used = 0;
    char *path;
    size_t len;

    if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu%n", &start, &end, perms,
               &offset, &major, &minor, &inode, &used) != 7 || used == 0
        || start >= end)
        return -1;
    path = line + used;
    while (*path == ' ' || *path == '\t')
        path++;
    mapping->start = start;
    mapping->end = end;
    mapping->page_offset = offset;
    mapping->device = makedev(major, minor);
    mapping->inode = inode;
    memcpy(mapping->perms, perms, sizeof(perms));
    len = strlen(path);
    mapping->deleted = len >= strlen(DELETED_SUFFIX)
        && strcmp(path + len - strlen(DELETED_SUFFIX), DELETED_SUFFIX) == 0;
    if (mapping->deleted)
        path[len - strlen(DELETED_SUFFIX)] = '\0';
    mapping->path = path;
    return 0;
}

static int add_mapping(struct proc_maps *maps, size_t *capacity,
                       const struct proc_mapping *mapping)
{
    if (maps->count == *capacity) {
        size_t grown = *capacity ? 2 * *capacity : 64;
        struct proc_mapping *bigger = realloc(maps->mappings,
                                              grown * sizeof(*bigger));
        if (!bigger)
            return -1;
        maps->mappings = bigger;
        *capacity = grown;
    }
    maps->mappings[maps->count++] = *mapping;
    return 0;
}

int proc_maps_read(pid_t pid, struct proc_maps *maps, char *err,
                   size_t errlen)
{
    char path[64];
    gchar *text = NULL;
    gsize length;
    GError *error = NULL;
    size_t capacity = 0;

    memset(maps, 0, sizeof(*maps));
    snprintf(path, sizeof(path), "/proc/%ld/maps", (long)pid);
    if (!g_file_get_contents(path, &text, &length, &error)) {
        snprintf(err, errlen, "process %ld: cannot read its maps: %s",
                 (long)pid, error->message);
        g_error_free(error);
        return -1;
    }
    maps->text = text;
    for (char *line = text, *next; line && *line; line = next) {
        struct proc_mapping mapping;

        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (proc_mapping_parse(line, &mapping) < 0)
            continue;
        if (add_mapping(maps, &capacity, &mapping) < 0) {
            snprintf(err, errlen, "process %ld: maps: out of memory",
                     (long)pid);
            proc_maps_free(maps);
            return -1;
        }
    }
    return 0;
}

const struct proc_mapping *proc_maps_find(const struct proc_maps *maps,
                                          uint64_t addr)
{
    for (size_t i = 0; i < maps->count; i++)
        if (addr >= maps->mappings[i].start && addr < maps->mappings[i].end)
            return &maps->mappings[i];
    return NULL;
}

void proc_maps_free(struct proc_maps *maps)
{
    free(maps->mappings);
    g_free(maps->text);
    memset(maps, 0, sizeof(*maps));
}

int proc_is_thread_of(pid_t pid, pid_t tid)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%ld/task/%ld", (long)pid, (long)tid);
    return tid > 0 && access(path, F_OK) == 0;
}

/* ---- Content hashes ------------------------------------------------------ */

void hash_cache_init(struct hash_cache *cache)
{
    pthread_mutex_init(&cache->lock, NULL);
    cache->entries = NULL;
    cache->count = 0;
    cache->capacity = 0;
}

void hash_cache_free(struct hash_cache *cache)
{
    free(cache->entries);
    pthread_mutex_destroy(&cache->lock);
}

static int same_version(const struct hash_cache_entry *entry,
                        const struct stat *st)
{
    return entry->device == st->st_dev && entry->inode == st->st_ino
        && entry->size == (uint64_t)st->st_size
        && entry->mtime_sec == st->st_mtim.tv_sec
        && entry->mtime_nsec == st->st_mtim.tv_nsec;
}

static int cache_lookup(struct hash_cache *cache, const struct stat *st,
                        uint64_t *hash)
{
    int found = 0;

    pthread_mutex_lock(&cache->lock);
    for (size_t i = 0; i < cache->count && !found; i++)
        if (same_version(&cache->entries[i], st)) {
            *hash = cache->entries[i].hash;
            found = 1;
        }
    pthread_mutex_unlock(&cache->lock);
    return found;
}

static void cache_store(struct hash_cache *cache, const struct stat *st,
                        uint64_t hash)
{
    struct hash_cache_entry entry = {
        st->st_dev, st->st_ino, (uint64_t)st->st_size, st->st_mtim.tv_sec,
        st->st_mtim.tv_nsec, hash,
    };

    pthread_mutex_lock(&cache->lock);
    if (cache->count == cache->capacity) {
        size_t grown = cache->capacity ? 2 * cache->capacity : 16;
        struct hash_cache_entry *bigger = realloc(cache->entries,
                                                  grown * sizeof(*bigger));
        if (bigger) {
            cache->entries = bigger;
            cache->capacity = grown;
        }
    }
    if (cache->count < cache->capacity)
        cache->entries[cache->count++] = entry;
    pthread_mutex_unlock(&cache->lock);
}

/* The first 8 bytes of a SHA-256 digest, little-endian. */
static uint64_t digest_prefix(GChecksum *checksum)
{
    guint8 digest[32];
    gsize length = sizeof(digest);
    uint64_t value = 0;

    g_checksum_get_digest(checksum, digest, &length);
    for (int i = 7; i >= 0; i--)
        value = value << 8 | digest[i];
    return value;
}

static uint64_t bytes_hash(const unsigned char *bytes, size_t size)
{
    GChecksum *checksum = g_checksum_new(G_CHECKSUM_SHA256);
    uint64_t value;

    g_checksum_update(checksum, bytes, size);
    value = digest_prefix(checksum);
    g_checksum_free(checksum);
    return value;
}

int file_content_hash(struct hash_cache *cache, int fd, const char *label,
                      uint64_t *hash, char *err, size_t errlen)
{
    struct stat st;
    GChecksum *checksum;
    unsigned char *chunk;
    off_t offset = 0;
    ssize_t got;

    if (fstat(fd, &st) < 0) {
        snprintf(err, errlen, "%s: %s", label, strerror(errno));
        return -1;
    }
    if (cache && cache_lookup(cache, &st, hash))
        return 0;
    chunk = malloc(HASH_CHUNK);
    if (!chunk) {
        snprintf(err, errlen, "%s: out of memory", label);
        return -1;
    }
    checksum = g_checksum_new(G_CHECKSUM_SHA256);
    while ((got = pread(fd, chunk, HASH_CHUNK, offset)) > 0) {
        g_checksum_update(checksum, chunk, (gssize)got);
        offset += got;
    }
    if (got < 0)
        snprintf(err, errlen, "%s: cannot read: %s", label, strerror(errno));
    else
        *hash = digest_prefix(checksum);
    g_checksum_free(checksum);
    free(chunk);
    if (got < 0)
        return -1;
    if (cache)
        cache_store(cache, &st, *hash);
    return 0;
}

/* ---- Images -------------------------------------------------------------- */

/*
 * Whether [addr, addr + size) lies in `first` and the mappings after it,
 * all of one file at consecutive offsets.
 */
static int file_covers(const struct proc_maps *maps,
                       const struct proc_mapping *first, uint64_t addr,
                       uint64_t size)
{
    const struct proc_mapping *m = first;
    const struct proc_mapping *last = maps->mappings + maps->count;
    uint64_t end = addr + size;

    if (first->inode == 0 || first->deleted || first->path[0] != '/')
        return 0;
    while (m->end < end) {
        const struct proc_mapping *next = m + 1;

        if (next == last || next->start != m->end
            || next->device != first->device || next->inode != first->inode
            || next->page_offset != m->page_offset + (m->end - m->start))
            return 0;
        m = next;
    }
    return 1;
}

/* Reads every byte asked for, or fails. */
static int read_exactly(int fd, unsigned char *buf, size_t size, off_t offset)
{
    while (size > 0) {
        ssize_t got = pread(fd, buf, size, offset);

        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = EIO;
            return -1;
        }
        buf += got;
        size -= (size_t)got;
        offset += got;
    }
    return 0;
}

/*
 * The file-mapped case.  Returns 0 when read from the file, 1 when the file
 * is not the one mapped any more (copy the process's bytes instead), -1 on
 * an error.
 */
static int read_from_file(const struct proc_mapping *mapping,
                          uint64_t object_id, uint64_t size,
                          struct hash_cache *cache,
                          struct image_source *source, char *err,
                          size_t errlen)
{
    uint64_t offset = object_id - mapping->start + mapping->page_offset;
    struct stat st;
    int fd = open(mapping->path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return 1;
    if (fstat(fd, &st) < 0 || st.st_dev != mapping->device
        || st.st_ino != mapping->inode
        || (uint64_t)st.st_size < offset + size) {
        close(fd);
        return 1;
    }
    source->bytes = malloc(size);
    if (!source->bytes) {
        snprintf(err, errlen, "%s: out of memory for a %" PRIu64 "-byte image",
                 mapping->path, size);
        close(fd);
        return -1;
    }
    if (read_exactly(fd, source->bytes, size, (off_t)offset) < 0) {
        snprintf(err, errlen, "%s: cannot read the image at offset %" PRIu64
                 ": %s", mapping->path, offset, strerror(errno));
        close(fd);
        return -1;
    }
    if (file_content_hash(cache, fd, mapping->path, &source->hash, err,
                          errlen) < 0) {
        close(fd);
        return -1;
    }
    close(fd);
    source->path = strdup(mapping->path);
    source->offset = offset;
    source->device = st.st_dev;
    source->inode = st.st_ino;
    source->file_size = (uint64_t)st.st_size;
    source->size = size;
    return source->path ? 0 : -1;
}

/* Copies size bytes at addr out of process pid. */
static int copy_from_process(pid_t pid, uint64_t addr, uint64_t size,
                             unsigned char **bytes, char *err, size_t errlen)
{
    uint64_t done = 0;

    *bytes = malloc(size);
    if (!*bytes) {
        snprintf(err, errlen, "out of memory for a %" PRIu64 "-byte image",
                 size);
        return -1;
    }
    while (done < size) {
        struct iovec local = {*bytes + done, size - done};
        struct iovec remote = {(void *)(uintptr_t)(addr + done), size - done};
        ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);

        if (got <= 0) {
            snprintf(err, errlen, "process %ld: cannot read %" PRIu64
                     " bytes at 0x%" PRIx64 ": %s", (long)pid, size, addr,
                     got < 0 ? strerror(errno) : "short read");
            free(*bytes);
            *bytes = NULL;
            return -1;
        }
        done += (uint64_t)got;
    }
    return 0;
}

/* Writes bytes to path through a temporary file, so a failed write (a full
 * disk) leaves nothing behind. */
static int write_copy(const char *path, const unsigned char *bytes,
                      size_t size, char *err, size_t errlen)
{
    char *temp = g_strdup_printf("%s.XXXXXX", path);
    int fd = mkostemp(temp, O_CLOEXEC);
    size_t done = 0;

    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create: %s", temp, strerror(errno));
        g_free(temp);
        return -1;
    }
    while (done < size) {
        ssize_t put = write(fd, bytes + done, size - done);

        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            break;
        done += (size_t)put;
    }
    if (done < size || fsync(fd) < 0 || close(fd) < 0) {
        snprintf(err, errlen, "%s: cannot write the image copy: %s", path,
                 strerror(errno ? errno : EIO));
        if (done < size)
            close(fd);
        unlink(temp);
        g_free(temp);
        return -1;
    }
    if (rename(temp, path) < 0) {
        snprintf(err, errlen, "%s: cannot rename the image copy: %s", path,
                 strerror(errno));
        unlink(temp);
        g_free(temp);
        return -1;
    }
    g_free(temp);
    return 0;
}

/* The anonymous case: the process's bytes, kept in copy_dir. */
static int copy_image(pid_t pid, uint64_t object_id, uint64_t size,
                      const char *copy_dir, struct image_source *source,
                      char *err, size_t errlen)
{
    struct stat st;
    uint64_t hash;
    char *path;

    if (copy_from_process(pid, object_id, size, &source->bytes, err,
                          errlen) < 0)
        return -1;
    hash = bytes_hash(source->bytes, size);
    path = g_strdup_printf("%s/image-%016" PRIx64 ".elf", copy_dir, hash);
    if (stat(path, &st) < 0 || (uint64_t)st.st_size != size) {
        if (write_copy(path, source->bytes, size, err, errlen) < 0
            || stat(path, &st) < 0) {
            g_free(path);
            return -1;
        }
    }
    source->path = strdup(path);
    g_free(path);
    source->offset = 0;
    source->device = st.st_dev;
    source->inode = st.st_ino;
    source->file_size = (uint64_t)st.st_size;
    source->hash = hash;
    source->anonymous = 1;
    source->size = size;
    return source->path ? 0 : -1;
}

int image_source_resolve(pid_t pid, uint64_t object_id, uint64_t size,
                         const char *copy_dir, struct hash_cache *cache,
                         struct image_source *source, char *err,
                         size_t errlen)
{
    struct proc_maps maps;
    const struct proc_mapping *mapping;
    int status = 1;

    memset(source, 0, sizeof(*source));
    if (size == 0 || size > COP_IMAGE_SIZE || object_id + size < object_id) {
        snprintf(err, errlen, "image at 0x%" PRIx64 ": size %" PRIu64 " is not "
                 "between 1 and %u bytes", object_id, size, COP_IMAGE_SIZE);
        return -1;
    }
    if (proc_maps_read(pid, &maps, err, errlen) < 0)
        return -1;
    mapping = proc_maps_find(&maps, object_id);
    if (!mapping) {
        snprintf(err, errlen, "object-id 0x%" PRIx64 " is not mapped in "
                 "process %ld", object_id, (long)pid);
        proc_maps_free(&maps);
        return -1;
    }
    if (file_covers(&maps, mapping, object_id, size))
        status = read_from_file(mapping, object_id, size, cache, source, err,
                                errlen);
    if (status == 1) {
        image_source_free(source);
        status = copy_image(pid, object_id, size, copy_dir, source, err,
                            errlen);
    }
    proc_maps_free(&maps);
    if (status < 0)
        image_source_free(source);
    return status;
}

void image_source_free(struct image_source *source)
{
    free(source->path);
    free(source->bytes);
    memset(source, 0, sizeof(*source));
}

/* ---- Call stacks --------------------------------------------------------- */

void format_call_stack(const struct proc_maps *maps, const uint64_t *frames,
                       size_t n_frames, char *buf, size_t len)
{
    size_t used = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < n_frames; i++) {
        const struct proc_mapping *m = proc_maps_find(maps, frames[i]);
        char entry[PATH_MAX + 32];
        int n;

        if (m && m->path[0] == '/')
            n = snprintf(entry, sizeof(entry), "%s%s+0x%" PRIx64,
                         used ? " " : "", m->path,
                         frames[i] - m->start + m->page_offset);
        else
            n = snprintf(entry, sizeof(entry), "%s?+0x%" PRIx64,
                         used ? " " : "", frames[i]);
        if (n < 0 || (size_t)n >= sizeof(entry) || used + (size_t)n >= len)
            break;
        memcpy(buf + used, entry, (size_t)n + 1);
        used += (size_t)n;
    }
}
