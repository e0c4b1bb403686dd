"""The timeline as a PNG (matplotlib, Agg backend: no display needed).

Two panels sharing the time axis (milliseconds since the stream's START,
CLOCK_MONOTONIC): above, slot occupancy, a bar per binding of a context to
a slot, one colour per context; below, the top functions over time, the
exact samples per time bucket of the functions with the most samples
(all contexts summed), the rest as "other".  A session with the host
side gets a third panel, host_panel(): a row per host thread of the host
program (and copsim's QEMUs), coloured by its state (running, runnable,
blocked) from the Linux scheduler's events, with its host samples as
ticks.
"""

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt   # noqa: E402

TOP = 8
HOST_COLOURS = {"running": "tab:green", "runnable": "tab:orange",
                "blocked": "lightgrey"}
HOST_ROLES = ("command", "qemu")    # copsim's own threads left out


def write_png(tl, path, title=None):
    """Draw Timeline tl to path (PNG).  OSError when path is unwritable."""
    t0 = tl.start_ns
    if t0 is None:
        starts = [b.start_ns for b in tl.bindings] + \
            [b for b, _ in tl.buckets]
        t0 = min(starts) if starts else 0

    def ms(ns):
        return (ns - t0) / 1e6

    host_tids = host_tracks(tl)
    panels = plt.subplots(
        3 if host_tids else 2, 1, sharex=True,
        figsize=(11, 9.5 if host_tids else 6.5),
        gridspec_kw={"height_ratios": [1, 1.4, 1.2] if host_tids
                     else [1, 1.4]})
    fig, (top, bottom) = panels[0], panels[1][:2]
    if host_tids:
        host_panel(panels[1][2], tl, host_tids, ms)
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


def host_tracks(tl):
    """The host threads to draw: the host program's and the QEMUs' that
    have states, in tid order."""
    host = getattr(tl, "host", None)
    if host is None:
        return []
    return sorted(tid for tid in tl.host_states
                  if host.threads.get(tid) is not None and
                  host.threads[tid]["role"] in HOST_ROLES)


def host_panel(ax, tl, tids, ms):
    """A row per host thread: its states as bars, its samples as ticks."""
    from .timeline import host_thread_label
    row = {tid: i for i, tid in enumerate(tids)}
    for tid in tids:
        for state in HOST_COLOURS:
            spans = [(ms(iv.start_ns), max(ms(iv.end_ns) - ms(iv.start_ns),
                                           1e-3))
                     for iv in tl.host_states[tid] if iv.state == state]
            if spans:
                ax.broken_barh(spans, (row[tid] - 0.35, 0.7),
                               facecolors=HOST_COLOURS[state], linewidth=0)
    xs = [ms(s[0]) for s in tl.host_samples if s[1] in row]
    ys = [row[s[1]] for s in tl.host_samples if s[1] in row]
    if xs:
        ax.plot(xs, ys, "|", color="black", markersize=6, label="sample")
    for state, colour in HOST_COLOURS.items():
        ax.bar(0, 0, color=colour, label=state)
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([host_thread_label(tl, t) for t in tids], fontsize=6)
    ax.set_ylim(-0.6, len(tids) - 0.4)
    ax.invert_yaxis()
    ax.set_title("host threads (Linux scheduler) and host samples")
    ax.set_xlabel("ms since the stream's start (CLOCK_MONOTONIC)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7)


def context_short(tl, c):
    info = tl.contexts[c]
    return "%d %s" % (c, info.image.short_name if info.image else "?")
