/*
 * qemu.c — the QEMU command line for one coprocessor, and running it.
 *
 * cop_qemu_command() appends the fixed part of the command (machine, RAM
 * file, CPU without compressed instructions, no firmware, the UART console)
 * to a struct cop_argv, a NULL-terminated vector that callers extend with
 * their own arguments before spawning it.
 *
 * cop_qemu_spawn() forks and execs with a close-on-exec pipe to learn
 * whether exec failed (and why), so that a missing QEMU is reported by the
 * caller as one line naming the Debian package rather than by the child.
 */
#include "common/loader.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

void cop_argv_init(struct cop_argv *v)
{
    v->argv = NULL;
    v->argc = 0;
    v->capacity = 0;
}

/* Makes room for one more argument and the NULL after it. */
static int argv_reserve(struct cop_argv *v)
{
    if (v->argc + 2 <= v->capacity)
        return 0;
    size_t capacity = v->capacity ? 2 * v->capacity : 32;
    char **grown = realloc(v->argv, capacity * sizeof(*grown));
    if (!grown)
        return -1;
    v->argv = grown;
    v->capacity = capacity;
    return 0;
}

int cop_argv_add(struct cop_argv *v, const char *arg)
{
    char *copy;

    if (argv_reserve(v) < 0 || !(copy = strdup(arg)))
        return -1;
    v->argv[v->argc++] = copy;
    v->argv[v->argc] = NULL;
    return 0;
}

int cop_argv_addf(struct cop_argv *v, const char *format, ...)
{
    va_list args;
    char *arg;
    int n;

    va_start(args, format);
    n = vasprintf(&arg, format, args);
    va_end(args);
    if (n < 0)
        return -1;
    n = cop_argv_add(v, arg);
    free(arg);
    return n;
}

void cop_argv_free(struct cop_argv *v)
{
    for (size_t i = 0; i < v->argc; i++)
        free(v->argv[i]);
    free(v->argv);
    cop_argv_init(v);
}

int cop_qemu_command(struct cop_argv *v,
                     const struct cop_qemu_options *options)
{
    const char *program = options->program ? options->program
                                            : COP_QEMU_PROGRAM;
    const char *console = options->console ? options->console
                                           : COP_QEMU_CONSOLE;
    unsigned ram_mib = COP_RAM_SIZE >> 20;
    int failed = 0;

    failed |= cop_argv_add(v, program);
    failed |= cop_argv_add(v, "-M");
    failed |= cop_argv_add(v, "virt,memory-backend=cop-ram");
    failed |= cop_argv_add(v, "-m");
    failed |= cop_argv_addf(v, "%uM", ram_mib);
    failed |= cop_argv_add(v, "-object");
    failed |= cop_argv_addf(v, "memory-backend-file,id=cop-ram,size=%uM,"
                            "mem-path=%s,share=on", ram_mib, options->ram_path);
    failed |= cop_argv_add(v, "-cpu");
    failed |= cop_argv_add(v, "rv32,c=off");
    failed |= cop_argv_add(v, "-bios");
    failed |= cop_argv_add(v, "none");
    failed |= cop_argv_add(v, "-nodefaults");
    failed |= cop_argv_add(v, "-no-reboot");
    failed |= cop_argv_add(v, "-display");
    failed |= cop_argv_add(v, "none");
    failed |= cop_argv_add(v, "-chardev");
    failed |= cop_argv_addf(v, "%s,id=cop-console", console);
    failed |= cop_argv_add(v, "-serial");
    failed |= cop_argv_add(v, "chardev:cop-console");
    return failed ? -1 : 0;
}

/* In the child: set up stdin/stdout/stderr, then exec; reports errno on
 * failure. */
static void exec_child(const struct cop_argv *command, int input_fd,
                       int console_fd, int error_fd, int report_fd,
                       pid_t parent)
{
    int null_fd = input_fd >= 0 ? input_fd : open("/dev/null", O_RDONLY);
    sigset_t no_signals;
    int error;

    /* QEMU starts with default signals, whatever the caller's thread
     * blocked or ignored (copsim's threads block SIGPIPE). */
    sigemptyset(&no_signals);
    sigprocmask(SIG_SETMASK, &no_signals, NULL);
    signal(SIGPIPE, SIG_DFL);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(127);
    if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 ||
        (console_fd >= 0 && dup2(console_fd, STDOUT_FILENO) < 0) ||
        (error_fd >= 0 && dup2(error_fd, STDERR_FILENO) < 0)) {
        error = errno;
    } else {
        execvp(command->argv[0], command->argv);
        error = errno;
    }
    if (write(report_fd, &error, sizeof(error)) < 0)
        _exit(127);
    _exit(127);
}

int cop_qemu_spawn(const struct cop_argv *command, int console_fd, pid_t *pid,
                   struct cop_error *err)
{
    return cop_qemu_spawn_io(command, console_fd, -1, pid, err);
}

int cop_qemu_spawn_io(const struct cop_argv *command, int console_fd,
                      int error_fd, pid_t *pid, struct cop_error *err)
{
    return cop_qemu_spawn_fds(command, -1, console_fd, error_fd, pid, err);
}

int cop_qemu_spawn_fds(const struct cop_argv *command, int input_fd,
                       int console_fd, int error_fd, pid_t *pid,
                       struct cop_error *err)
{
    int report[2], error = 0;
    pid_t parent = getpid();
    ssize_t n;

    if (command->argc == 0) {
        cop_error_set(err, "empty QEMU command");
        errno = EINVAL;
        return -1;
    }
    if (pipe2(report, O_CLOEXEC) < 0) {
        cop_error_set(err, "pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    *pid = fork();
    if (*pid < 0) {
        error = errno;
        cop_error_set(err, "fork: %s", strerror(error));
        close(report[0]);
        close(report[1]);
        errno = error;
        return -1;
    }
    if (*pid == 0)
        exec_child(command, input_fd, console_fd, error_fd, report[1],
                   parent);
    close(report[1]);
    do {
        n = read(report[0], &error, sizeof(error));
    } while (n < 0 && errno == EINTR);
    close(report[0]);
    if (n <= 0)
        return 0;
    waitpid(*pid, NULL, 0);
    if (error == ENOENT)
        cop_error_set(err, "%s: not found (install the Debian package %s)",
                      command->argv[0], COP_QEMU_PACKAGE);
    else
        cop_error_set(err, "%s: cannot run: %s", command->argv[0],
                      strerror(error));
    errno = error;
    return -1;
}

int cop_qemu_wait(pid_t pid, int *status, struct cop_error *err)
{
    int wstatus;

    while (waitpid(pid, &wstatus, 0) < 0) {
        if (errno != EINTR) {
            cop_error_set(err, "waitpid: %s", strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(wstatus)) {
        *status = WEXITSTATUS(wstatus);
        return 0;
    }
    *status = 128 + WTERMSIG(wstatus);
    cop_error_set(err, "QEMU killed by signal %d (%s)", WTERMSIG(wstatus),
                  strsignal(WTERMSIG(wstatus)));
    return 1;
}
