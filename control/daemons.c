/*
 * daemons.c — starting copsim and coprofd, waiting for processes
 * (daemons.h).
 *
 * daemons_start() forks; the child puts itself in a new session or process
 * group, moves the descriptor it is given to 3, points stdin at /dev/null
 * and stdout/stderr at the log, and execs.  An exec that fails exits 127
 * and says why in the log.  copsim is started with the write end of a pipe
 * as --ready-fd 3, and the pipe's read end gives "ready\n" once it serves,
 * or end of file if it could not start.
 *
 * Waiting: our children are reaped with waitpid(WNOHANG); other processes
 * (a coprofd started by an earlier copcontrol) are looked at in
 * /proc/PID/stat, where a zombie counts as ended, since whoever inherited
 * it may not reap.  Between looks, a wait sleeps on the process's pidfd,
 * which wakes it as the process ends (without pidfds: 20 ms at a time),
 * so that coprof record's end does not wait out polling intervals.
 */
#include "control/daemons.h"
#include "common/copsim-socket.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PASSED_FD       3
#define READY_FD        4       /* coprofd's --ready-fd */
#define POLL_MS         20
#define ARGS_MAX        64
#define COPSIM_READY_MS 30000   /* a copsim that serves by then is ready */
#define EXIT_GRACE_MS   2000    /* for one that said no to end by itself */

int daemons_add_arg(struct daemon_args *extra, const char *arg, char *err,
                    size_t errlen)
{
    if (extra->n >= DAEMON_EXTRA_MAX) {
        snprintf(err, errlen, "--copsim-arg=%s: at most %d of them", arg,
                 DAEMON_EXTRA_MAX);
        return -1;
    }
    extra->args[extra->n++] = arg;
    return 0;
}

void daemons_find(const char *name, char *buf, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    const char *env = getenv("COPROF_COPSIM");

    if (strcmp(name, "copsim") == 0 && env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    if (n > 0) {
        char *slash;

        self[n] = '\0';
        slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(buf, len, "%s/%s", self, name);
            if (access(buf, X_OK) == 0)
                return;
        }
    }
    snprintf(buf, len, "%s", name);
}

/* In the child: fd as target, kept across the exec. */
static void inherit_as(int fd, int target)
{
    if (fd == target)
        fcntl(target, F_SETFD, 0);
    else
        dup2(fd, target);
}

/* In the child: descriptors, session, log; never returns. */
static void exec_daemon(const struct daemon_spec *spec, char *const argv[])
{
    int null = open("/dev/null", O_RDONLY);
    int pass = spec->pass_fd, ready = spec->ready_fd;

    if (spec->mode == DAEMON_DETACHED)
        setsid();
    else
        setpgid(0, 0);
    if (null >= 0 && null != STDIN_FILENO) {
        dup2(null, STDIN_FILENO);
        close(null);
    }
    if (spec->output_fd > 0) {
        dup2(spec->output_fd, STDOUT_FILENO);
        dup2(spec->output_fd, STDERR_FILENO);
        if (spec->output_fd > STDERR_FILENO && spec->output_fd != PASSED_FD)
            close(spec->output_fd);
    } else if (spec->log_path) {
        int log = open(spec->log_path, O_WRONLY | O_CREAT | O_TRUNC |
                       O_APPEND | O_NOFOLLOW, 0600);

        if (log >= 0) {
            dup2(log, STDOUT_FILENO);
            dup2(log, STDERR_FILENO);
            if (log > STDERR_FILENO)
                close(log);
        }
    }
    if (spec->ready_fd == PASSED_FD)       /* out of pass_fd's way */
        ready = fcntl(PASSED_FD, F_DUPFD_CLOEXEC, READY_FD + 1);
    if (spec->pass_fd == READY_FD && ready > 0)
        pass = fcntl(READY_FD, F_DUPFD_CLOEXEC, READY_FD + 1);
    if (pass >= 0)
        inherit_as(pass, PASSED_FD);
    if (ready > 0)
        inherit_as(ready, READY_FD);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[0], argv);
    fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

pid_t daemons_start(const struct daemon_spec *spec, char *const argv[],
                    char *err, size_t errlen)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0)
        exec_daemon(spec, argv);
    return pid;
}

/*
 * Why a daemon did not start: its log's last line; else how it ended
 * (status, or -1 when it had to be stopped), its own message, if it
 * wrote one, being on our standard error already.
 */
static void explain_failure(const char *what, const char *log_path,
                            int status, char *err, size_t errlen)
{
    char line[512];

    if (log_path && daemons_log_line(log_path, NULL, line,
                                     sizeof(line)) == 0) {
        snprintf(err, errlen, "%s did not start: %s", what, line);
        return;
    }
    if (status < 0)
        snprintf(line, sizeof(line), "did not say it was ready within "
                 "%d s", COPSIM_READY_MS / 1000);
    else
        daemons_describe_status(status, line, sizeof(line));
    snprintf(err, errlen, "%s did not start: it %s", what, line);
}

/* argv started with a new pipe's write end in *end (spec's pass_fd or
 * ready_fd); the read end, where it will say "ready", in *ready_fd. */
static pid_t start_with_ready_pipe(const struct daemon_spec *spec, int *end,
                                   char *const argv[], int *ready_fd,
                                   char *err, size_t errlen)
{
    int ready[2];
    pid_t pid;

    if (pipe2(ready, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    *end = ready[1];
    pid = daemons_start(spec, argv, err, errlen);
    close(ready[1]);
    if (pid < 0) {
        close(ready[0]);
        return -1;
    }
    *ready_fd = ready[0];
    return pid;
}

/* program (found by daemons_find) with args and --ready-fd, started; the
 * pipe's read end, where it will say "ready", in *ready_fd. */
static pid_t spawn_ready(const char *name, const struct daemon_spec *base,
                         const char *const *args, int *ready_fd, char *err,
                         size_t errlen)
{
    char program[PATH_MAX], ready_arg[16];
    char *argv[ARGS_MAX];
    struct daemon_spec spec = *base;
    int n = 0;

    daemons_find(name, program, sizeof(program));
    argv[n++] = program;
    for (; *args && n < ARGS_MAX - 3; args++)
        argv[n++] = (char *)*args;
    snprintf(ready_arg, sizeof(ready_arg), "--ready-fd=%d", PASSED_FD);
    argv[n++] = ready_arg;
    argv[n] = NULL;
    return start_with_ready_pipe(&spec, &spec.pass_fd, argv, ready_fd, err,
                                 errlen);
}

int daemons_wait_ready(pid_t pid, int ready_fd, const char *name,
                       const char *log_path, char *err, size_t errlen)
{
    char program[PATH_MAX];
    int status, rc = 0;

    if (copsim_wait_ready(ready_fd, COPSIM_READY_MS) < 0) {
        /* Ended, or hung before serving: never leave it behind. */
        if (daemons_wait(pid, EXIT_GRACE_MS, &status) < 0) {
            daemons_terminate(pid, EXIT_GRACE_MS);
            status = -1;
        }
        daemons_find(name, program, sizeof(program));
        explain_failure(program, log_path, status, err, errlen);
        rc = -1;
    }
    close(ready_fd);
    return rc;
}

/* spawn_ready(), waited for until it writes "ready\n" there. */
static pid_t start_ready(const char *name, const struct daemon_spec *base,
                         const char *const *args, char *err, size_t errlen)
{
    int ready_fd;
    pid_t pid = spawn_ready(name, base, args, &ready_fd, err, errlen);

    if (pid > 0 && daemons_wait_ready(pid, ready_fd, name, base->log_path,
                                      err, errlen) < 0)
        return -1;
    return pid;
}

pid_t daemons_start_copsim(const struct daemon_spec *base,
                           const char *const *args, char *err, size_t errlen)
{
    return start_ready("copsim", base, args, err, errlen);
}

pid_t daemons_start_host(const struct daemon_spec *base,
                         const char *const *args, char *err, size_t errlen)
{
    return start_ready("coprof-host", base, args, err, errlen);
}

pid_t daemons_spawn_host(const struct daemon_spec *base,
                         const char *const *args, int *ready_fd, char *err,
                         size_t errlen)
{
    return spawn_ready("coprof-host", base, args, ready_fd, err, errlen);
}

pid_t daemons_start_coprofd(const struct daemon_spec *spec,
                            const char *session_dir, const char *event_log,
                            int *ready_fd, char *err, size_t errlen)
{
    return daemons_start_coprofd_with(spec, session_dir, event_log, NULL,
                                      ready_fd, err, errlen);
}

pid_t daemons_start_coprofd_with(const struct daemon_spec *base,
                                 const char *session_dir,
                                 const char *event_log,
                                 const char *const *options, int *ready_fd,
                                 char *err, size_t errlen)
{
    char program[PATH_MAX], input[32], ready_arg[32];
    char *argv[ARGS_MAX];
    struct daemon_spec spec = *base;
    int n = 0;

    daemons_find("coprofd", program, sizeof(program));
    snprintf(input, sizeof(input), "--input-fd=%d", PASSED_FD);
    snprintf(ready_arg, sizeof(ready_arg), "--ready-fd=%d", READY_FD);
    argv[n++] = program;
    argv[n++] = input;
    argv[n++] = ready_arg;
    argv[n++] = "--session-dir";
    argv[n++] = (char *)session_dir;
    if (event_log && *event_log) {
        argv[n++] = "--event-log";
        argv[n++] = (char *)event_log;
    }
    for (; options && *options && n < ARGS_MAX - 1; options++)
        argv[n++] = (char *)*options;
    argv[n] = NULL;
    return start_with_ready_pipe(&spec, &spec.ready_fd, argv, ready_fd, err,
                                 errlen);
}

int daemons_alive(pid_t pid)
{
    char path[64], buf[512], *paren;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    f = fopen(path, "r");
    if (!f)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

int daemons_exit_status(int wait_status)
{
    if (WIFSIGNALED(wait_status))
        return 128 + WTERMSIG(wait_status);
    return WEXITSTATUS(wait_status);
}

void daemons_describe_status(int status, char *buf, size_t len)
{
    if (status > 128 && status < 128 + NSIG)
        snprintf(buf, len, "was killed by signal %d (%s)", status - 128,
                 strsignal(status - 128));
    else
        snprintf(buf, len, "exited with status %d", status);
}

static uint64_t now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

int daemons_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Up to ms for pid to end: on its pidfd, which is readable from its end
 * on (a kernel without pidfds: POLL_MS at most). */
static void pause_for(pid_t pid, int *pidfd, int ms)
{
    struct pollfd p = {*pidfd, POLLIN, 0};
    struct timespec t;

    if (*pidfd == -2)
        *pidfd = p.fd = daemons_pidfd(pid);
    if (p.fd >= 0) {
        poll(&p, 1, ms);
        return;
    }
    ms = ms < POLL_MS ? ms : POLL_MS;
    t.tv_sec = 0;
    t.tv_nsec = (long)ms * 1000000L;
    nanosleep(&t, NULL);
}

/* Whether pid ended: reaped (our child), or gone or a zombie (another's). */
static int ended(pid_t pid, int *status)
{
    int wstatus;
    pid_t got = waitpid(pid, &wstatus, WNOHANG);

    if (got == pid) {
        if (status)
            *status = daemons_exit_status(wstatus);
        return 1;
    }
    if (got < 0 && errno == ECHILD && !daemons_alive(pid)) {
        if (status)
            *status = 0;
        return 1;
    }
    return 0;
}

int daemons_wait(pid_t pid, int timeout_ms, int *status)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms :
                                              0);
    int pidfd = -2, rc = -1;

    for (;;) {
        uint64_t now;

        if (ended(pid, status)) {
            rc = 0;
            break;
        }
        if ((now = now_ms()) >= deadline)
            break;
        pause_for(pid, &pidfd, (int)(deadline - now));
    }
    if (pidfd >= 0)
        close(pidfd);
    return rc;
}

int daemons_terminate(pid_t pid, int timeout_ms)
{
    if (kill(pid, SIGTERM) < 0 && errno == ESRCH) {
        daemons_wait(pid, 0, NULL);
        return 0;
    }
    if (daemons_wait(pid, timeout_ms, NULL) == 0)
        return 0;
    kill(pid, SIGKILL);
    daemons_wait(pid, timeout_ms, NULL);
    return -1;
}

int daemons_log_line(const char *log_path, const char *prefix, char *buf,
                     size_t len)
{
    FILE *f = fopen(log_path, "r");
    char line[1024];
    int found = -1;

    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || (prefix && strncmp(line, prefix,
                                           strlen(prefix)) != 0))
            continue;
        snprintf(buf, len, "%s", line);
        found = 0;
    }
    fclose(f);
    return found;
}
