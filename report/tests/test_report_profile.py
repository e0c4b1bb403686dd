"""copreport's profile against what a real session holds (host-pipeline:
pipeline, kernels and overlays contexts, images embedded in the host)."""

import csv
import io
import math
import os

import pytest

from coprof_report.symbols import Symbolizer

# exact hot functions of each example, and for overlays their section
HOT = {
    "pipeline": ["stage_denoise", "stage_edges", "stage_threshold"],
    "kernels": ["matrix_multiply", "crc32_bitwise", "insertion_sort"],
}
OVERLAY_HOT = {
    "blur_picture": (".overlay.blur", 1),
    "crc16_bitwise": (".overlay.crc", 1),
    "histogram_median": (".overlay.histogram", 1),
    "count_primes": (".overlay.sieve", 2),
    "shell_sort": (".overlay.sort", 2),
}


def q(real, sql, args=()):
    return real.db.execute(sql, args).fetchall()


def embedded_offset(host, short_name):
    """The file offset of NAME_program.elf_image in the host executable,
    found independently of the session (its symbol and section)."""
    from elftools.elf.elffile import ELFFile
    with open(host, "rb") as f:
        elf = ELFFile(f)
        for sym in elf.get_section_by_name(".symtab").iter_symbols():
            if sym.name == "%s_program.elf_image" % short_name:
                sec = elf.get_section(sym["st_shndx"])
                return sym["st_value"] - sec["sh_addr"] + sec["sh_offset"]
    raise AssertionError("no embedded %s in %s" % (short_name, host))


def test_contexts_sum_to_context_totals(real_session, report_json):
    rep = report_json("--separate=context")
    totals = {r[0]: r[1] + r[2] + r[3] + r[4] for r in q(
        real_session, "SELECT context, exact, unmapped, ambiguous, pending "
        "FROM context_totals")}
    got = {}
    for g in rep["groups"]:
        assert g["context"] is not None
        got[g["context"]["id"]] = g["total"]
    sums = {}
    labels = {g["label"]: g["context"]["id"] for g in rep["groups"]}
    for row in rep["rows"]:
        cid = labels[row["group"]]
        sums[cid] = sums.get(cid, 0) + row["samples"]
    assert got == totals
    assert sums == {c: n for c, n in totals.items() if n}
    # each group's and context's losses are its LOST records' but for the
    # captures outside the local store (QEMU's reset code), which are no
    # loss (profile.py; a fixture run has one when an interval ends there)
    lost = dict(q(real_session, "SELECT c.id, IFNULL(SUM(l.count), 0) "
                  "FROM contexts c LEFT JOIN lost_events l ON l.context = "
                  "c.id AND l.cause_name IS NOT 'outside-ls' GROUP BY c.id"))
    assert {g["context"]["id"]: g["lost"] for g in rep["groups"]} == lost
    assert {c["id"]: c["lost"] for c in rep["contexts"]} == lost


@pytest.mark.parametrize("sep", ["none", "context", "slot", "image"])
def test_every_sample_once_and_percent_sums(real_session, report_json, sep):
    rep = report_json("--separate=%s" % sep)
    stream = dict(q(real_session, "SELECT key, value FROM session"))
    assert sum(r["samples"] for r in rep["rows"]) == \
        int(stream["stream.samples"])
    assert rep["totals"]["samples"] == int(stream["stream.samples"])
    for g in rep["groups"]:
        rows = [r for r in rep["rows"] if r["group"] == g["label"]]
        if not rows:
            continue
        assert sum(r["samples"] for r in rows) == g["total"]
        assert abs(sum(r["percent"] for r in rows) - 100.0) < 1e-6
        for r in rows:
            n, p = g["total"], r["samples"] / g["total"]
            if r["interval_method"] == "wilson":
                # Wilson's score interval: each bound p0 (below 100%)
                # solves |p - p0| = 1.96 sqrt(p0 (1 - p0) / n)
                for b in (r["ci_low"] / 100, r["ci_high"] / 100):
                    if b < 1:
                        assert abs(p - b) == pytest.approx(
                            1.959964 * math.sqrt(b * (1 - b) / n),
                            abs=2e-6)
            else:
                # from blocks of consecutive samples (intervals.py):
                # p +- a half width, clipped to [0, 100]
                assert g["interval_method"] == "batches"
                half = max(r["percent"] - r["ci_low"],
                           r["ci_high"] - r["percent"])
                assert r["ci_low"] == pytest.approx(
                    max(0.0, r["percent"] - half), abs=1e-9)
                assert r["ci_high"] == pytest.approx(
                    min(100.0, r["percent"] + half), abs=1e-9)
            assert r["ci_low"] <= r["percent"] <= r["ci_high"]
        # sorted by samples
        counts = [r["samples"] for r in rows]
        assert counts == sorted(counts, reverse=True)


def test_hot_functions_in_their_contexts(real_session, report_json):
    rep = report_json("--separate=context")
    by_ctx = {}
    for g in rep["groups"]:
        by_ctx[g["label"]] = (g["context"]["image"], [])
    for r in rep["rows"]:
        by_ctx[r["group"]][1].append(r)
    seen = set()
    for label, (image, rows) in by_ctx.items():
        exact = {r["symbol"]: r for r in rows if r["kind"] == "exact"}
        for fn in HOT.get(image, []):
            assert fn in exact, (label, fn, sorted(exact))
            assert exact[fn]["image"] == image
        if image == "pipeline":
            assert rows[0]["symbol"] == "stage_denoise"
        if image == "kernels":
            assert rows[0]["symbol"] == "matrix_multiply"
        seen.add(image)
    assert seen == {"pipeline", "kernels", "overlays"}


def test_overlay_functions_distinct_rows(real_session, report_json):
    ovl = {r[0]: r for r in q(
        real_session, "SELECT o.section, o.overlay, o.region, o.vaddr, "
        "o.file_offset, o.size FROM overlays o JOIN images i "
        "ON i.id = o.image WHERE i.short_name = 'overlays'")}
    assert len(ovl) == 5
    by_section = {v[1]: k for k, v in ovl.items()}

    def check_exact(r):
        section = by_section[r["overlay_index"]]
        assert r["overlay"] == section and r["section"] == section
        lo, size = ovl[section][4], ovl[section][5]
        assert lo <= r["file_offset_lo"] <= r["file_offset_hi"] < lo + size

    # all contexts of the overlays image: each hot function with exact
    # samples is one row holding them all.  Which ones have exact samples
    # depends on how the guard reads fell (a function called briefly
    # between overlay swaps may have only ambiguous ones), so the session
    # says: the exact samples in its overlay's bytes.
    rep = report_json("--separate=image", "--image", "overlays")
    assert len(rep["groups"]) == 1
    exact = [r for r in rep["rows"] if r["kind"] == "exact"]
    named = " ".join(r["symbol"] for r in rep["rows"])
    for fn, (section, region) in OVERLAY_HOT.items():
        assert ovl[section][2] == region
        lo, size = ovl[section][4], ovl[section][5]
        in_overlay = q(real_session, "SELECT IFNULL(SUM(s.count), 0) FROM "
                       "samples s JOIN images i ON i.id = s.image WHERE "
                       "i.short_name = 'overlays' AND s.file_offset >= ? "
                       "AND s.file_offset < ?", (lo, lo + size))[0][0]
        mine = [r for r in exact if r["symbol"] == fn]
        assert fn in named          # a row of its own, or a candidate
        if not in_overlay:
            assert not mine
            continue
        assert len(mine) == 1, (fn, [r["symbol"] for r in exact])
        r = mine[0]
        assert r["overlay"] == section
        assert r["overlay_index"] == ovl[section][1]
        check_exact(r)
        rest = sum(x["samples"] for x in exact if x["section"] == section
                   and x is not r)
        assert r["samples"] + rest == in_overlay
    # the big ones always have exact samples
    for fn in ("crc16_bitwise", "count_primes"):
        assert [r for r in exact if r["symbol"] == fn]
    # the region-1 functions share a VMA yet are distinct rows
    vmas = {ovl[s][3] for s in (".overlay.blur", ".overlay.crc",
                                ".overlay.histogram")}
    assert len(vmas) == 1

    # per context: overlay rows named right, ambiguous ones apart
    rep = report_json("--separate=context")
    groups = [g["label"] for g in rep["groups"]
              if g["context"]["image"] == "overlays"]
    assert groups
    for label in groups:
        rows = [r for r in rep["rows"] if r["group"] == label]
        for r in rows:
            if r["kind"] == "exact" and r["overlay_index"]:
                check_exact(r)
    # copsim's trace unit watches the guard words, so every swap is placed
    # and no sample of the real session is ambiguous (ambiguous rows are
    # tested on hand-built sessions, test_report_units.py).
    assert q(real_session, "SELECT IFNULL(SUM(count), 0) FROM "
             "ambiguous_samples")[0][0] == 0
    assert not [r for r in rep["rows"] if r["kind"] == "ambiguous"]


def test_overlays_text_rows(real_session, copreport):
    out = copreport("-d", real_session.dir, "--image", "overlays",
                    check=True).stdout
    for fn, (section, _) in OVERLAY_HOT.items():
        lines = [ln for ln in out.splitlines()
                 if ln.split() and ln.split()[-1] == fn]
        assert len(lines) == 1, (fn, lines)
        assert section in lines[0]
        assert "%" in lines[0]
        lo, hi = (float(x) for x in lines[0].split()[2].split("-"))
        assert lo <= float(lines[0].split()[1].rstrip("%")) <= hi
    # With the overlay watch every swap is placed: ambiguous rows only for
    # what the session holds as ambiguous (the watch's fallback).
    (ambiguous,) = real_session.db.execute(
        "SELECT COALESCE(SUM(a.count), 0) FROM ambiguous_samples a"
        " JOIN images i ON i.id = a.image WHERE i.short_name = 'overlays'"
    ).fetchone()
    assert ("[ambiguous region" in out) == (ambiguous > 0)


def test_embedded_images_named_with_host_and_offset(real_session,
                                                    report_json, copreport):
    rep = report_json("--separate=context")
    host = real_session.host
    for c in rep["contexts"]:
        img = [i for i in rep["images"] if i["short_name"] == c["image"]][0]
        assert os.path.realpath(img["path"]) == host
        assert img["image_offset"] == embedded_offset(host, c["image"])
    for r in rep["rows"]:
        if r["image"]:
            assert r["image_offset"] == embedded_offset(host, r["image"])
    out = copreport("-d", real_session.dir, "--separate=context",
                    check=True).stdout
    headers = [ln for ln in out.splitlines() if ln.startswith("context ")]
    assert len(headers) == len(rep["contexts"])
    for c in rep["contexts"]:
        h = [ln for ln in headers if ln.startswith("context %d: " % c["id"])]
        assert len(h) == 1
        off = embedded_offset(host, c["image"])
        assert "pid %d tid %d" % (c["pid"], c["tid"]) in h[0]
        assert "image %s (%s@0x%x)" % (c["image"], host, off) in h[0]
        # the creation site: the host program's function that called
        # cop_context_create, symbolized by file offset
        assert "created at worker_main+0x" in h[0]
        assert "(host-pipeline.c)" in h[0]
    rows = [ln for ln in out.splitlines() if "host-pipeline@0x" in ln
            and not ln.startswith("context ")]
    assert rows


def test_creation_site_symbolized_on_the_host(real_session):
    stack = q(real_session, "SELECT creation_stack FROM contexts")[0][0]
    module, _, off = stack.split()[0].rpartition("+")
    assert os.path.realpath(module) == real_session.host
    f = Symbolizer(module).function_at(int(off, 16) - 1)
    assert f is not None and f.name == "worker_main"


def test_footer(real_session, copreport):
    out = copreport("-d", real_session.dir, check=True).stdout
    lost = q(real_session, "SELECT IFNULL(SUM(count), 0) FROM lost_events "
             "WHERE cause_name IS NOT 'outside-ls'")    # no loss: profile.py
    amb = q(real_session, "SELECT IFNULL(SUM(count), 0) FROM "
            "ambiguous_samples")[0][0]
    total = q(real_session, "SELECT value FROM session WHERE key = "
              "'stream.samples'")[0][0]
    tail = out.splitlines()[-4:]
    assert any(ln.startswith("total %s samples:" % total) and
               "ambiguous %d" % amb in ln for ln in tail), tail
    assert any(ln.startswith("lost %d samples" % lost[0][0])
               for ln in tail), tail
    assert tail[-1] == "session complete"


def test_threshold_hides_rows(real_session, report_json):
    full = report_json()
    cut = report_json("--threshold", "2")
    assert [r for r in full["rows"] if r["percent"] >= 2] == cut["rows"]
    assert cut["groups"][0]["hidden_rows"] == \
        len(full["rows"]) - len(cut["rows"])
    assert cut["totals"] == full["totals"]


def test_filters(real_session, report_json):
    rep = report_json("--image", "kernels")
    assert {r["image"] for r in rep["rows"]} == {"kernels"}
    ctx = report_json("--separate=context")["contexts"][0]
    one = report_json("--separate=context", "--context", str(ctx["id"]))
    assert [g["context"]["id"] for g in one["groups"]] == [ctx["id"]]
    by_pid = report_json("--context", "pid:%d" % ctx["pid"])
    assert by_pid["totals"]["samples"] == report_json()["totals"]["samples"]


def test_csv_matches_json(real_session, report_json, copreport):
    rep = report_json("--separate=context")
    out = copreport("-d", real_session.dir, "--separate=context",
                    "--format", "csv", check=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == len(rep["rows"])
    for a, b in zip(rows, rep["rows"]):
        assert a["symbol"] == b["symbol"]
        assert int(a["samples"]) == b["samples"]
        assert float(a["percent"]) == pytest.approx(b["percent"], abs=1e-4)
        assert a["group"] == b["group"]


def test_output_file(real_session, copreport, tmp_path):
    out = tmp_path / "r.txt"
    p = copreport("-d", real_session.dir, "-o", out, check=True)
    assert p.stdout == ""
    assert "session complete" in out.read_text()
