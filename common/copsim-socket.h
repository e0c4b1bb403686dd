/*
 * copsim-socket.h — the transport of copsim's protocol
 * (abi/copsim-protocol.h): where the shared copsim's socket is, connecting
 * to it with the checks that it is this user's, and sending and receiving
 * one message with its descriptors.  copsim (the server), libcop and
 * copcontrol and coprof (the clients) link the one implementation,
 * copsim-socket.c.
 */
#ifndef COPROF_COMMON_COPSIM_SOCKET_H
#define COPROF_COMMON_COPSIM_SOCKET_H

#include "abi/copsim-protocol.h"

#include <stddef.h>

/* A message as received: its bytes and the descriptors that came with it. */
struct copsim_message {
    union {
        struct copsim_header header;
        unsigned char bytes[COPSIM_MESSAGE_MAX];
    } u;
    size_t size;
    int fds[COPSIM_FDS_MAX];
    unsigned n_fds;
};

/*
 * The socket of the shared copsim: $COPSIM_SOCKET if set, else
 * $XDG_RUNTIME_DIR/coprof/copsim.sock, else /tmp/coprof-UID/copsim.sock.
 * Returns 0, or -1 when the path does not fit in len.
 */
int copsim_socket_path(char *buf, size_t len);

/*
 * Connects a SOCK_SEQPACKET socket (close-on-exec) to copsim's socket at
 * path, and makes sure it reached this user's copsim before anything is
 * sent: the socket's directory must be this user's (or root's), a real
 * directory writable by nobody else (safe_dir_open), and the server's
 * SO_PEERCRED uid this user's or root's.  Returns the socket, or -1 with
 * errno (ENOENT or ECONNREFUSED: no copsim there; EACCES: the directory or
 * the server is another user's; ENAMETOOLONG: path does not fit a socket
 * address) and one line in err naming the thing and the reason.
 */
int copsim_connect_checked(const char *path, char *err, size_t errlen);

/* copsim_connect_checked() without the line. */
int copsim_connect(const char *path);

/*
 * Waits until a copsim started with --ready-fd writes "ready\n" on the pipe
 * whose reading end is fd, for at most timeout_ms (-1: no limit).  Returns
 * 0, or -1 when copsim wrote anything else, closed the pipe (it ended) or
 * the time ran out.
 */
int copsim_wait_ready(int fd, int timeout_ms);

/*
 * copsim_wait_ready() for another word: waits until the pipe's writer
 * writes `word` and a newline (coprof-host's "stored").
 */
int copsim_wait_word(int fd, const char *word, int timeout_ms);

/* Fills a header for a message of `size` bytes. */
void copsim_header_init(struct copsim_header *header, unsigned type,
                        size_t size);

/* Sets a status: error 0 for success, else errno and a formatted line. */
void copsim_status_set(struct copsim_status *status, int error,
                       const char *format, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Sends one message of header->size bytes with n_fds descriptors (never
 * raising SIGPIPE).  Returns 0, or -1 with errno.
 */
int copsim_send(int sock, const struct copsim_header *header,
                const int *fds, unsigned n_fds);

/*
 * Receives one message.  Returns 1 with *message filled, 0 at end of file
 * (the peer closed), -1 with errno (EPROTO: a malformed message, whose
 * descriptors are closed).
 */
int copsim_receive(int sock, struct copsim_message *message);

/* Closes the descriptors of a received message that nobody took. */
void copsim_message_close_fds(struct copsim_message *message);

#endif /* COPROF_COMMON_COPSIM_SOCKET_H */
