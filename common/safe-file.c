/*
 * safe-file.c — private directories and the files in them (safe-file.h).
 *
 * A directory is judged by what its descriptor shows (fstat of an
 * O_DIRECTORY|O_NOFOLLOW open), never by a path looked up again later, so
 * nothing can be swapped between the check and the use: every file is then
 * opened relative to that descriptor with O_NOFOLLOW.  Nobody but this
 * user (and root) can write in a directory that passed, so a name in it
 * stays what this user made it; O_NOFOLLOW, the owner and link-count checks
 * on each file are the second line, for a directory that was loose before
 * (a file planted while it was group-writable).
 */
#include "common/safe-file.h"
#include "common/cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NEW_SUFFIX      ".new"
#define TREE_DEPTH_MAX  8

/* Sets err and errno; returns -1. */
static int refuse(int error, char *err, size_t errlen, const char *what,
                  const char *name, const char *why)
{
    if (name)
        snprintf(err, errlen, "%s/%s: %s", what, name, why);
    else
        snprintf(err, errlen, "%s: %s", what, why);
    errno = error;
    return -1;
}

int safe_make_dirs(const char *path, unsigned mode, char *err, size_t errlen)
{
    char buf[PATH_MAX];

    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return refuse(ENAMETOOLONG, err, errlen, path, NULL,
                      "path too long");
    for (char *p = buf + 1;; p++) {
        char c = *p;

        if (c != '/' && c != '\0')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return refuse(errno, err, errlen, buf, NULL, strerror(errno));
        *p = c;
        if (c == '\0')
            break;
    }
    return 0;
}

/* Whether uid may own what this user relies on: the user, or root. */
static int trusted_owner(uid_t uid)
{
    return uid == geteuid() || uid == 0;
}

int safe_dir_check(int dirfd, const char *dir, char *err, size_t errlen)
{
    struct stat st;
    char why[128];

    if (fstat(dirfd, &st) < 0)
        return refuse(errno, err, errlen, dir, NULL, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return refuse(ENOTDIR, err, errlen, dir, NULL, "not a directory");
    if (!trusted_owner(st.st_uid)) {
        snprintf(why, sizeof(why), "owned by uid %ld, not by this user "
                 "(uid %ld): refusing to use it", (long)st.st_uid,
                 (long)geteuid());
        return refuse(EACCES, err, errlen, dir, NULL, why);
    }
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, sizeof(why), "writable by others (mode %04o): "
                 "refusing to use it", (unsigned)(st.st_mode & 07777));
        return refuse(EACCES, err, errlen, dir, NULL, why);
    }
    return 0;
}

/* Why dir could not be opened as a directory without following links. */
static int explain_open(const char *dir, int error, char *err, size_t errlen)
{
    struct stat st;

    if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
        return refuse(EACCES, err, errlen, dir, NULL, "a symbolic link, "
                      "not a directory: refusing to use it");
    if (error == ENOTDIR)
        return refuse(ENOTDIR, err, errlen, dir, NULL, "not a directory");
    return refuse(error, err, errlen, dir, NULL, strerror(error));
}

int safe_dir_open(const char *dir, int flags, char *err, size_t errlen)
{
    int fd;

    if ((flags & SAFE_DIR_CREATE)
        && safe_make_dirs(dir, SAFE_DIR_MODE, err, errlen) < 0)
        return -1;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return explain_open(dir, errno, err, errlen);
    if (safe_dir_check(fd, dir, err, errlen) < 0) {
        int error = errno;

        close(fd);
        errno = error;
        return -1;
    }
    return fd;
}

int safe_dir_of(const char *path, int flags, const char **name, char *err,
                size_t errlen)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];

    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) >= sizeof(dir))
        return refuse(ENAMETOOLONG, err, errlen, path, NULL,
                      "path too long");
    else
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    *name = slash ? slash + 1 : path;
    return safe_dir_open(dir, flags, err, errlen);
}

/* An opened file must be this user's own regular file with one link. */
static int check_file(int fd, const char *dir, const char *name, char *err,
                      size_t errlen)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return refuse(errno, err, errlen, dir, name, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return refuse(EACCES, err, errlen, dir, name, "not a regular file: "
                      "refusing to write it");
    if (st.st_uid != geteuid())
        return refuse(EACCES, err, errlen, dir, name, "owned by another "
                      "user: refusing to write it");
    if (st.st_nlink != 1)
        return refuse(EACCES, err, errlen, dir, name, "has other hard "
                      "links: refusing to write it");
    if ((st.st_mode & 07777) != SAFE_FILE_MODE
        && fchmod(fd, SAFE_FILE_MODE) < 0)
        return refuse(errno, err, errlen, dir, name, strerror(errno));
    return 0;
}

/* Empties an opened file when flags ask for it (after check_file). */
static int truncate_asked(int fd, int flags, const char *dir,
                          const char *name, char *err, size_t errlen)
{
    if ((flags & O_TRUNC) && ftruncate(fd, 0) < 0)
        return refuse(errno, err, errlen, dir, name, strerror(errno));
    return 0;
}

int safe_file_create(int dirfd, const char *dir, const char *name,
                     int flags, char *err, size_t errlen)
{
    int access_mode = (flags & O_RDWR) ? O_RDWR : O_WRONLY;
    int open_flags = access_mode | O_CREAT | O_NOFOLLOW | O_CLOEXEC
                     | (flags & (O_APPEND | O_EXCL));
    int fd = openat(dirfd, name, open_flags, SAFE_FILE_MODE);

    if (fd < 0) {
        if (errno == ELOOP)
            return refuse(EACCES, err, errlen, dir, name, "a symbolic "
                          "link: refusing to write through it");
        return refuse(errno, err, errlen, dir, name, strerror(errno));
    }
    if (check_file(fd, dir, name, err, errlen) < 0
        || truncate_asked(fd, flags, dir, name, err, errlen) < 0) {
        int error = errno;

        close(fd);
        errno = error;
        return -1;
    }
    return fd;
}

int safe_file_open_read(int dirfd, const char *name)
{
    return openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

/* Writes all len bytes; 0 or -1. */
static int write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t put = write(fd, data, len);

        if (put < 0 && errno == EINTR)
            continue;
        if (put < 0)
            return -1;
        data += put;
        len -= (size_t)put;
    }
    return 0;
}

int safe_file_replace(int dirfd, const char *dir, const char *name,
                      const void *data, size_t len, char *err, size_t errlen)
{
    char temp[NAME_MAX + 1];
    int fd, error = 0;

    if (snprintf(temp, sizeof(temp), "%s%s", name, NEW_SUFFIX)
        >= (int)sizeof(temp))
        return refuse(ENAMETOOLONG, err, errlen, dir, name, "name too long");
    if (unlinkat(dirfd, temp, 0) < 0 && errno != ENOENT)
        return refuse(errno, err, errlen, dir, temp, strerror(errno));
    fd = safe_file_create(dirfd, dir, temp, O_EXCL, err, errlen);
    if (fd < 0)
        return -1;
    if (write_all(fd, data, len) < 0)
        error = errno;
    if (close(fd) < 0 && !error)
        error = errno;
    if (!error && renameat(dirfd, temp, dirfd, name) < 0)
        error = errno;
    if (error) {
        unlinkat(dirfd, temp, 0);
        return refuse(error, err, errlen, dir, name, strerror(error));
    }
    return 0;
}

/* Empties the directory dirfd (closed here), depth levels at most. */
static int remove_contents(int dirfd, int depth)
{
    DIR *listing = fdopendir(dirfd);
    struct dirent *e;
    int status = 0;

    if (!listing) {
        close(dirfd);
        return -1;
    }
    while ((e = readdir(listing))) {
        int sub;

        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd, e->d_name, 0) == 0 || errno == ENOENT)
            continue;
        if (errno != EISDIR || depth <= 0) {
            status = -1;
            continue;
        }
        sub = openat(dirfd, e->d_name,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 || remove_contents(sub, depth - 1) < 0
            || unlinkat(dirfd, e->d_name, AT_REMOVEDIR) < 0)
            status = -1;
    }
    closedir(listing);
    return status;
}

int safe_remove_tree(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    if (remove_contents(fd, TREE_DEPTH_MAX) < 0)
        return -1;
    return rmdir(dir) < 0 && errno != ENOENT ? -1 : 0;
}

/* ---- paths a user names (safe-file.h: the rule) ------------------------ */

#define LINKS_MAX       40
#define TEMP_TRIES      64

/* A directory nobody but this user (or root) can change. */
static int dir_closed(const struct stat *st)
{
    return trusted_owner(st->st_uid) && !(st->st_mode & (S_IWGRP | S_IWOTH));
}

/* What kind of file st is, for messages. */
static const char *file_kind(const struct stat *st)
{
    if (S_ISDIR(st->st_mode))
        return "a directory";
    if (S_ISLNK(st->st_mode))
        return "a symbolic link";
    if (S_ISFIFO(st->st_mode))
        return "a FIFO";
    if (S_ISCHR(st->st_mode))
        return "a character device";
    if (S_ISBLK(st->st_mode))
        return "a block device";
    if (S_ISSOCK(st->st_mode))
        return "a socket";
    return "a regular file";
}

/* Closes fd keeping errno; returns -1. */
static int close_failed(int fd)
{
    int error = errno;

    if (fd >= 0)
        close(fd);
    errno = error;
    return -1;
}

/* The directory a walk starts from: "/" for an absolute path, else ".". */
static int walk_root(int absolute)
{
    return open(absolute ? "/" : ".",
                O_PATH | O_DIRECTORY | O_CLOEXEC);
}

/* Takes the first component of *rest into comp (NAME_MAX + 1 bytes) and
 * advances *rest past it; 0, 1 when none is left, -1 when too long. */
static int pop_component(const char **rest, char *comp)
{
    const char *p = *rest, *end;

    while (*p == '/')
        p++;
    if (!*p)
        return 1;
    end = strchrnul(p, '/');
    if (end - p > NAME_MAX)
        return -1;
    memcpy(comp, p, (size_t)(end - p));
    comp[end - p] = '\0';
    *rest = end;
    return 0;
}

/* Whether anything but slashes is left. */
static int more_components(const char *rest)
{
    return rest[strspn(rest, "/")] != '\0';
}

/* Appends comp to shown, the path walked so far (for messages). */
static void show_component(char *shown, size_t len, const char *comp)
{
    size_t n = strlen(shown);

    if (n < len)
        snprintf(shown + n, len - n, "%s%s",
                 n && shown[n - 1] != '/' ? "/" : "", comp);
}

/*
 * The link comp in dirfd, if this user or root made it: its target with
 * rest after it becomes the path still to walk (buf, PATH_MAX * 2 bytes).
 * Returns 0, or -1 with err (EACCES: another user's link).
 */
static int follow_link(int *dirfd, const char *comp, const struct stat *st,
                       const char *shown, char *buf, const char **rest,
                       char *err, size_t errlen)
{
    char target[PATH_MAX], why[160];
    ssize_t n;

    if (!trusted_owner(st->st_uid)) {
        snprintf(why, sizeof(why), "a symbolic link owned by uid %ld, not "
                 "by this user or root: refusing to follow it",
                 (long)st->st_uid);
        return refuse(EACCES, err, errlen, shown, NULL, why);
    }
    n = readlinkat(*dirfd, comp, target, sizeof(target) - 1);
    if (n < 0)
        return refuse(errno, err, errlen, shown, NULL, strerror(errno));
    target[n] = '\0';
    if (snprintf(buf, PATH_MAX * 2, "%s/%s", target, *rest)
        >= PATH_MAX * 2)
        return refuse(ENAMETOOLONG, err, errlen, shown, NULL,
                      "path too long");
    *rest = buf;
    if (target[0] == '/') {
        int root = walk_root(1);

        if (root < 0)
            return refuse(errno, err, errlen, "/", NULL, strerror(errno));
        close(*dirfd);
        *dirfd = root;
    }
    return 0;
}

/* One step of a walk: dirfd moves into comp (a directory, or a trusted
 * link to one).  0 or -1. */
static int walk_step(int *dirfd, const char *comp, const char *shown,
                     char *buf, const char **rest, int *links, char *err,
                     size_t errlen)
{
    int fd = openat(*dirfd, comp,
                    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int error = errno;
    struct stat st;

    if (fd >= 0) {
        close(*dirfd);
        *dirfd = fd;
        return 0;
    }
    if (fstatat(*dirfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0
        && S_ISLNK(st.st_mode)) {
        if (++*links > LINKS_MAX)
            return refuse(ELOOP, err, errlen, shown, NULL, strerror(ELOOP));
        return follow_link(dirfd, comp, &st, shown, buf, rest, err, errlen);
    }
    if (error == ENOENT)
        return refuse(ENOENT, err, errlen, shown, NULL, "no such directory "
                      "(a missing parent is not created)");
    return refuse(error, err, errlen, shown, NULL, strerror(error));
}

/* A failure on a component of path says path first: "PATH: PART: why". */
static int name_whole(const char *path, char *err, size_t errlen)
{
    char part[1024];
    int error = errno;

    if (strncmp(err, path, strlen(path)) != 0
        || (err[strlen(path)] != ':' && err[strlen(path)] != '\0')) {
        snprintf(part, sizeof(part), "%s", err);
        snprintf(err, errlen, "%s: %s", path, part);
    }
    errno = error;
    return -1;
}

int safe_path_parent(const char *path, char *name, char *err, size_t errlen)
{
    char buf[2][PATH_MAX * 2], shown[PATH_MAX * 2] = "", comp[NAME_MAX + 1];
    const char *rest = path;
    int dirfd, links = 0, which = 0;

    if (!*path)
        return refuse(ENOENT, err, errlen, "''", NULL, "an empty path");
    if (path[0] == '/')
        shown[0] = '/';
    dirfd = walk_root(path[0] == '/');
    if (dirfd < 0)
        return refuse(errno, err, errlen, path, NULL, strerror(errno));
    for (;;) {
        int popped = pop_component(&rest, comp);

        if (popped < 0) {
            close(dirfd);
            return refuse(ENAMETOOLONG, err, errlen, path, NULL,
                          "a name too long");
        }
        if (popped > 0 || (!more_components(rest) && (!strcmp(comp, ".")
                                                      || !strcmp(comp, "..")))
            || (!more_components(rest) && rest[0] == '/')) {
            close(dirfd);
            return refuse(EISDIR, err, errlen, path, NULL, "names a "
                          "directory, not a file");
        }
        show_component(shown, sizeof(shown), comp);
        if (!more_components(rest)) {
            strcpy(name, comp);
            return dirfd;
        }
        if (walk_step(&dirfd, comp, shown, buf[which], &rest, &links, err,
                      errlen) < 0)
            return close_failed(dirfd), name_whole(path, err, errlen);
        if (rest == buf[which])
            which = !which;
    }
}

/* Creates out->temp beside out->name in dirfd: O_EXCL|O_NOFOLLOW, 0600. */
static int create_temp(struct safe_out *out, int flags, char *err,
                       size_t errlen)
{
    int access_mode = flags & SAFE_OUT_RDWR ? O_RDWR : O_WRONLY;

    for (int i = 0; i < TEMP_TRIES; i++) {
        unsigned r = (unsigned)getpid() * 2654435761u ^ (unsigned)i * 40503u
                     ^ (unsigned)(uintptr_t)out ^ (unsigned)time(NULL);

        snprintf(out->temp, sizeof(out->temp), ".%.*s.%06x", NAME_MAX - 9,
                 out->name, r & 0xffffff);
        out->fd = openat(out->dirfd, out->temp, access_mode | O_CREAT
                         | O_EXCL | O_NOFOLLOW | O_CLOEXEC, SAFE_FILE_MODE);
        if (out->fd >= 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    out->temp[0] = '\0';
    return refuse(errno, err, errlen, out->path, NULL, strerror(errno));
}

/* A new file for out (renamed over NAME now with SAFE_OUT_PLACE, else by
 * safe_out_close()). */
static int open_new(struct safe_out *out, int flags, char *err,
                    size_t errlen)
{
    if (create_temp(out, flags, err, errlen) < 0)
        return -1;
    if (!(flags & SAFE_OUT_PLACE))
        return 0;
    if (renameat(out->dirfd, out->temp, out->dirfd, out->name) < 0) {
        int error = errno;

        unlinkat(out->dirfd, out->temp, 0);
        close(out->fd);
        out->fd = -1;
        return refuse(error, err, errlen, out->path, NULL, strerror(error));
    }
    out->temp[0] = '\0';
    return 0;
}

/* The file at NAME, written where it is: a device, a FIFO, or what a
 * trusted link reaches (follow).  It must be this user's (a regular file)
 * or this user's or root's (anything else).  A regular file named
 * directly was seen with one link before the open; one with more now (a
 * hard link swapped in between) is replaced like any other. */
static int open_in_place(struct safe_out *out, int follow, int flags,
                         char *err, size_t errlen)
{
    struct stat st;
    int fd = openat(out->dirfd, out->name, O_NOCTTY | O_CLOEXEC
                    | (flags & SAFE_OUT_RDWR ? O_RDWR : O_WRONLY)
                    | (follow ? 0 : O_NOFOLLOW)
                    | (flags & SAFE_OUT_APPEND ? O_APPEND : 0));

    if (fd < 0)
        return refuse(errno, err, errlen, out->path, NULL, strerror(errno));
    if (fstat(fd, &st) < 0)
        return close_failed(fd), refuse(errno, err, errlen, out->path, NULL,
                                         strerror(errno));
    if (!follow && S_ISREG(st.st_mode) && st.st_nlink != 1) {
        close(fd);
        return open_new(out, flags, err, errlen);
    }
    if (S_ISREG(st.st_mode) ? st.st_uid != geteuid()
                            : !trusted_owner(st.st_uid)) {
        char why[160];

        close(fd);
        snprintf(why, sizeof(why), "%s owned by uid %ld: refusing to write "
                 "it", file_kind(&st), (long)st.st_uid);
        return refuse(EACCES, err, errlen, out->path, NULL, why);
    }
    if (S_ISREG(st.st_mode) && (st.st_mode & 07777) != SAFE_FILE_MODE
        && fchmod(fd, SAFE_FILE_MODE) < 0)
        return close_failed(fd), refuse(errno, err, errlen, out->path, NULL,
                                         strerror(errno));
    if (S_ISREG(st.st_mode) && !(flags & SAFE_OUT_APPEND)
        && ftruncate(fd, 0) < 0)
        return close_failed(fd), refuse(errno, err, errlen, out->path, NULL,
                                         strerror(errno));
    out->fd = fd;
    close(out->dirfd);
    out->dirfd = -1;
    return 0;
}

/* Decides, from what is at NAME now, how out is opened. */
static int open_at_name(struct safe_out *out, int flags, char *err,
                        size_t errlen)
{
    struct stat st, dir;
    char why[160];

    if (fstatat(out->dirfd, out->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? open_new(out, flags, err, errlen)
               : refuse(errno, err, errlen, out->path, NULL, strerror(errno));
    /* this user's own file (one link) is written where it is, so a reader
     * that opened it first (a temporary file handed to the tool) sees
     * the output; anything else at the name is replaced, not written */
    if (S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_nlink == 1) {
        cli_test_point("safe-out-in-place");    /* a test swaps NAME here */
        return open_in_place(out, 0, flags, err, errlen);
    }
    if (S_ISREG(st.st_mode))
        return open_new(out, flags, err, errlen);
    if (S_ISDIR(st.st_mode))
        return refuse(EISDIR, err, errlen, out->path, NULL, "a directory");
    if (!trusted_owner(st.st_uid)) {
        snprintf(why, sizeof(why), "%s owned by uid %ld, not by this user "
                 "or root: refusing to write %s", file_kind(&st),
                 (long)st.st_uid, S_ISLNK(st.st_mode) ? "through it" : "it");
        return refuse(EACCES, err, errlen, out->path, NULL, why);
    }
    if (S_ISLNK(st.st_mode)
        && (fstat(out->dirfd, &dir) < 0 || !dir_closed(&dir)))
        return refuse(EACCES, err, errlen, out->path, NULL, "a symbolic "
                      "link in a directory others can write: refusing to "
                      "write through it");
    return open_in_place(out, S_ISLNK(st.st_mode), flags, err, errlen);
}

int safe_out_open(struct safe_out *out, const char *path, int flags,
                  char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->fd = -1;
    out->path = path;
    out->dirfd = safe_path_parent(path, out->name, err, errlen);
    if (out->dirfd < 0)
        return -1;
    if (open_at_name(out, flags, err, errlen) < 0) {
        close_failed(out->dirfd);
        out->dirfd = -1;
        return -1;
    }
    return 0;
}

void safe_out_fd_path(const struct safe_out *out, char *buf, size_t len)
{
    snprintf(buf, len, "/proc/%ld/fd/%d", (long)getpid(), out->fd);
}

FILE *safe_out_stdio(struct safe_out *out, FILE **file)
{
    *file = fdopen(out->fd, "w");
    return *file;
}

int safe_out_close(struct safe_out *out, FILE *file, int keep, char *err,
                   size_t errlen)
{
    int error = 0;

    if (file ? fclose(file) != 0 : out->fd >= 0 && close(out->fd) < 0)
        error = errno;
    out->fd = -1;
    if (out->dirfd >= 0 && out->temp[0]) {
        if (keep && !error
            && renameat(out->dirfd, out->temp, out->dirfd, out->name) < 0)
            error = errno;
        if (!keep || error)
            unlinkat(out->dirfd, out->temp, 0);
        out->temp[0] = '\0';
    }
    if (out->dirfd >= 0)
        close(out->dirfd);
    out->dirfd = -1;
    if (error)
        return refuse(error, err, errlen, out->path, NULL, strerror(error));
    return 0;
}

/* The directory name in dirfd (made if missing) opened and checked: a real
 * directory of this user's, left 0700. */
static int open_own_dir(int dirfd, const char *name, const char *path,
                        char *err, size_t errlen)
{
    struct stat st;
    char why[160];
    int fd;

    if (mkdirat(dirfd, name, SAFE_DIR_MODE) < 0 && errno != EEXIST)
        return refuse(errno, err, errlen, path, NULL, strerror(errno));
    fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return refuse(errno == ENOENT ? ENOENT : EACCES, err, errlen, path,
                      NULL, S_ISLNK(st.st_mode) ? "a symbolic link, not a "
                      "directory: refusing to use it" : "not a directory");
    if (fd < 0)
        return refuse(errno, err, errlen, path, NULL, strerror(errno));
    if (fstat(fd, &st) < 0)
        return close_failed(fd), refuse(errno, err, errlen, path, NULL,
                                         strerror(errno));
    if (st.st_uid != geteuid()) {
        close(fd);
        snprintf(why, sizeof(why), "owned by uid %ld, not by this user (uid "
                 "%ld): refusing to use it", (long)st.st_uid,
                 (long)geteuid());
        return refuse(EACCES, err, errlen, path, NULL, why);
    }
    if ((st.st_mode & 07777) != SAFE_DIR_MODE
        && fchmod(fd, SAFE_DIR_MODE) < 0)
        return close_failed(fd), refuse(errno, err, errlen, path, NULL,
                                         strerror(errno));
    return fd;
}

int safe_dir_make(const char *path, char *err, size_t errlen)
{
    char trimmed[PATH_MAX], name[NAME_MAX + 1];
    size_t n = strlen(path);
    int dirfd, fd;

    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n >= sizeof(trimmed))
        return refuse(ENAMETOOLONG, err, errlen, path, NULL,
                      "path too long");
    memcpy(trimmed, path, n);
    trimmed[n] = '\0';
    if (!strcmp(trimmed, "/"))
        return refuse(EACCES, err, errlen, path, NULL, "the root directory: "
                      "refusing to use it");
    dirfd = safe_path_parent(trimmed, name, err, errlen);
    if (dirfd < 0)
        return -1;
    fd = open_own_dir(dirfd, name, trimmed, err, errlen);
    close_failed(dirfd);
    return fd;
}

int safe_in_open(const char *path, long long max_size, int flags, char *err,
                 size_t errlen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC
                  | (flags & SAFE_IN_FOLLOW ? 0 : O_NOFOLLOW));
    struct stat st;
    char why[160];

    if (fd < 0 && errno == ELOOP)
        return refuse(EACCES, err, errlen, path, NULL, "a symbolic link: "
                      "refusing to follow it");
    if (fd < 0)
        return refuse(errno, err, errlen, path, NULL, strerror(errno));
    if (fstat(fd, &st) < 0)
        return close_failed(fd), refuse(errno, err, errlen, path, NULL,
                                         strerror(errno));
    if (!S_ISREG(st.st_mode))
        snprintf(why, sizeof(why), "%s, not a regular file: refusing to "
                 "read it", file_kind(&st));
    else if (st.st_size > max_size)
        snprintf(why, sizeof(why), "%lld bytes, more than the %lld a file "
                 "of this kind may have: refusing to read it",
                 (long long)st.st_size, max_size);
    else if ((flags & SAFE_IN_OWNED) && !trusted_owner(st.st_uid))
        snprintf(why, sizeof(why), "owned by uid %ld, not by this user or "
                 "root: refusing to read it", (long)st.st_uid);
    else if (fcntl(fd, F_SETFL, 0) < 0)
        snprintf(why, sizeof(why), "%s", strerror(errno));
    else
        return fd;
    close(fd);
    return refuse(EACCES, err, errlen, path, NULL, why);
}
