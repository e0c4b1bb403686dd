/*
 * private.c — libcop's connections to copsim, and the private copsim.
 *
 * A connection goes to the shared copsim on the default socket
 * (copsim_socket_path).  When nothing listens there (no socket file, or a
 * stale one), libcop starts a copsim of its own, once per process, the
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
 * never run, removing DIR as it goes.
 *
 * copsim is $COPROF_COPSIM, else found beside libcop itself (../bin/copsim
 * in the build tree, ../../bin/copsim when installed in lib/coprof), else
 * in PATH.
 */
#include "sdk/libcop/libcop-int.h"

#include "emulator/copsim/protocol.h"

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
    rmdir(private_dir);     /* copsim removed what it put there */
}

/* Spawns copsim with the write end of the ready pipe as READY_FD. */
static int spawn_copsim(const char *program, int ready_write, pid_t *pid)
{
    posix_spawn_file_actions_t actions;
    char parent[32], socket_arg[PATH_MAX], ready[16];
    char *argv[] = {
        (char *)program, "--private", parent, "--socket", socket_arg,
        "--state-dir", private_dir, "--ready-fd", ready, NULL,
    };
    int error;

    snprintf(parent, sizeof(parent), "%ld", (long)getpid());
    snprintf(socket_arg, sizeof(socket_arg), "%s", private_socket);
    snprintf(ready, sizeof(ready), "%d", READY_FD);
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, ready_write, READY_FD);
    error = posix_spawnp(pid, program, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
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
        rmdir(private_dir);
        return libcop_fail("pipe: %s", strerror(errno));
    }
    error = spawn_copsim(program, ready[1], &pid);
    close(ready[1]);
    if (error) {
        close(ready[0]);
        rmdir(private_dir);
        return libcop_fail("%s: cannot start a private copsim: %s", program,
                           strerror(error));
    }
    if (copsim_wait_ready(ready[0], -1) < 0) {
        close(ready[0]);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        rmdir(private_dir);
        return libcop_fail("%s: the private copsim did not start (its "
                           "reason is on standard error)", program);
    }
    close(ready[0]);
    private_pid = pid;
    if (!registered && atexit(stop_private) == 0)
        registered = 1;
    return 0;
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
        sock = copsim_connect(path);
        if (sock >= 0 || (errno != ENOENT && errno != ECONNREFUSED)) {
            pthread_mutex_unlock(&private_lock);
            if (sock < 0)
                return libcop_fail("%s: cannot connect to copsim: %s", path,
                                   strerror(errno));
            return sock;
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
