/*
 * libcop-int.h — what libcop's two files share: the calling thread's last
 * error, and a connection to copsim (private.c starts one when needed).
 */
#ifndef COPROF_LIBCOP_INT_H
#define COPROF_LIBCOP_INT_H

/* Sets the calling thread's error (cop_last_error) and returns -1. */
int libcop_fail(const char *format, ...) __attribute__((format(printf, 1, 2)));

/*
 * A new connection to copsim: the shared one on the default socket when it
 * answers, else this process's private copsim, started on first need and
 * stopped at exit.  Returns the socket, or -1 with the error set.
 */
int libcop_connect(void);

#endif /* COPROF_LIBCOP_INT_H */
