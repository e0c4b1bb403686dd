"""A coprof session directory, opened read-only.

A session (docs/session-format.md) is a directory holding session.db, an
SQLite database that coprofd writes in WAL mode, and images/, a copy of
every coprocessor image a context ran.  Session.open() checks that the
directory holds a database of ours (PRAGMA application_id "Copr") of a
format version this reader knows (PRAGMA user_version and the session key
format_version), and opens it with a read-only URI so that a report never
writes to a session, also while coprofd is still recording it.

Every failure is a SessionError whose str() is one line "THING: reason".
"""

import os
import sqlite3
import urllib.parse

APPLICATION_ID = 0x436F7072     # "Copr"
FORMAT_VERSION = 1
DB_NAME = "session.db"


class SessionError(Exception):
    """A session that cannot be read; str() is "THING: reason"."""


def default_dir():
    """The session a report reads without -d: ./coprof_data (coprof record's
    default) if it exists, else copcontrol's $XDG_DATA_HOME/coprof/current
    (~/.local/share/coprof/current).  None if neither exists."""
    if os.path.isdir("coprof_data"):
        return "coprof_data"
    xdg = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    current = os.path.join(xdg, "coprof", "current")
    if os.path.isdir(current):
        return current
    return None


class Session:
    """An open session; rows come back as sqlite3.Row (by column name)."""

    def __init__(self, directory, db):
        self.dir = directory
        self.db = db
        self.keys = dict(db.execute("SELECT key, value FROM session"))

    @classmethod
    def open(cls, directory):
        if not os.path.exists(directory):
            raise SessionError("%s: no such directory" % directory)
        if not os.path.isdir(directory):
            raise SessionError("%s: not a directory" % directory)
        path = os.path.join(directory, DB_NAME)
        if not os.path.isfile(path):
            raise SessionError("%s: not a coprof session (no %s)"
                               % (directory, DB_NAME))
        if not os.access(path, os.R_OK):
            raise SessionError("%s: permission denied" % path)
        uri = "file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path))
        try:
            db = sqlite3.connect(uri, uri=True)
            db.row_factory = sqlite3.Row
            app = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.Error as e:
            raise SessionError("%s: not a coprof session (%s)" % (path, e))
        if app != APPLICATION_ID:
            db.close()
            raise SessionError("%s: not a coprof session (application_id "
                               "0x%08x)" % (path, app))
        if version > FORMAT_VERSION:
            db.close()
            raise SessionError("%s: format version %d is newer than this "
                               "copreport reads (%d)"
                               % (path, version, FORMAT_VERSION))
        if version < 1:
            db.close()
            raise SessionError("%s: not a coprof session (format version %d)"
                               % (path, version))
        try:
            session = cls(directory, db)
        except sqlite3.Error as e:
            db.close()
            raise SessionError("%s: cannot read (%s)" % (path, e))
        fv = session.keys.get("format_version")
        if fv is not None and not str(fv).isdigit():
            db.close()
            raise SessionError("%s: format_version %r is not a number"
                               % (path, fv))
        if fv is not None and int(fv) > FORMAT_VERSION:
            db.close()
            raise SessionError("%s: format version %s is newer than this "
                               "copreport reads (%d)"
                               % (path, fv, FORMAT_VERSION))
        return session

    def close(self):
        self.db.close()

    def query(self, sql, args=()):
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise SessionError("%s: cannot read (%s)"
                               % (os.path.join(self.dir, DB_NAME), e))

    def int_key(self, name, default=0):
        v = self.keys.get(name)
        try:
            return int(v)
        except (TypeError, ValueError):
            return default

    # --- tables -------------------------------------------------------

    def images(self):
        """{id: Row} of images."""
        return {r["id"]: r for r in self.query("SELECT * FROM images")}

    def contexts(self):
        """{id: Row} of contexts, in id order."""
        return {r["id"]: r for r in
                self.query("SELECT * FROM contexts ORDER BY id")}

    def samples(self):
        return self.query("SELECT context, image, file_offset, overlay, count "
                          "FROM samples")

    def ambiguous(self):
        """Ambiguous samples and pending ones (which a report treats as
        ambiguous: guard_to -1), as (context, image, ls_addr, region,
        guard_from, guard_to, count, pending)."""
        rows = [tuple(r) + (False,) for r in self.query(
            "SELECT context, image, ls_addr, region, guard_from, guard_to,"
            " count FROM ambiguous_samples")]
        rows += [tuple(r) + (True,) for r in self.query(
            "SELECT context, image, ls_addr, region, guard, -1, count"
            " FROM pending_samples")]
        return rows

    def candidates(self):
        """{(image, ls_addr): [(overlay, file_offset), ...]}."""
        out = {}
        for r in self.query("SELECT image, ls_addr, overlay, file_offset "
                            "FROM ambiguous_candidates ORDER BY overlay"):
            out.setdefault((r[0], r[1]), []).append((r[2], r[3]))
        return out

    def unmapped(self):
        return self.query("SELECT context, image, ls_addr, reason, guard, "
                          "count FROM unmapped_samples")

    def orphans(self):
        return self.query("SELECT slot, ls_addr, count FROM orphan_samples")

    def lost_by_cause(self):
        return self.query("SELECT cause, cause_name, count FROM lost_by_cause "
                          "ORDER BY count DESC")

    def decode_errors(self):
        return self.query("SELECT kind, count FROM decode_errors "
                          "WHERE count > 0 ORDER BY kind")

    def bindings(self):
        return self.query("SELECT * FROM bindings ORDER BY id")

    def sample_timeline(self):
        return self.query("SELECT context, image, bucket_start_ns, "
                          "function_offset, count FROM sample_timeline "
                          "ORDER BY context, bucket_start_ns")

    def sched_events(self):
        return self.query("SELECT * FROM sched_events ORDER BY order_num")

    def image_file(self, image):
        """The path of an image's bytes to symbolize, and the offset of its
        ELF header in it: the session's cached copy when present, else the
        file it was found in."""
        cache = image["cache_file"]
        if cache:
            p = os.path.join(self.dir, cache)
            if os.path.isfile(p):
                return p, 0
        if image["path"] and os.path.isfile(image["path"]):
            return image["path"], image["image_offset"] or 0
        return None, 0

    # --- losses and stalls by context (issue 13) ----------------------

    def has_table(self, name):
        """True if the session has this table or view (a session written
        before it was added does not)."""
        return bool(self.query("SELECT 1 FROM sqlite_master WHERE name = ?"
                               " AND type IN ('table', 'view')", (name,)))

    def lost_by_context(self):
        """Lost captures as (context, slot, cause, cause_name, count),
        summed per context, slot and cause; context None when the slot had
        none."""
        return self.query("SELECT context, slot, cause, cause_name,"
                          " SUM(count) FROM lost_events"
                          " GROUP BY context, slot, cause"
                          " ORDER BY context, slot, cause")

    def stalls(self):
        """Time the trace unit stalled the coprocessor on a full FIFO, as
        (slot, context, count, ns) rows; none for a session without the
        stalls table (recorded before the stall policy existed)."""
        if not self.has_table("stalls"):
            return []
        return self.query("SELECT slot, context, SUM(count), SUM(ns)"
                          " FROM stalls GROUP BY slot, context"
                          " ORDER BY slot, context")
