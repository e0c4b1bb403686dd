"""A coprof session directory, opened read-only.

A session (docs/session-format.md) is a directory holding session.db, an
SQLite database that coprofd writes in WAL mode, and images/, a copy of
every coprocessor image a context ran.  Session.open() checks that the
directory holds a database of ours (PRAGMA application_id "Copr") of a
format version this reader knows (PRAGMA user_version and the session key
format_version), and opens it with a read-only URI so that a report never
writes to a session, also while coprofd is still recording it.  Everything
is read in one read transaction, so that a report of a live session is of
one flush, whole, however many flushes come while it is made.

A damaged session is refused before any report is built: check() scans
every column a report reads for values of the wrong kind (text where a
count belongs, a negative count, a NULL image offset: COLUMNS, from the
schema abi/session-schema.sql), in one query per table, the references
between tables (REFERENCES: a sample's image is a row of images) and the
integer session keys (INT_KEYS, from the schema's @key lines).  A cached
image is used only when its bytes are the image's (image_file(): its
size, and its bytes against the file it was found in when that file still
has the recorded content hash), and symbols are read from the bytes so
checked, never from the file by name again; a per-image problem is a
warning (Session.warnings) and that image's samples are reported without
symbols.  end() says whether the session is complete, live or incomplete,
and why.

Every failure is a SessionError whose str() is one line "THING: reason".
"""

import fcntl
import hashlib
import os
import sqlite3
import time
import urllib.parse

from coprof_report import cheader, session_schema
from . import safefile

# The schema (abi/session-schema.sql, beside this file): every column a
# report checks with its kind (COLUMNS), the columns naming a row of
# another table by id, NULL naming none (REFERENCES), and the tables a
# session may lack, written before they existed or without coprof-host
# (LATER_TABLES).
SCHEMA = session_schema.load()
COLUMNS = SCHEMA.columns()
REFERENCES = SCHEMA.references()
LATER_TABLES = SCHEMA.optional_tables()

APPLICATION_ID = SCHEMA.application_id      # "Copr"
FORMAT_VERSION = SCHEMA.format_version
# The session directory's names (abi/session-dir.h, beside this file).
_NAMES = cheader.load("session-dir.h").defines
DB_NAME = _NAMES["SESSION_DB_NAME"]
CACHE_DIR = _NAMES["SESSION_CACHE_DIR"]     # the images' copies
LOCK_NAME = _NAMES["SESSION_LOCK_NAME"]     # flock()ed by the coprofd
#                                             writing a session

# What a column of each kind of the schema may hold: (SQL condition true
# for a bad value, what it must be).  "{c}" is the column.
_BAD = {
    "count": "typeof({c}) != 'integer' OR {c} < 0",
    "id": "typeof({c}) != 'integer' OR {c} < 1",
    "id?": "{c} IS NOT NULL AND (typeof({c}) != 'integer' OR {c} < 1)",
    "uint": "typeof({c}) != 'integer' OR {c} < 0",
    "uint?": "{c} IS NOT NULL AND (typeof({c}) != 'integer' OR {c} < 0)",
    "int": "typeof({c}) != 'integer'",
    "int?": "{c} IS NOT NULL AND typeof({c}) != 'integer'",
    "text": "typeof({c}) != 'text'",
    "text?": "{c} IS NOT NULL AND typeof({c}) != 'text'",
}
KINDS = {kind: (_BAD[kind], meaning)
         for kind, meaning in session_schema.KINDS.items()}

# Session keys holding integers, with their least valid value (None: any
# integer): the schema's -- @key lines of an integer kind, "NAME.*" for a
# family of keys.
INT_KEYS = SCHEMA.int_keys()

END_STATES = ("live", "complete", "incomplete")


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
        self.name = directory       # in reports: the archive's path for
        #                             a session read from one
        self.db = db
        self.keys = dict(db.execute("SELECT key, value FROM session"))
        self.rows_loaded = 0        # rows iterate() gave
        self.warnings = []          # one line each: per-image problems
        self.recording = False      # a coprofd held the lock at open
        self._originals = {}        # (path, hash, size) -> bytes or None

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
        # Before the snapshot: a coprofd that held the lock then and has
        # gone since wrote its end before the snapshot is taken.
        recording = recorder_alive(directory)
        uri = "file:%s?mode=ro" % urllib.parse.quote(os.path.abspath(path))
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None)
            db.row_factory = sqlite3.Row
            # one read transaction: every query sees the same flush
            db.execute("BEGIN")
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
        session.recording = recording
        try:
            session.check_format_version()
            session.check()
        except SessionError:
            db.close()
            raise
        return session

    @property
    def db_path(self):
        return os.path.join(self.dir, DB_NAME)

    def check_format_version(self):
        """The session key format_version: present, a number, one this
        reader knows."""
        path = self.db_path
        if "format_version" not in self.keys or \
                self.keys["format_version"] is None:
            raise SessionError("%s: not a coprof session (no format_version)"
                               % path)
        fv = self.keys["format_version"]
        if not str(fv).isdigit():
            raise SessionError("%s: format_version %s is not a number"
                               % (path, _shown(fv)))
        if int(fv) > FORMAT_VERSION:
            raise SessionError("%s: format version %s is newer than this "
                               "copreport reads (%d)"
                               % (path, fv, FORMAT_VERSION))
        if int(fv) < 1:
            raise SessionError("%s: not a coprof session (format version %s)"
                               % (path, fv))

    def check(self):
        """Refuses (SessionError) a session holding a value a report cannot
        use: a column of COLUMNS of the wrong kind, a bad INT_KEYS key or
        end_state."""
        for table, columns in COLUMNS.items():
            if self._present(table):
                self._check_table(table, columns)
        for table, column, target in REFERENCES:
            if self._present(table):
                self._check_reference(table, column, target)
        for key, least in INT_KEYS.items():
            for name in self._keys_named(key):
                self.int_key(name, None, least)
        for prefix in ("", "host."):
            state = self.keys.get(prefix + "end_state")
            if state is not None and state not in END_STATES:
                raise SessionError("%s: %send_state %s is not one of %s"
                                   % (self.db_path, prefix, _shown(state),
                                      ", ".join(END_STATES)))
            reason = self.keys.get(prefix + "end_reason")
            if reason is not None and not isinstance(reason, str):
                raise SessionError("%s: %send_reason %s is not text"
                                   % (self.db_path, prefix, _shown(reason)))

    def _keys_named(self, key):
        """The session's keys a declared key names: itself, or for a
        family "NAME.*" those of the family, in order."""
        if not key.endswith(".*"):
            return [key]
        return sorted(k for k in self.keys if isinstance(k, str) and
                      k.startswith(key[:-1]))

    def _present(self, table):
        """Whether a table of COLUMNS is there to check: every table but
        those of LATER_TABLES, which older sessions lack."""
        return table not in LATER_TABLES or self.has_table(table)

    def _check_table(self, table, columns):
        """The first bad value of a table, as a SessionError: one scan
        returning, for the first row with a bad value, each column's value
        and whether it is bad."""
        bad = ["(%s)" % KINDS[k][0].format(c=c) for c, k in columns]
        rows = self.query("SELECT %s, %s FROM %s WHERE %s LIMIT 1"
                          % (", ".join(bad), ", ".join(c for c, _ in columns),
                             table, " OR ".join(bad)))
        if not rows:
            return
        n = len(columns)
        for (column, kind), is_bad, value in zip(columns, rows[0][:n],
                                                 rows[0][n:]):
            if is_bad:
                raise SessionError("%s: %s.%s is %s, not %s"
                                   % (self.db_path, table, column,
                                      _shown(value), KINDS[kind][1]))

    def _check_reference(self, table, column, target):
        """A value of table.column naming no row of target, as a
        SessionError."""
        rows = self.query("SELECT %s FROM %s WHERE %s IS NOT NULL AND %s NOT"
                          " IN (SELECT id FROM %s) LIMIT 1"
                          % (column, table, column, column, target))
        if rows:
            raise SessionError("%s: %s.%s is %s, which names no row of %s"
                               % (self.db_path, table, column, rows[0][0],
                                  target))

    def close(self):
        self.db.close()

    def query(self, sql, args=()):
        try:
            return self.db.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise SessionError("%s: cannot read (%s)"
                               % (os.path.join(self.dir, DB_NAME), e))

    def iterate(self, sql, args=()):
        """The rows of a query one by one, never all in memory; counted in
        rows_loaded (what a report read of the sample tables)."""
        try:
            for row in self.db.execute(sql, args):
                self.rows_loaded += 1
                yield row
        except sqlite3.Error as e:
            raise SessionError("%s: cannot read (%s)"
                               % (os.path.join(self.dir, DB_NAME), e))

    def int_key(self, name, default=0, least=None):
        """The session key name as an integer, default when absent or NULL;
        SessionError when it is not an integer (or under least)."""
        v = self.keys.get(name)
        if v is None:
            return default
        try:
            n = int(v) if not isinstance(v, (float, bytes)) else None
        except ValueError:
            n = None
        if n is None or (least is not None and n < least):
            raise SessionError("%s: session key %s is %s, not %s"
                               % (self.db_path, name, _shown(v),
                                  "an integer" if least is None
                                  else "an integer >= %d" % least))
        return n

    def end(self):
        """(state, reason) of the whole session: "complete" when each side
        recorded is (sides()), else the coprocessor side's state when it
        is not complete, else the host side's; the reason names what of
        each side is missing (one line, "" when complete)."""
        sides = self.sides()
        cop, host = sides["coprocessor"], sides["host"]
        reasons = []
        if cop["end_state"] != "complete":
            reasons.append(cop["end_reason"])
        if host is not None and host["end_state"] != "complete":
            reasons.append("the host side is %s: %s" % (
                "lost" if host["end_state"] == "incomplete" else
                "not stored yet", host["end_reason"]))
        if not reasons:
            return "complete", ""
        state = cop["end_state"] if cop["end_state"] != "complete" else \
            host["end_state"]
        return state, "; ".join(reasons)

    def sides(self):
        """{"coprocessor": {"end_state", "end_reason"}, "host": the same,
        or None for a session without a host side (host.end_state: none
        was recorded, or by a coprof older than that key)}."""
        state, reason = self.coprocessor_end()
        return {"coprocessor": {"end_state": state, "end_reason": reason},
                "host": self.host_end()}

    def host_end(self):
        """The host side's end (host.end_state, host.end_reason, which
        coprof and copcontrol set "live" when coprof-host starts and
        coprof-host "complete" with its tables), as a sides() entry, or
        None.  One still live once no coprofd records the session was not
        stored by its coprof-host (yet, or ever)."""
        state = self.keys.get("host.end_state")
        if state is None:
            return None
        reason = self.keys.get("host.end_reason") or ""
        if state == "live" and not self.recording:
            reason = reason or ("its coprof-host has not stored it (still "
                                "storing, or ended without: killed?)")
        elif state == "live":
            reason = reason or "still being recorded"
        elif state == "incomplete" and not reason:
            reason = "no reason recorded"
        return {"end_state": state,
                "end_reason": reason if state != "complete" else ""}

    def coprocessor_end(self):
        """(state, reason): whether the coprocessor side is "complete",
        "live" (its coprofd still records it: the report is as of the last
        flush) or "incomplete", and why (one line, "" when complete).  The
        keys end_state and end_reason say it; a session without them
        (older coprofd) is complete when stream.complete is 1, else live
        or incomplete.  A session that says live but whose lock no coprofd
        held when it was opened (before its snapshot) is incomplete: its
        coprofd died."""
        state = self.keys.get("end_state")
        reason = self.keys.get("end_reason") or ""
        if state is None:
            if self.int_key("stream.complete") == 1:
                return "complete", ""
            state = "live"
        if state == "live" and not self.recording:
            return "incomplete", (
                "its coprofd ended without finishing it (killed?); the "
                "data is as of its last flush")
        if state == "live" and not reason:
            reason = "still being recorded; this is its last flush%s" \
                % _flush_time(self.int_key("last_flush_realtime_ns", None))
        if state == "incomplete" and not reason:
            reason = "no reason recorded"
        return state, reason if state != "complete" else ""

    # --- tables -------------------------------------------------------

    def images(self):
        """{id: Row} of images."""
        return {r["id"]: r for r in self.query("SELECT * FROM images")}

    def contexts(self):
        """{id: Row} of contexts, in id order."""
        return {r["id"]: r for r in
                self.query("SELECT * FROM contexts ORDER BY id")}

    # The sample tables are summed in SQLite (GROUP BY), by context only
    # when the report needs it: a session of 100,000 contexts has millions
    # of rows, a report without contexts a few hundred places.

    def _summed(self, columns, table, group, by_context, span):
        """SUM(count) of table by group (and context when by_context; of
        contexts span[0]..span[1] only when span is given)."""
        where, args = "", ()
        if span is not None:
            where, args = " WHERE context BETWEEN ? AND ?", span
        return self.iterate(
            "SELECT %s, %s, SUM(count) AS count FROM %s%s GROUP BY %s%s"
            % ("context" if by_context else "NULL", columns, table, where,
               "context, " if by_context else "", group), args)

    def samples(self, by_context=True, span=None):
        """(context, image, file_offset, overlay, count); context None
        when not by_context (summed over contexts)."""
        return self._summed("image, file_offset, overlay", "samples",
                            "image, file_offset, overlay", by_context, span)

    def ambiguous(self, by_context=True, span=None):
        """Ambiguous samples and pending ones (which a report treats as
        ambiguous), as (context, image, ls_addr, region, count, pending),
        summed over guard windows (and contexts when not by_context)."""
        for table, pending in (("ambiguous_samples", False),
                               ("pending_samples", True)):
            for r in self._summed("image, ls_addr, region", table,
                                  "image, ls_addr, region", by_context, span):
                yield tuple(r) + (pending,)

    def sample_totals(self):
        """(kind, context, image, samples) of every sample table but
        orphans; kind: exact, ambiguous, pending or unmapped."""
        parts = " UNION ALL ".join(
            "SELECT '%s', context, image, SUM(count) FROM %s"
            " GROUP BY context, image" % (kind, table)
            for kind, table in (("exact", "samples"),
                                ("ambiguous", "ambiguous_samples"),
                                ("pending", "pending_samples"),
                                ("unmapped", "unmapped_samples")))
        return self.iterate(parts)

    def candidates(self):
        """{(image, ls_addr): [(overlay, file_offset), ...]}."""
        out = {}
        for r in self.query("SELECT image, ls_addr, overlay, file_offset "
                            "FROM ambiguous_candidates ORDER BY overlay"):
            out.setdefault((r[0], r[1]), []).append((r[2], r[3]))
        return out

    def unmapped(self, by_context=True, span=None):
        """(context, image, reason, count), summed over addresses."""
        return self._summed("image, reason", "unmapped_samples",
                            "image, reason", by_context, span)

    def orphans(self):
        """(slot, count)."""
        return self.iterate("SELECT slot, SUM(count) AS count FROM orphan_samples"
                            " GROUP BY slot")

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

    def bucket_totals(self):
        """(context, bucket_start_ns, samples) of sample_timeline, summed
        over images and functions."""
        return self.query("SELECT context, bucket_start_ns, SUM(count) "
                          "FROM sample_timeline "
                          "GROUP BY context, bucket_start_ns")

    def timeline_of(self, span=None):
        """(context, image, bucket_start_ns, function_offset, count) of
        sample_timeline, by context and time (of contexts span[0]..span[1]
        only when given): the blocks of consecutive samples intervals.py
        needs."""
        where, args = "", ()
        if span is not None:
            where, args = " WHERE context BETWEEN ? AND ?", span
        return self.query("SELECT context, image, bucket_start_ns, "
                          "function_offset, count FROM sample_timeline%s "
                          "ORDER BY context, bucket_start_ns" % where, args)

    # --- stall reasons (issue 29; stalls.py) ---------------------------

    def sample_stalls(self, by_context=True, span=None):
        """(context, image, file_offset, stall, count) of sample_stalls;
        context None when not by_context (summed over contexts)."""
        return self._summed("image, file_offset, stall", "sample_stalls",
                            "image, file_offset, stall", by_context, span)

    def dma_waits(self):
        """(context, image, file_offset, tag, issuer_ls_addr,
        issuer_offset, count) of dma_wait_samples."""
        return self.iterate("SELECT context, image, file_offset, tag, "
                            "issuer_ls_addr, issuer_offset, count FROM "
                            "dma_wait_samples")

    def stall_timeline_of(self, span=None):
        """(context, image, bucket_start_ns, stall, count) of
        stall_timeline, by context and time (of contexts span[0]..span[1]
        only when given)."""
        where, args = "", ()
        if span is not None:
            where, args = " WHERE context BETWEEN ? AND ?", span
        return self.query("SELECT context, image, bucket_start_ns, stall, "
                          "count FROM stall_timeline%s "
                          "ORDER BY context, bucket_start_ns" % where, args)

    def stack_stalls(self):
        """(context, image, frames, stall, count) of stack_stalls."""
        return self.iterate("SELECT context, image, frames, stall, count "
                            "FROM stack_stalls")

    def sched_events(self):
        return self.query("SELECT * FROM sched_events ORDER BY order_num")

    def image_file(self, image):
        """Where an image's bytes to symbolize are: (path, the offset of
        its ELF header in the file, the file's bytes as they were checked).
        The session's cached copy when it holds the image's bytes, else the
        file it was found in when that still is the file the context ran
        (its recorded size and content hash); (None, 0, None) when
        neither, with a warning in self.warnings.  The bytes are what was
        checked: symbols are read from them, never from the path again (a
        file swapped after the check cannot feed them)."""
        if image["status"] != "ok":
            return None, 0, None    # coprofd said why (images.message)
        original, why = self._original(image)
        cache = image["cache_file"]
        if cache and os.path.lexists(os.path.join(self.dir, cache)):
            p = os.path.join(self.dir, cache)
            problem, cached = _cache_problem(p, image, original)
            if problem is None:
                return p, 0, cached
            if original is not None:
                self._warn("%s: %s; symbols from %s instead"
                           % (p, problem, image["path"]))
                return image["path"], image["image_offset"], original
            self._warn("%s: %s, and %s; the samples of image %s are "
                       "shown without symbols" % (p, problem, _gone(image),
                                                  _image_name(image)))
            return None, 0, None
        if original is not None:
            return image["path"], image["image_offset"], original
        self._warn("image %s: not in the session's cache, and %s; its "
                   "samples are shown without symbols"
                   % (_image_name(image), _gone(image, why)))
        return None, 0, None

    def _original(self, image):
        """(bytes, None) of the file the image was found in, when it still
        is the file the context ran (size and content hash as recorded),
        else (None, why not or None)."""
        path, want = image["path"], image["hash"]
        if not path or not want:
            return None, None
        key = (path, want.lower(), image["size"])
        if key not in self._originals:
            self._originals[key] = _checked_file(*key)
        return self._originals[key]

    def _warn(self, message):
        if message not in self.warnings:
            self.warnings.append(message)


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


def recorder_alive(directory):
    """Whether a coprofd holds the session's lock (is recording it); True
    also when the lock cannot be opened to tell (not ours to say it died)."""
    try:
        fd = os.open(os.path.join(directory, LOCK_NAME),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True                 # held: coprofd is there
    finally:
        os.close(fd)                # also drops a lock we took
    return False


def content_hash(data):
    """The content hash of a file's bytes as the session records it
    (images.hash): its SHA-256's first 8 bytes read little-endian, 16 hex
    digits."""
    return "%016x" % int.from_bytes(hashlib.sha256(data).digest()[:8],
                                     "little")


def _checked_file(path, want_hash, want_size):
    """(bytes, None) of path when it is a regular file with the recorded
    size and content hash, else (None, why not) (safefile.read_input: a
    FIFO or a device is never opened for long or read)."""
    try:
        data = safefile.read_input(path, want_size=want_size,
                                   follow=True)
    except safefile.SafeFileError as e:
        return None, str(e)
    if content_hash(data) != want_hash:
        return None, "%s is not the file the context ran (rebuilt?)" % path
    return data, None


def _cache_problem(path, image, original):
    """(None, its bytes) when the cached copy at path holds the image's
    bytes (_cache_mismatch), else (what is wrong with it, None)."""
    name = image["cache_file"]
    if not name.startswith("images/") or "/" in name[7:] or \
            name[7:] in ("", ".", ".."):
        return "is not a file in the session's images/", None
    try:
        data = safefile.read_input(path, owned=True)
    except safefile.SafeFileError as e:
        return "cannot be used (%s)" % e.reason, None
    problem = _cache_mismatch(data, image, original)
    return problem, None if problem else data


def _cache_mismatch(data, image, original):
    """None when data, a cached copy's bytes, are the image's, else why
    not.  Its size must be image_size; when the file the image was found
    in still is the one the context ran, the bytes must be that file's at
    image_offset, else (an image with a file of its own) the cache must
    have the recorded content hash."""
    size = image["image_size"]
    if size is not None and len(data) != size:
        return "holds %d bytes, the image has %d (not the image's copy)" \
            % (len(data), size)
    off = image["image_offset"]
    if original is not None:
        if original[off:off + len(data)] != data:
            return "is not the image's bytes in %s (the cache was changed)" \
                % image["path"]
    elif _image_hash(image) is not None:
        if content_hash(data) != _image_hash(image):
            return "content hash %s, the image's is %s (the cache was " \
                "changed)" % (content_hash(data), _image_hash(image))
    elif off == 0 and image["hash"] and image["size"] == len(data) and \
            content_hash(data) != image["hash"].lower():
        return "content hash %s, the image's is %s (not the image's copy)" \
            % (content_hash(data), image["hash"].lower())
    return None


def _image_hash(image):
    """The recorded content hash of the image's own bytes (images.
    image_hash), or None (a session from before it was recorded)."""
    try:
        value = image["image_hash"]
    except (IndexError, KeyError):
        return None
    return value.lower() if value else None


def _flush_time(ns):
    """" (at HH:MM:SS UTC)" of a realtime in ns, "" when unknown."""
    if not ns:
        return ""
    return " (at %s UTC)" % time.strftime("%Y-%m-%d %H:%M:%S",
                                          time.gmtime(ns / 1e9))


def _gone(image, why=None):
    """Why the file an image was found in cannot be used instead (why:
    what reading it said)."""
    path = image["path"]
    if not path:
        return "the session names no file for it"
    if not os.path.lexists(path):
        return "%s is gone" % path
    return why or "%s is not the file the context ran (rebuilt?)" % path


def _image_name(image):
    return "%s (%d)" % (image["short_name"] or "?", image["id"])


def _shown(value):
    """A stored value for a one-line message: 'abc', 12, NULL, a blob."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return "a blob of %d bytes" % len(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
