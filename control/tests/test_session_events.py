"""A session holds only its own scheduler events.

copcontrol's copsim keeps one event log in the socket's directory for all
its sessions, and that file outlives a copsim (a later --init opens it
again and appends).  coprofd imports the log from the stream's START on, so
a session started after others, on the same copsim or on a new one, holds
none of their events: with no program run during it, none at all."""

from control_support import count, key, session

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
