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

import html
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

def _chromium(page, tmp_path, fragment="", extra=()):
    """(DOM, console lines) of page loaded by headless Chromium (at the
    URL fragment given)."""
    exe = shutil.which("chromium")
    assert exe, "chromium is missing: make deps installs it"
    p = subprocess.run(
        [exe, "--headless", "--no-sandbox", "--disable-gpu",
         "--user-data-dir=%s" % (tmp_path / "chromium"),
         "--enable-logging=stderr", "--v=0"] + list(extra) +
        ["--dump-dom", "file://%s%s" % (os.path.abspath(str(page)),
                                        fragment)],
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


def _selftest(page, tmp_path, quiet=True):
    """(result, DOM) of the page's own #selftest run in Chromium, which
    clicks through its views; a console message fails when quiet."""
    dom, console = _chromium(page, tmp_path, "#selftest", [
        "--window-size=1200,900", "--virtual-time-budget=20000"])
    assert console == [] or not quiet, console
    m = re.search(r"<body[^>]*data-selftest=\"([^\"]*)\"", dom)
    assert m, "the self-test did not finish"
    return html.unescape(m.group(1)), dom


def _no_outside_reference(dom):
    assert not re.search(r"<(script|link|img|iframe)[^>]*\b(src|href)=",
                         dom)
    assert not re.search(r"\b(src|href)=\"(https?:|//)", dom)
    assert "Content-Security-Policy\" content=\"default-src 'none';" in dom


def test_html_renders_in_chromium(real_session, copreport, report_json,
                                  tmp_path):
    out = tmp_path / "report.html"
    copreport("html", "-d", real_session.dir, "-o", out, check=True)
    assert os.stat(str(out)).st_mode & 0o777 == 0o600
    dom, console = _chromium(out, tmp_path)
    assert console == []
    assert re.search(r"<body[^>]*data-rendered=\"yes\"", dom)
    _no_outside_reference(dom)
    report = report_json()
    table = dom[dom.index("<section class=\"view\" id=\"profile\""):]
    table = table[table.index("<table class=\"profile\">"):]
    table = table[:table.index("</table>")]
    assert "<th>share</th>" in table
    rows = re.findall(r"<tr><td class=\"n\">(\d+)</td>", table)
    assert [int(n) for n in rows] == [r["samples"] for r in report["rows"]]
    links = re.findall(r"<a class=\"fn\" href=\"#(fn-\d+)\">([^<]*)</a>",
                       table)
    exact = [r for r in report["rows"] if r["kind"] == "exact"]
    assert [name for _, name in links] == [r["symbol"] for r in exact]
    for anchor, _ in links:
        assert "<section class=\"view fn\" id=\"%s\"" % anchor in dom
    hot = exact[0]
    view = dom[dom.index("id=\"%s\"" % links[0][0]):]
    view = view[:view.index("</section>")]
    assert re.search(r"%s( \[%s\])?: %d samples" % (
        hot["symbol"], re.escape(hot["overlay"] or ""), hot["samples"]), view)
    lines = re.search(r"<table class=\"lines\">.*?</table>", view,
                      re.S).group(0)
    counts = [int(n) for n in re.findall(r"<tr><td class=\"n\">(\d+)<",
                                         lines)]
    assert len(counts) > 1 and counts == sorted(counts, reverse=True)
    contexts = {c["id"] for c in report["contexts"]}
    assert len(re.findall(r"<div class=\"group\" data-group=", dom)) >= \
        len(contexts)
    assert "id=\"no-stacks\"" in dom and "--call-graph" in dom
    result, dom = _selftest(out, tmp_path)
    assert result == "pass", result
    assert "no stacks" in dom


@pytest.fixture(scope="module")
def stacks_page(coprof_bin, build_dir, tmp_path_factory):
    """The page of a calltree session recorded with --call-graph."""
    work = tmp_path_factory.mktemp("stacks-html")
    p = subprocess.run(
        [coprof_bin("coprof"), "record", "--call-graph", "-q",
         "--event=SPU_CYCLES:157", "--dither-seed=4242", "-o",
         str(work / "session"), "--",
         os.path.join(build_dir, "tests", "cop-host"),
         os.path.join(build_dir, "tests", "cop", "calltree.elf"), "3"],
        capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    page = work / "calltree.html"
    p = subprocess.run([coprof_bin("copreport"), "html", "-d",
                        str(work / "session"), "-o", str(page)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return page


DATA = re.compile(r"(<script type=\"application/json\" id=\"data\">)"
                  r"(.*?)(</script>)", re.S)


def _with_data(text, change):
    """The page text with its JSON data changed by change(data)."""
    m = DATA.search(text)
    data = json.loads(m.group(2))
    change(data)
    return text[:m.start(2)] + json.dumps(data) + text[m.end(2):]


def test_html_flame_graph(stacks_page, tmp_path):
    text = stacks_page.read_text()
    flame = json.loads(DATA.search(text).group(2))["flame"]
    assert flame["name"] == "all" and flame["children"]

    def check(node):                # a node's value holds its children's
        assert node["value"] >= sum(c["value"] for c in node["children"])
        for c in node["children"]:
            check(c)
    check(flame)
    assert "id=\"no-stacks\"" not in text
    result, dom = _selftest(stacks_page, tmp_path)
    assert result == "pass", result
    frames = int(re.search(r"(\d+) flame frames", dom).group(1))
    assert frames > 2


BREAKS = [
    # a function link that leads nowhere
    (lambda t: re.sub(r"<a class=\"fn\" href=\"#fn-1\">",
                      "<a class=\"fn\" href=\"#nowhere\">", t, count=1),
     "the function link did not show"),
    # an annotation in address order only
    (lambda t: t.replace("<tbody data-order=\"samples\">",
                         "<tbody data-order=\"samples\"><tr class=\"insn\">"
                         "<td>0</td></tr>", 1),
     "are not hottest first"),
    # the context view's groups gone
    (lambda t: t.replace("<div class=\"group\" data-group=",
                         "<div class=\"gone\" data-group="),
     "the context view has no groups"),
    # the flame graph library missing
    (lambda t: t.replace("flamegraph.default()", "flamegraph.missing()"),
     "flamegraph.missing is not a function"),
    # a timeline with no tracks
    (lambda t: _with_data(t, lambda d: d["timeline"].update(tracks=[])),
     "the timeline drew nothing"),
]


@pytest.mark.parametrize("n", range(len(BREAKS)))
def test_html_selftest_catches_a_broken_view(stacks_page, tmp_path, n):
    breaker, why = BREAKS[n]
    text = stacks_page.read_text()
    broken = breaker(text)
    assert broken != text
    page = tmp_path / "broken.html"
    page.write_text(broken)
    result, _ = _selftest(page, tmp_path, quiet=False)
    assert result.startswith("fail: ") and why in result, result


def test_html_errors(real_session, copreport, tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    p = copreport("html", "-d", real_session.dir, "-o",
                  tmp_path / "none" / "x.html")
    # the rule of paths a user names (safefile.py): one line naming the
    # missing parent, which is not created
    assert p.returncode == 1 and p.stderr == \
        "copreport: %s: %s: no such directory (a missing parent is not " \
        "created)\n" % (tmp_path / "none" / "x.html", tmp_path / "none")
    assert not (tmp_path / "none").exists()
    d = tmp_path / "dir"
    d.mkdir()
    copreport("html", "-d", real_session.dir, "-o", d, "--top", "1",
              check=True)
    assert os.listdir(str(d)) == ["index.html"]
    p = copreport("html", "-d", real_session.dir, "-o", tmp_path / "x",
                  "--top", "-1")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
