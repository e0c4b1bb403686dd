/*
 * protocol.h — the messages between libcop (a host program) and copsim, on
 * copsim's UNIX socket.
 *
 * The socket is SOCK_SEQPACKET, so every send is one message and message
 * boundaries survive.  A message is one of the structures below, starting
 * with a struct copsim_header; file descriptors travel beside it as
 * SCM_RIGHTS ancillary data.  One connection holds at most one context (the
 * way one spufs directory is one SPU context): CREATE makes it, LOAD and RUN
 * act on it, DESTROY or closing the connection ends it.  A request gets
 * exactly one reply, a struct of the request's type with the REPLY bit set
 * whose status says whether it worked.
 *
 * The client's pid and uid come from SO_PEERCRED, never from a message: the
 * tids in requests only name threads of that pid, and copsim checks that
 * they do.
 *
 * Extending: types 0x100-0x1ff are reserved for the kernel driver's control
 * interface (LFSR value, poll interval, buffer, start, stop, statistics,
 * the stream), which registers its handlers with the server.  Every field
 * has a fixed width; a new field goes at the end of its structure and
 * raises COPSIM_PROTOCOL_VERSION.  README.md describes each message.
 */
#ifndef COPROF_COPSIM_PROTOCOL_H
#define COPROF_COPSIM_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define COPSIM_PROTOCOL_VERSION 1
#define COPSIM_MESSAGE_MAX      16384
#define COPSIM_TEXT_MAX         512     /* error messages, fault reasons */
#define COPSIM_PATH_MAX         4096
#define COPSIM_NAME_MAX         64
#define COPSIM_STACK_MAX        32      /* return addresses of a call stack */
#define COPSIM_ARGS_MAX         3968    /* argv strings (the boot block) */
#define COPSIM_FDS_MAX          2

/* Message types. */
#define COPSIM_INFO             1u
#define COPSIM_CREATE           2u
#define COPSIM_LOAD             3u
#define COPSIM_RUN              4u
#define COPSIM_DESTROY          5u
#define COPSIM_DRIVER_FIRST     0x100u  /* reserved for the driver */
#define COPSIM_DRIVER_LAST      0x1ffu
#define COPSIM_REPLY            0x8000u /* or-ed into the type of a reply */

/* How a run ended. */
#define COPSIM_STOP_EXIT        1u      /* the program exited: see status */
#define COPSIM_STOP_FAULT       2u      /* trap, runtime error, emulator
                                           death or cycle limit: see detail */

struct copsim_header {
    uint16_t version;           /* COPSIM_PROTOCOL_VERSION */
    uint16_t type;
    uint32_t size;              /* bytes of the whole message */
};

/* The start of every reply. */
struct copsim_status {
    int32_t error;              /* 0, or an errno value */
    char message[COPSIM_TEXT_MAX];  /* one line naming the thing and why */
};

/* INFO: no payload.  Reply: */
struct copsim_info_reply {
    struct copsim_header header;
    struct copsim_status status;
    int32_t pid;                /* copsim's */
    uint32_t n_slots;
    uint32_t n_contexts;
    uint32_t fifo_depth;
    uint64_t slice_cycles;
    uint64_t max_cycles;
    uint64_t nominal_hz;
    char regs_path[COPSIM_PATH_MAX];
    char event_log_path[COPSIM_PATH_MAX];
};

/* CREATE: the calling thread and its call stack (innermost first). */
struct copsim_create_request {
    struct copsim_header header;
    int32_t tid;
    uint32_t n_frames;
    uint64_t frames[COPSIM_STACK_MAX];
};

/* Reply, with the context's guest RAM file as one descriptor. */
struct copsim_create_reply {
    struct copsim_header header;
    struct copsim_status status;
    uint64_t context_id;
    uint64_t data_offset;       /* of the data window in the RAM file */
    uint64_t data_size;
};

/* LOAD: an image at object_id in the client's address space. */
struct copsim_load_request {
    struct copsim_header header;
    int32_t tid;
    uint32_t reserved;
    uint64_t object_id;         /* address of the ELF header */
    uint64_t image_size;        /* bytes claimed by the handle */
};

struct copsim_load_reply {
    struct copsim_header header;
    struct copsim_status status;
    uint64_t offset;            /* of the ELF header in path */
    uint64_t device;
    uint64_t inode;
    uint64_t file_size;
    uint64_t hash;
    uint32_t anonymous;         /* 1: path is copsim's copy */
    uint32_t reserved;
    char name[COPSIM_NAME_MAX];
    char path[COPSIM_PATH_MAX];
};

/* RUN: argv[0..argc-1] as consecutive NUL-terminated strings, with the
 * console's descriptor beside it. */
struct copsim_run_request {
    struct copsim_header header;
    int32_t tid;
    uint32_t argc;
    uint64_t max_cycles;        /* 0: copsim's limit */
    uint32_t args_size;
    uint32_t reserved;
    char args[COPSIM_ARGS_MAX];
};

struct copsim_run_reply {
    struct copsim_header header;
    struct copsim_status status;
    uint32_t stop_reason;       /* COPSIM_STOP_* */
    int32_t exit_status;        /* 0-255, or 128 + signal */
    uint64_t instructions;      /* retired by the program */
    uint32_t binds;             /* times it was bound to a slot */
    uint32_t preemptions;
    char detail[COPSIM_TEXT_MAX];   /* FAULT: why, one line */
};

/* DESTROY: no payload.  Reply: */
struct copsim_destroy_reply {
    struct copsim_header header;
    struct copsim_status status;
};

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

/* In the socket's directory while copcontrol records a session on that
 * copsim (its coprofd's pid file, from --start to --stop): libcop then
 * never falls back to a private copsim. */
#define COPSIM_SESSION_MARK     "coprofd.pid"

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

#endif /* COPROF_COPSIM_PROTOCOL_H */
