"""coprofd on bad input and bad arguments: unreadable and changed images,
garbage in the stream, missing files, sessions in the way.  Every failure is
one line naming the thing and the reason; no sample already collected is
lost."""

import os
import random
import shutil
import subprocess

import pytest

from coprofd_support import Writer, identity, open_session


def stream_of(image, ident, contexts=3, groups=10, path=None):
    """contexts contexts of one image on slots 0.., groups poll groups of
    resident and region-1 samples each."""
    w = Writer()
    w.start()
    w.image(path or image, ident)
    for c in range(contexts):
        w.context(c, c + 1, ident)
        for region, guard in enumerate((2, 4, 0)):
            w.overlay(c, region, guard)
    for g in range(groups):
        for c in range(contexts):
            w.sample(c, 0x10, 3)
            w.sample(c, 0x150, 2)
            w.time(c, 100 * (g + 1), 1000 * (g + 1))
    w.stop()
    return w


def replay(coprofd, w, tmp_path, *options, **kw):
    stream = tmp_path / "stream.bin"
    stream.write_bytes(w.bytes())
    session = tmp_path / "session"
    result = coprofd("--replay", stream, "--session-dir", session, *options,
                     **kw)
    return result, str(session)


def assert_kept_raw(session, samples):
    db = open_session(session)
    assert db.execute("SELECT COUNT(*) FROM samples").fetchone()[0] == 0
    rows = db.execute("SELECT reason, SUM(count) FROM unmapped_samples"
                      " GROUP BY reason").fetchall()
    assert rows == [("no-image", samples)]
    assert db.execute("SELECT COUNT(DISTINCT ls_addr) FROM unmapped_samples"
                      ).fetchone()[0] == 2
    assert db.execute("SELECT COUNT(DISTINCT context) FROM unmapped_samples"
                      ).fetchone()[0] == 3


def test_unreadable_image_warns_once(coprofd, test_image, tmp_path):
    copy = tmp_path / "gone.elf"
    shutil.copy(test_image("overlays.elf"), copy)
    ident = identity(copy)
    os.unlink(copy)
    w = stream_of(str(copy), ident)
    result, session = replay(coprofd, w, tmp_path)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("coprofd: %s: cannot open: " % copy)
    assert "raw LS addresses" in lines[0]
    assert_kept_raw(session, w.samples)
    db = open_session(session)
    assert db.execute("SELECT status FROM images").fetchone() == (
        "unreadable",)


@pytest.mark.parametrize("change", ["rewritten", "replaced", "grown"])
def test_changed_image_is_never_used(coprofd, test_image, tmp_path, change):
    copy = tmp_path / "image.elf"
    shutil.copy(test_image("overlays.elf"), copy)
    ident = identity(copy)
    data = bytearray(copy.read_bytes())
    if change == "rewritten":               # same inode and size, new bytes
        data[-1] ^= 0xFF
        with open(copy, "r+b") as f:
            f.write(data)
    elif change == "replaced":              # a new file, same bytes
        (tmp_path / "new.elf").write_bytes(data)
        os.rename(tmp_path / "new.elf", copy)
    else:
        copy.write_bytes(data + b"\0")
    w = stream_of(str(copy), ident)
    result, session = replay(coprofd, w, tmp_path)
    assert result.returncode == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("coprofd: %s: not the file the context ran ("
                               % copy)
    expected = {"rewritten": "content hash", "replaced": "inode",
                "grown": "size"}[change]
    assert "(its %s differs)" % expected in lines[0]
    assert_kept_raw(session, w.samples)
    db = open_session(session)
    assert db.execute("SELECT status, cache_file FROM images").fetchone() == (
        "changed", None)


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_image_that_is_not_a_regular_file(coprofd, test_image, tmp_path,
                                          kind):
    """A stream naming a FIFO (whose open used to wait for a writer
    forever), a directory or a device: one line, samples kept raw."""
    path = tmp_path / "image"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = "/dev/zero"
    w = stream_of(str(path), identity(test_image("overlays.elf")))
    result, session = replay(coprofd, w, tmp_path, timeout=60)
    assert result.returncode == 0
    line, = result.stderr.splitlines()
    assert line.startswith("coprofd: %s: cannot open: " % path)
    assert "not a regular file" in line
    assert_kept_raw(session, w.samples)


@pytest.mark.parametrize("forged", ["device", "inode", "size", "hash"])
def test_forged_identity_tells_nothing_of_the_file(coprofd, test_image,
                                                    tmp_path, forged):
    """A stream naming a file its writer cannot read (mode 000) with an
    identity of its own: coprofd says the file is not the one the context
    ran, and nothing of the file's inode, size or content hash."""
    secret = tmp_path / "secret.elf"
    shutil.copy(test_image("overlays.elf"), secret)
    real = identity(secret)
    secret.chmod(0)
    ident = dict(real)
    ident[forged] = {"device": real["device"] + 1,
                     "inode": real["inode"] + 1, "size": real["size"] + 1,
                     "hash": real["hash"] ^ 1}[forged]
    result, _ = replay(coprofd, stream_of(str(secret), ident), tmp_path)
    assert result.returncode == 0
    line, = result.stderr.splitlines()
    assert line.startswith("coprofd: %s: " % secret)
    for value in (real["inode"], real["size"], real["device"]):
        assert str(value) not in line
    assert "%016x" % real["hash"] not in line


def test_image_without_path(coprofd, test_image, tmp_path):
    ident = identity(test_image("overlays.elf"))
    w = Writer()
    w.start()
    w.context(0, 1, ident)
    w.sample(0, 0x10, 4)
    w.time(0, 1, 1)
    w.stop()
    result, session = replay(coprofd, w, tmp_path)
    assert result.returncode == 0
    assert "no IMAGE record gave its path" in result.stderr
    db = open_session(session)
    assert db.execute("SELECT status FROM images").fetchone() == ("no-path",)
    assert db.execute("SELECT SUM(count) FROM unmapped_samples").fetchone(
        ) == (4,)


def test_garbage_is_counted_and_skipped(coprofd, test_image, tmp_path):
    image = test_image("overlays.elf")
    clean = stream_of(image, identity(image), groups=40)
    rng = random.Random(8)
    damaged = bytearray()
    for part in clean.parts:
        damaged += part
        if rng.random() < 0.2:
            damaged += bytes(rng.randrange(256) for _ in range(rng.randrange(1,
                                                                          30)))
    stream = tmp_path / "damaged.bin"
    stream.write_bytes(bytes(damaged))
    session = str(tmp_path / "session")
    result = coprofd("--replay", stream, "--session-dir", session)
    assert result.returncode == 0, result.stderr
    db = open_session(session)
    errors = db.execute("SELECT SUM(count) FROM decode_errors").fetchone()[0]
    assert errors > 0
    assert "errors=%d " % errors in result.stdout
    meta = dict(db.execute("SELECT key, value FROM session"))
    assert meta["stream.skipped_bytes"] > 0 and meta["stream.resyncs"] > 0
    stored = sum(db.execute(
        "SELECT IFNULL(SUM(count), 0) FROM %s" % table).fetchone()[0]
        for table in ("samples", "ambiguous_samples", "unmapped_samples",
                      "orphan_samples"))
    assert stored == meta["stream.samples"]
    assert stored > clean.samples // 2
    offsets = [o for (o,) in db.execute("SELECT stream_offset FROM error_log")]
    assert offsets == sorted(offsets) and all(0 <= o < len(damaged)
                                              for o in offsets)


def test_random_bytes_only(coprofd, tmp_path):
    stream = tmp_path / "noise.bin"
    stream.write_bytes(random.Random(3).randbytes(200_000))
    session = str(tmp_path / "session")
    result = coprofd("--replay", stream, "--session-dir", session)
    assert result.returncode == 0, result.stderr
    db = open_session(session)
    assert db.execute("SELECT SUM(count) FROM decode_errors").fetchone()[0] > 0


# ---- arguments and files ----------------------------------------------------

def test_help_reads_like_a_manual(coprofd):
    result = coprofd("--help")
    assert result.returncode == 0
    for word in ("--replay", "--socket", "--session-dir", "--event-log",
                 "SIGHUP", "SIGKILL", "Exit status"):
        assert word in result.stdout


@pytest.mark.parametrize("args, message", [
    ([], "--session-dir is required"),
    (["--session-dir", "d"], "one of --replay"),
    (["--session-dir", "d", "--replay", "a", "--socket", "b"],
     "only one input"),
    (["--session-dir", "d", "--replay", "a", "--flush-interval", "0"],
     "not 1..1000 ms"),
    (["--session-dir", "d", "--replay", "a", "--flush-interval", "2000"],
     "not 1..1000 ms"),
    (["--session-dir", "d", "--replay", "a", "--timeline-ms", "70000"],
     "not 0..60000 ms"),
    (["--session-dir", "d", "--input-fd", "x"], "not a descriptor"),
    (["--session-dir", "d", "--replay", "a", "--ready-fd", "x"],
     "--ready-fd x: not a descriptor open for writing"),
    (["--session-dir", "d", "--replay", "a", "extra"], "unexpected argument"),
    (["--session-dir", "", "--replay", "a"], "--session-dir '': an empty"),
])
def test_usage_errors(coprofd, tmp_path, args, message):
    result = coprofd(*args, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert os.listdir(tmp_path) == []


def with_pipe_end(coprofd, which, *args):
    """coprofd run with one end of a new pipe (0: reading, 1: writing)
    passed, its number put where an argument is None."""
    ends = os.pipe()
    try:
        return ends[which], coprofd(
            *[ends[which] if a is None else a for a in args],
            pass_fds=(ends[which],), timeout=60)
    finally:
        for end in ends:
            os.close(end)


def test_write_only_descriptor(coprofd, tmp_path):
    """--input-fd naming the writing end of a pipe: one line, at once
    (it used to wait forever for a stream that could never come)."""
    writing, result = with_pipe_end(coprofd, 1, "--input-fd", None,
                                    "--session-dir", tmp_path / "s")
    assert result.returncode == 1
    assert result.stderr == ("coprofd: %d: cannot read: open for writing "
                             "only\n" % writing)


def test_read_only_ready_descriptor(coprofd, tmp_path):
    """--ready-fd naming the reading end of a pipe: a usage error, before
    any session is made."""
    reading, result = with_pipe_end(coprofd, 0, "--replay",
                                    tmp_path / "nothing.bin", "--ready-fd",
                                    None, "--session-dir", tmp_path / "s")
    assert result.returncode == 2
    assert result.stderr == ("coprofd: --ready-fd %d: not a descriptor open "
                             "for writing\n" % reading)
    assert not os.path.exists(tmp_path / "s")


def test_missing_stream(coprofd, tmp_path):
    result = coprofd("--replay", tmp_path / "nothing.bin", "--session-dir",
                     tmp_path / "s")
    assert result.returncode == 1
    assert result.stderr == ("coprofd: %s: cannot open: No such file or "
                             "directory\n" % (tmp_path / "nothing.bin"))


def test_no_socket(coprofd, tmp_path):
    result = coprofd("--socket", tmp_path / "none.sock", "--session-dir",
                     tmp_path / "s")
    assert result.returncode == 1
    assert "none.sock: cannot connect: " in result.stderr
    assert result.stderr.count("\n") == 1


def test_existing_session(coprofd, test_image, tmp_path):
    image = test_image("overlays.elf")
    w = stream_of(image, identity(image), groups=2)
    result, session = replay(coprofd, w, tmp_path)
    assert result.returncode == 0
    again, _ = replay(coprofd, w, tmp_path)
    assert again.returncode == 1
    assert again.stderr == ("coprofd: %s: a session is already there "
                            "(--overwrite replaces it)\n" % session)
    again, _ = replay(coprofd, w, tmp_path, "--overwrite")
    assert again.returncode == 0
    db = open_session(session)
    assert db.execute("SELECT COUNT(*) FROM contexts").fetchone() == (3,)


def test_session_dir_not_writable(coprofd, test_image, tmp_path):
    image = test_image("overlays.elf")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    stream = tmp_path / "stream.bin"
    stream.write_bytes(stream_of(image, identity(image), groups=1).bytes())
    result = coprofd("--replay", stream, "--session-dir", blocker / "s")
    assert result.returncode == 1
    assert result.stderr.startswith("coprofd: %s" % (blocker / "s"))
    assert result.stderr.count("\n") == 1


def extremes_stream(image, ident, offset, size):
    """One context whose CONTEXT record names image_offset offset and an
    image of size bytes, with samples and a stall of 2^64 - 1 ns."""
    w = Writer()
    w.start()
    forged = dict(ident, size=size)
    w.image(image, forged)
    w.record("context", slot=0, pid=10, tid=100, context_id=1,
             object_id=2**64 - 1, image_offset=offset, cycle=2**64 - 1,
             **forged)
    w.sample(0, 0x10, 5)
    w.stall(0, 1, 2**64 - 1)
    w.time(0, 100, 1000)
    w.stop()
    return w


@pytest.mark.parametrize("offset, size, field, value", [
    (2**63, None, "image offset", 2**63),
    (2**64 - 2, None, "image offset", 2**64 - 2),
    (0, 2**63 + 5, "image file size", 2**63 + 5),
])
def test_64_bit_extremes_are_never_stored_negative(coprofd, coprof_bin,
                                                   test_image, tmp_path,
                                                   offset, size, field,
                                                   value):
    """A CONTEXT whose image offset or size is 2^63 or more: the image is
    unusable (its samples kept raw), the values are stored clamped to
    2^63 - 1 with an out-of-range error counted, and copreport reads the
    session instead of refusing it whole."""
    image = test_image("overlays.elf")
    ident = identity(image)
    w = extremes_stream(image, ident, offset, size or ident["size"])
    result, session = replay(coprofd, w, tmp_path)
    assert result.returncode == 0, result.stderr
    db = open_session(session)
    row = db.execute("SELECT image_offset, size, status, message FROM "
                     "images").fetchone()
    assert row[0] >= 0 and row[1] >= 0
    assert row[2] == "unreadable"
    assert row[3] == "the stream's %s %d is out of range (2^63 or more)" % (
        field, value)
    assert db.execute("SELECT count FROM decode_errors WHERE kind = "
                      "'out-of-range'").fetchone() == (2,)
    assert db.execute("SELECT MIN(ns) FROM stalls").fetchone()[0] >= 0
    assert db.execute("SELECT SUM(count) FROM unmapped_samples WHERE "
                      "reason = 'no-image'").fetchone() == (5,)
    db.close()
    report = subprocess.run([coprof_bin("copreport"), "-d", session],
                            capture_output=True, text=True, timeout=120)
    assert report.returncode == 0, report.stderr
