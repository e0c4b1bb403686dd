"""Files a user names for writing, and files a session names for reading,
safe against the other users of the machine.

This is the Python side of common/safe-file.h, by the same rule, for every
file copreport writes or reads by a name it did not make itself.

Writing (output(), output_dir(), check_output()).  A path a user names may
run through directories other users can write (/tmp, a shared folder),
where they could have planted a symbolic link before the report ran:

  - the path is walked one component at a time from "/" or ".", each
    directory opened (O_PATH|O_DIRECTORY|O_NOFOLLOW) relative to the one
    before; a symbolic link on the way is followed only if it belongs to
    this user or root, so a link another user planted in a parent is
    refused, naming it;
  - the file is written to a new file beside it (".NAME.XXXXXX", created
    O_EXCL|O_NOFOLLOW, mode 0600) and renamed over NAME once complete: a
    link or another user's file at NAME is replaced, never written
    through, and a failed report leaves NAME as it was.  A regular file
    of this user's with one link is written where it is (O_NOFOLLOW,
    emptied, made 0600), so a reader that opened it first sees the report;
  - a symbolic link at NAME is followed only if it belongs to this user or
    root and sits in a directory nobody else can write (/dev/stdout, a
    user's own link), and what it reaches is written in place, as is an
    existing device or FIFO of this user's or root's (/dev/null);
  - a directory (copreport html -o DIR) is created last component only,
    0700; an existing one must be a real directory of this user's.

Reading (read_input()).  A session names files: images.path (the host
program a context's image was found in), its cache files, the source
files of DWARF lines.  Any of them may be a FIFO (an open would wait
forever), /dev/zero (a read would never end), or huge: each is opened
O_RDONLY|O_NONBLOCK|O_NOFOLLOW and must be, by fstat of that descriptor, a
regular file of at most a bounded size (and for the session's own cache,
this user's or root's) before a byte is read.  Files outside the session
that are often reached through a link (a host program, a library, a
source file) are opened following it, if the link is this user's or
root's (in a parent, as for writing, and at the name; another user's link
is refused, naming it, and what it points to is never opened), and what
it reaches is checked.

Every failure is a SafeFileError whose str() is one line "PATH: reason".
"""

import errno
import io
import os
import secrets
import stat

LINKS_MAX = 40
FILE_MODE = 0o600
DIR_MODE = 0o700
MAX_INPUT = 1 << 30         # 1 GiB: more is no program or source of ours


class SafeFileError(Exception):
    """A file refused or failed; str() is one line "PATH: reason"."""

    def __init__(self, path, reason, error=None):
        super().__init__("%s: %s" % (path, reason))
        self.path = path
        self.reason = reason
        self.errno = error


def _trusted(uid):
    """Whether uid may own what this user relies on: the user, or root."""
    return uid in (os.geteuid(), 0)


def _kind(mode):
    for test, name in ((stat.S_ISDIR, "a directory"),
                       (stat.S_ISLNK, "a symbolic link"),
                       (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a regular file"


def _strerror(e):
    return e.strerror or str(e)


def _walk_root(absolute):
    return os.open("/" if absolute else ".",
                   os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)


def _shown(walked):
    return "/".join(walked).replace("//", "/") or "/"


def _step(dirfd, comp, shown):
    """The descriptor of comp in dirfd when it is a directory, else the
    link's target when it is a trusted link (a str); SafeFileError."""
    try:
        return os.open(comp, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW |
                       os.O_CLOEXEC, dir_fd=dirfd)
    except OSError as e:
        error = e
    try:
        st = os.stat(comp, dir_fd=dirfd, follow_symlinks=False)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        if not _trusted(st.st_uid):
            raise SafeFileError(shown, "a symbolic link owned by uid %d, not "
                                "by this user or root: refusing to follow it"
                                % st.st_uid, errno.EACCES)
        return os.readlink(comp, dir_fd=dirfd)
    if error.errno == errno.ENOENT:
        raise SafeFileError(shown, "no such directory (a missing parent is "
                            "not created)", errno.ENOENT)
    raise SafeFileError(shown, _strerror(error), error.errno)


def parent(path):
    """(dirfd, name): the directory holding path's last component, walked
    by the rule above (an O_PATH descriptor the caller closes), and that
    component.  SafeFileError names the component refused."""
    if not path:
        raise SafeFileError("''", "an empty path", errno.ENOENT)
    rest = path.split("/")
    walked = ["/"] if path.startswith("/") else []
    dirfd = _walk_root(path.startswith("/"))
    links = 0
    try:
        while True:
            while rest and rest[0] == "":
                rest.pop(0)
            if not rest or (len(rest) == 1 and rest[0] in (".", "..")) or \
                    (len(rest) > 1 and all(c == "" for c in rest[1:])):
                raise SafeFileError(path, "names a directory, not a file",
                                    errno.EISDIR)
            comp = rest.pop(0)
            walked.append(comp)
            if not rest:
                name = comp
                break
            try:
                got = _step(dirfd, comp, _shown(walked))
            except SafeFileError as e:
                raise SafeFileError(path, "%s: %s" % (e.path, e.reason),
                                    e.errno)
            if isinstance(got, int):
                os.close(dirfd)
                dirfd = got
                continue
            links += 1
            if links > LINKS_MAX:
                raise SafeFileError(_shown(walked), os.strerror(errno.ELOOP),
                                    errno.ELOOP)
            rest = got.split("/") + rest
            if got.startswith("/"):
                os.close(dirfd)
                dirfd = _walk_root(True)
    except BaseException:
        os.close(dirfd)
        raise
    return dirfd, name


def _dir_closed(dirfd):
    st = os.fstat(dirfd)
    return _trusted(st.st_uid) and not st.st_mode & 0o022


def _how(dirfd, name, path):
    """"new" (a new file renamed over name), "link" or "place" (written
    where it is, following a trusted link or not); SafeFileError."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return "new"
    except OSError as e:
        raise SafeFileError(path, _strerror(e), e.errno)
    if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and \
            st.st_nlink == 1:
        return "place"              # the user's own file, written in place
    if stat.S_ISREG(st.st_mode):
        return "new"
    if stat.S_ISDIR(st.st_mode):
        raise SafeFileError(path, "a directory", errno.EISDIR)
    link = stat.S_ISLNK(st.st_mode)
    if not _trusted(st.st_uid):
        raise SafeFileError(path, "%s owned by uid %d, not by this user or "
                            "root: refusing to write %s"
                            % (_kind(st.st_mode), st.st_uid,
                               "through it" if link else "it"), errno.EACCES)
    if link and not _dir_closed(dirfd):
        raise SafeFileError(path, "a symbolic link in a directory others "
                            "can write: refusing to write through it",
                            errno.EACCES)
    return "link" if link else "place"


def check_output(path):
    """Fails early (before the work) with SafeFileError when path cannot
    be written by the rule above; creates nothing."""
    dirfd, name = parent(path)
    try:
        how = _how(dirfd, name, path)
        if how == "new" and not os.access(".", os.W_OK, dir_fd=dirfd):
            # O_PATH descriptors answer access() for the directory
            raise SafeFileError(path, os.strerror(errno.EACCES),
                                errno.EACCES)
    finally:
        os.close(dirfd)


def _open_in_place(dirfd, name, path, follow):
    """The descriptor of name, written where it is; None when a regular
    file named directly has more than one link now (one was swapped in
    after _how() looked): it is then replaced like any other."""
    flags = os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(name, flags, dir_fd=dirfd)
    except OSError as e:
        raise SafeFileError(path, _strerror(e), e.errno)
    st = os.fstat(fd)
    regular = stat.S_ISREG(st.st_mode)
    if regular and not follow and st.st_nlink != 1:
        os.close(fd)
        return None
    if (st.st_uid != os.geteuid()) if regular else not _trusted(st.st_uid):
        os.close(fd)
        raise SafeFileError(path, "%s owned by uid %d: refusing to write it"
                            % (_kind(st.st_mode), st.st_uid), errno.EACCES)
    if regular:
        if stat.S_IMODE(st.st_mode) != FILE_MODE:
            os.fchmod(fd, FILE_MODE)
        os.ftruncate(fd, 0)
    return fd


def _create_temp(dirfd, name, path):
    for _ in range(64):
        temp = ".%s.%s" % (name[:240], secrets.token_hex(3))
        try:
            return temp, os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                                 os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                                 dir_fd=dirfd)
        except FileExistsError:
            continue
        except OSError as e:
            raise SafeFileError(path, _strerror(e), e.errno)
    raise SafeFileError(path, "cannot create a new file beside it",
                        errno.EEXIST)


class Output:
    """A file being written to a path a user named: its file object in
    .file; commit() renames it into place, abort() removes it.  As a
    context manager: commit at the end, abort on an exception."""

    def __init__(self, path, mode="w", dirfd=None, name=None):
        self.path = path
        self._temp = None
        if dirfd is None:
            self._dirfd, self._name = parent(path)
        else:
            self._dirfd, self._name = os.dup(dirfd), name
        try:
            how = _how(self._dirfd, self._name, path)
            if how == "new":
                self._temp, fd = _create_temp(self._dirfd, self._name, path)
            else:
                fd = _open_in_place(self._dirfd, self._name, path,
                                    how == "link")
            if fd is None:          # a hard link swapped in after _how()
                self._temp, fd = _create_temp(self._dirfd, self._name, path)
        except BaseException:
            os.close(self._dirfd)
            raise
        if "b" in mode:
            self.file = os.fdopen(fd, "wb")
        else:
            self.file = io.open(fd, "w", encoding="utf-8")

    def commit(self):
        """Closes the file and puts it at the path; SafeFileError."""
        try:
            self.file.close()
            if self._temp:
                os.rename(self._temp, self._name, src_dir_fd=self._dirfd,
                          dst_dir_fd=self._dirfd)
                self._temp = None
        except OSError as e:
            self.abort()
            raise SafeFileError(self.path, _strerror(e), e.errno)
        finally:
            self._close_dir()

    def abort(self):
        """Closes the file and removes the new one (the path untouched)."""
        try:
            self.file.close()
        except OSError:
            pass
        if self._temp and self._dirfd is not None:
            try:
                os.unlink(self._temp, dir_fd=self._dirfd)
            except OSError:
                pass
            self._temp = None
        self._close_dir()

    def _close_dir(self):
        if self._dirfd is not None:
            os.close(self._dirfd)
            self._dirfd = None

    def __enter__(self):
        return self.file

    def __exit__(self, kind, value, tb):
        if kind is None:
            self.commit()
        else:
            self.abort()
        return False


def output(path, mode="w"):
    """An Output for path (mode "w": UTF-8 text, "wb": bytes)."""
    return Output(path, mode)


def output_in(dirfd, name, mode="wb", shown=None):
    """An Output for name in the directory dirfd (from output_dir())."""
    return Output(shown or name, mode, dirfd=dirfd, name=name)


def output_dir(path):
    """The directory path, by the rule above: created (last component
    only, 0700) when missing, else a real directory of this user's, made
    0700.  Its descriptor (the caller closes it); SafeFileError."""
    trimmed = path.rstrip("/") or "/"
    if trimmed == "/":
        raise SafeFileError(path, "the root directory: refusing to use it",
                            errno.EACCES)
    dirfd, name = parent(trimmed)
    try:
        try:
            os.mkdir(name, DIR_MODE, dir_fd=dirfd)
        except FileExistsError:
            pass
        except OSError as e:
            raise SafeFileError(path, _strerror(e), e.errno)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW |
                         os.O_CLOEXEC, dir_fd=dirfd)
        except OSError as e:
            st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                raise SafeFileError(path, "a symbolic link, not a directory: "
                                    "refusing to use it", errno.EACCES)
            raise SafeFileError(path, "not a directory" if e.errno ==
                                errno.ENOTDIR else _strerror(e), e.errno)
    finally:
        os.close(dirfd)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():
        os.close(fd)
        raise SafeFileError(path, "owned by uid %d, not by this user (uid "
                            "%d): refusing to use it"
                            % (st.st_uid, os.geteuid()), errno.EACCES)
    if stat.S_IMODE(st.st_mode) != DIR_MODE:
        os.fchmod(fd, DIR_MODE)
    return fd


def _open_trusted(path, flags):
    """A descriptor of path opened with flags and O_NOFOLLOW, after
    following only links of this user's or root's: in parents (parent())
    and at the name itself; SafeFileError naming path."""
    at = path
    for _ in range(LINKS_MAX + 1):
        try:
            dirfd, name = parent(at)
        except SafeFileError as e:
            if e.errno == errno.ENOENT and "a missing parent" in e.reason:
                raise SafeFileError(path, os.strerror(e.errno), e.errno)
            raise SafeFileError(path, e.reason if e.path == at else
                                "%s: %s" % (e.path, e.reason), e.errno)
        try:
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
            except OSError as e:
                raise SafeFileError(path, _strerror(e), e.errno)
            if not stat.S_ISLNK(st.st_mode):
                try:
                    return os.open(name, flags | os.O_NOFOLLOW, dir_fd=dirfd)
                except OSError as e:
                    raise SafeFileError(path, _strerror(e), e.errno)
            if not _trusted(st.st_uid):
                raise SafeFileError(path, "a symbolic link owned by uid %d, "
                                    "not by this user or root: refusing to "
                                    "follow it" % st.st_uid, errno.EACCES)
            target = os.readlink(name, dir_fd=dirfd)
        finally:
            os.close(dirfd)
        at = os.path.join(os.path.dirname(at), target)
    raise SafeFileError(path, os.strerror(errno.ELOOP), errno.ELOOP)


def read_input(path, max_size=MAX_INPUT, owned=False, want_size=None,
               follow=False):
    """The bytes of the file a session names at path: a regular file (not
    a FIFO, a device, nor a link unless follow) of at most max_size bytes
    (and with owned, this user's or root's); with want_size, exactly that
    many bytes or SafeFileError before anything is read.  follow is for
    files outside the session that are often reached through a link (a
    host program, a library, a source file): links of this user's or
    root's only (_open_trusted), and what they reach is checked all the
    same."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    if follow:
        fd = _open_trusted(path, flags)
    else:
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise SafeFileError(path, "a symbolic link: refusing to "
                                    "follow it", e.errno)
            raise SafeFileError(path, _strerror(e), e.errno)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SafeFileError(path, "%s, not a regular file: refusing to "
                                "read it" % _kind(st.st_mode), errno.EACCES)
        if st.st_size > max_size:
            raise SafeFileError(path, "%d bytes, more than the %d a file of "
                                "this kind may have: refusing to read it"
                                % (st.st_size, max_size), errno.EFBIG)
        if owned and not _trusted(st.st_uid):
            raise SafeFileError(path, "owned by uid %d, not by this user or "
                                "root: refusing to read it" % st.st_uid,
                                errno.EACCES)
        if want_size is not None and st.st_size != want_size:
            raise SafeFileError(path, "holds %d bytes, not the %d recorded"
                                % (st.st_size, want_size), errno.EINVAL)
        chunks, left = [], st.st_size
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise SafeFileError(path, _strerror(e), e.errno)
    finally:
        os.close(fd)
