"""coprof archive / copreport archive, and copreport html.

Archive: a session of knob recorded from a copy of knob.elf is archived
by `coprof archive`, then the session and the program are removed; the
report, annotate and export from the archive give the same numbers and
names.  An image the session's cache lacks is taken from its file while
that is there.  Bad archives (not a tar, a member outside session/, a
link) are refused in one line.

HTML: the page of the shared host-pipeline session is loaded from the
file system by headless Chromium (Debian's chromium): its DOM shows the
load handler ran, the timeline picture decoded, the profile's rows and
the hot functions' instructions are there, and Chromium logged no
console message; the same check run on a page with a script error
catches it.
"""

import io
import json
import os
import re
import shutil
import subprocess
import tarfile

import pytest

from coprof_report.session import content_hash


def _json(copreport, *args):
    return json.loads(copreport("--format", "json", *args,
                                check=True).stdout)


def _numbers(report):
    """What a report says, without where it was read from."""
    return (report["totals"],
            [(r["image"], r["overlay"], r["symbol"], r["samples"],
              r["percent"], r["file_offset_lo"]) for r in report["rows"]],
            [(c["id"], c["pid"], c["tid"], c["samples"])
             for c in report["contexts"]])


@pytest.fixture
def moved_session(tmp_path, record_session, build_dir):
    """A knob session recorded from a copy of knob.elf: (session, elf)."""
    elf = tmp_path / "prog" / "knob.elf"
    elf.parent.mkdir()
    shutil.copy(os.path.join(build_dir, "tests", "report", "knob.elf"),
                str(elf))
    host = os.path.join(build_dir, "tests", "cop-host")
    return record_session(tmp_path / "session", [host, elf], seed=21), \
        str(elf)


def test_archive_reads_back_without_the_originals(moved_session, coprof_bin,
                                                  copreport, tmp_path):
    session, elf = moved_session
    before = _json(copreport, "-d", session)
    ann_before = copreport("annotate", "-d", session, "steady_add",
                           check=True).stdout
    out = tmp_path / "run.coprof.tar.gz"
    p = subprocess.run([coprof_bin("coprof"), "archive", "-d", session, "-o",
                        str(out)], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert os.stat(str(out)).st_mode & 0o777 == 0o600
    shutil.rmtree(session)
    shutil.rmtree(os.path.dirname(elf))
    after = _json(copreport, "-d", out)
    assert _numbers(after) == _numbers(before)
    assert after["session"] == str(out)
    assert after["image_warnings"] == []
    ann_after = copreport("annotate", "-d", out, "steady_add",
                          check=True).stdout
    strip = lambda t: t.split("\n", 1)[1]       # the title names the path
    assert strip(ann_after) == strip(ann_before)
    folded = tmp_path / "f"
    copreport("export", "-d", out, "--format", "folded", "-o", folded,
              check=True)
    assert sum(int(l.rsplit(" ", 1)[1]) for l in open(str(folded))) == \
        before["totals"]["samples"]


def test_archive_takes_an_uncached_image_from_its_file(
        moved_session, copreport, tmp_path):
    session, elf = moved_session
    before = _json(copreport, "-d", session)
    for name in os.listdir(os.path.join(session, "images")):
        os.unlink(os.path.join(session, "images", name))
    out = tmp_path / "a.tar.gz"
    copreport("archive", "-d", session, "-o", out, check=True)
    with open(elf, "rb") as f:
        want = "session/images/%s-0.elf" % content_hash(f.read())
    os.unlink(elf)
    after = _json(copreport, "-d", out)
    assert _numbers(after) == _numbers(before)
    with tarfile.open(str(out)) as t:
        names = sorted(t.getnames())
    assert names == [want, "session/session.db"]


def test_archive_of_embedded_images(real_session, copreport, report_json,
                                    tmp_path):
    out = tmp_path / "real.tar.gz"
    copreport("archive", "-d", real_session.dir, "-o", out, check=True)
    with tarfile.open(str(out)) as t:
        images = [n for n in t.getnames() if n.startswith("session/images/")]
    assert len(images) == 3
    assert _numbers(_json(copreport, "-d", out)) == _numbers(report_json())


def _tar(path, members):
    with tarfile.open(str(path), "w:gz") as t:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "link":
                info.type = tarfile.SYMTYPE
                info.linkname = "/etc/passwd"
                t.addfile(info)
            else:
                info.size = 4
                t.addfile(info, io.BytesIO(b"data"))


@pytest.mark.parametrize("members,reason", [
    ([("session/../../evil", "file")], "is not part of a session"),
    ([("session/images/x.elf", "link")], "is not a regular file"),
    ([("session/images/x.elf", "file")], "no session/session.db"),
])
def test_bad_archives_refused(copreport, tmp_path, members, reason):
    path = tmp_path / "bad.tar.gz"
    _tar(path, members)
    p = copreport("-d", path)
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith("copreport: %s: " % path) and reason in \
        p.stderr
    assert not (tmp_path / "evil").exists()


def test_not_an_archive(copreport, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    p = copreport("-d", path)
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert "not a coprof archive" in p.stderr


def test_coprof_archive_usage(coprof_bin, tmp_path):
    p = subprocess.run([coprof_bin("coprof"), "archive", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "oparchive" in p.stdout
    p = subprocess.run([coprof_bin("coprof"), "archive", "-d",
                        str(tmp_path / "none")], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 1 and p.stderr.count("\n") == 1


# --- html ---------------------------------------------------------------

def _chromium(page, tmp_path):
    """(DOM, console lines) of page loaded by headless Chromium."""
    exe = shutil.which("chromium")
    assert exe, "chromium is missing: make deps installs it"
    p = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu",
         "--user-data-dir=%s" % (tmp_path / "chromium"),
         "--enable-logging=stderr", "--v=0", "--dump-dom",
         "file://%s" % os.path.abspath(str(page))],
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    console = [l for l in p.stderr.splitlines() if ":CONSOLE" in l]
    return p.stdout, console


def test_console_errors_are_caught(tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>undefined_call();"
                   "</script></body></html>")
    _, console = _chromium(bad, tmp_path)
    assert console and "undefined_call" in console[0]


def test_html_renders_in_chromium(real_session, copreport, report_json,
                                  tmp_path):
    out = tmp_path / "report"
    copreport("html", "-d", real_session.dir, "-o", out, "--top", "3",
              check=True)
    assert sorted(os.listdir(str(out))) == ["index.html", "timeline.png"]
    with open(str(out / "timeline.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    dom, console = _chromium(out / "index.html", tmp_path)
    assert console == []
    assert re.search(r"<body[^>]*data-timeline=\"loaded\"", dom)
    assert re.search(r"<body[^>]*data-rendered=\"yes\"", dom)
    report = report_json()
    table = dom[dom.index("<table id=\"profile\">"):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr><td class=\"n\">(\d+)</td>", table)
    assert [int(n) for n in rows] == [r["samples"] for r in report["rows"]]
    assert len(re.findall(r"<table class=\"annotate\">", dom)) == 3
    hot = sorted(report["rows"], key=lambda r: -r["samples"])[0]
    assert re.search(r"%s( \[%s\])?: %d samples" % (
        hot["symbol"], re.escape(hot["overlay"] or ""), hot["samples"]), dom)
    assert "src=\"data:image/png;base64," in dom
    assert "http:" not in dom and "https:" not in dom


def test_html_errors(real_session, copreport, tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    p = copreport("html", "-d", real_session.dir, "-o", f)
    assert p.returncode == 1 and p.stderr == \
        "copreport: %s: not a directory\n" % f
    p = copreport("html", "-d", real_session.dir, "-o", tmp_path / "x",
                  "--top", "-1")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
