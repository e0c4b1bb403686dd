"""What a session says about its own end: the end_state and end_reason keys
(docs/session-format.md, "How a session ends").

coprofd writes end_state "live" in its first transaction, "complete" when
the stream ended with its STOP and everything was flushed, "incomplete"
with a one-line end_reason otherwise, and says so on standard error.
The full-disk cases need a tmpfs and are in fault_full_disk.py.
"""

import os
import signal
import sqlite3
import subprocess
import time

from test_live import Feeder, POLL_SAMPLES, header, meta, poll_group, \
    stop_record

CUT = "the driver's stream ended without STOP"


def stream(image, groups, stop):
    data = header(image)
    for number in range(1, groups + 1):
        data += poll_group(number)
    return data + (stop_record(groups * POLL_SAMPLES) if stop else b"")


def first_end_state(session):
    """end_state once coprofd's first transaction is there."""
    deadline = time.monotonic() + 30
    while True:
        try:
            if os.path.exists(os.path.join(session, "session.db")):
                value = meta(session, "end_state")
                if value is not None:
                    return value
        except sqlite3.OperationalError:
            pass                # the schema is being made
        assert time.monotonic() < deadline, "no session made"
        time.sleep(0.02)


def run_on_pipe(coprofd, data, session):
    return subprocess.run([coprofd.program, "--input", "-", "--session-dir",
                           session], input=data, capture_output=True,
                          timeout=120)


def test_a_stream_with_its_stop_is_complete(coprofd, test_image, tmp_path):
    session = str(tmp_path / "s")
    result = run_on_pipe(coprofd, stream(test_image("overlays.elf"), 4, True),
                         session)
    assert result.returncode == 0, result.stderr
    assert meta(session, "end_state") == "complete"
    assert meta(session, "end_reason") == ""
    assert b"incomplete" not in result.stderr


def test_a_stream_cut_before_its_stop_is_incomplete(coprofd, test_image,
                                                    tmp_path):
    session = str(tmp_path / "s")
    result = run_on_pipe(coprofd, stream(test_image("overlays.elf"), 4,
                                         False), session)
    assert result.returncode == 0, result.stderr
    assert meta(session, "end_state") == "incomplete"
    assert meta(session, "end_reason") == CUT
    assert meta(session, "stream.samples") == 4 * POLL_SAMPLES
    lines = result.stderr.decode().splitlines()
    assert lines == ["coprofd: %s: session incomplete: %s" % (session, CUT)]


def test_a_replayed_file_without_stop_is_incomplete(coprofd, test_image,
                                                    tmp_path):
    path = tmp_path / "cut.stream"
    path.write_bytes(stream(test_image("overlays.elf"), 2, False))
    session = str(tmp_path / "s")
    result = coprofd("--replay", path, "--session-dir", session)
    assert result.returncode == 0, result.stderr
    assert meta(session, "end_state") == "incomplete"
    assert meta(session, "end_reason") == CUT


def test_live_until_the_end_then_ended_by_a_signal(coprofd, test_image,
                                                   tmp_path):
    session = str(tmp_path / "s")
    feeder = Feeder(coprofd, test_image("overlays.elf"), session)
    for _ in range(3):
        feeder.group()
    # The first transaction, made before any input is read, says live.
    assert first_end_state(session) == "live"
    feeder.process.send_signal(signal.SIGTERM)
    # The input stays open until coprofd ended: the signal ends it.
    status = feeder.process.wait(timeout=60)
    err = feeder.process.stderr.read().decode()
    feeder.process.stdin.close()
    assert status == 0, err
    assert meta(session, "end_state") == "incomplete"
    assert meta(session, "end_reason") == ("coprofd was ended by a signal "
                                           "before the stream's STOP")
    assert meta(session, "stream.samples") == 3 * POLL_SAMPLES


def test_a_signal_before_the_loop_runs_ends_it_cleanly(coprofd, tmp_path):
    """A SIGTERM that comes after the session is made but before coprofd's
    main loop runs (held there by the coprofd-before-loop test point) is
    kept until the loop runs: the session ends incomplete, by a signal,
    and coprofd exits 0 instead of dying with a session that says live."""
    session = str(tmp_path / "s")
    process = subprocess.Popen(
        [coprofd.program, "--input", "-", "--session-dir", session],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE,
        env=dict(os.environ, COPROF_TEST_PAUSE="coprofd-before-loop"))
    try:
        _, how = os.waitpid(process.pid, os.WUNTRACED)
        assert os.WIFSTOPPED(how)
        assert meta(session, "end_state") == "live"
        process.send_signal(signal.SIGTERM)
        process.send_signal(signal.SIGCONT)
        status = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    err = process.stderr.read().decode()
    process.stdin.close()
    assert status == 0, err
    assert meta(session, "end_state") == "incomplete"
    assert meta(session, "end_reason") == ("coprofd was ended by a signal "
                                           "before the stream's STOP")


def test_a_live_stream_ended_by_its_stop_is_complete(coprofd, test_image,
                                                    tmp_path):
    session = str(tmp_path / "s")
    feeder = Feeder(coprofd, test_image("overlays.elf"), session)
    feeder.group()
    feeder.send(stop_record(POLL_SAMPLES))
    status, _, err = feeder.wait()
    assert status == 0, err
    assert meta(session, "end_state") == "complete"


def test_a_stop_whose_totals_disagree_is_incomplete(coprofd, test_image,
                                                    tmp_path):
    """A STOP that counts more samples than the stream held (the driver
    lost some on the way) is not a complete session with lost 0: the
    session says both counts and how many are missing."""
    session = str(tmp_path / "s")
    data = stream(test_image("overlays.elf"), 4, False)
    data += stop_record(4 * POLL_SAMPLES + 334)
    result = run_on_pipe(coprofd, data, session)
    assert result.returncode == 0, result.stderr
    reason = ("the driver's STOP counted %d samples and 0 lost, the stream "
              "held %d samples and 0 lost: 334 missing"
              % (4 * POLL_SAMPLES + 334, 4 * POLL_SAMPLES))
    assert meta(session, "end_state") == "incomplete"
    assert meta(session, "end_reason") == reason
    assert meta(session, "stream.stop_samples") == 4 * POLL_SAMPLES + 334
    assert result.stderr.decode().splitlines()[-1] == (
        "coprofd: %s: session incomplete: %s" % (session, reason))
