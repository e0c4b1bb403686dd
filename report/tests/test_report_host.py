"""copreport's host side on a hand-built session (daemon/store.c's and
hostprof/store.c's schemas, rows written here): the thread states the
Linux scheduler's events give, a context's host thread times, the host
rows by file and symbol, --side, the timeline's host tracks, and a
session without the host side."""

import json
import os

import pytest

from coprof_report import cli, host, timeline
from coprof_report.session import Session

# thread 101 runs context 11 (copsim's; life 3000..15000 ns); thread 102
# is created, runs and exits.  The recording: 1000..20000 ns.
EVENTS = [
    # time, cpu, kind, tid, prev_state, other_tid
    (2000, 0, "switch", 0, "R", 101),       # 101 in: runnable before
    (4000, 1, "newtask", 102, None, 101),
    (4100, 1, "wakeup_new", 102, None, None),
    (4200, 1, "switch", 0, "R", 102),
    (4500, 1, "switch", 102, "X", 0),       # 102 exits
    (5000, 0, "switch", 101, "S", 0),       # 101 sleeps
    (8000, 1, "wakeup", 101, None, None),
    (9000, 0, "switch", 0, "R", 101),
    (12000, 0, "switch", 101, "R", 0),      # preempted
    (13000, 0, "switch", 0, "R", 101),
]
STATES_101 = [(1000, 2000, "runnable"), (2000, 5000, "running"),
              (5000, 8000, "blocked"), (8000, 9000, "runnable"),
              (9000, 12000, "running"), (12000, 13000, "runnable"),
              (13000, 20000, "running")]
STATES_102 = [(4100, 4200, "runnable"), (4200, 4500, "running")]


@pytest.fixture
def session_dir(new_session, host_schema, tmp_path):
    d = str(tmp_path / "s")
    db = new_session(d, {"stream.samples": 0, "end_state": "complete",
                         "end_reason": "", "stream.start_time_ns": 500,
                         "stream.stop_time_ns": 21000,
                         "host.sched": "recorded",
                         "host.samples": "recorded",
                         "host.event": "cpu-clock", "host.period": 250000,
                         "host.call_graph": "none",
                         "host.samples_lost": 0, "host.sched_lost": 0,
                         "host.start_ns": 1000, "host.stop_ns": 20000})
    db.executescript(host_schema)
    db.execute("INSERT INTO contexts (id, context_id, pid, tid) "
               "VALUES (1, 11, 100, 101)")
    for t, kind in ((3000, "create"), (6000, "bind"), (15000, "exit")):
        db.execute("INSERT INTO sched_events (order_num, ring, seq, time_ns,"
                   " kind, context_id, message) VALUES (?, 0, ?, ?, ?, 11,"
                   " ?)", (t, t, t + 7, kind, "%s context=11 mono=%d"
                           % (kind, t)))
    db.executemany("INSERT INTO host_threads VALUES (?, 100, ?, 'command')",
                   [(100, "main"), (101, "worker"), (102, "helper")])
    db.executemany("INSERT INTO host_sched_events (time_ns, cpu, kind, tid,"
                   " prev_state, other_tid) VALUES (?, ?, ?, ?, ?, ?)",
                   EVENTS)
    db.executemany("INSERT INTO host_locations VALUES (?, ?, 'ab12', ?, 0,"
                   " ?, NULL, NULL)",
                   [(1, "/bin/host", "spin", "step"),
                    (2, "/bin/host", "spin", None),
                    (3, "/lib/libc.so.6", None, None)])
    for i, loc in enumerate([1] * 6 + [2] * 3 + [3]):
        db.execute("INSERT INTO host_samples (time_ns, pid, tid, cpu, ip,"
                   " location) VALUES (?, 100, 100, 0, 4096, ?)",
                   (2000 + i * 100, loc))
    db.commit()
    db.close()
    return d


def report(capsys, *argv):
    assert cli.main([str(a) for a in argv]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    return out


def test_thread_states(session_dir):
    s = Session.open(session_dir)
    h = host.HostSide(s)
    states = h.intervals()
    assert [(i.start_ns, i.end_ns, i.state) for i in states[101]] == \
        STATES_101
    assert [(i.start_ns, i.end_ns, i.state) for i in states[102]] == \
        STATES_102
    assert 0 not in states and 100 not in states     # idle, never seen
    # the context's life, 3000..15000
    assert h.state_times(101, 3000, 15000) == {
        "running": 2000 + 3000 + 2000, "runnable": 1000 + 1000,
        "blocked": 3000}
    assert host.context_lives(s) == {11: (3000, 15000)}
    s.close()


def test_context_header(session_dir, capsys):
    text = report(capsys, "-d", session_dir, "--separate=context")
    assert "  host thread 101 (worker): on CPU 0.01 ms, runnable 0.00 ms, " \
        "blocked 0.00 ms during the context's life (0.01 ms)\n" in text
    assert "host side: Linux scheduler events of 3 threads (10 events, 0 " \
        "lost; raw events: all kept); samples on cpu-clock every 250000, " \
        "0 lost\n" in text
    rep = json.loads(report(capsys, "-d", session_dir, "--separate=context",
                            "--format", "json"))
    assert rep["contexts"][0]["host_thread"] == {
        "tid": 101, "running_ns": 7000, "runnable_ns": 2000,
        "blocked_ns": 3000, "life_ns": 12000}


def test_host_rows(session_dir, capsys):
    rep = json.loads(report(capsys, "-d", session_dir, "--side=host",
                            "--format", "json"))
    rows = rep["rows"]
    assert [(r["file"], r["symbol"], r["samples"]) for r in rows] == [
        ("/bin/host", "spin", 9), ("/lib/libc.so.6",
                                   "[no symbol in libc.so.6]", 1)]
    assert rows[0]["inlined"] == {"step": 6}
    assert rows[0]["percent"] == pytest.approx(90.0)
    # Wilson's interval of 9 of 10, as the coprocessor rows have it
    assert rows[0]["ci_low"] == pytest.approx(59.585, abs=1e-3)
    assert rows[0]["ci_high"] == pytest.approx(98.212, abs=1e-3)
    assert rep["host"]["samples"] == 10
    assert [t["tid"] for t in rep["host"]["threads"]] == [100, 101, 102]
    text = report(capsys, "-d", session_dir, "--side=host", "-t", "50")
    assert "host_spin" not in text and " spin\n" in text
    assert "[no symbol in libc.so.6]" not in text
    assert "host samples: 10, 1 rows under the threshold\n" in text
    cop = json.loads(report(capsys, "-d", session_dir, "--side=cop",
                            "--format", "json"))
    assert cop["rows"] == []


def test_timeline_host_tracks(session_dir, tmp_path, capsys):
    out = tmp_path / "t.json"
    report(capsys, "timeline", "-d", session_dir, "-o", out,
           "--host-merge-us=0")
    ev = [e for e in json.loads(out.read_text())["traceEvents"]
          if e["pid"] == timeline.PID_HOST]
    names = {e["tid"]: e["args"]["name"] for e in ev
             if e["name"] == "thread_name"}
    assert names == {100: "main 100 (command)", 101: "worker 101 (command)",
                     102: "helper 102 (command)"}
    got = [(e["ts"] * 1000, (e["ts"] + e["dur"]) * 1000, e["name"])
           for e in ev if e.get("cat") == "host-state" and e["tid"] == 101]
    assert [(round(a), round(b), n) for a, b, n in got] == STATES_101
    samples = [e for e in ev if e.get("cat") == "host-sample"]
    assert len(samples) == 10 and {e["tid"] for e in samples} == {100}
    assert samples[0]["name"] == "spin" and samples[0]["args"] == {
        "file": "/bin/host", "inlined": "step"}


def test_session_without_host_side(new_session, tmp_path, capsys):
    d = str(tmp_path / "old")
    new_session(d, {"stream.samples": 0}).close()
    text = report(capsys, "-d", d)
    assert "host side" not in text and "host samples" not in text
    rep = json.loads(report(capsys, "-d", d, "--format", "json"))
    assert rep["host"]["sched"] is None and rep["host"]["samples"] == 0
    out = tmp_path / "t.json"
    report(capsys, "timeline", "-d", d, "-o", out)
    assert not [e for e in json.loads(out.read_text())["traceEvents"]
                if e["pid"] == timeline.PID_HOST]


def test_not_recorded_said(session_dir, capsys):
    import sqlite3
    db = sqlite3.connect(os.path.join(session_dir, "session.db"))
    db.execute("UPDATE session SET value = 'not recorded: /sys/kernel/"
               "tracing: Permission denied' WHERE key = 'host.sched'")
    db.commit()
    db.close()
    text = report(capsys, "-d", session_dir, "--separate=context")
    assert "host side: Linux scheduler events not recorded: /sys/kernel/" \
        "tracing: Permission denied; samples on cpu-clock" in text
    assert "host thread" not in text


# --- what coprof-host aggregated ---------------------------------------------

def _set(d, keys, sql=()):
    import sqlite3
    db = sqlite3.connect(os.path.join(d, "session.db"))
    db.executemany("INSERT OR REPLACE INTO session VALUES (?, ?)",
                   list(keys.items()))
    for statement in sql:
        db.execute(*statement) if isinstance(statement, tuple) else \
            db.execute(statement)
    db.commit()
    db.close()


@pytest.fixture
def aggregated_dir(session_dir):
    """session_dir as coprof-host stores it now: the keys of its sums and
    ring, a context's times (other than the raw events give, to tell them
    apart) and the buckets (10,000 ns wide) of thread 101."""
    _set(session_dir, {"host.sched_events": 10, "host.sched_threads":
                       "command", "host.raw_events": 10,
                       "host.raw_dropped": 0, "host.raw_from_ns": 1000,
                       "host.ring": 131072, "host.bucket_ns": 10000}, [
        "INSERT INTO host_context_times VALUES (11, 101, 3000, 15000, 6000,"
        " 2500, 3500)",
        "INSERT INTO host_thread_times VALUES (101, 0, 4000, 2000, 3000)",
        "INSERT INTO host_thread_times VALUES (101, 10000, 9000, 1000, 0)"])
    return session_dir


def test_reports_read_the_aggregates_not_raw_events(aggregated_dir, capsys,
                                                    monkeypatch, tmp_path):
    """The default report, --side, --separate and the exports take the
    host side from coprof-host's sums: reading a raw event fails here."""
    def no_raw(self):
        raise AssertionError("raw host events read")
    monkeypatch.setattr(host.HostSide, "_events", no_raw)
    d = aggregated_dir
    text = report(capsys, "-d", d, "--separate=context")
    assert "  host thread 101 (worker): on CPU 0.01 ms, runnable 0.00 ms, " \
        "blocked 0.00 ms during the context's life (0.01 ms)\n" in text
    assert "host side: Linux scheduler events of the command's 3 threads " \
        "(10 events, 0 lost; raw events: all kept)" in text
    for args in ([], ["--side=cop"], ["--side=host"],
                 ["--separate=context"], ["--separate=slot"]):
        for fmt in ("text", "csv", "json"):
            report(capsys, "-d", d, "--format", fmt, *args)
    rep = json.loads(report(capsys, "-d", d, "--separate=context",
                            "--format", "json"))
    assert rep["contexts"][0]["host_thread"] == {
        "tid": 101, "running_ns": 6000, "runnable_ns": 2500,
        "blocked_ns": 3500, "life_ns": 12000}
    for fmt in ("pprof", "callgrind", "folded", "speedscope"):
        report(capsys, "export", "-d", d, "--format", fmt, "-o",
               tmp_path / ("x." + fmt))


def test_wrapped_ring_said_and_buckets_on_the_timeline(aggregated_dir, capsys,
                                                       tmp_path):
    """A ring that let events go: the report says how much raw detail is
    left and from when; the timeline shows the time before it from the
    buckets (the bucket the raw events start in: what they leave)."""
    d = aggregated_dir
    _set(d, {"host.sched_events": 15, "host.raw_dropped": 5,
             "host.raw_from_ns": 13000})
    text = report(capsys, "-d", d)
    assert "host side: Linux scheduler events of the command's 3 threads " \
        "(15 events, 0 lost; raw events: the last 10, from 0.000 s into " \
        "the recording: the ring let 5 go)" in text
    out = tmp_path / "t.json"
    report(capsys, "timeline", "-d", d, "-o", out, "--host-merge-us=0")
    ev = [e for e in json.loads(out.read_text())["traceEvents"]
          if e.get("cat") == "host-state" and e["tid"] == 101]
    got = [(round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000),
            e["name"], e["args"].get("running_ns")) for e in ev]
    # bucket 0 whole; of bucket 10000 what is before 13000: its 9000
    # running and 1000 runnable less the raw 13000..20000 running
    assert got == [(0, 9000, "running", 4000), (10000, 13000, "running",
                                                2000),
                   (13000, 20000, "running", None)]


@pytest.fixture
def emulator_dir(session_dir):
    """session_dir with a QEMU thread (200) and its events."""
    _set(session_dir, {}, [
        "INSERT INTO host_threads VALUES (200, 199, 'qemu-system-ris', "
        "'qemu')",
        "INSERT INTO host_sched_events (time_ns, cpu, kind, tid, "
        "prev_state, other_tid) VALUES (3000, 1, 'switch', 0, 'R', 200)"])
    return session_dir


def test_timeline_leaves_the_emulator_out_unless_asked(emulator_dir, capsys,
                                                      tmp_path):
    out = tmp_path / "t.json"
    for args, tids in (([], {100, 101, 102}),
                       (["--host-threads=all"], {100, 101, 102, 200})):
        report(capsys, "timeline", "-d", emulator_dir, "-o", out, *args)
        ev = json.loads(out.read_text())["traceEvents"]
        assert {e["tid"] for e in ev if e["pid"] == timeline.PID_HOST and
                e["name"] == "thread_name"} == tids


def test_timeline_merges_short_states(session_dir, capsys, tmp_path):
    """Slices shorter than --host-merge-us merge into the one before: thread
    101's 1-7 us states are one slice at 100 us (the default), named by the
    state that held most of it, each state's time in its args; at 2.5 us
    the 1 us runnable ones merge into their neighbours only."""
    out = tmp_path / "t.json"
    report(capsys, "timeline", "-d", session_dir, "-o", out)
    ev = [e for e in json.loads(out.read_text())["traceEvents"]
          if e.get("cat") == "host-state" and e["tid"] == 101]
    assert len(ev) == 1
    assert ev[0]["name"] == "running" and ev[0]["args"] == {
        "state": "running", "cpu": 0, "running_ns": 13000,
        "runnable_ns": 3000, "blocked_ns": 3000}
    assert round(ev[0]["dur"] * 1000) == 19000
    report(capsys, "timeline", "-d", session_dir, "-o", out,
           "--host-merge-us=0")
    every = [e for e in json.loads(out.read_text())["traceEvents"]
             if e.get("cat") == "host-state"]
    assert len(every) == 9


def test_timeline_progress_lines(session_dir, capsys, tmp_path, monkeypatch):
    """Long work says where it is; here every step is 'long'."""
    monkeypatch.setenv("COPREPORT_PROGRESS_AFTER_S", "0")
    assert cli.main(["timeline", "-d", session_dir, "-o",
                     str(tmp_path / "t.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "copreport: timeline: 0 slices of 1 contexts read"
    assert "copreport: timeline: 2 host state slices" in err
    assert err[-1].startswith("copreport: timeline: writing ")
