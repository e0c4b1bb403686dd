"""The batch intervals of intervals.py on hand-built sessions: short
contexts (a few timeline buckets each, as real recordings have) pool
their blocks into their group's batches, blocks weigh by their size, the
header and the JSON say how many blocks of how many contexts (and how
many contexts of one block were taken as binomial)."""

import json
import math
import os
import shutil

import pytest

from coprof_report import intervals, profile
from coprof_report.session import Session

MAIN, BUMP = 0x103c, 0x1010     # overlay/'s test image (test_report_units)
BUCKET = 10000000


def test_block_variance_weighs_blocks_by_size():
    # blocks of 100, 300 and 600 samples holding 30, 60, 150 of the key:
    # r = 0.24, e = 6, -12, 6; V = M / (b - 1) * sum e^2 / m
    b = intervals.Blocks()
    for size, k in ((100, 30), (300, 60), (600, 150)):
        b.add("k", k, True)
        b.add("o", size - k, False)
    b.cut()
    assert b.sizes == [100, 300, 600]
    v, df = b.variance("k")
    assert df == 2
    assert v == pytest.approx(1000 / 2.0 * (36 / 100 + 144 / 300
                                            + 36 / 600))
    # the rest of the samples: the same residuals, the same variance
    assert b.variance("o")[0] == pytest.approx(v)


def test_batch_interval_has_t_of_its_blocks():
    # 8 alike contexts of 3 blocks: df = B - C = 16, t(16) = 2.12
    blocks = []
    for _ in range(8):
        b = intervals.Blocks()
        for k in (40, 50, 60):
            b.add("k", k, True)
            b.add("o", 100 - k, False)
        blocks.append(b.cut())
    assert intervals.batch_df(blocks) == 16
    p, lo, hi = intervals.batch_interval("k", 1200, 2400, blocks)
    v = 8 * 300 / 2.0 * (100 + 0 + 100) / 100.0   # e = -10, 0, 10
    assert p == 0.5
    assert hi - p == pytest.approx(intervals.t_quantile(16) *
                                   math.sqrt(v) / 2400)
    assert intervals.t_quantile(16) == pytest.approx(2.120, abs=0.002)


@pytest.fixture
def short_contexts(new_session, test_image, tmp_path):
    """9 contexts of the test image: 8 run 4 buckets (main and bump
    taking turns unevenly), the ninth one bucket."""
    d = str(tmp_path / "short")
    db = new_session(d, {"stream.samples": 0})
    os.makedirs(os.path.join(d, "images"))
    shutil.copy(test_image, os.path.join(d, "images", "0123-3040.elf"))
    db.execute("INSERT INTO images VALUES (1, '/gone/host', 12352, 1, 2, 3,"
               " '0123', 'ok', NULL, 'ovltest', ?, "
               "'images/0123-3040.elf', NULL)", (os.path.getsize(test_image),))
    total = 0
    for c in range(1, 10):
        db.execute("INSERT INTO contexts VALUES (?, ?, 100, 101, '0x10', 1,"
                   " 0, 0, NULL)", (c, 10 + c))
        mains = (60 + c, 70 - c, 65, 75) if c < 9 else (80,)
        for j, m in enumerate(mains):
            db.executemany("INSERT INTO sample_timeline VALUES (?,?,?,?,?)",
                           [(c, 1, j * BUCKET, MAIN, m),
                            (c, 1, j * BUCKET, BUMP, 100 - m)])
        db.executemany("INSERT INTO samples VALUES (?, 1, ?, 0, ?)",
                       [(c, MAIN, sum(mains)),
                        (c, BUMP, 100 * len(mains) - sum(mains))])
        total += 100 * len(mains)
    db.execute("UPDATE session SET value = ? WHERE key = 'stream.samples'",
               (total,))
    db.commit()
    db.close()
    return d


def test_short_contexts_pool_their_blocks(short_contexts, copreport):
    s = Session.open(short_contexts)
    g = profile.build(s, "none").groups[0]
    assert g.interval_method == "batches"
    assert [b.n_blocks for b in g.blocks] == [4] * 8
    assert g.binomial_contexts == 1
    rows = {r.symbol: r for r in g.sorted}
    assert rows["main"].interval_method == "batches"
    # the contexts' variances add, the ninth's binomial beside them
    p = rows["main"].samples / g.total
    v = sum(b.variance((1, MAIN))[0] for b in g.blocks) + 100 * p * (1 - p)
    df = intervals.batch_df(g.blocks)
    assert df == 24
    half = rows["main"].share[2] - p
    t = half * g.total / math.sqrt(v)
    # Satterthwaite's df: between one context's 3 and all of them, 24
    assert intervals.t_quantile(3) > t >= intervals.t_quantile(24) - 1e-9
    s.close()
    out = copreport("-d", short_contexts, "--format", "json", check=True)
    group = json.loads(out.stdout)["groups"][0]
    assert (group["interval_method"], group["interval_blocks"],
            group["interval_contexts"], group["binomial_contexts"]) == \
        ("batches", 32, 8, 1)
    text = copreport("-d", short_contexts, check=True).stdout
    assert "intervals from 32 blocks of 8 contexts (1 more of one block, " \
           "binomial)" in text, text


def test_one_context_of_few_blocks_keeps_wilson(short_contexts):
    # --separate=context: 4 blocks are 3 beyond the first, under
    # MIN_BATCH_DF: Wilson's, and the header says so
    s = Session.open(short_contexts)
    for g in profile.build(s, "context").groups:
        assert g.interval_method == "wilson"
        for r in g.sorted:
            assert r.share == profile.interval(r.samples, g.total)
    s.close()
