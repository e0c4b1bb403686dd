/*
 * copsim.c — creating and destroying a copsim, and its contexts.
 *
 * copsim_create() sets up, in this order: the state directory (owner
 * only), a check that no other copsim serves the socket, the register file
 * (a fresh one, removed again at the end), the event log, the scheduler
 * thread, and the listening socket.  copsim_destroy() undoes it, hanging up
 * every client first so that every emulator is killed and every context
 * retired (their unbind hooks run) before the driver's stop hook.
 *
 * A context owns one block of the register file (allocated here, reused
 * once its owner is gone), a guest RAM file whose pages are reserved up
 * front so that a full disk or tmpfs is an error at creation rather than a
 * SIGBUS in the middle of a run, the formatted call stack of its creator,
 * and, once loaded, the image's bytes, parsed, with their identity.
 */
#include "emulator/copsim/copsim-int.h"

#include "trace-unit/trace-unit.h"
#include "common/safe-file.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <inttypes.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REGS_NAME       "copsim.regs"
#define LOG_NAME        "copsim.coplog"
#define IMAGES_NAME     "images"
#define STACK_TEXT_MAX  1000    /* what one event-log string holds */

/* Makes dir (mode 0700) unless it exists; an existing one must be this
 * user's own, a real directory nobody else can write (safe-file.h).
 * *created says whether this call made it. */
static int make_private_dir(const char *dir, int *created, char *err,
                            size_t errlen)
{
    int fd;

    *created = mkdir(dir, SAFE_DIR_MODE) == 0;
    if (!*created && errno != EEXIST) {
        snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
        return -1;
    }
    fd = safe_dir_open(dir, 0, err, errlen);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

const char *copsim_fd_error(int error, char *buf, size_t len)
{
    struct rlimit limit = { 0, 0 };

    if (error != EMFILE && error != ENFILE)
        snprintf(buf, len, "%s", strerror(error));
    else if (getrlimit(RLIMIT_NOFILE, &limit) == 0)
        snprintf(buf, len, "%s (copsim may open %llu files)",
                 strerror(error), (unsigned long long)limit.rlim_cur);
    else
        snprintf(buf, len, "%s", strerror(error));
    return buf;
}

_Static_assert(COPSIM_SLOT_DEFAULT_CONTEXTS <= TRACE_MAX_CONTEXTS,
               "the register file's limit");

static void apply_defaults(struct copsim_config *config)
{
    if (!config->n_slots)
        config->n_slots = COPSIM_DEFAULT_SLOTS;
    if (!config->n_contexts)    /* a waiting slot context is small */
        config->n_contexts = config->slot_model ? COPSIM_SLOT_DEFAULT_CONTEXTS
                                                : COPSIM_DEFAULT_CONTEXTS;
    if (!config->fifo_depth)
        config->fifo_depth = TRACE_DEFAULT_FIFO_DEPTH;
    if (!config->slice_cycles)
        config->slice_cycles = COPSIM_DEFAULT_SLICE;
    if (!config->nominal_hz)
        config->nominal_hz = COPSIM_DEFAULT_NOMINAL_HZ;
    if (!config->tick_us)
        config->tick_us = COPSIM_DEFAULT_TICK_US;
}

/* Paths of the socket, the state directory and what lives in it. */
static int choose_paths(struct copsim *sim, char *err, size_t errlen)
{
    char socket_path[COPSIM_PATH_MAX];
    const char *config_log = sim->config.event_log_path;

    if (sim->config.socket_path)
        snprintf(socket_path, sizeof(socket_path), "%s",
                 sim->config.socket_path);
    else if (copsim_socket_path(socket_path, sizeof(socket_path)) < 0) {
        snprintf(err, errlen, "the socket path is too long");
        return -1;
    }
    sim->socket_path = g_strdup(socket_path);
    sim->state_dir = sim->config.state_dir ? g_strdup(sim->config.state_dir)
                                           : g_path_get_dirname(socket_path);
    sim->images_dir = g_build_filename(sim->state_dir, IMAGES_NAME, NULL);
    sim->regs_path = g_build_filename(sim->state_dir, REGS_NAME, NULL);
    sim->event_log_path = config_log ? g_strdup(config_log)
                          : g_build_filename(sim->state_dir, LOG_NAME, NULL);
    if (make_private_dir(sim->state_dir, &sim->made_state_dir, err,
                         errlen) < 0
        || make_private_dir(sim->images_dir, &sim->made_images_dir, err,
                            errlen) < 0)
        return -1;
    return 0;
}

static int find_plugin(struct copsim *sim, char *err, size_t errlen)
{
    char path[COPSIM_PATH_MAX];

    if (sim->config.plugin_path) {
        sim->plugin_path = g_strdup(sim->config.plugin_path);
    } else if (trace_plugin_path(path, sizeof(path)) == 0) {
        sim->plugin_path = g_strdup(path);
    } else {
        snprintf(err, errlen, "libcoptrace.so not found beside copsim "
                 "(../lib or ../lib/coprof); set COPROF_TRACE_PLUGIN");
        return -1;
    }
    if (access(sim->plugin_path, R_OK) < 0) {
        snprintf(err, errlen, "%s: %s", sim->plugin_path, strerror(errno));
        return -1;
    }
    return 0;
}

static int create_register_file(struct copsim *sim, char *err, size_t errlen)
{
    struct trace_geometry geometry;

    trace_geometry_default(&geometry);
    geometry.n_slots = sim->config.n_slots;
    geometry.n_contexts = sim->config.n_contexts;
    geometry.fifo_depth = sim->config.fifo_depth;
    geometry.stack_depth = sim->config.call_graph;
    unlink(sim->regs_path);     /* a dead copsim's: nobody serves it */
    sim->unit = trace_unit_create(sim->regs_path, &geometry, err, errlen);
    if (!sim->unit)
        return -1;
    trace_unit_set_controller(sim->unit, getpid());
    return 0;
}

static int start_scheduler(struct copsim *sim, char *err, size_t errlen)
{
    struct copsim_info info = {
        .unit = sim->unit,
        .regs_path = sim->regs_path,
        .n_slots = sim->config.n_slots,
        .slice_cycles = sim->config.slice_cycles,
        .nominal_hz = sim->config.nominal_hz,
        .event_log_path = sim->event_log_path,
    };

    if (scheduler_init(&sim->sched, sim->unit, &sim->log, &info,
                       sim->config.tick_us, err, errlen) < 0)
        return -1;
    return scheduler_start(&sim->sched, err, errlen);
}

/* An option's DIR must be a directory we can write in. */
static int check_writable_dir(const char *option, const char *dir, char *err,
                              size_t errlen)
{
    struct stat st;

    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s %s: not a directory", option, dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) < 0) {
        snprintf(err, errlen, "%s %s: %s", option, dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* The guest RAM files' directory, checked now rather than at the first
 * context. */
static int check_ram_dir(struct copsim *sim, char *err, size_t errlen)
{
    const char *dir = sim->config.ram_dir;

    return dir ? check_writable_dir("--ram-dir", dir, err, errlen) : 0;
}

/*
 * --exact-counts DIR by the safe-write rule (common/safe-file.h): no
 * planted link followed, created 0700 or required to be this user's.  The
 * plugins, children of ours, reach it through our descriptor
 * (/proc/PID/fd/N), never by its name again, so it cannot be swapped
 * after the check.
 */
static int check_counts_dir(struct copsim *sim, char *err, size_t errlen)
{
    const char *dir = sim->config.exact_counts_dir;
    char why[512];

    if (!dir)
        return 0;
    sim->counts_fd = safe_dir_make(dir, why, sizeof(why));
    if (sim->counts_fd < 0) {
        snprintf(err, errlen, "--exact-counts: %s", why);
        return -1;
    }
    if (asprintf(&sim->counts_dir, "/proc/%d/fd/%d", (int)getpid(),
                 sim->counts_fd) < 0) {
        sim->counts_dir = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int copsim_counts_path(const struct copsim *sim, const struct sim_context *c,
                       char *buf, size_t len)
{
    int n = snprintf(buf, len, "%s/" TRACE_COUNTS_NAME, sim->counts_dir,
                     (unsigned long long)c->info.id);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

struct copsim *copsim_create(const struct copsim_config *config,
                             char *err, size_t errlen)
{
    struct copsim *sim = calloc(1, sizeof(*sim));

    if (!sim) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    sim->config = *config;
    apply_defaults(&sim->config);
    sim->listen_fd = -1;
    sim->wake_pipe[0] = sim->wake_pipe[1] = -1;
    sim->spare_fd = -1;
    sim->parent_fd = -1;
    sim->counts_fd = -1;
    sim->next_context_id = 1;
    pthread_mutex_init(&sim->lock, NULL);
    pthread_cond_init(&sim->idle, NULL);
    hash_cache_init(&sim->hashes);
    sim->context_used = calloc(sim->config.n_contexts, 1);
    if (!sim->context_used || choose_paths(sim, err, errlen) < 0
        || find_plugin(sim, err, errlen) < 0
        || check_ram_dir(sim, err, errlen) < 0
        || check_counts_dir(sim, err, errlen) < 0
        || server_check_unused(sim, err, errlen) < 0
        || create_register_file(sim, err, errlen) < 0
        || schedlog_open(&sim->log, sim->event_log_path, err, errlen) < 0
        || start_scheduler(sim, err, errlen) < 0
        || (sim->config.slot_model && slots_start(sim, err, errlen) < 0)
        || server_listen(sim, err, errlen) < 0) {
        if (!sim->context_used)
            snprintf(err, errlen, "out of memory");
        copsim_destroy(sim);
        return NULL;
    }
    schedlog_start(&sim->log, sim->config.n_slots, sim->config.slice_cycles,
                   sim->config.nominal_hz);
    sim->started = 1;
    return sim;
}

int copsim_serve(struct copsim *sim)
{
    return server_accept_loop(sim);
}

void copsim_shutdown(struct copsim *sim)
{
    char byte = 1;

    if (write(sim->wake_pipe[1], &byte, 1) < 0)
        return;     /* the pipe is full: a shutdown is pending already */
}

/*
 * A private copsim leaves nothing behind: its image copies, its default
 * event log and its state directory go (a directory someone else put files
 * in stays).  One that did not start owns none of them (the state
 * directory may be another copsim's, serving): it removes only the
 * directories it made itself.
 */
static void remove_private_state(struct copsim *sim)
{
    GDir *dir = sim->started ? g_dir_open(sim->images_dir, 0, NULL) : NULL;
    const char *name;

    while (dir && (name = g_dir_read_name(dir))) {
        char *path = g_build_filename(sim->images_dir, name, NULL);

        unlink(path);
        g_free(path);
    }
    if (dir)
        g_dir_close(dir);
    if (sim->started || sim->made_images_dir)
        rmdir(sim->images_dir);
    if (sim->started && !sim->config.event_log_path)
        unlink(sim->event_log_path);
    if (sim->started || sim->made_state_dir)
        rmdir(sim->state_dir);
}

void copsim_destroy(struct copsim *sim)
{
    if (!sim)
        return;
    server_close_all(sim);
    if (sim->sched.slots) {
        scheduler_hooks_remove(&sim->sched);
        scheduler_stop(&sim->sched);
        scheduler_destroy(&sim->sched);
    }
    slots_stop(sim);
    if (sim->log.log) {
        schedlog_stop(&sim->log);
        schedlog_close(&sim->log);
    }
    if (sim->unit)
        trace_unit_close(sim->unit, 1);
    if (sim->listen_fd >= 0) {
        close(sim->listen_fd);
        unlink(sim->socket_path);
    }
    for (int i = 0; i < 2; i++)
        if (sim->wake_pipe[i] >= 0)
            close(sim->wake_pipe[i]);
    if (sim->parent_fd >= 0)
        close(sim->parent_fd);
    if (sim->spare_fd >= 0)
        close(sim->spare_fd);
    if (sim->config.parent_pid > 0 && sim->images_dir)
        remove_private_state(sim);
    hash_cache_free(&sim->hashes);
    pthread_cond_destroy(&sim->idle);
    pthread_mutex_destroy(&sim->lock);
    free(sim->context_used);
    g_free(sim->socket_path);
    g_free(sim->state_dir);
    g_free(sim->images_dir);
    g_free(sim->regs_path);
    free(sim->counts_dir);
    if (sim->counts_fd >= 0)
        close(sim->counts_fd);
    g_free(sim->event_log_path);
    g_free(sim->plugin_path);
    free(sim);
}

int copsim_hooks_install(struct copsim *sim, const struct copsim_hooks *hooks,
                         char *err, size_t errlen)
{
    return scheduler_hooks_install(&sim->sched, hooks, err, errlen);
}

void copsim_hooks_remove(struct copsim *sim)
{
    scheduler_hooks_remove(&sim->sched);
}

int copsim_set_driver_requests(struct copsim *sim,
                               copsim_request_handler handler, void *data)
{
    pthread_mutex_lock(&sim->lock);
    sim->driver_requests = handler;
    sim->driver_data = data;
    pthread_mutex_unlock(&sim->lock);
    return 0;
}

/* ---- Contexts ----------------------------------------------------------- */

/* A free register file block, or -1. */
static int take_block(struct copsim *sim, uint64_t *id)
{
    int block = -1;

    pthread_mutex_lock(&sim->lock);
    for (uint32_t i = 0; i < sim->config.n_contexts && block < 0; i++)
        if (!sim->context_used[i]) {
            sim->context_used[i] = 1;
            block = (int)i;
        }
    *id = sim->next_context_id++;
    pthread_mutex_unlock(&sim->lock);
    return block;
}

static void give_block(struct copsim *sim, uint32_t block)
{
    pthread_mutex_lock(&sim->lock);
    sim->context_used[block] = 0;
    pthread_mutex_unlock(&sim->lock);
}

/*
 * The RAM file, with every page reserved now.  In --ram-dir it is made new
 * (cop_ram_create_new): a file of the same name, left by a copsim that
 * died or planted there, is removed first and never written through.
 */
static int create_ram(struct copsim *sim, struct sim_context *c, char *err,
                      size_t errlen)
{
    char path[COPSIM_PATH_MAX];
    struct cop_error cerr;
    int status;

    if (sim->config.ram_dir) {
        snprintf(path, sizeof(path), "%s/ram-%" PRIu64, sim->config.ram_dir,
                 c->info.id);
        unlink(path);
        status = cop_ram_create_new(&c->ram, path, &cerr);
    } else {
        status = cop_ram_create(&c->ram, NULL, &cerr);
    }
    if (status < 0) {
        int error = errno;

        snprintf(err, errlen, "%s", cerr.message);
        if (sim->config.ram_dir)
            unlink(path);
        errno = error;
        return -1;
    }
    c->info.ram = c->ram.base;
    c->info.ram_size = COP_RAM_SIZE;
    return 0;
}

static char *format_stack(pid_t pid, const uint64_t *frames, size_t n_frames)
{
    struct proc_maps maps;
    char text[STACK_TEXT_MAX], err[256];

    if (proc_maps_read(pid, &maps, err, sizeof(err)) < 0)
        return strdup("");
    format_call_stack(&maps, frames, n_frames, text, sizeof(text));
    proc_maps_free(&maps);
    return strdup(text);
}

/* Context ids are never reused within a copsim, but an older copsim may
 * have left a file of that name: the plugin appends to it, run after run. */
static void forget_counts(const struct copsim *sim, const struct sim_context *c)
{
    char path[COPSIM_PATH_MAX];

    if (sim->counts_dir
        && copsim_counts_path(sim, c, path, sizeof(path)) == 0)
        unlink(path);
}

struct sim_context *sim_context_new(struct copsim *sim, pid_t pid, pid_t tid,
                                    const uint64_t *frames, size_t n_frames,
                                    char *err, size_t errlen)
{
    struct sim_context *c = calloc(1, sizeof(*c));
    int block;

    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    block = take_block(sim, &c->info.id);
    if (block < 0) {
        snprintf(err, errlen, "all %u contexts of the register file are "
                 "in use", sim->config.n_contexts);
        free(c);
        errno = EAGAIN;
        return NULL;
    }
    c->info.trace_context = (uint32_t)block;
    c->info.pid = pid;
    c->info.tid = tid;
    c->info.image.path = "";
    c->info.image.name = c->name;
    c->slot = -1;
    c->ram.fd = -1;
    c->main_fd = -1;
    c->bound_fd = -1;
    if (sim->slot_model ? slots_context_new(sim, c, err, errlen)
                        : create_ram(sim, c, err, errlen)) {
        int error = errno;

        slots_context_free(sim, c);
        give_block(sim, (uint32_t)block);
        free(c);
        errno = error;
        return NULL;
    }
    c->stack = format_stack(pid, frames, n_frames);
    c->info.creation_stack = c->stack ? c->stack : "";
    forget_counts(sim, c);
    schedlog_create(&sim->log, &c->info);
    return c;
}

/* Points the hooks' view of the context at its image and guard words. */
static void describe_image(struct sim_context *c, uint64_t object_id)
{
    struct copsim_image *image = &c->info.image;

    c->info.object_id = object_id;
    image->path = c->source.path;
    image->device = c->source.device;
    image->inode = c->source.inode;
    image->file_size = c->source.file_size;
    image->hash = c->source.hash;
    image->offset = c->source.offset;
    image->size = c->source.size;
    image->anonymous = c->source.anonymous;
    snprintf(c->name, sizeof(c->name), "%s", c->image.name);
    c->info.n_regions = c->image.nregions;
    c->info.guard_ls_offset = cop_image_guard_ls_offset(&c->image);
    c->info.guard_words = NULL;
    if (c->image.nregions && c->ram.base) {     /* slot model: at bind */
        c->info.guard_words = (const volatile uint32_t *)
            (c->ram.base + c->info.guard_ls_offset);
    }
}

int sim_context_load(struct copsim *sim, struct sim_context *c, pid_t tid,
                     uint64_t object_id, uint64_t size, char *err,
                     size_t errlen)
{
    struct image_source source;
    struct cop_image image;
    struct cop_error cerr;
    char *label;
    int status;

    if (image_source_resolve(c->info.pid, object_id, size, sim->images_dir,
                             &sim->hashes, &source, err, errlen) < 0)
        return -1;
    label = g_strdup_printf("%s+0x%" PRIx64, source.path, source.offset);
    status = cop_image_parse(source.bytes, source.size, label, &image, &cerr);
    g_free(label);
    if (status < 0) {
        snprintf(err, errlen, "%s", cerr.message);
        image_source_free(&source);
        return -1;
    }
    if (c->loaded) {
        cop_image_release(&c->image);
        image_source_free(&c->source);
    }
    c->source = source;
    c->image = image;
    c->loaded = 1;
    c->info.tid = tid;
    describe_image(c, object_id);
    schedlog_load(&sim->log, &c->info);
    return 0;
}

void sim_context_free(struct copsim *sim, struct sim_context *c, int reaped)
{
    if (reaped)
        schedlog_reap(&sim->log, &c->info);
    else
        schedlog_destroy(&sim->log, &c->info);
    if (c->loaded) {
        cop_image_release(&c->image);
        image_source_free(&c->source);
    }
    if (sim->config.ram_dir && c->ram.base)
        unlink(c->ram.path);
    cop_ram_close(&c->ram);
    slots_context_free(sim, c);
    give_block(sim, c->info.trace_context);
    free(c->stack);
    free(c);
}
