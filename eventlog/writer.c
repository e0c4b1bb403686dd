/*
 * writer.c — writing records into a coplog file, without locks.
 *
 * A record goes into the ring of its subsystem that belongs to the CPU the
 * writer runs on (sched_getcpu, read once per record), so writers on
 * different CPUs touch different cache lines: with two writers on this
 * project's 2-CPU machine, a single shared ring costs 39 ns per record
 * (aggregate), per-CPU rings 11 (bench/eventlog).  A thread moved to another
 * CPU while writing still finishes its record correctly; it only costs a
 * cache miss.
 *
 * Writing a record:
 *
 *   1. Reserve a position: an atomic add on the ring's head.  A one-shot
 *      ring refuses positions past its capacity (the head keeps counting
 *      them: refused = head - capacity).
 *   2. Read the clock: the record's timestamp and global order.  It is read
 *      after the reservation, which readers rely on (reader.c).
 *   3. Claim the slot, position % capacity, with a compare-and-swap of its
 *      commit word to "busy at this position".  The claim succeeds only from
 *      a committed word of an earlier position, so two writers never fill
 *      one slot at once: in a cyclic ring a writer a whole lap ahead of a
 *      stalled one gives its position up (counted as skipped) and reserves
 *      another.
 *   4. Fill the words and store the commit word "done at this position"
 *      with release ordering.
 *
 * Readers copy a slot only when its commit word names the position they
 * expect, not busy, and still does after the copy (a seqlock), so they never
 * return a half-written record; a writer killed between 3 and 4 leaves its
 * slot busy, which readers count as unfinished.
 *
 * String arguments are copied first, into the same ring's string area,
 * allocated by an atomic add and wrapping around; the record keeps the
 * text's offset, from which readers tell whether it has been overwritten.
 *
 * Formats are registered in the file's table once per call site per log:
 * struct coplog_site caches the id under the log's generation number (a
 * per-process counter, so a site used with two logs registers in each).
 */
#include "eventlog/clock.h"
#include "eventlog/file.h"
#include "eventlog/format-table.h"
#include "eventlog/layout.h"
#include "eventlog/message.h"

#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLAIM_ATTEMPTS        64
#define SITE_ID_BITS          16
#define GENERATION_MASK       0xFFFFFFu
#define ECHO_MESSAGE_MAX      1024

struct writer_subsys {
    const char *name;
    struct layout_ring *rings;
    uint8_t *data;              /* the first ring's records */
    uint64_t ring_stride;
    uint64_t mask;              /* capacity - 1 */
    uint32_t capacity;
    uint32_t ring_mask;         /* rings - 1 (rings is a power of two) */
    uint32_t record_bytes;
    uint32_t max_args;
    uint32_t strings_bytes;
    bool oneshot;
};

struct coplog {
    struct coplog_gates gates;  /* first: coplog_wants() reads it */
    struct log_file file;
    struct layout_header *header;
    enum coplog_clock clock;
    uint32_t generation;
    unsigned subsys_count;
    struct writer_subsys subsys[COPLOG_MAX_SUBSYS];
};

/* A record being put together. */
struct draft {
    unsigned subsys, ring, cpu, level, nargs;
    unsigned format_id;
    uint64_t kinds;
    uint64_t caller;
    const char *format;
    uint64_t args[COPLOG_MAX_ARGS];
    const char *texts[COPLOG_MAX_ARGS];     /* for the echo */
};

/* ------------------------------------------------------ who is writing */

static __thread uint64_t thread_identity;  /* identity_thread(); 0: unknown */
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;
static _Atomic uint32_t generations;

static void forget_thread_identity(void)
{
    thread_identity = 0;
}

static void install_fork_handler(void)
{
    /* A forked child has a new pid and tid but a copy of our TLS. */
    pthread_atfork(NULL, NULL, forget_thread_identity);
}

static uint64_t current_thread(void)
{
    if (thread_identity == 0)
        thread_identity = identity_thread((uint32_t)getpid(),
                                          (uint32_t)gettid());
    return thread_identity;
}

static unsigned current_cpu(void)
{
    int cpu = sched_getcpu();

    return cpu < 0 ? 0 : (unsigned)cpu;
}

/* ------------------------------------------------------------ handles */

static uint32_t next_generation(void)
{
    uint32_t generation;

    do
        generation = (atomic_fetch_add(&generations, 1) + 1) & GENERATION_MASK;
    while (generation == 0);
    return generation;
}

static void attach_subsys(struct coplog *log, unsigned index)
{
    const struct layout_subsys *s = log_file_subsys(&log->file, index);
    struct writer_subsys *w = &log->subsys[index];

    w->name = s->name;
    w->rings = log_file_ring(&log->file, s, 0);
    w->data = log_file_records(&log->file, s, 0);
    w->ring_stride = s->ring_stride;
    w->mask = s->capacity - 1;
    w->capacity = s->capacity;
    w->ring_mask = s->rings - 1;
    w->record_bytes = s->record_bytes;
    w->max_args = RECORD_ARGS_MAX(s->record_bytes);
    w->strings_bytes = s->strings_bytes;
    w->oneshot = s->policy == COPLOG_ONESHOT;
}

/* A handle on a mapped file; on failure the file is unmapped. */
static struct coplog *handle_for(struct log_file *file, char *error)
{
    struct coplog *log = calloc(1, sizeof *log);

    if (log == NULL) {
        log_error(error, file->path, "out of memory");
        log_file_unmap(file);
        return NULL;
    }
    pthread_once(&fork_handler_once, install_fork_handler);
    log->file = *file;
    log->header = file->header;
    log->clock = (enum coplog_clock)file->header->clock_kind;
    log->generation = next_generation();
    log->subsys_count = file->header->subsys_count;
    for (unsigned i = 0; i < log->subsys_count; i++)
        attach_subsys(log, i);
    log->gates.control = log->header->control;
    log->gates.count = log->subsys_count;
    return log;
}

struct coplog *coplog_create(const char *path, const struct coplog_config *config,
                             char error[COPLOG_ERROR_MAX])
{
    struct log_file file;

    if (log_file_create(&file, path, config, error) < 0)
        return NULL;
    return handle_for(&file, error);
}

struct coplog *coplog_open(const char *path, char error[COPLOG_ERROR_MAX])
{
    struct log_file file;

    if (log_file_map(&file, path, LOG_FILE_WRITE, error) < 0)
        return NULL;
    return handle_for(&file, error);
}

void coplog_close(struct coplog *log)
{
    if (log == NULL)
        return;
    /* A pair at most a second before the last records, for readers after
     * the writers are gone. */
    clock_calibrate_due(log->header, log->clock, clock_read(log->clock));
    log_file_unmap(&log->file);
    free(log);
}

int coplog_subsys(const struct coplog *log, const char *name)
{
    return log != NULL && name != NULL ? log_file_find_subsys(&log->file, name)
                                       : -1;
}

uint64_t coplog_now(const struct coplog *log)
{
    return clock_read(log->clock);
}

/* ------------------------------------------------------------- control */

/* Sets the bits of mask in a control word to bits. */
static void control_update(_Atomic uint32_t *control, uint32_t mask,
                           uint32_t bits)
{
    uint32_t old = atomic_load(control);

    while (!atomic_compare_exchange_weak(control, &old, (old & ~mask) | bits))
        ;
}

static int change_control(_Atomic uint32_t *control,
                          enum coplog_control_change change, unsigned level)
{
    switch (change) {
    case COPLOG_CHANGE_LEVEL:
        if (level < COPLOG_ERROR || level > COPLOG_LEVEL_MAX)
            return -1;
        control_update(control, COPLOG_CONTROL_LEVEL, level);
        return 0;
    case COPLOG_CHANGE_ENABLE:
        control_update(control, COPLOG_CONTROL_ENABLED, COPLOG_CONTROL_ENABLED);
        return 0;
    case COPLOG_CHANGE_DISABLE:
        control_update(control, COPLOG_CONTROL_ENABLED, 0);
        return 0;
    case COPLOG_CHANGE_ECHO_ON:
        control_update(control, COPLOG_CONTROL_ECHO, COPLOG_CONTROL_ECHO);
        return 0;
    case COPLOG_CHANGE_ECHO_OFF:
        control_update(control, COPLOG_CONTROL_ECHO, 0);
        return 0;
    }
    return -1;
}

/* A change to one subsystem of an open log; -1 for a bad index or level. */
static int change_subsys(struct coplog *log, unsigned subsys,
                         enum coplog_control_change change, unsigned level)
{
    if (log == NULL || subsys >= log->subsys_count)
        return -1;
    return change_control(&log->header->control[subsys], change, level);
}

int coplog_set_level(struct coplog *log, unsigned subsys, enum coplog_level level)
{
    return change_subsys(log, subsys, COPLOG_CHANGE_LEVEL, level);
}

int coplog_set_enabled(struct coplog *log, unsigned subsys, bool enabled)
{
    return change_subsys(log, subsys, enabled ? COPLOG_CHANGE_ENABLE
                                              : COPLOG_CHANGE_DISABLE, 0);
}

int coplog_set_echo(struct coplog *log, unsigned subsys, bool echo)
{
    return change_subsys(log, subsys, echo ? COPLOG_CHANGE_ECHO_ON
                                           : COPLOG_CHANGE_ECHO_OFF, 0);
}

int coplog_control(const char *path, const char *subsys_name,
                   enum coplog_control_change change, unsigned level,
                   char error[COPLOG_ERROR_MAX])
{
    struct log_file file;
    bool all = strcmp(subsys_name, "all") == 0;
    int index = -1;

    if (change == COPLOG_CHANGE_LEVEL &&
        (level < COPLOG_ERROR || level > COPLOG_LEVEL_MAX))
        return log_error(error, NULL, "level %u is not 1 to %d", level,
                         COPLOG_LEVEL_MAX);
    if (log_file_map(&file, path, LOG_FILE_CONTROL, error) < 0)
        return -1;
    if (!all && (index = log_file_find_subsys(&file, subsys_name)) < 0) {
        log_error(error, path, "no subsystem '%s'", subsys_name);
        log_file_unmap(&file);
        return -1;
    }
    for (unsigned i = 0; i < file.header->subsys_count; i++)
        if (all || (int)i == index)
            change_control(&file.header->control[i], change, level);
    log_file_unmap(&file);
    return 0;
}

/* -------------------------------------------------------------- sites */

static uint64_t site_cache_word(const struct coplog *log, unsigned format_id)
{
    return (uint64_t)log->generation << SITE_ID_BITS | format_id;
}

/* Fills the draft's format id and argument kinds, registering the format in
 * this log the first time the site writes to it. */
static void draft_site(struct coplog *log, struct coplog_site *site,
                       struct draft *draft)
{
    uint64_t cache = atomic_load_explicit(&site->cache, memory_order_acquire);

    if (cache >> SITE_ID_BITS == log->generation) {
        draft->format_id = (unsigned)(cache & ((1u << SITE_ID_BITS) - 1));
        draft->kinds = atomic_load_explicit(&site->kinds, memory_order_relaxed);
        return;
    }
    draft->kinds = message_kinds(draft->format, COPLOG_MAX_ARGS, NULL);
    draft->format_id = format_table_insert(&log->file, draft->format);
    atomic_store_explicit(&site->kinds, draft->kinds, memory_order_relaxed);
    atomic_store_explicit(&site->cache, site_cache_word(log, draft->format_id),
                          memory_order_release);
}

/* ------------------------------------------------------------ strings */

/* Copies text into the ring's string area; returns the argument word. */
static uint64_t string_store(const struct writer_subsys *w, unsigned ring,
                             const char *text)
{
    struct layout_ring *r = &w->rings[ring];
    _Atomic uint64_t *area;
    uint64_t length, chunk, offset;

    if (text == NULL)
        return STRING_NULL;
    if (w->strings_bytes == 0)
        return STRING_LOST;
    length = strnlen(text, LAYOUT_STRING_MAX);
    if (string_chunk_bytes(length) > w->strings_bytes)
        length = w->strings_bytes - 1;
    chunk = string_chunk_bytes(length);
    offset = atomic_fetch_add_explicit(&r->strings_head, chunk,
                                       memory_order_relaxed);
    if ((w->oneshot && offset + chunk > w->strings_bytes) ||
        offset >= STRING_OFFSET_LIMIT)
        return STRING_LOST;
    /* Like a seqlock writer: the allocation is visible before the bytes. */
    atomic_thread_fence(memory_order_release);
    area = (_Atomic uint64_t *)(w->data + ring * w->ring_stride +
                                (uint64_t)w->capacity * w->record_bytes);
    for (uint64_t done = 0; done < chunk; done += 8) {
        uint64_t word = 0;
        size_t take = done < length ? length - done : 0;

        memcpy(&word, text + done, take < 8 ? take : 8);
        atomic_store_explicit(&area[((offset + done) % w->strings_bytes) / 8],
                              word, memory_order_relaxed);
    }
    return string_ref(offset, (unsigned)length);
}

/* ------------------------------------------------------------ records */

static void draft_begin(struct coplog *log, struct draft *draft,
                        unsigned subsys, unsigned level, const char *format,
                        uint64_t caller)
{
    draft->subsys = subsys;
    draft->level = level;
    draft->format = format;
    draft->caller = caller;
    draft->cpu = current_cpu();
    draft->ring = draft->cpu & log->subsys[subsys].ring_mask;
}

/* The number of arguments the record will hold. */
static unsigned draft_capacity(const struct coplog *log,
                               const struct draft *draft)
{
    unsigned wanted = message_kinds_count(draft->kinds);
    unsigned room = log->subsys[draft->subsys].max_args;

    return wanted < room ? wanted : room;
}

static void draft_take_varargs(struct coplog *log, struct draft *draft,
                               va_list *ap)
{
    const struct writer_subsys *w = &log->subsys[draft->subsys];
    unsigned count = draft_capacity(log, draft);
    double real;

    for (unsigned i = 0; i < count; i++) {
        draft->texts[i] = NULL;
        switch (message_kind_at(draft->kinds, i)) {
        case ARG_INT:
            draft->args[i] = (uint64_t)(int64_t)va_arg(*ap, int);
            break;
        case ARG_UINT:
            draft->args[i] = va_arg(*ap, unsigned int);
            break;
        case ARG_LONG:
            draft->args[i] = (uint64_t)va_arg(*ap, long);
            break;
        case ARG_DOUBLE:
            real = va_arg(*ap, double);
            memcpy(&draft->args[i], &real, sizeof real);
            break;
        case ARG_LONG_DOUBLE:
            real = (double)va_arg(*ap, long double);
            memcpy(&draft->args[i], &real, sizeof real);
            break;
        case ARG_STRING:
            draft->texts[i] = va_arg(*ap, const char *);
            draft->args[i] = string_store(w, draft->ring, draft->texts[i]);
            break;
        case ARG_POINTER:
            draft->args[i] = (uintptr_t)va_arg(*ap, void *);
            break;
        }
    }
    draft->nargs = count;
}

static void draft_take_array(struct coplog *log, struct draft *draft,
                             const union coplog_arg *args, unsigned nargs)
{
    const struct writer_subsys *w = &log->subsys[draft->subsys];
    unsigned count = draft_capacity(log, draft);

    if (nargs < count)
        count = nargs;
    for (unsigned i = 0; i < count; i++) {
        draft->texts[i] = NULL;
        switch (message_kind_at(draft->kinds, i)) {
        case ARG_INT:
        case ARG_LONG:
            draft->args[i] = (uint64_t)args[i].i;
            break;
        case ARG_UINT:
            draft->args[i] = args[i].u;
            break;
        case ARG_DOUBLE:
        case ARG_LONG_DOUBLE:
            memcpy(&draft->args[i], &args[i].d, sizeof args[i].d);
            break;
        case ARG_STRING:
            draft->texts[i] = args[i].s;
            draft->args[i] = string_store(w, draft->ring, args[i].s);
            break;
        case ARG_POINTER:
            draft->args[i] = (uintptr_t)args[i].p;
            break;
        }
    }
    draft->nargs = count;
}

/* Claims a slot for position: see step 3 at the top. */
static bool record_claim(_Atomic uint64_t *record, uint64_t position)
{
    uint64_t current = atomic_load_explicit(&record[RECORD_COMMIT],
                                            memory_order_relaxed);

    do {
        if ((current & RECORD_BUSY) ||
            record_commit_stamp(current) >= position + 1)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
                 &record[RECORD_COMMIT], &current,
                 record_commit_word(position, 1),
                 memory_order_acquire, memory_order_relaxed));
    /* Like a seqlock writer: the claim is visible before the words. */
    atomic_thread_fence(memory_order_release);
    return true;
}

static void record_fill(_Atomic uint64_t *record, uint64_t clock,
                        const struct draft *draft)
{
    atomic_store_explicit(&record[RECORD_CLOCK], clock, memory_order_relaxed);
    atomic_store_explicit(&record[RECORD_ORIGIN],
                          record_origin(draft->caller, draft->format_id),
                          memory_order_relaxed);
    atomic_store_explicit(&record[RECORD_IDENTITY],
                          identity_word(current_thread(), draft->cpu,
                                        draft->level, draft->nargs),
                          memory_order_relaxed);
    for (unsigned i = 0; i < draft->nargs; i++)
        atomic_store_explicit(&record[RECORD_ARGS + i], draft->args[i],
                              memory_order_relaxed);
}

/* Steps 1 to 4; returns the record's clock, or 0 when it was refused. */
static uint64_t record_append(struct coplog *log, const struct draft *draft)
{
    const struct writer_subsys *w = &log->subsys[draft->subsys];
    struct layout_ring *ring = &w->rings[draft->ring];
    uint8_t *records = w->data + draft->ring * w->ring_stride;

    for (int attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
        uint64_t position = atomic_fetch_add_explicit(&ring->head, 1,
                                                      memory_order_relaxed);
        _Atomic uint64_t *record;
        uint64_t clock;

        if (w->oneshot && position >= w->capacity)
            return 0;
        clock = clock_read(log->clock);
        record = (_Atomic uint64_t *)(records +
                                      (position & w->mask) * w->record_bytes);
        if (!record_claim(record, position)) {
            atomic_fetch_add_explicit(&ring->skipped, 1, memory_order_relaxed);
            continue;
        }
        record_fill(record, clock, draft);
        atomic_store_explicit(&record[RECORD_COMMIT],
                              record_commit_word(position, 0),
                              memory_order_release);
        return clock;
    }
    return 0;
}

/* KLog's klogprintf: the record, formatted, on stderr in one write. */
static void record_echo(const struct coplog *log, const struct draft *draft)
{
    char message[ECHO_MESSAGE_MAX], line[ECHO_MESSAGE_MAX + 64];
    uint64_t thread = current_thread();
    int length;

    message_format(draft->format, draft->args, draft->nargs, draft->texts,
                   message, sizeof message);
    length = snprintf(line, sizeof line, "coplog %s %s %u/%u: %s\n",
                      log->subsys[draft->subsys].name,
                      coplog_level_name(draft->level), identity_pid(thread),
                      identity_tid(thread), message);
    if (length > (int)sizeof line - 1) {
        length = (int)sizeof line - 1;
        line[length - 1] = '\n';
    }
    if (write(STDERR_FILENO, line, (size_t)length) < 0)
        return;     /* nowhere to report it */
}

static uint64_t record_finish(struct coplog *log, const struct draft *draft)
{
    uint64_t clock = record_append(log, draft);
    uint32_t control;

    if (clock == 0)
        return 0;
    if (clock >= atomic_load_explicit(&log->header->next_calibration,
                                      memory_order_relaxed))
        clock_calibrate_due(log->header, log->clock, clock);
    control = atomic_load_explicit(&log->header->control[draft->subsys],
                                   memory_order_relaxed);
    if (control & COPLOG_CONTROL_ECHO)
        record_echo(log, draft);
    return clock;
}

uint64_t coplog_write(struct coplog *log, struct coplog_site *site,
                      unsigned subsys, unsigned level, const char *format, ...)
{
    struct draft draft;
    va_list ap;

    if (!coplog_wants(log, subsys, level) || format == NULL)
        return 0;
    draft_begin(log, &draft, subsys, level, format,
                (uintptr_t)__builtin_return_address(0));
    draft_site(log, site, &draft);
    va_start(ap, format);
    draft_take_varargs(log, &draft, &ap);
    va_end(ap);
    return record_finish(log, &draft);
}

uint64_t coplog_write_array(struct coplog *log, unsigned subsys, unsigned level,
                            const char *format, const union coplog_arg *args,
                            unsigned nargs)
{
    struct draft draft;

    if (!coplog_wants(log, subsys, level) || format == NULL)
        return 0;
    draft_begin(log, &draft, subsys, level, format,
                (uintptr_t)__builtin_return_address(0));
    draft.kinds = message_kinds(format, COPLOG_MAX_ARGS, NULL);
    draft.format_id = format_table_insert(&log->file, format);
    draft_take_array(log, &draft, args, nargs);
    return record_finish(log, &draft);
}
