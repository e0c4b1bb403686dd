/*
 * test-eventlog-stress.c — GTest suite for the event log under concurrency:
 * many threads writing while a reader follows, writer processes SIGKILLed
 * mid-stream, and a slot left half-written by a dead writer.
 *
 * Every record carries (writer, sequence, check word, ~sequence): a record
 * mixing words of two writes fails the check, and its tid must be its
 * writer's.  The checks on what a reader returns:
 *   - no torn record: every check holds;
 *   - the merged order is total: each event compares strictly after the
 *     previous one, and each writer's sequence numbers only grow (a thread's
 *     records are ordered by its clock whatever ring they went to);
 *   - no record twice;
 *   - counts add up: returned + missed + unfinished + late = slots reserved,
 *     and slots reserved - skipped = records written;
 *   - the order is stable: two readers of the same file return the same
 *     sequence.
 */
#include "eventlog/coplog.h"
#include "eventlog/file.h"
#include "eventlog/layout.h"
#include "eventlog/test-support.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITERS            4
#define RECORDS_PER_WRITER 40000
#define MAX_WRITERS        16
#define KILL_ROUNDS        5

#define PACE_EVERY         32   /* writers pause briefly this often, so */
#define PACE_US            20   /* that a follower keeps up with most */

static const struct coplog_subsys_config stress_subsys[] = {
    { .name = "EVEN", .capacity = 4096 },
    { .name = "ODD", .capacity = 2048 },
};

static uint64_t check_word(uint64_t writer, uint64_t seq, unsigned subsys)
{
    uint64_t x = writer << 40 ^ seq << 2 ^ subsys;

    /* splitmix64's finalizer */
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void write_checked(struct coplog *log, unsigned writer, uint64_t seq)
{
    unsigned subsys = (unsigned)(seq % 2);

    COPLOG(log, subsys, COPLOG_TERSE, "w%u s%llu c%llx n%llx", writer,
           (unsigned long long)seq,
           (unsigned long long)check_word(writer, seq, subsys),
           (unsigned long long)~seq);
}

/* What a reader has returned so far, and the checks on it. */
struct verifier {
    pid_t pids[MAX_WRITERS];              /* 0 when not known */
    _Atomic uint32_t tids[MAX_WRITERS];   /* 0 before the writer started */
    int64_t last_seq[MAX_WRITERS];
    GHashTable *seen;
    struct coplog_event last;
    bool any;
    uint64_t checked;
};

static void verifier_init(struct verifier *v, pid_t pid)
{
    memset(v, 0, sizeof *v);
    for (int i = 0; i < MAX_WRITERS; i++) {
        v->pids[i] = pid;
        v->last_seq[i] = -1;
    }
    v->seen = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
}

static void verifier_check(struct verifier *v, const struct coplog_event *e)
{
    uint64_t writer = e->args[0], seq = e->args[1];
    int64_t *key;

    g_assert_cmpuint(e->nargs, ==, 4);
    g_assert_nonnull(e->format);
    g_assert_cmpstr(e->format, ==, "w%u s%llu c%llx n%llx");
    g_assert_cmpuint(writer, <, MAX_WRITERS);
    g_assert_cmphex(e->args[2], ==, check_word(writer, seq, e->subsys));
    g_assert_cmphex(e->args[3], ==, ~seq);
    g_assert_cmpuint(seq % 2, ==, e->subsys);
    g_assert_cmpuint(e->level, ==, COPLOG_TERSE);
    if (v->pids[writer] != 0)
        g_assert_cmpuint(e->pid, ==, (unsigned)v->pids[writer]);
    if (atomic_load(&v->tids[writer]) != 0)
        g_assert_cmpuint(e->tid, ==, atomic_load(&v->tids[writer]));
    g_assert_cmpint((int64_t)seq, >, v->last_seq[writer]);
    v->last_seq[writer] = (int64_t)seq;
    if (v->any)
        g_assert_cmpint(coplog_event_compare(&v->last, e), <, 0);
    v->last = *e;
    v->any = true;
    key = g_new(int64_t, 1);
    *key = (int64_t)(writer << 48 | seq);
    g_assert_false(g_hash_table_contains(v->seen, key));
    g_hash_table_add(v->seen, key);
    v->checked++;
}

/* Reads what is available now; returns how many records. */
static uint64_t verifier_read(struct verifier *v, struct coplog_reader *reader,
                              unsigned flags)
{
    struct coplog_event event;
    uint64_t count = 0;
    int status;

    while ((status = coplog_reader_next(reader, &event, flags)) > 0) {
        verifier_check(v, &event);
        count++;
    }
    g_assert_cmpint(status, ==, 0);
    return count;
}

static void verifier_free(struct verifier *v)
{
    g_hash_table_unref(v->seen);
}

struct totals {
    uint64_t reserved, skipped, in_progress;
};

static struct totals log_totals(struct coplog_reader *reader)
{
    struct totals t = { 0, 0, 0 };

    for (unsigned i = 0; i < coplog_reader_subsys_count(reader); i++) {
        struct coplog_subsys_stat stat;

        coplog_reader_stat(reader, i, &stat);
        t.reserved += stat.reserved;
        t.skipped += stat.skipped;
        t.in_progress += stat.in_progress;
    }
    return t;
}

static uint64_t counts_total(const struct coplog_read_counts *c)
{
    return c->delivered + c->missed + c->unfinished + c->late + c->filtered;
}

/* ------------------------------------------------ threads and a follower */

struct writer_thread {
    struct coplog *log;
    struct verifier *verifier;
    unsigned id;
    uint64_t count;             /* UINT64_MAX: until killed */
    bool paced;                 /* pause now and then; else full speed,
                                   where a kill often lands mid-record */
};

static void *writer_main(void *data)
{
    struct writer_thread *w = data;

    atomic_store(&w->verifier->tids[w->id], (uint32_t)gettid());
    for (uint64_t seq = 0; seq < w->count; seq++) {
        write_checked(w->log, w->id, seq);
        if (w->paced && seq % PACE_EVERY == PACE_EVERY - 1)
            g_usleep(PACE_US);
    }
    return NULL;
}

static void test_threads_with_follower(void)
{
    char *path = test_path("threads");
    struct coplog *log = test_create(path, stress_subsys, 2);
    struct coplog_reader *reader = test_reader(path);
    struct writer_thread writers[WRITERS];
    pthread_t threads[WRITERS];
    struct coplog_read_counts counts;
    struct verifier v;
    struct totals totals;
    uint64_t live = 0;
    bool running = true;

    verifier_init(&v, getpid());
    coplog_reader_set_stall(reader, 30 * 1000000000ull);
    for (unsigned i = 0; i < WRITERS; i++) {
        writers[i] = (struct writer_thread){ log, &v, i, RECORDS_PER_WRITER,
                                             true };
        pthread_create(&threads[i], NULL, writer_main, &writers[i]);
    }
    while (running) {
        totals = log_totals(reader);
        running = totals.reserved - totals.skipped <
                  (uint64_t)WRITERS * RECORDS_PER_WRITER;
        live += verifier_read(&v, reader, COPLOG_READ_LIVE);
        g_usleep(200);
    }
    for (unsigned i = 0; i < WRITERS; i++)
        pthread_join(threads[i], NULL);
    g_usleep(1000);
    live += verifier_read(&v, reader, COPLOG_READ_LIVE);
    verifier_read(&v, reader, COPLOG_READ_ALL);

    totals = log_totals(reader);
    coplog_reader_counts(reader, &counts);
    g_test_message("read %" G_GUINT64_FORMAT " live of %u written, %"
                   G_GUINT64_FORMAT " missed, %" G_GUINT64_FORMAT " skipped",
                   live, WRITERS * RECORDS_PER_WRITER, counts.missed,
                   totals.skipped);
    g_assert_cmpuint(live, >, 0);
    g_assert_cmpuint(totals.reserved - totals.skipped, ==,
                     (uint64_t)WRITERS * RECORDS_PER_WRITER);
    g_assert_cmpuint(counts_total(&counts), ==, totals.reserved);
    g_assert_cmpuint(counts.late, ==, 0);
    g_assert_cmpuint(counts.unfinished, <=, totals.skipped);
    g_assert_cmpuint(totals.in_progress, ==, 0);
    g_assert_cmpuint(v.checked, ==, counts.delivered);
    coplog_reader_close(reader);
    coplog_close(log);
    verifier_free(&v);
    g_free(path);
}

/* ------------------------------------------------ SIGKILLed writers */

static _Noreturn void child_write_forever(struct coplog *log, unsigned round)
{
    struct verifier dummy;
    struct writer_thread writers[2];
    pthread_t threads[2];

    memset(&dummy, 0, sizeof dummy);
    for (unsigned i = 0; i < 2; i++) {
        writers[i] = (struct writer_thread){ log, &dummy, 2 * round + i,
                                             UINT64_MAX, false };
        pthread_create(&threads[i], NULL, writer_main, &writers[i]);
    }
    pthread_join(threads[0], NULL);
    _exit(1);
}

/* Follows the log until the child reserved `until` slots, then kills it. */
static void follow_and_kill(struct verifier *v, struct coplog_reader *reader,
                            pid_t child, uint64_t until)
{
    int status;

    while (log_totals(reader).reserved < until) {
        verifier_read(v, reader, COPLOG_READ_LIVE);
        g_usleep(100);
    }
    g_assert_cmpint(kill(child, SIGKILL), ==, 0);
    g_assert_cmpint(waitpid(child, &status, 0), ==, child);
    g_assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* Two readers of the finished file see the same records in the same order. */
static void check_stable(const char *path)
{
    GArray *first = test_read_all(path), *second = test_read_all(path);

    g_assert_cmpuint(first->len, >, 0);
    g_assert_cmpuint(first->len, ==, second->len);
    for (guint i = 0; i < first->len; i++) {
        const struct test_event *a = &g_array_index(first, struct test_event, i);
        const struct test_event *b = &g_array_index(second, struct test_event, i);

        g_assert_cmpint(coplog_event_compare(&a->event, &b->event), ==, 0);
        g_assert_cmpstr(a->message, ==, b->message);
        if (i > 0)
            g_assert_cmpint(coplog_event_compare(
                &g_array_index(first, struct test_event, i - 1).event,
                &a->event), <, 0);
    }
    g_array_unref(first);
    g_array_unref(second);
}

static void test_sigkill_writers(void)
{
    char *path = test_path("sigkill");
    struct coplog *log = test_create(path, stress_subsys, 2);
    struct coplog_reader *reader = test_reader(path);
    struct coplog_read_counts counts;
    struct totals totals;
    struct verifier v;
    uint64_t reserved = 0;

    verifier_init(&v, 0);
    coplog_reader_set_stall(reader, 200 * 1000000ull);
    for (unsigned round = 0; round < KILL_ROUNDS; round++) {
        pid_t child = fork();

        g_assert_cmpint(child, >=, 0);
        if (child == 0)
            child_write_forever(log, round);
        v.pids[2 * round] = v.pids[2 * round + 1] = child;
        reserved += 20000 + (uint64_t)g_random_int_range(0, 20000);
        follow_and_kill(&v, reader, child, reserved);
        reserved = log_totals(reader).reserved;
    }
    g_usleep(300 * 1000);   /* past the stall time: pending slots settle */
    verifier_read(&v, reader, COPLOG_READ_LIVE);
    verifier_read(&v, reader, COPLOG_READ_ALL);

    totals = log_totals(reader);
    coplog_reader_counts(reader, &counts);
    g_test_message("%" G_GUINT64_FORMAT " reserved, %" G_GUINT64_FORMAT
                   " read, %" G_GUINT64_FORMAT " missed, %" G_GUINT64_FORMAT
                   " unfinished, %" G_GUINT64_FORMAT " in progress at death",
                   totals.reserved, counts.delivered, counts.missed,
                   counts.unfinished, totals.in_progress);
    g_assert_cmpuint(counts_total(&counts), ==, totals.reserved);
    /* Each killed thread leaves at most one slot unfinished. */
    g_assert_cmpuint(counts.unfinished, <=, 2 * KILL_ROUNDS + totals.skipped);
    g_assert_cmpuint(totals.in_progress, <=, 2 * KILL_ROUNDS);
    check_stable(path);
    coplog_reader_close(reader);
    coplog_close(log);
    verifier_free(&v);
    g_free(path);
}

/* ------------------------------------------------ a slot left busy */

/* Does what a writer killed between claiming a slot and committing it
 * leaves behind: a reserved position whose slot says busy. */
static void leave_busy_slot(const char *path)
{
    char error[COPLOG_ERROR_MAX];
    struct log_file file;
    const struct layout_subsys *subsys;
    _Atomic uint64_t *record;
    uint64_t position;

    g_assert_cmpint(log_file_map(&file, path, LOG_FILE_WRITE, error), ==, 0);
    subsys = log_file_subsys(&file, 0);
    position = atomic_fetch_add(&log_file_ring(&file, subsys, 0)->head, 1);
    record = (_Atomic uint64_t *)(log_file_records(&file, subsys, 0) +
                                  (position & (subsys->capacity - 1)) *
                                  subsys->record_bytes);
    atomic_store(&record[RECORD_CLOCK], 12345);
    atomic_store(&record[RECORD_COMMIT], record_commit_word(position, 1));
    log_file_unmap(&file);
}

static void test_dead_writer_slot(void)
{
    static const struct coplog_subsys_config config[] = {
        { .name = "ONE", .capacity = 16, .shared_ring = true },
    };
    char *path = test_path("busy");
    struct coplog *log = test_create(path, config, 1);
    struct coplog_reader *live = test_reader(path);
    struct coplog_read_counts counts;
    struct coplog_subsys_stat stat;
    struct verifier v;
    GArray *events;

    verifier_init(&v, getpid());
    coplog_reader_set_stall(live, 50 * 1000000ull);
    g_assert_cmpuint(verifier_read(&v, live, COPLOG_READ_LIVE), ==, 0);
    for (uint64_t seq = 0; seq < 4; seq += 2)
        write_checked(log, 0, seq);
    leave_busy_slot(path);
    for (uint64_t seq = 4; seq < 10; seq += 2)
        write_checked(log, 0, seq);
    g_usleep(1000);

    /* The busy slot holds the follower back until the stall time. */
    g_assert_cmpuint(verifier_read(&v, live, COPLOG_READ_LIVE), ==, 0);
    g_usleep(60 * 1000);
    verifier_read(&v, live, COPLOG_READ_LIVE);
    g_usleep(60 * 1000);
    g_assert_cmpuint(verifier_read(&v, live, COPLOG_READ_LIVE) + v.checked,
                     ==, 5);
    coplog_reader_counts(live, &counts);
    g_assert_cmpuint(counts.unfinished, ==, 1);

    /* A dump skips it at once. */
    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 5);
    g_array_unref(events);

    /* Writers lapping the ring give the busy slot up and go on. */
    for (uint64_t seq = 10; seq < 10 + 2 * 40; seq += 2)
        write_checked(log, 0, seq);
    coplog_reader_stat(live, 0, &stat);
    g_assert_cmpuint(stat.in_progress, ==, 1);
    g_assert_cmpuint(stat.skipped, >=, 2);
    g_assert_cmpuint(stat.reserved - stat.skipped, ==, 5 + 40 + 1);
    events = test_read_all(path);
    g_assert_cmpuint(events->len, ==, 15);
    g_array_unref(events);
    coplog_reader_close(live);
    coplog_close(log);
    verifier_free(&v);
    g_free(path);
}

int main(int argc, char **argv)
{
    test_support_init(&argc, &argv);
    g_test_add_func("/eventlog/stress/threads-with-follower",
                    test_threads_with_follower);
    g_test_add_func("/eventlog/stress/sigkill-writers", test_sigkill_writers);
    g_test_add_func("/eventlog/stress/dead-writer-slot", test_dead_writer_slot);
    return g_test_run();
}
