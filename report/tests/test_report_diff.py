"""copreport diff and several sessions in one report (-d A -d B).

diff, on knob (report/tests/knob) recorded with coprof record at fixed
dither seeds: two runs of the same build flag no row; against the build
whose knob_work is twice as slow, knob_work and only it is flagged, its
share about doubled.  The z test and Holm's correction against values
worked by hand.  Several sessions: the totals and every row are the sums
of the sessions', contexts are kept apart and labelled with their
session, and sessions sampled at different periods are refused.
"""

import json
import math

import pytest

from coprof_report import diff


def _diff(copreport, old, new):
    p = copreport("diff", old, new, "--format", "json", check=True)
    return json.loads(p.stdout)


def test_same_workload_no_change(knob, copreport):
    d = _diff(copreport, knob.a, knob.b)
    assert d["rows"] and all(r["significant"] is False for r in d["rows"])
    assert d["old_samples"] > 5000 and d["new_samples"] > 5000


def test_slower_function_flagged_alone(knob, copreport):
    d = _diff(copreport, knob.a, knob.slow)
    flagged = [r["symbol"] for r in d["rows"] if r["significant"]]
    assert flagged == ["knob_work"]
    assert d["rows"][0]["symbol"] == "knob_work"        # sorted
    row = d["rows"][0]
    assert row["image"] == "knob"          # matched by name: rebuilt
    assert 1.6 < row["new_percent"] / row["old_percent"] < 2.4
    assert row["change"] > 0
    for r in d["rows"]:
        assert isinstance(r["significant"], bool)
        assert r["change"] == pytest.approx(r["new_percent"] -
                                            r["old_percent"], abs=1e-3)
    p_values = [r["p_value"] for r in d["rows"]]
    assert p_values == sorted(p_values)


def test_text_and_csv(knob, copreport):
    text = copreport("diff", knob.a, knob.slow, check=True).stdout
    assert "1 of " in text and "rows changed beyond sampling noise" in text
    line = [l for l in text.splitlines() if l.endswith(" knob_work")][0]
    assert " yes " in line
    csv = copreport("diff", knob.a, knob.slow, "--format", "csv",
                    check=True).stdout.splitlines()
    assert csv[0].split(",")[-1] == "significant"
    assert csv[1].startswith("knob_work,") and csv[1].endswith(",1")


def test_two_proportion_by_hand():
    # 30 of 100 against 50 of 100: p = 0.4, se = sqrt(.24 * .02)
    z, p = diff.two_proportion(30, 100, 50, 100)
    assert z == pytest.approx(0.2 / math.sqrt(0.24 * 0.02))
    assert p == pytest.approx(math.erfc(abs(z) / math.sqrt(2)))
    assert diff.two_proportion(5, 10, 5, 10) == (0.0, 1.0)
    assert diff.two_proportion(0, 0, 5, 10) == (0.0, 1.0)


def test_holm_steps_down():
    rows = [diff.DiffRow("i", "", n, "exact") for n in "abcd"]
    for r, p in zip(rows, (0.001, 0.013, 0.03, 0.04)):
        r.p_value = p
    diff.holm(rows, 0.05)
    # 0.001 <= .05/4; 0.013 <= .05/3; 0.03 > .05/2: stops there, and
    # 0.04 < .05/1 is not significant after it
    assert [r.significant for r in rows] == [True, True, False, False]


def test_diff_errors(knob, copreport, tmp_path):
    p = copreport("diff", knob.a)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    p = copreport("diff", knob.a, str(tmp_path / "none"))
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert "none: no such directory" in p.stderr


def _report(copreport, *args):
    return json.loads(copreport("--format", "json", *args,
                                check=True).stdout)


def test_several_sessions_summed(knob, copreport):
    a = _report(copreport, "-d", knob.a)
    b = _report(copreport, "-d", knob.b)
    ab = _report(copreport, "-d", knob.a, "-d", knob.b)
    for k in ("exact", "samples", "lost"):
        assert ab["totals"][k] == a["totals"][k] + b["totals"][k]
    rows = {}
    for r in a["rows"] + b["rows"]:
        rows[r["symbol"]] = rows.get(r["symbol"], 0) + r["samples"]
    assert {r["symbol"]: r["samples"] for r in ab["rows"]} == rows
    assert len(ab["images"]) == 1          # the same image: one
    assert sum(r["percent"] for r in ab["rows"]) == pytest.approx(100)
    assert ab["session"] == "%s + %s" % (knob.a, knob.b)


def test_several_sessions_contexts_apart(knob, copreport):
    sep = _report(copreport, "-d", knob.a, "-d", knob.b,
                  "--separate=context")
    labels = [g["label"] for g in sep["groups"]]
    assert labels == ["%s: context 1" % knob.a, "%s: context 1" % knob.b]
    a = _report(copreport, "-d", knob.a)
    assert sep["groups"][0]["total"] == a["totals"]["samples"]
    assert [c["session"] for c in sep["contexts"]] == [knob.a, knob.b]
    assert a["contexts"][0]["session"] is None
    text = copreport("-d", knob.a, "-d", knob.b, "--separate=context",
                     check=True).stdout
    assert "%s: context 1: pid " % knob.b in text


def test_several_sessions_other_period_refused(knob, copreport):
    p = copreport("-d", knob.a, "-d", knob.other_rate)
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert "different periods (997, 2003 cycles)" in p.stderr


def test_several_sessions_by_image_and_slot(knob, copreport):
    a = _report(copreport, "-d", knob.a)
    b = _report(copreport, "-d", knob.b)
    for how in ("image", "slot"):
        ab = _report(copreport, "-d", knob.a, "-d", knob.b,
                     "--separate=" + how)
        (g,) = ab["groups"]         # one image, one slot: one group each
        assert g["total"] == a["totals"]["samples"] + b["totals"]["samples"]
    ab = _report(copreport, "-d", knob.a, "-d", knob.slow,
                 "--separate=image")
    # knob-slow.elf is other bytes: another image of the same name
    assert len(ab["groups"]) == 2 and len(ab["images"]) == 2
