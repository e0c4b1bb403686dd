"""The host side of a session (coprof-host): `coprof record
--host-event=cpu-clock` on split-host, whose main thread spins in
host_spin while two worker threads run kernels contexts, then copreport's
--side, per-context host thread times and timeline on that session; the
unprivileged case (as nobody: one line, the rest recorded); bad options.

Tracing the scheduler needs root (tracefs); the tests that read the
scheduler's events are skipped without it (make check runs as root)."""

import csv
import io
import json
import os
import re
import signal
import sqlite3
import subprocess
import time

import pytest

ROOT = os.geteuid() == 0
NOBODY = 65534
needs_root = pytest.mark.skipif(not ROOT, reason="tracefs needs root")


def run(args, env=None, timeout=300):
    return subprocess.run([str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def split_host(build_dir):
    p = os.path.join(build_dir, "tests", "split-host")
    if not os.access(p, os.X_OK):
        pytest.fail("%s is not built: run make" % p)
    return p


@pytest.fixture(scope="module")
def recorded(coprof_bin, split_host, tmp_path_factory):
    """(session dir, coprof's stderr) of split-host with host samples and
    callchains."""
    d = tmp_path_factory.mktemp("host") / "session"
    p = run([coprof_bin("coprof"), "record", "--host-event=cpu-clock",
             "--host-call-graph", "-o", d, "--", split_host, "2", "4"])
    assert p.returncode == 0, p.stderr
    return str(d), p.stderr


@pytest.fixture(scope="module")
def db(recorded):
    con = sqlite3.connect(os.path.join(recorded[0], "session.db"))
    yield con
    con.close()


def running(pid):
    """Whether pid runs (a zombie left to a subreaper does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def keys(db):
    return dict(db.execute("SELECT key, value FROM session"))


def copreport(coprof_bin, *args):
    p = run([coprof_bin("copreport")] + list(args))
    assert p.returncode == 0, p.stderr
    return p.stdout


def report_json(coprof_bin, d, *args):
    return json.loads(copreport(coprof_bin, "-d", d, "--format", "json",
                                *args))


def context_events(db):
    """{copsim context id: {kind: [mono ns]}} from copsim's SCHED log."""
    out = {}
    for cid, kind, message, t in db.execute(
            "SELECT context_id, kind, message, time_ns FROM sched_events "
            "WHERE context_id IS NOT NULL"):
        m = re.search(r"\bmono=(\d+)", message or "")
        out.setdefault(cid, {}).setdefault(kind, []).append(
            int(m.group(1)) if m else t)
    return out


# --- both sides --------------------------------------------------------------

@needs_root
def test_summary_lines(recorded):
    d, err = recorded
    m = re.search(r"\ncoprof: host: Linux scheduler events of the "
                  r"command's (\d+) threads \((\d+) events, 0 lost; raw "
                  r"events: all kept\); host samples on cpu-clock every "
                  r"250000: (\d+), 0 lost\ncoprof: session "
                  + re.escape(d) + "\n$", err)
    assert m, err
    con = sqlite3.connect(os.path.join(d, "session.db"))
    assert [int(x) for x in m.groups()] == [
        con.execute("SELECT COUNT(*) FROM %s" % t).fetchone()[0]
        for t in ("host_threads", "host_sched_events", "host_samples")]
    con.close()
    assert "not recorded" not in err and "coprof-host" not in err


def test_known_split_both_sides(recorded, coprof_bin):
    d, _ = recorded
    rep = report_json(coprof_bin, d)
    host = [r for r in rep["rows"] if r["side"] == "host"]
    cop = [r for r in rep["rows"] if r["side"] == "cop"]
    assert rep["side"] == "all" and host and cop
    # the host's samples: the main thread's spin, nearly all of them
    spin = host[0]
    assert spin["symbol"] == "host_spin", host[:3]
    assert spin["file"].endswith("/split-host")
    assert re.fullmatch(r"[0-9a-f]{40}", spin["build_id"] or "")
    assert spin["ci_low"] > 90.0, spin
    assert rep["host"]["samples"] == sum(r["samples"] for r in host)
    assert abs(sum(r["percent"] for r in host) - 100.0) < 1e-6
    for r in host:
        assert r["ci_low"] <= r["percent"] <= r["ci_high"]
    # the coprocessor's: the kernels' functions, and no host code
    names = {r["symbol"] for r in cop}
    assert {"matrix_multiply", "crc32_bitwise", "insertion_sort"} <= names
    assert "host_spin" not in names
    assert sum(r["samples"] for r in cop) == rep["totals"]["samples"]


def test_sides_apart(recorded, coprof_bin):
    d, _ = recorded
    host = report_json(coprof_bin, d, "--side=host")
    cop = report_json(coprof_bin, d, "--side=cop")
    assert {r["side"] for r in host["rows"]} == {"host"}
    assert {r["side"] for r in cop["rows"]} == {"cop"}
    assert host["groups"] == []
    text = copreport(coprof_bin, "-d", d, "--side=host")
    assert "host_spin" in text and "matrix_multiply" not in text
    assert text.rstrip().endswith("session complete")
    text = copreport(coprof_bin, "-d", d, "--side=cop")
    assert "host_spin" not in text and "matrix_multiply" in text
    text = copreport(coprof_bin, "-d", d)
    assert text.index("matrix_multiply") < text.index("host samples:") < \
        text.index("host_spin")
    text = copreport(coprof_bin, "-d", d, "--format", "csv", "--side=host")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows and all(row["side"] == "host" for row in rows)
    assert "split-host" in rows[0]["path"] and rows[0]["symbol"] == "host_spin"


def test_callchains(db):
    rows = db.execute("SELECT location, callchain FROM host_samples").\
        fetchall()
    assert rows and all(c for _, c in rows)
    for location, chain in rows:
        assert int(chain.split()[0]) == location    # innermost first


# --- the scheduler's events --------------------------------------------------

@needs_root
def test_sched_events_of_the_session_in_order(db):
    k = keys(db)
    assert k["host.sched"] == "recorded"
    assert int(k["host.sched_lost"]) == 0
    times = [t for (t,) in db.execute(
        "SELECT time_ns FROM host_sched_events ORDER BY id")]
    assert times == sorted(times)
    assert int(k["host.start_ns"]) <= times[0]
    assert times[-1] <= int(k["host.stop_ns"])
    # the command's threads only, by default
    roles = dict(db.execute("SELECT role, COUNT(*) FROM host_threads "
                            "GROUP BY role"))
    assert roles.get("command", 0) >= 3 and set(roles) == {"command"}
    assert k["host.sched_threads"] == "command"
    kinds = {kind for (kind,) in db.execute(
        "SELECT DISTINCT kind FROM host_sched_events")}
    assert {"switch", "wakeup", "wakeup_new", "fork", "newtask",
            "exit"} <= kinds
    # every worker thread: created, run, ended
    for (tid,) in db.execute("SELECT DISTINCT tid FROM contexts"):
        got = [kind for (kind,) in db.execute(
            "SELECT kind FROM host_sched_events WHERE tid = ? "
            "ORDER BY id", (tid,))]
        assert got[0] in ("fork", "newtask") and "exit" in got, got
        assert got.index("exit") > got.index("wakeup_new")
    # nothing of other processes: each event is about a session thread
    threads = {t for (t,) in db.execute("SELECT tid FROM host_threads")}
    for tid, kind, other in db.execute(
            "SELECT tid, kind, other_tid FROM host_sched_events"):
        assert tid in threads or (kind == "switch" and other in threads)


@needs_root
def test_same_clock_as_the_coprocessor(db):
    """A context's bind follows its host thread's wake-up, which ran the
    thread that created and ran it; the thread is woken after the
    context's exit (copsim's reply): the two logs on one clock."""
    events = context_events(db)
    contexts = db.execute("SELECT context_id, tid FROM contexts").fetchall()
    assert len(contexts) == 2
    for cid, tid in contexts:
        ev = events[cid]
        create, bind, end = min(ev["create"]), min(ev["bind"]), \
            max(ev["exit"])
        on = [t for (t,) in db.execute(
            "SELECT time_ns FROM host_sched_events WHERE (kind = 'switch' "
            "AND other_tid = ?) OR (kind LIKE 'wakeup%' AND tid = ?) "
            "ORDER BY time_ns", (tid, tid))]
        before = [t for t in on if t < bind]
        assert before, (cid, tid)
        out = [t for (t,) in db.execute(
            "SELECT time_ns FROM host_sched_events WHERE kind = 'switch' "
            "AND tid = ? AND time_ns > ? ORDER BY time_ns LIMIT 1",
            (tid, max(before)))]
        # the thread ran from its last wake-up before the bind until it
        # blocked in cop_context_run, after the context was created
        assert out and out[0] > create, (cid, tid)
        assert any(t > end for t in on), (cid, tid)
    # the contexts' lives, and the stream's end, inside the host recording
    k = keys(db)
    assert int(k["host.start_ns"]) < min(min(ev["create"])
                                         for ev in events.values())
    assert max(max(ev["exit"]) for ev in events.values()) < \
        int(k["stream.stop_time_ns"]) < int(k["host.stop_ns"])
    lo, hi = db.execute("SELECT MIN(time_ns), MAX(time_ns) FROM "
                        "host_samples").fetchone()
    assert int(k["host.start_ns"]) <= lo <= hi <= int(k["host.stop_ns"])


def raw_states(db):
    """{tid: [Interval]}: the threads' states from the raw events, as
    copreport derives them (report/coprof_report/host.py)."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                    "report"))
    from coprof_report import host
    k = keys(db)
    events = db.execute("SELECT time_ns, cpu, kind, tid, prev_state, "
                        "other_tid FROM host_sched_events ORDER BY time_ns, "
                        "id").fetchall()
    return host._states(events, int(k["host.start_ns"]),
                        int(k["host.stop_ns"]))


def clipped(spans, lo, hi):
    """{state: ns} of spans between lo and hi."""
    out = {"running": 0, "runnable": 0, "blocked": 0}
    for iv in spans:
        a, b = max(iv.start_ns, lo), min(iv.end_ns, hi)
        if b > a:
            out[iv.state] += b - a
    return out


@needs_root
def test_aggregates_equal_the_raw_events(db):
    """What coprof-host summed as it went equals, to the nanosecond, what
    the raw events give: each state's time per thread in every bucket,
    and per context over its life (copsim's first to last SCHED record)."""
    k = keys(db)
    assert int(k["host.raw_dropped"]) == 0
    assert int(k["host.raw_events"]) == int(k["host.sched_events"]) == \
        db.execute("SELECT COUNT(*) FROM host_sched_events").fetchone()[0]
    states = raw_states(db)
    width = int(k["host.bucket_ns"])
    rows = db.execute("SELECT tid, bucket_start_ns, running_ns, "
                      "runnable_ns, blocked_ns FROM host_thread_times").\
        fetchall()
    assert len(rows) >= 3
    expected = {(tid, start): clipped(states.get(tid, ()), start,
                                      start + width)
                for tid, start, *_ in rows}
    assert {(tid, start): dict(zip(("running", "runnable", "blocked"), ns))
            for tid, start, *ns in rows} == expected
    # and no bucket with time is missing of a session thread
    threads = {t for (t,) in db.execute("SELECT tid FROM host_threads")}
    for tid, spans in states.items():
        if tid not in threads:
            continue        # another process's, switched with ours
        covered = sum(iv.end_ns - iv.start_ns for iv in spans)
        assert covered == sum(sum(v.values()) for (t, _), v in
                              expected.items() if t == tid)
    contexts = db.execute("SELECT context_id, tid FROM contexts").fetchall()
    times = {r[0]: r for r in db.execute(
        "SELECT context_id, tid, start_ns, end_ns, running_ns, "
        "runnable_ns, blocked_ns FROM host_context_times")}
    assert sorted(times) == sorted(cid for cid, _ in contexts)
    lives = context_events(db)
    for cid, tid in contexts:
        _, t, lo, hi, *ns = times[cid]
        every = [x for v in lives[cid].values() for x in v]
        assert (t, lo, hi) == (tid, min(every), max(every))
        assert dict(zip(("running", "runnable", "blocked"), ns)) == \
            clipped(states[tid], lo, hi)


@needs_root
def test_host_sched_all_records_the_emulator(coprof_bin, split_host,
                                             tmp_path):
    """--host-sched=all: copsim's and the QEMUs' threads too, said in the
    summary; the aggregates still equal the raw events."""
    d = tmp_path / "s"
    p = run([coprof_bin("coprof"), "record", "--host-sched=all", "-o", d,
             "--", split_host, "2", "4"])
    assert p.returncode == 0, p.stderr
    assert re.search(r"\ncoprof: host: Linux scheduler events of the "
                     r"command's, copsim's and its QEMUs' \d+ threads ",
                     p.stderr), p.stderr
    con = sqlite3.connect(os.path.join(d, "session.db"))
    roles = dict(con.execute("SELECT role, COUNT(*) FROM host_threads "
                             "GROUP BY role"))
    assert roles.get("command", 0) >= 3
    assert roles.get("copsim", 0) >= 1 and roles.get("qemu", 0) >= 1
    assert keys(con)["host.sched_threads"] == "all"
    states = raw_states(con)
    for cid, tid, lo, hi, *ns in con.execute(
            "SELECT * FROM host_context_times"):
        assert dict(zip(("running", "runnable", "blocked"), ns)) == \
            clipped(states[tid], lo, hi)
    con.close()


# The command prints its coprof-host's buffer size: coprof-host is its
# parent's (coprof's) child, ready with its instance before the command
# runs.
PRINT_HOST_BUFFER = (
    'for c in $(cat /proc/$PPID/task/*/children); do '
    '[ "$(cat /proc/$c/comm)" = coprof-host ] && '
    'cat /sys/kernel/tracing/instances/coprof-$c/buffer_size_kb; done; true')


def new_instance_buffer_kb():
    """A new tracefs instance's buffer size: the kernel's default."""
    instance = "/sys/kernel/tracing/instances/coproftest-%d" % os.getpid()
    os.mkdir(instance)
    try:
        with open(os.path.join(instance, "buffer_size_kb")) as f:
            return f.read().strip()
    finally:
        os.rmdir(instance)


@needs_root
@pytest.mark.parametrize("sched", ["command", "all"])
def test_buffers_grown_only_for_the_emulator(coprof_bin, tmp_path, sched):
    """The command's threads are traced into buffers of the kernel's
    default size: growing them is a resize of 8-32 ms the command would
    wait for.  With --host-sched=all (the emulator's threads wake each
    other about 150,000 times a second) they are 8 MiB per CPU."""
    p = run([coprof_bin("coprof"), "record", "-q", "--host-sched=" + sched,
             "-o", tmp_path / "s", "--", "sh", "-c", PRINT_HOST_BUFFER])
    assert p.returncode == 0, p.stderr
    size, = p.stdout.split()
    if sched == "all":          # the kernel rounds it up to whole pages
        assert 8192 <= int(size) < 8192 + 64, size
    else:
        assert size == new_instance_buffer_kb()


@needs_root
def test_ring_keeps_the_newest_and_says_it_wrapped(coprof_bin, split_host,
                                                   tmp_path):
    """A ring of 40 events: the session holds the last 40 (the main
    thread's end among them), counts what it let go, and
    the summary and copreport say so."""
    d = tmp_path / "s"
    p = run([coprof_bin("coprof"), "record", "--host-sched-ring=40", "-o", d,
             "--", split_host, "2", "4"])
    assert p.returncode == 0, p.stderr
    m = re.search(r"\ncoprof: host: Linux scheduler events of the "
                  r"command's \d+ threads \((\d+) events, 0 lost; raw "
                  r"events: the last 40, from [0-9.]+ s into the recording: "
                  r"the ring let (\d+) go\)\n", p.stderr)
    assert m, p.stderr
    total, dropped = int(m.group(1)), int(m.group(2))
    assert dropped == total - 40 > 0
    con = sqlite3.connect(os.path.join(d, "session.db"))
    k = keys(con)
    assert (int(k["host.raw_events"]), int(k["host.raw_dropped"]),
            int(k["host.sched_events"])) == (40, dropped, total)
    times = [t for (t,) in con.execute("SELECT time_ns FROM "
                                       "host_sched_events ORDER BY id")]
    assert len(times) == 40 and times == sorted(times)
    assert times[0] == int(k["host.raw_from_ns"]) > int(k["host.start_ns"])
    # the newest: the program's end (its main thread's exit) is in it
    exits = {t for (t,) in con.execute(
        "SELECT tid FROM host_sched_events WHERE kind = 'exit'")}
    main = con.execute("SELECT pid FROM contexts LIMIT 1").fetchone()[0]
    assert main in exits
    # the aggregates cover the whole recording all the same
    assert con.execute("SELECT MIN(bucket_start_ns) FROM "
                       "host_thread_times").fetchone()[0] < times[0]
    assert con.execute("SELECT COUNT(*) FROM host_context_times").\
        fetchone()[0] == 2
    con.close()
    text = copreport(coprof_bin, "-d", d)
    assert "raw events: the last 40, from " in text and \
        "the ring let %d go)" % dropped in text


@needs_root
def test_context_header_gives_host_thread_times(recorded, coprof_bin, db):
    d, _ = recorded
    rep = report_json(coprof_bin, d, "--separate=context")
    text = copreport(coprof_bin, "-d", d, "--separate=context")
    for c in rep["contexts"]:
        h = c["host_thread"]
        assert h is not None and h["tid"] == c["tid"]
        # the worker lives through its context: every ns in one state
        assert h["running_ns"] + h["runnable_ns"] + h["blocked_ns"] == \
            h["life_ns"] > 0
        # it waits in cop_context_run while its context runs
        assert h["blocked_ns"] > h["running_ns"]
        assert re.search(r"host thread %d \(split-host\): on CPU [0-9.]+ "
                         r"ms, runnable [0-9.]+ ms, blocked [0-9.]+ ms "
                         r"during the context's life" % c["tid"], text)


@needs_root
def test_timeline_host_tracks(recorded, coprof_bin, db, tmp_path):
    d, _ = recorded
    out, png = tmp_path / "t.json", tmp_path / "t.png"
    copreport(coprof_bin, "timeline", "-d", d, "-o", out, "--png", png,
              "--host-merge-us=0")
    trace = json.loads(out.read_text())
    host = [e for e in trace["traceEvents"] if e["pid"] == 4]
    names = {e["args"]["name"] for e in host if e["ph"] == "M" and
             e["name"] == "thread_name"}
    pid = db.execute("SELECT pid FROM contexts LIMIT 1").fetchone()[0]
    tids = [pid] + [t for (t,) in db.execute("SELECT tid FROM contexts")]
    for tid in tids:
        assert "split-host %d (command)" % tid in names
    states = [e for e in host if e.get("cat") == "host-state"]
    assert {e["name"] for e in states} == {"running", "runnable",
                                          "blocked"}
    for e in states:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["tid"] in \
            {t for (t,) in db.execute("SELECT tid FROM host_threads")}
    samples = [e for e in host if e.get("cat") == "host-sample"]
    spins = [e for e in samples if e["name"] == "host_spin"]
    assert spins and all(e["tid"] == pid for e in spins)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def dead_pid():
    """A pid no process has now (above the busiest pid in use)."""
    pid = max(int(p) for p in os.listdir("/proc") if p.isdigit()) + 1000
    while os.path.exists("/proc/%d" % pid):
        pid += 1
    return pid


@needs_root
def test_instances_removed(coprof_bin, split_host, tmp_path):
    """coprof-host removes its tracefs instance at the end, and one that a
    coprof-host killed with SIGKILL left (its pid is gone) at its start."""
    instances = "/sys/kernel/tracing/instances"
    stale = os.path.join(instances, "coprof-%d" % dead_pid())
    os.mkdir(stale)         # as a killed coprof-host leaves it
    try:
        before = set(os.listdir(instances))
        p = run([coprof_bin("coprof"), "record", "-q", "-o",
                 tmp_path / "s", "--", split_host, "1", "1", "1000"])
        assert p.returncode == 0, p.stderr
        assert not os.path.exists(stale)
        # ours is gone (others' may come and go while their owners run)
        left = [n for n in set(os.listdir(instances)) - before
                if n.startswith("coprof-") and not running(int(n[7:]))]
        assert left == []
    finally:
        if os.path.exists(stale):
            os.rmdir(stale)


def stopped(pid):
    """Whether pid is stopped (state T: a cli_test_point's SIGSTOP)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0] == "T"
    except OSError:
        return False


def child_named(pid, comm):
    """The pid of pid's child whose comm is comm, or None."""
    for task in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/children" % (pid, task)) as f:
            for child in f.read().split():
                try:
                    with open("/proc/%s/comm" % child) as c:
                        if c.read().strip() == comm:
                            return int(child)
                except OSError:
                    pass
    return None


def wait_until(condition, what, seconds=60):
    """Waits for a state the test drives to; fails naming it after a
    bound (never a time the test relies on)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "never happened: " + what
        time.sleep(0.02)


def record_held_at(coprof_bin, split_host, d, point):
    """`coprof record -q -o d -- split-host 1 1 1000` started, each of its
    processes to stop itself at the test point `point`."""
    return subprocess.Popen(
        [coprof_bin("coprof"), "record", "-q", "-o", str(d), "--",
         split_host, "1", "1", "1000"], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, process_group=0,
        env=dict(os.environ, COPROF_TEST_PAUSE=point))


@needs_root
def test_tracing_ends_with_the_command(coprof_bin, split_host, tmp_path):
    """Once the command has ended (and every thread it made), coprof-host
    stops tracing and removes its tracefs instance at once, while coprofd
    and copsim finish: with coprof held at its test point after coprofd's
    end, before coprof-host is told to store, the instance is already
    gone.  The session still holds the command's threads to their exit
    and the host side complete."""
    d = tmp_path / "s"
    p = record_held_at(coprof_bin, split_host, d, "coprof-after-coprofd")
    try:
        wait_until(lambda: stopped(p.pid), "coprof at its test point")
        host = child_named(p.pid, "coprof-host")
        assert host, "no coprof-host under coprof"
        instance = "/sys/kernel/tracing/instances/coprof-%d" % host
        wait_until(lambda: not os.path.exists(instance),
                   "%s removed before coprof-host is told to store"
                   % instance)
    finally:
        os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    con = sqlite3.connect(d / "session.db")
    try:
        k = keys(con)
        assert k["host.end_state"] == "complete", k
        assert k["host.sched"] == "recorded"
        assert int(k["host.sched_lost"]) == 0
        command = [tid for (tid,) in con.execute(
            "SELECT tid FROM host_threads WHERE role = 'command'")]
        exited = {tid for (tid,) in con.execute(
            "SELECT tid FROM host_sched_events WHERE kind = 'exit'")}
    finally:
        con.close()
    assert command and set(command) <= exited, (command, exited)


@needs_root
def test_coprof_ends_once_the_host_side_is_stored(coprof_bin, split_host,
                                                   tmp_path):
    """coprof record ends when coprof-host says the host side is stored,
    not when coprof-host ends: the removal of its tracefs instance (about
    0.1 s of the kernel's RCU grace periods) is left to coprof-host, which
    then ends by itself.  Held at its test point right after "stored",
    coprof-host still runs when coprof has ended with a complete host side;
    let go, it removes its instance and ends."""
    d = tmp_path / "s"
    p = record_held_at(coprof_bin, split_host, d,
                       "coprof-host-after-stored")
    host = None
    try:
        wait_until(lambda: child_named(p.pid, "coprof-host"), "coprof-host")
        host = child_named(p.pid, "coprof-host")
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        # coprof may end between coprof-host's "stored" and its stop at
        # the test point; held there, coprof-host cannot end before it
        # is let go, so coprof did not wait for its end.
        wait_until(lambda: stopped(host), "coprof-host at its test point")
        con = sqlite3.connect(d / "session.db")
        try:
            assert keys(con)["host.end_state"] == "complete"
        finally:
            con.close()
    finally:
        if host:
            os.kill(host, signal.SIGCONT)
        if p.poll() is None:
            p.kill()
            p.wait()
    wait_until(lambda: not running(host), "coprof-host's end")
    assert not os.path.exists("/sys/kernel/tracing/instances/coprof-%d"
                              % host)


@needs_root
@pytest.mark.parametrize("sched", ["command", "all"])
def test_command_recorded_from_before_its_exec(coprof_bin, tmp_path, sched):
    """coprof record starts coprof-host beside copsim (after it with
    --host-sched=all) and holds the command until coprof-host records: the
    command's first thread has events from before its exec (the wake-up
    that releases it and the switch that runs it), so nothing of its start
    is lost.  A switch is stored under the thread switched out: the one
    that runs the command names it as other_tid, and the command need not
    be switched out again before it prints."""
    d = tmp_path / "s"
    prog = "import os, time; print(os.getpid(), time.monotonic_ns())"
    p = run([coprof_bin("coprof"), "record", "-q", "--host-sched=" + sched,
             "-o", d, "--", "/usr/bin/python3", "-c", prog])
    assert p.returncode == 0, p.stderr
    pid, started = (int(w) for w in p.stdout.split())
    con = sqlite3.connect(d / "session.db")
    try:
        k = keys(con)
        assert k["host.sched"] == "recorded" and int(k["host.sched_lost"]) == 0
        assert con.execute("SELECT role FROM host_threads WHERE tid = ?",
                           (pid,)).fetchone() == ("command",)
        before = [kind for (kind,) in con.execute(
            "SELECT kind FROM host_sched_events WHERE (tid = ? OR "
            "(kind = 'switch' AND other_tid = ?)) AND time_ns < ? "
            "ORDER BY id", (pid, pid, started))]
    finally:
        con.close()
    assert "wakeup" in before and "switch" in before, before


# --- without privilege -------------------------------------------------------

@pytest.fixture
def nobody_dir():
    """A directory nobody can write, on a path nobody can reach."""
    import shutil
    import tempfile
    d = tempfile.mkdtemp(prefix="hostprof-nobody-", dir="/tmp")
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@needs_root
def test_unprivileged_says_so_and_records_the_rest(coprof_bin, split_host,
                                                   nobody_dir):
    """As nobody, tracefs cannot be used: one line says so, the session
    is complete with the coprocessor samples and the host samples
    (perf_event_paranoid lets a user sample its own processes)."""
    d = os.path.join(nobody_dir, "session")
    env = dict(os.environ, TMPDIR=nobody_dir, HOME=nobody_dir)
    env.pop("XDG_RUNTIME_DIR", None)
    p = run(["setpriv", "--reuid=%d" % NOBODY, "--regid=%d" % NOBODY,
             "--clear-groups", "--inh-caps=-all", coprof_bin("coprof"),
             "record", "--host-event=cpu-clock", "-o", d, "--",
             split_host, "1", "2", "20000000"], env=env)
    assert p.returncode == 0, p.stderr
    said = [line for line in p.stderr.splitlines()
            if "not recorded" in line]
    assert len(said) == 1, p.stderr
    assert re.search(r"\ncoprof: host: host samples on cpu-clock every "
                     r"250000: [1-9]\d*, 0 lost\n", p.stderr), p.stderr
    assert re.fullmatch(r"coprof-host: Linux scheduler events: not "
                        r"recorded: /sys/kernel/tracing: Permission denied",
                        said[0]), said
    con = sqlite3.connect(os.path.join(d, "session.db"))
    k = keys(con)
    assert k["end_state"] == "complete"
    assert int(k["stream.samples"]) > 0
    assert k["host.sched"].startswith("not recorded: ")
    assert k["host.samples"] == "recorded"
    assert con.execute("SELECT COUNT(*) FROM host_sched_events").\
        fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM host_samples").\
        fetchone()[0] > 0
    con.close()
    text = copreport(coprof_bin, "-d", d, "--separate=context")
    assert "host side: Linux scheduler events not recorded: " in text
    assert "host thread" not in text


# --- bad input ----------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["--host-event=no-such-event"],
     r"coprof: --host-event=no-such-event: event not found \(copcontrol "
     r"--list-events lists this machine's events\)"),
    (["--host-event=cpu-clock:0"],
     r"coprof: --host-event=cpu-clock:0: the period 0 is not a positive "
     r"count"),
    (["--host-event=:100"],
     r"coprof: --host-event=:100: no event name \(EVENT\[:PERIOD\], e\.g\. "
     r"cpu-clock:250000\)"),
    (["--host-call-graph"],
     r"coprof: --host-call-graph: needs --host-event"),
    (["--host-sched=qemu"],
     r"coprof: --host-sched=qemu: not command or all"),
    (["--host-sched-ring=-1"],
     r"coprof: --host-sched-ring=-1: not a number of events from 0 to "
     r"67108864"),
])
def test_bad_options(coprof_bin, split_host, tmp_path, args, message):
    d = tmp_path / "s"
    p = run([coprof_bin("coprof"), "record"] + args +
            ["-o", d, "--", split_host])
    assert p.returncode == 2
    assert re.fullmatch(message, p.stderr.strip()), p.stderr
    assert not d.exists()


def test_damaged_host_table_refused(recorded, coprof_bin, tmp_path):
    import shutil
    d = tmp_path / "copy"
    shutil.copytree(recorded[0], d)
    con = sqlite3.connect(d / "session.db")
    con.execute("UPDATE host_samples SET location = 'x' WHERE id = 1")
    con.commit()
    con.close()
    p = run([coprof_bin("copreport"), "-d", d])
    assert p.returncode == 1
    assert p.stderr == "copreport: %s/session.db: host_samples.location is " \
        "'x', not a row id (>= 1)\n" % d


# --- copcontrol ---------------------------------------------------------------

@needs_root
def test_copcontrol_follows_the_session(coprof_bin, split_host, tmp_path):
    """copcontrol's host side: the setting saved, coprof-host started with
    the session, a host program followed once it ran a context (--dump
    makes that happen before it returns), its samples stored at --stop."""
    state = tmp_path / "state"
    env = dict(os.environ, COPSIM_SOCKET=str(state / "copsim.sock"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    session = tmp_path / "data" / "coprof" / "current"

    def copcontrol(*args):
        return run([coprof_bin("copcontrol")] + list(args), env=env)

    try:
        assert copcontrol("--host-event=cpu-clock").returncode == 0
        conf = (state / "copcontrol.conf").read_text()
        assert "host-event=cpu-clock\n" in conf
        p = copcontrol("--start")
        assert p.returncode == 0, p.stderr
        assert p.stderr == ""
        m = re.search(r"\ncoprof-host: +pid (\d+)\n",
                      copcontrol("--status").stdout)
        assert m
        host_pid = int(m.group(1))
        prog = subprocess.Popen([split_host, "2", "4", "100000000",
                                 "--wait"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, text=True)
        for line in prog.stdout:
            if line == "split-host: contexts done\n":
                break
        p = copcontrol("--dump")
        assert p.returncode == 0, p.stderr
        assert "\ncopcontrol: host: dump 1: following 1 processes\n" in \
            p.stdout, p.stdout
        prog.stdin.write("go\n")
        prog.stdin.close()
        prog.stdout.read()
        assert prog.wait() == 0
        p = copcontrol("--stop")
        assert p.returncode == 0, p.stderr
        m = re.search(r"copcontrol: host: Linux scheduler events of the "
                      r"command's \d+ threads \(\d+ events, 0 lost; raw "
                      r"events: all kept\); host samples on cpu-clock every "
                      r"250000: (\d+), 0 lost\n", p.stdout)
        assert m and int(m.group(1)) > 0, p.stdout
        assert not running(host_pid)
        assert not (state / "coprof-host.pid").exists()
        assert re.search(r"\ncoprof-host: +not running\n",
                         copcontrol("--status").stdout)
        rep = json.loads(copreport(coprof_bin, "-d", session, "--side=host",
                                   "--format", "json"))
        assert rep["rows"][0]["symbol"] == "host_spin"
        assert rep["rows"][0]["file"] == split_host
        con = sqlite3.connect(os.path.join(session, "session.db"))
        roles = {r for (r,) in con.execute("SELECT role FROM host_threads")}
        con.close()
        assert roles == {"command"}     # copsim's with --host-sched=all
    finally:
        copcontrol("--shutdown")
