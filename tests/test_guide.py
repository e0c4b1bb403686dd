"""The README's "Profile your own program", run exactly as it is written.

The section's code blocks are the guide: a ```c or ```make block whose
first line names a file (`/* main.c — ...` or `# Makefile — ...`) is that
file of the user's directory; the ```sh blocks are the commands, run in
order by one shell.  The first block starts in the directory that holds
the coprof tree as `coprof` (here a link to this tree) and installs into
$HOME/coprof; the files are put into the directory it ends in, and the
other blocks run there.  HOME is a temporary directory, so the install
prefix, the user's directory and the session are all out of the tree.
"""

import json
import os
import re
import sqlite3
import subprocess

import pytest

SOURCE = os.environ.get("COPROF_SOURCE",
                        os.path.dirname(os.path.dirname(
                            os.path.abspath(__file__))))
SECTION = "## Profile your own program"
FILE_NAME = re.compile(r"^(?:/\*|#) (\S+) — ")


def guide_blocks():
    """[(language, text)] of the section's fenced blocks, in order."""
    text = open(os.path.join(SOURCE, "README.md")).read()
    assert SECTION in text, "README.md has no section %r" % SECTION
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```(\w*)\n(.*?)^```$", section, re.M | re.S)


def guide():
    """The files {name: text} and the shell blocks [text] of the guide."""
    files, commands = {}, []
    for language, text in guide_blocks():
        if language == "sh":
            commands.append(text)
            continue
        name = FILE_NAME.match(text)
        assert name, "a %s block that names no file: %r" % (language,
                                                           text[:60])
        assert name.group(1) not in files, name.group(1)
        files[name.group(1)] = text
    return files, commands


def test_guide_is_complete():
    """The guide has a coprocessor program, a host program, a Makefile with
    an overlay variant, and commands that install, build, record, report."""
    files, commands = guide()
    assert "Makefile" in files and "host.c" in files
    assert "cop_program" in files["Makefile"]
    assert "_OVERLAYS" in files["Makefile"]
    assert "cop-embed" in files["Makefile"]
    assert "cop_context_run" in files["host.c"]
    assert any('#include "sdk/cop.h"' in t for t in files.values())
    script = "\n".join(commands)
    for command in ("make install", "coprof record", "copreport"):
        assert command in script


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """The guide run once: its files, the shell's result, its HOME."""
    files, commands = guide()
    home = tmp_path_factory.mktemp("home")
    top = tmp_path_factory.mktemp("top")
    os.symlink(SOURCE, top / "coprof")
    staged = tmp_path_factory.mktemp("files")
    for name, text in files.items():
        (staged / name).write_text(text)
    script = "set -e\n%s\ncp -- \"$GUIDE_FILES\"/* .\n%s" % (
        commands[0], "\n".join(commands[1:]))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("COPSIM_", "COPROF_", "PKG_CONFIG"))}
    env.update(HOME=str(home), GUIDE_FILES=str(staged))
    result = subprocess.run(["sh", "-c", script], cwd=top, env=env,
                            capture_output=True, text=True, timeout=1200)
    return files, result, home


def report_json(home):
    """The installed copreport's JSON report of the guide's session."""
    p = subprocess.run([str(home / "coprof/bin/copreport"), "-d",
                        str(home / "myprog/coprof_data"), "--format",
                        "json"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_guide_builds_records_and_reports(ran):
    files, result, home = ran
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"^coprof: samples=\d+ lost=0 .* contexts=4 images=2 ",
                     result.stderr, re.M), result.stderr
    assert "session complete" in result.stdout
    # the numbers, from the JSON report: a row per function and image,
    # the overlays' functions named with their overlays
    rep = report_json(home)
    places = {(r["image"], r["overlay"] or "-", r["symbol"]): r["samples"]
              for r in rep["rows"] if r["kind"] == "exact"}
    for place in (("sums", "-", "squares"), ("sums", "-", "primes"),
                  ("sums_ovl", ".overlay.squares", "squares"),
                  ("sums_ovl", ".overlay.primes", "primes")):
        assert places.get(place, 0) > 0, (place, sorted(places))
    # the text's layout (the README's copreport): the stall columns
    # after the interval, the symbol the last column, as opreport and
    # perf report have it
    assert re.search(r"^\s+samples\s+%\s+95% interval\s+wait%\s+top wait"
                     r"\s+image\s+overlay\s+symbol$", result.stdout,
                     re.M), result.stdout
    rows = re.findall(r"^\s+(\d+)\s+[\d.]+%\s+\S+\s+(?:[\d.]+%|-)\s+\S+"
                      r"\s+(\S+) \(host@0x[0-9a-f]+\)\s+(\S+)\s+(\S+)$",
                      result.stdout, re.M)
    assert {(image, ovl, symbol): int(n) for n, image, ovl, symbol in rows
            if (image, ovl, symbol) in places} == places, result.stdout


def test_guide_used_the_installed_sdk_only(ran):
    """Everything it built came from $HOME/coprof, nothing from the tree."""
    files, result, home = ran
    prefix = home / "coprof"
    user = home / "myprog"
    assert (prefix / "share/coprof/sdk/cop.mk").is_file()
    assert (prefix / "lib/coprof/cop/libcoprt.a").is_file()
    for name in files:
        assert (user / name).is_file()
    assert os.access(user / "host", os.X_OK)
    assert (user / "build/sums.elf").is_file()
    assert (user / "build/sums_ovl.elf").is_file()
    make_lines = [line for line in result.stdout.splitlines()
                  if "cop-embed" in line or line.startswith("cc ")]
    assert make_lines and all(SOURCE not in line for line in make_lines)
    assert "%s/bin/cop-embed" % prefix in result.stdout
    libs = subprocess.run(["ldd", str(user / "host")], capture_output=True,
                          text=True).stdout
    assert "%s/lib/coprof/libcop.so.1" % prefix in libs, libs
    with sqlite3.connect("file:%s?mode=ro" % (user / "coprof_data/session.db"),
                         uri=True) as db:
        (contexts,) = db.execute("SELECT count(*) FROM contexts").fetchone()
    assert contexts == 4
