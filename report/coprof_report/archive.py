"""A session in one file, like oparchive (`coprof archive`, `copreport
archive`), and reading one (`copreport -d FILE`).

An archive is a gzipped tar of one directory, "session/", holding
session.db and images/, the image cache: everything copreport reads, so
that a report made from it on another machine, without the programs
that ran, has the same numbers and names.

Writing (write()): the session is opened as every report opens it
(checked, read-only); its database is copied with SQLite's backup API
from that read transaction, so a live session is archived as of one
flush, whole.  Every image whose bytes the report would use goes in:
the cached copy as it is, or, when the cache lacks it but the file the
context ran is still there (unchanged), the image's bytes from that
file, written as images/HASH-OFFSET.elf with images.cache_file pointing
at it in the archived database.  An image with no copy anywhere is a
warning, as in a report.  The archive is written to a new file beside
FILE (0600, O_EXCL) and renamed over FILE once complete.

Reading (open_archive()): members are taken only when they are regular
files named session/session.db or session/images/NAME (no links, no
other paths, no "..", nothing bigger than MAX_MEMBER), extracted into a
private directory (mkdtemp, 0700; files 0600 O_EXCL) that is removed at
exit; the session is then opened from there like any other.  Anything
else is refused with one line naming the archive and the reason.
"""

import atexit
import os
import shutil
import sqlite3
import tarfile
import tempfile
import zlib

from . import profile, safefile
from . import session as session_mod

TOP = "session"
MAX_MEMBER = 1 << 34        # 16 GiB: a member larger is not ours


class ArchiveError(Exception):
    """An archive that cannot be written or read; str() is one line."""


def _private_file(path):
    """A new file at path, 0600, never through a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL |
                 os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "wb")


def _copy_db(session, dest):
    """The session's database, as of the report's read transaction, in
    rollback-journal mode."""
    out = sqlite3.connect(dest)
    try:
        session.db.backup(out)
        # one file: a reader needs no -wal or -shm beside it
        out.execute("PRAGMA journal_mode = DELETE")
    finally:
        out.close()
    os.chmod(dest, 0o600)


def _image_files(session, dest_db, staging):
    """[(name in images/, path on disk)] of every image a report uses;
    images taken from their original file get a cache file in staging
    and in the copied database."""
    images, _ = profile.load_images_and_contexts(session)
    members, names = [], set()
    fixes = []
    cache_dir = os.path.join(os.path.abspath(session.dir),
                             session_mod.CACHE_DIR)
    for info in images.values():
        if not info.file:
            continue            # a warning already says so
        path = os.path.abspath(info.file)
        if not info.base and os.path.dirname(path) == cache_dir:
            if os.path.basename(path) not in names:
                names.add(os.path.basename(path))
                members.append((os.path.basename(path), path))
            continue
        data = info.read_bytes()
        if data is None:
            continue
        name = "%s-%x.elf" % (session_mod.content_hash(data),
                              info.image_offset)
        fixes.append((session_mod.CACHE_DIR + "/" + name, len(data),
                      info.id))
        if name in names:       # the same bytes as an image already in
            continue
        names.add(name)
        staged = os.path.join(staging, name)
        with _private_file(staged) as f:
            f.write(data)
        members.append((name, staged))
    if fixes:
        db = sqlite3.connect(dest_db)
        try:
            db.executemany("UPDATE images SET cache_file = ?, image_size ="
                           " COALESCE(image_size, ?) WHERE id = ?", fixes)
            db.commit()
        finally:
            db.close()
    return members


def write(session, out_path):
    """Writes the archive of an open session to out_path; the number of
    images in it."""
    staging = tempfile.mkdtemp(prefix="copreport-archive-")
    try:
        db_copy = os.path.join(staging, session_mod.DB_NAME)
        try:
            _copy_db(session, db_copy)
        except sqlite3.Error as e:
            raise ArchiveError("%s: cannot copy (%s)" % (session.db_path, e))
        images = _image_files(session, db_copy, staging)
        with safefile.output(out_path, "wb") as raw, \
                tarfile.open(fileobj=raw, mode="w:gz") as tar:
            tar.add(db_copy, arcname="%s/%s" % (TOP, session_mod.DB_NAME),
                    recursive=False, filter=_plain)
            for name, path in images:
                arcname = "%s/%s/%s" % (TOP, session_mod.CACHE_DIR, name)
                tar.add(path, arcname=arcname, recursive=False,
                        filter=_plain)
        return len(images)
    except safefile.SafeFileError as e:
        raise ArchiveError(str(e))
    except OSError as e:
        raise ArchiveError("%s: %s" % (out_path, e.strerror or e))
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _plain(info):
    """A member as anyone may unpack it: no owner names, mode 0600."""
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mode = 0o600
    return info


def _member_path(member):
    """The path under the extraction directory of an acceptable member,
    or None for the top directory entries; ArchiveError otherwise."""
    name = member.name.rstrip("/")
    parts = name.split("/")
    if member.isdir() and name in (TOP, TOP + "/images"):
        return None
    if not member.isfile():
        raise ArchiveError("%s is not a regular file" % member.name)
    if member.size > MAX_MEMBER:
        raise ArchiveError("%s is too large" % member.name)
    if parts == [TOP, session_mod.DB_NAME]:
        return os.path.join(TOP, session_mod.DB_NAME)
    if len(parts) == 3 and parts[:2] == [TOP, session_mod.CACHE_DIR] and \
            parts[2] not in ("", ".", "..") and not parts[2].startswith("."):
        return os.path.join(TOP, session_mod.CACHE_DIR, parts[2])
    raise ArchiveError("%s is not part of a session" % member.name)


def extract(path, into):
    """Extracts the archive at path into the directory into; the
    session's directory."""
    try:
        tar = tarfile.open(path, "r:gz")
    except (OSError, tarfile.TarError, EOFError, zlib.error) as e:
        raise ArchiveError("%s: not a coprof archive (%s)"
                           % (path, _one_line(e)))
    found_db = False
    with tar:
        try:
            os.makedirs(os.path.join(into, TOP, session_mod.CACHE_DIR),
                        mode=0o700)
            for member in tar:
                try:
                    rel = _member_path(member)
                except ArchiveError as e:
                    raise ArchiveError("%s: not a coprof archive (%s)"
                                       % (path, e))
                if rel is None:
                    continue
                src = tar.extractfile(member)
                with _private_file(os.path.join(into, rel)) as out:
                    shutil.copyfileobj(src, out)
                found_db |= rel.endswith(session_mod.DB_NAME)
        except (OSError, tarfile.TarError, EOFError, zlib.error) as e:
            raise ArchiveError("%s: cannot be read (%s)"
                               % (path, getattr(e, "strerror", None) or
                                  _one_line(e)))
    if not found_db:
        raise ArchiveError("%s: not a coprof archive (no %s/%s)"
                           % (path, TOP, session_mod.DB_NAME))
    return os.path.join(into, TOP)


def _one_line(e):
    lines = str(e).splitlines()
    return lines[0] if lines else type(e).__name__


def open_archive(path):
    """The Session of an archive file, extracted into a private
    directory removed at exit; its name is the archive's path."""
    into = tempfile.mkdtemp(prefix="copreport-archive-")
    atexit.register(shutil.rmtree, into, True)
    try:
        directory = extract(path, into)
    except ArchiveError:
        shutil.rmtree(into, ignore_errors=True)
        raise
    s = session_mod.Session.open(directory)
    s.name = path
    return s
