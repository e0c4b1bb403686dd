"""Damaged sessions: every column a report reads, damaged with every kind
of wrong value, gives one line "copreport: SESSION: reason" and exit 1 (or
a report, when the value is one the column may hold), never a traceback;
so does every reference to a row that is not there;
bad format versions and session keys are refused; cached images that are
not the image's bytes, or a missing cache beside a rebuilt host binary,
are a warning and the other images are still reported; the session's
end_state and end_reason are in the header and the JSON; -o '' is
refused."""

import fcntl
import json
import os
import shutil
import stat
import subprocess
import sqlite3

import pytest

from coprof_report import cli
from coprof_report.session import COLUMNS, REFERENCES

# overlay/'s test image: main's file offset
MAIN = 0x103c

# What each kind of column may hold, as this test reads the format
# (docs/session-format.md); "?" also NULL.
ACCEPTS = {
    "count": lambda v: isinstance(v, int) and v >= 0,
    "id": lambda v: isinstance(v, int) and v >= 1,
    "uint": lambda v: isinstance(v, int) and v >= 0,
    "int": lambda v: isinstance(v, int),
    "text": lambda v: isinstance(v, str),
}

# The damages: text, a blob, a real, NULL, a negative number, zero.
DAMAGES = ["x", b"\x00\x01", 1.5, None, -1, 0]


def accepted(kind, value):
    if value is None:
        return kind.endswith("?")
    return ACCEPTS[kind.rstrip("?")](value)


@pytest.fixture(scope="module")
def template(new_session, host_schema, test_image, tmp_path_factory):
    """A session with one row in every table a report reads."""
    d = str(tmp_path_factory.mktemp("damage") / "template")
    db = new_session(d, {"stream.samples": 5, "stream.start_time_ns": 1000,
                         "stream.stop_time_ns": 90000000,
                         "last_flush_realtime_ns": 1, "end_state":
                         "complete", "end_reason": ""})
    os.makedirs(os.path.join(d, "images"))
    shutil.copy(test_image, os.path.join(d, "images", "img.elf"))
    db.execute("INSERT INTO images VALUES (1, '/gone/x.elf', 0, 1, 2, 3,"
               " '0123', 'ok', NULL, 'ovltest', ?, 'images/img.elf', NULL)",
               (os.path.getsize(test_image),))
    db.execute("INSERT INTO contexts VALUES (1, 11, 100, 101, '0x10', 1, 0,"
               " 0, '/gone/host+0x1234')")
    db.execute("INSERT INTO samples VALUES (1, 1, ?, 0, 1)", (MAIN,))
    db.execute("INSERT INTO ambiguous_samples VALUES (1, 1, 276, 1, 1, 2, 1)")
    db.execute("INSERT INTO ambiguous_candidates VALUES (1, 276, 1, ?)",
               (MAIN,))
    db.execute("INSERT INTO pending_samples VALUES (1, 1, 276, 1, 2, 1)")
    db.execute("INSERT INTO unmapped_samples VALUES (1, 1, 256, 'no-segment',"
               " -1, 1)")
    db.execute("INSERT INTO orphan_samples VALUES (5, 256, 1)")
    db.execute("INSERT INTO lost_events VALUES (1, 0, 1, 1, 'fifo-overflow',"
               " 3, 100)")
    db.execute("INSERT INTO decode_errors VALUES ('bad-sample', 1)")
    db.execute("INSERT INTO stalls (slot, context, count, ns, cycle)"
               " VALUES (0, 1, 2, 5000, 100)")
    db.execute("INSERT INTO bindings VALUES (1, 0, 1, 0, 100, 2000000,"
               " 3000000, 'switch')")
    db.execute("INSERT INTO sample_timeline VALUES (1, 1, 0, ?, 1)", (MAIN,))
    db.execute("INSERT INTO stacks VALUES (1, 1, ?, 1)", ("0x%x" % MAIN,))
    # the stall reasons (issue 29): the sample's, issuing
    db.execute("INSERT INTO sample_stalls VALUES (1, 1, ?, 0, 1)", (MAIN,))
    db.execute("INSERT INTO dma_wait_samples VALUES (1, 1, ?, 2, 256, ?,"
               " 1)", (MAIN, MAIN))
    db.execute("INSERT INTO stall_timeline VALUES (1, 1, 0, 0, 1)")
    db.execute("INSERT INTO stack_stalls VALUES (1, 1, ?, 0, 1)",
               ("0x%x" % MAIN,))
    db.execute("INSERT INTO sched_events (order_num, ring, seq, time_ns,"
               " kind, slot, context_id, cycle, host_pid, host_tid, message)"
               " VALUES (1, 0, 0, 1500000, 'bind', 0, 11, 5, 100, 101,"
               " 'bind slot=0 mono=1400000')")
    # the host side (hostprof/store.c's tables), one row each
    db.executescript(host_schema)
    db.executemany("INSERT INTO session VALUES (?, ?)", [
        ("host.sched", "recorded"), ("host.samples", "recorded"),
        ("host.event", "cpu-clock"), ("host.period", 250000),
        ("host.start_ns", 1000), ("host.stop_ns", 90000000),
        ("host.sched_events", 1), ("host.sched_threads", "command"),
        ("host.raw_events", 1), ("host.raw_dropped", 0),
        ("host.raw_from_ns", 1000), ("host.bucket_ns", 1000000000)])
    db.execute("INSERT INTO host_threads VALUES (101, 100, 'host', "
               "'command')")
    db.execute("INSERT INTO host_sched_events (time_ns, cpu, kind, tid,"
               " comm, prev_state, other_tid, other_comm) VALUES (1200000,"
               " 0, 'switch', 101, 'host', 'S', 0, 'swapper/0')")
    db.execute("INSERT INTO host_thread_times VALUES (101, 0, 1, 2, 3)")
    db.execute("INSERT INTO host_context_times VALUES (11, 101, 1000, "
               "2000, 1, 2, 3)")
    db.execute("INSERT INTO host_locations VALUES (1, '/gone/host', NULL,"
               " 'spin', 4, NULL, NULL, NULL)")
    db.execute("INSERT INTO host_samples (time_ns, pid, tid, cpu, ip,"
               " location, callchain) VALUES (1100000, 100, 101, 0, 4096,"
               " 1, '1')")
    db.commit()
    db.close()
    return d


def damaged(template, tmp_path, sql, args=()):
    d = str(tmp_path / "s")
    shutil.copytree(template, d)
    db = sqlite3.connect(os.path.join(d, "session.db"))
    db.execute(sql, args)
    db.commit()
    db.close()
    return d


def run(capsys, *argv):
    """cli.main in this process (a traceback fails the test): (status,
    stdout, stderr lines)."""
    status = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err.splitlines()


def refused(capsys, d, tmp_path, *words):
    """Both the report and the timeline refuse d with one line."""
    for argv in (["-d", d], ["timeline", "-d", d, "-o",
                             tmp_path / "t.json"]):
        status, out, err = run(capsys, *argv)
        assert status == 1 and len(err) == 1, (argv, status, err)
        assert err[0].startswith("copreport: %s: " %
                                 os.path.join(d, "session.db")), err
        for w in words:
            assert w in err[0], (w, err[0])
    return err[0]


def reported(capsys, d, tmp_path):
    """Both the report and the timeline are written, without warnings."""
    for argv in (["-d", d, "--separate=context"],
                 ["-d", d, "--format", "json"],
                 ["timeline", "-d", d, "-o", tmp_path / "t.json"]):
        status, out, err = run(capsys, *argv)
        assert status == 0 and err == [], (argv, status, err)


def test_template_is_sound(template, capsys, tmp_path):
    reported(capsys, template, tmp_path)
    status, out, err = run(capsys, "-d", template, "--format", "json")
    rows = {r["symbol"]: r["samples"] for r in json.loads(out)["rows"]}
    assert rows["main"] == 1 and json.loads(out)["totals"]["samples"] == 5


@pytest.mark.parametrize("table,column,target", REFERENCES)
def test_dangling_references(template, capsys, tmp_path, table, column,
                             target):
    d = damaged(template, tmp_path, "UPDATE %s SET %s = 42" % (table, column))
    refused(capsys, d, tmp_path, "%s.%s is 42, which names no row of %s"
            % (table, column, target))


@pytest.mark.parametrize("table,column,kind", [
    (t, c, k) for t, cols in sorted(COLUMNS.items()) for c, k in cols])
def test_every_column_damaged(template, capsys, tmp_path, table, column,
                              kind):
    for value in DAMAGES:
        try:
            d = damaged(template, tmp_path / repr(value), "UPDATE %s SET %s"
                        " = ?" % (table, column), (value,))
        except sqlite3.IntegrityError:
            continue            # NOT NULL: the damage cannot be stored
        db = sqlite3.connect(os.path.join(d, "session.db"))
        stored = db.execute("SELECT %s FROM %s" % (column, table)).fetchone()
        db.close()
        if accepted(kind, stored[0]):
            for argv in (["-d", d, "--separate=context"],
                         ["timeline", "-d", d, "-o", tmp_path / "t.json"]):
                status, out, err = run(capsys, *argv)
                assert status == 0, (value, argv, err)
        else:
            refused(capsys, d, tmp_path, "%s.%s is " % (table, column))


def test_count_stored_as_text_is_refused(session_copy, copreport):
    db = sqlite3.connect(os.path.join(session_copy, "session.db"))
    db.execute("UPDATE samples SET count = 'lots' WHERE file_offset ="
               " (SELECT MIN(file_offset) FROM samples)")
    db.commit()
    db.close()
    p = copreport("-d", session_copy)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.splitlines() == [
        "copreport: %s: samples.count is 'lots', not a count (>= 0)"
        % os.path.join(session_copy, "session.db")]


def test_negative_count_is_refused(template, capsys, tmp_path):
    d = damaged(template, tmp_path, "UPDATE lost_events SET count = -3")
    refused(capsys, d, tmp_path, "lost_events.count is -3")


@pytest.mark.parametrize("sql,words", [
    ("UPDATE session SET value = 0 WHERE key = 'format_version'",
     ["format version 0"]),
    ("UPDATE session SET value = NULL WHERE key = 'format_version'",
     ["no format_version"]),
    ("DELETE FROM session WHERE key = 'format_version'",
     ["no format_version"]),
    ("UPDATE session SET value = 'one' WHERE key = 'format_version'",
     ["format_version 'one' is not a number"]),
    ("UPDATE session SET value = 'x' WHERE key = 'stream.samples'",
     ["session key stream.samples is 'x'"]),
    ("UPDATE session SET value = -5 WHERE key = 'stream.samples'",
     ["session key stream.samples is -5"]),
    ("UPDATE session SET value = 'soon' WHERE key = 'stream.stop_time_ns'",
     ["session key stream.stop_time_ns is 'soon'"]),
    ("UPDATE session SET value = 1.5 WHERE key = 'timeline.bucket_ns'",
     ["session key timeline.bucket_ns is 1.5"]),
    ("UPDATE session SET value = 'done' WHERE key = 'end_state'",
     ["end_state 'done' is not one of live, complete, incomplete"]),
    ("DROP TABLE samples", ["cannot read", "no such table: samples"]),
])
def test_bad_session_keys(template, capsys, tmp_path, sql, words):
    d = damaged(template, tmp_path, sql)
    refused(capsys, d, tmp_path, *words)


# ---- images ----------------------------------------------------------------

def rows_by_symbol(capsys, d):
    status, out, err = run(capsys, "-d", d, "--format", "json")
    assert status == 0, err
    rep = json.loads(out)
    rows = {}
    for r in rep["rows"]:
        rows[(r["image"], r["symbol"])] = \
            rows.get((r["image"], r["symbol"]), 0) + r["samples"]
    return rows, err, rep


def warning(err, *words):
    assert len(err) == 1 and err[0].startswith("copreport: warning: "), err
    for w in words:
        assert w in err[0], (w, err[0])


def swap_caches(session, path=None):
    """Swaps the cached copies of the kernels and pipeline images (and
    makes every image's file path, when given); returns {short name:
    cache_file}."""
    db = sqlite3.connect(os.path.join(session, "session.db"))
    if path is not None:
        db.execute("UPDATE images SET path = ?", (path,))
        db.commit()
    caches = dict(db.execute("SELECT short_name, cache_file FROM images"))
    db.close()
    a = os.path.join(session, caches["kernels"])
    b = os.path.join(session, caches["pipeline"])
    os.rename(a, a + ".tmp")
    os.rename(b, a)
    os.rename(a + ".tmp", b)
    return caches


def test_swapped_cache_is_not_used(real_session, session_copy, capsys):
    good, err, _ = rows_by_symbol(capsys, real_session.dir)
    assert err == []
    caches = swap_caches(session_copy)
    rows, err, rep = rows_by_symbol(capsys, session_copy)
    # both swapped copies are refused, the host executable (unchanged since
    # the recording) gives the right symbols
    assert len(err) == 2 and all(e.startswith("copreport: warning: ")
                                 for e in err), err
    assert any(caches["kernels"] in e for e in err)
    assert all("symbols from %s instead" % real_session.host in e
               for e in err)
    assert rows == good and rep["image_warnings"] == [
        e[len("copreport: warning: "):] for e in err]


def test_changed_cache_of_the_same_size(real_session, session_copy, capsys):
    """The same size, other bytes (a byte of its symbol names changed): the
    bytes are checked against the host executable."""
    good, _, _ = rows_by_symbol(capsys, real_session.dir)
    db = sqlite3.connect(os.path.join(session_copy, "session.db"))
    cache, = db.execute("SELECT cache_file FROM images"
                        " WHERE short_name = 'overlays'").fetchone()
    db.close()
    p = os.path.join(session_copy, cache)
    data = bytearray(open(p, "rb").read())
    i = data.index(b"blur_picture\0")
    data[i] = ord("X")
    open(p, "wb").write(bytes(data))
    rows, err, _ = rows_by_symbol(capsys, session_copy)
    warning(err, p, "not the image's bytes in %s" % real_session.host)
    assert rows == good


def test_swapped_cache_and_no_host(real_session, session_copy, capsys,
                                   tmp_path):
    """Swapped copies with their host executable gone: no symbols for
    those images, a warning each, the rest reported."""
    swap_caches(session_copy, str(tmp_path / "gone"))
    rows, err, _ = rows_by_symbol(capsys, session_copy)
    assert len(err) == 2 and all("is gone" in e and "without symbols" in e
                                 for e in err), err
    assert ("kernels", "[no symbols]") in rows
    assert ("pipeline", "[no symbols]") in rows
    assert ("overlays", "blur_picture") in rows


def test_missing_cache_and_rebuilt_host(real_session, session_copy, capsys,
                                        tmp_path):
    """No cache, and the host executable rebuilt since the recording (other
    bytes at its path): a warning per image, [no symbols] rows."""
    rebuilt = tmp_path / "host-pipeline"
    data = open(real_session.host, "rb").read()
    rebuilt.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    db = sqlite3.connect(os.path.join(session_copy, "session.db"))
    db.execute("UPDATE images SET path = ?", (str(rebuilt),))
    db.commit()
    db.close()
    shutil.rmtree(os.path.join(session_copy, "images"))
    rows, err, _ = rows_by_symbol(capsys, session_copy)
    assert len(err) == 3, err
    for e in err:
        warning([e], "not in the session's cache",
                "%s is not the file the context ran" % rebuilt)
    assert {sym for _, sym in rows} <= {"[no symbols]"} | {
        s for _, s in rows if s.startswith("[")}
    # the original host executable at the path: no warning, symbols
    db = sqlite3.connect(os.path.join(session_copy, "session.db"))
    db.execute("UPDATE images SET path = ?", (real_session.host,))
    db.commit()
    db.close()
    good, _, _ = rows_by_symbol(capsys, real_session.dir)
    rows, err, _ = rows_by_symbol(capsys, session_copy)
    assert err == [] and rows == good


# ---- the session's truth about itself --------------------------------------

def state_of(capsys, d):
    """(the text header's state line, the footer's, JSON's end_state and
    end_reason)."""
    status, out, err = run(capsys, "-d", d)
    assert status == 0, err
    lines = out.splitlines()
    status, js, err = run(capsys, "-d", d, "--format", "json")
    rep = json.loads(js)
    return lines[1], lines[-1], rep["end_state"], rep["end_reason"], \
        rep["complete"]


def set_keys(d, **keys):
    db = sqlite3.connect(os.path.join(d, "session.db"))
    for k, v in keys.items():
        k = k.replace("__", ".")
        if v is None:
            db.execute("DELETE FROM session WHERE key = ?", (k,))
        else:
            db.execute("INSERT OR REPLACE INTO session VALUES (?, ?)", (k, v))
    db.commit()
    db.close()


def test_complete_session(template, capsys):
    assert state_of(capsys, template) == (
        "session complete", "session complete", "complete", "", True)


def test_incomplete_session_says_why(template, capsys, tmp_path):
    d = damaged(template, tmp_path, "SELECT 1")
    why = "the driver's stream ended without STOP: copsim (pid 123) was " \
        "killed by signal 9"
    set_keys(d, end_state="incomplete", end_reason=why, stream__complete=0)
    line = "session INCOMPLETE: " + why
    assert state_of(capsys, d) == (line, line, "incomplete", why, False)


def sides_of(capsys, d):
    status, js, err = run(capsys, "-d", d, "--format", "json")
    assert status == 0, err
    return json.loads(js)["sides"]


def test_a_lost_host_side_makes_the_session_incomplete(template, capsys,
                                                       tmp_path):
    """The coprocessor side complete, the host side lost (coprof-host
    killed): the session is not complete, the header and JSON say which
    side and why."""
    d = damaged(template, tmp_path, "SELECT 1")
    why = "coprof-host (pid 77) was killed by signal 9 (Killed)"
    set_keys(d, host__end_state="incomplete", host__end_reason=why)
    line = "session INCOMPLETE: the host side is lost: " + why
    assert state_of(capsys, d) == (line, line, "incomplete",
                                   "the host side is lost: " + why, False)
    assert sides_of(capsys, d) == {
        "coprocessor": {"end_state": "complete", "end_reason": ""},
        "host": {"end_state": "incomplete", "end_reason": why}}


def test_a_host_side_never_stored_is_not_complete(template, capsys,
                                                  tmp_path):
    """host.end_state still live and no coprofd records the session: its
    coprof-host never stored the host side."""
    d = damaged(template, tmp_path, "SELECT 1")
    set_keys(d, host__end_state="live", host__end_reason="")
    head, _, state, reason, complete = state_of(capsys, d)
    assert state == "live" and not complete
    assert reason.startswith("the host side is not stored yet: its "
                             "coprof-host has not stored it")
    set_keys(d, host__end_state="complete")
    assert state_of(capsys, d)[2:] == ("complete", "", True)
    assert sides_of(capsys, d)["host"] == {"end_state": "complete",
                                           "end_reason": ""}


def test_a_session_without_a_host_side(template, capsys):
    assert sides_of(capsys, template) == {
        "coprocessor": {"end_state": "complete", "end_reason": ""},
        "host": None}


def test_live_session_is_as_of_its_last_flush(template, capsys, tmp_path):
    d = damaged(template, tmp_path, "SELECT 1")
    set_keys(d, end_state="live", end_reason="", stream__complete=0,
             last_flush_realtime_ns=1795627160031366751)
    # a coprofd records it: it holds the session's lock
    fd = os.open(os.path.join(d, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        head, foot, state, reason, complete = state_of(capsys, d)
    finally:
        os.close(fd)
    assert state == "live" and not complete
    assert reason == "still being recorded; this is its last flush (at " \
        "2026-11-25 17:19:20 UTC)"
    assert head == foot == "session LIVE: " + reason
    # nobody holds the lock any more: its coprofd died
    head, foot, state, reason, complete = state_of(capsys, d)
    assert state == "incomplete" and head.startswith(
        "session INCOMPLETE: its coprofd ended without finishing it")


def test_timeline_carries_the_state(template, capsys, tmp_path):
    d = damaged(template, tmp_path, "SELECT 1")
    set_keys(d, end_state="incomplete", end_reason="flush failed: ENOSPC")
    status, _, err = run(capsys, "timeline", "-d", d, "-o",
                         tmp_path / "t.json")
    assert status == 0, err
    other = json.load(open(str(tmp_path / "t.json")))["otherData"]
    assert (other["end_state"], other["end_reason"]) == (
        "incomplete", "flush failed: ENOSPC")


def test_one_flush_whole(template, tmp_path):
    """A report reads one snapshot: a flush committed while it is made
    (here between opening the session and reading its samples) is not
    half in it."""
    from coprof_report.session import Session
    d = damaged(template, tmp_path, "PRAGMA journal_mode = WAL")
    s = Session.open(d)
    try:
        writer = sqlite3.connect(os.path.join(d, "session.db"))
        writer.execute("UPDATE samples SET count = count + 1000")
        writer.execute("INSERT INTO contexts (id, image) VALUES (2, 1)")
        writer.commit()
        writer.close()
        assert [r["count"] for r in s.samples()] == [1]
        assert list(s.contexts()) == [1]
    finally:
        s.close()
    s = Session.open(d)
    assert [r["count"] for r in s.samples()] == [1001]
    s.close()


def test_old_session_without_end_keys(template, capsys, tmp_path):
    d = damaged(template, tmp_path, "SELECT 1")
    set_keys(d, end_state=None, end_reason=None)
    assert state_of(capsys, d)[2:] == ("complete", "", True)
    set_keys(d, stream__complete=0)
    assert state_of(capsys, d)[2] == "incomplete"


# ---- options ---------------------------------------------------------------

def test_empty_output_name_is_refused(template, capsys, tmp_path):
    for argv, opt in ((["-o", ""], "--output"),
                      (["timeline", "-o", ""], "--output"),
                      (["timeline", "-o", tmp_path / "t.json", "--png", ""],
                       "--png")):
        status, out, err = run(capsys, *argv, "-d", template)
        assert status == 2 and out == "", (argv, out)
        assert err == ["copreport: %s: an empty file name" % opt], err


# --- files a session names that are not regular files (issue 32, item 4) --
#
# The generator: a FIFO, /dev/zero, a directory and a symbolic link of
# another user's (nobody) at images.path and at every image's cache file,
# through every report format.  copreport must never hang (a FIFO opened
# for reading), never read them (/dev/zero: an endless read; the link:
# what another user points it at), say one line naming the file and why,
# and still report what it can.  Each run is a process of its own with a
# timeout and a bounded address space, so a hang or an endless read fails
# the test instead of stopping the suite.

NOBODY = 65534

KINDS = {
    "fifo": "a FIFO, not a regular file",
    "dev-zero": "a character device, not a regular file",
    "directory": "a directory, not a regular file",
    "nobody-link": None,        # by where it is: see NOBODY_LINK
}

# A link at images.path (a host program, often reached through a link) is
# followed only when this user or root owns it; one in the session's
# images/ is never followed.
NOBODY_LINK = {"path": "a symbolic link owned by uid %d, not by this user "
                       "or root: refusing to follow it" % NOBODY,
               "cache": "a symbolic link: refusing to follow it"}

# name -> copreport's arguments for the session D, writing under OUT
FORMATS = {
    "text": ["-d", "D"],
    "csv": ["-d", "D", "--format", "csv"],
    "json": ["-d", "D", "--format", "json"],
    "annotate": ["annotate", "-d", "D"],
    "annotate-json": ["annotate", "-d", "D", "--format", "json"],
    "timeline": ["timeline", "-d", "D", "-o", "OUT/t.json"],
    "html": ["html", "-d", "D", "-o", "OUT/html"],
    "archive": ["archive", "-d", "D", "-o", "OUT/a.tar.gz"],
}
FORMATS.update({"export-" + f: ["export", "-d", "D", "-f", f, "-o",
                                "OUT/export." + f]
                for f in ("pprof", "callgrind", "folded", "speedscope")})


def _limited():
    # an endless read fails fast instead of swapping the machine
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))


def _plant(kind, at, target):
    """Puts kind at the path at; target: a regular file the nobody link
    points to (with the right bytes: only its owner makes it wrong)."""
    if kind == "fifo":
        os.mkfifo(at)
    elif kind == "dev-zero":
        os.mknod(at, 0o600 | stat.S_IFCHR, os.makedev(1, 5))
    elif kind == "directory":
        os.mkdir(at)
    else:
        os.symlink(target, at)
        os.lchown(at, NOBODY, NOBODY)


def _images(d):
    db = sqlite3.connect(os.path.join(d, "session.db"))
    rows = db.execute("SELECT id, path, cache_file FROM images"
                      " ORDER BY id").fetchall()
    db.close()
    return rows


def _damage_files(d, kind, place, work):
    """Plants kind at every image's file (place "path") or cache file
    (place "cache"); returns the paths planted."""
    images = _images(d)
    host = images[0][1]
    if place == "path":
        bad = os.path.join(work, "host-program")
        _plant(kind, bad, host)
        db = sqlite3.connect(os.path.join(d, "session.db"))
        db.execute("UPDATE images SET path = ?", (bad,))
        db.commit()
        db.close()
        for _, _, cache in images:
            os.unlink(os.path.join(d, cache))
        return [bad]
    planted = []
    for n, (_, _, cache) in enumerate(images):
        at = os.path.join(d, cache)
        good = os.path.join(work, "cache-%d" % n)
        os.rename(at, good)
        _plant(kind, at, good)
        planted.append(at)
    return planted


@pytest.mark.parametrize("place", ["path", "cache"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_non_regular_files_through_every_format(kind, place, session_copy,
                                                coprof_bin, tmp_path):
    if os.geteuid() != 0 and kind in ("dev-zero", "nobody-link"):
        pytest.skip("needs root to make a device or a file of nobody's")
    work = str(tmp_path / "work")
    os.mkdir(work)
    planted = _damage_files(session_copy, kind, place, work)
    why = KINDS[kind] or NOBODY_LINK[place]
    for name, argv in FORMATS.items():
        out = tmp_path / name
        out.mkdir()
        argv = [session_copy if a == "D" else
                a.replace("OUT", str(out)) for a in argv]
        p = subprocess.run([coprof_bin("copreport")] + argv,
                           capture_output=True, text=True, timeout=60,
                           preexec_fn=_limited, stdin=subprocess.DEVNULL)
        err = p.stderr.splitlines()
        assert p.returncode == 0 and "Traceback" not in p.stderr, \
            (name, p.stderr)
        for bad in planted:
            lines = [l for l in err if bad + ":" in l or bad + " " in l]
            assert len(lines) >= 1, (name, bad, err)
            assert all(why in l for l in lines), (name, why, lines)
            # one line per image, never the same line twice
            assert len(lines) == len(set(lines)) <= len(_images(
                session_copy)), (name, lines)
        if name == "json":
            rep = json.loads(p.stdout)
            assert rep["rows"] and rep["totals"]["samples"] > 0
            symbols = {r["symbol"] for r in rep["rows"]}
            # a bad cache leaves the host program: still symbols
            assert (place == "cache") == any(
                s.startswith("stage_") for s in symbols), symbols
