/*
 * driver.c — copsim's INFO and the driver's control requests (driver.h).
 *
 * A request is a bare header (or SET's parameters); request() sends it,
 * receives one message, checks that it is the reply of that type and long
 * enough, takes at most one descriptor out of it, and turns a status with
 * an error into err and errno.  With --driver=linux the driver's requests
 * go to driver-linux.c instead; SET then only keeps the parameters for
 * its START.
 */
#include "control/driver-linux.h"

#include "escape-protocol/copstream.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

_Static_assert(RATE_SPU_CYCLES == COPDRV_EVENT_CYCLES &&
               RATE_SPU_INSTRUCTIONS == COPDRV_EVENT_INSTRUCTIONS,
               "the rate's events are the driver's");

int driver_parse_kind(const char *text, enum driver_kind *kind, char *err,
                      size_t errlen)
{
    if (strcmp(text, "hosted") == 0)
        *kind = DRIVER_HOSTED;
    else if (strcmp(text, "linux") == 0)
        *kind = DRIVER_LINUX;
    else {
        snprintf(err, errlen, "--driver=%s: not hosted or linux", text);
        return -1;
    }
    return 0;
}

const char *driver_kind_name(enum driver_kind kind)
{
    return kind == DRIVER_LINUX ? "linux" : "hosted";
}

void driver_use_linux(struct driver *d, const char *guest_socket,
                      const char *guest_log, int shared)
{
    d->kind = DRIVER_LINUX;
    snprintf(d->guest.socket, sizeof(d->guest.socket), "%s", guest_socket);
    snprintf(d->guest.log, sizeof(d->guest.log), "%s", guest_log);
    d->guest.shared = shared;
}

int driver_connect(struct driver *d, const char *path, char *err,
                   size_t errlen)
{
    snprintf(d->path, sizeof(d->path), "%s", path);
    d->sock = copsim_connect_checked(path, err, errlen);
    if (d->sock < 0) {
        int error = errno;

        if (error == ENOENT || error == ECONNREFUSED)
            snprintf(err, errlen, "%s: no copsim answers there", path);
        errno = error;
        return -1;
    }
    return 0;
}

void driver_close(struct driver *d)
{
    if (d->sock >= 0)
        close(d->sock);
    d->sock = -1;
}

/*
 * Sends `message` and receives the reply of its type into reply (at least
 * min_size bytes).  A descriptor that came along goes to *fd when fd is
 * given, else it is closed.
 */
static int request(struct driver *d, const struct copsim_header *message,
                   void *reply, size_t min_size, int *fd, char *err,
                   size_t errlen)
{
    static struct copsim_message m;
    unsigned type = message->type;
    const struct copsim_status *status;
    int got;

    if (copsim_send(d->sock, message, NULL, 0) < 0 ||
        (got = copsim_receive(d->sock, &m)) < 0) {
        snprintf(err, errlen, "%s: %s", d->path, strerror(errno));
        return -1;
    }
    if (got == 0) {
        snprintf(err, errlen, "%s: copsim closed the connection", d->path);
        errno = ECONNRESET;
        return -1;
    }
    if (m.u.header.type != (type | COPSIM_REPLY) || m.size < min_size) {
        copsim_message_close_fds(&m);
        snprintf(err, errlen, "%s: unexpected reply to request 0x%x (is "
                 "copsim of another version?)", d->path, type);
        errno = EPROTO;
        return -1;
    }
    status = (const void *)(m.u.bytes + sizeof(struct copsim_header));
    if (status->error) {
        copsim_message_close_fds(&m);
        snprintf(err, errlen, "%.*s", (int)sizeof(status->message),
                 status->message);
        errno = status->error;
        return -1;
    }
    memcpy(reply, m.u.bytes, min_size);
    if (fd && m.n_fds > 0) {
        *fd = m.fds[0];
        for (unsigned i = 1; i < m.n_fds; i++)
            m.fds[i - 1] = m.fds[i];
        m.n_fds--;
    }
    copsim_message_close_fds(&m);
    return 0;
}

/* A request without payload. */
static int simple(struct driver *d, unsigned type, void *reply,
                  size_t size, int *fd, char *err, size_t errlen)
{
    struct copsim_header header;

    copsim_header_init(&header, type, sizeof(header));
    return request(d, &header, reply, size, fd, err, errlen);
}

int driver_info(struct driver *d, struct copsim_info_reply *info, char *err,
                size_t errlen)
{
    return simple(d, COPSIM_INFO, info, sizeof(*info), NULL, err, errlen);
}

int driver_hosted_get(struct driver *d, struct copdrv_control_reply *reply,
                      char *err, size_t errlen)
{
    return simple(d, COPDRV_CONTROL_GET, reply, sizeof(*reply), NULL, err,
                  errlen);
}

int driver_get(struct driver *d, struct copdrv_control_reply *reply,
               char *err, size_t errlen)
{
    if (d->kind == DRIVER_LINUX)
        return driver_linux_get(d, reply, err, errlen);
    return driver_hosted_get(d, reply, err, errlen);
}

int driver_set(struct driver *d, const struct rate *rate,
               uint32_t buffer_bytes, const struct sampling *sampling,
               char *err, size_t errlen)
{
    struct copdrv_control_set set;
    struct copdrv_control_reply reply;

    memset(&set, 0, sizeof(set));
    copsim_header_init(&set.header, COPDRV_CONTROL_SET, sizeof(set));
    set.params.lfsr_value = rate->value;
    set.params.lfsr_count = rate->count;
    set.params.poll_interval_ns = rate->poll_ns;
    set.params.buffer_bytes = buffer_bytes;
    set.params.fifo_full = sampling->fifo_full;
    set.params.dither = sampling->dither ? 1u : 0u;
    set.params.dither_seed = sampling->seed;
    set.params.event = rate->event;
    set.params.watermark = 0;           /* the driver's: half the FIFO */
    if (d->kind == DRIVER_LINUX) {
        d->guest.params = set.params;
        return 0;
    }
    return request(d, &set.header, &reply, sizeof(reply), NULL, err, errlen);
}

int driver_start(struct driver *d, int *stream_fd, char *err, size_t errlen)
{
    struct copdrv_control_reply reply;

    *stream_fd = -1;
    if (d->kind == DRIVER_LINUX)
        return driver_linux_start(d, stream_fd, err, errlen);
    if (simple(d, COPDRV_CONTROL_START, &reply, sizeof(reply), stream_fd,
               err, errlen) < 0)
        return -1;
    if (*stream_fd < 0) {
        snprintf(err, errlen, "%s: START's reply carried no stream",
                 d->path);
        errno = EPROTO;
        return -1;
    }
    return 0;
}

int driver_stop(struct driver *d, char *err, size_t errlen)
{
    struct copdrv_control_reply reply;

    if (d->kind == DRIVER_LINUX)
        return driver_linux_stop(d, err, errlen);
    return simple(d, COPDRV_CONTROL_STOP, &reply, sizeof(reply), NULL, err,
                  errlen);
}

int driver_stats(struct driver *d, struct copdrv_control_stats *stats,
                 char *err, size_t errlen)
{
    if (d->kind == DRIVER_LINUX)
        return driver_linux_stats(d, stats, err, errlen);
    return simple(d, COPDRV_CONTROL_STATS, stats, sizeof(*stats), NULL, err,
                  errlen);
}

int driver_program(struct driver *d, const struct rate_spec *spec,
                   uint32_t buffer_bytes, const struct sampling *sampling,
                   struct rate *rate, char *err, size_t errlen)
{
    struct copdrv_control_reply get;

    if (driver_get(d, &get, err, errlen) < 0)
        return -1;
    if (get.running) {
        snprintf(err, errlen, "%s: a session runs already (--stop it "
                 "first)", d->path);
        errno = EBUSY;
        return -1;
    }
    if (rate_resolve(spec, (double)get.clock_hz, get.fifo_depth, rate, err,
                     errlen) < 0) {
        errno = EINVAL;
        return -1;
    }
    return driver_set(d, rate, buffer_bytes, sampling, err, errlen);
}

uint64_t driver_lost(const struct copdrv_control_stats *stats)
{
    uint64_t lost = 0;

    for (int cause = 0; cause < COPSTREAM_LOST_CAUSE_END; cause++)
        if (cause != COPSTREAM_LOST_OUTSIDE_LS)
            lost += stats->lost_by_cause[cause];
    return lost;
}

int driver_parse_buffer_words(const char *text, uint32_t *words, char *err,
                              size_t errlen)
{
    unsigned long long n;
    char *end;

    errno = 0;
    n = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' ||
        n < DRIVER_BUFFER_WORDS_MIN || n > DRIVER_BUFFER_WORDS_MAX) {
        snprintf(err, errlen, "--buffer-size=%s: not a number of 64-bit "
                 "words in %u..%u", text, DRIVER_BUFFER_WORDS_MIN,
                 DRIVER_BUFFER_WORDS_MAX);
        return -1;
    }
    *words = (uint32_t)n;
    return 0;
}
