/*
 * driver.h — talking to copsim and its kernel driver on copsim's socket.
 *
 * One connection (copsim_connect) carries INFO (copsim's pid, clock, FIFO
 * depth, event log) and the driver's control requests of copdrv-control.h:
 * GET, SET, START (whose reply carries the stream's reading end), STOP and
 * STATS.  Messages are framed by emulator/copsim/protocol.c.  With
 * --driver=linux (driver_use_linux) GET, SET, START, STOP and STATS go to
 * copdrv.ko in a Linux guest instead (driver-linux.c), while INFO and the
 * contexts stay with copsim, started with --no-driver.  Every
 * function returns 0, or -1 with one line in err (the driver's own
 * message when it refused) and errno set.
 */
#ifndef COPROF_CONTROL_DRIVER_H
#define COPROF_CONTROL_DRIVER_H

#include "control/rate.h"
#include "control/sampling.h"
#include "abi/copdrv-control.h"
#include "common/copsim-socket.h"
#include "abi/copdrv-limits.h"

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

enum driver_kind {
    DRIVER_HOSTED,          /* in copsim, on its socket (the default) */
    DRIVER_LINUX,           /* copdrv.ko in a guest (driver-linux.c) */
};

/* --driver=linux: the guest that runs the module. */
struct driver_guest {
    char socket[PATH_MAX];  /* its daemon's socket (guest.py serve) */
    char log[PATH_MAX];     /* its console */
    int shared;             /* copcontrol's: the daemon detached (setsid)
                               and copsim checked to host no driver; else
                               coprof's, a child that ends with it */
    pid_t pid;              /* the daemon started here, or 0 */
    char regs[COPSIM_PATH_MAX];     /* copsim's register file (INFO) */
    uint64_t clock_hz;
    struct copdrv_control_params params;    /* SET keeps them here */
};

struct driver {
    int sock;
    char path[COPSIM_PATH_MAX];
    enum driver_kind kind;
    struct driver_guest guest;
};

/* --driver=hosted|linux; -1 with one line in err. */
int driver_parse_kind(const char *text, enum driver_kind *kind, char *err,
                      size_t errlen);
const char *driver_kind_name(enum driver_kind kind);

/*
 * The requests of d go to copdrv.ko in a guest run by a daemon listening
 * on guest_socket (started at START, its console in guest_log; see
 * struct driver_guest for shared).  Call after driver_connect.
 */
void driver_use_linux(struct driver *d, const char *guest_socket,
                      const char *guest_log, int shared);

/* errno ENOENT or ECONNREFUSED: no copsim answers on path. */
int driver_connect(struct driver *d, const char *path, char *err,
                   size_t errlen);
void driver_close(struct driver *d);

int driver_info(struct driver *d, struct copsim_info_reply *info, char *err,
                size_t errlen);
int driver_get(struct driver *d, struct copdrv_control_reply *reply,
               char *err, size_t errlen);
int driver_set(struct driver *d, const struct rate *rate,
               uint32_t buffer_bytes, const struct sampling *sampling,
               char *err, size_t errlen);
int driver_start(struct driver *d, int *stream_fd, char *err, size_t errlen);
int driver_stop(struct driver *d, char *err, size_t errlen);
int driver_stats(struct driver *d, struct copdrv_control_stats *stats,
                 char *err, size_t errlen);

/*
 * What both commands do before START: GET (the clock and FIFO depth;
 * refused with EBUSY while a session runs), resolve the spec
 * (rate_resolve; errno EINVAL when it does not: a usage error), SET with
 * the sampling (dither, seed, FIFO-full policy; the doorbell's watermark
 * left to the driver's default).  *rate is what was set.
 */
int driver_program(struct driver *d, const struct rate_spec *spec,
                   uint32_t buffer_bytes, const struct sampling *sampling,
                   struct rate *rate, char *err, size_t errlen);

/* --buffer-size: the driver's event buffer in 64-bit words. */
#define DRIVER_BUFFER_WORDS_MIN     (COPDRV_BUFFER_MIN / 8u)
#define DRIVER_BUFFER_WORDS_MAX     (COPDRV_BUFFER_MAX / 8u)
#define DRIVER_BUFFER_WORDS_DEFAULT (COPDRV_BUFFER_DEFAULT / 8u)
int driver_parse_buffer_words(const char *text, uint32_t *words, char *err,
                              size_t errlen);

/* Captures lost in STATS, over every cause but outside-ls (a PC outside
 * the local store is no context's code: not a loss). */
uint64_t driver_lost(const struct copdrv_control_stats *stats);

#endif
