/*
 * file.c — creating, mapping and checking coplog files.
 *
 * Creation plans the layout of layout.h from a configuration (checking it
 * first), makes the whole file under a temporary name beside the target,
 * sparse: its blocks are allocated as records are written into them, so
 * the file takes on disk what was logged, up to its size (a session with
 * a few thousand records holds a few hundred KiB, not the rings'
 * megabytes).  The file system must have room for the whole file when it
 * is made (statvfs: a disk too full is an error now, not a SIGBUS in a
 * writer later); a disk that fills up afterwards can still fault a writer
 * of a ring's first lap.  It fills in the header and descriptors, and
 * renames the file into place: a reader never sees a half-made log.
 *
 * Mapping checks everything a reader or writer will later trust: the magic
 * and version, that the file is as long as its header says, and that every
 * region the header and descriptors name lies inside the file with sane
 * sizes.  After that, all accesses are within the mapping whatever the
 * records contain.  Each problem gives one line naming the file and what is
 * wrong with it.
 */
#include "eventlog/file.h"
#include "eventlog/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_CAPACITY       4096u
#define DEFAULT_ARGS           4u
#define DEFAULT_STRING_BYTES_PER_RECORD 32u
#define DEFAULT_FORMAT_SLOTS   4096u
#define DEFAULT_FORMAT_BYTES   (256u * 1024)
#define MAX_FILE_BYTES         (64ull << 30)

int log_error(char *error, const char *path, const char *format, ...)
{
    va_list args;
    int used = 0;

    if (error == NULL)
        return -1;
    if (path != NULL)
        used = snprintf(error, COPLOG_ERROR_MAX, "%s: ", path);
    if (used < 0 || used >= COPLOG_ERROR_MAX)
        used = 0;
    va_start(args, format);
    vsnprintf(error + used, COPLOG_ERROR_MAX - (size_t)used, format, args);
    va_end(args);
    return -1;
}

static bool is_power_of_two(uint64_t value)
{
    return value != 0 && (value & (value - 1)) == 0;
}

static uint64_t round_up(uint64_t value, uint64_t unit)
{
    return (value + unit - 1) / unit * unit;
}

bool log_name_valid(const char *name)
{
    size_t length = strlen(name);

    if (length == 0 || length > COPLOG_NAME_MAX)
        return false;
    for (size_t i = 0; i < length; i++) {
        char c = name[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                  (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

/* ------------------------------------------------------------- planning */

/* A subsystem as it will be laid out. */
struct subsys_plan {
    const char *name;
    uint32_t capacity, record_bytes, policy, rings, first_ring, strings_bytes;
    uint64_t data_offset, ring_stride;
    uint32_t control;
};

struct layout_plan {
    unsigned count;
    struct subsys_plan subsys[COPLOG_MAX_SUBSYS];
    uint32_t cpu_rings, ring_count;
    uint32_t format_slots;
    uint64_t format_bytes;
    uint64_t subsys_offset, rings_offset, format_slots_offset;
    uint64_t format_heap_offset, file_bytes;
};

static unsigned cpu_ring_count(void)
{
    int cpus = get_nprocs_conf();
    unsigned rings = 1;

    while (rings < (unsigned)(cpus > 0 ? cpus : 1) && rings < LAYOUT_MAX_RINGS)
        rings *= 2;
    return rings;
}

static int plan_subsys(const struct coplog_subsys_config *config,
                       unsigned cpu_rings, struct subsys_plan *plan,
                       char *error)
{
    const char *name = config->name;
    unsigned args = config->args ? config->args : DEFAULT_ARGS;
    enum coplog_level level = config->level ? config->level : COPLOG_VERBOSE;
    uint64_t strings;

    plan->name = name;
    plan->capacity = config->capacity ? config->capacity : DEFAULT_CAPACITY;
    if (!is_power_of_two(plan->capacity) ||
        plan->capacity > LAYOUT_MAX_CAPACITY)
        return log_error(error, NULL, "subsystem '%s': capacity %u is not a "
                         "power of two from 1 to %u", name, plan->capacity,
                         LAYOUT_MAX_CAPACITY);
    if (config->policy != COPLOG_CYCLIC && config->policy != COPLOG_ONESHOT)
        return log_error(error, NULL, "subsystem '%s': policy %d is neither "
                         "cyclic (0) nor one-shot (1)", name, config->policy);
    if (args > COPLOG_MAX_ARGS)
        return log_error(error, NULL, "subsystem '%s': %u arguments per "
                         "record, at most %d fit", name, args, COPLOG_MAX_ARGS);
    if (level < COPLOG_ERROR || level > COPLOG_LEVEL_MAX)
        return log_error(error, NULL, "subsystem '%s': level %d is not 1 to "
                         "%d", name, level, COPLOG_LEVEL_MAX);
    strings = config->string_bytes
                  ? round_up(config->string_bytes, 8)
                  : (uint64_t)plan->capacity * DEFAULT_STRING_BYTES_PER_RECORD;
    if (strings > LAYOUT_MAX_STRING_BYTES)
        return log_error(error, NULL, "subsystem '%s': string area of %llu "
                         "bytes, at most %u allowed", name,
                         (unsigned long long)strings, LAYOUT_MAX_STRING_BYTES);
    plan->record_bytes = args <= RECORD_ARGS_MAX(64) ? 64 : 128;
    plan->policy = config->policy;
    plan->rings = config->shared_ring ? 1 : cpu_rings;
    plan->strings_bytes = (uint32_t)strings;
    plan->ring_stride = round_up((uint64_t)plan->capacity * plan->record_bytes +
                                 strings, LAYOUT_PAGE);
    plan->control = (uint32_t)level |
                    (config->disabled ? 0 : COPLOG_CONTROL_ENABLED) |
                    (config->echo ? COPLOG_CONTROL_ECHO : 0);
    return 0;
}

static int check_names(const struct coplog_config *config, char *error)
{
    for (unsigned i = 0; i < config->subsys_count; i++) {
        const char *name = config->subsys[i].name;

        if (name == NULL)
            return log_error(error, NULL, "subsystem %u has no name", i);
        if (!log_name_valid(name))
            return log_error(error, NULL, "subsystem name '%s' is not 1 to %d "
                             "of A-Z a-z 0-9 _ . -", name, COPLOG_NAME_MAX);
        for (unsigned j = 0; j < i; j++)
            if (strcmp(config->subsys[j].name, name) == 0)
                return log_error(error, NULL, "subsystem name '%s' appears "
                                 "twice", name);
    }
    return 0;
}

static int plan_layout(const struct coplog_config *config,
                       struct layout_plan *plan, char *error)
{
    uint64_t offset;

    memset(plan, 0, sizeof *plan);
    if (config == NULL || config->subsys == NULL ||
        config->subsys_count < 1 || config->subsys_count > COPLOG_MAX_SUBSYS)
        return log_error(error, NULL, "a log needs 1 to %d subsystems",
                         COPLOG_MAX_SUBSYS);
    if (check_names(config, error) < 0)
        return -1;
    plan->format_slots = config->format_slots ? config->format_slots
                                              : DEFAULT_FORMAT_SLOTS;
    if (!is_power_of_two(plan->format_slots) ||
        plan->format_slots > LAYOUT_MAX_FORMATS)
        return log_error(error, NULL, "%u format slots: a power of two up to "
                         "%u is needed", plan->format_slots, LAYOUT_MAX_FORMATS);
    plan->format_bytes = config->format_bytes ? config->format_bytes
                                              : DEFAULT_FORMAT_BYTES;
    if (plan->format_bytes > LAYOUT_MAX_FORMAT_BYTES)
        return log_error(error, NULL, "%llu bytes of formats: at most %u "
                         "allowed", (unsigned long long)plan->format_bytes,
                         LAYOUT_MAX_FORMAT_BYTES);
    if (config->clock != COPLOG_CLOCK_AUTO && config->clock != COPLOG_CLOCK_TSC &&
        config->clock != COPLOG_CLOCK_MONOTONIC)
        return log_error(error, NULL, "clock %d is not auto, tsc or "
                         "monotonic", config->clock);

    plan->count = config->subsys_count;
    plan->cpu_rings = cpu_ring_count();
    for (unsigned i = 0; i < plan->count; i++) {
        struct subsys_plan *s = &plan->subsys[i];

        if (plan_subsys(&config->subsys[i], plan->cpu_rings, s, error) < 0)
            return -1;
        s->first_ring = plan->ring_count;
        plan->ring_count += s->rings;
    }

    offset = LAYOUT_PAGE;
    plan->subsys_offset = offset;
    offset += plan->count * sizeof(struct layout_subsys);
    plan->rings_offset = offset = round_up(offset, 64);
    offset += (uint64_t)plan->ring_count * sizeof(struct layout_ring);
    plan->format_slots_offset = offset = round_up(offset, LAYOUT_PAGE);
    offset += (uint64_t)plan->format_slots * sizeof(uint64_t);
    plan->format_heap_offset = offset;
    offset = round_up(offset + plan->format_bytes, LAYOUT_PAGE);
    for (unsigned i = 0; i < plan->count; i++) {
        struct subsys_plan *s = &plan->subsys[i];

        s->data_offset = offset;
        offset += s->rings * s->ring_stride;
    }
    plan->file_bytes = offset;
    if (offset > MAX_FILE_BYTES)
        return log_error(error, NULL, "the log would take %llu bytes, more "
                         "than the %llu GiB limit", (unsigned long long)offset,
                         MAX_FILE_BYTES >> 30);
    return 0;
}

/* ------------------------------------------------------------- creation */

static void fill_header(struct layout_header *header,
                        const struct layout_plan *plan, enum coplog_clock clock)
{
    struct timespec now;

    header->version = LAYOUT_VERSION;
    header->header_bytes = LAYOUT_PAGE;
    header->file_bytes = plan->file_bytes;
    header->subsys_count = plan->count;
    header->subsys_offset = plan->subsys_offset;
    header->rings_offset = plan->rings_offset;
    header->ring_count = plan->ring_count;
    header->cpu_rings = plan->cpu_rings;
    header->format_slots_offset = plan->format_slots_offset;
    header->format_slots = plan->format_slots;
    header->format_heap_offset = plan->format_heap_offset;
    header->format_heap_bytes = plan->format_bytes;
    /* Heap offset 0 would make an empty-looking slot word. */
    atomic_store(&header->format_heap_used, 8);
    clock_gettime(CLOCK_REALTIME, &now);
    header->created_realtime_ns = (uint64_t)now.tv_sec * 1000000000u +
                                  (uint64_t)now.tv_nsec;
    header->creator_pid = (uint32_t)getpid();
    for (unsigned i = 0; i < plan->count; i++)
        atomic_store(&header->control[i], plan->subsys[i].control);
    clock_init_header(header, clock);
}

static void fill_subsys(uint8_t *base, const struct layout_plan *plan)
{
    struct layout_subsys *descriptors =
        (struct layout_subsys *)(base + plan->subsys_offset);

    for (unsigned i = 0; i < plan->count; i++) {
        const struct subsys_plan *s = &plan->subsys[i];
        struct layout_subsys *d = &descriptors[i];

        snprintf(d->name, sizeof d->name, "%s", s->name);
        d->capacity = s->capacity;
        d->record_bytes = s->record_bytes;
        d->policy = s->policy;
        d->rings = s->rings;
        d->first_ring = s->first_ring;
        d->strings_bytes = s->strings_bytes;
        d->data_offset = s->data_offset;
        d->ring_stride = s->ring_stride;
    }
}

/* The file's size, sparse, once its file system has room for all of it
 * (ENOSPC when not). */
static int allocate_blocks(int fd, uint64_t bytes)
{
    struct statvfs fs;

    if (fstatvfs(fd, &fs) == 0 &&
        (uint64_t)fs.f_bavail * fs.f_frsize < bytes)
        return ENOSPC;
    return ftruncate(fd, (off_t)bytes) == 0 ? 0 : errno;
}

static char *temporary_name(const char *path)
{
    size_t length = strlen(path) + sizeof ".XXXXXX";
    char *name = malloc(length);

    if (name != NULL)
        snprintf(name, length, "%s.XXXXXX", path);
    return name;
}

int log_file_create(struct log_file *file, const char *path,
                    const struct coplog_config *config, char *error)
{
    struct layout_plan plan;
    char *temporary;
    uint8_t *base;
    int fd, status;

    memset(file, 0, sizeof *file);
    if (plan_layout(config, &plan, error) < 0)
        return -1;
    temporary = temporary_name(path);
    if (temporary == NULL)
        return log_error(error, path, "out of memory");
    fd = mkstemp(temporary);
    if (fd < 0) {
        log_error(error, path, "cannot create a file beside it: %s",
                  strerror(errno));
        free(temporary);
        return -1;
    }
    status = allocate_blocks(fd, plan.file_bytes);
    if (status != 0) {
        log_error(error, path, "cannot allocate %llu bytes: %s",
                  (unsigned long long)plan.file_bytes, strerror(status));
        goto fail;
    }
    base = mmap(NULL, plan.file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                fd, 0);
    if (base == MAP_FAILED) {
        log_error(error, path, "cannot map %llu bytes: %s",
                  (unsigned long long)plan.file_bytes, strerror(errno));
        goto fail;
    }
    fill_header((struct layout_header *)base, &plan,
                clock_choose(config->clock));
    fill_subsys(base, &plan);
    atomic_thread_fence(memory_order_release);
    memcpy(base, LAYOUT_MAGIC, sizeof ((struct layout_header *)0)->magic);
    if (rename(temporary, path) != 0) {
        log_error(error, path, "cannot rename %s to it: %s", temporary,
                  strerror(errno));
        munmap(base, plan.file_bytes);
        goto fail;
    }
    close(fd);
    free(temporary);
    file->path = strdup(path);
    file->base = base;
    file->size = plan.file_bytes;
    file->writable = true;
    file->header = (struct layout_header *)base;
    return 0;

fail:
    close(fd);
    unlink(temporary);
    free(temporary);
    return -1;
}

/* -------------------------------------------------------------- checking */

static bool range_ok(uint64_t offset, uint64_t length, uint64_t size)
{
    return offset <= size && length <= size - offset;
}

static int check_header_sizes(const struct layout_header *h, uint64_t size,
                              const char *path, char *error)
{
    if (memcmp(h->magic, LAYOUT_MAGIC, sizeof h->magic) != 0)
        return log_error(error, path, "not a coplog file (bad magic)");
    if (h->version != LAYOUT_VERSION)
        return log_error(error, path, "format version %u is not supported "
                         "(this coplog reads version %d)", h->version,
                         LAYOUT_VERSION);
    if (h->file_bytes > size)
        return log_error(error, path, "truncated: the header says %llu "
                         "bytes, the file has %llu",
                         (unsigned long long)h->file_bytes,
                         (unsigned long long)size);
    if (h->file_bytes != size)
        return log_error(error, path, "corrupt: the header says %llu bytes, "
                         "the file has %llu", (unsigned long long)h->file_bytes,
                         (unsigned long long)size);
    if (h->header_bytes != LAYOUT_PAGE)
        return log_error(error, path, "corrupt header: header size %u",
                         h->header_bytes);
    return 0;
}

static int check_header_fields(const struct layout_header *h, uint64_t size,
                               const char *path, char *error)
{
    if (h->subsys_count < 1 || h->subsys_count > COPLOG_MAX_SUBSYS)
        return log_error(error, path, "corrupt header: %u subsystems",
                         h->subsys_count);
    if (h->clock_kind != COPLOG_CLOCK_TSC &&
        h->clock_kind != COPLOG_CLOCK_MONOTONIC)
        return log_error(error, path, "corrupt header: clock kind %u",
                         h->clock_kind);
    if (h->clock_hz < 1000000 || h->clock_hz > 100000000000ull ||
        h->calibration_interval == 0)
        return log_error(error, path, "corrupt header: clock rate %llu Hz",
                         (unsigned long long)h->clock_hz);
    if (!is_power_of_two(h->cpu_rings) || h->cpu_rings > LAYOUT_MAX_RINGS)
        return log_error(error, path, "corrupt header: %u CPU rings",
                         h->cpu_rings);
    if (h->subsys_offset % 8 != 0 ||
        !range_ok(h->subsys_offset,
                  (uint64_t)h->subsys_count * sizeof(struct layout_subsys), size))
        return log_error(error, path, "corrupt header: subsystem table "
                         "outside the file");
    if (h->rings_offset % 64 != 0 || h->ring_count == 0 ||
        !range_ok(h->rings_offset,
                  (uint64_t)h->ring_count * sizeof(struct layout_ring), size))
        return log_error(error, path, "corrupt header: ring table outside "
                         "the file");
    if (!is_power_of_two(h->format_slots) ||
        h->format_slots > LAYOUT_MAX_FORMATS ||
        h->format_slots_offset % 8 != 0 ||
        !range_ok(h->format_slots_offset,
                  (uint64_t)h->format_slots * sizeof(uint64_t), size))
        return log_error(error, path, "corrupt header: format table outside "
                         "the file");
    if (h->format_heap_bytes > LAYOUT_MAX_FORMAT_BYTES ||
        !range_ok(h->format_heap_offset, h->format_heap_bytes, size))
        return log_error(error, path, "corrupt header: format heap outside "
                         "the file");
    return 0;
}

static int check_subsys(const struct log_file *file, unsigned index,
                        char *error)
{
    const struct layout_header *h = file->header;
    const struct layout_subsys *s = log_file_subsys(file, index);
    uint64_t records_bytes = (uint64_t)s->capacity * s->record_bytes;

    if (memchr(s->name, '\0', sizeof s->name) == NULL ||
        !log_name_valid(s->name))
        return log_error(error, file->path, "corrupt subsystem %u: bad name",
                         index);
    if (!is_power_of_two(s->capacity) || s->capacity > LAYOUT_MAX_CAPACITY ||
        (s->record_bytes != 64 && s->record_bytes != 128) ||
        (s->policy != COPLOG_CYCLIC && s->policy != COPLOG_ONESHOT))
        return log_error(error, file->path, "corrupt subsystem '%s': "
                         "capacity %u, record size %u, policy %u", s->name,
                         s->capacity, s->record_bytes, s->policy);
    if ((s->rings != 1 && s->rings != h->cpu_rings) ||
        (uint64_t)s->first_ring + s->rings > h->ring_count)
        return log_error(error, file->path, "corrupt subsystem '%s': %u "
                         "rings from ring %u", s->name, s->rings,
                         s->first_ring);
    if (s->strings_bytes % 8 != 0 || s->data_offset % 64 != 0 ||
        s->data_offset < LAYOUT_PAGE ||
        s->ring_stride < records_bytes + s->strings_bytes ||
        s->ring_stride > (1ull << 40) ||
        !range_ok(s->data_offset, s->rings * s->ring_stride, file->size))
        return log_error(error, file->path, "corrupt subsystem '%s': rings "
                         "outside the file", s->name);
    return 0;
}

int log_file_map(struct log_file *file, const char *path,
                 enum log_file_access access, char *error)
{
    bool writable = access != LOG_FILE_READ;
    struct stat status;
    int fd;

    memset(file, 0, sizeof *file);
    fd = open(path, writable ? O_RDWR : O_RDONLY);
    if (fd < 0)
        return log_error(error, path, "cannot open: %s", strerror(errno));
    if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
        close(fd);
        return log_error(error, path, "not a regular file");
    }
    if ((uint64_t)status.st_size < sizeof(struct layout_header)) {
        close(fd);
        return log_error(error, path, "truncated: %llu bytes, less than a "
                         "coplog header (%zu)",
                         (unsigned long long)status.st_size,
                         sizeof(struct layout_header));
    }
    file->size = (size_t)status.st_size;
    file->base = mmap(NULL, file->size,
                      PROT_READ | (writable ? PROT_WRITE : 0),
                      MAP_SHARED | (access != LOG_FILE_CONTROL ? MAP_POPULATE : 0),
                      fd, 0);
    close(fd);
    if (file->base == MAP_FAILED) {
        file->base = NULL;
        return log_error(error, path, "cannot map: %s", strerror(errno));
    }
    file->path = strdup(path);
    file->writable = writable;
    file->header = (struct layout_header *)file->base;
    if (check_header_sizes(file->header, file->size, path, error) < 0 ||
        check_header_fields(file->header, file->size, path, error) < 0)
        goto fail;
    for (unsigned i = 0; i < file->header->subsys_count; i++)
        if (check_subsys(file, i, error) < 0)
            goto fail;
    return 0;

fail:
    log_file_unmap(file);
    return -1;
}

void log_file_unmap(struct log_file *file)
{
    if (file->base != NULL)
        munmap(file->base, file->size);
    free(file->path);
    memset(file, 0, sizeof *file);
}

int log_file_find_subsys(const struct log_file *file, const char *name)
{
    for (unsigned i = 0; i < file->header->subsys_count; i++)
        if (strncmp(log_file_subsys(file, i)->name, name,
                    sizeof log_file_subsys(file, i)->name) == 0)
            return (int)i;
    return -1;
}
