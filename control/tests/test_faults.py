"""The fault-injection suite, part one: kill -9 of each process of a
`coprof record` (coprofd, copsim, one QEMU, the host program, coprof
itself) and SIGINT, each at a known point: once the session holds 2000
samples (a flush of coprofd, read back from session.db); and kill -9 of
the shared copsim under copcontrol once a host program has run.

Each asserts what the user is told, that the session opens, that what it
says about itself (end_state, end_reason) is true, that its samples and
losses equal the driver's own count at the STOP where there was one, and
that no process, socket or temporary directory is left.  The faults that
need root and a tmpfs (a full disk) are in fault_session.py, run by
`make check-faults`.  docs/session-format.md, "What survives which fault",
is what these tests check.
"""

import os
import re
import signal
import subprocess

import pytest

from control_support import (Recording, alive, children, end, key,
                             one_error_line, session, stopped, stopped_group,
                             table_samples, wait_for)

KNOWN_POINT = 2000


def start(cenv, tmp_path):
    recording = Recording(cenv, tmp_path / "rec")
    recording.wait_samples(KNOWN_POINT)
    return recording, recording.processes()


def last_line(err):
    return err.strip().splitlines()[-1]


def assert_opens(recording, ended=True):
    """The session opens and its tables add up to its samples (those of
    the poll groups still open at the last flush of a coprofd that did not
    end are in stream.samples only)."""
    with session(recording.out) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        samples = key(db, "stream.samples")
        assert samples >= KNOWN_POINT
        if ended:
            assert table_samples(db) == samples
        else:
            assert KNOWN_POINT <= table_samples(db) <= samples
        return end(db)


def assert_complete_run(recording, status, expected):
    """coprof exited with the command's status after its summary; the
    session is complete and holds every capture the driver counted."""
    assert status == expected, recording.err
    assert last_line(recording.err) == "coprof: session %s" % recording.out
    assert assert_opens(recording) == ("complete", "")
    assert_driver_count(recording)
    recording.assert_nothing_left()


def assert_driver_count(recording):
    """A session that got its STOP: samples and losses are the driver's."""
    with session(recording.out) as db:
        assert key(db, "stream.samples") == key(db, "stream.stop_samples")
        assert key(db, "stream.lost") == key(db, "stream.stop_lost")


def test_kill_copsim(cenv, tmp_path):
    recording, pids = start(cenv, tmp_path)
    os.kill(pids["copsim"], signal.SIGKILL)
    status, out, err = recording.finish()
    reason = ("the driver's stream ended without STOP: copsim (pid %d) was "
              "killed by signal 9 (Killed)" % pids["copsim"])
    assert status == 1, err             # the host program failed
    assert "FAILED" in out
    assert last_line(err) == "coprof: session %s is incomplete: %s" % (
        recording.out, reason)
    assert assert_opens(recording) == ("incomplete", reason)
    recording.assert_nothing_left()


def test_kill_copsim_after_the_stop(cenv, tmp_path):
    """copsim killed once the driver's STOP is in the session (coprof held
    at its test point after coprofd's end): nothing was lost, so the
    session stays complete, coprof says what happened to copsim, and its
    exit status is the command's."""
    host = os.path.join(cenv.build, "examples", "host-pipeline")
    recording = Recording(cenv, tmp_path / "rec", command=[
        host, "--contexts", "4", "--threads", "2", "--frames", "1"],
        pause="coprof-after-coprofd")
    recording.wait_paused()
    pids = recording.processes()
    os.kill(pids["copsim"], signal.SIGKILL)
    wait_for(lambda: not alive(pids["copsim"]), "copsim's death")
    recording.process.send_signal(signal.SIGCONT)
    status, _, err = recording.finish()
    assert status == 0, err
    assert last_line(err) == (
        "coprof: copsim (pid %d) was killed by signal 9 (Killed) after the "
        "driver's STOP: no sample was lost (the STOP's totals are the "
        "session's)" % pids["copsim"]), err
    assert "incomplete" not in err
    assert assert_opens(recording) == ("complete", "")
    assert_driver_count(recording)
    recording.assert_nothing_left()


def gated_command(tmp_path):
    """A command that waits until the test opens its gate (a FIFO)."""
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    return gate, ["sh", "-c", "read line < %s" % gate]


def open_gate(gate):
    with open(gate, "w") as f:
        f.write("go\n")


def host_keys(path):
    with session(path) as db:
        return dict(db.execute("SELECT key, value FROM session WHERE key IN "
                               "('host.end_state', 'host.end_reason')"))


def test_kill_coprof_host(cenv, tmp_path):
    """coprof-host dies while the command runs: the host side is lost and
    everybody says so (the summary's host line, the last line, exit 1, the
    session's host.end_state); the coprocessor side stays complete."""
    gate, command = gated_command(tmp_path)
    recording = Recording(cenv, tmp_path / "rec", command=command)
    # The command runs once coprof-host is ready (coprof holds it before).
    wait_for(lambda: "sh" in children(recording.process.pid),
             "the command's exec")
    pids = recording.processes()
    os.kill(pids["coprof-host"], signal.SIGKILL)
    open_gate(gate)
    status, _, err = recording.finish()
    reason = ("coprof-host (pid %d) was killed by signal 9 (Killed)"
              % pids["coprof-host"])
    assert status == 1, err
    assert "coprof: host: the host side is lost: %s\n" % reason in err
    assert last_line(err) == ("coprof: session %s is incomplete: the host "
                              "side is lost" % recording.out)
    with session(recording.out) as db:
        assert end(db) == ("complete", "")
    assert host_keys(recording.out) == {"host.end_state": "incomplete",
                                        "host.end_reason": reason}
    recording.assert_nothing_left()


def test_kill_coprofd_before_any_context(cenv, tmp_path):
    """coprofd killed before the command runs its contexts (held at a
    gate): the session has no context, but the summary never says the
    command ran none; it says what the driver counted."""
    gate = str(tmp_path / "gate")
    os.mkfifo(gate)
    host = os.path.join(cenv.build, "examples", "host-pipeline")
    recording = Recording(cenv, tmp_path / "rec", command=[
        "sh", "-c", "read line < %s && exec %s --contexts 4 --threads 2 "
        "--frames 1" % (gate, host)])
    wait_for(lambda: "sh" in children(recording.process.pid),
             "the command at its gate")
    pids = recording.processes()
    os.kill(pids["coprofd"], signal.SIGKILL)
    wait_for(lambda: not alive(pids["coprofd"]), "coprofd's death")
    open_gate(gate)
    status, _, err = recording.finish()
    assert status == 1, err
    assert "ran no coprocessor context" not in err
    found = re.search(r"^coprof: the driver counted (\d+) samples; the "
                      r"session holds 0 \(it is incomplete: below\)$",
                      err, re.M)
    assert found and int(found.group(1)) > 0, err
    assert "is incomplete: coprofd (pid %d) was killed by signal 9" % \
        pids["coprofd"] in last_line(err)
    recording.assert_nothing_left()


def test_a_stored_host_side_is_complete(cenv, tmp_path):
    gate, command = gated_command(tmp_path)
    recording = Recording(cenv, tmp_path / "rec", command=command,
                          args=["-q"])
    wait_for(lambda: "sh" in children(recording.process.pid),
             "the command's exec")
    open_gate(gate)
    status, _, err = recording.finish()
    assert status == 0, err
    assert host_keys(recording.out) == {"host.end_state": "complete",
                                        "host.end_reason": ""}


def test_copcontrol_kill_coprof_host(cenv, tmp_path):
    """Under copcontrol: coprof-host dies before --stop; --stop says the
    host side is lost and exits 1, the session says so."""
    sdir = tmp_path / "s"
    result = cenv.copcontrol("--start", "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    host = cenv.pid("coprof-host.pid")
    assert alive(host)
    os.kill(host, signal.SIGKILL)
    wait_for(lambda: not alive(host), "coprof-host's death")
    result = cenv.copcontrol("--stop")
    reason = "coprof-host (pid %d) died during the session" % host
    assert one_error_line(result, "copcontrol", 1) == (
        "copcontrol: session %s is incomplete: the host side is lost: %s"
        % (sdir, reason))
    assert "copcontrol: host: the host side is lost: %s\n" % reason in \
        result.stdout
    with session(sdir) as db:
        assert end(db) == ("complete", "")
    assert host_keys(sdir) == {"host.end_state": "incomplete",
                               "host.end_reason": reason}


def test_kill_coprofd(cenv, tmp_path):
    recording, pids = start(cenv, tmp_path)
    os.kill(pids["coprofd"], signal.SIGKILL)
    recording.process.send_signal(signal.SIGINT)    # ends the host program
    status, _, err = recording.finish()
    reason = ("coprofd (pid %d) was killed by signal 9 (Killed); the "
              "session holds what its last flush wrote" % pids["coprofd"])
    assert status == 128 + signal.SIGINT, err
    assert last_line(err) == "coprof: session %s is incomplete: %s" % (
        recording.out, reason)
    assert assert_opens(recording, ended=False) == ("incomplete", reason)
    recording.assert_nothing_left()


def test_kill_one_qemu(cenv, tmp_path):
    """One context's emulator dies: that context fails, the recording
    goes on and ends complete, every capture counted."""
    recording, pids = start(cenv, tmp_path)
    assert "qemu" in pids, pids
    os.kill(pids["qemu"], signal.SIGKILL)
    recording.process.send_signal(signal.SIGINT)
    status, _, _ = recording.finish()
    assert_complete_run(recording, status, 128 + signal.SIGINT)


def test_kill_the_host_program(cenv, tmp_path):
    recording, pids = start(cenv, tmp_path)
    os.kill(pids["host-pipeline"], signal.SIGKILL)
    status, _, _ = recording.finish()
    assert_complete_run(recording, status, 128 + signal.SIGKILL)


def test_kill_coprof(cenv, tmp_path):
    """coprof itself dies: its private copsim stops by itself, coprofd
    ends the session at the stream's end, and copsim removes its private
    directory; the host program fails on its own (libcop refuses its
    remaining contexts: the session's copsim is gone).  Whether copsim's
    shutdown gets its STOP out depends on the load (kernel-driver's
    copdrv_hosted_destroy); either way the session says the truth."""
    recording, pids = start(cenv, tmp_path)
    os.kill(recording.process.pid, signal.SIGKILL)
    status, _, err = recording.finish()
    assert status == -signal.SIGKILL
    # coprof says nothing; the host program's contexts that were still to
    # run are refused by libcop, one line each, never run unprofiled.
    for line in err.splitlines():
        assert line.startswith("libcop: ") and line.endswith(
            "no context runs unprofiled"), err
    recording.assert_nothing_left()
    state = assert_opens(recording)
    if state == ("complete", ""):
        assert_driver_count(recording)
    else:
        assert state == ("incomplete", "the driver's stream ended without "
                         "STOP")
        with session(recording.out) as db:
            assert key(db, "stream.stop_samples") is None


def test_sigint(cenv, tmp_path):
    recording, pids = start(cenv, tmp_path)
    recording.process.send_signal(signal.SIGINT)
    status, _, _ = recording.finish()
    assert_complete_run(recording, status, 128 + signal.SIGINT)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM,
                                 signal.SIGHUP, signal.SIGQUIT])
def test_a_signal_leaves_no_console_directory(cenv, tmp_path, sig):
    """A signal to coprof reaches host-pipeline, whose temporary console
    directory ($TMPDIR/host-pipeline-XXXXXX) goes with it: the recording's
    TMPDIR is empty at the end."""
    host = os.path.join(cenv.build, "examples", "host-pipeline")
    recording = Recording(cenv, tmp_path / "rec", command=[
        host, "--contexts", "4", "--threads", "2", "--frames", "1",
        "--rounds", Recording.ROUNDS])
    recording.wait_samples(KNOWN_POINT)     # contexts run: consoles exist
    assert [n for n in os.listdir(recording.tmpdir)
            if n.startswith("host-pipeline-")]
    recording.process.send_signal(sig)
    status, _, err = recording.finish()
    assert status == 128 + sig, err
    recording.assert_nothing_left()


def test_copcontrol_start_killed_after_the_drivers_start(cenv, tmp_path):
    """copcontrol --start killed between the driver's START and its
    coprofd (held at its test point): --status says what happened instead
    of an earlier session; --stop ends the driver's session and says it
    was not recorded; a new --start works."""
    old = tmp_path / "old"
    assert cenv.copcontrol("--start", "--session-dir=%s" % old
                           ).returncode == 0
    assert cenv.copcontrol("--stop").returncode == 0
    sdir = tmp_path / "s"
    start = subprocess.Popen(
        [cenv.copcontrol_path, "--start", "--session-dir=%s" % sdir],
        env=dict(cenv.env, COPROF_TEST_PAUSE="copcontrol-after-start"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **stopped_group())
    try:
        wait_for(lambda: stopped(start.pid), "--start at its test point")
    finally:
        start.kill()
        start.communicate(timeout=60)
    status = cenv.copcontrol("--status").stdout
    assert "running:        yes" in status, status
    assert ("coprofd:        not running: copcontrol --start (pid %d) ended "
            "after the driver's START" % start.pid) in status, status
    assert "session:        %s (not recorded)" % sdir in status, status
    result = cenv.copcontrol("--stop")
    assert one_error_line(result, "copcontrol", 1) == (
        "copcontrol: session %s was not recorded: copcontrol --start (pid "
        "%d) ended after the driver's START, before a coprofd read the "
        "stream; the driver's session is stopped" % (sdir, start.pid))
    status = cenv.copcontrol("--status").stdout
    assert "running:        no" in status, status
    result = cenv.copcontrol("--start", "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    assert cenv.copcontrol("--stop").returncode == 0


def test_copcontrol_kill_copsim(cenv, tmp_path):
    """Under copcontrol: the shared copsim dies mid-session; coprofd ends
    the session as incomplete, --status and --stop say so and why."""
    sdir = tmp_path / "s"
    result = cenv.copcontrol("--start", "--event=SPU_CYCLES:997",
                             "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    assert cenv.host_pipeline().returncode == 0
    # What the driver held reaches coprofd and its session before the
    # fault (--dump waits for both): the session then holds samples.
    assert cenv.copcontrol("--dump").returncode == 0
    copsim, coprofd = cenv.pid("copsim.pid"), cenv.pid("coprofd.pid")
    os.kill(copsim, signal.SIGKILL)
    wait_for(lambda: not alive(coprofd), "coprofd's end at the stream's end")
    reason = "the driver's stream ended without STOP"
    status = cenv.copcontrol("--status").stdout
    assert "copsim:         not running" in status
    assert "coprofd:        pid %d ended without --stop" % coprofd in status
    assert "(incomplete: %s)" % reason in status
    result = cenv.copcontrol("--stop")
    assert one_error_line(result, "copcontrol", 1) == (
        "copcontrol: session %s is incomplete: %s" % (sdir, reason))
    with session(sdir) as db:
        assert end(db) == ("incomplete", reason)
        assert key(db, "stream.samples") == table_samples(db) > 0


def test_copcontrol_shutdown_after_coprofd_died(cenv, tmp_path):
    """--shutdown after a kill -9 of coprofd: it says the session is
    incomplete and why, still stops copsim, and exits 1."""
    sdir = tmp_path / "s"
    result = cenv.copcontrol("--start", "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    copsim, coprofd = cenv.pid("copsim.pid"), cenv.pid("coprofd.pid")
    os.kill(coprofd, signal.SIGKILL)
    wait_for(lambda: not alive(coprofd), "coprofd's death")
    result = cenv.copcontrol("--shutdown")
    assert result.returncode == 1, result.stderr
    assert result.stderr == ("copcontrol: session %s is incomplete: coprofd "
                             "(pid %d) died during the session; %s holds 0 "
                             "samples, what its last flush wrote\n" %
                             (sdir, coprofd, sdir))
    assert "copcontrol: copsim (pid %d) stopped" % copsim in result.stdout
    assert not alive(copsim)
    assert not os.path.exists(cenv.socket)
