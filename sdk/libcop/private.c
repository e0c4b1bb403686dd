/*
 * private.c — libcop's connections to copsim, and the private copsim.
 *
 * A connection goes to the shared copsim on the default socket
 * (copsim_socket_path), once copsim_connect_checked() made sure that this
 * user's copsim serves it: a socket of another user's is an error, never a
 * reason to go elsewhere.  When nothing listens there (no socket file, or
 * a stale one), libcop starts a copsim of its own, once per process, the
 * embedded default:
 *
 *     copsim --private PID --socket DIR/copsim.sock --state-dir DIR
 *            --ready-fd 3
 *
 * in a fresh directory DIR under $TMPDIR, and waits for "ready" on the
 * pipe given as descriptor 3 (end of file instead means copsim could not
 * start; it said why on standard error).  The private copsim ends when this
 * process does: libcop stops it with SIGTERM from an atexit handler, and
 * copsim itself watches this process (--private) in case exit handlers
 * never run, removing DIR as it goes.  libcop removes DIR and whatever is
 * left in it whenever it stops or fails to start a private copsim, so a
 * copsim that died half-way leaves nothing behind.
 *
 * Under a profiling session there is no private copsim: contexts on it
 * would run unprofiled while the user believes they are profiled.  A
 * session is $COPROF_SESSION (coprof record and copsim's one-command mode
 * set it for their command) or
 * copcontrol's session mark in the socket's directory
 * (COPROF_SESSION_MARK of abi/state-dir.h, copcontrol's coprofd.pid, there from --start to
 * --stop).  Then a copsim that does not answer, or hangs up, is an error
 * the host program sees (errno set, cop_last_error) and that libcop also
 * prints, as one line on standard error.
 *
 * copsim is $COPROF_COPSIM, else found beside libcop itself (../bin/copsim
 * in the build tree, ../../bin/copsim when installed in lib/coprof), else
 * in PATH.
 */
#include "sdk/libcop/libcop-int.h"
#include "sdk/libcop.h"

#include "abi/state-dir.h"
#include "common/copsim-socket.h"
#include "common/safe-file.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define READY_FD 3
#define SOCKET_DIR_MAX 64

static pthread_mutex_t private_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t private_pid;
static char private_dir[PATH_MAX - 32];
static char private_socket[PATH_MAX];

static int is_executable(const char *path)
{
    return access(path, X_OK) == 0;
}

/* The copsim program to start. */
static void find_copsim(char *buf, size_t len)
{
    static const char *const beside[] = {"../bin/copsim", "../../bin/copsim"};
    const char *env = getenv("COPROF_COPSIM");
    Dl_info info;

    if (env && *env) {
        snprintf(buf, len, "%s", env);
        return;
    }
    if (dladdr((void *)libcop_connect, &info) && info.dli_fname
        && strchr(info.dli_fname, '/')) {
        char dir[PATH_MAX - 32];
        char *slash;

        snprintf(dir, sizeof(dir), "%s", info.dli_fname);
        slash = strrchr(dir, '/');
        *slash = '\0';
        for (size_t i = 0; i < sizeof(beside) / sizeof(beside[0]); i++) {
            snprintf(buf, len, "%s/%s", dir, beside[i]);
            if (is_executable(buf))
                return;
        }
    }
    snprintf(buf, len, "copsim");
}

static void stop_private(void)
{
    pid_t pid;

    pthread_mutex_lock(&private_lock);
    pid = private_pid;
    private_pid = -1;
    pthread_mutex_unlock(&private_lock);
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    safe_remove_tree(private_dir);  /* what copsim did not remove */
}

/*
 * The spawn attributes of the private copsim: no signal blocked and the
 * ending signals at their default action, whatever the host program did
 * to its own (a host that blocks SIGTERM for a thread that waits for it,
 * as examples/host-pipeline does, would hand the block down through the
 * exec, and stop_private()'s SIGTERM would never reach copsim).
 */
static int copsim_spawn_attr(posix_spawnattr_t *attr)
{
    sigset_t none, ending;
    int error = posix_spawnattr_init(attr);

    if (error)
        return error;
    sigemptyset(&none);
    sigemptyset(&ending);
    sigaddset(&ending, SIGTERM);
    sigaddset(&ending, SIGINT);
    sigaddset(&ending, SIGHUP);
    sigaddset(&ending, SIGQUIT);
    error = posix_spawnattr_setsigmask(attr, &none);
    if (!error)
        error = posix_spawnattr_setsigdefault(attr, &ending);
    if (!error)
        error = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK |
                                               POSIX_SPAWN_SETSIGDEF);
    if (error)
        posix_spawnattr_destroy(attr);
    return error;
}

/* Spawns copsim with the write end of the ready pipe as READY_FD. */
static int spawn_copsim(const char *program, int ready_write, pid_t *pid)
{
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    char parent[32], socket_arg[PATH_MAX], ready[16];
    char *argv[] = {
        (char *)program, "--private", parent, "--socket", socket_arg,
        "--state-dir", private_dir, "--ready-fd", ready, NULL,
    };
    int error;

    snprintf(parent, sizeof(parent), "%ld", (long)getpid());
    snprintf(socket_arg, sizeof(socket_arg), "%s", private_socket);
    snprintf(ready, sizeof(ready), "%d", READY_FD);
    if ((error = copsim_spawn_attr(&attr)) != 0)
        return error;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, ready_write, READY_FD);
    error = posix_spawnp(pid, program, &actions, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return error;
}

/* Starts the private copsim; with private_lock held. */
static int start_private(void)
{
    static int registered;
    const char *tmp = getenv("TMPDIR");
    char program[PATH_MAX];
    int ready[2], error, status;
    pid_t pid;

    find_copsim(program, sizeof(program));
    if (!tmp || !*tmp || strlen(tmp) > SOCKET_DIR_MAX)
        tmp = "/tmp";       /* a socket path holds about 100 bytes */
    snprintf(private_dir, sizeof(private_dir), "%s/copsim-private-XXXXXX",
             tmp);
    if (!mkdtemp(private_dir))
        return libcop_fail("%s: cannot create a directory for a private "
                           "copsim: %s", private_dir, strerror(errno));
    snprintf(private_socket, sizeof(private_socket), "%s/copsim.sock",
             private_dir);
    if (pipe2(ready, O_CLOEXEC) < 0) {
        safe_remove_tree(private_dir);
        return libcop_fail("pipe: %s", strerror(errno));
    }
    error = spawn_copsim(program, ready[1], &pid);
    close(ready[1]);
    if (error) {
        close(ready[0]);
        safe_remove_tree(private_dir);
        return libcop_fail("%s: cannot start a private copsim: %s", program,
                           strerror(error));
    }
    if (copsim_wait_ready(ready[0], -1) < 0) {
        close(ready[0]);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        safe_remove_tree(private_dir);  /* what a dead copsim left */
        return libcop_fail("%s: the private copsim did not start (its "
                           "reason is on standard error)", program);
    }
    close(ready[0]);
    private_pid = pid;
    if (!registered && atexit(stop_private) == 0)
        registered = 1;
    return 0;
}

/*
 * Whether the copsim on socket_path is a profiling session's; why says
 * whose.  The session mark counts only in a directory of this user's.
 */
static int profiling_session(const char *socket_path, char *why, size_t len)
{
    const char *session = getenv(COPROF_SESSION_ENV), *name;
    char err[COPSIM_TEXT_MAX];
    int dirfd, marked, dir_len;

    if (session && *session) {
        snprintf(why, len, "$%s is %s", COPROF_SESSION_ENV, session);
        return 1;
    }
    dirfd = safe_dir_of(socket_path, 0, &name, err, sizeof(err));
    if (dirfd < 0)
        return 0;
    marked = faccessat(dirfd, COPROF_SESSION_MARK, F_OK,
                       AT_SYMLINK_NOFOLLOW) == 0;
    close(dirfd);
    dir_len = (int)(name - socket_path) - 1;     /* -1: no slash */
    if (marked)
        snprintf(why, len, "copcontrol's session: %.*s/%s exists",
                 dir_len < 0 ? 1 : dir_len, dir_len < 0 ? "." : socket_path,
                 COPROF_SESSION_MARK);
    return marked;
}

int libcop_copsim_gone(const char *socket_path, int error)
{
    char why[PATH_MAX + 64];

    if (!profiling_session(socket_path, why, sizeof(why)))
        return 0;
    libcop_fail("%s: the profiling session's copsim is gone (%s): %s; no "
                "context runs unprofiled", socket_path, why,
                strerror(error));
    fprintf(stderr, "libcop: %s\n", cop_last_error());
    errno = error;
    return -1;
}

/* The shared copsim on path; -1 with errno ENOENT or ECONNREFUSED when
 * none answers and a private one may be started, else -1 with the error
 * set. */
static int connect_shared(const char *path)
{
    char err[COPSIM_TEXT_MAX];
    int sock = copsim_connect_checked(path, err, sizeof(err)), error;

    if (sock >= 0)
        return sock;
    error = errno;
    if (error != ENOENT && error != ECONNREFUSED) {
        libcop_fail("%s", err);
        errno = error;
        return -2;
    }
    if (libcop_copsim_gone(path, error) < 0)
        return -2;
    errno = error;
    return -1;
}

int libcop_connect(void)
{
    char path[PATH_MAX];
    int sock, status = 0;

    pthread_mutex_lock(&private_lock);
    if (private_pid == 0) {
        if (copsim_socket_path(path, sizeof(path)) < 0) {
            pthread_mutex_unlock(&private_lock);
            return libcop_fail("the copsim socket path is too long");
        }
        sock = connect_shared(path);
        if (sock != -1) {
            pthread_mutex_unlock(&private_lock);
            return sock < 0 ? -1 : sock;
        }
        status = start_private();
    }
    if (private_pid < 0)
        status = libcop_fail("the private copsim has been stopped (the "
                             "process is exiting)");
    snprintf(path, sizeof(path), "%s", private_socket);
    pthread_mutex_unlock(&private_lock);
    if (status < 0)
        return -1;
    sock = copsim_connect(path);
    if (sock < 0)
        return libcop_fail("%s: cannot connect to the private copsim: %s",
                           path, strerror(errno));
    return sock;
}
