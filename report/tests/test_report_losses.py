"""copreport's honesty about a session's accuracy, on hand-built sessions:
losses per group, context and image by cause in every format, the warning
when a group lost more than 1% of its captures, and the header's account
of how the session was sampled (period, dither, FIFO-full policy, time
stalled)."""

import csv
import io
import json
import os
import shutil
import sqlite3

import pytest

from coprof_report import profile
from coprof_report.session import Session

MAIN = 0x103c           # main in overlay/'s test image (test_report_units)
FOLD = 0x4114           # ovl1_c_fold, overlay 3


@pytest.fixture
def make(new_session, test_image, tmp_path):
    """make(name, samples={ctx: n}, lost=[(slot, ctx, cause, name, n)],
    keys={}, stalls=[(slot, ctx, count, ns)]) -> a session directory
    (daemon/store.c's schema, with its stalls table):
    context 1 of image ovltest on slot 0, context 2 of image second (the
    same bytes) on slot 1, every sample on main."""
    def build(name, samples, lost=(), keys=None, stalls=None):
        d = str(tmp_path / name)
        base = {"stream.samples": sum(samples.values()),
                "stream.start_time_ns": 1000000000,
                "stream.stop_time_ns": 3000000000}
        base.update(keys or {})
        db = new_session(d, base)
        os.makedirs(os.path.join(d, "images"))
        shutil.copy(test_image, os.path.join(d, "images", "i.elf"))
        db.execute("INSERT INTO images VALUES (1, '/gone/host', 0, 1, 2, 3,"
                   " '01', 'ok', NULL, 'ovltest', 30000, 'images/i.elf',"
                   " NULL)")
        db.execute("INSERT INTO images VALUES (2, '/gone/other', 0, 1, 2, 4,"
                   " '01', 'ok', NULL, 'second', 30000, 'images/i.elf',"
                   " NULL)")
        for ctx in (1, 2):
            db.execute("INSERT INTO contexts VALUES (?, ?, 100, ?, '0x10',"
                       " ?, ?, 0, NULL)", (ctx, 10 + ctx, 100 + ctx, ctx,
                                           ctx - 1))
        for ctx, n in samples.items():
            db.execute("INSERT INTO samples VALUES (?, ?, ?, 0, ?)",
                       (ctx, ctx, MAIN, n))
        for i, (slot, ctx, cause, cname, n) in enumerate(lost):
            db.execute("INSERT INTO lost_events VALUES (?,?,?,?,?,?,?)",
                       (i + 1, slot, ctx, cause, cname, n, 100 * i))
        if stalls is not None:
            db.executemany("INSERT INTO stalls (slot, context, count, ns)"
                           " VALUES (?, ?, ?, ?)", stalls)
        db.commit()
        db.close()
        return d
    return build


def report(copreport, d, *args):
    p = copreport("-d", d, *args, check=True)
    return p.stdout


def as_json(copreport, d, *args):
    return json.loads(report(copreport, d, "--format", "json", *args))


LOST = [(0, 1, 1, "fifo-overflow", 30), (0, 1, 2, "buffer-full", 10),
        (1, 2, 1, "fifo-overflow", 1), (3, None, 3, "no-context", 5)]


def test_losses_per_context_and_image_by_cause(make, copreport):
    d = make("lossy", {1: 960, 2: 500}, LOST)
    rep = as_json(copreport, d, "--separate=context")
    groups = {g["label"]: g for g in rep["groups"]}
    c1 = groups["context 1"]
    assert (c1["total"], c1["lost"]) == (960, 40)
    assert c1["lost_by_cause"] == [
        {"cause": 1, "cause_name": "fifo-overflow", "count": 30},
        {"cause": 2, "cause_name": "buffer-full", "count": 10}]
    assert c1["lost_percent"] == pytest.approx(4.0)
    assert c1["biased"] is True
    assert c1["context"]["lost"] == 40
    c2 = groups["context 2"]
    assert (c2["lost"], c2["biased"]) == (1, False)
    assert c2["lost_percent"] == pytest.approx(100 / 501, abs=1e-4)
    # the loss on a slot without a context is a group of its own
    nc = groups["no context"]
    assert (nc["total"], nc["lost"], nc["biased"]) == (0, 5, True)
    # every context and image carries its own, whatever the separation
    rep = as_json(copreport, d)
    ctx = {c["id"]: c for c in rep["contexts"]}
    assert (ctx[1]["samples"], ctx[1]["lost"]) == (960, 40)
    assert (ctx[2]["samples"], ctx[2]["lost"]) == (500, 1)
    img = {i["short_name"]: i for i in rep["images"]}
    assert (img["ovltest"]["samples"], img["ovltest"]["lost"],
            img["ovltest"]["biased"]) == (960, 40, True)
    assert [(c["cause_name"], c["count"])
            for c in img["ovltest"]["lost_by_cause"]] == \
        [("fifo-overflow", 30), ("buffer-full", 10)]
    assert (img["second"]["samples"], img["second"]["lost"],
            img["second"]["biased"]) == (500, 1, False)
    # the session's own fields keep their form
    assert rep["totals"]["lost"] == 46
    assert {x["cause_name"]: x["count"] for x in rep["lost_by_cause"]} == \
        {"fifo-overflow": 31, "buffer-full": 10, "no-context": 5}
    (g,) = rep["groups"]
    assert (g["label"], g["total"], g["lost"]) == ("all", 1460, 46)


@pytest.mark.parametrize("sep,want", [
    ("slot", {"slot 0": 40, "slot 1": 1, "slot 3": 5}),
    ("image", {"ovltest (host)": 40, "second (other)": 1, "no image": 5}),
    ("none", {"all": 46})])
def test_losses_land_in_every_separation(make, copreport, sep, want):
    d = make("sep", {1: 960, 2: 500}, LOST)
    rep = as_json(copreport, d, "--separate=" + sep)
    assert {g["label"]: g["lost"] for g in rep["groups"]} == want


def test_losses_follow_the_filters(make, copreport):
    d = make("filtered", {1: 960, 2: 500}, LOST)
    rep = as_json(copreport, d, "--context", "2")
    assert [(g["total"], g["lost"]) for g in rep["groups"]] == [(500, 1)]
    assert rep["warnings"] == []
    # the session's totals stay whole
    assert rep["totals"]["lost"] == 46


def test_csv_carries_the_group_losses(make, copreport):
    d = make("csv", {1: 960, 2: 500}, LOST)
    out = report(copreport, d, "--separate=context", "--format", "csv")
    rows = {r["group"]: r for r in csv.DictReader(io.StringIO(out))}
    assert rows["context 1"]["group_lost"] == "40"
    assert rows["context 1"]["group_lost_by_cause"] == \
        "fifo-overflow=30;buffer-full=10"
    assert rows["context 1"]["group_biased"] == "1"
    assert rows["context 2"]["group_lost"] == "1"
    assert rows["context 2"]["group_biased"] == "0"


def test_text_footer_of_each_group(make, copreport):
    d = make("text", {1: 960, 2: 500}, LOST)
    lines = report(copreport, d, "--separate=context").splitlines()
    assert "  lost 40 captures (fifo-overflow 30, buffer-full 10): 4.00% of" \
        " the group's 1000 captures; more than 1%: its shares may be" \
        " biased" in lines
    assert "  lost 1 capture (fifo-overflow 1): 0.20% of the group's 501" \
        " captures" in lines
    assert "lost 46 samples (fifo-overflow 31, buffer-full 10," \
        " no-context 5)" in lines
    assert "lost by image: ovltest 40 (4.00% of its captures), second 1" \
        " (0.20% of its captures)" in lines


@pytest.mark.parametrize("samples,lost,warned", [
    (990, 10, False),       # exactly 1%: not more than 1%
    (989, 11, True),
    (1000, 0, False)])
def test_warning_over_one_percent(make, copreport, samples, lost, warned):
    d = make("warn%d" % lost, {1: samples, 2: 1000},
             [(0, 1, 1, "fifo-overflow", lost)] if lost else [])
    rep = as_json(copreport, d, "--separate=context")
    g = [g for g in rep["groups"] if g["label"] == "context 1"][0]
    assert g["biased"] is warned
    warning = "group context 1 lost %.2f%% of its 1000 captures (more than" \
        " 1%%): its shares may be biased" % (lost / 10)
    assert rep["warnings"] == ([warning] if warned else [])
    text = report(copreport, d, "--separate=context")
    assert ("WARNING: " + warning in text.splitlines()) is warned
    assert ("may be biased" in text) is warned


def test_image_warning_without_separation(make, copreport):
    """Losses on one image bias the shares between images even when the
    whole session lost little: unseparated, the image is named."""
    d = make("img", {1: 10000, 2: 20000}, [(0, 1, 1, "fifo-overflow", 150)])
    rep = as_json(copreport, d)
    assert rep["groups"][0]["biased"] is False      # 0.50% of all
    assert rep["warnings"] == [
        "image ovltest (host) lost 1.48% of its 10150 captures (more than"
        " 1%): the shares of its functions and between images may be biased"]


def test_header_stall_and_dither(make, copreport):
    d = make("stall", {1: 900, 2: 100}, [],
             {"stream.lfsr_count": 997, "stream.slots": 2,
              "sampling.fifo_full": "stall", "sampling.dither": "on",
              "sampling.dither_seed": 4242},
             stalls=[(0, 1, 3, 4000000), (0, 1, 1, 2000000),
                     (1, 2, 2, 10000000)])
    lines = report(copreport, d, "--separate=context").splitlines()
    # two slots of a 2 s run: 16 ms of 4 s is 0.40%
    assert lines[1] == "session complete"
    assert lines[2] == "sampling: a capture every 997 cycles (SPU_CYCLES:997)" \
        ", dither on (seed 4242), FIFO full: stall, stalled 16.00 ms in 6" \
        " stalls (0.40% of the 2 slots' run time)"
    assert lines[3] == "stalled by slot: slot 0 6.00 ms (0.30%), slot 1" \
        " 10.00 ms (0.50%)"
    assert "  lost 0 captures; stalled 6.00 ms in 4 stalls" in lines
    rep = as_json(copreport, d, "--separate=context")
    smp = rep["sampling"]
    assert (smp["period_cycles"], smp["fifo_full"], smp["dither"],
            smp["dither_seed"]) == (997, "stall", "on", 4242)
    assert (smp["stall_count"], smp["stall_ns"]) == (6, 16000000)
    assert smp["stall_by_slot"] == [
        {"slot": 0, "count": 4, "ns": 6000000, "percent": 0.3},
        {"slot": 1, "count": 2, "ns": 10000000, "percent": 0.5}]
    ctx = {c["id"]: c for c in rep["contexts"]}
    assert (ctx[2]["stall_count"], ctx[2]["stall_ns"]) == (2, 10000000)


def test_header_drop_and_no_dither(make, copreport):
    d = make("drop", {1: 10}, [],
             {"stream.lfsr_count": 1001, "sampling.fifo_full": "drop",
              "sampling.dither": "off", "sampling.dither_seed": 0},
             stalls=[])
    line = report(copreport, d).splitlines()[2]
    assert line == "sampling: a capture every 1001 cycles (SPU_CYCLES:1001)" \
        ", dither off (a fixed period: code in step with it aliases)," \
        " FIFO full: drop"


def test_header_of_an_old_session(make, copreport):
    """A session from before the stall policy and the dither: not
    recorded, and no stalls table needed."""
    d = make("old", {1: 10}, [], {"stream.lfsr_count": 997})
    db = sqlite3.connect(os.path.join(d, "session.db"))
    db.executescript("DROP VIEW stall_by_context; DROP TABLE stalls;")
    db.close()
    s = Session.open(d)
    assert not s.has_table("stalls") and s.stalls() == []
    s.close()
    line = report(copreport, d).splitlines()[2]
    assert line == "sampling: a capture every 997 cycles (SPU_CYCLES:997)," \
        " dither not recorded, FIFO full: policy not recorded"
    smp = as_json(copreport, d)["sampling"]
    assert (smp["fifo_full"], smp["dither"], smp["stalls_recorded"]) == \
        (None, None, False)


def test_intervals_are_wilsons_in_every_format(make, copreport):
    d = make("wilson", {1: 3}, [])
    s = Session.open(d)
    prof = profile.build(s)
    s.close()
    (r,) = prof.groups[0].sorted
    # all 3 of 3: the Wald interval would be [100, 100]
    assert r.percent == 100.0 and r.ci_high == 100.0
    assert r.ci_low == pytest.approx(100 * 3 / (3 + 1.959964 ** 2))
    text = report(copreport, d)
    assert "%.2f-100.00" % r.ci_low in text
    assert "95% Wilson score interval" in text and "not aliasing" in text
    (row,) = as_json(copreport, d)["rows"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((r.ci_low, 100))


@pytest.mark.parametrize("event,words", [
    ("SPU_CYCLES", "SPU_CYCLES:2003 (modelled cycles), a capture every 2003"
                   " cycles"),
    ("SPU_INSTRUCTIONS", "SPU_INSTRUCTIONS:2003, a capture every 2003"
                         " retired instructions")])
def test_header_says_the_event(make, copreport, event, words):
    """A session of stream 1.5 records its event: the header names it,
    and JSON's sampling.event carries it (null for an older session)."""
    d = make("ev", {1: 10}, [],
             {"stream.lfsr_count": 2003, "sampling.event": event,
              "sampling.fifo_full": "drop", "sampling.dither": "off",
              "sampling.dither_seed": 0}, stalls=[])
    line = report(copreport, d).splitlines()[2]
    assert line.startswith("sampling: %s, dither off" % words)
    assert as_json(copreport, d)["sampling"]["event"] == event
    old = make("ev-old", {1: 10}, [], {"stream.lfsr_count": 2003})
    assert as_json(copreport, old)["sampling"]["event"] is None
