"""Do the report's 95% intervals hold the truth 95 times in 100?

examples/alias (a 7-instruction loop over alias_head 1/7, alias_mid 2/7,
alias_tail 4/7) is run by `cop-run --sample-every 14 --dither SEED` for
RUNS fixed seeds (1..RUNS: deterministic), 100,000 iterations each
(about 50,000 captures).  At N = 14 the jitter is at most +-3 cycles
(docs/trace-unit.md, "Dither"), narrower than the loop, so a capture's
place in the loop is tied to the previous one's for a few captures: the
samples of one context are correlated, as they are in any loop longer
than the jitter's width.

The truth is the run's exact counts (`--exact-counts`, the same for every
seed).  Each run's captures, in order, go through the report's own
interval code (coprof_report.intervals) as the report feeds it a
context's timeline: buckets of consecutive samples (here BUCKET captures,
as a poll group), cut into Blocks, and batch_interval().  Every function
above 1% must be inside its 95% interval in 93% to 97% of the 3 x RUNS
intervals, and each function in its 3-sigma band of 95% of RUNS (band():
one run does not decide); the test prints the coverage measured, and
Wilson's beside it (too narrow for correlated samples).

test_report_intervals_cover_the_truth goes through copreport's own
session path: RECORDINGS `coprof record --event=SPU_CYCLES:157` runs of
8 alias contexts (cop-host, 300,000 iterations each), seeds 1..40, each
reported by `copreport --format json --separate=none`; the rows'
ci_low/ci_high against the cycles' exact shares.  About 1.2 s a
recording on an idle machine (50 s in all; 190 s under a load of 15).
"""

import collections
import math
import shutil
import os
import subprocess
import sys

from elftools.elf.elffile import ELFFile

import exact_counts
import profile_truth

EVERY = 14
RUNS = 300
BUCKET = 64
ARGS = ["1", "100000"]
FUNCTIONS = ("alias_head", "alias_mid", "alias_tail")


def functions_of(image):
    """[(start, end, name)] of the image's function symbols (VMAs)."""
    with open(image, "rb") as f:
        symtab = ELFFile(f).get_section_by_name(".symtab")
        return sorted((s["st_value"], s["st_value"] + s["st_size"], s.name)
                      for s in symtab.iter_symbols()
                      if s["st_info"]["type"] == "STT_FUNC" and s["st_size"])


def name_at(funcs, pc):
    for start, end, name in funcs:
        if start <= pc < end:
            return name
    return None


def truth_of(cop_run, image, work, funcs):
    counts = os.path.join(work, "counts")
    subprocess.run([cop_run, "--event", "SPU_INSTRUCTIONS", "--sample-every", str(EVERY), "--exact-counts",
                    counts, image] + ARGS, check=True,
                   capture_output=True, timeout=120)
    by_name = collections.Counter()
    for run in exact_counts.read_counts(counts):
        for code in run.codes:
            for insn in code.insns:
                by_name[name_at(funcs, insn.pc)] += insn.count
    total = sum(by_name.values())
    return {n: c / total for n, c in by_name.items()}, total


def captures(cop_run, image, work, seed, funcs, ls_base):
    """The function of every capture of the seeded run, in order."""
    out = os.path.join(work, "samples")
    subprocess.run([cop_run, "--event", "SPU_INSTRUCTIONS", "--sample-every", str(EVERY), "--dither",
                    str(seed), "--fifo-full", "stall", "--samples-out", out,
                    image] + ARGS, check=True, capture_output=True,
                   timeout=120)
    names = {}
    with open(out) as f:
        lines = f.read().split()
    return [names.setdefault(a, name_at(funcs, ls_base + int(a, 16)))
            for a in lines]


def test_intervals_cover_the_truth(build_dir, coprof_bin, tmp_path):
    profile_truth.report_package(build_dir)
    from coprof_report import intervals
    image = os.path.join(build_dir, "examples", "alias.elf")
    cop_run = coprof_bin("cop-run")
    funcs = functions_of(image)
    truth, instructions = truth_of(cop_run, image, str(tmp_path), funcs)
    judged = [n for n in FUNCTIONS if truth[n] >= 0.01]
    assert judged == list(FUNCTIONS), truth
    covered = collections.Counter()
    wilson = collections.Counter()
    methods = collections.Counter()
    for seed in range(1, RUNS + 1):
        seq = captures(cop_run, image, str(tmp_path), seed, funcs,
                       0x80000000)
        n = len(seq)
        assert abs(n - instructions / EVERY) < 0.01 * n
        blocks = merged_buckets(intervals.Blocks(), seq)
        blocks.cut()
        methods[intervals.batch_df([blocks]) >= intervals.MIN_BATCH_DF] += 1
        counts = collections.Counter(seq)
        for name in judged:
            p, lo, hi = intervals.batch_interval(name, counts[name], n,
                                                 [blocks])
            covered[name] += lo <= truth[name] <= hi
            _, lo, hi = intervals.wilson(counts[name], n)
            wilson[name] += lo <= truth[name] <= hi
    report = ", ".join("%s %.1f%% (Wilson %.1f%%)"
                       % (n, 100.0 * covered[n] / RUNS,
                          100.0 * wilson[n] / RUNS) for n in judged)
    print("coverage of the 95%% intervals over %d runs: %s"
          % (RUNS, report), file=sys.stderr)
    assert methods == {True: RUNS}
    # the issue's 93-97% over the three functions' 3 x RUNS intervals
    # (2.7 binomial sigmas of 95% each side: one run does not decide),
    # and each function within 3 sigmas of 95% (91.2-98.8% of 300 runs)
    pooled = sum(covered.values()) / (3.0 * RUNS)
    assert 0.93 <= pooled <= 0.97, report
    low, high = band(RUNS)
    for name in judged:
        assert low <= covered[name] <= high, report


def band(runs, sigmas=3.0):
    """The counts of runs in which a 95% interval may hold the truth:
    within `sigmas` binomial standard errors of 95% of runs."""
    sd = math.sqrt(runs * 0.95 * 0.05)
    return math.ceil(0.95 * runs - sigmas * sd), \
        math.floor(0.95 * runs + sigmas * sd)


def merged_buckets(blocks, seq):
    """Blocks of seq fed as the report feeds a context's timeline: one
    bucket per BUCKET consecutive captures."""
    for at in range(0, len(seq), BUCKET):
        first = True
        for name, k in collections.Counter(seq[at:at + BUCKET]).items():
            blocks.add(name, k, first)
            first = False
    return blocks


RECORDINGS = 40
RECORDED_EVENT = "SPU_CYCLES:157"   # the fastest rate coprof takes
RECORDED_ARGS = ["1", "300000"]
# 2 ms timeline buckets: on an idle machine the contexts run in a few
# 10 ms buckets, too few blocks for batches (copreport then says Wilson)
RECORDED_BUCKET_MS = 2


def test_report_intervals_cover_the_truth(build_dir, coprof_bin,
                                          tmp_path):
    """The same through copreport's own session path: RECORDINGS seeded
    `coprof record` runs of 8 alias contexts on 8 slots, each reported
    by `copreport --format json --separate=none` (its rows' ci_low and
    ci_high), against the cycles' exact shares."""
    symbols = profile_truth.report_package(build_dir)
    host = os.path.join(build_dir, "tests", "cop-host")
    image = os.path.join(build_dir, "examples", "alias.elf")
    covered = collections.Counter()
    blocks = []
    for seed in range(1, RECORDINGS + 1):
        rec = profile_truth.record(
            coprof_bin("coprof"), coprof_bin("copreport"),
            tmp_path / str(seed),
            [host, "--contexts", "8", "--threads", "8", image] +
            RECORDED_ARGS,
            ["--event=" + RECORDED_EVENT, "--dither-seed=%d" % seed,
             "--timeline-ms=%d" % RECORDED_BUCKET_MS])
        truth = profile_truth.true_counts(rec, symbols, cycles=True)
        total = sum(truth.values())
        group, = rec.profile["groups"]
        assert group["interval_method"] == "batches", group
        # a context run within one timeline bucket counts as binomial
        assert group["interval_contexts"] >= 2, group
        assert group["interval_contexts"] + \
            group["binomial_contexts"] == 8, group
        blocks.append(group["interval_blocks"])
        rows = {r["symbol"]: r for r in rec.profile["rows"]}
        for (_, name, _), n in truth.items():
            if name in FUNCTIONS:
                share = 100.0 * n / total
                covered[name] += (rows[name]["ci_low"] <= share <=
                                  rows[name]["ci_high"])
        shutil.rmtree(str(tmp_path / str(seed)))
    report = ", ".join("%s %d/%d" % (n, covered[n], RECORDINGS)
                       for n in FUNCTIONS)
    print("copreport's 95%% intervals over %d recordings (%d-%d blocks of "
          "8 contexts): %s" % (RECORDINGS, min(blocks), max(blocks),
                               report), file=sys.stderr)
    # not too narrow: within 3 binomial sigmas of 95% of the 3 x
    # RECORDINGS intervals or above (measured 119 of 120: the first and
    # last buckets of a context hold its start-up code, a spread the
    # batches count as noise, so they are a little wide here)
    low, _ = band(3 * RECORDINGS)
    assert sum(covered.values()) >= low, report
