"""copreport timeline: the Chrome trace JSON and the PNG of a real session."""

import collections
import json
import re
import sqlite3

import pytest


@pytest.fixture(scope="module")
def trace(real_session, copreport, tmp_path_factory):
    d = tmp_path_factory.mktemp("timeline")
    out, png = d / "trace.json", d / "timeline.png"
    copreport("timeline", "-d", real_session.dir, "-o", out, "--png", png,
              check=True)
    with open(str(out)) as f:
        data = json.load(f)
    return data, png


def q(real, sql):
    return real.db.execute(sql).fetchall()


def test_well_formed(trace):
    data, _ = trace
    assert isinstance(data["traceEvents"], list) and data["traceEvents"]
    for e in data["traceEvents"]:
        for k in ("ph", "ts", "pid", "tid", "name"):
            assert k in e, e
        assert isinstance(e["ts"], (int, float))
        if e["ph"] == "X":
            assert e["dur"] >= 0
    assert data["otherData"]["clock"] == "CLOCK_MONOTONIC"


def test_slices_do_not_overlap(trace):
    data, _ = trace
    tracks = collections.defaultdict(list)
    for e in data["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    assert tracks
    for key, spans in tracks.items():
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            # ts and dur are microseconds to the nanosecond; at ~1e10 us
            # their float sum is exact only to a few 1e-6 us, so the slices
            # may touch within a nanosecond, never overlap by one
            assert a1 <= b0 + 1e-3, (key, (a0, a1), (b0, b1))


def test_tracks_named(trace):
    data, _ = trace
    names = {}
    procs = {}
    for e in data["traceEvents"]:
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
        if e["ph"] == "M" and e["name"] == "process_name":
            procs[e["pid"]] = e["args"]["name"]
    assert set(procs.values()) == {"slots", "contexts", "scheduler"}
    for e in data["traceEvents"]:
        if e["ph"] in ("X", "i"):
            assert (e["pid"], e["tid"]) in names, e


def test_bindings_on_slot_tracks_in_microseconds(trace, real_session):
    data, _ = trace
    slots_pid = [e["pid"] for e in data["traceEvents"]
                 if e["ph"] == "M" and e["name"] == "process_name"
                 and e["args"]["name"] == "slots"][0]
    xs = sorted((e["args"]["context"], e["tid"] - 1, e["ts"])
                for e in data["traceEvents"]
                if e["ph"] == "X" and e["pid"] == slots_pid)
    rows = q(real_session, "SELECT context, slot, start_time_ns FROM "
             "bindings WHERE start_time_ns IS NOT NULL ORDER BY context")
    assert len(xs) == len(rows)
    starts = sorted(rows)
    for (c, s, ts), (c2, s2, ns) in zip(xs, starts):
        assert (c, s) == (c2, s2)
        # clipping may only move a start later, never earlier
        assert ts >= ns / 1000.0 - 1e-6
    # and most are exactly the binding's start
    exact = sum(1 for (_, _, ts), (_, _, ns) in zip(xs, starts)
                if abs(ts - ns / 1000.0) < 1e-3)
    assert exact >= len(xs) // 2


def _context_slices(data):
    ctx_pid = [e["pid"] for e in data["traceEvents"]
               if e["ph"] == "M" and e["name"] == "process_name"
               and e["args"]["name"] == "contexts"][0]
    return [e for e in data["traceEvents"]
            if e["ph"] == "X" and e["pid"] == ctx_pid]


def test_context_function_slices(trace, real_session):
    """Every sample is in a slice of its function; every function a
    context sampled in a bucket shows (not only the bucket's most
    sampled); no slice lies outside its context's bindings."""
    data, _ = trace
    slices = _context_slices(data)
    assert slices
    bucket = int(q(real_session, "SELECT value FROM session WHERE key = "
                   "'timeline.bucket_ns'")[0][0])
    assert data["otherData"]["bucket_ns"] == bucket
    assert "share of the bucket" in data["otherData"]["function_slices"]
    assert data["otherData"]["unplaced_samples"] == 0
    total = q(real_session, "SELECT SUM(count) FROM sample_timeline")[0][0]
    assert sum(e["args"]["samples"] for e in slices) == total
    for e in slices:
        assert 0 < e["args"]["samples"] <= e["args"]["bucket_samples"]
        assert e["dur"] <= e["args"]["buckets"] * bucket / 1000 + 1e-6
    names = {e["name"] for e in slices}
    assert "stage_denoise" in names
    # as many (context, bucket, function) places as the session has, each
    # one inside a slice of that function on that context's track
    places = q(real_session, "SELECT context, bucket_start_ns, "
               "COUNT(DISTINCT function_offset) FROM sample_timeline "
               "GROUP BY context, bucket_start_ns")
    by_ctx = collections.defaultdict(list)
    for e in slices:
        by_ctx[e["tid"]].append(e)
    for ctx, b, nfn in places:
        inside = {e["name"] for e in by_ctx[ctx]
                  if e["ts"] < (b + bucket) / 1000 + 1e-6
                  and e["ts"] + e["dur"] > b / 1000 - 1e-6}
        assert len(inside) >= nfn, (ctx, b, nfn, inside)
    bindings = collections.defaultdict(list)
    for c, s0, s1 in q(real_session, "SELECT context, start_time_ns, "
                       "end_time_ns FROM bindings"):
        bindings[c].append((s0 / 1000, (s1 if s1 is not None else
                                        s0) / 1000))
    for e in slices:
        assert any(a - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= z + 1e-3
                   for a, z in bindings[e["tid"]]), e


def test_no_slices_outside_a_binding(session_copy, copreport, tmp_path):
    """A context whose bindings no TIME record placed has samples but no
    binding to put them in: no slices (they were drawn over whole
    buckets, outside any binding), its samples counted in
    otherData.unplaced_samples; the others' slices as before.  The
    JSON says that within a bucket slices are in function order."""
    db = sqlite3.connect("%s/session.db" % session_copy)
    ctx, n = db.execute("SELECT context, SUM(count) FROM sample_timeline "
                        "GROUP BY context ORDER BY context LIMIT 1") \
        .fetchone()
    db.execute("UPDATE bindings SET start_time_ns = NULL, end_time_ns = "
               "NULL WHERE context = ?", (ctx,))
    total = db.execute("SELECT SUM(count) FROM sample_timeline").fetchone()[0]
    db.commit()
    db.close()
    out = tmp_path / "trace.json"
    copreport("timeline", "-d", session_copy, "-o", out, "--tracks",
              "context", check=True)
    with open(str(out)) as f:
        data = json.load(f)
    slices = _context_slices(data)
    assert slices and not [e for e in slices if e["tid"] == ctx]
    assert data["otherData"]["unplaced_samples"] == n
    assert sum(e["args"]["samples"] for e in slices) == total - n
    text = data["otherData"]["function_slices"]
    assert "not in time order" in text and "true to the bucket" in text


def test_bucket_option(real_session, copreport, tmp_path):
    """--bucket-ms sums the session's buckets, and the JSON says so; a
    width that is not a multiple is refused."""
    out = tmp_path / "t.json"
    copreport("-d", real_session.dir, "timeline", "-o", out,
              "--bucket-ms", "20", check=True)
    data = json.loads(out.read_text())
    assert data["otherData"]["bucket_ns"] == 20000000
    total = q(real_session, "SELECT SUM(count) FROM sample_timeline")[0][0]
    assert sum(e["args"]["samples"]
               for e in _context_slices(data)) == total
    p = copreport("timeline", "-d", real_session.dir, "-o", out,
                  "--bucket-ms", "15")
    assert p.returncode == 2 and "not a multiple" in p.stderr, p.stderr


def test_png_alone(real_session, copreport, tmp_path):
    """The README's `copreport timeline --png timeline.png`: no JSON."""
    png = tmp_path / "only.png"
    copreport("timeline", "-d", real_session.dir, "--png", png, cwd=tmp_path,
              check=True)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    p = copreport("timeline", "-d", real_session.dir)
    assert p.returncode == 2 and "required" in p.stderr, p.stderr


def test_sched_events_instant(trace, real_session):
    data, _ = trace
    inst = [e for e in data["traceEvents"] if e["ph"] == "i"]
    rows = q(real_session, "SELECT kind, message FROM sched_events")
    assert rows and len(inst) == len(rows)
    for e in inst:
        m = re.search(r"\bmono=(\d+)", e["args"]["message"])
        assert m, e     # every SCHED record of copsim's says when
        assert e["ts"] == pytest.approx(int(m.group(1)) / 1000.0)
    assert {e["name"] for e in inst} >= {"bind", "unbind", "create"}
    # One numbering: an event naming a context has the session's number
    # of it, the one of the tracks and the report's headers.
    numbers = dict(q(real_session, "SELECT context_id, id FROM contexts"))
    named = [e for e in inst if "context_id" in e["args"]]
    assert named
    for e in named:
        assert e["args"]["context"] == numbers[e["args"]["context_id"]]


def test_other_sessions_events_left_out(copreport, session_copy, tmp_path):
    """A copsim shared by copcontrol sessions has one event log: the events
    of contexts not in this session are not on its timeline."""
    db = sqlite3.connect(session_copy + "/session.db")
    (order,) = db.execute("SELECT MAX(order_num) FROM sched_events"
                          ).fetchone()
    (other,) = db.execute("SELECT MAX(context_id) + 1000 FROM contexts"
                          ).fetchone()
    row = db.execute("SELECT * FROM sched_events WHERE kind = 'bind'"
                     " LIMIT 1").fetchone()
    columns = [c[1] for c in db.execute("PRAGMA table_info(sched_events)")]
    foreign = dict(zip(columns, row), order_num=order + 1,
                   context_id=other, message="bind slot=0 context=%d" % other)
    db.execute("INSERT INTO sched_events (%s) VALUES (%s)"
               % (",".join(foreign), ",".join("?" * len(foreign))),
               list(foreign.values()))
    db.commit()
    db.close()
    out = tmp_path / "trace.json"
    copreport("timeline", "-d", session_copy, "-o", out, check=True)
    with open(str(out)) as f:
        inst = [e for e in json.load(f)["traceEvents"] if e["ph"] == "i"]
    assert inst
    assert all(e["args"].get("context_id") != other for e in inst)


def test_png(trace):
    _, png = trace
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 10000
