"""The 95% intervals of a row's share: Wilson's for independent samples,
and one from batches of consecutive samples when there are enough.

A share k/n is a count of samples over its group's.  Wilson's score
interval (wilson()) is right when the n samples are independent draws;
samples of one context are not (a loop longer than the dither's jitter
keeps a capture near the previous one's place for a few captures; a
context goes through phases), and the truth then lies outside Wilson's
interval more often than 5 times in 100.

What is independent: contexts, since every slot draws its own jitter
(docs/trace-unit.md, "One generator per slot") and a context's captures
depend on no other's; and, within a context, stretches of consecutive
samples longer than the span over which one capture's place is tied to
the next.  So a group's count K is a sum over its contexts, each
context's part is estimated from blocks of its consecutive samples
(Blocks: the session's sample_timeline, in time order), and the parts
add.  Every context of the group with two blocks or more takes part:
the blocks of all of them are the group's batches, B of them over C
contexts.

- per context with b >= 2 blocks of m_j samples holding s_j of the row's,
  M = sum m, r = sum s / M and e_j = s_j - r m_j, its variance is that of
  batch means weighted by the block's size:
  V = M / (b - 1) * sum_j e_j^2 / m_j.
  A block of m samples has the variance m D r (1 - r) when D is the
  context's design effect (1 for independent samples, more when they
  are tied), so each e_j^2 / m_j estimates D r (1 - r) (1 - m_j / M),
  the sum of which is b - 1 times D r (1 - r); M times that is Var(K).
  With equal blocks this is b / (b - 1) * sum e_j^2, the batch means'
  variance; with independent samples its mean is Wilson's M r (1 - r).
  It has b - 1 degrees of freedom;
- a context with one block (a run shorter than a timeline bucket, 10
  ms) adds the binomial n_c p (1 - p);
- the interval is p +- t(df) sqrt(sum V) / n, t Student's quantile, df
  by Satterthwaite over the contexts (B - C when their V are alike),
  clipped to [0, 1].

It is used (method "batches") when B - C >= MIN_BATCH_DF (t(10) is 2.23,
14% over the normal's 1.96: fewer batches would widen every interval
more than the correlation they catch); a row with fewer than
MIN_ROW_SAMPLES samples in or out of it, and every row that is not exact
(ambiguous, unmapped, orphan: not in the timeline), keeps Wilson's.

What a batch interval covers: the sampling noise of the capture process
however its captures are tied, when a block is long against the ties
(the 10 ms buckets hold thousands of samples; a loop ties a few tens).
What it does not: a block's mix of functions changes with the program's
phases too (host-pipeline's stages run a bucket or two each), and the
spread of deterministic phases counts as noise: such a group's interval
is wider than its sampling noise (host-pipeline: 6 to 19 times Wilson's
width), never narrower.

Neither interval covers a bias: aliasing without dither, captures lost
where a FIFO overflowed, ambiguous samples left out of their function.
"""

import math

Z95 = 1.959963984540054
MAX_BLOCKS = 20         # blocks per context
MIN_BLOCK_SAMPLES = 50  # a context is cut into blocks of at least this many
MIN_CONTEXT_BLOCKS = 2  # fewer blocks: the context counts as binomial
MIN_BATCH_DF = 10       # B - C: blocks beyond each context's first
MIN_ROW_SAMPLES = 20    # fewer samples in (or out of) a row: Wilson's


def wilson(k, n, z=Z95):
    """(p, low, high) of a share k/n with its 95% Wilson score interval
    (another confidence with its z): the p0 for which |k/n - p0| <=
    z sqrt(p0 (1 - p0) / n), that is
    (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    if n <= 0:
        return 0.0, 0.0, 0.0
    p = k / n
    z2 = z * z
    scale = 1.0 + z2 / n
    centre = (p + z2 / (2.0 * n)) / scale
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / scale
    # the bounds are exact at 0 and 1; rounding must not cross p
    return p, min(p, max(0.0, centre - half)), max(p, min(1.0, centre + half))


def t_quantile(df, z=Z95):
    """The Student t quantile with df degrees of freedom matching the
    normal one z (1.96: 97.5%), by its Cornish-Fisher expansion in 1/df
    (within 0.002 of the table from df = 3 on; the normal's at
    df = infinity)."""
    if df == math.inf:
        return z
    df = max(df, 1.0)
    z3, z5, z7, z9 = z ** 3, z ** 5, z ** 7, z ** 9
    return (z + (z3 + z) / (4 * df)
            + (5 * z5 + 16 * z3 + 3 * z) / (96 * df ** 2)
            + (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * df ** 3)
            + (79 * z9 + 776 * z7 + 1482 * z5 - 1920 * z3 - 945 * z)
            / (92160 * df ** 4))


class Blocks:
    """One context's samples in blocks of consecutive ones: add() its
    time buckets in order (a bucket's samples by row key), then cut().
    total: its samples; sizes[j] and counts[key][j]: block j's."""

    def __init__(self):
        self.buckets = []       # [(samples, {key: samples})], in order
        self.total = 0
        self.sizes = []
        self.counts = {}
        self.weight = 1.0       # the context's samples per timeline sample

    def add(self, key, count, new_bucket):
        if new_bucket or not self.buckets:
            self.buckets.append([0, {}])
        bucket = self.buckets[-1]
        bucket[0] += count
        bucket[1][key] = bucket[1].get(key, 0) + count
        self.total += count

    def cut(self):
        """Cuts the buckets into at most MAX_BLOCKS blocks of nearly equal
        samples (a bucket is never split), none under MIN_BLOCK_SAMPLES
        but by the bucket's own size."""
        wanted = min(MAX_BLOCKS, self.total // MIN_BLOCK_SAMPLES)
        self.sizes, self.counts = [], {}
        before = 0
        for size, keys in self.buckets:
            j = before * wanted // self.total if wanted else 0
            if j >= len(self.sizes):
                self.sizes.append(0)
            j = len(self.sizes) - 1
            self.sizes[j] += size
            for key, n in keys.items():
                row = self.counts.setdefault(key, [])
                row.extend([0] * (j + 1 - len(row)))
                row[j] += n
            before += size
        self.buckets = None
        return self

    @property
    def n_blocks(self):
        return len(self.sizes)

    def variance(self, key):
        """(V, df): the variance of the context's count of key by its
        blocks' batch means, weighted by their sizes, and its degrees of
        freedom (b - 1)."""
        b = len(self.sizes)
        counts = self.counts.get(key, [])
        counts = counts + [0] * (b - len(counts))
        r = sum(counts) / self.total
        v = self.total / (b - 1.0) * sum((s - r * m) ** 2 / m
                                         for s, m in zip(counts, self.sizes))
        return v * self.weight, b - 1.0


def batch_df(blocks):
    """The blocks beyond the first of each context of `blocks`."""
    return sum(max(b.n_blocks - 1, 0) for b in blocks)


def batch_interval(key, k, n, blocks, others=0):
    """(p, low, high) of the share k/n of the row with key, from its
    group's contexts' Blocks (those with two blocks or more) and `others`
    samples of contexts without (binomial).  None when it does not apply
    (see the module's comment): the caller keeps Wilson's."""
    if n <= 0 or k < MIN_ROW_SAMPLES or n - k < MIN_ROW_SAMPLES:
        return None
    p = k / n
    parts = [b.variance(key) for b in blocks if b.n_blocks >= 2]
    v = sum(x for x, _ in parts) + others * p * (1.0 - p)
    weights = sum(x * x / d for x, d in parts if d > 0)
    df = (sum(x for x, _ in parts) ** 2 / weights) if weights else math.inf
    half = t_quantile(df) * math.sqrt(max(v, 0.0)) / n
    return p, max(0.0, p - half), min(1.0, p + half)
