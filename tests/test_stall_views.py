"""The examples' waiting, end to end through the views a user reads.

`coprof record --event=SPU_CYCLES:157` (a private copsim whose reference
mode also writes the exact cycles per instruction and stall reason, as
profile_truth.record does) of examples/stream, single- and
double-buffered, and of examples/pingpong through its host program; then
copreport as a user runs it:

- `copreport --format json`: rows[].stall of the streaming function
  shows dma_wait, its share of the samples within 3.5 binomial standard
  errors (plus one sample) of the exact share of the cycles, in both
  modes, and the share falls from single_buffered to double_buffered;
- `copreport --by=reason` (text): the single_buffered/dma_wait row, its
  share on it;
- the "DMA waits by transfer" section (text and JSON `dma_waits`): the
  waits of single_buffered are at its two wait instructions, on tag 0
  (the input's get) and tag 2 (the output's put), each naming the
  cop_dma_get/cop_dma_put that issued it: the issue marker words found in
  single_buffered's code, in that order; cop.h's functions are inlined, so
  each instruction is named by the line of stream.c that called them
  (`stream.c:77 (cop_dma_get, cop.h:83)`, the lines found in stream.c),
  in the text, the JSON and `copreport annotate`;
- pingpong: main's row is mostly mailbox_wait within 3.5 sigma of the
  exact share, and `copreport annotate main` puts every mailbox-wait
  sample on a mailbox read marker, most on the read of the answer.

The markers and function ranges are read from the ELF files here
(pyelftools), not from the report.
"""

import json
import math
import os
import re
import subprocess

import pytest

import exact_counts
import profile_truth
import stall_shares

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVERY = 157
SEED = "20260129"
SIGMAS = 3.5
BLOCKS = "32"
DMA_WAIT = exact_counts.REASONS.index("dma_wait")
MAILBOX_WAIT = exact_counts.REASONS.index("mailbox_wait")
ISSUE_MARK, WAIT_MARK = 0x7c10100f, 0x7c20100f     # abi/cop-abi.h
READ_MARK = 0x7c30100f


def flags():
    return ["--event=SPU_CYCLES:%d" % EVERY, "--dither-seed=" + SEED]


@pytest.fixture(scope="module")
def recorded(build_dir, coprof_bin, tmp_path_factory):
    """recorded(NAME) records examples NAME once: stream-single,
    stream-double or pingpong."""
    commands = {
        "stream-single": [os.path.join(build_dir, "tests", "cop-host"),
                          os.path.join(build_dir, "examples", "stream.elf"),
                          "single", BLOCKS],
        "stream-double": [os.path.join(build_dir, "tests", "cop-host"),
                          os.path.join(build_dir, "examples", "stream.elf"),
                          "double", BLOCKS],
        "pingpong": [os.path.join(build_dir, "examples", "pingpong-host"),
                     "200"],
    }
    made = {}

    def get(name):
        if name not in made:
            made[name] = profile_truth.record(
                coprof_bin("coprof"), coprof_bin("copreport"),
                tmp_path_factory.mktemp(name), commands[name], flags())
        return made[name]
    return get


def the_image(profile):
    """(path, image_offset) of the profile's one image."""
    (image,) = profile["images"]
    return image["path"], image["image_offset"]


def exact_by_function(rec):
    """{(function, stall): cycles} of the recording's one context, by
    in-image offset as the session's."""
    path, base = the_image(rec.profile)
    (context,) = rec.profile["contexts"]
    counts = os.path.join(rec.counts, "context-%d.counts"
                          % context["context_id"])
    exact = {(offset - base, stall): n for (offset, stall), n in
             exact_counts.cycles_by_file_offset_and_stall(
                 counts, path, base).items()}
    return stall_shares.by_function(exact,
                                    stall_shares.functions(path, base))


def row_of(profile, symbol):
    (row,) = [r for r in profile["rows"] if r["symbol"] == symbol]
    return row


def share_check(rec, symbol, stall):
    """Asserts the sampled share of (symbol, stall) lies within SIGMAS of
    the exact share; returns (sampled share, exact share)."""
    exact = exact_by_function(rec)
    p = exact.get((symbol, stall), 0) / sum(exact.values())
    n = rec.profile["totals"]["samples"]
    assert n == rec.profile["totals"]["exact"] and n > 1000
    got = row_of(rec.profile, symbol)["stall"][exact_counts.REASONS[stall]]
    bound = SIGMAS * math.sqrt(p * (1 - p) / n) + 1 / n
    assert abs(got / n - p) <= bound, (
        "%s %s: sampled %d of %d (%.4f), exact %.4f, bound %.4f"
        % (symbol, exact_counts.REASONS[stall], got, n, got / n, p, bound))
    return got / n, p


def function_start(path, base, symbol):
    starts, names = stall_shares.functions(path, base)
    return starts[names.index(symbol)]


def markers(path, base, symbol):
    """{marker word: [in-image offsets]} of the words of symbol's code
    that are issue, wait or mailbox-read markers."""
    starts, names = stall_shares.functions(path, base)
    i = names.index(symbol)
    with open(path, "rb") as f:
        f.seek(base + starts[i])
        code = f.read(starts[i + 1] - starts[i])
    found = {}
    for at in range(0, len(code) - 3, 2):
        word = int.from_bytes(code[at:at + 4], "little")
        if word in (ISSUE_MARK, WAIT_MARK, READ_MARK):
            found.setdefault(word, []).append(starts[i] + at)
    return found


def report(build_dir, session, *args):
    proc = subprocess.run(
        [os.path.join(build_dir, "bin", "copreport"), "-d", session]
        + list(args), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_stream_dma_wait_falls_in_the_rows(recorded):
    single, double = recorded("stream-single"), recorded("stream-double")
    assert single.profile["stall_reasons"] is True
    got_single, _ = share_check(single, "single_buffered", DMA_WAIT)
    got_double, _ = share_check(double, "double_buffered", DMA_WAIT)
    # single_buffered is nearly all waiting; double's wait has gone.
    row = row_of(single.profile, "single_buffered")
    assert row["stall"]["dma_wait"] > row["samples"] / 2
    assert got_single > 0.02 and got_double * 5 < got_single


def test_stream_by_reason_text(recorded, build_dir):
    rec = recorded("stream-single")
    text = report(build_dir, rec.session, "--by=reason")
    n = rec.profile["totals"]["samples"]
    waited = row_of(rec.profile, "single_buffered")["stall"]["dma_wait"]
    row = re.compile(r"^\s+(\d+)\s+([\d.]+)%\s+[\d.]+-[\d.]+\s+dma_wait\s+"
                     r"stream \(stream\.elf\)\s+-\s+single_buffered$", re.M)
    (match,) = row.findall(text)
    assert int(match[0]) == waited
    assert float(match[1]) == pytest.approx(100 * waited / n, abs=0.006)


def test_stream_dma_waits_name_the_transfer(recorded, build_dir):
    rec = recorded("stream-single")
    path, base = the_image(rec.profile)
    marks = markers(path, base, "single_buffered")
    # single_buffered: get under tag 0, wait, scale, put under tag 2, wait
    get, put = marks[ISSUE_MARK]
    wait_get, wait_put = marks[WAIT_MARK]
    assert get < wait_get < put < wait_put
    waits = [w for w in rec.profile["dma_waits"]
             if w["where"].startswith("single_buffered+")]
    by_tag = {w["tag"]: w for w in waits}
    assert len(waits) == len(by_tag) == 2
    for tag, waiting, issuer in ((0, wait_get, get), (2, wait_put, put)):
        w = by_tag[tag]
        assert w["file_offset"] == waiting
        assert w["issuer_offset"] == issuer
        assert w["issuer"] == "single_buffered+0x%x" % (
            issuer - function_start(path, base, "single_buffered"))
        assert w["samples"] > 20
    assert sum(w["samples"] for w in waits) == \
        row_of(rec.profile, "single_buffered")["stall"]["dma_wait"]
    # the calls of cop.h's inlined functions, by their lines in stream.c
    get_line, wait_get_line, put_line, wait_put_line = calls_in(
        "single_buffered", ("cop_dma_get(", "cop_dma_wait_all(1u << 0)",
                            "cop_dma_put(", "cop_dma_wait_all(1u << 2)"))
    calls = {0: (("cop_dma_wait_all", wait_get_line),
                 ("cop_dma_get", get_line)),
             2: (("cop_dma_wait_all", wait_put_line),
                 ("cop_dma_put", put_line))}
    for tag, (waiting, issuing) in calls.items():
        w = by_tag[tag]
        assert w["source_file"].endswith("cop.h")
        assert w["issuer_source_file"].endswith("cop.h")
        for got, (function, line) in ((w["inlined"], waiting),
                                      (w["issuer_inlined"], issuing)):
            assert got["function"] == function, w
            assert got["call_file"].endswith("examples/stream/stream.c")
            assert got["call_line"] == line, w
    text = report(build_dir, rec.session)
    section = text[text.index("DMA waits by transfer: "):]
    for w in waits:
        waiting, issuing = calls[w["tag"]]
        line = re.compile(
            r"^\s+%d\s+%s \(stream\.c:%d \(%s, cop\.h:%d\)\)\s+%d\s+"
            r"%s \(stream\.c:%d \(%s, cop\.h:%d\)\)$"
            % (w["samples"], re.escape(w["where"]), waiting[1], waiting[0],
               w["source_line"], w["tag"], re.escape(w["issuer"]),
               issuing[1], issuing[0], w["issuer_source_line"]), re.M)
        assert line.search(section), (w, section)
    # annotate names the wait instructions by the same calls
    annotated = json.loads(report(build_dir, rec.session, "annotate",
                                  "single_buffered", "--format", "json"))
    (fn,) = annotated["functions"]
    at = {i["file_offset"]: i for i in fn["instructions"]}
    for tag, (waiting, issuing) in calls.items():
        w = by_tag[tag]
        for off, (function, line) in ((w["file_offset"], waiting),
                                      (w["issuer_offset"], issuing)):
            assert at[off]["inlined"]["function"] == function
            assert at[off]["inlined"]["call_line"] == line
    text = report(build_dir, rec.session, "annotate", "single_buffered")
    assert re.search(r"^\s+%d .*# stream\.c:%d \(cop_dma_wait_all, "
                     r"cop\.h:\d+\)\s+\| dma_wait " % (
                         at[by_tag[0]["file_offset"]]["samples"],
                         wait_get_line), text, re.M), text


def calls_in(function, calls):
    """The lines of examples/stream/stream.c holding each of calls, in
    order, in function's body."""
    path = os.path.join(SOURCE, "examples", "stream", "stream.c")
    with open(path) as f:
        lines = f.read().splitlines()
    at = next(i for i, text in enumerate(lines)
              if re.search(r"\b%s\(" % function, text) and
              not text.rstrip().endswith(";"))
    out = []
    for call in calls:
        at = next(i for i in range(at + 1, len(lines)) if call in lines[i])
        out.append(at + 1)
    return out


def test_pingpong_waits_at_the_read(recorded, build_dir):
    rec = recorded("pingpong")
    got, p = share_check(rec, "main", MAILBOX_WAIT)
    assert p > 0.3
    path, base = the_image(rec.profile)
    first_read, answer_read = markers(path, base, "main")[READ_MARK]
    annotated = report(build_dir, rec.session, "annotate", "main",
                       "--format", "json")
    (main,) = json.loads(annotated)["functions"]
    waits = {i["file_offset"]: i["stall"]["mailbox_wait"]
             for i in main["instructions"]
             if i["stall"] and i["stall"]["mailbox_wait"]}
    assert set(waits) <= {first_read, answer_read}
    assert sum(waits.values()) == row_of(rec.profile,
                                         "main")["stall"]["mailbox_wait"]
    assert waits[answer_read] > 0.9 * sum(waits.values())
