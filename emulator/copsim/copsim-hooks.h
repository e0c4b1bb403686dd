/*
 * copsim-hooks.h — how copsim calls the kernel driver it hosts.
 *
 * copsim is the emulated "kernel + hardware": it owns the trace unit's
 * register file and binds coprocessor contexts to its slots.  The kernel
 * driver (kernel-driver/) runs inside copsim and must
 * see every context switch, the way the Cell kernel's profiling code was
 * called from spufs' context-switch path.  This header is the whole
 * interface between the two: a table of callbacks that copsim calls
 * synchronously, and the descriptions of contexts and switches it passes.
 *
 * When and how the hooks are called:
 *
 *   start   once, when the hooks are installed (at copsim start, or later
 *           while copsim runs), with the trace unit and every context bound
 *           to a slot at that moment.  No bind or unbind happens while it
 *           runs.  Returning -1 refuses the installation.
 *   bind    every time a context is bound to a slot, after the register
 *           file says so (slot.bound_context, context.slot) and BEFORE the
 *           context's run gate opens: no instruction of the context has run
 *           on that slot yet.
 *   unbind  every time a context leaves a slot (preempted at the end of its
 *           time slice, exited, faulted, killed, or reaped because its host
 *           process died), AFTER its emulator stopped (held at the run gate
 *           and acknowledged, or exited) and BEFORE anything else is bound to
 *           that slot.  The slot's FIFO holds the context's last captures:
 *           this is where the driver drains it.  The register file still
 *           shows the context bound while the hook runs.
 *   stop    once, when the hooks are removed or copsim stops, after every
 *           slot's last unbind.
 *
 * All four are called with copsim's scheduler lock held, one at a time,
 * never concurrently with each other: binds and preemptions from the
 * scheduler thread, the unbind of an ended context from the thread that
 * reaped its emulator, start and stop from the thread that installs or
 * removes the hooks.  A hook must not call back into copsim's scheduler
 * (copsim_hooks_install/remove) and should return quickly (a drain, a few
 * records).  The driver's own poll thread runs at the same time and reads
 * the register file and the guest RAM; it must synchronise with the hooks
 * itself.
 *
 * Lifetimes: a struct copsim_context passed to bind stays valid, with its
 * guest RAM mapped, until the unbind hook for that binding has returned.
 * The struct copsim_switch itself lives only during the call.  Strings are
 * NUL-terminated and live as long as their context.
 *
 * Installing: copsim_hooks_install() (emulator/copsim/copsim.h) with a
 * table that stays valid until copsim_hooks_remove() returns.
 */
#ifndef COPROF_COPSIM_HOOKS_H
#define COPROF_COPSIM_HOOKS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct trace_unit;

/*
 * Where a context's image comes from: the file that holds it and the offset
 * of its ELF header in that file, as resolved by copsim from the host
 * process's /proc/PID/maps (including the mapping's page offset).  For an
 * image that was in anonymous memory, copsim copied its bytes into a file of
 * its own: path, identity and offset (0) are the copy's.  These are the
 * fields of the stream's IMAGE and CONTEXT records (escape-protocol/).
 */
struct copsim_image {
    const char *path;           /* absolute path of the file */
    uint64_t device;            /* st_dev of the file */
    uint64_t inode;             /* st_ino */
    uint64_t file_size;         /* st_size */
    uint64_t hash;              /* first 8 bytes of the file's SHA-256, LE */
    uint64_t offset;            /* file offset of the image's ELF header */
    uint64_t size;              /* bytes of the ELF image */
    int anonymous;              /* 1: path is copsim's copy of the image */
    const char *name;           /* short name from the image's note, or "" */
};

/* A coprocessor context as the driver sees it. */
struct copsim_context {
    uint64_t id;                /* copsim's context id: unique, never reused */
    uint32_t trace_context;     /* its block in the register file */
    pid_t pid;                  /* host process (from SO_PEERCRED) */
    pid_t tid;                  /* host thread that runs it */
    uint64_t object_id;         /* address of the ELF header in the host */
    struct copsim_image image;

    /*
     * The guest RAM file, mapped: byte 0 is guest address 0x80000000 and
     * the first 256 KiB are the local store (abi/cop-abi.h,
     * docs/coprocessor-abi.md).  Read it with atomic loads: the emulator
     * writes it while the context runs.  In the slot model it is the
     * slot's RAM while the context is bound, where its local store is
     * copied in before its first instruction: at the bind hook only its
     * guard words (below) are there already.
     */
    const uint8_t *ram;
    size_t ram_size;

    /*
     * The overlay guard words (_ovly_buf_table): region r (0-based) is the
     * 32-bit little-endian word at LS offset guard_ls_offset + 4 * r, i.e.
     * guard_words[r].  n_regions is 0 for an image without overlays (then
     * guard_words is NULL).
     */
    uint32_t guard_ls_offset;
    uint32_t n_regions;
    const volatile uint32_t *guard_words;

    /* The host call stack that created the context: "MODULE+0xOFFSET"
     * entries (file offsets), innermost first, separated by spaces. */
    const char *creation_stack;
};

/* Why a context left its slot. */
enum copsim_unbind_reason {
    COPSIM_UNBIND_PREEMPT = 1,  /* time slice over; it will run again */
    COPSIM_UNBIND_EXIT = 2,     /* the program exited (any status) */
    COPSIM_UNBIND_FAULT = 3,    /* it trapped, hit a runtime error, its
                                   emulator died or it ran out of cycles */
    COPSIM_UNBIND_REAP = 4,     /* its host process died or hung up */
};

/* One context switch on one slot. */
struct copsim_switch {
    uint32_t slot;
    uint64_t cycle;             /* the slot's cycle counter at the switch */
    uint64_t monotonic_ns;      /* CLOCK_MONOTONIC at the switch */
    const struct copsim_context *context;
    /* unbind only: */
    enum copsim_unbind_reason reason;
    int exit_status;            /* EXIT and FAULT: the program's status */
};

/* What the driver learns about copsim when it starts. */
struct copsim_info {
    struct trace_unit *unit;    /* the register file (trace-unit/trace-unit.h) */
    const char *regs_path;      /* its path, for other processes */
    uint32_t n_slots;
    uint64_t slice_cycles;      /* time slice of the scheduler */
    uint64_t nominal_hz;        /* nominal coprocessor clock */
    const char *event_log_path; /* the kernel event log copsim writes */
};

struct copsim_hooks {
    void *data;                 /* passed back to every hook */
    int (*start)(void *data, const struct copsim_info *info,
                 const struct copsim_switch *bound, size_t n_bound);
    void (*bind)(void *data, const struct copsim_switch *change);
    void (*unbind)(void *data, const struct copsim_switch *change);
    void (*stop)(void *data, const struct copsim_info *info);
};

#endif /* COPROF_COPSIM_HOOKS_H */
