"""Symbol names that are not UTF-8 or hold control characters (issue 32,
item 5): cop-embed, copsim and coprofd accept such an image, so every
copreport subcommand must show its names without a traceback and without
letting an escape sequence reach the terminal: bytes that are not UTF-8
become U+FFFD and control characters \\xNN (symbols.printable()), in
text, JSON and HTML alike."""

import io
import json
import os
import shutil
import subprocess

import pytest
from elftools.elf.elffile import ELFFile

# overlay/'s test image: main's file offset
MAIN = 0x103c
# what "main" becomes: a byte that is not UTF-8, ESC c (a terminal reset)
# and BEL
EVIL = b"\xff\x1bc\x07"
SHOWN = "\ufffd\\x1bc\\x07"


@pytest.fixture(scope="module")
def session(new_session, test_image, tmp_path_factory):
    """A session whose one image names main EVIL."""
    d = str(tmp_path_factory.mktemp("names") / "s")
    with open(test_image, "rb") as f:
        data = f.read()
    strtab = ELFFile(io.BytesIO(data)).get_section_by_name(".strtab")
    start = strtab["sh_offset"]
    at = data.find(b"\0main\0", start, start + strtab["sh_size"])
    assert at > 0
    data = data[:at + 1] + EVIL + data[at + 5:]
    db = new_session(d, {"stream.samples": 5, "end_state": "complete",
                         "end_reason": ""})
    os.makedirs(os.path.join(d, "images"))
    with open(os.path.join(d, "images", "img.elf"), "wb") as f:
        f.write(data)
    db.execute("INSERT INTO images (id, path, image_offset, device, inode,"
               " size, hash, status, message, short_name, image_size,"
               " cache_file) VALUES (1, '/gone/x.elf', 0, 1, 2, 3, '0123',"
               " 'ok', NULL, 'ovltest', ?, 'images/img.elf')", (len(data),))
    db.execute("INSERT INTO contexts VALUES (1, 11, 100, 101, '0x10', 1, 0,"
               " 0, NULL)")
    db.execute("INSERT INTO samples VALUES (1, 1, ?, 0, 5)", (MAIN,))
    db.execute("INSERT INTO bindings VALUES (1, 0, 1, 0, 100, 2000000,"
               " 3000000, 'switch')")
    db.execute("INSERT INTO sample_timeline VALUES (1, 1, 0, ?, 5)", (MAIN,))
    db.commit()
    db.close()
    return d


def run(coprof_bin, *args):
    p = subprocess.run([coprof_bin("copreport")] + [str(a) for a in args],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in p.stderr
    return p


def clean(data):
    """No control character but newline and tab reaches the reader."""
    bad = [b for b in data if (b < 0x20 and b not in b"\n\t") or b == 0x7f]
    assert not bad, bad
    return data.decode("utf-8")


@pytest.mark.parametrize("args", [[], ["annotate"],
                                  ["annotate", "--format", "csv"]])
def test_text_shows_the_name_escaped(args, session, coprof_bin):
    cmd = args[:1] + ["-d", session] + args[1:]
    text = clean(run(coprof_bin, *cmd).stdout)
    assert SHOWN in text


@pytest.mark.parametrize("sub", ["report", "annotate"])
def test_json_holds_the_escaped_name(sub, session, coprof_bin):
    cmd = ([] if sub == "report" else [sub]) + ["-d", session, "--format",
                                                "json"]
    doc = json.loads(clean(run(coprof_bin, *cmd).stdout))
    assert json.dumps(SHOWN, ensure_ascii=False)[1:-1] in \
        json.dumps(doc, ensure_ascii=False)


def test_html_and_exports(session, coprof_bin, tmp_path):
    run(coprof_bin, "html", "-d", session, "-o", tmp_path / "h.html")
    with open(str(tmp_path / "h.html"), "rb") as f:
        page = clean(f.read())
    assert SHOWN in page
    run(coprof_bin, "export", "-d", session, "--format", "folded", "-o",
        tmp_path / "f")
    with open(str(tmp_path / "f"), "rb") as f:
        assert SHOWN in clean(f.read())
    run(coprof_bin, "annotate", "-d", session, "--source", "")
