/*
 * coprof-host — the host side of a coprof session: the Linux scheduler's
 * events of the session's threads and host CPU samples of the profiled
 * command, stored in the session when the recording ends.  `coprof
 * record` starts it (hostprof/README.md); it is not meant to be run by
 * hand, though it can be.
 *
 * How: the threads of the command (--command, with its threads and child
 * processes, from /proc; with --sched=all also copsim's and its QEMUs',
 * --copsim) are traced through a private tracefs instance (sched.c) and,
 * with --host-event, the command is sampled through perf_event_open
 * (samples.c); the command must not have exec'd yet (coprof holds it
 * until this program says it is ready on --ready-fd), since sampling
 * starts at its exec.  Until SIGTERM or SIGINT, the buffers are drained
 * every 50 ms and the scheduler's events aggregated as they come
 * (aggregate.c; the contexts' lives from copsim's event log, lives.c),
 * the newest kept in a ring (--sched-ring); the aggregates' rows are
 * stored when many waited, and with the ring at a dump (SIGHUP with
 * --follow-session).  At the end tracing stops, the instance is removed
 * (in a thread: the kernel takes about 0.1 s) while the samples are
 * symbolized (symbols.c) and the rest is written into DIR/session.db
 * (store.c).  The death of the
 * process that started it (coprof killed with SIGKILL) stops it the same
 * way with --end-with-parent (PR_SET_PDEATHSIG).
 *
 * Without the privilege to trace or to sample, one line says so and the
 * rest is recorded: the session's keys host.sched and host.samples say
 * what was recorded and why not.
 *
 * Exit status: 0 when the session holds the host side (or what of it
 * could be recorded); 1 when it could not be written; 2 for bad usage.
 */
#include "hostprof/hostprof.h"
#include "hostprof/aggregate.h"
#include "hostprof/lives.h"
#include "hostprof/samples.h"
#include "hostprof/sched.h"
#include "hostprof/store.h"
#include "hostprof/symbols.h"
#include "common/cli.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAILED     1
#define EXIT_USAGE      2
#define TICK_MS         50
#define FOLLOW_TICKS    20      /* --follow-session: every second */
#define SETTLE_NS       250000000ull    /* an event older than this since
                                           the drain is final */
#define ROWS_TO_STORE   4096    /* aggregates' rows that wait at most */

struct options {
    const char *dir, *event_log;
    pid_t command, copsim;
    int sched, sched_all, ready_fd, quiet, follow, with_parent;
    long ring;
};

/* --follow-session: the host processes followed so far. */
struct follower {
    struct vec pids;            /* pid_t */
    int said;                   /* a failure to attach was said */
};

static volatile sig_atomic_t stopping, follow_now, discarding, command_over;

static void usage(FILE *out)
{
    fprintf(out,
"NAME\n"
"    coprof-host - record the host side of a coprof session\n"
"\n"
"SYNOPSIS\n"
"    coprof-host --session-dir DIR [--command PID] [--copsim PID]\n"
"                [--event-log FILE] [--host-event=EVENT[:PERIOD]]\n"
"                [--host-call-graph] [--follow-session]\n"
"                [--sched=command|all] [--sched-ring=EVENTS] [--no-sched]\n"
"                [--ready-fd N] [--end-with-parent] [--quiet]\n"
"\n"
"DESCRIPTION\n"
"    Records, until SIGTERM or SIGINT (SIGUSR1: stop and store nothing;\n"
"    SIGUSR2, the command ended: stop tracing once no thread traced runs),\n"
"    the Linux scheduler's events\n"
"    (sched_switch, sched_wakeup, sched_wakeup_new, sched_migrate_task,\n"
"    sched_process_fork, sched_process_exit, task_newtask) of the\n"
"    command's threads and every task they create (with --sched=all\n"
"    also copsim's and its QEMUs'), through a private tracefs instance on\n"
"    CLOCK_MONOTONIC; and with --host-event host CPU samples of the\n"
"    command's threads through perf_event_open.  The events are\n"
"    aggregated as they come: each thread's running, runnable and blocked\n"
"    time per second and per copsim context (from the context SCHED\n"
"    records of --event-log); the newest are kept raw in a ring.  It\n"
"    stores them in DIR/session.db (docs/session-format.md, \"The host\n"
"    side\"), the samples named by ELF file and symbol (elfutils).\n"
"    coprof record starts it; without the privilege to trace or sample,\n"
"    one line says so and the rest is recorded.\n"
"\n"
"OPTIONS\n"
"    --session-dir DIR     the session, which coprofd made\n"
"    --command PID         the profiled command: traced and (with\n"
"                          --host-event) sampled from its exec, which must\n"
"                          not have happened yet\n"
"    --copsim PID          copsim: with --sched=all traced with its\n"
"                          threads and QEMUs; with --follow-session its\n"
"                          end ends the recording\n"
"    --event-log FILE      copsim's event log (events.coplog), whose SCHED\n"
"                          records give each context's life\n"
"    --host-event=EVENT[:PERIOD]\n"
"                          sample the command on EVENT (libpfm4's name,\n"
"                          e.g. cpu-clock, perf::task-clock) every PERIOD\n"
"                          events (default %s:%d: for cpu-clock, ns)\n"
"    --host-call-graph     record the user-space callchain of each sample\n"
"                          (frame pointers)\n"
"    --follow-session      also follow, from when they run their first\n"
"                          context, the host programs of DIR's contexts\n"
"                          (copcontrol: they are not known in advance):\n"
"                          every second and on SIGHUP (then saying\n"
"                          \"coprof-host: dump N: following P processes\"),\n"
"                          new pids in its contexts table are traced and,\n"
"                          with --host-event, sampled\n"
"    --sched=command|all   whose scheduler events: the command's threads\n"
"                          (the default) or also copsim's and its QEMUs'\n"
"                          (the emulator's machinery: about 100 times as\n"
"                          many events)\n"
"    --sched-ring=EVENTS   keep the newest EVENTS scheduler events raw\n"
"                          (default %d, about 10 MiB; 0: none), stored at\n"
"                          a dump and at the end; what it lets go is\n"
"                          counted\n"
"    --no-sched            no scheduler events\n"
"    --ready-fd N          write \"ready\" to descriptor N once recording,\n"
"                          and \"stored\" once the host side is stored\n"
"                          (before the tracefs instance's removal ends)\n"
"    --end-with-parent     stop (and store) when the process that started\n"
"                          it dies, as on SIGTERM (coprof record)\n"
"    -q, --quiet           no summary line\n"
"    -h, --help            this text\n"
"\n"
"EXIT STATUS\n"
"    0 the session holds what could be recorded; 1 it could not be\n"
"    written; 2 bad usage.\n",
        HOST_EVENT_DEFAULT, HOST_PERIOD_DEFAULT, HOST_RING_DEFAULT);
}

enum { OPT_DIR = 256, OPT_COMMAND, OPT_COPSIM, OPT_EVENT, OPT_CALLS,
       OPT_NO_SCHED, OPT_READY, OPT_FOLLOW, OPT_WITH_PARENT, OPT_SCHED,
       OPT_RING, OPT_LOG };

static const struct cli_option long_options[] = {
    {0, "session-dir", required_argument, OPT_DIR},
    {0, "command", required_argument, OPT_COMMAND},
    {0, "copsim", required_argument, OPT_COPSIM},
    {0, "host-event", required_argument, OPT_EVENT},
    {0, "host-call-graph", no_argument, OPT_CALLS},
    {0, "no-sched", no_argument, OPT_NO_SCHED},
    {0, "sched", required_argument, OPT_SCHED},
    {0, "sched-ring", required_argument, OPT_RING},
    {0, "event-log", required_argument, OPT_LOG},
    {0, "follow-session", no_argument, OPT_FOLLOW},
    {0, "end-with-parent", no_argument, OPT_WITH_PARENT},
    {0, "ready-fd", required_argument, OPT_READY},
    {'q', "quiet", no_argument, 0},
    {'h', "help", no_argument, 0},
    CLI_END,
};

static int number(const char *word, const char *arg, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v < 0 || v > 0x7fffffff)
        return cli_fail(EXIT_USAGE, "%s=%s: not a number", word, arg);
    *out = (int)v;
    return 0;
}

static int parse(int argc, char **argv, struct options *o,
                 struct hostprof *hp)
{
    char err[HOST_ERR_MAX];
    struct cli_parser parser;
    int c, v, rc = 0;

    cli_parser_init(&parser, long_options, ":");
    while (rc == 0 && (c = cli_next(&parser, argc, argv)) != -1) {
        const char *word = argv[optind - 1];

        switch (c) {
        case OPT_DIR: o->dir = optarg; break;
        case OPT_COMMAND:
            rc = number("--command", optarg, &v);
            o->command = v;
            break;
        case OPT_COPSIM:
            rc = number("--copsim", optarg, &v);
            o->copsim = v;
            break;
        case OPT_EVENT:
            if (host_samples_parse(hp, optarg, err, sizeof(err)) < 0)
                rc = cli_fail(EXIT_USAGE, "%s", err);
            break;
        case OPT_CALLS: hp->call_graph = 1; break;
        case OPT_NO_SCHED: o->sched = 0; break;
        case OPT_SCHED:
            if (strcmp(optarg, "all") != 0 && strcmp(optarg, "command") != 0)
                rc = cli_fail(EXIT_USAGE, "%s: not command or all", word);
            o->sched_all = strcmp(optarg, "all") == 0;
            break;
        case OPT_RING:
            rc = number("--sched-ring", optarg, &v);
            o->ring = v;
            break;
        case OPT_LOG: o->event_log = optarg; break;
        case OPT_FOLLOW: o->follow = 1; break;
        case OPT_WITH_PARENT: o->with_parent = 1; break;
        case OPT_READY: rc = number("--ready-fd", optarg, &o->ready_fd);
            break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); exit(0);
        case ':': return cli_fail(EXIT_USAGE, "%s: needs a value", word);
        default:
            return cli_fail(EXIT_USAGE, "%s: unknown option (see "
                            "coprof-host --help)", word);
        }
    }
    if (rc)
        return rc;
    if (!o->dir || !*o->dir)
        return cli_fail(EXIT_USAGE, "--session-dir: required");
    if (optind < argc)
        return cli_fail(EXIT_USAGE, "%s: unexpected argument", argv[optind]);
    if (hp->event[0] && !o->command && !o->follow)
        return cli_fail(EXIT_USAGE, "--host-event: needs --command PID or "
                        "--follow-session");
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    stopping = 1;
}

/* SIGUSR1: the recording was not made (coprof record failed before the
 * command ran): stop, store nothing. */
static void on_discard(int sig)
{
    (void)sig;
    stopping = discarding = 1;
}

/* SIGUSR2: the command has ended (coprof record reaped it). */
static void on_command_over(int sig)
{
    (void)sig;
    command_over = 1;
}

static void on_follow(int sig)
{
    (void)sig;
    follow_now = 1;
}

/* SIGHUP: with --follow-session, follow now (copcontrol --dump); else
 * stop, as SIGTERM and SIGINT do. */
static void catch_signals(int follow)
{
    struct sigaction action;

    memset(&action, 0, sizeof(action));
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    action.sa_handler = follow ? on_follow : on_signal;
    sigaction(SIGHUP, &action, NULL);
    action.sa_handler = on_discard;
    sigaction(SIGUSR1, &action, NULL);
    action.sa_handler = on_command_over;
    sigaction(SIGUSR2, &action, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Starts what was asked; what could not start is said and noted. */
static void start(struct options *o, struct hostprof *hp,
                  struct host_sched *sched, struct host_sampler *sampler)
{
    char err[HOST_ERR_MAX];

    if (o->copsim && o->sched_all)
        hostprof_add_process(hp, o->copsim, "copsim", "qemu");
    hp->sched_threads = o->sched_all ? "all" : "command";
    if (o->command)
        hostprof_add_process(hp, o->command, "command", "command");
    if (o->sched && host_sched_start(sched, hp, err, sizeof(err)) < 0) {
        cli_fail(0, "Linux scheduler events: not recorded: %s", err);
        snprintf(hp->sched_state, sizeof(hp->sched_state),
                 "not recorded: %s", err);
    } else if (o->sched) {
        snprintf(hp->sched_state, sizeof(hp->sched_state), "recorded");
    }
    if (!hp->event[0])
        return;
    if ((o->command ? host_samples_start(sampler, hp, o->command, err,
                                         sizeof(err)) :
         host_samples_open(sampler, hp, err, sizeof(err))) < 0) {
        cli_fail(0, "host samples: not recorded: %s", err);
        snprintf(hp->samples_state, sizeof(hp->samples_state),
                 "not recorded: %s", err);
    } else {
        snprintf(hp->samples_state, sizeof(hp->samples_state), "recorded");
    }
}

static void say_ready(int fd)
{
    if (fd > 0)
        cli_say_word(fd, "ready");  /* -1: coprof gone, not waiting */
}

/*
 * The host side is stored: "stored" on the ready pipe, so that coprof
 * goes on while this program waits for its tracefs instance's removal
 * (the kernel's RCU grace periods, about 0.1 s).  A program that stored
 * nothing closes the pipe unsaid.
 */
static void say_stored(int fd, int stored)
{
    if (fd <= 0)
        return;
    if (stored)             /* -1: nobody waits (copcontrol), coprof gone */
        cli_say_word(fd, "stored");
    close(fd);
}

static uint64_t monotonic_ns(void)
{
    struct timespec now;

    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/* New host processes of the session's contexts: traced and sampled. */
static void follow(const struct options *o, struct hostprof *hp,
                   struct host_sched *sched, struct host_sampler *sampler,
                   struct follower *f)
{
    size_t known = f->pids.n;
    char err[HOST_ERR_MAX];

    if (host_session_pids(o->dir, &f->pids) < 0)
        return;         /* busy or not yet there: the next second */
    for (size_t i = known; i < f->pids.n; i++) {
        pid_t pid = *VEC_AT(&f->pids, pid_t, i);
        size_t from = hp->threads.n;

        if (hostprof_add_process(hp, pid, "command", "command") == 0)
            continue;   /* gone already */
        host_sched_follow(sched, from);
        if (strcmp(hp->samples_state, "recorded") == 0 &&
            host_samples_attach(sampler, pid, err, sizeof(err)) < 0 &&
            !f->said++)
            cli_fail(0, "host samples of pid %ld: %s", (long)pid, err);
    }
}

/* With --follow-session, the session ends with the copsim it follows: a
 * copsim that is gone (killed) leaves nothing to follow, so coprof-host
 * stores what it has rather than waiting for a stop that may never come. */
static int copsim_gone(const struct options *o)
{
    if (!o->follow || !o->copsim || kill(o->copsim, 0) == 0 ||
        errno != ESRCH)
        return 0;
    fprintf(stderr, "coprof-host: copsim (pid %ld) is gone; storing what "
            "was recorded\n", (long)o->copsim);
    return 1;
}

/* The rows that waited into the session (and the ring, at a dump); a
 * store that fails is said once and tried again later. */
static void store(const struct options *o, struct hostprof *hp, int what)
{
    static int said;
    char err[HOST_ERR_MAX];

    if (host_store(o->dir, hp, NULL, what, err, sizeof(err)) < 0 &&
        !said++)
        cli_fail(0, "%s/%s (kept for the next store)", o->dir, err);
}

/* Drains the kernel's buffers and the contexts' records, and aggregates
 * what can no longer be preceded by an event still to come. */
static void drain(const struct options *o, struct hostprof *hp,
                  struct host_sched *sched, struct host_sampler *sampler,
                  struct host_lives *lives)
{
    uint64_t now = monotonic_ns();

    host_samples_read(sampler);
    host_sched_read(sched);
    host_lives_read(lives, hp, 0);
    host_agg_advance(hp, now - SETTLE_NS);
    if (hp->bucket_rows.n + hp->context_rows.n >= ROWS_TO_STORE)
        store(o, hp, HOST_STORE_ROWS);
}

/* SIGHUP with --follow-session (copcontrol --dump): the new host
 * programs followed, what is aggregated and the ring stored, then said. */
static void dump(const struct options *o, struct hostprof *hp,
                 struct host_sched *sched, struct host_sampler *sampler,
                 struct follower *f, struct host_lives *lives)
{
    static unsigned dumps;

    follow(o, hp, sched, sampler, f);
    drain(o, hp, sched, sampler, lives);
    if (strcmp(hp->sched_state, "recorded") == 0)
        store(o, hp, HOST_STORE_DUMP);
    fprintf(stderr, "coprof-host: dump %u: following %zu processes\n",
            ++dumps, f->pids.n);
}

/*
 * After SIGUSR2 (the command ended), once every thread traced has ended:
 * nothing traced can run or create a task any more, so tracing stops
 * now, its last events read, and the instance's removal (about 0.1 s of
 * the kernel's) runs while copsim and coprofd finish, instead of after.
 * A thread that still runs (a child process the command left, copsim's
 * with --sched=all) keeps the tracing on until it ends or SIGTERM comes.
 */
static void stop_sched_when_over(struct hostprof *hp,
                                 struct host_sched *sched)
{
    if (!command_over || !host_sched_active(sched) ||
        !hostprof_threads_ended(hp))
        return;
    host_sched_stop(sched);
}

static void record(const struct options *o, struct hostprof *hp,
                   struct host_sched *sched, struct host_sampler *sampler)
{
    struct timespec tick = {0, TICK_MS * 1000000L};
    struct host_lives lives = {o->event_log, NULL, 0};
    struct follower f;

    memset(&f, 0, sizeof(f));
    vec_init(&f.pids, sizeof(pid_t));
    for (unsigned n = 0; !stopping; n++) {
        if (o->follow && n % FOLLOW_TICKS == 0) {
            if (copsim_gone(o))
                break;
            follow(o, hp, sched, sampler, &f);
        }
        if (follow_now) {
            follow_now = 0;
            dump(o, hp, sched, sampler, &f, &lives);
        }
        nanosleep(&tick, NULL);
        drain(o, hp, sched, sampler, &lives);
        stop_sched_when_over(hp, sched);
    }
    vec_free(&f.pids);
    hp->stop_ns = monotonic_ns();
    host_sched_stop(sched);
    host_samples_stop(sampler);
    host_lives_read(&lives, hp, 1);
    host_lives_close(&lives);
    host_agg_finish(hp);
}

static void summary(const struct hostprof *hp)
{
    if (strcmp(hp->sched_state, "recorded") == 0)
        fprintf(stderr, "coprof-host: Linux scheduler events: %llu of %zu "
                "threads (%s), %llu lost; raw: %zu kept, %llu let go by "
                "the ring\n", (unsigned long long)hp->sched_events,
                hp->threads.n, hp->sched_threads,
                (unsigned long long)hp->lost_sched, hp->ring.n,
                (unsigned long long)hp->ring.dropped);
    if (strcmp(hp->samples_state, "recorded") == 0)
        fprintf(stderr, "coprof-host: host samples: %zu (%s:%llu%s), "
                "%llu lost, %zu places\n", hp->samples.n, hp->event,
                (unsigned long long)hp->period,
                hp->call_graph ? ", callchains" : "",
                (unsigned long long)hp->lost_samples, hp->locations.n);
}

/* The samples symbolized, everything stored; the exit status. */
static int end(const struct options *o, struct hostprof *hp, int **chain)
{
    char err[HOST_ERR_MAX];

    if (host_symbolize(hp, chain) < 0)
        return cli_fail(EXIT_FAILED, "symbols: out of memory");
    if (host_store(o->dir, hp, *chain, HOST_STORE_END, err,
                   sizeof(err)) < 0)
        return cli_fail(EXIT_FAILED, "%s/%s", o->dir, err);
    if (!o->quiet)
        summary(hp);
    return 0;
}

int main(int argc, char **argv)
{
    static struct hostprof hp;
    struct options o = {NULL, NULL, 0, 0, 1, 0, -1, 0, 0, 0,
                        HOST_RING_DEFAULT};
    struct host_sched sched;
    struct host_sampler sampler;
    int *chain = NULL, rc;

    memset(&sched, 0, sizeof(sched));
    memset(&sampler, 0, sizeof(sampler));
    hostprof_init(&hp);
    if ((rc = parse(argc, argv, &o, &hp)) != 0)
        return rc;
    if (host_agg_init(&hp, o.sched ? (size_t)o.ring : 0, HOST_BUCKET_NS_DEFAULT) < 0)
        return cli_fail(EXIT_FAILED, "--sched-ring=%ld: out of memory",
                        o.ring);
    catch_signals(o.follow);
    /* A coprof killed with SIGKILL cannot stop us: its death does. */
    if (o.with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == 1)
            stopping = 1;
    }
    hp.start_ns = monotonic_ns();
    start(&o, &hp, &sched, &sampler);
    say_ready(o.ready_fd);
    record(&o, &hp, &sched, &sampler);
    if (!discarding)
        rc = end(&o, &hp, &chain);
    say_stored(o.ready_fd, !discarding && rc == 0);
    cli_test_point("coprof-host-after-stored");
    free(chain);
    host_sched_finish(&sched);
    hostprof_free(&hp);
    return rc;
}
