"""coprofd on a live stream: flushes while running, SIGHUP, SIGTERM,
SIGKILL, a UNIX socket, a stream file still being written.

The live stream is written by the test through a pipe, so the test knows
which samples coprofd had been given; it knows coprofd read them all when
the pipe is empty (FIONREAD), and what a flush stored from the session.  No
test depends on how fast coprofd runs: each waits for what it needs to
have happened (a flush, an empty pipe), with a deadline only to fail.
"""

import array
import fcntl
import os
import signal
import socket
import sqlite3
import subprocess
import termios
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


def stored_now(session):
    """The samples a live session's last flush stored (read-only)."""
    try:
        db = open_session(session)
    except sqlite3.OperationalError:
        return 0                        # not created yet
    try:
        return db.execute("SELECT IFNULL(SUM(count), 0) FROM samples"
                          ).fetchone()[0]
    except sqlite3.OperationalError:
        return 0                        # no schema yet
    finally:
        db.close()


def wait_until(what, predicate, seconds=60):
    """Waits for predicate() to be true; fails the test after seconds."""
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.02)


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
        self.groups = 0
        self.send(header(image))

    def send(self, data):
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def group(self):
        self.groups += 1
        self.send(poll_group(self.groups))

    @property
    def samples(self):
        return self.groups * POLL_SAMPLES

    def unread(self):
        """Bytes written that coprofd has not read yet."""
        n = array.array("i", [0])
        fcntl.ioctl(self.process.stdin.fileno(), termios.FIONREAD, n)
        return n[0]

    def wait_read(self):
        """Until coprofd has read everything written (its main loop
        decodes what it read before it handles a signal)."""
        wait_until("coprofd to read its input", lambda: self.unread() == 0)

    def run_for(self, seconds, period=0.05):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.group()
            time.sleep(period)

    def close_input(self):
        self.process.stdin.close()
        self.process.stdin = None

    def wait(self):
        out, err = self.process.communicate(timeout=60)
        return self.process.returncode, out.decode(), err.decode()


def test_sigkill_loses_at_most_what_came_after_the_last_flush(
        coprofd, test_image, tmp_path):
    session = str(tmp_path / "session")
    feeder = Feeder(coprofd, test_image("overlays.elf"), session,
                    "--flush-interval", "100")
    for _ in range(10):
        feeder.group()
    flushed = feeder.samples
    # a timer flush stored them all, then more came
    wait_until("a flush of %d samples" % flushed,
               lambda: stored_now(session) == flushed)
    for _ in range(5):
        feeder.group()
    feeder.process.send_signal(signal.SIGKILL)
    status, _, _ = feeder.wait()
    assert status == -signal.SIGKILL

    stored = stored_samples(session)
    assert flushed <= stored <= feeder.samples
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
    feeder.wait_read()
    feeder.process.send_signal(signal.SIGHUP)
    wait_until("a dump flush",
               lambda: meta(session, "flushes.dump") is not None)
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
    # timer flushes only (no end, no dump): they store everything read
    wait_until("timer flushes of every sample",
               lambda: stored_now(session) == feeder.samples and
               int(meta(session, "flushes.timer") or 0) >= 3)
    assert meta(session, "flushes.end") is None
    assert meta(session, "flushes.dump") is None
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

    done = threading.Event()

    def serve():
        connection, _ = server.accept()
        for at in range(0, len(data), 1000):    # in pieces, as it comes
            connection.sendall(data[at:at + 1000])
        done.wait(130)          # coprofd ends at STOP, not at EOF
        connection.close()

    thread = threading.Thread(target=serve)
    thread.start()
    session = str(tmp_path / "session")
    try:
        result = coprofd("--socket", path, "--session-dir", session)
    finally:
        done.set()
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
    # it read the file to its end, flushed that, and waits for more
    wait_until("a flush of the first group",
               lambda: stored_now(session) == POLL_SAMPLES)
    assert process.poll() is None
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


def test_ready_fd_once_the_session_exists(coprofd, test_image, tmp_path):
    """--ready-fd: "ready" comes once the session exists, before any of
    the stream (coprof and copcontrol wait on it instead of polling for
    session.db); the descriptor is closed after it."""
    session = str(tmp_path / "session")
    stream_read, stream_write = os.pipe()
    ready_read, ready_write = os.pipe()
    process = subprocess.Popen(
        [coprofd.program, "--input-fd", str(stream_read), "--ready-fd",
         str(ready_write), "--session-dir", session],
        pass_fds=[stream_read, ready_write], stderr=subprocess.PIPE,
        text=True)
    os.close(stream_read)
    os.close(ready_write)
    try:
        with os.fdopen(ready_read, "rb") as ready:
            assert ready.read() == b"ready\n"    # to EOF: closed after it
        db = open_session(session)
        assert db.execute("SELECT value FROM session WHERE key = "
                          "'format_version'").fetchone() is not None
        db.close()
    finally:
        with os.fdopen(stream_write, "wb") as out:
            out.write(header(test_image("overlays.elf")) + poll_group(1) +
                      stop_record(POLL_SAMPLES))
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
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
