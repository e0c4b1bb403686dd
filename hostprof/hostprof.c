/*
 * hostprof.c — the in-memory record of the host side (hostprof.h): the
 * growable arrays, and the session's threads, seeded from /proc when the
 * recording starts (the processes given, their threads and child
 * processes) and grown from the scheduler's task_newtask events as it goes
 * (sched.c), found by tid through an open-addressing index (a thread is
 * looked up for every event).
 */
#include "hostprof/hostprof.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const host_sched_kind_names[HOST_KINDS] = {
    "switch", "wakeup", "wakeup_new", "migrate", "fork", "exit", "newtask",
};

const char *const host_state_names[HOST_STATES] = {
    "running", "runnable", "blocked",
};

void vec_init(struct vec *v, size_t item_size)
{
    memset(v, 0, sizeof(*v));
    v->size = item_size;
}

void *vec_push(struct vec *v)
{
    char *item;

    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        void *items = realloc(v->items, cap * v->size);

        if (!items)
            return NULL;
        v->items = items;
        v->cap = cap;
    }
    item = (char *)v->items + v->n++ * v->size;
    memset(item, 0, v->size);
    return item;
}

void vec_free(struct vec *v)
{
    free(v->items);
    vec_init(v, v->size);
}

void hostprof_init(struct hostprof *hp)
{
    memset(hp, 0, sizeof(*hp));
    vec_init(&hp->pending, sizeof(struct host_sched_event));
    vec_init(&hp->threads, sizeof(struct host_thread));
    vec_init(&hp->contexts, sizeof(struct host_context));
    vec_init(&hp->bucket_rows, sizeof(struct host_bucket_row));
    vec_init(&hp->context_rows, sizeof(struct host_context));
    hp->sched_threads = "command";
    vec_init(&hp->samples, sizeof(struct host_sample));
    vec_init(&hp->chain, sizeof(uint64_t));
    vec_init(&hp->maps, sizeof(struct host_map));
    vec_init(&hp->forks, sizeof(struct host_fork));
    vec_init(&hp->locations, sizeof(struct host_location));
    snprintf(hp->sched_state, sizeof(hp->sched_state), "off");
    snprintf(hp->samples_state, sizeof(hp->samples_state), "off");
}

void hostprof_free(struct hostprof *hp)
{
    for (size_t i = 0; i < hp->maps.n; i++)
        free(VEC_AT(&hp->maps, struct host_map, i)->path);
    for (size_t i = 0; i < hp->locations.n; i++) {
        struct host_location *l = VEC_AT(&hp->locations,
                                         struct host_location, i);

        free(l->file);
        free(l->build_id);
        free(l->symbol);
        free(l->inlined);
        free(l->source);
    }
    vec_free(&hp->pending);
    free(hp->ring.items);
    free(hp->index.slots);
    vec_free(&hp->threads);
    vec_free(&hp->contexts);
    vec_free(&hp->bucket_rows);
    vec_free(&hp->context_rows);
    vec_free(&hp->samples);
    vec_free(&hp->chain);
    vec_free(&hp->maps);
    vec_free(&hp->forks);
    vec_free(&hp->locations);
}

static size_t tid_hash(pid_t tid, size_t cap)
{
    return ((uint32_t)tid * 2654435761u) & (cap - 1);
}

/* Index i + 1 of hp->threads into the index's free slot for its tid. */
static void index_put(struct host_tid_index *x, pid_t tid, uint32_t i)
{
    size_t h = tid_hash(tid, x->cap);

    while (x->slots[h])
        h = (h + 1) & (x->cap - 1);
    x->slots[h] = i + 1;
}

/* Keeps the index at most half full; -1 when out of memory. */
static int index_grow(struct hostprof *hp)
{
    struct host_tid_index x;

    if (hp->index.cap >= 2 * (hp->threads.n + 1))
        return 0;
    x.cap = hp->index.cap ? hp->index.cap * 2 : 256;
    if (!(x.slots = calloc(x.cap, sizeof(*x.slots))))
        return -1;
    for (size_t i = 0; i < hp->threads.n; i++)
        index_put(&x, VEC_AT(&hp->threads, struct host_thread, i)->tid,
                  (uint32_t)i);
    free(hp->index.slots);
    hp->index = x;
    return 0;
}

struct host_thread *hostprof_find_thread(struct hostprof *hp, pid_t tid)
{
    size_t h;

    if (!hp->index.cap)
        return NULL;
    for (h = tid_hash(tid, hp->index.cap); hp->index.slots[h];
         h = (h + 1) & (hp->index.cap - 1)) {
        struct host_thread *t = VEC_AT(&hp->threads, struct host_thread,
                                       hp->index.slots[h] - 1);

        if (t->tid == tid)
            return t;
    }
    return NULL;
}

struct host_thread *hostprof_thread(struct hostprof *hp, pid_t tid,
                                    pid_t pid, const char *role)
{
    struct host_thread *t = hostprof_find_thread(hp, tid);

    if (t)
        return t;
    if (index_grow(hp) < 0 || !(t = vec_push(&hp->threads)))
        return NULL;
    t->tid = tid;
    t->pid = pid;
    t->role = role;
    t->bucket = HOST_NO_BUCKET;
    index_put(&hp->index, tid, (uint32_t)(hp->threads.n - 1));
    return t;
}

/* /proc/PID/task/TID/comm into comm ("" when gone). */
static void read_comm(pid_t pid, pid_t tid, char *comm)
{
    char path[64];
    FILE *f;

    comm[0] = '\0';
    snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
    if (!(f = fopen(path, "re")))
        return;
    if (fgets(comm, HOST_COMM_MAX, f))
        comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
}

/* The child processes of thread tid of pid, added as role_children. */
static int add_children(struct hostprof *hp, pid_t pid, pid_t tid,
                        const char *role_children)
{
    char path[64];
    int child, n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, tid);
    if (!(f = fopen(path, "re")))
        return 0;
    while (fscanf(f, "%d", &child) == 1)
        n += hostprof_add_process(hp, child, role_children, role_children);
    fclose(f);
    return n;
}

/* Whether thread tid of pid runs: /proc/PID/task/TID/stat is there and
 * its state is not Z or X (a zombie runs nothing).  What cannot be read
 * for another reason than its absence is taken as running. */
static int thread_runs(pid_t pid, pid_t tid)
{
    char path[64], text[512], *end;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
    if (!(f = fopen(path, "re")))
        return errno != ENOENT && errno != ESRCH;
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    if (!(end = strrchr(text, ')')) || end[1] != ' ')
        return 1;           /* not understood: taken as running */
    return end[2] != 'Z' && end[2] != 'X';
}

int hostprof_threads_ended(const struct hostprof *hp)
{
    for (size_t i = 0; i < hp->threads.n; i++) {
        const struct host_thread *t = VEC_AT(&hp->threads,
                                             struct host_thread, i);

        if (thread_runs(t->pid, t->tid))
            return 0;
    }
    return 1;
}

int hostprof_add_process(struct hostprof *hp, pid_t pid, const char *role,
                         const char *role_children)
{
    char path[64];
    struct dirent *d;
    int n = 0;
    DIR *dir;

    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    if (!(dir = opendir(path)))
        return 0;
    while ((d = readdir(dir)) != NULL) {
        pid_t tid = (pid_t)atoi(d->d_name);
        struct host_thread *t;

        if (tid <= 0 || !(t = hostprof_thread(hp, tid, pid, role)))
            continue;
        read_comm(pid, tid, t->comm);
        n++;
        n += add_children(hp, pid, tid, role_children);
    }
    closedir(dir);
    return n;
}
