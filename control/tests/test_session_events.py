"""A session holds only its own scheduler events.

copcontrol's copsim keeps one event log in the socket's directory for all
its sessions, and that file outlives a copsim (a later --init opens it
again and appends).  coprofd imports the log from the stream's START on, so
a session started after others, on the same copsim or on a new one, holds
none of their events: with no program run during it, none at all."""

import glob
import os
import subprocess

from control_support import count, key, session, wait_for

COUNT = 20000


def sched_rows(sdir):
    with session(sdir) as db:
        rows = count(db, "sched_events")
        start_ns = key(db, "stream.start_time_ns")
        earliest = db.execute("SELECT min(time_ns) FROM sched_events"
                              ).fetchone()[0]
    return rows, start_ns, earliest


def record_pipeline(cenv, sdir):
    result = cenv.copcontrol("--start", "--event=SPU_CYCLES:%d" % COUNT,
                             "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    host = cenv.host_pipeline()
    assert host.returncode == 0, host.stderr
    result = cenv.copcontrol("--stop")
    assert result.returncode == 0, result.stderr


def record_nothing(cenv, sdir):
    result = cenv.copcontrol("--start", "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    result = cenv.copcontrol("--stop")
    assert result.returncode == 0, result.stderr
    assert " sched_events=0" in result.stdout, result.stdout


def test_sessions_on_one_copsim(cenv, tmp_path):
    assert cenv.copcontrol("--init").returncode == 0
    record_pipeline(cenv, tmp_path / "first")
    rows, start_ns, earliest = sched_rows(tmp_path / "first")
    assert rows > 0 and earliest >= start_ns

    record_nothing(cenv, tmp_path / "second")
    assert sched_rows(tmp_path / "second")[0] == 0


def test_session_on_a_new_copsim_after_reset(cenv, tmp_path):
    """The issue's case: the log of a copsim already shut down."""
    assert cenv.copcontrol("--init").returncode == 0
    record_pipeline(cenv, tmp_path / "first")
    assert cenv.copcontrol("--shutdown").returncode == 0
    assert cenv.copcontrol("--init").returncode == 0
    result = cenv.copcontrol("--start", "--session-dir=%s" % (tmp_path / "s"))
    assert result.returncode == 0, result.stderr
    result = cenv.copcontrol("--reset")
    assert result.returncode == 0, result.stderr
    record = cenv.copcontrol("--stop")
    assert record.returncode == 0, record.stderr
    assert " samples=0 " in record.stdout and " sched_events=0" in \
        record.stdout, record.stdout
    assert sched_rows(tmp_path / "s")[0] == 0


def creates_logged(cenv):
    """How many contexts copsim's event log says were created."""
    (log,) = glob.glob(os.path.join(os.path.dirname(cenv.socket),
                                    "*.coplog"))
    dump = cenv.run(os.path.join(cenv.build, "bin", "coplog"),
                    ["dump", log, "--subsys", "SCHED"])
    assert dump.returncode == 0, dump.stderr
    return sum(1 for line in dump.stdout.splitlines()
               if " create context=" in line)


def test_contexts_created_before_start_keep_their_site(cenv, tmp_path):
    """copcontrol --start while the program runs: the contexts it created
    before the START are the session's, with the host call site that
    created them, although their create events are not (COPSIM_TEST_GATHER
    holds the first program's four contexts unbound until a fifth waits,
    so they are created before the START and run after it)."""
    init = subprocess.run([cenv.copcontrol_path, "--init"],
                          env=dict(cenv.env, COPSIM_TEST_GATHER="5"),
                          capture_output=True, text=True, timeout=180)
    assert init.returncode == 0, init.stderr
    program = os.path.join(cenv.build, "examples", "host-pipeline")
    first = subprocess.Popen(
        [program, "--contexts", "4", "--threads", "4", "--frames", "1"],
        env=cenv.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        wait_for(lambda: creates_logged(cenv) == 4,
                 "host-pipeline's four contexts created")
        sdir = tmp_path / "s"
        result = cenv.copcontrol("--start", "--event=SPU_CYCLES:%d" % COUNT,
                                 "--session-dir=%s" % sdir)
        assert result.returncode == 0, result.stderr
        second = cenv.host_pipeline("--contexts", "1", "--threads", "1")
        assert second.returncode == 0, second.stderr
        out, err = first.communicate(timeout=180)
        assert first.returncode == 0, err
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    result = cenv.copcontrol("--stop")
    assert result.returncode == 0, result.stderr
    rows, start_ns, earliest = sched_rows(sdir)
    assert earliest >= start_ns
    with session(sdir) as db:
        contexts = db.execute("SELECT pid, creation_stack FROM contexts"
                              ).fetchall()
        created = db.execute("SELECT COUNT(*) FROM sched_events "
                             "WHERE kind = 'create'").fetchone()[0]
    assert len(contexts) == 5 and created == 1
    assert all(stack for _, stack in contexts), contexts
    assert len({pid for pid, _ in contexts}) == 2
