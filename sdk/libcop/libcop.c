/*
 * libcop.c — coprocessor contexts for host programs (sdk/libcop.h).
 *
 * A context is one connection to copsim (abi/copsim-protocol.h): its
 * requests go out one at a time and each waits for its reply, so a context
 * needs no lock of its own and contexts of different threads never share
 * anything but the private-copsim bookkeeping in private.c.
 *
 *   create   sends the thread id and the call stack (backtrace(), innermost
 *            first, without libcop's own frame); the reply brings the
 *            context's guest RAM file, whose data window part is mapped
 *            here (MAP_SHARED), so host and program share those bytes;
 *   load     sends the object-id, the address of the image's ELF header in
 *            this process, which copsim resolves through /proc/PID/maps;
 *            an image file is mapped read-only first, so it gets one too;
 *   run      sends the arguments and the console's descriptor, then blocks
 *            in the reply, which comes when the program has ended.
 */
#include "sdk/libcop.h"

#include "abi/cop-abi.h"
#include "common/copsim-socket.h"
#include "sdk/libcop/libcop-int.h"
#include "common/safe-file.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct cop_context {
    int sock;
    uint64_t id;
    unsigned char *data;        /* the data window, mapped */
    size_t data_size;
    int console_fd;             /* -1: standard output */
    uint64_t max_cycles;
    void *file_map;             /* an image file loaded by path */
    size_t file_size;
    int loaded;
    int lost;                   /* copsim hung up: said once */
    struct cop_context_image image;
};

static __thread char last_error[COPSIM_TEXT_MAX + 128];

int libcop_fail(const char *format, ...)
{
    int error = errno;
    va_list args;

    va_start(args, format);
    vsnprintf(last_error, sizeof(last_error), format, args);
    va_end(args);
    errno = error;
    return -1;
}

const char *cop_last_error(void)
{
    return last_error;
}

/* Checks a reply to request `type`; -1 with the error (copsim's own message
 * when the request failed there) and errno set. */
static int check_reply(const struct copsim_message *m, unsigned type,
                       size_t reply_size)
{
    const struct copsim_status *status =
        (const void *)(m->u.bytes + sizeof(struct copsim_header));

    if (m->u.header.type != (type | COPSIM_REPLY)
        || m->size < sizeof(struct copsim_header) + sizeof(*status)) {
        errno = EPROTO;
        return libcop_fail("copsim: unexpected reply to request %u", type);
    }
    if (status->error) {
        libcop_fail("%.*s", (int)sizeof(status->message), status->message);
        errno = status->error;
        return -1;
    }
    if (m->size != reply_size) {
        errno = EPROTO;
        return libcop_fail("copsim: reply to request %u has %zu bytes, "
                           "expected %zu", type, m->size, reply_size);
    }
    return 0;
}

/* The connection to copsim failed with error (ECONNRESET: it hung up);
 * -1 with errno and the error set, also printed under a profiling
 * session (libcop_copsim_gone). */
static int copsim_lost(const char *what, int error)
{
    char path[COPSIM_PATH_MAX];

    if (copsim_socket_path(path, sizeof(path)) == 0
        && libcop_copsim_gone(path, error) < 0)
        return -1;
    errno = error;
    if (error == ECONNRESET)
        return libcop_fail("copsim: hung up (did it stop?)");
    return libcop_fail("copsim: %s: %s", what, strerror(error));
}

/*
 * Sends a request and waits for its reply of reply_size bytes.  Returns 0,
 * or -1 with the error set.  A descriptor that comes with the reply goes to
 * *fd (when fd is not NULL), else it is closed.
 */
static int transact(cop_context_t *ctx, struct copsim_header *request,
                    const int *fds, unsigned n_fds, unsigned type,
                    void *reply, size_t reply_size, int *fd)
{
    struct copsim_message *m = malloc(sizeof(*m));
    int got, status;

    if (!m)
        return libcop_fail("out of memory");
    if (ctx->lost) {
        free(m);
        errno = ECONNRESET;
        return libcop_fail("copsim: hung up before (did it stop?)");
    }
    if (copsim_send(ctx->sock, request, fds, n_fds) < 0) {
        int error = errno;

        free(m);
        ctx->lost = 1;
        return copsim_lost("cannot send a request", error);
    }
    got = copsim_receive(ctx->sock, m);
    if (got <= 0) {
        int error = got == 0 ? ECONNRESET : errno;

        free(m);
        ctx->lost = 1;
        return copsim_lost("cannot receive a reply", error);
    }
    status = check_reply(m, type, reply_size);
    if (status == 0) {
        memcpy(reply, m->u.bytes, reply_size);
        if (fd && m->n_fds == 1) {
            *fd = m->fds[0];
            m->n_fds = 0;
        }
    }
    copsim_message_close_fds(m);
    free(m);
    return status;
}

/*
 * The return addresses from `caller` (cop_context_create()'s own return
 * address) outwards: the frames before it are libcop's, and whatever sits
 * between backtrace() and its caller (a sanitizer's interceptor).
 */
static uint32_t capture_stack(uint64_t *frames, const void *caller)
{
    void *addresses[COPSIM_STACK_MAX + 4];
    int n = backtrace(addresses, COPSIM_STACK_MAX + 4);
    int first = 1;
    uint32_t count = 0;

    for (int i = 0; i < n && i < 4; i++)
        if (addresses[i] == caller) {
            first = i;
            break;
        }
    for (int i = first; i < n && count < COPSIM_STACK_MAX; i++)
        frames[count++] = (uint64_t)(uintptr_t)addresses[i];
    return count;
}

static int map_data_window(cop_context_t *ctx, int ram_fd,
                           const struct copsim_create_reply *reply)
{
    void *data = mmap(NULL, reply->data_size, PROT_READ | PROT_WRITE,
                      MAP_SHARED, ram_fd, (off_t)reply->data_offset);

    if (data == MAP_FAILED)
        return libcop_fail("context %llu: cannot map the data window: %s",
                           (unsigned long long)reply->context_id,
                           strerror(errno));
    ctx->data = data;
    ctx->data_size = reply->data_size;
    return 0;
}

cop_context_t *cop_context_create(void)
{
    cop_context_t *ctx = calloc(1, sizeof(*ctx));
    struct copsim_create_request request;
    struct copsim_create_reply reply;
    int ram_fd = -1, status;

    if (!ctx) {
        libcop_fail("out of memory");
        return NULL;
    }
    ctx->console_fd = -1;
    memset(&request, 0, sizeof(request));
    request.tid = gettid();
    request.n_frames = capture_stack(request.frames,
                                     __builtin_return_address(0));
    copsim_header_init(&request.header, COPSIM_CREATE, sizeof(request));
    ctx->sock = libcop_connect();
    if (ctx->sock < 0) {
        free(ctx);
        return NULL;
    }
    status = transact(ctx, &request.header, NULL, 0, COPSIM_CREATE, &reply,
                      sizeof(reply), &ram_fd);
    if (status == 0 && ram_fd < 0)
        status = libcop_fail("copsim: no guest RAM came with the context");
    if (status == 0)
        status = map_data_window(ctx, ram_fd, &reply);
    if (ram_fd >= 0)
        close(ram_fd);
    if (status < 0) {
        close(ctx->sock);
        free(ctx);
        return NULL;
    }
    ctx->id = reply.context_id;
    return ctx;
}

/* Sends LOAD for size bytes at image. */
static int load_object(cop_context_t *ctx, const void *image, uint64_t size)
{
    struct copsim_load_request request;
    struct copsim_load_reply reply;

    memset(&request, 0, sizeof(request));
    request.tid = gettid();
    request.object_id = (uint64_t)(uintptr_t)image;
    request.image_size = size;
    copsim_header_init(&request.header, COPSIM_LOAD, sizeof(request));
    if (transact(ctx, &request.header, NULL, 0, COPSIM_LOAD, &reply,
                 sizeof(reply), NULL) < 0)
        return -1;
    memset(&ctx->image, 0, sizeof(ctx->image));
    snprintf(ctx->image.name, sizeof(ctx->image.name), "%s", reply.name);
    snprintf(ctx->image.path, sizeof(ctx->image.path), "%s", reply.path);
    ctx->image.offset = reply.offset;
    ctx->image.device = reply.device;
    ctx->image.inode = reply.inode;
    ctx->image.file_size = reply.file_size;
    ctx->image.hash = reply.hash;
    ctx->image.anonymous = (int)reply.anonymous;
    ctx->loaded = 1;
    return 0;
}

static void unmap_file(cop_context_t *ctx)
{
    if (ctx->file_map)
        munmap(ctx->file_map, ctx->file_size);
    ctx->file_map = NULL;
    ctx->file_size = 0;
}

int cop_context_load(cop_context_t *ctx, const cop_program_handle_t *handle)
{
    if (!handle || handle->handle_size < sizeof(*handle) || !handle->elf_image)
        return libcop_fail("context %llu: not a program handle (from "
                           "cop-embed)", (unsigned long long)ctx->id);
    if (load_object(ctx, handle->elf_image, handle->image_size) < 0)
        return -1;
    unmap_file(ctx);
    return 0;
}

int cop_context_load_file(cop_context_t *ctx, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *map;

    if (fd < 0)
        return libcop_fail("%s: %s", path, strerror(errno));
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        return libcop_fail("%s: not a regular, non-empty file", path);
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return libcop_fail("%s: cannot map: %s", path, strerror(errno));
    if (load_object(ctx, map, (uint64_t)st.st_size) < 0) {
        munmap(map, (size_t)st.st_size);
        return -1;
    }
    unmap_file(ctx);
    ctx->file_map = map;
    ctx->file_size = (size_t)st.st_size;
    return 0;
}

static void replace_console(cop_context_t *ctx, int fd)
{
    if (ctx->console_fd >= 0)
        close(ctx->console_fd);
    ctx->console_fd = fd;
}

int cop_context_set_console(cop_context_t *ctx, int fd)
{
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);

    if (copy < 0)
        return libcop_fail("console descriptor %d: %s", fd, strerror(errno));
    replace_console(ctx, copy);
    return 0;
}

/* The file is made by common/safe-file.h's rule (no planted link
 * followed, a new 0600 file put in place at once). */
int cop_context_set_console_file(cop_context_t *ctx, const char *path)
{
    struct safe_out out;
    char err[512];
    int fd;

    if (safe_out_open(&out, path, SAFE_OUT_PLACE, err, sizeof(err)) < 0)
        return libcop_fail("%s", err);
    fd = out.fd;
    out.fd = -1;                /* the context keeps it */
    safe_out_close(&out, NULL, 1, err, sizeof(err));
    replace_console(ctx, fd);
    return 0;
}

void cop_context_set_cycle_limit(cop_context_t *ctx, uint64_t cycles)
{
    ctx->max_cycles = cycles;
}

void *cop_context_data(cop_context_t *ctx, size_t *size)
{
    if (size)
        *size = ctx->data_size - COP_MBOX_SIZE;
    return ctx->data;
}

volatile struct cop_mbox *libcop_mailbox(cop_context_t *ctx)
{
    return (volatile struct cop_mbox *)(ctx->data + COP_MBOX_OFFSET);
}

/* Packs argv into the request; -1 when it does not fit. */
static int pack_args(struct copsim_run_request *request, int argc,
                     char *const argv[])
{
    size_t used = 0;

    for (int i = 0; i < argc; i++) {
        size_t len = strlen(argv[i]) + 1;

        if (len > sizeof(request->args) - used)
            return -1;
        memcpy(request->args + used, argv[i], len);
        used += len;
    }
    request->argc = (uint32_t)argc;
    request->args_size = (uint32_t)used;
    return 0;
}

int cop_context_run(cop_context_t *ctx, int argc, char *const argv[],
                    struct cop_stop_info *stop)
{
    struct copsim_run_request *request = calloc(1, sizeof(*request));
    char *default_argv[] = {ctx->image.name, NULL};
    struct copsim_run_reply reply;
    int console = ctx->console_fd >= 0 ? ctx->console_fd : STDOUT_FILENO;
    int status;

    if (!request)
        return libcop_fail("out of memory");
    if (argc <= 0) {
        argc = 1;
        argv = default_argv;
    }
    if (pack_args(request, argc, argv) < 0) {
        free(request);
        return libcop_fail("context %llu: the arguments exceed %d bytes",
                           (unsigned long long)ctx->id, COPSIM_ARGS_MAX);
    }
    request->tid = gettid();
    request->max_cycles = ctx->max_cycles;
    copsim_header_init(&request->header, COPSIM_RUN, sizeof(*request));
    if (console == STDOUT_FILENO)
        fflush(stdout);
    status = transact(ctx, &request->header, &console, 1, COPSIM_RUN, &reply,
                      sizeof(reply), NULL);
    free(request);
    if (status < 0)
        return -1;
    memset(stop, 0, sizeof(*stop));
    stop->reason = reply.stop_reason == COPSIM_STOP_EXIT ? COP_STOP_EXIT
                                                         : COP_STOP_FAULT;
    stop->status = reply.exit_status;
    stop->instructions = reply.instructions;
    stop->binds = reply.binds;
    stop->preemptions = reply.preemptions;
    snprintf(stop->fault, sizeof(stop->fault), "%s", reply.detail);
    return 0;
}

uint64_t cop_context_id(const cop_context_t *ctx)
{
    return ctx->id;
}

int cop_context_image(const cop_context_t *ctx, struct cop_context_image *image)
{
    if (!ctx->loaded)
        return libcop_fail("context %llu: nothing loaded",
                           (unsigned long long)ctx->id);
    *image = ctx->image;
    return 0;
}

int cop_context_destroy(cop_context_t *ctx)
{
    struct copsim_header request;
    struct copsim_destroy_reply reply;
    int status;

    if (!ctx)
        return 0;
    copsim_header_init(&request, COPSIM_DESTROY, sizeof(request));
    status = transact(ctx, &request, NULL, 0, COPSIM_DESTROY, &reply,
                      sizeof(reply), NULL);
    close(ctx->sock);
    if (ctx->data)
        munmap(ctx->data, ctx->data_size);
    unmap_file(ctx);
    replace_console(ctx, -1);
    free(ctx);
    return status;
}
