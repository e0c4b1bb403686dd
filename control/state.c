/*
 * state.c — copcontrol's saved settings and pid files (state.h).
 *
 * The settings and pid files are rewritten whole (to NAME.new renamed
 * over NAME), so a reader never sees half of one.  Every file is opened
 * through the checked directory's descriptor (safe-file.h): nothing is
 * read or written through a symlink, in a directory another user owns or
 * can write.  The rate is kept as the user wrote it and parsed again by
 * rate_parse() when read: a rate in frequency or period resolves at
 * whatever clock copsim has at --start.
 */
#include "control/state.h"
#include "control/driver.h"
#include "common/safe-file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FILE_TEXT_MAX   (2 * PATH_MAX + 256)

static const struct {
    const char *key;
    enum rate_kind kind;
} rate_keys[] = {
    {"event", RATE_EVENT},
    {"sample-period", RATE_PERIOD},
    {"frequency", RATE_FREQUENCY},
};

int state_dir_of(const char *socket_path, char *buf, size_t len)
{
    const char *slash = strrchr(socket_path, '/');

    if (!slash) {
        snprintf(buf, len, ".");
        return 0;
    }
    if (slash == socket_path) {
        snprintf(buf, len, "/");
        return 0;
    }
    snprintf(buf, len, "%.*s", (int)(slash - socket_path), socket_path);
    return 0;
}

void state_path(const char *dir, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

int state_dir_prepare(const char *dir, char *err, size_t errlen)
{
    int fd = safe_dir_open(dir, SAFE_DIR_CREATE, err, errlen);

    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int state_log_create(const char *dir, const char *name, char *err,
                     size_t errlen)
{
    int dirfd = safe_dir_open(dir, 0, err, errlen), fd = -1;

    if (dirfd >= 0) {
        fd = safe_file_create(dirfd, dir, name, O_TRUNC, err, errlen);
        close(dirfd);
    }
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

/* Opens dir/name for reading, never through a symlink nor in a directory
 * another user can write; NULL with errno (ENOENT: no such file). */
static FILE *open_state_file(const char *dir, const char *name)
{
    char err[256];
    int dirfd = safe_dir_open(dir, 0, err, sizeof(err)), fd, error;
    FILE *f;

    if (dirfd < 0)
        return NULL;
    fd = safe_file_open_read(dirfd, name);
    error = errno;
    close(dirfd);
    if (fd < 0 || !(f = fdopen(fd, "r"))) {
        if (fd >= 0)
            close(fd);
        errno = error;
        return NULL;
    }
    return f;
}

/* Replaces dir/name with text; 0 or -1 with one line in err. */
static int replace_state_file(const char *dir, const char *name,
                              const char *text, char *err, size_t errlen)
{
    int dirfd = safe_dir_open(dir, 0, err, errlen), status;

    if (dirfd < 0)
        return -1;
    status = safe_file_replace(dirfd, dir, name, text, strlen(text), err,
                               errlen);
    close(dirfd);
    return status;
}

void settings_init(struct settings *s)
{
    memset(s, 0, sizeof(*s));
    sampling_spec_init(&s->sampling);
    host_options_init(&s->host);
}

/* A "dither=", "dither-seed=" or "fifo-full=" line (1), else 0; -1 bad. */
static int sampling_line(const char *key, const char *value,
                         struct sampling_spec *spec, char *err, size_t errlen)
{
    int fifo;

    if (strcmp(key, "dither") == 0) {
        if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0) {
            snprintf(err, errlen, "dither=%s: not on or off", value);
            return -1;
        }
        spec->dither = strcmp(value, "on") == 0;
        return 1;
    }
    if (strcmp(key, "dither-seed") == 0) {
        if (sampling_parse_seed(value, &spec->seed) < 0) {
            snprintf(err, errlen, "dither-seed=%s: not a seed", value);
            return -1;
        }
        return 1;
    }
    if (strcmp(key, "fifo-full") == 0) {
        if ((fifo = sampling_fifo_parse(value)) < 0) {
            snprintf(err, errlen, "fifo-full=%s: not stall or drop", value);
            return -1;
        }
        spec->fifo_full = fifo;
        return 1;
    }
    return 0;
}

int settings_driver(struct settings *s, const char *name, char *err,
                    size_t errlen)
{
    enum driver_kind kind;

    if (driver_parse_kind(name, &kind, err, errlen) < 0)
        return -1;
    snprintf(s->driver, sizeof(s->driver), "%s", driver_kind_name(kind));
    return 0;
}

/* One "key=value" line into s. */
static int settings_line(char *line, struct settings *s, char *err,
                         size_t errlen)
{
    char *eq = strchr(line, '=');
    int taken;

    if (!eq)
        return 0;
    *eq = '\0';
    if ((taken = sampling_line(line, eq + 1, &s->sampling, err, errlen)))
        return taken < 0 ? -1 : 0;
    if ((taken = host_options_load(&s->host, line, eq + 1, err, errlen)))
        return taken < 0 ? -1 : 0;
    for (size_t i = 0; i < sizeof(rate_keys) / sizeof(*rate_keys); i++)
        if (strcmp(line, rate_keys[i].key) == 0)
            return rate_parse(rate_keys[i].kind, eq + 1, &s->rate, err,
                              errlen);
    if (strcmp(line, "session-dir") == 0)
        snprintf(s->session_dir, sizeof(s->session_dir), "%s", eq + 1);
    if (strcmp(line, "buffer-size") == 0)
        return driver_parse_buffer_words(eq + 1, &s->buffer_words, err,
                                         errlen);
    if (strcmp(line, "driver") == 0)
        return settings_driver(s, eq + 1, err, errlen);
    return 0;
}

int settings_load(const char *dir, struct settings *s, char *err,
                  size_t errlen)
{
    char path[PATH_MAX], line[PATH_MAX + 32], why[256];
    FILE *f;
    int status = 0;

    settings_init(s);
    state_path(dir, STATE_CONF, path, sizeof(path));
    f = open_state_file(dir, STATE_CONF);
    if (!f && errno == ENOENT)
        return 0;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, errno == ELOOP ?
                 "a symbolic link: refusing to read it" : strerror(errno));
        return -1;
    }
    while (status == 0 && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        status = settings_line(line, s, why, sizeof(why));
    }
    fclose(f);
    if (status < 0)
        snprintf(err, errlen, "%s: %s", path, why);
    return status;
}

static const char *rate_key(enum rate_kind kind)
{
    for (size_t i = 0; i < sizeof(rate_keys) / sizeof(*rate_keys); i++)
        if (rate_keys[i].kind == kind)
            return rate_keys[i].key;
    return NULL;
}

int settings_save(const char *dir, const struct settings *s, char *err,
                  size_t errlen)
{
    char text[FILE_TEXT_MAX];
    size_t n;

    n = (size_t)snprintf(text, sizeof(text),
                         "# copcontrol's saved settings (copcontrol --help)\n");
    if (s->rate.kind != RATE_NONE)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s=%s\n",
                              rate_key(s->rate.kind), s->rate.text);
    if (s->session_dir[0])
        n += (size_t)snprintf(text + n, sizeof(text) - n, "session-dir=%s\n",
                              s->session_dir);
    if (s->buffer_words)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "buffer-size=%u\n",
                              s->buffer_words);
    if (s->sampling.dither != SAMPLING_UNSET)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "dither=%s\n",
                              s->sampling.dither ? "on" : "off");
    if (s->sampling.seed)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "dither-seed=%llu\n",
                              (unsigned long long)s->sampling.seed);
    if (s->driver[0])
        n += (size_t)snprintf(text + n, sizeof(text) - n, "driver=%s\n",
                              s->driver);
    if (s->sampling.fifo_full != SAMPLING_UNSET)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "fifo-full=%s\n",
                              sampling_fifo_name((uint32_t)
                                                 s->sampling.fifo_full));
    if (n < sizeof(text))
        host_options_save(&s->host, text + n, sizeof(text) - n);
    return replace_state_file(dir, STATE_CONF, text, err, errlen);
}

void settings_merge(struct settings *base, const struct settings *given)
{
    if (given->rate.kind != RATE_NONE)
        base->rate = given->rate;
    if (given->session_dir[0])
        snprintf(base->session_dir, sizeof(base->session_dir), "%s",
                 given->session_dir);
    if (given->buffer_words)
        base->buffer_words = given->buffer_words;
    sampling_spec_merge(&base->sampling, &given->sampling);
    if (given->driver[0])
        snprintf(base->driver, sizeof(base->driver), "%s", given->driver);
    host_options_merge(&base->host, &given->host);
}

/* The name part of a path in the state directory. */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash ? slash + 1 : path;
}

int pidfile_write(const char *path, pid_t pid, const char *text, char *err,
                  size_t errlen)
{
    char dir[PATH_MAX], content[PATH_MAX + 32];

    state_dir_of(path, dir, sizeof(dir));
    snprintf(content, sizeof(content), "%ld\n%s\n", (long)pid,
             text ? text : "");
    return replace_state_file(dir, base_name(path), content, err, errlen);
}

pid_t pidfile_read(const char *path, char *text, size_t len)
{
    char line[PATH_MAX + 2], dir[PATH_MAX];
    FILE *f;
    long pid = 0;

    state_dir_of(path, dir, sizeof(dir));
    f = open_state_file(dir, base_name(path));
    if (text && len)
        text[0] = '\0';
    if (!f)
        return 0;
    if (fgets(line, sizeof(line), f))
        pid = strtol(line, NULL, 10);
    if (text && fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        snprintf(text, len, "%s", line);
    }
    fclose(f);
    return pid > 0 ? (pid_t)pid : 0;
}
