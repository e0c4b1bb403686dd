/*
 * resolve.h — object-ids and return addresses resolved in a client's own
 * address space, through /proc/PID/maps.
 *
 * An object-id is the address of an image's ELF header in the host process
 * (docs/coprocessor-abi.md, "Embedding in a host program").  copsim turns
 * it into the file that holds the image and the offset of the ELF header in
 * that file, counting the mapping's page offset (Cell's oprofile forgot
 * it), with the file's identity: device,
 * inode, size and content hash.  An image in anonymous memory (or in a file
 * that was deleted or replaced since it was mapped) is copied out of the
 * process into a file of copsim's, named by its content, and that copy is
 * the identity.  The same maps give the modules of a call stack.
 */
#ifndef COPROF_COPSIM_RESOLVE_H
#define COPROF_COPSIM_RESOLVE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One line of /proc/PID/maps. */
struct proc_mapping {
    uint64_t start;
    uint64_t end;
    uint64_t page_offset;       /* file offset of start */
    uint64_t device;            /* makedev(major, minor) */
    uint64_t inode;
    char perms[5];
    int deleted;                /* the path ended in " (deleted)" */
    char *path;                 /* "" for anonymous memory, else as shown */
};

struct proc_maps {
    struct proc_mapping *mappings;
    size_t count;
    char *text;                 /* the file's text; paths point into it */
};

/*
 * Parses one line (without its newline) of a maps file; the path points
 * into the line, which is modified.  Returns 0, or -1 for a malformed line.
 */
int proc_mapping_parse(char *line, struct proc_mapping *mapping);

/* Reads /proc/PID/maps.  Returns 0, or -1 with the reason in err. */
int proc_maps_read(pid_t pid, struct proc_maps *maps, char *err,
                   size_t errlen);

/* The mapping that contains addr, or NULL. */
const struct proc_mapping *proc_maps_find(const struct proc_maps *maps,
                                          uint64_t addr);

void proc_maps_free(struct proc_maps *maps);

/* Whether tid is a thread of process pid. */
int proc_is_thread_of(pid_t pid, pid_t tid);

/*
 * Content hashes by file identity, so that a host binary loaded by many
 * contexts is hashed once (while its size and mtime stay the same).
 */
struct hash_cache {
    pthread_mutex_t lock;
    struct hash_cache_entry *entries;
    size_t count;
    size_t capacity;
};

void hash_cache_init(struct hash_cache *cache);
void hash_cache_free(struct hash_cache *cache);

/*
 * The content hash of an open file: the first 8 bytes of its SHA-256 read
 * as a little-endian number (escape-protocol/README.md).  Returns 0, or -1
 * with err set.
 */
int file_content_hash(struct hash_cache *cache, int fd, const char *label,
                      uint64_t *hash, char *err, size_t errlen);

/* Where an image came from, and its bytes. */
struct image_source {
    char *path;
    uint64_t offset;
    uint64_t device;
    uint64_t inode;
    uint64_t file_size;
    uint64_t hash;
    int anonymous;              /* path is a copy in copy_dir */
    unsigned char *bytes;       /* the image, size bytes, owned */
    size_t size;
};

/*
 * Resolves the image of `size` bytes at object_id in process pid and reads
 * it: from its file when the bytes are a file mapping whose file is still
 * the one mapped, else copied out of the process (process_vm_readv) into
 * copy_dir/image-HASH.elf.  Returns 0, or -1 with err set (not mapped, a
 * dead process, unreadable memory, a full disk, ...).
 */
int image_source_resolve(pid_t pid, uint64_t object_id, uint64_t size,
                         const char *copy_dir, struct hash_cache *cache,
                         struct image_source *source, char *err,
                         size_t errlen);

void image_source_free(struct image_source *source);

/*
 * Formats a call stack as "MODULE+0xOFFSET" entries separated by spaces,
 * OFFSET being the return address's file offset in MODULE, or "?+0xADDR"
 * for an address outside any file mapping; cut at whole entries to fit len.
 */
void format_call_stack(const struct proc_maps *maps, const uint64_t *frames,
                       size_t n_frames, char *buf, size_t len);

#endif /* COPROF_COPSIM_RESOLVE_H */
