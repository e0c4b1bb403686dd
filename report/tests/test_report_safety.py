"""copreport against the other users of the machine and against the files
a session names (issue 32, items 2, 4 and 6; safefile.py).

Outputs: every -o (the report, timeline and its --png, annotate, export,
diff, callgraph, archive, html's directory) refuses a symbolic link another
user planted at the name or in a parent, leaves its target untouched, and
replaces an ordinary file by a new private one (0600) without writing
through its other hard links.  The other user is `nobody`: the tests that
need one run as root (as in CI) and are skipped otherwise.

Inputs: a FIFO or /dev/zero where the session names an image's file, or a
FIFO in place of a cached image, is a one-line warning naming it and the
reason, and the rest of the report is made (a FIFO would hang the report,
/dev/zero exhaust its memory).  A cached image changed in place (same
size) once the file it was found in is gone is detected by the image's
own content hash (images.image_hash), and its samples are shown without
symbols instead of with wrong ones.
"""

import json
import os
import resource
import sqlite3
import stat
import subprocess

import pytest

NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to "
                                "make files of another user (nobody)")

# subcommand -> its arguments before -o, for the session d
OUTPUTS = {
    "report": lambda d: ["-d", d],
    "timeline": lambda d: ["timeline", "-d", d],
    "annotate": lambda d: ["annotate", "-d", d],
    "export": lambda d: ["export", "-d", d, "--format", "folded"],
    "callgraph": lambda d: ["callgraph", "-d", d],
    "diff": lambda d: ["diff", d, d],
    "archive": lambda d: ["archive", "-d", d],
}


@pytest.fixture
def public(tmp_path):
    """(pub, victim): a directory of nobody's (as /tmp/pub of the issue)
    and a file of root's that nobody would like overwritten."""
    pub = tmp_path / "pub"
    pub.mkdir()
    os.chown(str(pub), NOBODY, NOBODY)
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    return pub, victim


def plant(link, target):
    """A symbolic link of nobody's at link."""
    os.symlink(str(target), str(link))
    os.lchown(str(link), NOBODY, NOBODY)


def one_line(p):
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 1, p.stderr
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


@needs_root
@pytest.mark.parametrize("sub", sorted(OUTPUTS))
def test_a_planted_link_at_the_output_is_refused(sub, real_session,
                                                 copreport, public):
    pub, victim = public
    plant(pub / "rep.txt", victim)
    p = copreport(*OUTPUTS[sub](real_session.dir), "-o", pub / "rep.txt")
    line = one_line(p)
    assert "rep.txt" in line and "uid %d" % NOBODY in line, line
    assert victim.read_text() == "root's file\n"
    assert os.path.islink(str(pub / "rep.txt"))


@needs_root
@pytest.mark.parametrize("sub", ["report", "timeline", "export"])
def test_a_planted_parent_link_is_not_followed(sub, real_session, copreport,
                                               public, tmp_path):
    pub, _ = public
    target = tmp_path / "roots"
    target.mkdir()
    plant(pub / "parent", target)
    p = copreport(*OUTPUTS[sub](real_session.dir), "-o",
                  pub / "parent" / "rep.txt")
    line = one_line(p)
    assert "parent" in line and "refusing to follow" in line, line
    assert os.listdir(str(target)) == []


@needs_root
def test_timeline_png_and_html_refuse_planted_links(real_session, copreport,
                                                    public, tmp_path):
    pub, victim = public
    plant(pub / "t.png", victim)
    p = copreport("timeline", "-d", real_session.dir, "-o",
                  tmp_path / "t.json", "--png", pub / "t.png")
    assert "uid %d" % NOBODY in one_line(p)
    target = tmp_path / "roots"
    target.mkdir()
    plant(pub / "html", target)
    p = copreport("html", "-d", real_session.dir, "-o", pub / "html")
    assert "html" in one_line(p)
    assert victim.read_text() == "root's file\n"
    assert os.listdir(str(target)) == []


def test_an_existing_output_is_replaced_not_written_through(
        real_session, copreport, tmp_path):
    out = tmp_path / "rep.txt"
    out.write_text("old\n")
    os.chmod(str(out), 0o644)
    os.link(str(out), str(tmp_path / "other-link"))
    copreport("-d", real_session.dir, "-o", out, check=True)
    assert (tmp_path / "other-link").read_text() == "old\n"
    assert "samples" in out.read_text()
    assert stat.S_IMODE(os.stat(str(out)).st_mode) == 0o600
    assert sorted(os.listdir(str(tmp_path))) == ["other-link", "rep.txt"]


def test_a_failed_report_leaves_the_output_as_it_was(copreport, tmp_path):
    out = tmp_path / "rep.txt"
    out.write_text("old\n")
    p = copreport("-d", tmp_path / "no-session", "-o", out)
    assert p.returncode == 1
    assert out.read_text() == "old\n"
    assert os.listdir(str(tmp_path)) == ["rep.txt"]


def test_a_missing_parent_is_one_line(real_session, copreport, tmp_path):
    p = copreport("-d", real_session.dir, "-o", tmp_path / "no" / "r.txt")
    line = one_line(p)
    assert str(tmp_path / "no") in line and "no such directory" in line


def test_dev_null_and_stdout_are_written_in_place(real_session, copreport):
    copreport("-d", real_session.dir, "-o", "/dev/null", check=True)
    p = copreport("-d", real_session.dir, "-o", "/dev/stdout", check=True)
    assert "samples" in p.stdout
    assert os.path.exists("/dev/null") and \
        stat.S_ISCHR(os.stat("/dev/null").st_mode)


# --- files a session names ----------------------------------------------

def _set_image(d, **values):
    db = sqlite3.connect(os.path.join(d, "session.db"))
    sets = ", ".join("%s = ?" % k for k in values)
    db.execute("UPDATE images SET %s WHERE short_name = 'pipeline'" % sets,
               tuple(values.values()))
    db.commit()
    db.close()


def _cache(d):
    db = sqlite3.connect(os.path.join(d, "session.db"))
    (cache,), = db.execute("SELECT cache_file FROM images WHERE short_name"
                           " = 'pipeline'")
    db.close()
    return os.path.join(d, cache)


def _limited():
    # an endless read fails fast instead of swapping the machine
    resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))


def _report(coprof_bin, d, *args):
    """copreport's JSON report; a FIFO read would hang it: the timeout
    ends the test as a failure."""
    return subprocess.run([coprof_bin("copreport"), "-d", d, "--format",
                           "json"] + list(args), capture_output=True,
                          text=True, timeout=60, preexec_fn=_limited)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
def test_a_non_regular_image_path_is_a_warning(kind, session_copy,
                                               coprof_bin, tmp_path):
    os.unlink(_cache(session_copy))
    if kind == "fifo":
        path = str(tmp_path / "host-program")
        os.mkfifo(path)
        why = "a FIFO, not a regular file"
    else:
        path = "/dev/zero"
        why = "a character device, not a regular file"
    _set_image(session_copy, path=path)
    p = _report(coprof_bin, session_copy)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    warn = [w for w in p.stderr.splitlines() if path in w]
    assert len(warn) == 1 and why in warn[0], p.stderr
    assert json.loads(p.stdout)["rows"], "the rest of the report is made"


def test_a_fifo_in_the_cache_is_a_warning(session_copy, coprof_bin):
    cache = _cache(session_copy)
    os.unlink(cache)
    os.mkfifo(cache)
    _set_image(session_copy, path="/gone/host-pipeline")
    for args in ([], ["annotate"]):
        if args:
            p = subprocess.run([coprof_bin("copreport"), "annotate", "-d",
                                session_copy], capture_output=True,
                               text=True, timeout=60, preexec_fn=_limited)
        else:
            p = _report(coprof_bin, session_copy)
        assert p.returncode == 0, p.stderr
        warn = [w for w in p.stderr.splitlines() if cache in w]
        assert len(warn) == 1 and "a FIFO" in warn[0], p.stderr


def test_a_cache_changed_in_place_is_detected(session_copy, coprof_bin):
    cache = _cache(session_copy)
    with open(cache, "rb") as f:
        data = f.read()
    assert b"stage_" in data
    with open(cache, "r+b") as f:
        f.write(data.replace(b"stage_", b"stXge_"))
    _set_image(session_copy, path="/gone/host-pipeline")
    p = _report(coprof_bin, session_copy)
    assert p.returncode == 0, p.stderr
    assert "stXge_" not in p.stdout
    warn = [w for w in p.stderr.splitlines() if cache in w]
    assert len(warn) == 1 and "the cache was changed" in warn[0], p.stderr


def test_symbols_come_from_the_bytes_that_were_checked(
        session_copy, real_session, tmp_path, monkeypatch, capsys):
    """copreport hash-checks the file the image was found in, then reads
    its symbols from the bytes it checked: a file swapped for another (same
    size, names changed) right after the check cannot feed them.  The swap
    is made by a hook on the check (session._checked_file), in process."""
    from coprof_report import cli, session, symbols
    host = tmp_path / "host-pipeline"
    data = open(real_session.host, "rb").read()
    assert b"stage_" in data
    host.write_bytes(data)
    os.unlink(_cache(session_copy))
    _set_image(session_copy, path=str(host))
    checked = session._checked_file

    def check_then_swap(path, want_hash, want_size):
        result = checked(path, want_hash, want_size)
        if path == str(host):
            swapped = tmp_path / "swapped"
            swapped.write_bytes(data.replace(b"stage_", b"stXge_"))
            os.rename(str(swapped), path)
        return result

    monkeypatch.setattr(session, "_checked_file", check_then_swap)
    monkeypatch.setattr(symbols, "_symbolizers", {})
    assert cli.main(["-d", session_copy, "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert host.read_bytes() != data, "the hook swapped the file"
    names = [r.get("symbol") or "" for r in json.loads(out)["rows"]]
    assert any(n.startswith("stage_") for n in names), names
    assert not any("stXge_" in n for n in names), names


def test_a_hard_link_swapped_in_after_the_look_is_not_written(
        tmp_path, monkeypatch):
    """safefile.output() writes the user's own file with one link in
    place; a hard link to another file swapped in at the name after that
    look (a hook on _how) is seen on the opened file, and the name is
    replaced: the other file keeps its bytes."""
    from coprof_report import safefile
    out = tmp_path / "report.txt"
    out.write_text("an older report\n")
    victim = tmp_path / "victim"
    victim.write_text("another file of the user's\n")
    how = safefile._how

    def look_then_swap(dirfd, name, path):
        result = how(dirfd, name, path)
        assert result == "place"
        os.unlink(str(out))
        os.link(str(victim), str(out))
        return result

    monkeypatch.setattr(safefile, "_how", look_then_swap)
    with safefile.output(str(out)) as f:
        f.write("the report\n")
    assert victim.read_text() == "another file of the user's\n"
    assert out.read_text() == "the report\n"
    assert os.stat(str(out)).st_nlink == 1


def test_a_users_own_file_is_written_in_place(real_session, copreport,
                                              tmp_path):
    """A file of the user's with one link is written where it is, so a
    reader that opened it first (a temporary file handed to the tool)
    reads the report; it is made 0600."""
    out = tmp_path / "rep.txt"
    out.write_text("old\n")
    os.chmod(str(out), 0o644)
    with open(str(out)) as reader:
        copreport("-d", real_session.dir, "-o", out, check=True)
        assert "samples" in reader.read()
    assert stat.S_IMODE(os.stat(str(out)).st_mode) == 0o600
