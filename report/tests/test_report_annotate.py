"""copreport annotate: per-instruction counts, source lines, overlays.

On the shared host-pipeline session: every annotated function's
instructions sum to its row of the report; overlay functions that share
local-store addresses are annotated apart, each from its own bytes (its
file offsets inside its overlay's section, disassembly of its own code).
On knob (report/tests/knob: loops of one basic block each): the hottest
instruction of each loop function is inside the loop, between the
backward branch and its target; source lines come from DWARF; the
per-source-line view sums to the function's samples.  An image without
debug information is annotated and says why there is no source.
"""

import json
import os
import re

import pytest

INSN = re.compile(r"^\s*(\d+)\s+([\d.]+)%\s+([0-9a-f]{8})\s+([0-9a-f]{8})"
                  r"\s+(\S.*)$")


def _annotate_json(copreport, session, *args):
    p = copreport("annotate", "-d", session, "--format", "json", *args,
                  check=True)
    return json.loads(p.stdout)


def _key(image, overlay, symbol):
    return (image, overlay or None, symbol)


def test_instructions_sum_to_the_function_row(real_session, copreport,
                                              report_json):
    doc = _annotate_json(copreport, real_session.dir)
    rows = {_key(r["image"], r["overlay"], r["symbol"]): r["samples"]
            for r in report_json()["rows"] if r["kind"] == "exact" and
            not r["symbol"].startswith("[")}
    seen = {}
    for f in doc["functions"]:
        assert sum(i["samples"] for i in f["instructions"]) == f["samples"]
        seen[_key(f["image"], f["overlay"], f["symbol"])] = f["samples"]
    assert seen == rows
    samples = [f["samples"] for f in doc["functions"]]
    assert samples == sorted(samples, reverse=True)     # hottest first


def test_text_is_one_line_per_instruction(real_session, copreport,
                                          report_json):
    p = copreport("annotate", "-d", real_session.dir, "stage_denoise",
                  check=True)
    counts = [int(m.group(1)) for m in map(INSN.match,
                                           p.stdout.splitlines()) if m]
    row = [r for r in report_json()["rows"]
           if r["symbol"] == "stage_denoise"][0]
    assert sum(counts) == row["samples"]
    assert counts == sorted(counts, reverse=True)       # --order=samples
    doc = _annotate_json(copreport, real_session.dir, "stage_denoise")
    assert len(counts) == len(doc["functions"][0]["instructions"])


def test_overlays_at_one_address_annotated_apart(real_session, copreport):
    doc = _annotate_json(copreport, real_session.dir, "blur_picture",
                         "crc16_bitwise", "histogram_median")
    funcs = {f["symbol"]: f for f in doc["functions"]}
    assert set(funcs) == {"blur_picture", "crc16_bitwise",
                          "histogram_median"}
    spans = {}
    for name, f in funcs.items():
        assert f["section"] == f["overlay"] and \
            f["overlay"].startswith(".overlay.")
        insns = f["instructions"]
        offsets = [i["file_offset"] for i in insns]
        assert offsets == sorted(offsets) and offsets[0] == f["file_offset"]
        assert offsets[-1] < f["file_offset"] + f["size"]
        addrs = [i["address"] for i in insns]
        assert addrs[0] == f["address"]
        spans[name] = (f["address"], f["address"] + f["size"])
        # its own bytes: the instruction text, not another overlay's
        assert any("<%s+" % name in i["instruction"] for i in insns
                   if "<" in i["instruction"])
    # region 1: their address ranges overlap, their file offsets do not
    lo = max(s[0] for s in spans.values())
    hi = min(s[1] for s in spans.values())
    assert lo < hi
    offs = sorted((f["file_offset"], f["file_offset"] + f["size"])
                  for f in funcs.values())
    assert all(a[1] <= b[0] for a, b in zip(offs, offs[1:]))


def _loop(insns):
    """(target, branch) addresses of the function's backward branch."""
    for i in insns:
        m = re.match(r"^b\w*\s.*?([0-9a-f]+) <", i["instruction"])
        if m and int(m.group(1), 16) < i["address"]:
            return int(m.group(1), 16), i["address"]
    return None


@pytest.mark.parametrize("name", ["steady_add", "steady_xor", "steady_rot",
                                  "steady_sub", "knob_work"])
def test_hottest_instruction_is_in_the_loop(knob, copreport, name):
    doc = _annotate_json(copreport, knob.a, "--order=address", name)
    (f,) = doc["functions"]
    insns = f["instructions"]
    loop = _loop(insns)
    assert loop, [i["instruction"] for i in insns]
    hottest = max(insns, key=lambda i: i["samples"])
    assert loop[0] <= hottest["address"] <= loop[1]
    in_loop = sum(i["samples"] for i in insns
                  if loop[0] <= i["address"] <= loop[1])
    assert in_loop >= 0.9 * f["samples"]
    # the loop's instructions come from the loop's source lines
    assert f["source"].endswith("report/tests/knob/knob.c")
    assert f["no_source"] is None
    body = {i["source_line"] for i in insns
            if loop[0] <= i["address"] <= loop[1]}
    assert body and None not in body


def test_address_order_interleaves_source(knob, copreport):
    p = copreport("annotate", "-d", knob.a, "--order=address", "steady_add",
                  check=True)
    lines = p.stdout.splitlines()
    src = [i for i, line in enumerate(lines)
           if re.match(r"^\s+knob\.c:\d+: ", line)]
    assert src, p.stdout
    assert "x = x * 1103515245u + 12345u;" in p.stdout
    addrs = [int(m.group(3), 16) for m in map(INSN.match, lines) if m]
    assert addrs == sorted(addrs)


def test_source_view_sums_lines(knob, copreport):
    p = copreport("annotate", "-d", knob.a, "--source", "knob.c",
                  "--format", "json", check=True)
    doc = json.loads(p.stdout)
    (f,) = doc["files"]
    assert f["file"].endswith("report/tests/knob/knob.c")
    by_line = {r["line"]: r for r in f["lines"]}
    assert sum(r["samples"] for r in f["lines"]) == f["samples"]
    funcs = _annotate_json(copreport, knob.a)["functions"]
    from_knob = sum(i["samples"] for fn in funcs for i in fn["instructions"]
                    if (i["source_file"] or "").endswith("knob.c"))
    assert f["samples"] == from_knob
    hot = max(f["lines"], key=lambda r: r["samples"])
    assert "for" in hot["text"] or "x" in hot["text"]
    assert len(by_line) == len(open(f["file"]).read().splitlines())
    text = copreport("annotate", "-d", knob.a, "--source", "knob.c",
                     check=True).stdout
    assert re.search(r"^\s+\d+\s+[\d.]+%\s+\d+\s+x = x \* 1103515245u",
                     text, re.M)


def test_no_debug_info_still_annotates(knob, copreport):
    doc = _annotate_json(copreport, knob.nodebug, "steady_add")
    (f,) = doc["functions"]
    assert f["source"] is None
    assert "no debug information" in f["no_source"]
    assert sum(i["samples"] for i in f["instructions"]) == f["samples"] > 0
    assert all(i["source_line"] is None for i in f["instructions"])
    text = copreport("annotate", "-d", knob.nodebug, "steady_add",
                     check=True).stdout
    assert "no source: the image has no debug information" in text
    assert any(INSN.match(line) for line in text.splitlines())


def test_csv_matches_json(knob, copreport):
    p = copreport("annotate", "-d", knob.a, "--format", "csv", "knob_work",
                  check=True)
    lines = p.stdout.splitlines()
    assert lines[0].startswith("image,overlay,symbol,address,file_offset,")
    doc = _annotate_json(copreport, knob.a, "knob_work")
    assert len(lines) - 1 == len(doc["functions"][0]["instructions"])


def test_annotate_errors(knob, copreport):
    p = copreport("annotate", "-d", knob.a, "no_such_function")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith("copreport: no_such_function: ")
    p = copreport("annotate", "-d", knob.a, "--source", "nothere.c")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    p = copreport("annotate", "-d", knob.a + "-missing")
    assert p.returncode == 1 and p.stderr.count("\n") == 1


def test_embedded_image_without_cache(session_copy, copreport, tmp_path):
    """With the cache gone, an image embedded in the host executable is
    disassembled from a private copy of its bytes, removed afterwards:
    the same annotation as from the cache."""
    cached = _annotate_json(copreport, session_copy, "crc16_bitwise")
    for name in os.listdir(os.path.join(session_copy, "images")):
        os.unlink(os.path.join(session_copy, "images", name))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    p = copreport("annotate", "-d", session_copy, "--format", "json",
                  "crc16_bitwise", env=env, check=True)
    assert json.loads(p.stdout)["functions"] == cached["functions"]
    assert os.listdir(str(tmp)) == []
