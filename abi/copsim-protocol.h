/*
 * copsim-protocol.h — the messages between copsim and its clients, on
 * copsim's UNIX socket.
 *
 * Who writes and reads: copsim serves them (emulator/copsim/server.c);
 * libcop (sdk/libcop/, a host program's contexts), copcontrol and coprof
 * (control/driver.c: INFO and the driver's control messages,
 * abi/copdrv-control.h) send requests and read replies.  The transport
 * (connecting to the checked socket, one message with its descriptors per
 * send) is common/copsim-socket.h; Python tests read these structures
 * through abi/cheader.py, never through a copy.
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
 * Version rule: types 0x100-0x1ff are reserved for the kernel driver's
 * control interface (abi/copdrv-control.h).  Every field has a fixed
 * width; a new field goes at the end of its structure and raises
 * COPSIM_PROTOCOL_VERSION, which copsim checks in every header.
 * emulator/copsim/README.md describes each message.
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

/* What copsim runs with unless told otherwise, which its clients print
 * in their help. */
#define COPSIM_DEFAULT_SLOTS        8
#define COPSIM_DEFAULT_NOMINAL_HZ   3200000000u /* the Cell SPU's 3.2 GHz */

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

#endif /* COPROF_COPSIM_PROTOCOL_H */
