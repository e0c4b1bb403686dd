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

#include <stddef.h>

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

#endif /* COPROF_SDK_SAFE_FILE_H */
