/*
 * libcop.h — run coprocessor programs from a host program (the counterpart
 * of the Cell SDK's libspe2).
 *
 *     extern const cop_program_handle_t kernels;       (from cop-embed)
 *
 *     cop_context_t *ctx = cop_context_create();
 *     cop_context_load(ctx, &kernels);
 *     size_t size;
 *     unsigned char *data = cop_context_data(ctx, &size);
 *     ... put input in data ...
 *     struct cop_stop_info stop;
 *     if (cop_context_run(ctx, 0, NULL, &stop) < 0)
 *         fprintf(stderr, "%s\n", cop_last_error());
 *     else if (stop.reason == COP_STOP_FAULT)
 *         fprintf(stderr, "fault: %s\n", stop.fault);
 *     ... read results from data; stop.status is the exit status ...
 *     cop_context_destroy(ctx);
 *
 * Contexts run in copsim (emulator/copsim/), found on the socket named by
 * $COPSIM_SOCKET, else $XDG_RUNTIME_DIR/coprof/copsim.sock, else
 * /tmp/coprof-UID/copsim.sock, once it is sure that copsim is this user's
 * (the socket's directory and the server's uid).  When none answers there,
 * libcop starts a private copsim for this process on first use and stops
 * it at exit, except under a profiling session ($COPROF_SESSION, or
 * copcontrol's session): then a copsim that is gone is an error (errno set,
 * one line also on standard error), never contexts that run unprofiled.
 *
 * cop_context_run() blocks until the program exits or faults, like
 * spe_context_run().  Threads: any number of threads may each create and
 * run their own contexts at the same time; one context is used by one
 * thread at a time.  Every function that can fail returns NULL or -1 and
 * leaves a one-line reason for cop_last_error() in the calling thread.
 *
 * Build with `pkg-config --cflags --libs libcop` (build/lib/pkgconfig in
 * the build tree).
 */
#ifndef COPROF_LIBCOP_H
#define COPROF_LIBCOP_H

#include "cop-handle.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cop_context cop_context_t;

/* How a run ended. */
enum cop_stop_reason {
    COP_STOP_EXIT = 1,      /* the program exited; status is its status */
    COP_STOP_FAULT = 2,     /* trap, runtime error, cycle limit, emulator
                               death: fault says which */
};

struct cop_stop_info {
    enum cop_stop_reason reason;
    int status;             /* exit status 0-255 (128 + signal for an
                               emulator killed by one) */
    uint64_t instructions;  /* retired by the program */
    unsigned binds;         /* times it was put on a slot */
    unsigned preemptions;   /* times its time slice ran out */
    char fault[512];        /* COP_STOP_FAULT: the reason, one line */
};

/* Where the image of a loaded context was found. */
struct cop_context_image {
    char name[64];          /* short name from the image's note */
    char path[4096];        /* file holding the image (copsim's copy for an
                               image in anonymous memory) */
    uint64_t offset;        /* of the ELF header in path */
    uint64_t device;
    uint64_t inode;
    uint64_t file_size;
    uint64_t hash;          /* first 8 bytes of the file's SHA-256, LE */
    int anonymous;
};

/* A new context; copsim records the calling thread's call stack as the
 * context's identity. */
cop_context_t *cop_context_create(void);

/* Loads an embedded image: its object-id is handle->elf_image. */
int cop_context_load(cop_context_t *ctx, const cop_program_handle_t *handle);

/* Loads an image file, mapped into this process (object-id: the mapping). */
int cop_context_load_file(cop_context_t *ctx, const char *path);

/* Where the program's console goes: a descriptor (duplicated; default
 * standard output) or a file created or truncated now. */
int cop_context_set_console(cop_context_t *ctx, int fd);
int cop_context_set_console_file(cop_context_t *ctx, const char *path);

/* Stops a run after this many cycles as a fault (0: copsim's limit). */
void cop_context_set_cycle_limit(cop_context_t *ctx, uint64_t cycles);

/* The data window, shared with the program's main memory at 0x80800000:
 * what the host writes there before a run the program reads, and the
 * other way round.  Stays valid until the context is destroyed. */
void *cop_context_data(cop_context_t *ctx, size_t *size);

/*
 * Runs the loaded program with argv[0..argc-1] (argc 0: argv = {its short
 * name}) until it ends.  Returns 0 with *stop filled, or -1 when it could
 * not run (nothing loaded, no emulator, copsim gone, ...).
 */
int cop_context_run(cop_context_t *ctx, int argc, char *const argv[],
                    struct cop_stop_info *stop);

/* copsim's id of the context, and its image once loaded (0 or -1). */
uint64_t cop_context_id(const cop_context_t *ctx);
int cop_context_image(const cop_context_t *ctx,
                      struct cop_context_image *image);

/* Ends the context (and hangs up on copsim); NULL is ignored. */
int cop_context_destroy(cop_context_t *ctx);

/*
 * The context's mailboxes (docs/coprocessor-abi.md, "Mailboxes"), the
 * host's side of cop.h's cop_mbox_*: 32-bit messages to the program (the
 * inbound mailbox, COP_MBOX_IN_DEPTH = 4 deep) and from it (the outbound
 * one, 1 deep).  They may be called from another thread while one is
 * blocked in cop_context_run (one thread writing and one reading at a
 * time), and touch only memory shared with the context, never copsim.
 *
 * cop_mailbox_write queues value, or fails with EAGAIN when the inbound
 * mailbox is full (the program has not read 4 messages yet).
 * cop_mailbox_read takes the oldest outbound message, waiting up to
 * timeout_ms milliseconds (negative: for ever; 0: not at all) without
 * spinning, or fails with ETIMEDOUT.  The program's modelled wait for an
 * answer is mailbox.host_latency cycles from the message the host read
 * last, however long the host takes.
 */
int cop_mailbox_write(cop_context_t *ctx, uint32_t value);
int cop_mailbox_read(cop_context_t *ctx, uint32_t *value, int timeout_ms);

/* The reason of the calling thread's last failure. */
const char *cop_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* COPROF_LIBCOP_H */
