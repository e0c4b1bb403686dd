/*
 * coplog.h — the kernel event log: a lock-free flight recorder in a file.
 *
 * A log is a file that every writer and reader maps.  It holds a fixed set
 * of subsystems (SCHED, DRIVER, APP, ...), chosen when the file is created.
 * Each subsystem keeps fixed-size records in circular buffers: one ring per
 * CPU by default, so writers on different CPUs never touch the same cache
 * line.  A ring is cyclic (the oldest records are overwritten and counted)
 * or one-shot (it stops when full and counts what it refused).
 *
 * A record holds a timestamp, the subsystem, a level, pid/tid/cpu, the
 * caller's address, a reference to its printf format and up to four (or
 * twelve, see coplog_subsys_config.args) 64-bit arguments: integers,
 * pointers, doubles and strings, whose text is copied into the file.  It is
 * formatted only when read.  Writing takes no lock: a writer reserves a slot
 * with an atomic add, claims it, fills it and commits it; readers never
 * return a record that was half written.
 *
 * Timestamps are the CPU's invariant TSC when it has one (else
 * CLOCK_MONOTONIC), converted to CLOCK_MONOTONIC nanoseconds when read,
 * through calibration pairs stored in the file.  The raw timestamp is the
 * global order of records across all subsystems and rings: readers merge by
 * (order, subsystem, ring, seq), which is total.
 *
 * Writing:
 *
 *     static const struct coplog_subsys_config subsys[] = {
 *         { .name = "SCHED", .capacity = 1 << 16 },
 *         { .name = "APP", .capacity = 1 << 12, .policy = COPLOG_ONESHOT },
 *     };
 *     struct coplog_config config = { .subsys = subsys, .subsys_count = 2 };
 *     char error[COPLOG_ERROR_MAX];
 *     struct coplog *log = coplog_create("run.coplog", &config, error);
 *     COPLOG(log, 0, COPLOG_TERSE, "bind slot %u context %llu", slot, ctx);
 *     coplog_close(log);
 *
 * Another process attaches with coplog_open() and finds its subsystem with
 * coplog_subsys().  Reading (live or after the writers died):
 *
 *     struct coplog_reader *r = coplog_reader_open("run.coplog", error);
 *     struct coplog_event event;
 *     while (coplog_reader_next(r, &event, COPLOG_READ_ALL) > 0)
 *         ... coplog_event_format(&event, text, sizeof text) ...
 *     coplog_reader_close(r);
 *
 * A writer handle may be used by any number of threads, and by a child
 * after fork(); a reader by one thread at a time.  Functions that can fail
 * return NULL or -1 and, where they take an error buffer, leave one line
 * there naming the thing and the reason.
 */
#ifndef COPROF_COPLOG_H
#define COPROF_COPLOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define COPLOG_MAX_SUBSYS   64
#define COPLOG_MAX_ARGS     12  /* with 128-byte records; 4 with 64-byte */
#define COPLOG_NAME_MAX     15
#define COPLOG_ERROR_MAX    256

/* Levels, from the most important to the most verbose.  A subsystem keeps
 * the records whose level is at most its threshold. */
enum coplog_level {
    COPLOG_ERROR = 1,
    COPLOG_WARNING = 2,
    COPLOG_TERSE = 3,       /* what happened, briefly */
    COPLOG_VERBOSE = 4,     /* with the details */
    COPLOG_PROLOG = 5,      /* function entry and exit */
};
#define COPLOG_LEVEL_MAX    COPLOG_PROLOG

/* Records above this level are compiled out of COPLOG(): define it before
 * including this header (or with -D) to make them cost nothing. */
#ifndef COPLOG_COMPILED_LEVEL
#define COPLOG_COMPILED_LEVEL COPLOG_LEVEL_MAX
#endif

enum coplog_policy {
    COPLOG_CYCLIC = 0,      /* overwrite the oldest records */
    COPLOG_ONESHOT = 1,     /* stop when full, refuse the rest */
};

enum coplog_clock {
    COPLOG_CLOCK_AUTO = 0,      /* TSC when invariant, else CLOCK_MONOTONIC;
                                   the environment variable COPLOG_CLOCK=tsc
                                   or monotonic overrides the choice */
    COPLOG_CLOCK_TSC = 1,
    COPLOG_CLOCK_MONOTONIC = 2,
};

/* ---------------------------------------------------------------- writing */

/* One subsystem of a new log.  Zero fields take the defaults given. */
struct coplog_subsys_config {
    const char *name;       /* 1 to 15 of A-Z a-z 0-9 _ . -, unique */
    uint32_t capacity;      /* records per ring: 0 means 4096; a power of
                               two up to 2^24 */
    enum coplog_policy policy;
    unsigned args;          /* arguments per record: 0 means 4 (64-byte
                               records); 5 to 12 make 128-byte records */
    uint32_t string_bytes;  /* string area per ring: 0 means 32 bytes per
                               record; rounded up to a multiple of 8 */
    bool shared_ring;       /* one ring for all CPUs (exact one-shot order,
                               slower with concurrent writers) */
    enum coplog_level level;/* threshold: 0 means COPLOG_VERBOSE */
    bool disabled;          /* start switched off */
    bool echo;              /* also print each record on stderr */
};

struct coplog_config {
    const struct coplog_subsys_config *subsys;
    unsigned subsys_count;  /* 1 to COPLOG_MAX_SUBSYS */
    uint32_t format_slots;  /* distinct formats: 0 means 4096; power of two
                               up to 32768 */
    uint32_t format_bytes;  /* their text: 0 means 256 KiB */
    enum coplog_clock clock;
};

struct coplog;

/* Creates (or atomically replaces) the log file at path, fully initialized,
 * and opens it for writing. */
struct coplog *coplog_create(const char *path, const struct coplog_config *config,
                             char error[COPLOG_ERROR_MAX]);

/* Opens an existing log for writing, e.g. from another process. */
struct coplog *coplog_open(const char *path, char error[COPLOG_ERROR_MAX]);

/* Adds a calibration pair if one is due, and unmaps.  The records stay in
 * the file. */
void coplog_close(struct coplog *log);

/* The index of the subsystem called name, or -1. */
int coplog_subsys(const struct coplog *log, const char *name);

/* Run-time control, also reachable with `coplog set`.  -1 on a bad index or
 * level. */
int coplog_set_level(struct coplog *log, unsigned subsys, enum coplog_level level);
int coplog_set_enabled(struct coplog *log, unsigned subsys, bool enabled);
int coplog_set_echo(struct coplog *log, unsigned subsys, bool echo);

/* The log's clock now: the order a record written now would get. */
uint64_t coplog_now(const struct coplog *log);

/*
 * COPLOG(log, subsys, level, format, args...) writes one record.  The
 * format is printf's and must be a string literal (it is checked by the
 * compiler, and registered once per call site); arguments are stored as
 * 64-bit words and formatted when read.  Pass pointers for %p as void *.
 * A %s argument's text (up to 1023 bytes) is copied into the file.  The
 * arguments are not evaluated when the level is compiled out or the
 * subsystem does not want the record.  log may be NULL (nothing is written).
 */
#define COPLOG(log, subsys, level, format, ...)                             \
    do {                                                                    \
        if ((level) <= COPLOG_COMPILED_LEVEL &&                             \
            coplog_wants((log), (subsys), (level))) {                       \
            static struct coplog_site coplog_site_;                         \
            coplog_write((log), &coplog_site_, (subsys), (level),           \
                         "" format, ##__VA_ARGS__);                         \
        }                                                                   \
    } while (0)

/* What COPLOG() needs to know about its call site, kept in a static:
 * the format's id in the last log it wrote to, and its argument kinds. */
struct coplog_site {
    _Atomic uint64_t cache;
    _Atomic uint64_t kinds;
};

/* The control word of a subsystem, as stored in the file. */
#define COPLOG_CONTROL_LEVEL    0x007u
#define COPLOG_CONTROL_ENABLED  0x100u
#define COPLOG_CONTROL_ECHO     0x200u

/* The first member of every struct coplog, for coplog_wants(). */
struct coplog_gates {
    const _Atomic uint32_t *control;
    unsigned count;
};

/* Whether a record of this level in this subsystem would be kept now. */
static inline bool coplog_wants(const struct coplog *log, unsigned subsys,
                                unsigned level)
{
    const struct coplog_gates *gates = (const struct coplog_gates *)log;
    uint32_t control;

    if (log == NULL || subsys >= gates->count)
        return false;
    control = atomic_load_explicit(&gates->control[subsys],
                                   memory_order_relaxed);
    /* level - 1 wraps for level 0, which is never kept. */
    return (control & COPLOG_CONTROL_ENABLED) &&
           level - 1 < (control & COPLOG_CONTROL_LEVEL);
}

/* What COPLOG() calls.  Returns the record's order, or 0 when nothing was
 * written (not wanted, or refused by a full one-shot ring). */
uint64_t coplog_write(struct coplog *log, struct coplog_site *site,
                      unsigned subsys, unsigned level, const char *format, ...)
    __attribute__((format(printf, 5, 6)));

/* The same with the arguments in an array, for programs that build them at
 * run time (coplog write, bindings).  Each element is read as the format's
 * conversion says: i for d/i/c, u for o/u/x/X, d for floating point, s for
 * %s, p for %p. */
union coplog_arg {
    int64_t i;
    uint64_t u;
    double d;
    const char *s;
    const void *p;
};

uint64_t coplog_write_array(struct coplog *log, unsigned subsys, unsigned level,
                            const char *format, const union coplog_arg *args,
                            unsigned nargs);

/* ---------------------------------------------------------------- reading */

struct coplog_reader;

/* One record, decoded.  Pointers stay valid until the next call on the
 * reader. */
struct coplog_event {
    uint64_t order;         /* raw timestamp: the global order */
    uint64_t time_ns;       /* the same on CLOCK_MONOTONIC */
    unsigned subsys;
    const char *subsys_name;
    unsigned ring;          /* which ring of the subsystem (its CPU ring) */
    uint64_t seq;           /* position in that ring, from 0 */
    unsigned level;
    uint32_t pid, tid, cpu;
    uint64_t caller;        /* return address in the writer's process */
    unsigned format_id;
    const char *format;     /* NULL when the format cannot be found */
    unsigned nargs;         /* arguments stored */
    unsigned format_nargs;  /* arguments the format asks for */
    uint64_t args[COPLOG_MAX_ARGS];
    const char *strings[COPLOG_MAX_ARGS];   /* text of %s arguments (or a
                                               <marker> when lost), else NULL */
};

/* Opens a log for reading; it may be live or its writers long dead. */
struct coplog_reader *coplog_reader_open(const char *path,
                                         char error[COPLOG_ERROR_MAX]);
void coplog_reader_close(struct coplog_reader *reader);

/* Restricts reading to the named subsystems (call once per name; before
 * the first, every subsystem is read).  -1 for an unknown name.  Restarts
 * reading from the seek order. */
int coplog_reader_select(struct coplog_reader *reader, const char *name);

/* Reads records with order >= order from now on, from the start again. */
void coplog_reader_seek(struct coplog_reader *reader, uint64_t order);

/*
 * The next record in the merged order.  Returns 1 with *event filled, 0 when
 * there is nothing more to read now, -1 on error (coplog_reader_error()).
 *
 * COPLOG_READ_LIVE returns a record only once no record with a smaller order
 * can still appear: writers that reserved a slot but have not committed it
 * hold the reader back (up to the stall time, after which their records are
 * counted as unfinished).  Calling again later continues where it stopped,
 * so a follower sees every record exactly once, in order.
 * COPLOG_READ_ALL returns every record committed now and counts the
 * unfinished ones at once: for post-mortem dumps.
 */
#define COPLOG_READ_LIVE    0u
#define COPLOG_READ_ALL     1u
int coplog_reader_next(struct coplog_reader *reader, struct coplog_event *event,
                       unsigned flags);

/* Every record with order below this has been returned or counted: the
 * order to seek to when resuming in another reader (e.g. after a restart). */
uint64_t coplog_reader_position(const struct coplog_reader *reader);

/* How long (CLOCK_MONOTONIC ns) a reserved but uncommitted slot holds a live
 * reader back before it counts as unfinished.  Default: one second. */
void coplog_reader_set_stall(struct coplog_reader *reader, uint64_t ns);

/* What became of the slots this reader went past. */
struct coplog_read_counts {
    uint64_t delivered;     /* returned by coplog_reader_next */
    uint64_t missed;        /* overwritten before the reader got to them */
    uint64_t unfinished;    /* reserved, never committed: writer killed or
                               stalled past the stall time, or slot given up */
    uint64_t late;          /* committed after the reader had passed their
                               order (a writer stalled past the stall time) */
    uint64_t filtered;      /* ordered before the seek order */
};
void coplog_reader_counts(const struct coplog_reader *reader,
                          struct coplog_read_counts *counts);

const char *coplog_reader_error(const struct coplog_reader *reader);

/* The file's subsystems and their state now. */
unsigned coplog_reader_subsys_count(const struct coplog_reader *reader);

struct coplog_subsys_stat {
    const char *name;
    enum coplog_policy policy;
    unsigned rings;
    uint32_t capacity;      /* per ring */
    unsigned args;          /* arguments a record holds */
    unsigned level;
    bool enabled, echo;
    uint64_t reserved;      /* slots ever reserved: records written or tried */
    uint64_t committed;     /* complete records in the rings now */
    uint64_t in_progress;   /* slots in the window claimed and not committed
                               (a writer at work, or one that died there) */
    uint64_t unclaimed;     /* reserved slots in the window not claimed (a
                               writer about to, or one that gave it up) */
    uint64_t overwritten;   /* cyclic: reservations pushed out of the rings */
    uint64_t refused;       /* one-shot: reservations beyond the capacity */
    uint64_t skipped;       /* slots given up because a slower writer of an
                               earlier lap still held them */
    uint64_t string_bytes;  /* string area, all rings */
    uint64_t strings_used;  /* bytes ever allocated in it */
};
/* reserved = committed + in_progress + unclaimed + overwritten + refused
 * when no writer is active. */
int coplog_reader_stat(const struct coplog_reader *reader, unsigned subsys,
                       struct coplog_subsys_stat *stat);

struct coplog_file_info {
    enum coplog_clock clock;
    double clock_hz;        /* raw ticks per second */
    unsigned calibrations;  /* valid calibration pairs */
    unsigned cpu_rings;     /* rings of a per-CPU subsystem */
    uint32_t format_slots;
    uint32_t formats;       /* distinct formats registered */
    uint64_t format_bytes;
    uint64_t format_bytes_used;
    uint64_t formats_refused;
    uint64_t file_bytes;
    uint32_t creator_pid;
    uint64_t created_realtime_ns;
};
void coplog_reader_info(struct coplog_reader *reader,
                        struct coplog_file_info *info);

/* Conversions between raw orders and CLOCK_MONOTONIC ns for this file. */
uint64_t coplog_reader_order_ns(struct coplog_reader *reader, uint64_t order);
uint64_t coplog_reader_ns_order(struct coplog_reader *reader, uint64_t ns);

/* The message of an event, formatted; returns its length (the text is cut
 * to fit size, like snprintf). */
size_t coplog_event_format(const struct coplog_event *event, char *text,
                           size_t size);

/* Negative, 0 or positive as a comes before, is, or comes after b in the
 * merged order. */
int coplog_event_compare(const struct coplog_event *a,
                         const struct coplog_event *b);

/* "error", "warning", "terse", "verbose", "prolog" and back; the parser also
 * takes the numbers 1-5.  -1 for an unknown name. */
const char *coplog_level_name(unsigned level);
int coplog_level_parse(const char *text);

/* Sets a subsystem's level, on/off or echo in a log file by name, for
 * `coplog set` (name "all" for every subsystem).  0 or -1 with an error. */
enum coplog_control_change {
    COPLOG_CHANGE_LEVEL,
    COPLOG_CHANGE_ENABLE,
    COPLOG_CHANGE_DISABLE,
    COPLOG_CHANGE_ECHO_ON,
    COPLOG_CHANGE_ECHO_OFF,
};
int coplog_control(const char *path, const char *subsys_name,
                   enum coplog_control_change change, unsigned level,
                   char error[COPLOG_ERROR_MAX]);

#endif /* COPROF_COPLOG_H */
