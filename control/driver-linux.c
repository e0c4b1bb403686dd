/*
 * driver-linux.c — the driver's control requests answered by copdrv.ko in
 * a Linux guest (driver.h, `--driver=linux`).
 *
 * copsim runs on the host as for the hosted driver, but started with
 * --no-driver: its scheduler still posts every bind, unbind and end in
 * the register file's mailboxes, and the module acks them
 * (docs/trace-unit.md, "Mailbox").  The guest is run by
 * kernel-driver/linux/guest.py's `serve`, a daemon started here at START
 * with a listening unix socket that this file bound first (so connecting
 * never races its start) as descriptor 3, the register file copsim
 * reported in INFO and the session's parameters as --param NAME=VALUE.
 * Each request is one connection and one line: "start" boots the guest,
 * loads the module, writes the parameters to its control files, starts
 * the reader of /dev/copdrv into a virtio-serial port and enables the
 * session; its reply "ok" carries the host end of that port (a socket)
 * as SCM_RIGHTS: the stream, as the hosted driver's START carries its
 * pipe.  "stats" answers "ok NAME VALUE ..." (the module's stats file),
 * "params" the session's parameters ("ok NAME VALUE ..."), "stop" "ok
 * warnings=N" once the stream has ended with STOP, the module
 * is unloaded and the guest powered off; any failure "error REASON".
 * Every wait is bounded (the socket's receive time-out): a guest that
 * dies or hangs is an error line, never a hang.  GET is INFO's clock and
 * FIFO depth.  START first checks that a shared copsim (copcontrol's)
 * hosts no driver of its own, whose acks would let a slot run on before
 * the module drained it (coprof starts its private copsim with
 * --no-driver itself).
 * $COPROF_GUEST_STREAM_COPY names a file that gets a copy of the stream
 * (for tests: `copstream check` on what the module wrote).
 */
#include "control/driver-linux.h"
#include "control/daemons.h"

#include "escape-protocol/copstream.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define PYTHON          "/usr/bin/python3"
#define START_TIMEOUT_S 150     /* the vmlinux made once, boot, insmod */
#define STOP_TIMEOUT_S  150     /* STOP, the reader's end, power-off */
#define STATS_TIMEOUT_S 20
#define EXIT_WAIT_MS    10000   /* the daemon after its last reply */
#define REPLY_MAX       4096

/* guest.py and copdrv.ko: $COPROF_GUEST and $COPROF_MODULE, else in
 * kernel-driver/linux/ of the build tree beside bin/ (build/). */
static void find_file(const char *env, const char *name, char *buf,
                      size_t len)
{
    char self[PATH_MAX];
    const char *value = getenv(env);
    char *slash;

    if (value && *value) {
        snprintf(buf, len, "%s", value);
        return;
    }
    daemons_find("coprof", self, sizeof(self));
    slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(buf, len, "%s/../kernel-driver/linux/%s", slash ? self : ".",
             name);
}

/* ---- One request ---------------------------------------------------------- */

/* Why the guest ended, as guest.py said it last in its log; else what. */
static void guest_said(const struct driver *d, const char *what, char *buf,
                       size_t len)
{
    if (daemons_log_line(d->guest.log, "guest.py: ", buf, len) < 0)
        snprintf(buf, len, "%s", what);
}

static int connect_guest(struct driver *d, int timeout_s, char *err,
                         size_t errlen)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    struct timeval tv = {timeout_s, 0};
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", d->guest.socket);
    if (sock < 0 || connect(sock, (struct sockaddr *)&addr,
                            sizeof(addr)) < 0) {
        int error = errno;
        char said[512];

        if (sock >= 0)
            close(sock);
        guest_said(d, strerror(error), said, sizeof(said));
        snprintf(err, errlen, "the guest's session (%s) is gone: %s (its "
                 "console: %s)", d->guest.socket, said, d->guest.log);
        errno = error;
        return -1;
    }
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return sock;
}

/* The descriptor a message carried, to *fd (if fd), else closed. */
static void take_fd(struct msghdr *msg, int *fd)
{
    struct cmsghdr *c = CMSG_FIRSTHDR(msg);
    int passed;

    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
        return;
    memcpy(&passed, CMSG_DATA(c), sizeof(int));
    if (fd)
        *fd = passed;
    else
        close(passed);
}

/*
 * Receives one reply line into buf (its newline cut); a descriptor that
 * came with it goes to *fd when fd is given, else it is closed.  0, or -1
 * with errno (ECONNRESET: the connection closed first; EMSGSIZE: no line
 * fits).
 */
static int receive_line(int sock, char *buf, size_t size, int *fd)
{
    char control[CMSG_SPACE(sizeof(int))];
    struct iovec iov;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    size_t used = 0;
    ssize_t n;

    while (!memchr(buf, '\n', used)) {
        if (used >= size - 1) {
            errno = EMSGSIZE;
            return -1;
        }
        iov.iov_base = buf + used;
        iov.iov_len = size - 1 - used;
        msg.msg_control = used ? NULL : control;
        msg.msg_controllen = used ? 0 : sizeof(control);
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        if (n <= 0) {
            if (n == 0)
                errno = ECONNRESET;
            return -1;
        }
        if (!used)
            take_fd(&msg, fd);
        used += (size_t)n;
    }
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

/*
 * Sends one request line and reads the one reply line into reply (without
 * "ok "); a descriptor that came with it goes to *fd when fd is given.
 * An "error REASON" reply is -1 with REASON in err (and where the guest's
 * console is, but for a start, whose session directory goes).
 */
static int guest_request(struct driver *d, const char *request,
                         int timeout_s, char *reply, size_t len, int *fd,
                         char *err, size_t errlen)
{
    char buf[REPLY_MAX];
    int sock = connect_guest(d, timeout_s, err, errlen), error;

    if (sock < 0)
        return -1;
    if (send(sock, request, strlen(request), MSG_NOSIGNAL) < 0 ||
        send(sock, "\n", 1, MSG_NOSIGNAL) < 0 ||
        receive_line(sock, buf, sizeof(buf), fd) < 0) {
        error = errno;
        close(sock);
        guest_said(d, error == EAGAIN ? "timed out" : strerror(error), buf,
                   sizeof(buf));
        snprintf(err, errlen, "the guest's session (%s) did not answer "
                 "'%s': %s (its console: %s)", d->guest.socket, request,
                 buf, d->guest.log);
        errno = error == EAGAIN ? ETIMEDOUT : error;
        return -1;
    }
    close(sock);
    if (strncmp(buf, "ok", 2) == 0 && (buf[2] == '\0' || buf[2] == ' ')) {
        snprintf(reply, len, "%s", buf[2] ? buf + 3 : "");
        return 0;
    }
    snprintf(err, errlen, "%s", strncmp(buf, "error ", 6) == 0 ? buf + 6 :
             buf);
    if (strcmp(request, "start") != 0)
        snprintf(err + strlen(err), errlen - strlen(err), " (its console: "
                 "%s)", d->guest.log);
    errno = EIO;
    return -1;
}

/* ---- GET, START, STATS, STOP ---------------------------------------------- */

/* The running session's parameters, as its guest was given them (for
 * copcontrol --status); left as they are when the guest does not say. */
static void guest_params(struct driver *d, struct copdrv_control_params *p)
{
    char reply[REPLY_MAX], err[256], *save = NULL, *name, *value;

    if (guest_request(d, "params", STATS_TIMEOUT_S, reply, sizeof(reply),
                      NULL, err, sizeof(err)) < 0)
        return;
    for (name = strtok_r(reply, " ", &save); name &&
         (value = strtok_r(NULL, " ", &save));
         name = strtok_r(NULL, " ", &save)) {
        unsigned long long v = strtoull(value, NULL, 0);

        if (strcmp(name, "lfsr_value") == 0)
            p->lfsr_value = (uint32_t)v;
        else if (strcmp(name, "lfsr_count") == 0)
            p->lfsr_count = (uint32_t)v;
        else if (strcmp(name, "poll_interval_ns") == 0)
            p->poll_interval_ns = v;
        else if (strcmp(name, "buffer_bytes") == 0)
            p->buffer_bytes = (uint32_t)v;
        else if (strcmp(name, "fifo_full") == 0)
            p->fifo_full = (uint32_t)v;
        else if (strcmp(name, "dither") == 0)
            p->dither = (uint32_t)v;
        else if (strcmp(name, "watermark") == 0)
            p->watermark = (uint32_t)v;
        else if (strcmp(name, "dither_seed") == 0)
            p->dither_seed = v;
        else if (strcmp(name, "event") == 0)
            p->event = (uint32_t)v;
    }
}

int driver_linux_get(struct driver *d, struct copdrv_control_reply *reply,
                     char *err, size_t errlen)
{
    struct copsim_info_reply info;
    struct stat st;

    if (driver_info(d, &info, err, errlen) < 0)
        return -1;
    memset(reply, 0, sizeof(*reply));
    reply->params = d->guest.params;
    reply->slots = info.n_slots;
    reply->fifo_depth = info.fifo_depth;
    reply->clock_hz = info.nominal_hz;
    d->guest.clock_hz = info.nominal_hz;
    reply->running = stat(d->guest.socket, &st) == 0;
    snprintf(d->guest.regs, sizeof(d->guest.regs), "%s", info.regs_path);
    if (reply->running && d->guest.pid == 0)   /* another call's session */
        guest_params(d, &reply->params);
    return 0;
}

/* A listening socket at the guest's path, ours: an old one is replaced. */
static int listen_guest(struct driver *d, char *err, size_t errlen)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct stat st;

    if (strlen(d->guest.socket) >= sizeof(addr.sun_path)) {
        snprintf(err, errlen, "%s: too long for a socket's path",
                 d->guest.socket);
        errno = ENAMETOOLONG;
        goto failed;
    }
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", d->guest.socket);
    if (lstat(d->guest.socket, &st) == 0 && S_ISSOCK(st.st_mode) &&
        st.st_uid == geteuid())
        unlink(d->guest.socket);
    if (sock < 0 || bind(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        chmod(d->guest.socket, 0600) < 0 || listen(sock, 4) < 0) {
        snprintf(err, errlen, "%s: %s", d->guest.socket, strerror(errno));
        goto failed;
    }
    return sock;

failed:
    if (sock >= 0)
        close(sock);
    return -1;
}

static void param(char **argv, int *n, char (*buf)[64], const char *name,
                  unsigned long long value)
{
    snprintf(buf[*n], sizeof(buf[*n]), "--param=%s=%llu", name, value);
    argv[*n] = buf[*n];
    (*n)++;
}

/* guest.py serve with the listening socket as 3; its pid or -1. */
static pid_t start_guest(struct driver *d, int listener, char *err,
                         size_t errlen)
{
    const struct copdrv_control_params *p = &d->guest.params;
    struct daemon_spec spec = {d->guest.shared ? DAEMON_DETACHED :
                               DAEMON_GROUP, d->guest.log, listener, 0, 0};
    char script[PATH_MAX], module[PATH_MAX], regs[PATH_MAX + 8];
    char module_arg[PATH_MAX + 16], parent[32], params[12][64];
    char copy_arg[PATH_MAX + 16];
    const char *copy = getenv("COPROF_GUEST_STREAM_COPY");
    char *argv[32];
    int n = 0, np = 0;
    char *pv[12];

    find_file("COPROF_GUEST", "guest.py", script, sizeof(script));
    find_file("COPROF_MODULE", "copdrv.ko", module, sizeof(module));
    if (access(script, R_OK) < 0) {
        snprintf(err, errlen, "%s: %s (--driver=linux runs from the build "
                 "tree, or set COPROF_GUEST)", script, strerror(errno));
        return -1;
    }
    snprintf(module_arg, sizeof(module_arg), "--module=%s", module);
    snprintf(regs, sizeof(regs), "--regs=%s", d->guest.regs);
    param(pv, &np, params, "lfsr_value", p->lfsr_value);
    param(pv, &np, params, "lfsr_count", p->lfsr_count);
    param(pv, &np, params, "poll_interval_ns", p->poll_interval_ns);
    param(pv, &np, params, "clock_hz", d->guest.clock_hz);
    param(pv, &np, params, "buffer_bytes", p->buffer_bytes);
    param(pv, &np, params, "fifo_full", p->fifo_full);
    param(pv, &np, params, "watermark", p->watermark);
    param(pv, &np, params, "dither", p->dither);
    param(pv, &np, params, "dither_seed", p->dither_seed);
    param(pv, &np, params, "event", p->event);
    argv[n++] = PYTHON;
    argv[n++] = script;
    argv[n++] = "serve";
    argv[n++] = "--listen-fd=3";
    argv[n++] = module_arg;
    argv[n++] = regs;
    for (int i = 0; i < np; i++)
        argv[n++] = pv[i];
    if (copy && *copy) {
        snprintf(copy_arg, sizeof(copy_arg), "--stream-copy=%s", copy);
        argv[n++] = copy_arg;
    }
    if (!d->guest.shared) {
        snprintf(parent, sizeof(parent), "--parent=%ld", (long)getpid());
        argv[n++] = parent;
    }
    argv[n] = NULL;
    return daemons_start(&spec, argv, err, errlen);
}

/* A shared copsim that hosts its driver is refused: its acks would not
 * wait for the module's. */
static int check_copsim(struct driver *d, char *err, size_t errlen)
{
    struct copdrv_control_reply hosted;
    char why[256];

    if (!d->guest.shared ||
        driver_hosted_get(d, &hosted, why, sizeof(why)) < 0)
        return 0;
    snprintf(err, errlen, "%s: this copsim hosts its own driver, whose "
             "acks would not wait for the module's: --shutdown it, then "
             "--start with --driver=linux (copsim --no-driver)", d->path);
    errno = EBUSY;
    return -1;
}

int driver_linux_start(struct driver *d, int *stream_fd, char *err,
                       size_t errlen)
{
    char reply[64];
    int listener;

    *stream_fd = -1;
    if (check_copsim(d, err, errlen) < 0 ||
        (listener = listen_guest(d, err, errlen)) < 0)
        return -1;
    d->guest.pid = start_guest(d, listener, err, errlen);
    close(listener);
    if (d->guest.pid < 0)
        return -1;
    if (guest_request(d, "start", START_TIMEOUT_S, reply, sizeof(reply),
                      stream_fd, err, errlen) < 0) {
        if (*stream_fd >= 0)
            close(*stream_fd);
        *stream_fd = -1;
        driver_linux_end(d);
        return -1;
    }
    if (*stream_fd < 0) {
        snprintf(err, errlen, "%s: the guest's start carried no stream",
                 d->guest.socket);
        driver_linux_end(d);
        errno = EPROTO;
        return -1;
    }
    return 0;
}

/* The fields of struct copdrv_control_stats that the stats file has. */
static uint64_t *stats_field(struct copdrv_control_stats *s,
                             const char *name)
{
    static const struct {
        const char *name;
        size_t offset;
    } fields[] = {
#define FIELD(n) {#n, offsetof(struct copdrv_control_stats, n)}
        FIELD(polls), FIELD(samples), FIELD(lost_pending),
        FIELD(bytes_written), FIELD(bytes_read), FIELD(buffer_bytes),
        FIELD(buffer_high_water), FIELD(fifo_errors), FIELD(doorbell_polls),
        FIELD(stalls), FIELD(stall_ns), FIELD(poll_ns),
#undef FIELD
    };
    static const char *const lost[] = {
        [COPSTREAM_LOST_FIFO_OVERFLOW] = "lost_fifo_overflow",
        [COPSTREAM_LOST_BUFFER_FULL] = "lost_buffer_full",
        [COPSTREAM_LOST_NO_CONTEXT] = "lost_no_context",
        [COPSTREAM_LOST_OUTSIDE_LS] = "lost_outside_ls",
    };

    for (size_t i = 0; i < sizeof(fields) / sizeof(*fields); i++)
        if (strcmp(name, fields[i].name) == 0)
            return (uint64_t *)((char *)s + fields[i].offset);
    for (size_t i = 0; i < sizeof(lost) / sizeof(*lost); i++)
        if (lost[i] && strcmp(name, lost[i]) == 0)
            return &s->lost_by_cause[i];
    return NULL;
}

int driver_linux_stats(struct driver *d, struct copdrv_control_stats *stats,
                       char *err, size_t errlen)
{
    char reply[REPLY_MAX], *save = NULL, *name, *value;
    struct stat st;

    memset(stats, 0, sizeof(*stats));
    if (stat(d->guest.socket, &st) < 0 && errno == ENOENT)
        return 0;       /* no guest: no session, nothing counted */
    if (guest_request(d, "stats", STATS_TIMEOUT_S, reply, sizeof(reply),
                      NULL, err, errlen) < 0)
        return -1;
    for (name = strtok_r(reply, " ", &save); name;
         name = strtok_r(NULL, " ", &save)) {
        uint64_t *field;

        if (!(value = strtok_r(NULL, " ", &save)))
            break;
        if (strcmp(name, "running") == 0)
            stats->running = (uint32_t)strtoul(value, NULL, 10);
        else if (strcmp(name, "ended") == 0)
            stats->ended = (uint32_t)strtoul(value, NULL, 10);
        else if ((field = stats_field(stats, name)))
            *field = strtoull(value, NULL, 10);
    }
    return 0;
}

int driver_linux_stop(struct driver *d, char *err, size_t errlen)
{
    char reply[64];
    int status = guest_request(d, "stop", STOP_TIMEOUT_S, reply,
                               sizeof(reply), NULL, err, errlen);

    if (status == 0 && strcmp(reply, "warnings=0") != 0) {
        snprintf(err, errlen, "copdrv.ko left kernel %s in dmesg (its "
                 "console: %s)", reply, d->guest.log);
        errno = EIO;
        status = -1;
    }
    driver_linux_end(d);
    return status;
}

void driver_linux_end(struct driver *d)
{
    int status;

    if (d->guest.pid > 0 &&
        daemons_wait(d->guest.pid, EXIT_WAIT_MS, &status) < 0)
        daemons_terminate(d->guest.pid, EXIT_WAIT_MS);
    d->guest.pid = 0;
    unlink(d->guest.socket);
}
