/*
 * file.h — creating, mapping and checking coplog files.  See file.c.
 */
#ifndef COPROF_EVENTLOG_FILE_H
#define COPROF_EVENTLOG_FILE_H

#include "eventlog/coplog.h"
#include "eventlog/layout.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct log_file {
    char *path;
    uint8_t *base;
    size_t size;
    bool writable;
    struct layout_header *header;
};

/* Creates the file at path for config (replacing any file there only once
 * the new one is complete) and maps it for writing. */
int log_file_create(struct log_file *file, const char *path,
                    const struct coplog_config *config, char *error);

/* Maps an existing file and checks every size and offset in its header and
 * descriptors, so that later accesses stay inside the mapping.  Readers'
 * and writers' mappings are populated up front (no page fault per page
 * later, which costs microseconds in a VM); LOG_FILE_CONTROL maps for
 * writing the control words only. */
enum log_file_access { LOG_FILE_READ, LOG_FILE_WRITE, LOG_FILE_CONTROL };

int log_file_map(struct log_file *file, const char *path,
                 enum log_file_access access, char *error);

void log_file_unmap(struct log_file *file);

/* Writes "PATH: reason" (path may be NULL) into error, if error is not
 * NULL, and returns -1. */
int log_error(char *error, const char *path, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

static inline struct layout_subsys *log_file_subsys(const struct log_file *file,
                                                    unsigned index)
{
    return (struct layout_subsys *)(file->base + file->header->subsys_offset) +
           index;
}

static inline struct layout_ring *log_file_ring(const struct log_file *file,
                                                const struct layout_subsys *subsys,
                                                unsigned ring)
{
    return (struct layout_ring *)(file->base + file->header->rings_offset) +
           subsys->first_ring + ring;
}

static inline uint8_t *log_file_records(const struct log_file *file,
                                        const struct layout_subsys *subsys,
                                        unsigned ring)
{
    return file->base + subsys->data_offset + ring * subsys->ring_stride;
}

static inline uint8_t *log_file_strings(const struct log_file *file,
                                        const struct layout_subsys *subsys,
                                        unsigned ring)
{
    return log_file_records(file, subsys, ring) +
           (uint64_t)subsys->capacity * subsys->record_bytes;
}

/* The index of the subsystem called name, or -1. */
int log_file_find_subsys(const struct log_file *file, const char *name);

/* Whether name is a valid subsystem name. */
bool log_name_valid(const char *name);

#endif /* COPROF_EVENTLOG_FILE_H */
