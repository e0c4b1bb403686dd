/*
 * libcop-int.h — what libcop's two files share: the calling thread's last
 * error, and a connection to copsim (private.c starts one when needed).
 */
#ifndef COPROF_LIBCOP_INT_H
#define COPROF_LIBCOP_INT_H

/* Set (not empty) for a profiled program: coprof record sets it to the
 * session directory, copsim's one-command mode to its socket. */
#define COPROF_SESSION_ENV "COPROF_SESSION"

/* Sets the calling thread's error (cop_last_error) and returns -1; errno
 * is left as it was. */
int libcop_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/*
 * A new connection to copsim: the shared one on the default socket when it
 * answers, else this process's private copsim, started on first need and
 * stopped at exit.  Returns the socket, or -1 with the error set.
 */
int libcop_connect(void);

/*
 * copsim on socket_path did not answer or hung up with error (an errno
 * value).  Under a profiling session that is an error of its own: sets it,
 * prints it as one line on standard error, sets errno and returns -1.
 * Otherwise returns 0.
 */
int libcop_copsim_gone(const char *socket_path, int error);

/* The context's mailbox block, the last page of its mapped data window
 * (mailbox.c). */
struct cop_context;
volatile struct cop_mbox *libcop_mailbox(struct cop_context *ctx);

#endif /* COPROF_LIBCOP_INT_H */
