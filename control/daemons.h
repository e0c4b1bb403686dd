/*
 * daemons.h — starting copsim and coprofd, and waiting for processes.
 *
 * The programs are found beside the running one (build/bin/ or PREFIX/bin),
 * else in PATH; $COPROF_COPSIM names another copsim (as for libcop).
 * A daemon is started by fork and exec with its standard output and error
 * in a log file (or inherited), standard input from /dev/null, and either
 * detached (setsid: it outlives copcontrol and no terminal signal reaches
 * it) or in a process group of its own (coprof record: ^C goes to the
 * command, not to the daemons).  copsim is waited for on --ready-fd until
 * it serves, coprof-host until it records and coprofd until its session
 * exists.  Functions that can fail return -1 with one line in err.
 */
#ifndef COPROF_CONTROL_DAEMONS_H
#define COPROF_CONTROL_DAEMONS_H

#include <stddef.h>
#include <sys/types.h>

enum daemon_mode {
    DAEMON_DETACHED,        /* setsid */
    DAEMON_GROUP,           /* own process group, still our child */
};

struct daemon_spec {
    enum daemon_mode mode;
    const char *log_path;   /* NULL: inherit stdout and stderr */
    int pass_fd;            /* -1, or a descriptor the daemon gets as 3 */
    int output_fd;          /* 0, or where stdout and stderr go instead of
                               log_path (a pipe's write end) */
    int ready_fd;           /* 0, or a pipe's write end the daemon gets as
                               4, to say "ready" on (coprofd) */
};

/* Arguments passed to copsim as they are (--copsim-arg, repeatable). */
#define DAEMON_EXTRA_MAX    32
struct daemon_args {
    const char *args[DAEMON_EXTRA_MAX];
    int n;
};

/* Adds one; -1 with one line in err when there are too many. */
int daemons_add_arg(struct daemon_args *extra, const char *arg, char *err,
                    size_t errlen);

/* Where program NAME is: beside this program, else just NAME (PATH). */
void daemons_find(const char *name, char *buf, size_t len);

/* argv (argv[0] found in PATH) as a daemon; its pid, or -1 with err. */
pid_t daemons_start(const struct daemon_spec *spec, char *const argv[],
                    char *err, size_t errlen);

/*
 * copsim with the given arguments (argv[0] is set here; args ends with
 * NULL) and --ready-fd 3; returns its pid once it wrote "ready", or -1
 * with why in err: its log's last line, or (its output inherited, where
 * its own message went) how it ended.
 */
pid_t daemons_start_copsim(const struct daemon_spec *spec,
                           const char *const *args, char *err,
                           size_t errlen);

/* coprof-host (hostprof/) with args, waited for as copsim is. */
pid_t daemons_start_host(const struct daemon_spec *spec,
                         const char *const *args, char *err, size_t errlen);

/*
 * coprof-host started and not waited for: it prepares its recording
 * while the caller does something else (coprof record boots copsim), and
 * daemons_wait_ready(pid, *ready_fd, "coprof-host", NULL, ...) then waits
 * for its "ready".
 */
pid_t daemons_spawn_host(const struct daemon_spec *spec,
                         const char *const *args, int *ready_fd, char *err,
                         size_t errlen);

/* Waits for "ready" on ready_fd (closed here) from program name (pid);
 * 0, or -1 with why in err, the program then ended or stopped. */
int daemons_wait_ready(pid_t pid, int ready_fd, const char *name,
                       const char *log_path, char *err, size_t errlen);

/* A pidfd of pid (readable once it ended), or -1 (errno). */
int daemons_pidfd(pid_t pid);

/*
 * coprofd --input-fd 3 --session-dir DIR [--event-log LOG] --ready-fd 4,
 * started and not waited for: *ready_fd is the pipe's read end where it
 * says "ready" once its session exists (daemons_wait_ready(pid,
 * *ready_fd, "coprofd", ...)), so that the caller can note its pid first.
 */
pid_t daemons_start_coprofd(const struct daemon_spec *spec,
                            const char *session_dir, const char *event_log,
                            int *ready_fd, char *err, size_t errlen);

/* daemons_start_coprofd() with more of coprofd's options (NULL-ended). */
pid_t daemons_start_coprofd_with(const struct daemon_spec *spec,
                                 const char *session_dir,
                                 const char *event_log,
                                 const char *const *options, int *ready_fd,
                                 char *err, size_t errlen);

/* Whether pid runs (a zombie does not). */
int daemons_alive(pid_t pid);

/*
 * Waits up to timeout_ms for pid to end; a child of ours is reaped and its
 * status (as command_status: 128 + signal when killed) put in *status.
 * Returns 0 when it ended, -1 on time-out.
 */
int daemons_wait(pid_t pid, int timeout_ms, int *status);

/* Sends SIGTERM and waits; SIGKILL after timeout_ms.  0, or -1 if killed. */
int daemons_terminate(pid_t pid, int timeout_ms);

/* The last line of a log that starts with prefix (or any, prefix NULL). */
int daemons_log_line(const char *log_path, const char *prefix, char *buf,
                     size_t len);

/* An exit status as a shell gives it: 128 + signal when killed. */
int daemons_exit_status(int wait_status);

/* What such a status says, for a message: "was killed by signal 9
 * (Killed)", "exited with status 1". */
void daemons_describe_status(int status, char *buf, size_t len);

#endif
