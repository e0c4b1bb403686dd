/*
 * coprofd — the coprof daemon: reads the escape-coded sample stream of the
 * kernel driver, attributes every sample to its context and image (through
 * the overlay state), and records the session in an SQLite database.
 *
 *   coprofd --replay FILE --session-dir DIR     a recorded stream, to its end
 *   coprofd --socket PATH --session-dir DIR     the live stream of copsim
 *   coprofd --input FILE|- --session-dir DIR    a FIFO, standard input, or a
 *                                               stream file being written
 *   coprofd --input-fd N --session-dir DIR      a descriptor it inherited
 *
 * A GLib main loop waits on the input descriptor, a flush timer and the
 * signals.  Input is fed to the recorder in chunks as it comes; the timer
 * flushes once a second (one transaction); SIGHUP flushes at once (a
 * dump); SIGTERM and SIGINT end the session, flush and exit; the end of
 * the stream (its STOP record, or end of file) does the same.  A regular
 * file given to --input is followed like `tail -f` until its STOP record.
 *
 * The end is written into the session keys: end_state "complete" when the
 * stream ended with its STOP, whose totals are what was decoded, and
 * everything was flushed, else
 * "incomplete" with end_reason saying why.  A stream that is read only
 * once (a pipe, socket or descriptor) is also copied, as it comes, into an
 * anonymous memory file (memfd) of at most STREAM_COPY_MAX bytes: when
 * the last flush fails (a full disk), that copy is written to a file that
 * can be written (the session directory, else $TMPDIR or /tmp) and the
 * session can be made again from it with `coprofd --replay FILE`.
 */
#include "daemon/recorder.h"
#include "common/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glib-unix.h>
#include <glib.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define EXIT_FAILED         1
#define EXIT_USAGE          2
#define CHUNK_BYTES         (1u << 20)
#define FLUSH_INTERVAL_MS   1000u
#define FOLLOW_INTERVAL_MS  50u
#define TIMELINE_MS         10u
#define TIMELINE_MS_MAX     60000u
#define PENDING_INPUT_MAX   (64u << 20)
#define STREAM_COPY_MAX     ((off_t)32 << 20)
#define REASON_MAX          (PATH_MAX + 256)
#define RESCUE_NAME         "coprofd-stream-XXXXXX"

enum input_kind { INPUT_NONE, INPUT_REPLAY, INPUT_FILE, INPUT_FD,
                  INPUT_SOCKET };

struct options {
    enum input_kind input;
    const char *input_name;
    int input_fd;
    int ready_fd;       /* 0: none */
    const char *session_dir;
    const char *event_log;
    unsigned flush_ms;
    unsigned timeline_ms;
    bool overwrite;
    bool quiet;
};

struct coprofd {
    struct options options;
    struct recorder *recorder;
    GMainLoop *loop;
    int fd;
    const char *input_label;
    bool follow;                /* a regular file still being written */
    bool regular;               /* the input is a regular file */
    guint input_source, follow_source;
    uint8_t *buffer;
    bool flush_failing;         /* warned about a failing flush */
    bool ended;
    int status;
    int copy_fd;                /* memfd with the stream so far, or -1 */
    off_t copy_bytes;
    char end_reason[REASON_MAX];  /* why the stream ended early, or "" */
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: coprofd --session-dir DIR INPUT [OPTIONS]\n"
        "\n"
        "Reads the escape-coded sample stream of the coprof kernel driver\n"
        "(escape-protocol/README.md), attributes each sample to its context\n"
        "and to a position in its image through the overlay state, and\n"
        "records the session in DIR/session.db (SQLite, WAL) with a copy of\n"
        "each image in DIR/images (docs/session-format.md).\n"
        "\n"
        "INPUT is one of:\n"
        "  -r, --replay FILE     a recorded stream, processed to its end as\n"
        "                        fast as it can be read ('-': stdin)\n"
        "  -s, --socket PATH     connect to a UNIX stream socket that serves\n"
        "                        the live stream\n"
        "  -i, --input FILE      a live stream: a FIFO, '-' for stdin, or a\n"
        "                        regular file being written, followed until\n"
        "                        its STOP record\n"
        "      --input-fd N      a live stream on inherited descriptor N\n"
        "\n"
        "Options:\n"
        "      --ready-fd N      write \"ready\" to inherited descriptor N\n"
        "                        once the session exists, and close it\n"
        "  -d, --session-dir DIR the session directory (created 0700 if\n"
        "                        missing; its parent must exist)\n"
        "  -e, --event-log FILE  import the SCHED events of this kernel\n"
        "                        event log (eventlog/), incrementally\n"
        "  -f, --flush-interval MS\n"
        "                        flush at least every MS milliseconds,\n"
        "                        1..1000 (default 1000)\n"
        "  -t, --timeline-ms MS  count exact samples by function in buckets of\n"
        "                        MS milliseconds for the sample timeline,\n"
        "                        0..60000 (default 10; 0: no timeline)\n"
        "      --overwrite       replace a session already in DIR\n"
        "  -q, --quiet           no warnings and no summary\n"
        "  -h, --help            show this help\n"
        "\n"
        "Signals: SIGHUP flushes everything now (a dump); SIGTERM and SIGINT\n"
        "flush and exit.  A SIGKILL loses at most the last flush interval;\n"
        "the database always opens.  At the end coprofd prints one line:\n"
        "  coprofd: DIR: samples=N exact=N ambiguous=N unmapped=N orphan=N\n"
        "  pending=N lost=N contexts=N images=N errors=N sched_events=N\n"
        "\n"
        "Exit status: 0 when the session was recorded (errors in the stream\n"
        "are counted in it), 1 when the input or the session could not be\n"
        "read or written, 2 for bad arguments.\n");
}


/* ---- arguments ---------------------------------------------------------- */

static int parse_unsigned(const char *text, unsigned max, unsigned *value)
{
    char *end;
    unsigned long n;

    errno = 0;
    n = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || n > max ||
        text[0] == '-')
        return -1;
    *value = (unsigned)n;
    return 0;
}

static int set_input(struct options *o, enum input_kind kind, const char *name)
{
    if (o->input != INPUT_NONE)
        return -1;
    o->input = kind;
    o->input_name = name;
    return 0;
}

enum { OPT_OVERWRITE = 256, OPT_INPUT_FD, OPT_READY_FD };

/* Whether fd is open for writing (a --ready-fd). */
static bool writable(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    return flags >= 0 && (flags & O_ACCMODE) != O_RDONLY;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct cli_option long_options[] = {
        { 'r', "replay", required_argument, 0 },
        { 's', "socket", required_argument, 0 },
        { 'i', "input", required_argument, 0 },
        { 0, "input-fd", required_argument, OPT_INPUT_FD },
        { 0, "ready-fd", required_argument, OPT_READY_FD },
        { 'd', "session-dir", required_argument, 0 },
        { 'e', "event-log", required_argument, 0 },
        { 'f', "flush-interval", required_argument, 0 },
        { 't', "timeline-ms", required_argument, 0 },
        { 0, "overwrite", no_argument, OPT_OVERWRITE },
        { 'q', "quiet", no_argument, 0 },
        { 'h', "help", no_argument, 0 },
        CLI_END,
    };
    unsigned fd;
    struct cli_parser parser;
    int c;

    o->flush_ms = FLUSH_INTERVAL_MS;
    o->timeline_ms = TIMELINE_MS;
    cli_parser_init(&parser, long_options, "");
    while ((c = cli_next(&parser, argc, argv)) != -1) {
        switch (c) {
        case 'r':
        case 's':
        case 'i':
            if (set_input(o, c == 'r' ? INPUT_REPLAY : c == 's' ?
                          INPUT_SOCKET : INPUT_FILE, optarg) != 0)
                return cli_fail(EXIT_USAGE, "%s: only one input may be "
                                "given", optarg);
            break;
        case OPT_INPUT_FD:
            if (parse_unsigned(optarg, INT32_MAX, &fd) != 0)
                return cli_fail(EXIT_USAGE, "--input-fd %s: not a "
                                "descriptor", optarg);
            if (set_input(o, INPUT_FD, optarg) != 0)
                return cli_fail(EXIT_USAGE, "%s: only one input may be "
                                "given", optarg);
            o->input_fd = (int)fd;
            break;
        case OPT_READY_FD:
            if (parse_unsigned(optarg, INT32_MAX, &fd) != 0 ||
                !writable((int)fd))
                return cli_fail(EXIT_USAGE, "--ready-fd %s: not a "
                                "descriptor open for writing", optarg);
            o->ready_fd = (int)fd;
            break;
        case 'd':
            o->session_dir = optarg;
            break;
        case 'e':
            o->event_log = optarg;
            break;
        case 'f':
            if (parse_unsigned(optarg, FLUSH_INTERVAL_MS, &o->flush_ms) != 0 ||
                o->flush_ms == 0)
                return cli_fail(EXIT_USAGE, "--flush-interval %s: not "
                                "1..1000 ms", optarg);
            break;
        case 't':
            if (parse_unsigned(optarg, TIMELINE_MS_MAX, &o->timeline_ms) != 0)
                return cli_fail(EXIT_USAGE, "--timeline-ms %s: not "
                                "0..60000 ms", optarg);
            break;
        case OPT_OVERWRITE:
            o->overwrite = true;
            break;
        case 'q':
            o->quiet = true;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return EXIT_USAGE;
        }
    }
    if (optind < argc)
        return cli_fail(EXIT_USAGE, "%s: unexpected argument (see "
                        "--help)", argv[optind]);
    if (o->session_dir == NULL)
        return cli_fail(EXIT_USAGE, "--session-dir is required (see "
                        "--help)");
    if (o->session_dir[0] == '\0')
        return cli_fail(EXIT_USAGE, "--session-dir '': an empty path "
                        "names no directory");
    if (o->input == INPUT_NONE)
        return cli_fail(EXIT_USAGE, "one of --replay, --socket, --input "
                        "or --input-fd is required (see --help)");
    return 0;
}

/* ---- input -------------------------------------------------------------- */

static int connect_socket(const char *path)
{
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    int fd;

    if (strlen(path) >= sizeof address.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(address.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

static int open_named(const char *name)
{
    if (strcmp(name, "-") == 0)
        return dup(STDIN_FILENO);
    return open(name, O_RDONLY | O_CLOEXEC);
}

/* False for a descriptor open for writing only (read would fail). */
static bool readable(int fd)
{
    int flags = fcntl(fd, F_GETFL);

    return flags < 0 || (flags & O_ACCMODE) != O_WRONLY;
}

/* Opens the input; -1 with a message printed on failure. */
static int open_input(struct coprofd *d)
{
    const struct options *o = &d->options;
    struct stat st;

    d->input_label = strcmp(o->input_name, "-") == 0 ? "<stdin>"
                                                      : o->input_name;
    if (o->input == INPUT_SOCKET)
        d->fd = connect_socket(o->input_name);
    else if (o->input == INPUT_FD)
        d->fd = o->input_fd;
    else
        d->fd = open_named(o->input_name);
    if (d->fd < 0 || fstat(d->fd, &st) != 0) {
        cli_fail(EXIT_FAILED, "%s: cannot %s: %s", d->input_label,
                 o->input == INPUT_SOCKET ? "connect" : "open",
                 strerror(errno));
        return -1;
    }
    if (!readable(d->fd)) {
        cli_fail(EXIT_FAILED, "%s: cannot read: open for writing only",
                 o->input == INPUT_FD ? o->input_name : d->input_label);
        return -1;
    }
    d->regular = S_ISREG(st.st_mode);
    d->follow = o->input == INPUT_FILE && d->regular;
    if (!S_ISREG(st.st_mode))
        g_unix_set_fd_nonblocking(d->fd, TRUE, NULL);
    return 0;
}

/* ---- the stream's copy -------------------------------------------------- */

/* A stream read only once is copied; a regular file is its own copy. */
static void copy_open(struct coprofd *d)
{
    d->copy_fd = -1;
    if (d->regular)
        return;
    d->copy_fd = memfd_create("coprofd-stream", MFD_CLOEXEC);
}

/* Appends to the copy; past STREAM_COPY_MAX (or on an error) it goes. */
static void copy_add(struct coprofd *d, const uint8_t *bytes, size_t length)
{
    size_t done = 0;

    if (d->copy_fd < 0)
        return;
    while (d->copy_bytes + (off_t)length <= STREAM_COPY_MAX &&
           done < length) {
        ssize_t n = write(d->copy_fd, bytes + done, length - done);
        if (n <= 0 && errno != EINTR)
            break;
        if (n > 0)
            done += (size_t)n;
    }
    if (done < length) {
        close(d->copy_fd);
        d->copy_fd = -1;
        return;
    }
    d->copy_bytes += (off_t)length;
}

/* Input goes to the copy and to the session. */
static void take_input(struct coprofd *d, const uint8_t *bytes, size_t length)
{
    copy_add(d, bytes, length);
    recorder_feed(d->recorder, bytes, length);
}

/* Writes the copy into a new file (0600) in dir; 0, or -1 with errno. */
static int rescue_into(struct coprofd *d, const char *dir, char *path,
                       size_t len)
{
    off_t offset = 0;
    int fd, saved;

    snprintf(path, len, "%s/" RESCUE_NAME, dir);
    fd = mkstemp(path);
    if (fd < 0)
        return -1;
    while (offset < d->copy_bytes)
        if (sendfile(fd, d->copy_fd, &offset,
                     (size_t)(d->copy_bytes - offset)) <= 0)
            goto fail;
    if (fsync(fd) != 0)
        goto fail;
    if (close(fd) == 0)
        return 0;
    fd = -1;
fail:
    saved = errno ? errno : EIO;
    if (fd >= 0)
        close(fd);
    unlink(path);
    errno = saved;
    return -1;
}

/*
 * Keeps the stream that could not be stored: into the session directory
 * (the failure may not have been space), else $TMPDIR or /tmp.  Puts the
 * file's path, or why there is none, into where.
 */
static void rescue_stream(struct coprofd *d, char *where, size_t len)
{
    const char *tmp = getenv("TMPDIR");
    const char *dirs[] = { d->options.session_dir,
                           tmp && *tmp ? tmp : "/tmp", "/tmp" };
    char path[PATH_MAX];
    int error = 0;

    if (d->regular) {
        snprintf(where, len, "%s", d->input_label);
        return;
    }
    if (d->copy_fd < 0) {
        snprintf(where, len, "nothing: the stream was not copied (over "
                 "%lld MiB)", (long long)(STREAM_COPY_MAX >> 20));
        return;
    }
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        if (rescue_into(d, dirs[i], path, sizeof path) == 0) {
            snprintf(where, len, "%s", path);
            return;
        }
        if (error == 0 || errno != ENOENT)
            error = errno;
    }
    snprintf(where, len, "nothing: the stream could not be written "
             "anywhere (%s)", strerror(error));
}

/* ---- flushing and ending ------------------------------------------------ */

static bool flush(struct coprofd *d, const char *reason)
{
    GError *error = NULL;

    if (recorder_flush(d->recorder, reason, &error) == 0) {
        if (d->flush_failing && !d->options.quiet)
            fprintf(stderr, "coprofd: %s: written again\n",
                    recorder_db_path(d->recorder));
        d->flush_failing = false;
        return true;
    }
    if (!d->flush_failing && !d->options.quiet)
        fprintf(stderr, "coprofd: %s; the data is kept for the next "
                "flush\n", error->message);
    d->flush_failing = true;
    g_error_free(error);
    return false;
}

static void print_summary(struct coprofd *d)
{
    struct session_totals t;

    if (d->options.quiet)
        return;
    session_get_totals(recorder_session(d->recorder), &t);
    printf("coprofd: %s: samples=%" PRIu64 " exact=%" PRIu64
           " ambiguous=%" PRIu64 " unmapped=%" PRIu64 " orphan=%" PRIu64
           " pending=%" PRIu64 " lost=%" PRIu64 " contexts=%" PRIu64
           " images=%" PRIu64 " errors=%" PRIu64 " sched_events=%" PRIu64
           "\n", d->options.session_dir, t.samples, t.exact, t.ambiguous,
           t.unmapped, t.orphan, t.pending, t.lost, t.contexts, t.images,
           t.errors, recorder_sched_events(d->recorder));
    fflush(stdout);
}

/* Why the last flush failed, in a few words. */
static const char *flush_failure(struct coprofd *d)
{
    int error = recorder_last_errno(d->recorder);

    return error ? strerror(error) : "the database could not be written";
}

/* Why the session is incomplete, or NULL: it ended with its STOP. */
static const char *early_end(struct coprofd *d)
{
    if (d->end_reason[0])
        return d->end_reason;
    if (session_stop_mismatch(recorder_session(d->recorder), d->end_reason,
                              sizeof d->end_reason))
        return d->end_reason;
    if (session_stopped(recorder_session(d->recorder)))
        return NULL;
    snprintf(d->end_reason, sizeof d->end_reason, "the driver's stream "
             "ended without STOP");
    return d->end_reason;
}

/*
 * The last flush failed: the stream goes to a file that can be written,
 * and end_reason says so and where; the session keys get it if a small
 * transaction still fits.
 */
static void end_failed(struct coprofd *d)
{
    const char *failure = flush_failure(d);
    struct session_totals t;
    char where[PATH_MAX];
    GError *gerror = NULL;

    session_get_totals(recorder_session(d->recorder), &t);
    rescue_stream(d, where, sizeof where);
    snprintf(d->end_reason, sizeof d->end_reason, "flush failed: %s; %"
             PRIu64 " samples kept in %s", failure, t.samples, where);
    recorder_set_end(d->recorder, d->end_reason);
    if (recorder_write_end(d->recorder, &gerror) != 0)
        g_clear_error(&gerror);
    d->status = EXIT_FAILED;
}

/* The session ends: the stream stopped or ended, or a signal came. */
static void end_session(struct coprofd *d)
{
    if (d->ended)
        return;
    d->ended = true;
    recorder_finish(d->recorder);
    recorder_set_end(d->recorder, early_end(d));
    if (!flush(d, "end"))
        end_failed(d);
    print_summary(d);
    if (d->end_reason[0])
        fprintf(stderr, "coprofd: %s: session incomplete: %s\n",
                d->options.session_dir, d->end_reason);
    g_main_loop_quit(d->loop);
}

/* ---- main-loop callbacks ------------------------------------------------ */

static gboolean on_input(gint fd, GIOCondition condition, gpointer data);

static gboolean on_follow_timer(gpointer data)
{
    struct coprofd *d = data;

    d->follow_source = 0;
    d->input_source = g_unix_fd_add(d->fd, G_IO_IN, on_input, d);
    return G_SOURCE_REMOVE;
}

/* At the end of what a followed file holds now: look again later. */
static gboolean wait_for_more(struct coprofd *d)
{
    d->input_source = 0;
    d->follow_source = g_timeout_add(FOLLOW_INTERVAL_MS, on_follow_timer, d);
    return G_SOURCE_REMOVE;
}

static gboolean on_input(gint fd, GIOCondition condition, gpointer data)
{
    struct coprofd *d = data;
    ssize_t n = read(fd, d->buffer, CHUNK_BYTES);

    if (n > 0) {
        take_input(d, d->buffer, (size_t)n);
        if (!session_stopped(recorder_session(d->recorder)))
            return G_SOURCE_CONTINUE;
    } else if (n == 0 && d->follow) {
        return wait_for_more(d);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return G_SOURCE_CONTINUE;
    } else if (n < 0) {
        cli_fail(EXIT_FAILED, "%s: cannot read: %s", d->input_label,
                 strerror(errno));
        snprintf(d->end_reason, sizeof d->end_reason, "the stream could "
                 "not be read: %s", strerror(errno));
        d->status = EXIT_FAILED;
    }
    d->input_source = 0;
    end_session(d);
    return G_SOURCE_REMOVE;
}

static gboolean on_flush_timer(gpointer data)
{
    flush(data, "timer");
    return G_SOURCE_CONTINUE;
}

/* SIGHUP: a dump; one that fails says so each time (copcontrol --dump
 * waits for either). */
static gboolean on_dump(gpointer data)
{
    struct coprofd *d = data;

    if (!flush(d, "dump"))
        fprintf(stderr, "coprofd: %s: dump failed: %s; the data is kept "
                "for the next flush\n", d->options.session_dir,
                flush_failure(d));
    return G_SOURCE_CONTINUE;
}

/*
 * Takes what a pipe or socket holds already, so that a writer that wrote
 * everything and then sent SIGTERM loses nothing (a replayed file is not
 * read on: SIGTERM stops it where it is).
 */
static void take_pending_input(struct coprofd *d)
{
    size_t taken = 0;
    ssize_t n;

    if (d->input_source == 0 || d->options.input == INPUT_REPLAY || d->follow)
        return;
    while (taken < PENDING_INPUT_MAX &&
           (n = read(d->fd, d->buffer, CHUNK_BYTES)) > 0) {
        take_input(d, d->buffer, (size_t)n);
        taken += (size_t)n;
    }
}

/* SIGTERM, SIGINT: the end. */
static gboolean on_terminate(gpointer data)
{
    struct coprofd *d = data;

    take_pending_input(d);
    if (!d->ended && !session_stopped(recorder_session(d->recorder)))
        snprintf(d->end_reason, sizeof d->end_reason, "coprofd was ended "
                 "by a signal before the stream's STOP");
    end_session(d);
    return G_SOURCE_CONTINUE;
}

/* ---- main --------------------------------------------------------------- */

/*
 * The signals are watched before the session is made: one that comes
 * while it is made, or before the loop runs, waits for the loop (GLib
 * keeps it) instead of ending coprofd with a session that says live.
 */
static void watch_signals(struct coprofd *d)
{
    g_unix_signal_add(SIGHUP, on_dump, d);
    g_unix_signal_add(SIGTERM, on_terminate, d);
    g_unix_signal_add(SIGINT, on_terminate, d);
}

static int run(struct coprofd *d)
{
    d->loop = g_main_loop_new(NULL, FALSE);
    d->buffer = g_malloc(CHUNK_BYTES);
    d->input_source = g_unix_fd_add(d->fd, G_IO_IN, on_input, d);
    g_timeout_add_full(G_PRIORITY_HIGH, d->options.flush_ms, on_flush_timer,
                       d, NULL);
    g_main_loop_run(d->loop);
    g_main_loop_unref(d->loop);
    g_free(d->buffer);
    return d->status;
}

/*
 * The session exists (its keys committed): "ready" on --ready-fd, which
 * is then closed, so that coprof and copcontrol go on without polling
 * for session.db.
 */
static void say_ready(int fd)
{
    if (fd <= 0)
        return;
    cli_say_word(fd, "ready");  /* -1: the waiter is gone, not waiting */
    close(fd);
}

int main(int argc, char **argv)
{
    struct coprofd d = { .fd = -1 };
    GError *error = NULL;
    int status = parse_options(argc, argv, &d.options);

    if (status != 0)
        return status;
    signal(SIGPIPE, SIG_IGN);
    if (open_input(&d) != 0)
        return EXIT_FAILED;
    watch_signals(&d);
    struct recorder_options ro = {
        .session_dir = d.options.session_dir,
        .event_log = d.options.event_log,
        .source = d.input_label,
        .overwrite = d.options.overwrite,
        .live = d.options.input != INPUT_REPLAY,
        .quiet = d.options.quiet,
        .timeline_ns = (uint64_t)d.options.timeline_ms * 1000000,
    };
    d.recorder = recorder_open(&ro, &error);
    if (d.recorder == NULL) {
        status = cli_fail(EXIT_FAILED, "%s", error->message);
        g_error_free(error);
        return status;
    }
    copy_open(&d);
    say_ready(d.options.ready_fd);
    cli_test_point("coprofd-before-loop");
    status = run(&d);
    recorder_close(d.recorder);
    if (d.copy_fd >= 0)
        close(d.copy_fd);
    if (d.fd >= 0)
        close(d.fd);
    return status;
}
