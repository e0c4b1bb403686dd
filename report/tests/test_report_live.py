"""coprof top's state (live.Top) on a copy of the real session, driven
by hand: the test plays coprofd (holds the session's lock, says it is
live, adds samples and flushes between looks) and sets both clocks Top
reads, so nothing waits on a timer.

- the interval and total arithmetic: samples/s over the interval, the
  interval's and the total's samples, losses and stall time, each row's
  interval and total column;
- BEHIND: a look that came later than two intervals after the last;
- STALE: a live session not flushed for more than STALE_FLUSHES flush
  intervals (and none for a complete one, or a fresh flush);
- by slot: a context bound on two slots in turn has each timeline
  bucket's samples on the slot it was bound to then."""

import fcntl
import os
import sqlite3

import pytest

from coprof_report import live, session as session_mod


class Clocks:
    """The monotonic and realtime clocks Top reads, set by the test."""

    def __init__(self, mono, wall):
        self.mono, self.wall = mono, wall

    def monotonic(self):
        return self.mono

    def realtime(self):
        return self.wall


class Recorder:
    """Plays coprofd on a session copy: holds its lock (so it reads as
    being recorded), says it is live, writes "flushes"."""

    def __init__(self, directory):
        self.dir = directory
        self.lock = os.open(os.path.join(directory, session_mod.LOCK_NAME),
                            os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.db = sqlite3.connect(os.path.join(directory, "session.db"))
        self.set_key("end_state", "live")
        self.set_key("end_reason", "")
        self.db.commit()

    def set_key(self, key, value):
        self.db.execute("INSERT OR REPLACE INTO session VALUES (?, ?)",
                        (key, value))

    def key(self, key):
        row = self.db.execute("SELECT value FROM session WHERE key = ?",
                              (key,)).fetchone()
        return row[0] if row else None

    def flush(self, wall_s):
        self.set_key("last_flush_realtime_ns", int(wall_s * 1e9))
        self.db.commit()

    def close(self):
        self.db.close()
        os.close(self.lock)


@pytest.fixture
def recorder(session_copy):
    r = Recorder(session_copy)
    yield r
    r.close()


def _hottest(db):
    """(context, image, file_offset, overlay, count) of the most sampled
    place."""
    return db.execute("SELECT context, image, file_offset, overlay, count "
                      "FROM samples ORDER BY count DESC LIMIT 1").fetchone()


def _add_samples(r, n, lost=0, stall_ns=0, outside=0):
    """n more samples at the hottest place (and in its context's last
    timeline bucket), a LOST event of lost captures, one of outside
    captures outside the local store (no loss) and a stall of stall_ns
    (all of that context on slot 0)."""
    ctx, img, off, ovl, _ = _hottest(r.db)
    r.db.execute("UPDATE samples SET count = count + ? WHERE context = ? "
                 "AND image = ? AND file_offset = ? AND overlay IS ?",
                 (n, ctx, img, off, ovl))
    bucket = r.db.execute("SELECT MAX(bucket_start_ns) FROM sample_timeline"
                          " WHERE context = ?", (ctx,)).fetchone()[0]
    _add_to_bucket(r.db, ctx, bucket, n)
    r.set_key("stream.samples", int(r.key("stream.samples")) + n)
    if lost:
        r.db.execute("INSERT INTO lost_events (slot, context, cause, "
                     "cause_name, count, cycle) VALUES (0, ?, 1, "
                     "'buffer-full', ?, 0)", (ctx, lost))
    if outside:
        r.db.execute("INSERT INTO lost_events (slot, context, cause, "
                     "cause_name, count, cycle) VALUES (0, ?, 4, "
                     "'outside-ls', ?, 0)", (ctx, outside))
    if stall_ns:
        r.db.execute("INSERT INTO stalls (slot, context, count, ns, cycle) "
                     "VALUES (0, ?, 1, ?, 0)", (ctx, stall_ns))
    return ctx


def _add_to_bucket(db, ctx, bucket, n):
    """n more samples in one of context ctx's rows of the bucket."""
    img, foff = db.execute(
        "SELECT image, function_offset FROM sample_timeline WHERE "
        "context = ? AND bucket_start_ns = ? ORDER BY function_offset "
        "LIMIT 1", (ctx, bucket)).fetchone()
    db.execute("UPDATE sample_timeline SET count = count + ? WHERE "
               "context = ? AND image = ? AND bucket_start_ns = ? AND "
               "function_offset = ?", (n, ctx, img, bucket, foff))


def _top(r, clocks, interval=1.0):
    return live.Top(r.dir, interval, clocks.monotonic, clocks.realtime)


def _rows(lines):
    """{name: (interval, total)} of the screen's rows."""
    at = [i for i, line in enumerate(lines)
          if line.lstrip().startswith("INTERVAL")][0]
    out = {}
    for line in lines[at + 1:]:
        fields = line.split(None, 4)
        out[fields[4]] = (int(fields[0]), int(fields[2]))
    return out


def _first_look(r):
    """(clocks, Top) after a flush and Top's first look at it."""
    clocks = Clocks(100.0, 1.7e9)
    r.flush(clocks.wall)
    top = _top(r, clocks)
    top.step()
    return clocks, top


def test_interval_and_total(recorder):
    r = recorder
    clocks, top = _first_look(r)
    before = int(r.key("stream.samples"))
    lost0 = sum(n for n, in r.db.execute("SELECT count FROM lost_events "
                                         "WHERE cause_name != 'outside-ls'"))
    stall0 = sum(n or 0 for n, in r.db.execute("SELECT ns FROM stalls"))
    _add_samples(r, 600, lost=7, stall_ns=3250000, outside=5)
    clocks.mono, clocks.wall = 101.5, clocks.wall + 1.5
    r.flush(clocks.wall)
    top.step()
    lines = top.lines(width=200, height=10000)
    assert lines[0] == "coprof top: %s (live)" % r.dir
    assert lines[1] == (
        "samples/s 400   interval: 600 samples, 7 lost, stalled 3.25 ms"
        "   total: %d samples, %d lost, stalled %.2f ms"
        % (before + 600, lost0 + 7, (stall0 + 3250000) / 1e6))
    assert not [x for x in lines if x.startswith(("BEHIND", "STALE"))]
    rows = _rows(lines)
    (hot, (n, total)), = [(k, v) for k, v in rows.items() if v[0]]
    assert n == 600
    first = dict((k, n) for n, k in live.rows_by(top.first, None,
                                                 "function"))
    assert total == first[hot] + 600
    assert list(rows)[0] == hot         # the interval's first
    assert [x for x in lines if x.endswith(hot)][0].split()[1] == "100.0%"
    # the totals are the session's: every exact sample in one row or other
    assert sum(t for _, t in rows.values()) == sum(
        c for c, in r.db.execute("SELECT count FROM samples"))


def test_behind(recorder):
    r = recorder
    clocks, top = _first_look(r)
    _add_samples(r, 700)
    clocks.mono = 103.5          # 3.5 s after the last look of a 1 s top
    clocks.wall += 3.5
    r.flush(clocks.wall)
    top.step()
    lines = top.lines(width=200, height=10000)
    assert top.behind == pytest.approx(2.5)
    assert "BEHIND: this look came 2.5 s late; the interval column covers " \
        "3.5 s" in lines
    assert lines[1].startswith("samples/s 200   interval: 700 samples")
    # two intervals late is not behind
    clocks.mono += 2.0
    top.step()
    assert top.behind == 0
    assert not [x for x in top.lines() if x.startswith("BEHIND")]


def test_stale(recorder):
    r = recorder
    flushed = 1.7e9
    r.flush(flushed)
    clocks = Clocks(100.0, flushed + 0.4)
    top = _top(r, clocks)
    top.step()
    assert not [x for x in top.lines() if x.startswith("STALE")]
    # no flush for 10 s, the session still says live: STALE
    clocks.mono, clocks.wall = 101.0, flushed + 10.0
    top.step()
    stale = [x for x in top.lines(width=200, height=10000) if x.startswith("STALE")]
    assert stale == ["STALE: the session says live but was last flushed "
                     "10.0 s ago (coprofd stuck?); figures as of then"]
    # within STALE_FLUSHES flush intervals: fine
    clocks.wall = flushed + live.STALE_FLUSHES * live.FLUSH_S - 0.1
    top.step()
    assert not top.stale()
    # a slower top (--interval 5) allows as many of its intervals
    slow = _top(r, clocks, interval=5.0)
    clocks.wall = flushed + 10.0
    slow.step()
    assert not slow.stale()
    clocks.wall = flushed + 15.5
    slow.step()
    assert slow.stale() == pytest.approx(15.5, abs=1e-3)
    # a session that has ended is never stale
    r.set_key("end_state", "complete")
    r.db.commit()
    top.step()
    assert top.last.state == "complete"
    assert not [x for x in top.lines() if x.startswith("STALE")]


def test_by_slot_follows_the_bindings(recorder):
    """A context bound on slot 6, then on slot 7: its first bucket's
    samples are slot 6's, the later ones slot 7's, since the start and
    over the interval."""
    r = recorder
    db = r.db
    ctx, first, second, last = db.execute(
        "SELECT context, MIN(bucket_start_ns), (SELECT MIN(bucket_start_ns)"
        " FROM sample_timeline t WHERE t.context = s.context AND "
        "t.bucket_start_ns > MIN(s.bucket_start_ns)), MAX(bucket_start_ns) "
        "FROM sample_timeline s GROUP BY context HAVING COUNT(DISTINCT "
        "bucket_start_ns) >= 2 ORDER BY context LIMIT 1").fetchone()
    bucket_ns = int(r.key("timeline.bucket_ns"))
    db.execute("DELETE FROM bindings WHERE context = ?", (ctx,))
    db.execute("INSERT INTO bindings (slot, context, start_time_ns, "
               "end_time_ns, end_reason) VALUES (6, ?, ?, ?, 'preempt'), "
               "(7, ?, ?, ?, 'exit')",
               (ctx, first, second, ctx, second, last + bucket_ns))
    db.execute("UPDATE bindings SET slot = 0 WHERE slot IN (6, 7) AND "
               "context != ?", (ctx,))
    r.flush(1.7e9)
    clocks = Clocks(100.0, 1.7e9 + 0.5)
    top = _top(r, clocks)
    top.by = "slot"
    top.step()

    def in_buckets(where):
        return db.execute("SELECT SUM(count) FROM sample_timeline WHERE "
                          "context = ? AND " + where,
                          (ctx, second)).fetchone()[0]
    on6 = in_buckets("bucket_start_ns < ?")
    on7 = in_buckets("bucket_start_ns >= ?")
    assert on6 and on7
    rows = dict((k, n) for n, k in live.rows_by(top.last, None, "slot"))
    assert rows["slot 6"] == on6 and rows["slot 7"] == on7
    # the interval: samples in the context's last bucket, on slot 7
    _add_to_bucket(db, ctx, last, 450)
    r.set_key("stream.samples", int(r.key("stream.samples")) + 450)
    clocks.mono += 1.0
    clocks.wall += 1.0
    r.flush(clocks.wall - 0.5)
    top.step()
    rows = _rows(top.lines(width=200, height=10000))
    assert rows["slot 6"] == (0, on6)
    assert rows["slot 7"] == (450, on7 + 450)
    # the totals by slot are the timeline's
    assert sum(t for _, t in rows.values()) == db.execute(
        "SELECT SUM(count) FROM sample_timeline").fetchone()[0]
