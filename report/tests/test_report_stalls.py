"""Stall reasons in every view of copreport (issue 29 item 4), on a
hand-built session whose tables sample_stalls, dma_wait_samples,
stall_timeline and stack_stalls hold known counts (the schema of
abi/session-schema.sql, as coprofd writes it), and on one without them
(recorded before): every view's numbers are the tables', and a session
without reasons still reports, saying so where reasons were asked for.
"""

import csv
import gzip
import io
import json
import os
import re
import shutil
import subprocess

import pytest

from coprof_report import export, stalls

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# overlay/'s test image: functions and their file offsets
MAIN, BUMP, SQUARE = 0x103c, 0x1010, 0x2114

# (context, image, file_offset, stall, count): per place they sum to the
# samples table's count
STALLS = [
    (1, 1, MAIN, 0, 40), (1, 1, MAIN, 3, 25), (1, 1, MAIN + 4, 1, 5),
    (1, 1, BUMP, 0, 10), (1, 1, BUMP, 4, 20),
    (2, 1, MAIN, 0, 30), (2, 1, MAIN, 5, 10),
    (1, 1, SQUARE, 2, 7),
]
# main: 40+25+5+30+10 = 110 (issue 70, dependency 5, dma_wait 25,
# memory 10); bump: 30 (issue 10, mailbox_wait 20); ovl1_a_square: 7
DMA = [
    # waiter, tag, issuer ls, issuer offset, count
    (1, 1, MAIN, 3, 0x210, BUMP + 4, 15),
    (1, 1, MAIN, 5, 0x9000, None, 10),
]


def _samples():
    out = {}
    for ctx, img, off, _, n in STALLS:
        out[(ctx, img, off)] = out.get((ctx, img, off), 0) + n
    return out


def _make(new_session, test_image, d, with_stalls=True, keys=None):
    k = {"stream.samples": 147, "stream.start_time_ns": 0,
         "stream.stop_time_ns": 400000000, "sampling.event": "SPU_CYCLES",
         "stream.lfsr_count": 997}
    k.update(keys or {})
    db = new_session(d, k)
    os.makedirs(os.path.join(d, "images"))
    shutil.copy(test_image, os.path.join(d, "images", "0123.elf"))
    db.execute("INSERT INTO images VALUES (1, ?, 0, 1, 2, ?, NULL, 'ok', "
               "NULL, 'ovltest', ?, 'images/0123.elf', NULL)",
               (test_image, os.path.getsize(test_image),
                os.path.getsize(test_image)))
    db.execute("INSERT INTO contexts VALUES (1, 11, 100, 101, '0x10', 1, 0,"
               " 0, NULL)")
    db.execute("INSERT INTO contexts VALUES (2, 12, 100, 102, '0x20', 1, 1,"
               " 0, NULL)")
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?)",
                   [(c, i, o, 1 if o == SQUARE else 0, n)
                    for (c, i, o), n in _samples().items()])
    db.executemany("INSERT INTO bindings VALUES (?,?,?,?,?,?,?,?)", [
        (1, 0, 1, 0, 100, 0, 200000000, "switch"),
        (2, 1, 2, 0, 100, 0, 200000000, "exit")])
    # timeline: 20 buckets per context of the same samples
    tl, stl = [], []
    for ctx in (1, 2):
        for b in range(20):
            tl.append((ctx, 1, b * 10000000, MAIN, 5))
            stl.append((ctx, 1, b * 10000000, 0, 3 + (b % 2)))
            stl.append((ctx, 1, b * 10000000, 3, 2 - (b % 2)))
    db.executemany("INSERT INTO sample_timeline VALUES (?,?,?,?,?)", tl)
    db.execute("INSERT INTO stacks VALUES (1, 1, ?, 30)",
               ("0x%x 0x%x" % (BUMP, MAIN + 8),))
    if with_stalls:
        db.executemany("INSERT INTO sample_stalls VALUES (?,?,?,?,?)",
                       STALLS)
        db.executemany("INSERT INTO dma_wait_samples VALUES "
                       "(?,?,?,?,?,?,?)", DMA)
        db.executemany("INSERT INTO stall_timeline VALUES (?,?,?,?,?)", stl)
        db.executemany("INSERT INTO stack_stalls VALUES (?,?,?,?,?)", [
            (1, 1, "0x%x 0x%x" % (BUMP, MAIN + 8), 0, 10),
            (1, 1, "0x%x 0x%x" % (BUMP, MAIN + 8), 4, 20)])
    else:
        for t in ("sample_stalls", "dma_wait_samples", "stall_timeline",
                  "stack_stalls"):
            db.execute("DROP TABLE %s" % t)
    db.commit()
    db.close()
    return d


@pytest.fixture
def stalled(new_session, test_image, tmp_path):
    return _make(new_session, test_image, str(tmp_path / "stalled"))


@pytest.fixture
def old(new_session, test_image, tmp_path):
    return _make(new_session, test_image, str(tmp_path / "old"), False)


def _json(copreport, d, *args):
    return json.loads(copreport("-d", d, "--format", "json", *args,
                                check=True).stdout)


def test_reason_names_are_the_trace_units():
    text = open(os.path.join(SOURCE, "abi", "trace-regs.h")).read()
    names = re.findall(r"TRACE_STALL_(\w+) = (\d+)", text)
    assert [(n.lower(), int(v)) for n, v in names] == \
        [(n, i) for i, n in enumerate(stalls.REASONS)]



def test_rows_carry_the_tables_reasons(stalled, copreport):
    doc = _json(copreport, stalled)
    assert doc["stall_reasons"] is True
    rows = {r["symbol"]: r for r in doc["rows"]}
    assert rows["main"]["samples"] == 110
    assert rows["main"]["stall"] == {"issue": 70, "dependency": 5,
                                     "branch": 0, "dma_wait": 25,
                                     "mailbox_wait": 0, "memory": 10}
    assert rows["bump"]["stall"]["mailbox_wait"] == 20
    assert rows["ovl1_a_square"]["stall"]["branch"] == 7
    for r in doc["rows"]:
        assert sum(r["stall"].values()) == r["samples"]
    g = doc["groups"][0]
    assert g["stall"]["issue"] == 80 and g["stall"]["dma_wait"] == 25
    assert g["stall_shares"]["dma_wait"]["percent"] == \
        pytest.approx(100 * 25 / 147)
    assert doc["totals"]["samples"] == 147


def test_by_reason_rows_sum_to_the_table(stalled, copreport):
    for sep in ("none", "context"):
        doc = _json(copreport, stalled, "--by=reason", "--separate", sep)
        assert doc["by"] == "reason"
        got = {}
        for r in doc["rows"]:
            k = (r["symbol"], r["stall_reason"])
            got[k] = got.get(k, 0) + r["samples"]
            assert {k: v for k, v in r["stall"].items() if v} == \
                {r["stall_reason"]: r["samples"]}
        want = {}
        names = {MAIN: "main", MAIN + 4: "main", BUMP: "bump",
                 SQUARE: "ovl1_a_square"}
        for _, _, off, code, n in STALLS:
            k = (names[off], stalls.REASONS[code])
            want[k] = want.get(k, 0) + n
        assert got == want
    p = copreport("-d", stalled, "--by=reason", "--format", "csv",
                  check=True)
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert sum(int(r["samples"]) for r in rows
               if r["stall_reason"] == "dma_wait") == 25
    text = copreport("-d", stalled, "--by=reason", check=True).stdout
    line = [ln for ln in text.splitlines()
            if ln.split()[-1:] == ["main"] and " dma_wait " in ln][0]
    assert line.split()[0] == "25"


def test_text_says_the_clock_and_wait_share(stalled, copreport):
    text = copreport("-d", stalled, check=True).stdout
    assert "clock: SPU_CYCLES (modelled cycles)" in text
    assert re.search(r"wait%\s+top wait", text)
    main = [ln for ln in text.splitlines() if ln.split()[-1:] == ["main"]]
    # 40 of 110 samples of main wait; dma_wait the most of them
    assert main[0].split()[3:5] == ["36.4%", "dma_wait"]


def test_dma_waits_name_the_transfer(stalled, copreport):
    doc = _json(copreport, stalled)
    waits = doc["dma_waits"]
    assert [(w["where"], w["tag"], w["issuer"], w["samples"])
            for w in waits] == [("main", 3, "bump+0x4", 15),
                                ("main", 5, "ls 0x9000", 10)]
    assert waits[0]["issuer_offset"] == BUMP + 4
    assert waits[0]["source_file"].endswith(".c")
    assert waits[0]["issuer_source_line"] > 0
    assert waits[1]["issuer_offset"] is None
    text = copreport("-d", stalled, check=True).stdout
    assert "DMA waits by transfer: 25 samples" in text
    assert re.search(r"^\s+15\s+main \(\S+\.c:\d+\)\s+3\s+bump\+0x4 "
                     r"\(\S+\.c:\d+\)$", text, re.M)
    # filters apply: context 2 waited on nothing; its text has no section
    assert _json(copreport, stalled, "--context", "2")["dma_waits"] == []
    text = copreport("-d", stalled, "--context", "2", check=True).stdout
    assert "DMA waits" not in text


def test_no_dma_section_without_dma_waits(stalled, tmp_path, copreport):
    """A session with reasons but no DMA-wait sample: no text or HTML
    section, the JSON's dma_waits an empty list."""
    import sqlite3
    db = sqlite3.connect(os.path.join(stalled, "session.db"))
    with db:
        db.execute("DELETE FROM dma_wait_samples")
    db.close()
    assert _json(copreport, stalled)["dma_waits"] == []
    assert "DMA waits" not in copreport("-d", stalled, check=True).stdout
    page = tmp_path / "r.html"
    copreport("html", "-d", stalled, "-o", page, check=True)
    assert "By stall reason" in page.read_text()
    assert "DMA waits" not in page.read_text()


def test_old_session_still_reports(old, copreport):
    doc = _json(copreport, old)
    assert doc["stall_reasons"] is False and doc["dma_waits"] is None
    assert all(r["stall"] is None for r in doc["rows"])
    assert sum(r["samples"] for r in doc["rows"]) == 147
    p = copreport("-d", old, "--by=reason", check=True)
    assert p.stderr.count(stalls.NOT_RECORDED) == 1
    assert stalls.NOT_RECORDED in p.stdout
    assert "wait%" not in p.stdout
    doc = _json(copreport, old, "--by=reason")
    assert sum(r["samples"] for r in doc["rows"]) == 147
    assert {r["stall_reason"] for r in doc["rows"]} == {None}


def test_empty_tables_beside_samples_are_not_recorded(new_session,
                                                      test_image, tmp_path,
                                                      copreport):
    """A coprofd that created the tables but stored no reason."""
    d = _make(new_session, test_image, str(tmp_path / "e"))
    import sqlite3
    db = sqlite3.connect(os.path.join(d, "session.db"))
    db.execute("DELETE FROM sample_stalls")
    db.commit()
    db.close()
    assert _json(copreport, d)["stall_reasons"] is False


def test_annotate_per_instruction(stalled, old, copreport):
    doc = json.loads(copreport("annotate", "-d", stalled, "--format", "json",
                               "main", check=True).stdout)
    f = doc["functions"][0]
    by_off = {i["file_offset"]: i for i in f["instructions"]}
    assert by_off[MAIN]["stall"]["dma_wait"] == 25
    assert by_off[MAIN]["stall"]["issue"] == 70
    assert by_off[MAIN]["stall"]["memory"] == 10
    assert by_off[MAIN + 4]["stall"]["dependency"] == 5
    for i in f["instructions"]:
        assert sum(i["stall"].values()) == i["samples"]
    text = copreport("annotate", "-d", stalled, "main", check=True).stdout
    assert re.search(r"^\s+105\s.*\| issue 70 dma_wait 25 memory 10$",
                     text, re.M)
    p = copreport("annotate", "-d", stalled, "--format", "csv", "main",
                  check=True)
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert [r["stall"] for r in rows if r["samples"] == "5"] == \
        ["dependency=5"]
    text = copreport("annotate", "-d", old, "main", check=True).stdout
    assert text.count(stalls.NOT_RECORDED) == 1


def _export(copreport, d, fmt, tmp_path):
    out = tmp_path / ("out." + fmt)
    copreport("export", "-d", d, "--format", fmt, "-o", out, check=True)
    return out


def test_folded_leaf_frames_from_stack_stalls(stalled, copreport,
                                              tmp_path):
    lines = _export(copreport, stalled, "folded",
                    tmp_path).read_text().splitlines()
    counts = {ln.rsplit(" ", 1)[0]: int(ln.rsplit(" ", 1)[1])
              for ln in lines}
    assert sum(counts.values()) == 30           # the stacks' samples
    waits = [k for k in counts if k.endswith(";[mailbox_wait]")]
    assert len(waits) == 1 and counts[waits[0]] == 20
    assert waits[0].split(";")[-2].startswith("bump ")
    doc = json.loads(_export(copreport, stalled, "speedscope",
                             tmp_path).read_text())
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert "[mailbox_wait]" in names


def test_folded_without_stacks_splits_leaves(new_session, test_image,
                                             tmp_path, copreport):
    d = _make(new_session, test_image, str(tmp_path / "ns"))
    import sqlite3
    db = sqlite3.connect(os.path.join(d, "session.db"))
    db.execute("DELETE FROM stacks")
    db.execute("DELETE FROM stack_stalls")
    db.commit()
    db.close()
    lines = _export(copreport, d, "folded",
                    tmp_path).read_text().splitlines()
    total = {}
    for ln in lines:
        stack, n = ln.rsplit(" ", 1)
        leaf = stack.split(";")[-1]
        total[leaf] = total.get(leaf, 0) + int(n)
    assert total["[dma_wait]"] == 25 and total["[memory]"] == 10
    assert total["[dependency]"] == 5 and total["[mailbox_wait]"] == 20
    assert sum(total.values()) == 147


def test_pprof_stall_label(stalled, copreport, tmp_path):
    path = _export(copreport, stalled, "pprof", tmp_path)
    msg = export._pprof_classes()()
    msg.ParseFromString(gzip.decompress(path.read_bytes()))
    st = list(msg.string_table)
    got = {}
    for smp in msg.sample:
        for lab in smp.label:
            if st[lab.key] == "stall":
                got[st[lab.str]] = got.get(st[lab.str], 0) + smp.value[0]
    assert got == {"issue": 10, "mailbox_wait": 20}
    go = shutil.which("go")
    if go is None:
        return
    p = subprocess.run([go, "tool", "pprof", "-tags", str(path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert re.search(r"stall: Total 30\.0\n\s+20\.0 \(66\.67%\): "
                     r"mailbox_wait\n\s+10\.0 \(33\.33%\): issue\n",
                     p.stdout), p.stdout


def test_callgrind_event_per_reason(stalled, copreport, tmp_path):
    text = _export(copreport, stalled, "callgrind", tmp_path).read_text()
    assert "events: Samples %s\n" % " ".join(stalls.REASONS) in text
    assert "totals: 30 10 0 0 0 20 0\n" in text


def test_timeline_reason_share_per_slot(stalled, old, copreport, tmp_path):
    out = tmp_path / "t.json"
    png = tmp_path / "t.png"
    copreport("timeline", "-d", stalled, "-o", out, "--png", png,
              check=True)
    doc = json.loads(out.read_text())
    assert doc["otherData"]["stall_reasons"] is True
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    names = {e["name"] for e in counters}
    assert names == {"stall reasons slot 0", "stall reasons slot 1"}
    # stall_timeline: issue 3 or 4, dma_wait 2 or 1 per bucket (even,
    # odd): shares 60/40 and 80/20
    first = [e for e in counters if e["name"] == "stall reasons slot 0"]
    assert first[0]["ts"] == 0 and first[0]["args"]["issue"] == 60.0
    assert first[0]["args"]["dma_wait"] == 40.0
    assert first[1]["args"]["issue"] == 80.0
    assert len([e for e in first if e["args"]["issue"]]) == 20
    assert first[-1]["args"]["issue"] == 0.0       # after the last bucket
    assert png.read_bytes()[:4] == b"\x89PNG"
    from coprof_report import plot, timeline
    from coprof_report.session import Session
    s = Session.open(stalled)
    try:
        fig = plot.figure(timeline.build(s))
        assert "stall reasons" in [ax.get_label() for ax in fig.axes]
    finally:
        s.close()
    copreport("timeline", "-d", old, "-o", out, check=True)
    doc = json.loads(out.read_text())
    assert doc["otherData"]["stall_reasons"] is False
    assert not [e for e in doc["traceEvents"] if e["ph"] == "C"]


def test_html_shows_the_breakdown(stalled, old, copreport, tmp_path):
    page = tmp_path / "r.html"
    copreport("html", "-d", stalled, "-o", page, check=True)
    text = page.read_text()
    assert "By stall reason" in text and "DMA waits by transfer" in text
    # main: 110 samples, 36.4% waiting, dma_wait the most; the reasons'
    # columns in stalls.REASONS order
    assert re.search(r"<tr><td class=\"n\">110</td><td class=\"n\">36\.4%"
                     r"</td><td>dma_wait</td><td class=\"n\">70</td>"
                     r"<td class=\"n\">5</td><td class=\"n\">0</td>"
                     r"<td class=\"n\">25</td><td class=\"n\">0</td>"
                     r"<td class=\"n\">10</td>", text)
    copreport("html", "-d", old, "-o", page, check=True)
    text = page.read_text()
    assert "id=\"no-stalls\"" in text and "By stall reason" not in text
