"""coprofd on a live stream: flushes while running, SIGHUP, SIGTERM,
SIGKILL, a UNIX socket, a stream file still being written.

The live stream is written by the test at a known pace through a pipe, so
the test knows which samples coprofd had been given at any moment.
"""

import os
import signal
import socket
import sqlite3
import subprocess
import threading
import time

import pytest

from coprofd_support import Writer, identity, open_session

POLL_SAMPLES = 100
RESIDENT = 0x10


def header(image):
    w = Writer()
    w.start()
    w.image(image)
    w.context(0, 1, identity(image))
    for region, guard in enumerate((1, 4, 0)):
        w.overlay(0, region, guard)
    return w.bytes()


def poll_group(number):
    w = Writer()
    w.sample(0, RESIDENT, POLL_SAMPLES)
    w.time(0, number * 1000, number * 10**6)
    return w.bytes()


def stop_record(samples):
    w = Writer()
    w.samples = samples
    w.stop()
    return w.bytes()


def stored_samples(session):
    db = sqlite3.connect(os.path.join(session, "session.db"))
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        return db.execute("SELECT IFNULL(SUM(count), 0) FROM samples"
                          ).fetchone()[0]
    finally:
        db.close()


def meta(session, key):
    db = open_session(session)
    try:
        row = db.execute("SELECT value FROM session WHERE key = ?",
                         (key,)).fetchone()
        return row[0] if row else None
    finally:
        db.close()


class Feeder:
    """coprofd reading a pipe that this test writes poll groups into."""

    def __init__(self, coprofd, image, session, *options):
        self.process = subprocess.Popen(
            [coprofd.program, "--input", "-", "--session-dir", session,
             *options], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        self.written = []           # (time written, samples so far)
        self.groups = 0
        self.send(header(image))

    def send(self, data):
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def group(self):
        self.groups += 1
        self.send(poll_group(self.groups))
        self.written.append((time.monotonic(), self.groups * POLL_SAMPLES))

    def run_for(self, seconds, period=0.05):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.group()
            time.sleep(period)

    def close_input(self):
        self.process.stdin.close()
        self.process.stdin = None

    def samples_before(self, moment):
        return max([n for t, n in self.written if t <= moment], default=0)

    def wait(self):
        out, err = self.process.communicate(timeout=60)
        return self.process.returncode, out.decode(), err.decode()


def test_sigkill_loses_at_most_the_last_second(coprofd, test_image,
                                               tmp_path):
    session = str(tmp_path / "session")
    feeder = Feeder(coprofd, test_image("overlays.elf"), session)
    feeder.run_for(3.5)
    killed_at = time.monotonic()
    feeder.process.send_signal(signal.SIGKILL)
    status, _, _ = feeder.wait()
    assert status == -signal.SIGKILL

    stored = stored_samples(session)
    # A flush at least every second; allow half a second of scheduling
    # noise on a loaded machine.
    assert feeder.samples_before(killed_at - 1.5) <= stored
    assert stored <= feeder.groups * POLL_SAMPLES
    assert stored > 0
    assert meta(session, "last_flush_reason") == "timer"


def test_sigterm_flushes_everything_and_exits(coprofd, test_image, tmp_path):
    session = str(tmp_path / "session")
    feeder = Feeder(coprofd, test_image("overlays.elf"), session)
    feeder.run_for(0.5, period=0.01)
    feeder.process.send_signal(signal.SIGTERM)
    status, out, err = feeder.wait()
    assert status == 0, err
    assert stored_samples(session) == feeder.groups * POLL_SAMPLES
    assert meta(session, "last_flush_reason") == "end"
    assert "samples=%d " % (feeder.groups * POLL_SAMPLES) in out


def test_sighup_dumps_without_stopping(coprofd, test_image, tmp_path):
    session = str(tmp_path / "session")
    feeder = Feeder(coprofd, test_image("overlays.elf"), session)
    for _ in range(5):
        feeder.group()
    time.sleep(0.3)
    feeder.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while meta(session, "flushes.dump") is None:
        assert time.monotonic() < deadline, "no dump flush"
        time.sleep(0.05)
    assert stored_samples(session) == 5 * POLL_SAMPLES
    assert feeder.process.poll() is None        # still running
    feeder.group()
    feeder.send(stop_record(6 * POLL_SAMPLES))  # STOP ends it
    status, out, err = feeder.wait()
    assert status == 0, err
    assert stored_samples(session) == 6 * POLL_SAMPLES
    assert "errors=0" in out


def test_flushes_while_running(coprofd, test_image, tmp_path):
    session = str(tmp_path / "session")
    feeder = Feeder(coprofd, test_image("overlays.elf"), session,
                    "--flush-interval", "200")
    feeder.run_for(1.0)
    time.sleep(0.5)
    assert stored_samples(session) == feeder.groups * POLL_SAMPLES
    assert meta(session, "flushes.timer") >= 3
    feeder.close_input()                        # end of input ends it
    status, _, err = feeder.wait()
    assert status == 0, err


def test_socket_input(coprofd, test_image, tmp_path):
    path = str(tmp_path / "stream.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    groups = 20
    data = header(test_image("overlays.elf"))
    data += b"".join(poll_group(n + 1) for n in range(groups))
    data += stop_record(groups * POLL_SAMPLES)

    def serve():
        connection, _ = server.accept()
        for at in range(0, len(data), 1000):    # in pieces, as it comes
            connection.sendall(data[at:at + 1000])
            time.sleep(0.001)
        time.sleep(0.5)                 # coprofd ends at STOP, not at EOF
        connection.close()

    thread = threading.Thread(target=serve)
    thread.start()
    session = str(tmp_path / "session")
    result = coprofd("--socket", path, "--session-dir", session)
    thread.join()
    server.close()
    assert result.returncode == 0, result.stderr
    assert stored_samples(session) == groups * POLL_SAMPLES
    assert meta(session, "source") == path


def test_followed_stream_file(coprofd, test_image, tmp_path):
    stream = tmp_path / "stream.bin"
    stream.write_bytes(header(test_image("overlays.elf")) + poll_group(1))
    session = str(tmp_path / "session")
    process = subprocess.Popen([coprofd.program, "--input", str(stream),
                                "--session-dir", session],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.3)
    assert process.poll() is None               # waits for more
    with open(stream, "ab") as out:
        out.write(poll_group(2) + stop_record(2 * POLL_SAMPLES))
    out, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert stored_samples(session) == 2 * POLL_SAMPLES


def test_input_fd(coprofd, test_image, tmp_path):
    stream = tmp_path / "stream.bin"
    stream.write_bytes(header(test_image("overlays.elf")) + poll_group(1) +
                       stop_record(POLL_SAMPLES))
    session = str(tmp_path / "session")
    with open(stream, "rb") as source:
        result = subprocess.run(
            [coprofd.program, "--input-fd", str(source.fileno()),
             "--session-dir", session], pass_fds=[source.fileno()],
            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert stored_samples(session) == POLL_SAMPLES


@pytest.mark.parametrize("cut", [3, 8, 51, 200])
def test_replay_cut_short_keeps_what_came(coprofd, test_image, tmp_path, cut):
    """A stream that ends mid-record: everything before is stored, the
    truncation is counted."""
    data = header(test_image("overlays.elf")) + poll_group(1)
    data += poll_group(2)[:cut]
    stream = tmp_path / "cut.bin"
    stream.write_bytes(data)
    session = str(tmp_path / "session")
    result = coprofd("--replay", stream, "--session-dir", session)
    assert result.returncode == 0, result.stderr
    assert stored_samples(session) >= POLL_SAMPLES
    db = open_session(session)
    kinds = dict(db.execute("SELECT kind, count FROM decode_errors"))
    assert kinds.get("no-stop") == 1
    assert meta(session, "stream.complete") == 1
