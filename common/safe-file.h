/*
 * safe-file.h — private directories and the files in them, safe against
 * other users of the machine.
 *
 * coprof's tools keep state where other users can reach the parent folder:
 * /tmp/coprof-UID (copsim's socket, copcontrol's settings, logs and pid
 * files, copsim's register file), a folder under $TMPDIR (libcop's private
 * copsim), the session directory.  Anyone could have created such a
 * predictable directory first, or planted symlinks in it, to have this
 * user's files written through them or read.  So:
 *
 *   - a directory is used only after safe_dir_open() checked it, through
 *     its descriptor (O_DIRECTORY|O_NOFOLLOW): a real directory, owned by
 *     this user (or root), writable by nobody else.  A missing one is
 *     created 0700 (its missing parents too).
 *   - a file in it is created with openat(O_NOFOLLOW), mode 0600, and must
 *     be a regular file of this user's with one link; a file that is
 *     replaced (settings, pid files) is written to NAME.new, created
 *     O_EXCL, then renamed over NAME, so a reader never sees half of it.
 *
 * Every function that can fail returns -1 with one line in err naming the
 * directory or file and the reason ("owned by uid 65534, not by this
 * user"), and errno set (EACCES for a directory or file refused).
 */
#ifndef COPROF_SDK_SAFE_FILE_H
#define COPROF_SDK_SAFE_FILE_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#define SAFE_DIR_MODE   0700
#define SAFE_FILE_MODE  0600

/* safe_dir_open()'s flags. */
#define SAFE_DIR_CREATE 1       /* create dir (and missing parents) 0700 */

/* mkdir -p: the missing directories of path created with mode (an
 * existing one is left as it is); 0 or -1. */
int safe_make_dirs(const char *path, unsigned mode, char *err, size_t errlen);

/*
 * Opens dir (O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC) and checks it: not a
 * symlink, owned by this user or root, no write permission for group or
 * others.  With SAFE_DIR_CREATE a missing dir is created first.  Returns
 * the descriptor, or -1 (errno ENOENT for a missing dir without
 * SAFE_DIR_CREATE, EACCES for one refused).
 */
int safe_dir_open(const char *dir, int flags, char *err, size_t errlen);

/* The same checks on an open directory; 0 or -1. */
int safe_dir_check(int dirfd, const char *dir, char *err, size_t errlen);

/*
 * Opens name in the checked directory dirfd (named dir in messages) for
 * writing: O_WRONLY|O_CREAT|O_NOFOLLOW|O_CLOEXEC with flags added (O_TRUNC,
 * O_APPEND, O_EXCL, O_RDWR instead of O_WRONLY), mode 0600.  An existing
 * file must be a regular file of this user's with one link.  Returns the
 * descriptor or -1.
 */
int safe_file_create(int dirfd, const char *dir, const char *name,
                     int flags, char *err, size_t errlen);

/* Opens name in dirfd for reading, never through a symlink; -1 with errno
 * (ENOENT: no such file; ELOOP: a symlink). */
int safe_file_open_read(int dirfd, const char *name);

/*
 * Replaces name in dirfd with the len bytes at data, atomically: written
 * to name.new (a stale one is removed, the new one created O_EXCL, 0600),
 * then renamed over name.  0 or -1 (name untouched).
 */
int safe_file_replace(int dirfd, const char *dir, const char *name,
                      const void *data, size_t len, char *err, size_t errlen);

/* safe_dir_open(dirname(path)) and the part after the last slash. */
int safe_dir_of(const char *path, int flags, const char **name, char *err,
                size_t errlen);

/*
 * Removes dir and everything in it, never following a symlink (one inside
 * is removed, not what it points to).  For a directory this user made
 * (mkdtemp).  0, or -1 with errno (ENOENT is not an error).
 */
int safe_remove_tree(const char *dir);

/*
 * Paths a user names on the command line (-o FILE, --session-dir DIR) may
 * run through directories other users can write (/tmp, a shared folder),
 * where they could have planted a symbolic link before this tool ran.  The
 * rule, the same in every tool (and in report/coprof_report/safefile.py):
 *
 *   - the path is walked one component at a time from "/" or ".", each
 *     directory opened (O_PATH|O_DIRECTORY|O_NOFOLLOW) relative to the one
 *     before; a symbolic link on the way is followed only if it belongs to
 *     this user or root (anyone else's is refused, naming it), so a link
 *     another user planted in a parent is never followed;
 *   - an output file is written to a new file created O_EXCL|O_NOFOLLOW,
 *     0600, beside it (".NAME.XXXXXX") and renamed over NAME when complete
 *     (or at once, SAFE_OUT_PLACE, for a file others read while it grows):
 *     a symbolic link or another user's file at NAME is replaced, never
 *     written through;
 *     An existing regular file of this user's with one link is the
 *     exception: it is written where it is (O_NOFOLLOW, emptied, made
 *     0600), so a reader that opened it first sees the output; nobody
 *     else can have put it there; its link count is checked again on the
 *     opened descriptor, so a hard link swapped in between is replaced
 *     too (test point "safe-out-in-place");
 *   - a symbolic link at NAME is followed only if it belongs to this user
 *     or root and sits in a directory nobody else can write (so nobody can
 *     swap it): /dev/stdout, /proc/self/fd/N, a user's own link; the file
 *     it reaches is then written in place;
 *   - an existing non-regular file (/dev/null, a terminal, a FIFO) is
 *     written in place if it belongs to this user or root;
 *   - a directory is created last component only (a missing parent is an
 *     error naming it), 0700, and an existing one must belong to this user
 *     (a looser mode is made 0700).
 */

/* safe_out_open()'s flags. */
#define SAFE_OUT_PLACE  1       /* rename into place at once, not at close */
#define SAFE_OUT_APPEND 2       /* an existing file written in place is
                                   appended to, not emptied */
#define SAFE_OUT_RDWR   4       /* opened for reading too (to mmap it) */

struct safe_out {
    int fd;                     /* write here; -1 once closed */
    int dirfd;                  /* NAME's directory; -1: written in place */
    char temp[NAME_MAX + 1];    /* the new file while not yet renamed */
    char name[NAME_MAX + 1];    /* NAME in dirfd */
    const char *path;           /* as the user named it, for messages */
};

/*
 * Walks path's directories by the rule above: the descriptor (O_PATH) of
 * the directory holding its last component, whose name is copied to name
 * (at least NAME_MAX + 1 bytes).  -1 with err naming the component that
 * failed (a missing one is ENOENT; a link refused is EACCES).
 */
int safe_path_parent(const char *path, char *name, char *err, size_t errlen);

/*
 * Opens path for writing by the rule above; out->fd is the descriptor to
 * write.  safe_out_close() must follow.  0 or -1 (nothing created).
 */
int safe_out_open(struct safe_out *out, const char *path, int flags,
                  char *err, size_t errlen);

/*
 * "/proc/PID/fd/N" of out->fd into buf: the name by which a child (QEMU's
 * plugin) opens exactly this file while this process lives, never the
 * user's name again.
 */
void safe_out_fd_path(const struct safe_out *out, char *buf, size_t len);

/* out->fd as a stdio stream ("w"); NULL with errno.  Closing it is
 * safe_out_close()'s job. */
FILE *safe_out_stdio(struct safe_out *out, FILE **file);

/*
 * Closes the output (file: the stdio stream from safe_out_stdio, or
 * NULL).  keep: the output is complete and replaces NAME; 0: the new file
 * is removed (NAME untouched; a file written in place stays as written).
 * 0, or -1 when closing or renaming failed (the new file removed).
 */
int safe_out_close(struct safe_out *out, FILE *file, int keep, char *err,
                   size_t errlen);

/*
 * The directory a user named for a session (or other output folder):
 * walked by the rule above, its last component created 0700 if missing
 * (never its parents), an existing one required to be a real directory
 * of this user's, made 0700.  Returns its descriptor (O_RDONLY|
 * O_DIRECTORY) or -1 with err ("/tmp/pub/s: owned by uid 65534, not by
 * this user (uid 0): refusing to use it", "/a/b: no such directory (its
 * parent is not created)").
 */
int safe_dir_make(const char *path, char *err, size_t errlen);

/* safe_in_open()'s flags. */
#define SAFE_IN_OWNED   1       /* the file must belong to this user or root */
#define SAFE_IN_FOLLOW  2       /* a link at the name is followed (a host
                                   program, a library): what it reaches is
                                   checked all the same */

/* The most a file a session names may hold (report/coprof_report/
 * safefile.py's MAX_INPUT): no program or source of ours is larger. */
#define SAFE_IN_SIZE_MAX (1LL << 30)

/*
 * Opens a file a session or another input names, for reading: opened
 * O_RDONLY|O_NONBLOCK|O_NOFOLLOW (so a FIFO does not block and a link is
 * not followed, unless SAFE_IN_FOLLOW), then required by fstat to be a regular file of at most
 * max_size bytes (and with SAFE_IN_OWNED, this user's or root's).  Returns
 * the descriptor (O_NONBLOCK cleared) or -1 with err "PATH: reason" ("a
 * FIFO, not a regular file", "larger than N bytes").
 */
int safe_in_open(const char *path, long long max_size, int flags, char *err,
                 size_t errlen);

#endif /* COPROF_SDK_SAFE_FILE_H */
