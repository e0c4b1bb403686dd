/*
 * server.c — copsim's socket and the requests of its clients.
 *
 * The socket is a SOCK_SEQPACKET UNIX socket of mode 0600 in a directory of
 * mode 0700.  Each accepted connection gets the peer's credentials from
 * SO_PEERCRED (a connection from another uid is closed at once) and its own
 * thread, which reads one request at a time and sends its reply.  RUN keeps
 * the thread until the program ends (emulator.c), which is what makes
 * cop_context_run() block; meanwhile the thread watches the socket, so a
 * host program that dies gets its contexts reaped.  When a connection ends
 * with a context still in it, the context is reaped.
 *
 * Every request is checked before use: its exact size, tids that must be
 * threads of the peer, argument strings that must be terminated inside the
 * message.  A failed request gets a reply whose status names the thing and
 * the reason; copsim writes the same line to its standard error and, as an
 * "error" record, to the event log, and goes on serving.
 */
#include "emulator/copsim/copsim-int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define CLOSE_ALL_TIMEOUT_S 10

struct connection {
    struct copsim *sim;
    int sock;
    pid_t pid;                  /* from SO_PEERCRED */
    struct sim_context *context;
    int hung_up;                /* the client left during a run */
    struct connection *next;
};

/* ---- Listening ---------------------------------------------------------- */

static int socket_address(const char *path, struct sockaddr_un *addr,
                          char *err, size_t errlen)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(addr->sun_path)) {
        snprintf(err, errlen, "%s: socket path too long (at most %zu bytes)",
                 path, sizeof(addr->sun_path) - 1);
        return -1;
    }
    strcpy(addr->sun_path, path);
    return 0;
}

/*
 * Only a stale socket is removed: one nobody listens on (connection
 * refused), left by a copsim that died.  Anything else at the path (a
 * file, a directory, a symbolic link, a socket that answers or that cannot
 * be tried) is refused and left alone.
 */
int server_check_unused(struct copsim *sim, char *err, size_t errlen)
{
    struct sockaddr_un addr;
    struct stat st;
    int sock;

    if (socket_address(sim->socket_path, &addr, err, errlen) < 0)
        return -1;
    if (lstat(sim->socket_path, &st) < 0) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, errlen, "%s: %s", sim->socket_path, strerror(errno));
        return -1;
    }
    if (!S_ISSOCK(st.st_mode)) {
        snprintf(err, errlen, "%s: exists and is not a socket; not removed",
                 sim->socket_path);
        return -1;
    }
    sock = copsim_connect(sim->socket_path);
    if (sock >= 0) {
        close(sock);
        snprintf(err, errlen, "%s: another copsim serves this socket",
                 sim->socket_path);
        return -1;
    }
    if (errno != ECONNREFUSED) {
        snprintf(err, errlen, "%s: %s; not removed", sim->socket_path,
                 strerror(errno));
        return -1;
    }
    unlink(sim->socket_path);
    return 0;
}

static int open_parent(struct copsim *sim, char *err, size_t errlen)
{
    if (sim->config.parent_pid <= 0)
        return 0;
    sim->parent_fd = (int)syscall(SYS_pidfd_open, sim->config.parent_pid, 0);
    if (sim->parent_fd < 0) {
        snprintf(err, errlen, "parent process %ld: %s",
                 (long)sim->config.parent_pid, strerror(errno));
        return -1;
    }
    return 0;
}

int server_listen(struct copsim *sim, char *err, size_t errlen)
{
    struct sockaddr_un addr;
    mode_t old_mask;
    int status;

    if (socket_address(sim->socket_path, &addr, err, errlen) < 0)
        return -1;
    if (pipe2(sim->wake_pipe, O_CLOEXEC | O_NONBLOCK) < 0
        || open_parent(sim, err, errlen) < 0) {
        if (sim->parent_fd < 0 && sim->config.parent_pid <= 0)
            snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    sim->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    sim->listen_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (sim->listen_fd < 0) {
        snprintf(err, errlen, "socket: %s", strerror(errno));
        return -1;
    }
    old_mask = umask(0177);
    status = bind(sim->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
    umask(old_mask);
    if (status < 0 || chmod(sim->socket_path, 0600) < 0
        || listen(sim->listen_fd, 64) < 0) {
        snprintf(err, errlen, "%s: cannot listen: %s", sim->socket_path,
                 strerror(errno));
        close(sim->listen_fd);
        sim->listen_fd = -1;
        return -1;
    }
    return 0;
}

/* ---- Replies ------------------------------------------------------------ */

static void send_reply(struct connection *conn, struct copsim_header *reply,
                       unsigned type, size_t size, const int *fds,
                       unsigned n_fds)
{
    copsim_header_init(reply, type | COPSIM_REPLY, size);
    if (copsim_send(conn->sock, reply, fds, n_fds) < 0 && errno != EPIPE)
        fprintf(stderr, "copsim: pid %ld: cannot reply: %s\n",
                (long)conn->pid, strerror(errno));
}

/* A reply that only carries a failure (or a plain success). */
static void reply_status(struct connection *conn, unsigned type, int error,
                         const char *message)
{
    struct copsim_destroy_reply reply;

    memset(&reply, 0, sizeof(reply));
    copsim_status_set(&reply.status, error, "%s", message);
    send_reply(conn, &reply.header, type, sizeof(reply), NULL, 0);
}

/* Reports a failed request everywhere: reply, stderr, event log. */
static void reply_error(struct connection *conn, unsigned type, int error,
                        const char *message)
{
    fprintf(stderr, "copsim: pid %ld: %s\n", (long)conn->pid, message);
    schedlog_error(&conn->sim->log,
                   conn->context ? conn->context->info.id : 0, conn->pid,
                   message);
    reply_status(conn, type, error, message);
}

/* Checks a request's size and, if it names one, its thread. */
static int check_request(struct connection *conn,
                         const struct copsim_message *m, size_t size,
                         const int32_t *tid)
{
    char text[COPSIM_TEXT_MAX];

    if (m->size != size) {
        snprintf(text, sizeof(text), "request type %u: %zu bytes, expected "
                 "%zu", m->u.header.type, m->size, size);
        reply_error(conn, m->u.header.type, EPROTO, text);
        return -1;
    }
    if (tid && !proc_is_thread_of(conn->pid, *tid)) {
        snprintf(text, sizeof(text), "thread %ld is not a thread of process "
                 "%ld", (long)*tid, (long)conn->pid);
        reply_error(conn, m->u.header.type, EPERM, text);
        return -1;
    }
    return 0;
}

static int need_context(struct connection *conn, unsigned type)
{
    if (conn->context)
        return 0;
    reply_error(conn, type, ENOENT, "no context: send CREATE first");
    return -1;
}

/* ---- Requests ----------------------------------------------------------- */

static void handle_info(struct connection *conn, const struct copsim_message *m)
{
    struct copsim *sim = conn->sim;
    struct copsim_info_reply reply;

    if (check_request(conn, m, sizeof(struct copsim_header), NULL) < 0)
        return;
    memset(&reply, 0, sizeof(reply));
    reply.pid = (int32_t)getpid();
    reply.n_slots = sim->config.n_slots;
    reply.n_contexts = sim->config.n_contexts;
    reply.fifo_depth = sim->config.fifo_depth;
    reply.slice_cycles = sim->config.slice_cycles;
    reply.max_cycles = sim->config.max_cycles;
    reply.nominal_hz = sim->config.nominal_hz;
    snprintf(reply.regs_path, sizeof(reply.regs_path), "%s", sim->regs_path);
    snprintf(reply.event_log_path, sizeof(reply.event_log_path), "%s",
             sim->event_log_path);
    send_reply(conn, &reply.header, COPSIM_INFO, sizeof(reply), NULL, 0);
}

static void handle_create(struct connection *conn,
                          const struct copsim_message *m)
{
    const struct copsim_create_request *req = (const void *)m->u.bytes;
    struct copsim_create_reply reply;
    char err[COPSIM_TEXT_MAX];
    struct sim_context *c;
    int ram_fd;

    if (check_request(conn, m, sizeof(*req), &req->tid) < 0)
        return;
    if (conn->context) {
        reply_error(conn, COPSIM_CREATE, EBUSY,
                    "this connection holds a context already");
        return;
    }
    errno = 0;
    c = sim_context_new(conn->sim, conn->pid, req->tid, req->frames,
                        req->n_frames < COPSIM_STACK_MAX ? req->n_frames
                                                         : COPSIM_STACK_MAX,
                        err, sizeof(err));
    if (!c) {
        reply_error(conn, COPSIM_CREATE, errno ? errno : EIO, err);
        return;
    }
    conn->context = c;
    memset(&reply, 0, sizeof(reply));
    reply.context_id = c->info.id;
    reply.data_offset = COP_DATA_BASE - COP_RAM_BASE;
    reply.data_size = COP_DATA_SIZE;
    ram_fd = c->ram.fd;
    if (conn->sim->slot_model)      /* its data window in main memory */
        ram_fd = slots_data_window(conn->sim, c, &reply.data_offset);
    send_reply(conn, &reply.header, COPSIM_CREATE, sizeof(reply), &ram_fd, 1);
}

static void handle_load(struct connection *conn, const struct copsim_message *m)
{
    const struct copsim_load_request *req = (const void *)m->u.bytes;
    struct copsim_load_reply reply;
    char err[COPSIM_TEXT_MAX];
    const struct copsim_image *image;

    if (check_request(conn, m, sizeof(*req), &req->tid) < 0
        || need_context(conn, COPSIM_LOAD) < 0)
        return;
    if (sim_context_load(conn->sim, conn->context, req->tid, req->object_id,
                         req->image_size, err, sizeof(err)) < 0) {
        reply_error(conn, COPSIM_LOAD, EINVAL, err);
        return;
    }
    image = &conn->context->info.image;
    memset(&reply, 0, sizeof(reply));
    reply.offset = image->offset;
    reply.device = image->device;
    reply.inode = image->inode;
    reply.file_size = image->file_size;
    reply.hash = image->hash;
    reply.anonymous = (uint32_t)image->anonymous;
    snprintf(reply.name, sizeof(reply.name), "%s", image->name);
    snprintf(reply.path, sizeof(reply.path), "%s", image->path);
    send_reply(conn, &reply.header, COPSIM_LOAD, sizeof(reply), NULL, 0);
}

/* Splits the argument strings of a RUN request; NULL if malformed. */
static char **split_args(const struct copsim_run_request *req)
{
    char **argv;
    size_t at = 0;

    if (req->argc == 0 || req->args_size > sizeof(req->args)
        || req->argc > req->args_size)
        return NULL;
    argv = calloc(req->argc + 1, sizeof(*argv));
    if (!argv)
        return NULL;
    for (uint32_t i = 0; i < req->argc; i++) {
        const char *end = memchr(req->args + at, '\0', req->args_size - at);

        if (!end) {
            free(argv);
            return NULL;
        }
        argv[i] = (char *)req->args + at;
        at = (size_t)(end - req->args) + 1;
    }
    return argv;
}

static void handle_run(struct connection *conn, const struct copsim_message *m)
{
    const struct copsim_run_request *req = (const void *)m->u.bytes;
    struct sim_context *c = conn->context;
    struct copsim_run_reply reply;
    struct run_result result;
    char err[COPSIM_TEXT_MAX];
    char **argv;
    int status;

    if (check_request(conn, m, sizeof(*req), &req->tid) < 0
        || need_context(conn, COPSIM_RUN) < 0)
        return;
    if (!c->loaded) {
        reply_error(conn, COPSIM_RUN, ENOEXEC, "no program loaded: send LOAD "
                    "first");
        return;
    }
    if (m->n_fds != 1) {
        reply_error(conn, COPSIM_RUN, EINVAL, "RUN carries exactly one "
                    "descriptor, the console's");
        return;
    }
    argv = split_args(req);
    if (!argv) {
        reply_error(conn, COPSIM_RUN, EINVAL, "RUN: malformed arguments");
        return;
    }
    c->info.tid = req->tid;
    status = emulator_run(conn->sim, c, conn->sock, m->fds[0], (int)req->argc,
                          argv, req->max_cycles ? req->max_cycles
                                                : conn->sim->config.max_cycles,
                          &result, err, sizeof(err));
    free(argv);
    if (result.client_gone) {
        conn->hung_up = 1;
        return;
    }
    if (status < 0) {
        reply_error(conn, COPSIM_RUN, EIO, err);
        return;
    }
    memset(&reply, 0, sizeof(reply));
    reply.stop_reason = result.stop_reason;
    reply.exit_status = result.exit_status;
    reply.instructions = result.instructions;
    scheduler_counts(&conn->sim->sched, c, &reply.binds, &reply.preemptions);
    snprintf(reply.detail, sizeof(reply.detail), "%s", result.detail);
    send_reply(conn, &reply.header, COPSIM_RUN, sizeof(reply), NULL, 0);
}

static void handle_destroy(struct connection *conn,
                           const struct copsim_message *m)
{
    if (check_request(conn, m, sizeof(struct copsim_header), NULL) < 0
        || need_context(conn, COPSIM_DESTROY) < 0)
        return;
    sim_context_free(conn->sim, conn->context, 0);
    conn->context = NULL;
    reply_status(conn, COPSIM_DESTROY, 0, "");
}

static int handle_driver(struct connection *conn,
                         const struct copsim_message *m)
{
    copsim_request_handler handler;
    void *data;

    pthread_mutex_lock(&conn->sim->lock);
    handler = conn->sim->driver_requests;
    data = conn->sim->driver_data;
    pthread_mutex_unlock(&conn->sim->lock);
    if (handler)
        return handler(data, conn->sock, m, conn->pid);
    reply_error(conn, m->u.header.type, ENOSYS,
                "driver request: no driver runs in this copsim");
    return 0;
}

/* Serves one request; returns -1 to hang up. */
static int dispatch(struct connection *conn, const struct copsim_message *m)
{
    unsigned type = m->u.header.type;
    char text[96];

    switch (type) {
    case COPSIM_INFO:
        handle_info(conn, m);
        return 0;
    case COPSIM_CREATE:
        handle_create(conn, m);
        return 0;
    case COPSIM_LOAD:
        handle_load(conn, m);
        return 0;
    case COPSIM_RUN:
        handle_run(conn, m);
        return conn->hung_up ? -1 : 0;
    case COPSIM_DESTROY:
        handle_destroy(conn, m);
        return 0;
    }
    if (type >= COPSIM_DRIVER_FIRST && type <= COPSIM_DRIVER_LAST)
        return handle_driver(conn, m);
    snprintf(text, sizeof(text), "unknown request type %u", type);
    reply_error(conn, type, ENOSYS, text);
    return 0;
}

/* ---- Connections -------------------------------------------------------- */

static void forget_connection(struct connection *conn)
{
    struct copsim *sim = conn->sim;
    struct connection **link;

    pthread_mutex_lock(&sim->lock);
    for (link = &sim->connection_list; *link; link = &(*link)->next)
        if (*link == conn) {
            *link = conn->next;
            break;
        }
    sim->connections--;
    pthread_cond_broadcast(&sim->idle);
    pthread_mutex_unlock(&sim->lock);
}

static void *connection_main(void *arg)
{
    struct connection *conn = arg;
    struct copsim_message *m = malloc(sizeof(*m));
    sigset_t pipe_signal;
    int got;

    /* A console whose reader went away gives EPIPE here, not a SIGPIPE
     * that would end the whole process (copsim may be a library). */
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, NULL);

    while (m && (got = copsim_receive(conn->sock, m)) != 0) {
        if (got < 0 && errno == EPROTO) {
            reply_error(conn, 0, EPROTO, "malformed message (wrong version "
                        "or size)");
            continue;
        }
        if (got < 0)
            break;
        got = dispatch(conn, m);
        copsim_message_close_fds(m);
        if (got < 0)
            break;
    }
    free(m);
    if (conn->context)
        sim_context_free(conn->sim, conn->context, 1);
    close(conn->sock);
    forget_connection(conn);
    free(conn);
    return NULL;
}

static void start_connection(struct copsim *sim, int sock)
{
    struct connection *conn = calloc(1, sizeof(*conn));
    struct ucred cred;
    socklen_t len = sizeof(cred);
    pthread_attr_t attr;
    pthread_t thread;

    if (!conn || getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0
        || cred.uid != getuid()) {
        if (conn)
            fprintf(stderr, "copsim: refused a connection from uid %ld\n",
                    (long)cred.uid);
        free(conn);
        close(sock);
        return;
    }
    conn->sim = sim;
    conn->sock = sock;
    conn->pid = cred.pid;
    pthread_mutex_lock(&sim->lock);
    conn->next = sim->connection_list;
    sim->connection_list = conn;
    sim->connections++;
    pthread_mutex_unlock(&sim->lock);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, connection_main, conn) != 0) {
        fprintf(stderr, "copsim: cannot start a connection thread\n");
        forget_connection(conn);
        close(sock);
        free(conn);
    }
    pthread_attr_destroy(&attr);
}

/* No descriptor is left for a connection: the spare one is given up to
 * accept it and close it at once (its client reads the connection's end),
 * so that the socket does not stay readable and the loop spin; then it is
 * taken again. */
static void refuse_connection(struct copsim *sim, int error)
{
    char why[COPSIM_TEXT_MAX];
    int sock;

    fprintf(stderr, "copsim: a connection refused: %s\n",
            copsim_fd_error(error, why, sizeof(why)));
    if (sim->spare_fd >= 0)
        close(sim->spare_fd);
    sock = accept4(sim->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (sock >= 0)
        close(sock);
    sim->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

int server_accept_loop(struct copsim *sim)
{
    for (;;) {
        struct pollfd fds[3] = {
            {sim->listen_fd, POLLIN, 0},
            {sim->wake_pipe[0], POLLIN, 0},
            {sim->parent_fd, POLLIN, 0},
        };
        int sock;

        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "copsim: poll: %s\n", strerror(errno));
            return -1;
        }
        if (fds[1].revents || fds[2].revents)
            return 0;
        sock = accept4(sim->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (sock >= 0)
            start_connection(sim, sock);
        else if (errno == EMFILE || errno == ENFILE)
            refuse_connection(sim, errno);
        else if (errno != EINTR && errno != ECONNABORTED)
            fprintf(stderr, "copsim: accept: %s\n", strerror(errno));
    }
}

void server_close_all(struct copsim *sim)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += CLOSE_ALL_TIMEOUT_S;
    pthread_mutex_lock(&sim->lock);
    for (struct connection *c = sim->connection_list; c; c = c->next)
        shutdown(c->sock, SHUT_RDWR);
    while (sim->connections > 0)
        if (pthread_cond_timedwait(&sim->idle, &sim->lock, &until) != 0)
            break;
    pthread_mutex_unlock(&sim->lock);
}
