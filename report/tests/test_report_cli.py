"""copreport's command line: every bad input is one line
"copreport: THING: reason", exit 2 for usage, 1 for runtime errors, no
traceback; --help reads like a manual; the default session directory."""

import os
import sqlite3

import pytest


def one_line(p, status, *words):
    assert p.returncode == status, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("copreport: "), lines[0]
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def both(copreport, *args, **kw):
    """The same bad input to the report and to timeline."""
    return [copreport(*args, **kw),
            copreport("timeline", *args, "-o", "/dev/null", **kw)]


def test_missing_dir(copreport, tmp_path):
    for p in both(copreport, "-d", tmp_path / "nope"):
        one_line(p, 1, str(tmp_path / "nope"), "no such directory")


def test_not_a_session(copreport, tmp_path):
    for p in both(copreport, "-d", tmp_path):
        one_line(p, 1, "not a coprof session")
    (tmp_path / "session.db").write_bytes(b"garbage, not sqlite" * 100)
    for p in both(copreport, "-d", tmp_path):
        one_line(p, 1, "not a coprof session")
    (tmp_path / "session.db").unlink()
    db = sqlite3.connect(str(tmp_path / "session.db"))
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    for p in both(copreport, "-d", tmp_path):
        one_line(p, 1, "not a coprof session", "application_id")


def test_newer_format_version(copreport, session_copy):
    db = sqlite3.connect(os.path.join(session_copy, "session.db"))
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    for p in both(copreport, "-d", session_copy):
        one_line(p, 1, "format version 2 is newer")


def test_newer_format_version_key(copreport, session_copy):
    db = sqlite3.connect(os.path.join(session_copy, "session.db"))
    db.execute("UPDATE session SET value = 7 WHERE key = 'format_version'")
    db.commit()
    db.close()
    one_line(copreport("-d", session_copy), 1, "format version 7 is newer")


@pytest.mark.parametrize("args,words", [
    (["--separate=thread"], ["--separate", "invalid choice"]),
    (["--separate"], ["--separate", "expected one argument"]),
    (["--threshold", "abc"], ["--threshold", "not a percentage"]),
    (["--threshold", "150"], ["--threshold", "between 0 and 100"]),
    (["--threshold=-1"], ["--threshold", "between 0 and 100"]),
    (["--threshold", "nan"], ["--threshold"]),
    (["--format", "xml"], ["--format", "invalid choice"]),
    (["--frobnicate"], ["--frobnicate: unrecognized argument"]),
])
def test_usage_errors(copreport, real_session, args, words):
    one_line(copreport("-d", real_session.dir, *args), 2, *words)


def test_timeline_usage(copreport, real_session):
    one_line(copreport("timeline", "-d", real_session.dir), 2,
             "--output or --png: required")
    one_line(copreport("timeline", "-d", real_session.dir, "-o", "x",
                       "--separate=none"), 2, "unrecognized")


def test_unknown_filters(copreport, real_session):
    one_line(copreport("-d", real_session.dir, "--image", "nosuch"), 2,
             "nosuch", "no such image")
    one_line(copreport("-d", real_session.dir, "--context", "999"), 2,
             "999", "no such context")
    one_line(copreport("-d", real_session.dir, "--context", "pid:1"), 2,
             "pid:1", "no such context")
    one_line(copreport("-d", real_session.dir, "--context", "x"), 2,
             "x: not a context")


def test_unwritable_output(copreport, real_session, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        bad = [tmp_path / "no" / "dir" / "x", tmp_path]
        if os.geteuid() != 0:
            bad.append(ro / "x")
        for b in bad:
            one_line(copreport("-d", real_session.dir, "-o", b), 1, str(b))
            one_line(copreport("timeline", "-d", real_session.dir, "-o", b),
                     1, str(b))
            one_line(copreport("timeline", "-d", real_session.dir, "-o",
                               tmp_path / "ok.json", "--png", b), 1, str(b))
    finally:
        ro.chmod(0o700)


def test_help_reads_like_a_manual(copreport):
    for args in ([], ["timeline"]):
        p = copreport(*args, "--help")
        assert p.returncode == 0
        for section in ("usage:", "options:", "files:", "exit status:",
                        "examples:"):
            assert section in p.stdout, (args, section)


def test_default_dir(copreport, real_session, tmp_path):
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg"),
               HOME=str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    one_line(copreport(cwd=work, env=env), 1, "coprof_data", "-d DIR")
    # copcontrol's current session
    cur = tmp_path / "xdg" / "coprof"
    cur.mkdir(parents=True)
    os.symlink(real_session.dir, str(cur / "current"))
    p = copreport(cwd=work, env=env)
    assert p.returncode == 0 and "coprof/current" in p.stdout.splitlines()[0]
    # ./coprof_data wins
    os.symlink(real_session.dir, str(work / "coprof_data"))
    p = copreport(cwd=work, env=env)
    assert p.returncode == 0
    assert p.stdout.startswith("copreport: coprof_data,")


def test_session_before_the_subcommand(real_session, copreport):
    """`copreport -d DIR annotate SYMBOL` as `copreport annotate -d DIR
    SYMBOL`: the session option may come before the subcommand."""
    before = copreport("-d", real_session.dir, "annotate", "stage_denoise",
                       check=True)
    after = copreport("annotate", "-d", real_session.dir, "stage_denoise",
                      check=True)
    assert before.stdout == after.stdout and "stage_denoise" in before.stdout
    again = copreport("--session-dir=%s" % real_session.dir, "callgraph")
    assert "unrecognized" not in again.stderr
