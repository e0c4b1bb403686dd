/*
 * state.h — copcontrol's files beside copsim's socket, like opcontrol's
 * daemonrc and its pid files:
 *
 *   copcontrol.conf   saved settings, one "key=value" a line: event=,
 *                     sample-period= or frequency= (the rate as given),
 *                     session-dir=, buffer-size= (64-bit words),
 *                     dither= (on, off), dither-seed= (decimal),
 *                     fifo-full= (stall, drop), host-event=
 *                     (EVENT[:PERIOD], empty: none), host-call-graph=
 *                     and host-sched= (on, off)
 *   copsim.pid        the copsim copcontrol --init started
 *   copsim.log        its standard output and error
 *   coprof-host.pid   the running session's coprof-host (hostprof/): its
 *                     pid, then the session directory; coprof-host.log
 *                     its output
 *   coprofd.pid       the running session's coprofd: its pid, then the
 *                     session directory, one a line
 *   coprofd.log       its standard output and error (its summary line)
 *   copcontrol.starting  a --start between the driver's START and its
 *                     coprofd.pid: copcontrol's pid, then the session
 *                     directory (one left by a --start that died says
 *                     the driver has a session nobody records)
 *
 * The directory is predictable (/tmp/coprof-UID), so another user may have
 * made it first or planted symlinks in it: it is used only once it is
 * this user's own and writable by nobody else, and every file in it is
 * created 0600 without following a symlink (common/safe-file.h).
 */
#ifndef COPROF_CONTROL_STATE_H
#define COPROF_CONTROL_STATE_H

#include "control/rate.h"
#include "abi/copsim-protocol.h"
#include "abi/state-dir.h"
#include "control/sampling.h"
#include "control/host-options.h"

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define STATE_CONF          "copcontrol.conf"
#define STATE_COPSIM_PID    "copsim.pid"
#define STATE_COPSIM_LOG    "copsim.log"
#define STATE_COPROFD_PID   COPROF_SESSION_MARK     /* libcop looks */
#define STATE_COPROFD_LOG   "coprofd.log"
#define STATE_GUEST_SOCKET  "guest.sock"    /* --driver=linux's guest */
#define STATE_GUEST_LOG     "guest.log"     /* its console */
#define STATE_HOST_PID      "coprof-host.pid"
#define STATE_HOST_LOG      "coprof-host.log"
#define STATE_STARTING      "copcontrol.starting"

struct settings {
    struct rate_spec rate;          /* kind RATE_NONE: not set */
    char session_dir[PATH_MAX];     /* "": not set */
    uint32_t buffer_words;          /* 0: not set (the driver's default) */
    struct sampling_spec sampling;  /* dither, seed, FIFO-full policy */
    char driver[8];                 /* "hosted", "linux"; "": not set */
    struct host_options host;       /* the host side (host-options.h) */
};

/* --driver=NAME (driver.h's names) into s; -1 with one line in err. */
int settings_driver(struct settings *s, const char *name, char *err,
                    size_t errlen);

/* No setting: everything unset. */
void settings_init(struct settings *s);

/* The directory of the socket path; -1 when it has none. */
int state_dir_of(const char *socket_path, char *buf, size_t len);

/* Creates dir (0700) unless it exists, and checks that it is this user's
 * own; -1 with one line in err naming it and why it is refused. */
int state_dir_prepare(const char *dir, char *err, size_t errlen);

/* Creates dir/name empty (0600, never through a symlink) for a daemon's
 * output; 0 or -1 with one line in err. */
int state_log_create(const char *dir, const char *name, char *err,
                     size_t errlen);

/* path = dir/name. */
void state_path(const char *dir, const char *name, char *buf, size_t len);

/* Reads dir's copcontrol.conf into s (zeroed first; a missing file is
 * no settings).  -1 with one line in err for a damaged file. */
int settings_load(const char *dir, struct settings *s, char *err,
                  size_t errlen);
int settings_save(const char *dir, const struct settings *s, char *err,
                  size_t errlen);

/* Whatever `given` sets replaces base's. */
void settings_merge(struct settings *base, const struct settings *given);

/* A pid file: the pid, then an optional line of text; replaced whole. */
int pidfile_write(const char *path, pid_t pid, const char *text, char *err,
                  size_t errlen);
/* The pid (0 when there is no file, or it is not in a directory of this
 * user's), text when given. */
pid_t pidfile_read(const char *path, char *text, size_t len);

#endif
