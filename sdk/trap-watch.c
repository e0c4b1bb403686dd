/*
 * trap-watch.c — cop-run's watch for a trap storm (trap-watch.h).
 *
 * A program in a QEMU of its own runs in machine mode, where QEMU 7.2
 * shows a plugin no trap at all (and nothing runs when the vector cannot
 * even be fetched), so the watch asks QEMU itself: its QMP monitor, on a
 * socket pair whose far end QEMU inherits (-chardev socket,fd=N), answers
 * `info registers` (human-monitor-command) every TRAP_WATCH_MS.  A look
 * finds a storm when the last trap was an exception taken at the first
 * instruction of the trap vector (mepc == mtvec's base, mcause's interrupt
 * bit clear) and the core is there again (pc == mepc).  Such a trap
 * changes no register or memory the instruction depends on, so it is taken
 * there for ever; two looks in a row that find it with the same values
 * make it certain (a program writing mepc itself would also have to sit at
 * its vector at both looks).  Then the watch asks QEMU to quit (so that
 * the plugin writes what it has: no sample is lost) and remembers where.
 */
#include "sdk/trap-watch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRAP_WATCH_MS       200         /* between two looks */
#define TRAP_WATCH_LOOKS    2           /* looks in a row that see it */
#define TRAP_WATCH_REPLY_MS 10000       /* an answer takes no longer */
#define MCAUSE_INTERRUPT    0x80000000u

struct core_look {
    uint32_t pc, mtvec, mepc, mcause;
};

int trap_watch_prepare(struct trap_watch *w, struct cop_argv *command)
{
    int pair[2];

    memset(w, 0, sizeof(*w));
    w->fd = w->qemu_fd = -1;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
        return -1;
    /* QEMU's end is inherited: not close-on-exec. */
    if (fcntl(pair[1], F_SETFD, 0) < 0) {
        close(pair[0]);
        close(pair[1]);
        return -1;
    }
    w->fd = pair[0];
    w->qemu_fd = pair[1];
    if (cop_argv_add(command, "-chardev") < 0
        || cop_argv_addf(command, "socket,id=cop-monitor,fd=%d",
                         w->qemu_fd) < 0
        || cop_argv_add(command, "-mon") < 0
        || cop_argv_add(command, "chardev=cop-monitor,mode=control") < 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* One line from the monitor into w->line (NUL-terminated, without its
 * newline); 0, or -1 when QEMU is gone or says nothing for too long. */
static int read_line(struct trap_watch *w)
{
    size_t len = 0;

    for (;;) {
        struct pollfd p = { w->fd, POLLIN, 0 };
        char c;
        ssize_t n;

        if (poll(&p, 1, TRAP_WATCH_REPLY_MS) <= 0)
            return -1;
        n = read(w->fd, &c, 1);
        if (n <= 0)
            return -1;
        if (c == '\n') {
            w->line[len] = '\0';
            return 0;
        }
        if (len + 1 < sizeof(w->line))
            w->line[len++] = c;
    }
}

/* Sends a QMP command and reads lines up to its answer (events skipped). */
static int command_answer(struct trap_watch *w, const char *json)
{
    size_t len = strlen(json);

    if (send(w->fd, json, len, MSG_NOSIGNAL) != (ssize_t)len)
        return -1;
    do {
        if (read_line(w) < 0)
            return -1;
    } while (strncmp(w->line, "{\"return\"", 9) != 0
             && strncmp(w->line, "{\"error\"", 8) != 0);
    return strncmp(w->line, "{\"return\"", 9) == 0 ? 0 : -1;
}

/* The hex value after " NAME " in an `info registers` answer. */
static int register_value(const char *text, const char *name, uint32_t *v)
{
    char key[32];
    const char *at;

    snprintf(key, sizeof(key), " %s ", name);
    at = strstr(text, key);
    if (!at)
        return -1;
    *v = (uint32_t)strtoul(at + strlen(key), NULL, 16);
    return 0;
}

static int look(struct trap_watch *w, struct core_look *l)
{
    if (command_answer(w, "{\"execute\": \"human-monitor-command\", "
                          "\"arguments\": {\"command-line\": "
                          "\"info registers\"}}\n") < 0)
        return -1;
    if (register_value(w->line, "pc", &l->pc) < 0
        || register_value(w->line, "mtvec", &l->mtvec) < 0
        || register_value(w->line, "mepc", &l->mepc) < 0
        || register_value(w->line, "mcause", &l->mcause) < 0)
        return -1;
    return 0;
}

/* The last trap was an exception at the vector's first instruction, and
 * the core is there again. */
static int storming(const struct core_look *l)
{
    uint32_t vector = l->mtvec & ~3u;

    return !(l->mcause & MCAUSE_INTERRUPT) && l->mepc == vector
           && l->pc == vector;
}

/*
 * Waits TRAP_WATCH_MS between two looks, on the monitor's socket: its end
 * (QEMU gone, or trap_watch_end()'s shutdown) ends the wait at once, so
 * that cop-run never waits for a sleeping watch.  Returns 0 to look again
 * (the time passed, or QEMU sent an event, which the next answer's read
 * skips), -1 at the end.
 */
static int pause_or_end(struct trap_watch *w)
{
    struct pollfd p = { w->fd, POLLIN, 0 };
    char c;

    if (poll(&p, 1, TRAP_WATCH_MS) == 0)
        return 0;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
        return -1;
    return recv(w->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0 ? 0 : -1;
}

static void *watch(void *arg)
{
    struct trap_watch *w = arg;
    struct core_look now, before = { 0, 0, 0, 0 };
    int seen = 0;

    if (read_line(w) < 0                /* the greeting */
        || command_answer(w, "{\"execute\": \"qmp_capabilities\"}\n") < 0)
        return NULL;
    while (look(w, &now) == 0) {
        if (!storming(&now))
            seen = 0;
        else if (seen && memcmp(&now, &before, sizeof(now)) != 0)
            seen = 1;
        else
            seen++;
        before = now;
        if (seen >= TRAP_WATCH_LOOKS) {
            w->storm = 1;
            w->pc = now.mepc;
            w->mtvec = now.mtvec;
            command_answer(w, "{\"execute\": \"quit\"}\n");
            return NULL;
        }
        if (pause_or_end(w) < 0)
            break;
    }
    return NULL;
}

int trap_watch_start(struct trap_watch *w)
{
    close(w->qemu_fd);
    w->qemu_fd = -1;
    if (pthread_create(&w->thread, NULL, watch, w) != 0)
        return -1;
    w->running = 1;
    return 0;
}

void trap_watch_end(struct trap_watch *w)
{
    if (w->running) {
        /* QEMU has ended: wakes the look or the pause between two */
        shutdown(w->fd, SHUT_RDWR);
        pthread_join(w->thread, NULL);
        w->running = 0;
    }
    if (w->fd >= 0)
        close(w->fd);
    if (w->qemu_fd >= 0)
        close(w->qemu_fd);
    w->fd = w->qemu_fd = -1;
}
