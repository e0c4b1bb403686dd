/*
 * copsim-socket.c — sending and receiving copsim's messages
 * (abi/copsim-protocol.h, common/copsim-socket.h).
 *
 * A client checks whom it reached before it sends anything
 * (copsim_connect_checked): a socket in a directory another user can write,
 * or served by another user, could be an impostor collecting host call
 * stacks and handing out RAM files of its choosing.
 *
 * Both ends use the two message functions.  A message goes out in one sendmsg()
 * with its descriptors as SCM_RIGHTS; a receiver checks the version, the
 * size in the header against the bytes that arrived, and that nothing was
 * truncated, before anyone looks at the payload.  Descriptors received are
 * close-on-exec, so a QEMU spawned meanwhile does not inherit them.
 */
#include "common/copsim-socket.h"

#include "common/safe-file.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int copsim_socket_path(char *buf, size_t len)
{
    const char *env = getenv("COPSIM_SOCKET");
    const char *runtime = getenv("XDG_RUNTIME_DIR");
    int n;

    if (env && *env)
        n = snprintf(buf, len, "%s", env);
    else if (runtime && *runtime)
        n = snprintf(buf, len, "%s/coprof/copsim.sock", runtime);
    else
        n = snprintf(buf, len, "/tmp/coprof-%ld/copsim.sock", (long)getuid());
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Closes sock keeping errno; returns -1. */
static int close_failed(int sock)
{
    int error = errno;

    close(sock);
    errno = error;
    return -1;
}

/* The server must run as this user or as root. */
static int check_server(int sock, const char *path, char *err, size_t errlen)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        snprintf(err, errlen, "%s: cannot tell who serves it: %s", path,
                 strerror(errno));
        return -1;
    }
    if (cred.uid != geteuid() && cred.uid != 0) {
        snprintf(err, errlen, "%s: served by uid %ld (pid %ld), not by this "
                 "user (uid %ld): refusing to talk to it", path,
                 (long)cred.uid, (long)cred.pid, (long)geteuid());
        errno = EACCES;
        return -1;
    }
    return 0;
}

/* The socket's directory must be this user's own (safe-file.h). */
static int check_directory(const char *path, char *err, size_t errlen)
{
    const char *name;
    int dirfd = safe_dir_of(path, 0, &name, err, errlen);

    if (dirfd < 0)
        return -1;
    close(dirfd);
    return 0;
}

int copsim_connect_checked(const char *path, char *err, size_t errlen)
{
    struct sockaddr_un addr;
    int sock;

    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(addr.sun_path)) {
        snprintf(err, errlen, "%s: socket path too long (at most %zu bytes)",
                 path, sizeof(addr.sun_path) - 1);
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(addr.sun_path, path);
    if (check_directory(path, err, errlen) < 0)
        return -1;
    sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sock < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        snprintf(err, errlen, "%s: cannot connect to copsim: %s", path,
                 strerror(errno));
        return close_failed(sock);
    }
    if (check_server(sock, path, err, errlen) < 0)
        return close_failed(sock);
    return sock;
}

int copsim_connect(const char *path)
{
    char err[COPSIM_TEXT_MAX];

    return copsim_connect_checked(path, err, sizeof(err));
}

void copsim_header_init(struct copsim_header *header, unsigned type,
                        size_t size)
{
    header->version = COPSIM_PROTOCOL_VERSION;
    header->type = (uint16_t)type;
    header->size = (uint32_t)size;
}

void copsim_status_set(struct copsim_status *status, int error,
                       const char *format, ...)
{
    va_list args;

    status->error = error;
    va_start(args, format);
    vsnprintf(status->message, sizeof(status->message), format, args);
    va_end(args);
}

int copsim_send(int sock, const struct copsim_header *header,
                const int *fds, unsigned n_fds)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * COPSIM_FDS_MAX)];
    } control;
    struct iovec iov = {(void *)header, header->size};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t sent;

    if (header->size < sizeof(*header) || header->size > COPSIM_MESSAGE_MAX
        || n_fds > COPSIM_FDS_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (n_fds > 0) {
        struct cmsghdr *cmsg;

        memset(&control, 0, sizeof(control));
        msg.msg_control = control.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
        cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
        memcpy(CMSG_DATA(cmsg), fds, sizeof(int) * n_fds);
    }
    do {
        sent = sendmsg(sock, &msg, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0)
        return -1;
    if ((size_t)sent != header->size) {
        errno = EMSGSIZE;
        return -1;
    }
    return 0;
}

/* Takes the descriptors out of the ancillary data. */
static void collect_fds(struct msghdr *msg, struct copsim_message *message)
{
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(msg); cmsg;
         cmsg = CMSG_NXTHDR(msg, cmsg)) {
        size_t n;

        if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS)
            continue;
        n = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; i++) {
            int fd;

            memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
            if (message->n_fds < COPSIM_FDS_MAX)
                message->fds[message->n_fds++] = fd;
            else
                close(fd);
        }
    }
}

int copsim_receive(int sock, struct copsim_message *message)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int) * COPSIM_FDS_MAX)];
    } control;
    struct iovec iov = {message->u.bytes, sizeof(message->u.bytes)};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1,
        .msg_control = control.buf, .msg_controllen = sizeof(control.buf),
    };
    ssize_t got;

    message->n_fds = 0;
    message->size = 0;
    do {
        got = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (got < 0 && errno == EINTR);
    if (got < 0)
        return -1;
    collect_fds(&msg, message);
    if (got == 0 && message->n_fds == 0)
        return 0;
    message->size = (size_t)got;
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
        || message->size < sizeof(struct copsim_header)
        || message->u.header.version != COPSIM_PROTOCOL_VERSION
        || message->u.header.size != message->size) {
        copsim_message_close_fds(message);
        errno = EPROTO;
        return -1;
    }
    return 1;
}

void copsim_message_close_fds(struct copsim_message *message)
{
    for (unsigned i = 0; i < message->n_fds; i++)
        close(message->fds[i]);
    message->n_fds = 0;
}

int copsim_wait_ready(int fd, int timeout_ms)
{
    return copsim_wait_word(fd, "ready", timeout_ms);
}

int copsim_wait_word(int fd, const char *word, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    size_t len = strlen(word);
    char buf[16];
    size_t got = 0;

    while (got < sizeof(buf) - 1) {
        int ready = poll(&pfd, 1, timeout_ms);
        ssize_t n;

        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return -1;
        n = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
        buf[got] = '\0';
        if (strchr(buf, '\n'))
            return strncmp(buf, word, len) == 0 && buf[len] == '\n' &&
                   buf[len + 1] == '\0' ? 0 : -1;
    }
    return -1;
}
