/*
 * samples.c — host CPU samples through perf_event_open (samples.h).
 *
 * One event per task and CPU, opened with inherit: the kernel clones it
 * into every thread and process the task creates, and their records go to
 * the ring buffer of the event opened here.  The command, held before its
 * exec, is one task (enabled at its exec); a running process being
 * attached is one task per thread it has, its executable mappings read
 * from /proc/PID/maps.  The ring
 * is read from data_tail to data_head (the kernel's ordering: head read
 * with acquire, tail written with release); a record that wraps around
 * the end of the buffer is copied out first.
 */
#include "hostprof/samples.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <perfmon/pfmlib_perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RING_PAGES      128         /* 512 KiB of records per task and CPU */
#define RECORD_MAX      65536

int host_samples_parse(struct hostprof *hp, const char *spec, char *err,
                       size_t errlen)
{
    const char *colon = strrchr(spec, ':');
    size_t len = strlen(spec);
    uint64_t period = HOST_PERIOD_DEFAULT;

    if (colon && colon[1] && strspn(colon + 1, "0123456789") ==
        strlen(colon + 1)) {
        char *end;

        errno = 0;
        period = strtoull(colon + 1, &end, 10);
        if (errno || period == 0) {
            snprintf(err, errlen, "--host-event=%s: the period %s is not a "
                     "positive count", spec, colon + 1);
            return -1;
        }
        len = (size_t)(colon - spec);
    }
    if (len == 0 || len >= sizeof(hp->event)) {
        snprintf(err, errlen, "--host-event=%s: no event name (EVENT[:PERIOD],"
                 " e.g. %s:%d)", spec, HOST_EVENT_DEFAULT,
                 HOST_PERIOD_DEFAULT);
        return -1;
    }
    snprintf(hp->event, sizeof(hp->event), "%.*s", (int)len, spec);
    hp->period = period;
    return 0;
}

/* libpfm4's encoding of hp->event, at user level (the library let go
 * again: nothing of it is needed afterwards). */
static int encode(struct hostprof *hp, struct perf_event_attr *attr,
                  char *err, size_t errlen)
{
    pfm_perf_encode_arg_t arg;
    int ret = pfm_initialize();

    if (ret != PFM_SUCCESS) {
        snprintf(err, errlen, "libpfm4: %s", pfm_strerror(ret));
        return -1;
    }
    memset(attr, 0, sizeof(*attr));
    memset(&arg, 0, sizeof(arg));
    arg.attr = attr;
    arg.size = sizeof(arg);
    ret = pfm_get_os_event_encoding(hp->event, PFM_PLM3,
                                    PFM_OS_PERF_EVENT_EXT, &arg);
    pfm_terminate();
    if (ret != PFM_SUCCESS) {
        snprintf(err, errlen, "--host-event=%s: %s (copcontrol "
                 "--list-events lists this machine's events)", hp->event,
                 pfm_strerror(ret));
        return -1;
    }
    return 0;
}

int host_samples_check(const char *spec, char *err, size_t errlen)
{
    static struct hostprof hp;
    struct perf_event_attr attr;

    if (host_samples_parse(&hp, spec, err, errlen) < 0)
        return -1;
    return encode(&hp, &attr, err, errlen);
}

static void set_sampling(struct hostprof *hp, struct perf_event_attr *attr)
{
    attr->size = sizeof(*attr);
    attr->sample_period = hp->period;
    attr->freq = 0;
    attr->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                        PERF_SAMPLE_CPU;
    if (hp->call_graph)
        attr->sample_type |= PERF_SAMPLE_CALLCHAIN;
    attr->inherit = 1;
    attr->exclude_kernel = 1;
    attr->exclude_hv = 1;
    attr->exclude_callchain_kernel = 1;
    attr->mmap = 1;
    attr->comm = 1;
    attr->task = 1;
    attr->use_clockid = 1;
    attr->clockid = CLOCK_MONOTONIC;
}

int host_samples_open(struct host_sampler *s, struct hostprof *hp,
                      char *err, size_t errlen)
{
    long cpus = sysconf(_SC_NPROCESSORS_CONF);

    memset(s, 0, sizeof(*s));
    vec_init(&s->rings, sizeof(struct host_ring));
    s->hp = hp;
    s->cpus = cpus < 1 ? 1 : (int)cpus;
    s->data_size = (size_t)sysconf(_SC_PAGESIZE) * RING_PAGES;
    if (encode(hp, &s->attr, err, errlen) < 0)
        return -1;
    set_sampling(hp, &s->attr);
    return 0;
}

/* The event of task tid on one CPU and its ring; 1 for an offline CPU,
 * -1 with err. */
static int open_cpu(struct host_sampler *s, struct perf_event_attr *attr,
                    pid_t tid, int cpu, char *err, size_t errlen)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    int fd = (int)syscall(SYS_perf_event_open, attr, tid, cpu, -1,
                          PERF_FLAG_FD_CLOEXEC);
    struct host_ring *ring;
    void *base;

    if (fd < 0 && errno == ENODEV)
        return 1;
    if (fd < 0) {
        snprintf(err, errlen, "perf_event_open %s on pid %ld: %s%s",
                 s->hp->event, (long)tid, strerror(errno),
                 errno == EACCES || errno == EPERM ?
                 " (see /proc/sys/kernel/perf_event_paranoid)" : "");
        return -1;
    }
    base = mmap(NULL, s->data_size + page, PROT_READ | PROT_WRITE,
                MAP_SHARED, fd, 0);
    if (base == MAP_FAILED || !(ring = vec_push(&s->rings))) {
        snprintf(err, errlen, "perf_event mmap of %zu KiB: %s",
                 s->data_size / 1024, strerror(errno));
        if (base != MAP_FAILED)
            munmap(base, s->data_size + page);
        close(fd);
        return -1;
    }
    ring->fd = fd;
    ring->base = base;
    return 0;
}

int host_samples_add_task(struct host_sampler *s, pid_t tid, int at_exec,
                          char *err, size_t errlen)
{
    struct perf_event_attr attr = s->attr;

    attr.disabled = at_exec ? 1 : 0;
    attr.enable_on_exec = at_exec ? 1 : 0;
    for (int cpu = 0; cpu < s->cpus; cpu++)
        if (open_cpu(s, &attr, tid, cpu, err, errlen) < 0)
            return -1;
    return 0;
}

int host_samples_start(struct host_sampler *s, struct hostprof *hp,
                       pid_t pid, char *err, size_t errlen)
{
    if (host_samples_open(s, hp, err, errlen) < 0 ||
        host_samples_add_task(s, pid, 1, err, errlen) < 0) {
        host_samples_stop(s);
        return -1;
    }
    return 0;
}

/* pid's executable mappings as they are now (/proc/PID/maps), as the
 * kernel's mmap records would have given them had it been sampled from
 * its exec. */
static void read_maps(struct hostprof *hp, pid_t pid)
{
    char path[64], line[4096 + 128], perms[8], file[4096];
    unsigned long long start, end, pgoff;
    struct host_map *map;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/maps", pid);
    if (!(f = fopen(path, "re")))
        return;
    while (fgets(line, sizeof(line), f)) {
        file[0] = '\0';
        if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %4095[^\n]", &start,
                   &end, perms, &pgoff, file) < 4 || !strchr(perms, 'x') ||
            file[0] != '/' || !(map = vec_push(&hp->maps)))
            continue;
        map->pid = pid;
        map->start = start;
        map->len = end - start;
        map->pgoff = pgoff;
        map->path = strdup(file);
    }
    fclose(f);
}

int host_samples_attach(struct host_sampler *s, pid_t pid, char *err,
                        size_t errlen)
{
    char path[64];
    struct dirent *d;
    DIR *dir;
    int rc = 0;

    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    if (!(dir = opendir(path))) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    read_maps(s->hp, pid);
    while (rc == 0 && (d = readdir(dir)) != NULL) {
        pid_t tid = (pid_t)atoi(d->d_name);

        if (tid > 0)
            rc = host_samples_add_task(s, tid, 0, err, errlen);
    }
    closedir(dir);
    return rc;
}

static int take_sample(struct host_sampler *s, const uint64_t *p,
                       const uint64_t *end)
{
    struct host_sample *smp = vec_push(&s->hp->samples);

    if (!smp || p + 4 > end)
        return -1;
    smp->ip = p[0];
    smp->pid = (pid_t)(uint32_t)p[1];
    smp->tid = (pid_t)(uint32_t)(p[1] >> 32);
    smp->time_ns = p[2];
    smp->cpu = (uint32_t)p[3];
    smp->location = -1;
    p += 4;
    smp->chain_off = s->hp->chain.n;
    if (!s->hp->call_graph || p >= end)
        return 0;
    for (uint64_t i = 0, nr = *p++; i < nr && p < end; i++, p++) {
        uint64_t *ip;

        if (*p >= (uint64_t)PERF_CONTEXT_MAX)
            continue;   /* PERF_CONTEXT_USER and the like: markers */
        if (!(ip = vec_push(&s->hp->chain)))
            return -1;
        *ip = *p;
        smp->chain_len++;
    }
    return 0;
}

static void take_mmap(struct host_sampler *s, const char *rec, size_t size)
{
    const struct {
        uint32_t pid, tid;
        uint64_t addr, len, pgoff;
    } *m = (const void *)rec;
    const char *name = rec + sizeof(*m);
    struct host_map *map;

    if (size < sizeof(*m) + 1 || !(map = vec_push(&s->hp->maps)))
        return;
    map->pid = (pid_t)m->pid;
    map->start = m->addr;
    map->len = m->len;
    map->pgoff = m->pgoff;
    map->path = strndup(name, size - sizeof(*m));
}

static void take_fork(struct host_sampler *s, const uint32_t *f)
{
    struct host_fork *fork;

    if (f[0] != f[1] && (fork = vec_push(&s->hp->forks)) != NULL) {
        fork->pid = (pid_t)f[0];
        fork->ppid = (pid_t)f[1];
    }
}

static void take_record(struct host_sampler *s,
                        const struct perf_event_header *h)
{
    const char *body = (const char *)(h + 1);
    size_t size = h->size - sizeof(*h);

    switch (h->type) {
    case PERF_RECORD_SAMPLE:
        take_sample(s, (const uint64_t *)body,
                    (const uint64_t *)(body + size));
        break;
    case PERF_RECORD_MMAP:
        take_mmap(s, body, size);
        break;
    case PERF_RECORD_FORK:
        if (size >= 4 * sizeof(uint32_t))
            take_fork(s, (const uint32_t *)body);
        break;
    case PERF_RECORD_LOST:
        if (size >= 2 * sizeof(uint64_t))
            s->hp->lost_samples += ((const uint64_t *)body)[1];
        break;
    default:
        break;
    }
}

static void read_ring(struct host_sampler *s, void *base)
{
    struct perf_event_mmap_page *meta = base;
    static char copy[RECORD_MAX];
    const char *data;
    uint64_t head, tail;

    if (!meta)
        return;
    data = (const char *)base + meta->data_offset;
    head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
    tail = meta->data_tail;
    while (tail + sizeof(struct perf_event_header) <= head) {
        size_t off = (size_t)(tail % s->data_size);
        const struct perf_event_header *h = (const void *)(data + off);
        size_t size = h->size;

        if (size < sizeof(*h) || size > RECORD_MAX)
            break;
        if (off + size > s->data_size) {    /* wraps: copy it whole */
            size_t first = s->data_size - off;

            memcpy(copy, data + off, first);
            memcpy(copy + first, data, size - first);
            h = (const void *)copy;
        }
        take_record(s, h);
        tail += size;
    }
    __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

void host_samples_read(struct host_sampler *s)
{
    for (size_t i = 0; i < s->rings.n; i++)
        read_ring(s, VEC_AT(&s->rings, struct host_ring, i)->base);
}

void host_samples_stop(struct host_sampler *s)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    for (size_t i = 0; i < s->rings.n; i++)
        ioctl(VEC_AT(&s->rings, struct host_ring, i)->fd,
              PERF_EVENT_IOC_DISABLE, 0);
    host_samples_read(s);
    for (size_t i = 0; i < s->rings.n; i++) {
        struct host_ring *ring = VEC_AT(&s->rings, struct host_ring, i);

        munmap(ring->base, s->data_size + page);
        close(ring->fd);
    }
    vec_free(&s->rings);
}
