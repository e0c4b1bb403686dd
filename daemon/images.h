/*
 * images.h — the images a session's contexts run, checked and cached.
 *
 * The stream names an image by identity (device, inode, size, content
 * hash) and the offset of its ELF header in that file; IMAGE records give
 * the path of each identity.  The first time a context needs an (identity,
 * offset), the registry opens the path, checks that the file is still the
 * one named — same device, inode and size, and the same SHA-256 prefix over
 * the bytes it then reads — opens the ELF image at the offset with the
 * overlay library, and writes a copy of the image's bytes into the session's
 * image cache, so reports work after the binary changes or vanishes.
 *
 * An image that cannot be used (no path was sent, unreadable, malformed,
 * or a file whose identity no longer matches) is never used: its record
 * says why, a warning is printed once, and the daemon keeps that context's
 * samples as raw LS addresses.
 */
#ifndef COPROF_DAEMON_IMAGES_H
#define COPROF_DAEMON_IMAGES_H

#include "escape-protocol/copstream.h"
#include "overlay/overlay.h"

#include <stdbool.h>
#include <stdint.h>

enum image_status {
    IMAGE_OK,               /* checked, open, cached */
    IMAGE_NO_PATH,          /* no IMAGE record named the identity */
    IMAGE_UNREADABLE,       /* cannot be opened, read or parsed */
    IMAGE_CHANGED,          /* the file's identity no longer matches */
};

struct image_record {
    uint32_t id;                    /* images.id, from 1 */
    struct copstream_image_id identity;
    uint64_t offset;                /* of the ELF header in the file */
    char *path;                     /* NULL until an IMAGE record names it */
    struct ovl_image *ovl;          /* NULL unless status is IMAGE_OK */
    enum image_status status;
    char *message;                  /* why it cannot be used, or NULL */
    char *cache_file;               /* relative to the session dir */
    bool dirty;                     /* changed since last written */
};

struct image_registry;

/* The cache is written under session_dir/images; quiet: no warnings. */
struct image_registry *image_registry_new(const char *session_dir, bool quiet);
void image_registry_free(struct image_registry *registry);

/* An IMAGE record: where the file of this identity is.  Images of that
 * identity that were waiting for a path are opened now. */
void image_registry_note_path(struct image_registry *registry,
                              const struct copstream_image_id *identity,
                              const uint8_t *path, uint32_t length);

/* The record of (identity, offset), opened and checked on first use;
 * never NULL (a record that cannot be used says why). */
struct image_record *image_registry_lookup(
    struct image_registry *registry, const struct copstream_image_id *identity,
    uint64_t offset);

unsigned image_registry_count(const struct image_registry *registry);
/* Records by position, 0 .. count-1 (id - 1). */
struct image_record *image_registry_at(struct image_registry *registry,
                                       unsigned index);

const char *image_status_name(enum image_status status);

/* The content hash of bytes: the first 8 bytes of their SHA-256, read as a
 * little-endian number (escape-protocol/README.md, CONTEXT). */
uint64_t image_content_hash(const uint8_t *bytes, size_t length);

#endif /* COPROF_DAEMON_IMAGES_H */
