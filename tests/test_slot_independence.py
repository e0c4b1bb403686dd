"""Identical contexts on different slots are sampled independently, and
QEMU's reset code is no loss.

`coprof record --event=SPU_CYCLES:1001` (the issue's event; its truth is
the modelled cycles) and `--event=SPU_INSTRUCTIONS:1001` of 8 identical
contexts of examples/alias (its 7-instruction loop, 1 round: 7 M
instructions each) run at once by build/tests/cop-host on copsim's 8
slots, with the exact counts (profile_truth.record).  When every slot drew the same jitter the
8 contexts had exactly the same counts.  Now each slot draws its own
(docs/trace-unit.md, "One generator per slot"):

- no two contexts have the same samples per instruction;
- over all of them, each function's share is within SIGMAS binomial
  standard errors of its exact share (the test prints the sigmas);
- the report's intervals come from the batches of all 8 contexts (a
  few 10-ms buckets each) and hold each function's exact share.

A session whose only LOST records are outside-ls (a capture in QEMU's
reset code) reports lost=0 in copreport's totals, groups and footer, the capture
counted apart (totals.outside, "outside any context").
"""

import itertools
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


# the event, whose truth is the modelled cycles, and instructions
EVENTS = {"SPU_CYCLES": True, "SPU_INSTRUCTIONS": False}


@pytest.fixture(scope="module", params=sorted(EVENTS))
def recorded(request, build_dir, coprof_bin, tmp_path_factory):
    image = os.path.join(build_dir, "examples", "alias.elf")
    host = os.path.join(build_dir, "tests", "cop-host")
    rec = profile_truth.record(
        coprof_bin("coprof"), coprof_bin("copreport"),
        tmp_path_factory.mktemp("slots"),
        [host, "--contexts", str(CONTEXTS), "--threads", str(CONTEXTS),
         image, "1"],
        ["--event=%s:%d" % (request.param, COUNT), "--dither-seed=20261125",
         # 2 ms timeline buckets: enough blocks for batches on a fast machine
         "--timeline-ms=2"])
    return rec, EVENTS[request.param]


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
    recorded, _ = recorded
    counts = per_instruction(recorded.session)
    assert len(counts) == CONTEXTS
    same = [(a, b) for a, b in itertools.combinations(sorted(counts), 2)
            if counts[a] == counts[b]]
    assert not same, same


def test_shares_within_sigmas(recorded, build_dir):
    recorded, cycles = recorded
    symbols = profile_truth.report_package(build_dir)
    n = recorded.profile["totals"]["samples"]
    verdicts = profile_truth.judge(
        profile_truth.true_counts(recorded, symbols, cycles),
        profile_truth.sampled_counts(recorded.profile), n, 0.01, 1.0)
    sigmas = {v.key[1]: (v.got - v.share) / v.error for v in verdicts}
    print("8 contexts, %d samples: sigmas %s" % (n, ", ".join(
        "%s %+.2f" % kv for kv in sorted(sigmas.items()))), file=sys.stderr)
    assert set(sigmas) == {"alias_head", "alias_mid", "alias_tail"}
    assert all(abs(s) <= SIGMAS for s in sigmas.values()), sigmas
    assert recorded.profile["totals"]["lost"] == 0


def test_batch_intervals_hold_the_exact_shares(recorded, build_dir):
    """The 8 short contexts (a few 10-ms buckets each) pool their blocks
    into the group's batches (a context that ran within one bucket counts
    as binomial), and each function's exact share lies where a true 95%
    interval puts it (printed: where in its interval, -1..1 inside).  A
    95% interval misses now and then by design, so the bound is the
    3.5 sigmas of the other checks: SIGMAS / 1.96 half-widths."""
    recorded, cycles = recorded
    symbols = profile_truth.report_package(build_dir)
    group, = recorded.profile["groups"]
    assert group["interval_method"] == "batches", group
    assert group["interval_contexts"] >= 2, group
    assert group["interval_contexts"] + group["binomial_contexts"] == \
        CONTEXTS, group
    truth = profile_truth.true_counts(recorded, symbols, cycles)
    total = sum(truth.values())
    rows = {r["symbol"]: r for r in recorded.profile["rows"]}
    where = {}
    for (_, name, _), count in truth.items():
        if name in ("alias_head", "alias_mid", "alias_tail"):
            r, share = rows[name], 100.0 * count / total
            assert r["interval_method"] == "batches", r
            half = (r["ci_high"] - r["ci_low"]) / 2
            where[name] = (share - r["percent"]) / half
    print("%d blocks of 8 contexts: exact shares at %s of the intervals"
          % (group["interval_blocks"], ", ".join(
              "%s %+.2f" % kv for kv in sorted(where.items()))),
          file=sys.stderr)
    assert len(where) == 3, where
    assert all(abs(w) <= SIGMAS / 1.96 for w in where.values()), where


def with_reset_capture(session, tmp_path, only_a_reset_capture):
    """A copy of session whose only loss is one outside-ls capture."""
    copy = str(tmp_path / "session")
    shutil.copytree(session, copy)
    only_a_reset_capture(copy)
    return copy


def test_reset_code_is_no_loss(recorded, coprof_bin, tmp_path,
                               only_a_reset_capture):
    recorded, _ = recorded
    copy = with_reset_capture(recorded.session, tmp_path,
                              only_a_reset_capture)
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


def cop_run_captures(cop_run, image, event, seed, args, out, slot=None):
    """The local-store addresses of cop-run's captures, in order."""
    cmd = [cop_run, "--event", event, "--sample-every", str(COUNT),
           "--fifo-full", "stall", "--samples-out", out]
    if seed is not None:
        cmd += ["--dither", str(seed)]
    if slot is not None:
        cmd += ["--slot", str(slot)]
    subprocess.run(cmd + [image] + args, check=True, capture_output=True,
                   timeout=300)
    with open(out) as f:
        return [int(a, 16) for a in f.read().split()]


def test_first_interval_is_dithered(build_dir, coprof_bin, tmp_path):
    """Interval 0 after a load is N + J(seed, 0) too: the first capture
    moves with the seed (docs/trace-unit.md, "The jitter")."""
    image = os.path.join(build_dir, "examples", "alias.elf")
    out = str(tmp_path / "samples")
    first = {seed: cop_run_captures(coprof_bin("cop-run"), image,
                                    "SPU_INSTRUCTIONS", seed, ["1", "1000"],
                                    out)[0]
             for seed in (None, 1, 2, 3, 4, 5, 6)}
    print("first captures: %s" % ", ".join(
        "%s 0x%x" % kv for kv in first.items()), file=sys.stderr)
    dithered = [first[s] for s in range(1, 7)]
    assert len(set(dithered)) >= 4, first
    assert sum(pc != first[None] for pc in dithered) >= 5, first


def file_offsets(image):
    """ls address -> file offset, by the image's loadable segments (the
    local store is the image's VMAs less 0x80000000)."""
    from elftools.elf.elffile import ELFFile
    with open(image, "rb") as f:
        segments = [(s["p_vaddr"] - 0x80000000, s["p_filesz"],
                     s["p_offset"]) for s in ELFFile(f).iter_segments()
                    if s["p_type"] == "PT_LOAD"]

    def offset(ls):
        for start, size, off in segments:
            if start <= ls < start + size:
                return off + ls - start
        return None
    return offset


def test_cop_run_reproduces_a_slot(recorded, build_dir, coprof_bin,
                                   tmp_path):
    """`cop-run --dither S --slot i` is the capture sequence of a context
    that ran alone on slot i > 0 of a session recorded with seed S: the
    same samples at every instruction."""
    recorded, cycles = recorded
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(
        recorded.session, "session.db"), uri=True)
    try:
        alone = {ctx: slot for ctx, n, slot in db.execute(
            "SELECT context, COUNT(*), MIN(slot) FROM bindings "
            "GROUP BY context") if n == 1}
    finally:
        db.close()
    ctx, slot = max(alone.items(), key=lambda kv: kv[1])
    assert slot > 0, alone
    image = os.path.join(build_dir, "examples", "alias.elf")
    event = "SPU_CYCLES" if cycles else "SPU_INSTRUCTIONS"
    offset = file_offsets(image)
    want = {}
    for ls in cop_run_captures(coprof_bin("cop-run"), image, event,
                               20261125, ["1"], str(tmp_path / "samples"),
                               slot):
        off = offset(ls)
        if off is not None:
            want[off] = want.get(off, 0) + 1
    got = per_instruction(recorded.session)[ctx]
    print("context %d on slot %d: %d samples, cop-run's %d"
          % (ctx, slot, sum(got.values()), sum(want.values())),
          file=sys.stderr)
    assert got == want
