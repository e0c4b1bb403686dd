"""The timeline as a PNG (matplotlib, Agg backend: no display needed).

Two panels sharing the time axis (milliseconds since the stream's START,
CLOCK_MONOTONIC): above, slot occupancy, a bar per binding of a context to
a slot, one colour per context; below, the top functions over time, the
exact samples per time bucket of the functions with the most samples
(all contexts summed), the rest as "other".
"""

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt   # noqa: E402

TOP = 8


def write_png(tl, path, title=None):
    """Draw Timeline tl to path (PNG).  OSError when path is unwritable."""
    t0 = tl.start_ns
    if t0 is None:
        starts = [b.start_ns for b in tl.bindings] + \
            [b for b, _ in tl.buckets]
        t0 = min(starts) if starts else 0

    def ms(ns):
        return (ns - t0) / 1e6

    fig, (top, bottom) = plt.subplots(
        2, 1, sharex=True, figsize=(11, 6.5),
        gridspec_kw={"height_ratios": [1, 1.4]})
    cmap = plt.get_cmap("tab20")
    ids = sorted(tl.contexts)
    colour = {c: cmap(i % 20) for i, c in enumerate(ids)}
    slots = sorted({b.slot for b in tl.bindings})
    for b in tl.bindings:
        top.broken_barh([(ms(b.start_ns), max(ms(b.end_ns) - ms(b.start_ns),
                                              1e-3))],
                        (b.slot - 0.4, 0.8),
                        facecolors=colour.get(b.context, "grey"),
                        edgecolor="black", linewidth=0.3)
    for c in ids:
        top.bar(0, 0, color=colour[c], label=context_short(tl, c))
    top.set_yticks(slots)
    top.set_yticklabels(["slot %d" % s for s in slots])
    top.set_ylim(-0.6, (max(slots) if slots else 0) + 0.6)
    top.invert_yaxis()
    top.set_title(title or "slot occupancy")
    if ids:
        top.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)

    totals = {}
    for (bucket, fn), n in tl.buckets.items():
        totals[fn] = totals.get(fn, 0) + n
    best = sorted(totals, key=lambda f: (-totals[f], f))[:TOP]
    buckets = sorted({b for b, _ in tl.buckets})
    xs = [ms(b) for b in buckets]
    series = []
    for fn in best:
        series.append([tl.buckets.get((b, fn), 0) for b in buckets])
    per_bucket = {}
    for (b, fn), n in tl.buckets.items():
        per_bucket[b] = per_bucket.get(b, 0) + n
    rest = [per_bucket[b] - sum(ys[i] for ys in series)
            for i, b in enumerate(buckets)]
    labels = list(best)
    if any(rest):
        series.append(rest)
        labels.append("other")
    width = tl.bucket_ns / 1e6 if tl.bucket_ns else 1.0
    if xs and series:
        cm = plt.get_cmap("tab10")
        base = [0] * len(xs)
        for i, (ys, label) in enumerate(zip(series, labels)):
            bottom.bar(xs, ys, width=width, bottom=base, align="edge",
                       color=cm(i % 10) if label != "other" else "lightgrey",
                       label=label, linewidth=0)
            base = [a + b for a, b in zip(base, ys)]
        bottom.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)
    else:
        bottom.text(0.5, 0.5, "no sample timeline in this session",
                    ha="center", va="center", transform=bottom.transAxes)
    bottom.set_ylabel("samples per %g ms" % (tl.bucket_ns / 1e6)
                      if tl.bucket_ns else "samples")
    bottom.set_xlabel("ms since the stream's start (CLOCK_MONOTONIC)")
    bottom.set_title("top functions over time")
    fig.tight_layout()
    try:
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)


def context_short(tl, c):
    info = tl.contexts[c]
    return "%d %s" % (c, info.image.short_name if info.image else "?")
