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

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
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
