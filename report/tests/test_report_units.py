"""copreport's parts on hand-built sessions (the schema from daemon/store.c,
rows written here) and on overlay/'s test image, whose overlays share
local-store addresses: the symbolizer, every kind of row, the footer, the
creation site, the timeline's edge cases."""

import json
import math
import os
import shutil
import sqlite3

import pytest

from coprof_report import profile, symbols, timeline
from coprof_report.session import Session, SessionError

# overlay/'s test image (overlay/tests): functions and their file offsets
FUNCS = {
    "main": 0x103c, "bump": 0x1010,
    "ovl1_a_square": 0x2114, "ovl1_b_checksum": 0x3114, "ovl1_c_fold": 0x4114,
    "ovl2_a_count": 0x41c8, "ovl2_b_step": 0x51c8, "ovl2_b_mix": 0x51d8,
}


def test_symbolizer_by_file_offset(test_image):
    s = symbols.Symbolizer(test_image)
    for name, off in FUNCS.items():
        f = s.function_at(off)
        assert f is not None and f.name == name and f.offset == off
        assert s.function_at(off + 4).name == name
        assert s.describe(off + 4) == "%s+0x4" % name
    # three overlays at one address, three functions
    vmas = {s.function_at(FUNCS[n]).vaddr for n in
            ("ovl1_a_square", "ovl1_b_checksum", "ovl1_c_fold")}
    assert len(vmas) == 1
    assert s.function_at(FUNCS["ovl1_b_checksum"]).section == ".ovl1_b"
    # no symbol: the ELF header, data
    assert s.function_at(0) is None and s.describe(0) == "[0x0]"
    data = s.section_at(0x2000)
    assert data.name == ".data" and s.function_at(0x2000) is None
    # embedded: the same image at an offset in a bigger file
    assert symbols.symbolizer(test_image) is symbols.symbolizer(test_image)


def test_symbolizer_embedded(test_image, tmp_path):
    blob = tmp_path / "host"
    pad = b"\0" * 0x3040
    blob.write_bytes(pad + open(test_image, "rb").read())
    s = symbols.Symbolizer(str(blob), base=0x3040)
    assert s.function_at(FUNCS["ovl2_b_mix"]).name == "ovl2_b_mix"


def test_symbolizer_bad_files(tmp_path):
    bad = tmp_path / "bad"
    bad.write_bytes(b"\x7fELF garbage")
    with pytest.raises(symbols.SymbolError):
        symbols.Symbolizer(str(bad))
    with pytest.raises(symbols.SymbolError):
        symbols.Symbolizer(str(tmp_path / "missing"))
    assert symbols.symbolizer(str(bad)) is None


def test_interval_is_wilsons():
    z = 1.959964
    assert profile.interval(0, 0) == (0.0, 0.0, 0.0)
    # none of 10: not the Wald interval's [0, 0] but up to z^2/(n+z^2)
    p, lo, hi = profile.interval(0, 10)
    assert (p, lo) == (0.0, 0.0)
    assert hi == pytest.approx(z * z / (10 + z * z))
    p, lo, hi = profile.interval(10, 10)
    assert (p, hi) == (1.0, 1.0) and lo == pytest.approx(10 / (10 + z * z))
    # published values (Newcombe 1998, Table I): 81 of 263
    assert profile.interval(81, 263)[1:] == pytest.approx((0.2553, 0.3662),
                                                          abs=1e-4)
    assert profile.interval(15, 148)[1:] == pytest.approx((0.0624, 0.1605),
                                                          abs=1e-4)
    # each bound p0 solves |k/n - p0| = z sqrt(p0 (1 - p0) / n); the
    # interval holds p, inside [0, 1], also for one sample in a thousand
    for k, n in ((1, 1000), (25, 100), (999, 1000), (5000, 26224)):
        p, lo, hi = profile.interval(k, n)
        assert 0.0 <= lo <= p <= hi <= 1.0
        for b in (lo, hi):
            assert abs(p - b) == pytest.approx(
                z * math.sqrt(b * (1 - b) / n), rel=1e-5)


def test_creation_site(build_dir, tmp_path):
    host = os.path.join(build_dir, "examples", "host-pipeline")
    s = symbols.Symbolizer(host)
    # a return address inside worker_main, behind two libcop frames
    f = "worker_main"
    start = None
    from elftools.elf.elffile import ELFFile
    with open(host, "rb") as fh:
        elf = ELFFile(fh)
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym.name == f:
                sec = elf.get_section(sym["st_shndx"])
                start = sym["st_value"] - sec["sh_addr"] + sec["sh_offset"]
    assert start is not None and s.function_at(start).name == f
    stack = "/x/libcop.so.1+0x1234 /x/libcop.so.1+0x99 %s+0x%x " \
            "/usr/lib/libc.so.6+0x10" % (host, start + 0x20)
    where, src = profile.creation_site(stack)
    assert where == "worker_main+0x20" and src == "host-pipeline.c"
    # the module is gone: the raw frame
    gone = str(tmp_path / "gone")
    assert profile.creation_site("%s+0x40" % gone) == (
        "%s+0x40" % gone, None)
    assert profile.creation_site(None) == (None, None)
    assert profile.creation_site("") == (None, None)


@pytest.fixture
def hand(new_session, test_image, tmp_path):
    """A session on the test image: two contexts, every kind of sample."""
    d = str(tmp_path / "hand")
    db = new_session(d, {"stream.samples": 0, "stream.start_time_ns": 1000000,
                         "stream.stop_time_ns": 90000000})
    os.makedirs(os.path.join(d, "images"))
    shutil.copy(test_image, os.path.join(d, "images", "0123-3040.elf"))
    db.execute("INSERT INTO images VALUES (1, '/gone/host', 12352, 1, 2, 3,"
               " '0123', 'ok', NULL, 'ovltest', ?, "
               "'images/0123-3040.elf', NULL)", (os.path.getsize(test_image),))
    db.execute("INSERT INTO images VALUES (2, '/gone/other.elf', 0, 1, 3, 3,"
               " '0456', 'changed', 'not the file', NULL, NULL, NULL, NULL)")
    db.execute("INSERT INTO contexts VALUES (1, 11, 100, 101, '0x10', 1, 0,"
               " 0, '/gone/host+0x1234 /lib/libc.so.6+0x10')")
    db.execute("INSERT INTO contexts VALUES (2, 12, 100, 102, '0x20', 2, 1,"
               " 0, NULL)")
    db.executemany("INSERT INTO samples VALUES (?, ?, ?, ?, ?)", [
        (1, 1, FUNCS["main"], 0, 50), (1, 1, FUNCS["main"] + 8, 0, 10),
        (1, 1, FUNCS["ovl1_a_square"], 1, 20),
        (1, 1, FUNCS["ovl1_b_checksum"] + 4, 2, 30),
        (1, 1, FUNCS["ovl1_c_fold"], 3, 5),
        (1, 1, 0x2010, 0, 1),           # data: no symbol
    ])
    # ls 0x114 in region 1: three candidates
    db.executemany("INSERT INTO ambiguous_candidates VALUES (?, ?, ?, ?)", [
        (1, 0x114, 1, FUNCS["ovl1_a_square"]),
        (1, 0x114, 2, FUNCS["ovl1_b_checksum"]),
        (1, 0x114, 3, FUNCS["ovl1_c_fold"]),
        (1, 0x118, 1, FUNCS["ovl1_a_square"] + 4),
        (1, 0x118, 2, FUNCS["ovl1_b_checksum"] + 4),
        (1, 0x118, 3, FUNCS["ovl1_c_fold"] + 4)])
    db.executemany("INSERT INTO ambiguous_samples VALUES (?,?,?,?,?,?,?)", [
        (1, 1, 0x114, 1, 1, 2, 7), (1, 1, 0x118, 1, 2, 3, 3)])
    db.execute("INSERT INTO pending_samples VALUES (1, 1, 0x114, 1, 2, 4)")
    db.executemany("INSERT INTO unmapped_samples VALUES (?,?,?,?,?,?)", [
        (1, 1, 0x30000, "no-segment", -1, 6),
        (2, 2, 0x100, "no-image", -1, 9)])
    db.execute("INSERT INTO orphan_samples VALUES (5, 0x100, 2)")
    db.executemany("INSERT INTO lost_events VALUES (?,?,?,?,?,?,?)", [
        (1, 0, 1, 1, "fifo-overflow", 12, 100),
        (2, 0, 1, 1, "fifo-overflow", 3, 200),
        (3, 1, None, 2, None, 4, 300)])
    db.execute("INSERT INTO decode_errors VALUES ('bad-sample', 2)")
    db.execute("UPDATE session SET value = 147 WHERE key = 'stream.samples'")
    db.execute("UPDATE session SET value = 0 WHERE key = 'stream.complete'")
    db.executemany("INSERT INTO bindings VALUES (?,?,?,?,?,?,?,?)", [
        (1, 0, 1, 0, 100, 2000000, 30000000, "switch"),
        (2, 0, 2, 100, None, 29000000, None, None),   # overlaps, open
        (3, 1, 2, 0, None, None, None, None)])          # never timed
    db.executemany("INSERT INTO sample_timeline VALUES (?,?,?,?,?)", [
        (1, 1, 0, FUNCS["main"], 5), (1, 1, 0, FUNCS["ovl1_a_square"], 2),
        (1, 1, 10000000, FUNCS["main"], 3),
        (1, 1, 30000000, FUNCS["main"], 1),
        (1, 1, 40000000, FUNCS["ovl1_b_checksum"], 4)])
    db.executemany("INSERT INTO sched_events (order_num, ring, seq, time_ns,"
                   " kind, slot, context_id, message) VALUES (?,?,?,?,?,?,?,?)",
                   [(1, 0, 0, 1500000, "create", None, 11,
                     "create context=11 mono=1400000"),
                    (2, 0, 1, 2000000, "bind", 0, 11, "bind slot=0"),
                    (3, 0, 2, 3000000, "exit", -1, 12, "exit slot=-1")])
    db.commit()
    db.close()
    return d


def rows_of(prof):
    return {(g.label, r.symbol): r for g in prof.groups for r in g.sorted}


def test_every_kind_of_row(hand):
    s = Session.open(hand)
    prof = profile.build(s, "none")
    rows = rows_of(prof)
    assert sum(r.samples for r in prof.groups[0].sorted) == 147
    assert rows[("all", "main")].samples == 60
    assert rows[("all", "main")].offset_lo == FUNCS["main"]
    assert rows[("all", "main")].offset_hi == FUNCS["main"] + 8
    # overlay functions at one address: three rows, overlays named
    for name, sec in (("ovl1_a_square", ".ovl1_a"),
                      ("ovl1_b_checksum", ".ovl1_b"),
                      ("ovl1_c_fold", ".ovl1_c")):
        assert rows[("all", name)].overlay_label == sec
    amb = rows[("all", "[ambiguous region 1: ovl1_a_square|ovl1_b_checksum|"
                       "ovl1_c_fold]")]
    assert amb.samples == 7 + 3 + 4       # pending counted as ambiguous
    assert amb.overlay_label == "region 1"
    assert rows[("all", "[unmapped no-segment]")].samples == 6
    assert rows[("all", "[unmapped no-image]")].samples == 9
    assert rows[("all", "[orphan]")].samples == 2
    assert rows[("all", "[no symbol in .data]")].samples == 1
    assert prof.totals == dict(exact=116, ambiguous=10, pending=4,
                               unmapped=15, orphan=2, samples=147, lost=19,
                               outside=0)
    assert not prof.complete
    # the embedded image's label names its file and offset
    assert rows[("all", "main")].image.label == "ovltest (host@0x3040)"
    s.close()


def test_separations(hand):
    s = Session.open(hand)
    for sep in profile.SEPARATIONS:
        prof = profile.build(s, sep)
        assert sum(g.total for g in prof.groups) == 147
        for g in prof.groups:
            if g.sorted:
                assert sum(r.percent for r in g.sorted) == pytest.approx(100)
    labels = [g.label for g in profile.build(s, "context").groups]
    assert labels == ["context 1", "context 2", "no context"]
    labels = [g.label for g in profile.build(s, "slot").groups]
    # the context-less loss on slot 1 is a group of its own
    assert labels == ["slot 0", "slots 0,1", "slot 1", "slot 5"]
    labels = [g.label for g in profile.build(s, "image").groups]
    assert labels[0] == "ovltest (host@0x3040)" and labels[-1] == "no image"
    s.close()


def test_text_report(hand, copreport):
    p = copreport("-d", hand, "--separate=context")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "context 1: pid 100 tid 101, image ovltest " \
        "(/gone/host@0x3040), created at /gone/host+0x1234" in out
    assert "context 2: pid 100 tid 102" in out
    assert "copsim context" not in out
    tail = out.splitlines()[-5:]
    assert tail[0] == "total 147 samples: exact 116, ambiguous 14 (4 pending:" \
        " the daemon did not finish), unmapped 15, orphan 2"
    assert tail[1] == "lost 19 samples (fifo-overflow 15, cause 2 4)"
    assert tail[2] == "lost by image: ovltest 15 (9.93% of its captures)"
    assert tail[3] == "decode errors: bad-sample 2"
    # stream.complete 0, no end_state and no coprofd holding the session
    assert tail[-1].startswith("session INCOMPLETE: its coprofd ended "
                               "without finishing it")


def test_threshold_and_filters(hand):
    s = Session.open(hand)
    prof = profile.build(s, "none", threshold=10)
    assert all(r.percent >= 10 for r in prof.groups[0].sorted)
    assert prof.groups[0].hidden > 0
    prof = profile.build(s, "none", image_filter=["ovltest"])
    assert prof.totals["samples"] == 116 + 14 + 6
    prof = profile.build(s, "none", image_filter=["host"])
    assert prof.totals["samples"] == 116 + 14 + 6
    prof = profile.build(s, "none", context_filter=["tid:102"])
    assert prof.totals["samples"] == 9
    with pytest.raises(profile.FilterError):
        profile.build(s, "none", image_filter=["nosuch"])
    with pytest.raises(profile.FilterError):
        profile.build(s, "none", context_filter=["tid:x"])
    s.close()


def test_timeline_edges(hand):
    s = Session.open(hand)
    tl = timeline.build(s)
    # the untimed binding is left out, the overlap clipped, the open one
    # ends at STOP
    assert [(b.slot, b.start_ns, b.end_ns) for b in tl.bindings] == [
        (0, 2000000, 30000000), (0, 30000000, 90000000)]
    # context 1 is bound 2-30 ms: bucket 0 is cut to 2-10 ms, main 5 of
    # its 7 samples (2-7.71 ms), ovl1_a_square 2 (7.71-10 ms); bucket 10
    # ms is main's alone; buckets 30 and 40 ms lie past the binding: their
    # samples stay at its end (zero-length slices at 30 ms)
    sl = [(x.start_ns, x.end_ns, x.function, x.samples, x.bucket_samples)
          for x in tl.slices]
    assert sl == [(2000000, 7714285, "main", 5, 7),
                  (7714285, 10000000, "ovl1_a_square", 2, 7),
                  (10000000, 20000000, "main", 3, 3),
                  (30000000, 30000000, "main", 1, 1),
                  (30000000, 30000000, "ovl1_b_checksum", 4, 4)]
    trace = timeline.trace_events(tl)
    json.dumps(trace)
    inst = [e for e in trace["traceEvents"] if e["ph"] == "i"]
    assert [(e["name"], e["pid"], e["tid"], e["ts"]) for e in inst] == [
        ("create", timeline.PID_SCHED, 1, 1400.0),
        ("bind", timeline.PID_SLOTS, 1, 2000.0),
        ("exit", timeline.PID_SCHED, 1, 3000.0)]
    s.close()


def test_session_checks(new_session, tmp_path):
    d = str(tmp_path / "old")
    new_session(d, version=2).close()
    with pytest.raises(SessionError) as e:
        Session.open(d)
    assert "format version 2 is newer" in str(e.value)
    d = str(tmp_path / "zero")
    db = new_session(d)
    db.execute("PRAGMA user_version = 0")
    db.commit()
    db.close()
    with pytest.raises(SessionError):
        Session.open(d)


def test_read_only(hand):
    s = Session.open(hand)
    with pytest.raises(sqlite3.OperationalError):
        s.db.execute("DELETE FROM samples")
    s.close()


def test_png_of_hand_and_empty_sessions(hand, new_session, tmp_path):
    from coprof_report import plot
    s = Session.open(hand)
    out = tmp_path / "hand.png"
    plot.write_png(timeline.build(s), str(out))
    s.close()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    d = str(tmp_path / "empty")
    new_session(d).close()
    s = Session.open(d)
    tl = timeline.build(s)
    assert tl.bindings == [] and tl.slices == []
    trace = timeline.trace_events(tl)
    assert all(e["ph"] == "M" for e in trace["traceEvents"])
    out = tmp_path / "empty.png"
    plot.write_png(tl, str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    prof = profile.build(s, "context")
    assert list(prof.groups) == [] and prof.totals["samples"] == 0
    s.close()


def test_overlays_example_rows(new_session, build_dir, tmp_path, copreport):
    """examples/overlays, by hand: a sample in each overlay's first bytes
    is a row of its own function, named with its overlay."""
    from elftools.elf.elffile import ELFFile
    elf_path = os.path.join(build_dir, "examples", "overlays.elf")
    with open(elf_path, "rb") as f:
        elf = ELFFile(f)
        secs = [(s.name, s["sh_offset"], s["sh_addr"])
                for s in elf.iter_sections()
                if s.name.startswith(".overlay.")]
    assert len(secs) == 5
    d = str(tmp_path / "ovl")
    db = new_session(d)
    os.makedirs(os.path.join(d, "images"))
    shutil.copy(elf_path, os.path.join(d, "images", "o.elf"))
    db.execute("INSERT INTO images VALUES (1, ?, 0, 1, 2, 3, '01', 'ok',"
               " NULL, 'overlays', ?, 'images/o.elf', NULL)",
               (elf_path, os.path.getsize(elf_path)))
    db.execute("INSERT INTO contexts VALUES (1, 1, 1, 1, '0x1', 1, 0, 0,"
               " NULL)")
    for i, (name, off, addr) in enumerate(secs):
        db.execute("INSERT INTO samples VALUES (1, 1, ?, ?, ?)",
                   (off + 8, i + 1, 10 * (i + 1)))
    db.commit()
    db.close()
    p = copreport("-d", d, "--format", "json", check=True)
    rows = {r["symbol"]: r for r in json.loads(p.stdout)["rows"]}
    want = {"blur_picture": ".overlay.blur", "crc16_bitwise": ".overlay.crc",
            "histogram_median": ".overlay.histogram",
            "count_primes": ".overlay.sieve", "shell_sort": ".overlay.sort"}
    assert {k: r["overlay"] for k, r in rows.items()} == want
    addrs = {addr for name, _, addr in secs}
    assert len(addrs) == 2          # two regions, five overlays
    text = copreport("-d", d, check=True).stdout
    for fn, sec in want.items():
        line = [ln for ln in text.splitlines() if ln.endswith(" " + fn)]
        assert len(line) == 1 and sec in line[0]


def test_exports_keep_every_kind_of_row(hand, copreport, tmp_path):
    """Exact, ambiguous, pending, unmapped, orphan and no-symbol samples
    are each in the exports once: every format sums to the session's 147
    samples, with the orphans under "no context"."""
    import collections
    import gzip
    import json as json_mod
    from coprof_report import export
    out = {}
    for fmt in export.FORMATS:
        out[fmt] = tmp_path / fmt
        copreport("export", "-d", hand, "--format", fmt, "-o", out[fmt],
                  check=True)
    roots = collections.Counter()
    for line in open(str(out["folded"])):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        roots[stack.split(";")[0]] += int(count)
    assert sum(roots.values()) == 147
    assert roots["no context"] == 2
    doc = json_mod.load(open(str(out["speedscope"])))
    assert sum(sum(p["weights"]) for p in doc["profiles"]) == 147
    names = {f["name"] for f in doc["shared"]["frames"]}
    assert any(n.startswith("[ambiguous region 1: ") for n in names)
    assert any(n.startswith("[unmapped no-image]") for n in names)
    assert "[orphan] (no image)" in names
    msg = export._pprof_classes()()
    with gzip.open(str(out["pprof"])) as f:
        msg.ParseFromString(f.read())
    assert sum(s.value[0] for s in msg.sample) == 147
    assert msg.string_table[0] == ""
    text = open(str(out["callgrind"])).read()
    assert "summary: 147\n" in text and "totals: 147\n" in text
