"""coprofd --event-log: the SCHED events of the kernel event log copied
into the session, once each, incrementally while the log is written."""

import sqlite3
import subprocess
import time

from coprofd_support import Writer, identity, open_session


def coplog(coprof_bin, *args):
    result = subprocess.run([coprof_bin("coplog"), *map(str, args)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def sched(coprof_bin, log, text, *args):
    coplog(coprof_bin, "write", log, "SCHED", text, *args)


def small_stream(image):
    w = Writer()
    w.start()
    w.image(image)
    w.context(0, 1, identity(image), pid=10, tid=101)
    w.sample(0, 0x10, 5)
    w.time(0, 1, 1)
    w.stop()
    return w.bytes()


def test_replay_imports_sched_events(coprofd, coprof_bin, test_image,
                                     tmp_path):
    log = tmp_path / "run.coplog"
    coplog(coprof_bin, "create", log, "SCHED,records=1024,args=12",
           "APP,records=64")
    # The formats of copsim's SCHED records (emulator/copsim/schedlog.c).
    sched(coprof_bin, log, "create context=%llu pid=%d tid=%d mono=%llu "
          "trace_context=%u stack=%s", 1, 10, 101, 5000, 0,
          "/bin/host+0x1010 /usr/lib/libcop.so+0x2a0")
    sched(coprof_bin, log, "bind slot=%u context=%llu pid=%d tid=%d "
          "mono=%llu cycles=%llu", 0, 1, 10, 101, 6000, 0)
    coplog(coprof_bin, "write", log, "APP", "not imported %d", 1)
    sched(coprof_bin, log, "exit slot=%d context=%llu pid=%d tid=%d "
          "mono=%llu cycles=%llu status=%d instructions=%llu", 0, 1, 10, 101,
          7000, 500, 0, 500)
    stream = tmp_path / "stream.bin"
    stream.write_bytes(small_stream(test_image("overlays.elf")))
    session = tmp_path / "session"
    result = coprofd("--replay", stream, "--session-dir", session,
                     "--event-log", log)
    assert result.returncode == 0, result.stderr
    assert "sched_events=3" in result.stdout

    db = open_session(session)
    rows = db.execute("SELECT kind, slot, context_id, cycle, host_pid,"
                      " host_tid, message FROM sched_events"
                      " ORDER BY order_num").fetchall()
    assert [r[:6] for r in rows] == [
        ("create", None, 1, None, 10, 101),
        ("bind", 0, 1, 0, 10, 101),
        ("exit", 0, 1, 500, 10, 101)]
    assert rows[1][6] == ("bind slot=0 context=1 pid=10 tid=101 mono=6000 "
                          "cycles=0")
    assert db.execute("SELECT creation_stack FROM contexts").fetchone() == (
        "/bin/host+0x1010 /usr/lib/libcop.so+0x2a0",)
    times = [t for (t,) in db.execute(
        "SELECT time_ns FROM sched_events ORDER BY order_num")]
    assert times == sorted(times) and times[0] > 0


def test_missing_log_warns_once(coprofd, test_image, tmp_path):
    stream = tmp_path / "stream.bin"
    stream.write_bytes(small_stream(test_image("overlays.elf")))
    result = coprofd("--replay", stream, "--session-dir", tmp_path / "s",
                     "--event-log", tmp_path / "none.coplog")
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and "none.coplog" in lines[0], lines
    assert "sched_events=0" in result.stdout


def imported_events(session):
    """SCHED events in a live session; 0 until coprofd has created it (its
    schema is committed in one transaction after the file appears)."""
    try:
        db = open_session(session)
        try:
            return db.execute("SELECT COUNT(*) FROM sched_events"
                              ).fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def test_live_import_is_incremental(coprofd, coprof_bin, test_image,
                                    tmp_path):
    log = tmp_path / "run.coplog"
    coplog(coprof_bin, "create", log, "SCHED,records=4096")
    session = tmp_path / "session"
    image = test_image("overlays.elf")
    process = subprocess.Popen(
        [coprofd.program, "--input", "-", "--session-dir", session,
         "--event-log", log, "--flush-interval", "100"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stream = small_stream(image)
    process.stdin.write(stream[:-40])           # all but the STOP record
    process.stdin.flush()
    seen = []
    for batch in range(3):
        for i in range(5):
            sched(coprof_bin, log, "bind slot=%u context=%u cycle=%u",
                  i, batch, i)
        deadline = time.monotonic() + 20
        while True:
            count = imported_events(session)
            if count == 5 * (batch + 1):
                break
            assert count <= 5 * (batch + 1)
            assert time.monotonic() < deadline, "events not imported"
            time.sleep(0.1)
        seen.append(count)
    process.stdin.write(stream[-40:])
    process.stdin.close()
    process.stdin = None
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert seen == [5, 10, 15]
    db = open_session(session)
    assert db.execute("SELECT COUNT(DISTINCT order_num) FROM sched_events"
                      ).fetchone() == (15,)
    position = db.execute("SELECT value FROM session"
                          " WHERE key = 'eventlog.position'").fetchone()[0]
    assert position == db.execute("SELECT MAX(order_num) FROM sched_events"
                                  ).fetchone()[0]
