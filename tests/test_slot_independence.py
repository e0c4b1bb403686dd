"""Identical contexts on different slots are sampled independently, and
QEMU's reset code is no loss.

`coprof record --event=SPU_INSTRUCTIONS:1001` of 8 identical contexts of
examples/alias (its 7-instruction loop, 1 round: 7 M instructions each)
run at once by build/tests/cop-host on copsim's 8 slots, with the exact
counts (profile_truth.record).  When every slot drew the same jitter the
8 contexts had exactly the same counts.  Now each slot draws its own
(docs/trace-unit.md, "One generator per slot"):

- no two contexts have the same samples per instruction;
- over all of them, each function's share is within SIGMAS binomial
  standard errors of its exact share (the test prints the sigmas).

A session whose only LOST records are outside-ls (a capture in QEMU's
reset code) reports lost=0 in copreport's totals, groups and footer, the capture
counted apart (totals.outside, "outside any context").
"""

import itertools
import math
import os
import shutil
import sqlite3
import subprocess
import sys
import json

import pytest

import profile_truth

COUNT = 1001
CONTEXTS = 8
SIGMAS = 3.5


@pytest.fixture(scope="module")
def recorded(build_dir, coprof_bin, tmp_path_factory):
    image = os.path.join(build_dir, "examples", "alias.elf")
    host = os.path.join(build_dir, "tests", "cop-host")
    return profile_truth.record(
        coprof_bin("coprof"), coprof_bin("copreport"),
        tmp_path_factory.mktemp("slots"),
        [host, "--contexts", str(CONTEXTS), "--threads", str(CONTEXTS),
         image, "1"],
        ["--event=SPU_INSTRUCTIONS:%d" % COUNT, "--dither-seed=20261125"])


def per_instruction(session):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(session,
                                                          "session.db"),
                         uri=True)
    try:
        out = {}
        for ctx, off, n in db.execute(
                "SELECT context, file_offset, SUM(count) FROM samples "
                "GROUP BY context, file_offset"):
            out.setdefault(ctx, {})[off] = n
        return out
    finally:
        db.close()


def test_contexts_differ(recorded):
    counts = per_instruction(recorded.session)
    assert len(counts) == CONTEXTS
    same = [(a, b) for a, b in itertools.combinations(sorted(counts), 2)
            if counts[a] == counts[b]]
    assert not same, same


def test_shares_within_sigmas(recorded, build_dir):
    symbols = profile_truth.report_package(build_dir)
    n = recorded.profile["totals"]["samples"]
    verdicts = profile_truth.judge(
        profile_truth.true_counts(recorded, symbols),
        profile_truth.sampled_counts(recorded.profile), n, 0.01, 1.0)
    sigmas = {v.key[1]: (v.got - v.share) / v.error for v in verdicts}
    print("8 contexts, %d samples: sigmas %s" % (n, ", ".join(
        "%s %+.2f" % kv for kv in sorted(sigmas.items()))), file=sys.stderr)
    assert set(sigmas) == {"alias_head", "alias_mid", "alias_tail"}
    assert all(abs(s) <= SIGMAS for s in sigmas.values()), sigmas
    assert recorded.profile["totals"]["lost"] == 0


def with_reset_capture(session, tmp_path):
    """A copy of session whose only loss is one outside-ls capture."""
    copy = str(tmp_path / "session")
    shutil.copytree(session, copy)
    db = sqlite3.connect(os.path.join(copy, "session.db"))
    try:
        db.execute("DELETE FROM lost_events")
        db.execute("INSERT INTO lost_events (slot, context, cause, "
                   "cause_name, count, cycle) VALUES (0, NULL, 4, "
                   "'outside-ls', 1, 3)")
        db.commit()
    finally:
        db.close()
    return copy


def test_reset_code_is_no_loss(recorded, coprof_bin, tmp_path):
    copy = with_reset_capture(recorded.session, tmp_path)
    rep = subprocess.run([coprof_bin("copreport"), "-d", copy,
                          "--separate=context", "--format", "json"],
                         capture_output=True, text=True, timeout=300)
    assert rep.returncode == 0, rep.stderr
    profile = json.loads(rep.stdout)
    assert profile["totals"]["lost"] == 0
    assert profile["totals"]["outside"] == 1
    assert all(g["lost"] == 0 for g in profile["groups"])
    assert profile["warnings"] == []
    text = subprocess.run([coprof_bin("copreport"), "-d", copy],
                          capture_output=True, text=True, timeout=300)
    assert "\nlost 0 samples\n" in text.stdout, text.stdout
    assert "outside any context 1 capture " in text.stdout
