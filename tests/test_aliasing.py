"""Aliasing, and the dither that fixes it.

examples/alias runs a loop of exactly 7 instructions over three functions
(alias_head 1/7, alias_mid 2/7, alias_tail 4/7).  Sampled every
N = 1001 = 7 x 143 instructions (SPU_INSTRUCTIONS, whose truth is the
exact instruction counts), a fixed period puts every capture of a round
on the same instruction of the loop, so the function shares are wrong by
far more than their intervals say.  `coprof record` profiles it (one
context, through build/tests/cop-host, on a private copsim whose
reference mode also writes the exact instruction counts) three times:

- with the dither (the default, a fixed seed here): every function above
  1% lies within 3 binomial standard errors of its exact share;
- with --no-dither: the bias is there (asserted, so that this test proves
  the dither is what removes it): some function is off by more than 10
  points and 10 standard errors;
- with the same seed again: the very same samples, since a dithered
  capture sequence depends only on the seed and the instruction stream.

One context and no other: copsim preempts nobody, so without dither each
round's captures keep one phase of the loop.  Two rounds (14 million
instructions, 14,000 samples): whatever the phases, at least one function
is off by 1/7 or more.
"""

import os
import sqlite3

import pytest

import profile_truth

COUNT = 1001            # 7 x 143: the loop's length divides it
ROUNDS = "2"
SEED = "20261125"
ABOVE = 0.01
SIGMAS = 3.0
FUNCTIONS = {"alias_head": 1 / 7, "alias_mid": 2 / 7, "alias_tail": 4 / 7}


@pytest.fixture(scope="module")
def record_alias(build_dir, coprof_bin, tmp_path_factory):
    image = os.path.join(build_dir, "examples", "alias.elf")
    host = os.path.join(build_dir, "tests", "cop-host")
    for path in (image, host):
        if not os.path.isfile(path):
            pytest.fail("%s is not built: run make" % path)
    made = {}

    def get(name, flags):
        if name not in made:
            made[name] = profile_truth.record(
                coprof_bin("coprof"), coprof_bin("copreport"),
                tmp_path_factory.mktemp("alias-" + name), [host, image,
                                                           ROUNDS],
                ["--event=SPU_INSTRUCTIONS:%d" % COUNT] + flags)
        return made[name]
    return get


def verdicts(rec, build_dir):
    symbols = profile_truth.report_package(build_dir)
    n = rec.profile["totals"]["samples"]
    assert n > 10000, "too few samples to judge: %d" % n
    return profile_truth.judge(profile_truth.true_counts(rec, symbols),
                               profile_truth.sampled_counts(rec.profile), n,
                               ABOVE, SIGMAS)


def check_truth(vs):
    """The exact counts say what the loop is: 1, 2 and 4 of 7."""
    shares = {v.key[1]: v.share for v in vs}
    assert set(shares) == set(FUNCTIONS), shares
    for name, share in FUNCTIONS.items():
        assert shares[name] == pytest.approx(share, abs=1e-3)


def test_dither_gives_the_true_shares(record_alias, build_dir):
    rec = record_alias("dither", ["--dither-seed=" + SEED])
    smp = rec.profile["sampling"]
    assert (smp["dither"], smp["dither_seed"]) == ("on", int(SEED))
    assert rec.profile["totals"]["lost"] == 0
    vs = verdicts(rec, build_dir)
    check_truth(vs)
    wrong = [profile_truth.describe(v) for v in vs
             if abs(v.got - v.share) > v.error]
    assert not wrong, "; ".join(wrong)


def test_fixed_period_aliases(record_alias, build_dir):
    rec = record_alias("fixed", ["--no-dither"])
    assert rec.profile["sampling"]["dither"] == "off"
    vs = verdicts(rec, build_dir)
    check_truth(vs)
    worst = max(vs, key=lambda v: abs(v.got - v.share))
    off = abs(worst.got - worst.share)
    # 3 standard errors is v.error: 10 of them is v.error * 10 / 3
    assert off > 0.10 and off > worst.error * 10 / SIGMAS, \
        profile_truth.describe(worst)


def samples_of(rec):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(rec.session,
                                                          "session.db"),
                         uri=True)
    try:
        return db.execute("SELECT file_offset, SUM(count) FROM samples "
                          "GROUP BY file_offset ORDER BY file_offset"
                          ).fetchall()
    finally:
        db.close()


def test_same_seed_same_samples(record_alias):
    first = record_alias("dither", ["--dither-seed=" + SEED])
    again = record_alias("again", ["--dither-seed=" + SEED])
    assert samples_of(first) == samples_of(again)
    other = record_alias("other", ["--dither-seed=7"])
    assert samples_of(other) != samples_of(first)
