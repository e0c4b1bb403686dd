/*
 * images.c — the image registry (see images.h).
 *
 * Paths are kept by identity (the IMAGE records); image records by
 * (identity, offset), since one host file may embed several images.  An
 * image is opened once.  The file is read through one descriptor: fstat
 * for device, inode and size, then the whole file for the hash, then the
 * overlay library reads the ELF image at the offset from the same
 * descriptor, and its bytes must equal the hashed ones — so the image used
 * is exactly the file that was checked, even if the file changes while
 * being read.
 */
#include "daemon/images.h"
#include "daemon/store.h"
#include "common/safe-file.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct image_registry {
    char *session_dir;
    bool quiet;
    GHashTable *paths;          /* struct copstream_image_id * -> char * */
    GHashTable *records;        /* struct image_key * -> image_record * */
    GPtrArray *list;            /* image_record *, by id - 1 */
};

struct image_key {
    struct copstream_image_id identity;
    uint64_t offset;
};

/* ---- hash tables on identities ------------------------------------------ */

static guint identity_hash(gconstpointer p)
{
    const struct copstream_image_id *id = p;

    return (guint)(id->hash ^ id->inode * 31 ^ id->device * 131 ^ id->size);
}

static gboolean identity_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct copstream_image_id)) == 0;
}

static guint key_hash(gconstpointer p)
{
    const struct image_key *key = p;

    return identity_hash(&key->identity) ^ (guint)(key->offset * 2654435761u);
}

static gboolean key_equal(gconstpointer a, gconstpointer b)
{
    return memcmp(a, b, sizeof(struct image_key)) == 0;
}

/* ---- the content hash --------------------------------------------------- */

uint64_t image_content_hash(const uint8_t *bytes, size_t length)
{
    GChecksum *checksum = g_checksum_new(G_CHECKSUM_SHA256);
    uint8_t digest[32];
    gsize digest_length = sizeof digest;
    uint64_t hash = 0;

    g_checksum_update(checksum, bytes, (gssize)length);
    g_checksum_get_digest(checksum, digest, &digest_length);
    g_checksum_free(checksum);
    for (int i = 7; i >= 0; i--)
        hash = hash << 8 | digest[i];
    return hash;
}

/* ---- checking and opening ----------------------------------------------- */

static void set_unusable(struct image_record *record, enum image_status status,
                         char *message)
{
    record->status = status;
    g_free(record->message);
    record->message = message;
    record->dirty = true;
}

/* Reads the whole file behind fd, of size bytes; NULL with errno set. */
static uint8_t *read_whole(int fd, uint64_t size)
{
    uint8_t *bytes = g_try_malloc(size ? size : 1);
    uint64_t done = 0;

    if (bytes == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    while (done < size) {
        ssize_t n = pread(fd, bytes + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = EIO;        /* the file shrank while read */
            g_free(bytes);
            return NULL;
        }
        done += (uint64_t)n;
    }
    return bytes;
}

/*
 * NULL when st matches the record's identity, else which part differs.
 * Never the file's own values: a forged stream may name a file its writer
 * cannot read, and the message must not tell them its inode or size.
 */
static const char *identity_difference(const struct image_record *record,
                                       const struct stat *st)
{
    const struct copstream_image_id *id = &record->identity;

    if ((uint64_t)st->st_dev != id->device)
        return "its device differs";
    if ((uint64_t)st->st_ino != id->inode)
        return "its inode differs";
    if ((uint64_t)st->st_size != id->size)
        return "its size differs";
    return NULL;
}

static void write_cache(struct image_registry *registry,
                        struct image_record *record)
{
    g_autofree char *name = g_strdup_printf(
        "%016" PRIx64 "-%" PRIx64 ".elf", record->identity.hash,
        record->offset);
    g_autofree char *relative = g_build_filename(SESSION_CACHE_DIR, name,
                                                 NULL);
    g_autofree char *path = g_build_filename(registry->session_dir, relative,
                                             NULL);
    GError *error = NULL;

    if (!g_file_set_contents_full(path,
                                  (const char *)ovl_image_bytes(record->ovl),
                                  (gssize)ovl_image_size(record->ovl),
                                  G_FILE_SET_CONTENTS_CONSISTENT,
                                  SAFE_FILE_MODE, &error)) {
        if (!registry->quiet)
            g_printerr("coprofd: %s: cannot cache the image: %s\n",
                       record->path, error->message);
        g_error_free(error);
        return;
    }
    record->cache_file = g_steal_pointer(&relative);
}

/* Opens the checked bytes as an ELF image; the bytes read by the overlay
 * library must be the ones hashed. */
static void open_checked(struct image_record *record, int fd,
                         const uint8_t *bytes)
{
    struct ovl_error error;

    record->ovl = ovl_image_open_fd(fd, record->path, record->offset,
                                    OVL_SIZE_UNKNOWN, &error);
    if (record->ovl == NULL) {
        set_unusable(record, IMAGE_UNREADABLE, g_strdup(error.message));
        return;
    }
    if (memcmp(ovl_image_bytes(record->ovl), bytes + record->offset,
               ovl_image_size(record->ovl)) != 0) {
        ovl_image_close(record->ovl);
        record->ovl = NULL;
        set_unusable(record, IMAGE_CHANGED,
                     g_strdup_printf("%s: changed while being read",
                                     record->path));
        return;
    }
    record->status = IMAGE_OK;
    record->dirty = true;
}

/* Checks the file against the identity and hash, then opens it. */
static void check_and_open(struct image_record *record, int fd)
{
    struct stat st;

    if (fstat(fd, &st) != 0) {
        set_unusable(record, IMAGE_UNREADABLE,
                     g_strdup_printf("%s: cannot stat: %s", record->path,
                                     g_strerror(errno)));
        return;
    }
    const char *difference = identity_difference(record, &st);
    if (difference != NULL) {
        set_unusable(record, IMAGE_CHANGED,
                     g_strdup_printf("%s: not the file the context ran "
                                     "(%s)", record->path, difference));
        return;
    }
    uint8_t *bytes = read_whole(fd, (uint64_t)st.st_size);
    if (bytes == NULL) {
        set_unusable(record, IMAGE_UNREADABLE,
                     g_strdup_printf("%s: cannot read: %s", record->path,
                                     g_strerror(errno)));
        return;
    }
    uint64_t hash = image_content_hash(bytes, (size_t)st.st_size);
    if (hash != record->identity.hash)
        set_unusable(record, IMAGE_CHANGED,
                     g_strdup_printf("%s: not the file the context ran "
                                     "(its content hash differs)",
                                     record->path));
    else
        open_checked(record, fd, bytes);
    g_free(bytes);
}

static void warn_once(const struct image_registry *registry,
                      const struct image_record *record)
{
    if (!registry->quiet && record->message != NULL)
        g_printerr("coprofd: %s; its samples are kept as raw LS "
                   "addresses\n", record->message);
}

/*
 * Opens path for reading if it is a regular file of a bounded size
 * (safe_in_open(), the one rule for files a session or stream names); -1
 * and the reason in why otherwise.  A stream may name anything: a FIFO,
 * whose open would wait for a writer forever, or a device.
 */
static int open_regular(const char *path, char *why, size_t len)
{
    char err[1024];
    size_t n = strlen(path);
    int fd = safe_in_open(path, SAFE_IN_SIZE_MAX, SAFE_IN_FOLLOW, err,
                          sizeof(err));

    if (fd < 0)
        snprintf(why, len, "%s", strncmp(err, path, n) == 0
                 && err[n] == ':' ? err + n + 2 : err);
    return fd;
}

/* Tries to open the record's image: status and message say how it went. */
/*
 * The image's offset or size from the stream, when either is 2^63 or more:
 * no file has such an offset (off_t is signed), and the session's columns
 * hold signed 64-bit integers.  NULL when both are in range.
 */
static const char *out_of_range(const struct image_record *record,
                                uint64_t *value)
{
    *value = record->offset;
    if (record->offset > INT64_MAX)
        return "image offset";
    *value = record->identity.size;
    if (record->identity.size > INT64_MAX)
        return "image file size";
    return NULL;
}

static void try_open(struct image_registry *registry,
                     struct image_record *record)
{
    const char *path = g_hash_table_lookup(registry->paths,
                                           &record->identity);
    uint64_t value;
    const char *field = out_of_range(record, &value);

    if (field != NULL) {
        set_unusable(record, IMAGE_UNREADABLE,
                     g_strdup_printf("the stream's %s %" PRIu64 " is out of "
                                     "range (2^63 or more)", field, value));
        warn_once(registry, record);
        return;
    }
    if (path == NULL) {
        set_unusable(record, IMAGE_NO_PATH,
                     g_strdup_printf("image inode %" PRIu64 " (hash %016"
                                     PRIx64 "): no IMAGE record gave its path",
                                     record->identity.inode,
                                     record->identity.hash));
        warn_once(registry, record);
        return;
    }
    g_free(record->path);
    record->path = g_strdup(path);
    char reason[1024];
    int fd = open_regular(path, reason, sizeof(reason));
    if (fd < 0) {
        set_unusable(record, IMAGE_UNREADABLE,
                     g_strdup_printf("%s: cannot open: %s", path, reason));
    } else {
        check_and_open(record, fd);
        close(fd);
    }
    if (record->status == IMAGE_OK)
        write_cache(registry, record);
    else
        warn_once(registry, record);
}

/* ---- the registry ------------------------------------------------------- */

struct image_registry *image_registry_new(const char *session_dir, bool quiet)
{
    struct image_registry *registry = g_new0(struct image_registry, 1);

    registry->session_dir = g_strdup(session_dir);
    registry->quiet = quiet;
    registry->paths = g_hash_table_new_full(identity_hash, identity_equal,
                                            g_free, g_free);
    registry->records = g_hash_table_new_full(key_hash, key_equal, g_free,
                                              NULL);
    registry->list = g_ptr_array_new();
    return registry;
}

static void record_free(struct image_record *record)
{
    if (record->ovl != NULL)
        ovl_image_close(record->ovl);
    g_free(record->path);
    g_free(record->message);
    g_free(record->cache_file);
    g_free(record);
}

void image_registry_free(struct image_registry *registry)
{
    if (registry == NULL)
        return;
    for (guint i = 0; i < registry->list->len; i++)
        record_free(g_ptr_array_index(registry->list, i));
    g_ptr_array_free(registry->list, TRUE);
    g_hash_table_destroy(registry->records);
    g_hash_table_destroy(registry->paths);
    g_free(registry->session_dir);
    g_free(registry);
}

void image_registry_note_path(struct image_registry *registry,
                              const struct copstream_image_id *identity,
                              const uint8_t *path, uint32_t length)
{
    g_hash_table_replace(registry->paths,
                         g_memdup2(identity, sizeof *identity),
                         g_strndup((const char *)path, length));
    for (guint i = 0; i < registry->list->len; i++) {
        struct image_record *record = g_ptr_array_index(registry->list, i);
        if (record->status == IMAGE_NO_PATH &&
            identity_equal(&record->identity, identity))
            try_open(registry, record);
    }
}

struct image_record *image_registry_lookup(
    struct image_registry *registry, const struct copstream_image_id *identity,
    uint64_t offset)
{
    struct image_key key = { .identity = *identity, .offset = offset };
    struct image_record *record = g_hash_table_lookup(registry->records, &key);

    if (record != NULL)
        return record;
    record = g_new0(struct image_record, 1);
    record->id = registry->list->len + 1;
    record->identity = *identity;
    record->offset = offset;
    record->dirty = true;
    g_ptr_array_add(registry->list, record);
    g_hash_table_insert(registry->records, g_memdup2(&key, sizeof key),
                        record);
    try_open(registry, record);
    return record;
}

unsigned image_registry_count(const struct image_registry *registry)
{
    return registry->list->len;
}

struct image_record *image_registry_at(struct image_registry *registry,
                                       unsigned index)
{
    return index < registry->list->len ?
           g_ptr_array_index(registry->list, index) : NULL;
}

const char *image_status_name(enum image_status status)
{
    switch (status) {
    case IMAGE_OK:
        return "ok";
    case IMAGE_NO_PATH:
        return "no-path";
    case IMAGE_UNREADABLE:
        return "unreadable";
    case IMAGE_CHANGED:
        return "changed";
    }
    return "unknown";
}
