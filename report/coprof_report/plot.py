"""The timeline as a PNG (matplotlib, Agg backend: no display needed).

Two panels share the time axis, in ms since the stream's START
(CLOCK_MONOTONIC), and one legend on the right:

- "slots": a row per slot that did something (a binding or an event
  names it; the title names the session's other slots as unused), plus
  a "scheduler" row on top.  Each binding of a context to a slot is a bar
  outlined in black and labelled with the context's number and image (the
  numbers of the report's headers); inside, the bar is coloured by the
  function that context ran, bucket by bucket (the timeline's slices),
  and white where a bucket had no exact sample.  A
  slot's time with no context bound is hatched grey and labelled "idle";
  a slot no context ever used says so in its row.  The scheduler's
  events are markers: bind, preempt, unbind, exit, fault on their slot's
  row, the events that name no slot (create, load, run, destroy, ...) on
  the scheduler row.  The time from the START to the first sample (the
  start of its bucket: the host program starting, then, since copsim
  starts a slot's emulator when its first context comes, contexts bound
  while their emulators boot) is shaded and labelled; when it is more
  than BOOT_COMPRESS (10%) of the session it is drawn compressed to 5%
  of the axis, left of a dashed break, and the ticks and the axis label
  say the real times (_Axis).  The session records no "booted" event,
  so the first sample is where the work is known to start.
- "functions": the exact samples per time bucket of the TOP functions
  with the most samples (all contexts summed), stacked, the rest as
  "other functions".

A session with the host side (coprof-host) gets a third panel,
"host threads" (host_panel()): a row per thread of the host program and
of copsim's QEMUs that ran or was sampled, named by its comm and tid,
coloured by its state from the Linux scheduler's
events (running, runnable, blocked), with its host samples as ticks.

A function has one colour in both panels (functions of one name in two
images apart, "image:function"); functions outside the top share the grey
of "other functions".  figure() builds the matplotlib Figure (each panel
drawn by a function of its own, so that more panels can be added) and
write_png() saves it.
"""

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt   # noqa: E402
from matplotlib.lines import Line2D   # noqa: E402
from matplotlib.patches import Patch   # noqa: E402

TOP = 10
OTHER = "other functions"
OTHER_COLOUR = "#b8b8b8"
IDLE = "idle (no context bound)"
IDLE_COLOUR = "#f2f2f2"
UNSAMPLED = "bound, no exact sample"
UNSAMPLED_COLOUR = "#ffffff"
BOOT_COLOUR = "#e8eef7"
BOOT = "before the first sample: emulators booting"
SCHED_ROW = "scheduler"
# Host thread states: greys and a gold that no function colour (tab10)
# takes, so the host panel never seems to name a function.
HOST_COLOURS = {"running": "#3b3b3b", "runnable": "#f4c542",
                "blocked": "#e3e3e3"}
HOST_ROLES = ("command", "qemu")    # copsim's own threads left out

# Scheduler events on a slot's row: kind -> (marker, colour).
SLOT_EVENTS = {
    "bind": ("v", "#1a7f1a"),
    "preempt": ("X", "#d62728"),
    "unbind": ("^", "#505050"),
    "exit": ("s", "#000000"),
    "fault": ("X", "#8b0000"),
}
OTHER_EVENT = ("|", "#404040")   # any other kind, and those on no slot


def function_colours(tl):
    """{"image:function": colour} of the TOP functions by samples (tab10),
    in order of their samples; every other function is OTHER_COLOUR."""
    totals = {}
    for (_, fn), n in tl.buckets.items():
        totals[fn] = totals.get(fn, 0) + n
    best = sorted(totals, key=lambda f: (-totals[f], f))[:TOP]
    cmap = plt.get_cmap("tab10")
    return {fn: cmap(i % 10) for i, fn in enumerate(best)}


def function_key(tl, context, function):
    info = tl.contexts.get(context)
    image = info.image.short_name if info and info.image else "?"
    return "%s:%s" % (image, function)


def context_text(tl, context):
    info = tl.contexts.get(context)
    image = info.image.short_name if info and info.image else "?"
    return "%d %s" % (context, image)


BOOT_SHOWN = 0.05      # the share of the axis the compressed boot keeps
BOOT_COMPRESS = 0.10   # compressed when longer than this share of the span


def first_sample_ns(tl):
    """The start of the first bucket with a sample (exact, or any in the
    stall reasons' timeline), else the first binding's start, else None."""
    times = [b for b, _ in tl.buckets] + [b for _, b in tl.stall_buckets]
    if not times:
        times = [b.start_ns for b in tl.bindings]
    return min(times) if times else None


class _Axis:
    """Time in ms since t0, and the session's span on that axis.  The boot
    (the START to the first sample's bucket: the host program starting,
    its contexts bound while their emulators boot), when longer than
    BOOT_COMPRESS of the session, is drawn BOOT_SHOWN of the axis wide:
    ms() maps a time onto the drawn axis, label() a drawn position back to
    ms since the START.  first is the first sample's time on the drawn
    axis (None without one)."""

    def __init__(self, tl):
        self.t0 = tl.start_ns
        times = [b.start_ns for b in tl.bindings] + \
            [b.end_ns for b in tl.bindings] + [b for b, _ in tl.buckets]
        if self.t0 is None:
            self.t0 = min(times) if times else 0
        end = tl.stop_ns if tl.stop_ns is not None else \
            (max(times) if times else self.t0)
        real_end = self._real(max([end] + times))
        self.boot = self.shown = 0.0
        first = first_sample_ns(tl)
        if first is not None:
            boot = self._real(first)
            work = real_end - boot
            if boot > BOOT_COMPRESS * real_end and work > 0:
                self.boot = boot
                self.shown = BOOT_SHOWN * work / (1 - BOOT_SHOWN)
        self.first = self.ms(first) if first is not None else None
        self.end = self.ms(max([end] + times))
        self.span = max(self.end, 1e-3)

    def _real(self, ns):
        return (ns - self.t0) / 1e6

    def ms(self, ns):
        x = self._real(ns)
        if not self.boot:
            return x
        if x < self.boot:
            return max(x, 0) * self.shown / self.boot
        return x - self.boot + self.shown

    def label(self, x):
        """ms since the START of a drawn position."""
        if not self.boot or x >= self.shown:
            return x - self.shown + self.boot
        return x * self.boot / self.shown


def _slot_rows(tl):
    """The slots that did something (a binding or a scheduler event names
    them); every slot of the session when none did."""
    slots = {b.slot for b in tl.bindings}
    slots |= {r["slot"] for r in tl.sched
              if r["slot"] is not None and r["slot"] >= 0}
    return sorted(slots) or list(range(tl.slots or 0))


def _unused_slots(tl):
    """The session's slots (the START's count) that no row shows."""
    return sorted(set(range(tl.slots or 0)) - set(_slot_rows(tl)))


def _draw_idle(ax, axis, slot, spans):
    """The slot's time outside spans: hatched, labelled where it is wide."""
    edges, at = [], 0.0
    for start, end in sorted(spans):
        if start > at:
            edges.append((at, start))
        at = max(at, end)
    if axis.end > at:
        edges.append((at, axis.end))
    if not spans:
        ax.broken_barh([(0, axis.span)], (slot - 0.4, 0.8),
                       facecolors=IDLE_COLOUR, edgecolor="#d0d0d0",
                       hatch="//", linewidth=0.3, label="_idle")
        ax.text(axis.span / 2, slot, "idle: no context ran on this slot",
                ha="center", va="center", fontsize=8, color="#606060")
        return
    for start, end in edges:
        ax.broken_barh([(start, end - start)], (slot - 0.4, 0.8),
                       facecolors=IDLE_COLOUR, edgecolor="#d0d0d0",
                       hatch="//", linewidth=0, label="_idle")
        if end - start > 0.08 * axis.span:
            ax.text((start + end) / 2, slot, "idle", ha="center",
                    va="center", fontsize=7, color="#808080")


def _draw_binding(ax, tl, axis, b, slices, colours):
    """One binding: its context's function slices inside, its outline, its
    label (the context's number and image, or the number where narrow)."""
    start, end = axis.ms(b.start_ns), axis.ms(b.end_ns)
    ax.broken_barh([(start, max(end - start, 1e-3))], (b.slot - 0.4, 0.8),
                   facecolors=UNSAMPLED_COLOUR, edgecolor="none",
                   label="_unsampled")
    for sl in slices.get(b.context, ()):
        s, e = max(start, axis.ms(sl.start_ns)), min(end, axis.ms(sl.end_ns))
        if e > s:
            key = function_key(tl, b.context, sl.function)
            ax.broken_barh([(s, e - s)], (b.slot - 0.4, 0.8),
                           facecolors=colours.get(key, OTHER_COLOUR),
                           edgecolor="none", label="_function " + key)
    ax.broken_barh([(start, max(end - start, 1e-3))], (b.slot - 0.4, 0.8),
                   facecolors="none", edgecolor="black", linewidth=0.6,
                   label="_binding %d" % b.context)
    width = end - start
    text = context_text(tl, b.context)
    if width < len(text) * 0.0065 * axis.span:
        text = "%d" % b.context
    ax.text(start + width / 2, b.slot - 0.2, text, ha="center",
            va="center", fontsize=6.5, clip_on=True,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white",
                  "edgecolor": "none", "alpha": 0.8},
            gid="context-label")


def _draw_events(ax, tl, axis, row_of):
    """The scheduler's events as markers, grouped by kind and row."""
    from .timeline import event_time_ns
    groups = {}
    for r in tl.sched:
        on_slot = r["slot"] is not None and r["slot"] >= 0
        kind = r["kind"] or "event"
        y = row_of[r["slot"]] + 0.3 if on_slot else row_of[SCHED_ROW]
        groups.setdefault((kind, on_slot), []).append(
            (axis.ms(event_time_ns(r)), y))
    for (kind, on_slot), points in sorted(groups.items()):
        marker, colour = SLOT_EVENTS.get(kind, OTHER_EVENT) if on_slot \
            else OTHER_EVENT
        ax.scatter([x for x, _ in points], [y for _, y in points], s=14,
                   marker=marker, color=colour, linewidths=0.8, zorder=5,
                   label="_event %s" % kind)
    if any(not on for _, on in groups):
        kinds = sorted({k for k, on in groups if not on})
        ax.text(0.995, row_of[SCHED_ROW] - 0.42, ", ".join(kinds),
                ha="right", va="bottom", fontsize=6.5, color="#404040",
                transform=ax.get_yaxis_transform())


def _boot_drawn(axis):
    """Whether the time before the first sample is wide enough to shade."""
    return axis.first is not None and axis.first > 0.02 * axis.span


def _draw_boot(ax, tl, axis, slots):
    """The START to the first sample: shaded over the bars (contexts bound
    there wait for their emulators to boot) and labelled."""
    if not _boot_drawn(axis):
        return
    first = axis.first
    bound = [b.start_ns for b in tl.bindings]
    ax.axvspan(0, first, color=BOOT_COLOUR, alpha=0.75, zorder=4,
               linewidth=0, label="_boot")
    ax.text(first / 2, max(slots + [0]) / 2,
            "%.0f ms before the first sample:\nhost starting%s%s"
            % (axis.label(first),
               ", first context bound\nat %.0f ms, emulators booting"
               % axis._real(min(bound)) if bound and
               axis.ms(min(bound)) < first else "",
               "\n(compressed)" if axis.boot else ""),
            ha="center", va="center", fontsize=6.5,
            color="#405070", zorder=6,
            bbox={"boxstyle": "round,pad=0.3", "facecolor": "white",
                  "edgecolor": "none", "alpha": 0.85})


def draw_slots(ax, tl, axis, colours):
    """The slots panel (see the module's comment)."""
    slots = _slot_rows(tl)
    row_of = {s: s for s in slots}
    row_of[SCHED_ROW] = -1
    slices = {}
    for sl in tl.slices:
        slices.setdefault(sl.context, []).append(sl)
    spans = {s: [] for s in slots}
    for b in tl.bindings:
        spans[b.slot].append((axis.ms(b.start_ns), axis.ms(b.end_ns)))
    for s in slots:
        _draw_idle(ax, axis, s, spans[s])
    for b in tl.bindings:
        _draw_binding(ax, tl, axis, b, slices, colours)
    _draw_boot(ax, tl, axis, slots)
    _draw_events(ax, tl, axis, row_of)
    if axis.boot:
        for x in (axis.shown - 0.004 * axis.span, axis.shown):
            ax.axvline(x, color="#405070", linewidth=0.8, linestyle=(0, (2, 2)),
                       zorder=6, label="_boot break")
    ax.set_yticks([-1] + slots)
    ax.set_yticklabels([SCHED_ROW] + ["slot %d" % s for s in slots])
    ax.set_ylim(max(slots + [0]) + 0.6, -1.6)
    ax.set_xlim(0, axis.span)
    unused = _unused_slots(tl)
    ax.set_title("slots: contexts bound (number and image on each bar), "
                 "coloured by the function they ran%s" %
                 ("; slot%s %s unused, not shown" %
                  ("s" if len(unused) > 1 else "",
                   ", ".join(map(str, unused))) if unused else ""),
                 fontsize=9, pad=14)



def draw_functions(ax, tl, axis, colours):
    """The functions panel: top functions' samples per bucket, stacked."""
    buckets = sorted({b for b, _ in tl.buckets})
    if not buckets:
        ax.text(0.5, 0.5, "no sample timeline in this session",
                ha="center", va="center", transform=ax.transAxes)
        return
    per_bucket = {}
    for (b, fn), n in tl.buckets.items():
        per_bucket[b] = per_bucket.get(b, 0) + n
    xs = [axis.ms(b) for b in buckets]
    width = tl.bucket_ns / 1e6 if tl.bucket_ns else 1.0
    base = [0] * len(xs)
    for fn, colour in colours.items():
        ys = [tl.buckets.get((b, fn), 0) for b in buckets]
        ax.bar(xs, ys, width=width, bottom=base, align="edge", color=colour,
               linewidth=0, label=fn)
        base = [a + y for a, y in zip(base, ys)]
    rest = [per_bucket[b] - base[i] for i, b in enumerate(buckets)]
    if any(rest):
        ax.bar(xs, rest, width=width, bottom=base, align="edge",
               color=OTHER_COLOUR, linewidth=0, label=OTHER)
    ax.set_ylabel("samples per %g ms" % width if tl.bucket_ns else "samples",
                  fontsize=8)
    ax.set_title("functions: exact samples per bucket, the top %d by "
                 "samples" % len(colours), fontsize=9)


# The stall reasons' colours (stalls.REASONS order): issue grey, waits warm.
REASON_COLOURS = ("#b0b0b0", "#1f77b4", "#9467bd", "#d62728", "#ff7f0e",
                  "#8c564b")


def draw_stalls(ax, tl, axis):
    """The stall reasons panel: a band per slot, each bucket a column cut
    into its reasons' shares of the slot's samples there (stall_timeline),
    issue at the bottom."""
    from . import stalls
    slots = sorted({s for s, _ in tl.stall_buckets},
                   key=lambda s: (s is None, s or 0))
    rows = {s: i for i, s in enumerate(slots)}
    width = tl.bucket_ns / 1e6 if tl.bucket_ns else 1.0
    for (slot, bucket), b in sorted(tl.stall_buckets.items(),
                                    key=lambda x: x[0][1]):
        total = b.total
        base = rows[slot] + 0.1
        for code, n in sorted(b.counts.items()):
            h = 0.8 * n / total if total else 0
            ax.bar([axis.ms(bucket)], [h], width=width, bottom=base,
                   align="edge", linewidth=0,
                   color=REASON_COLOURS[code % len(REASON_COLOURS)],
                   label=stalls.name(code))
            base += h
    ax.set_yticks([i + 0.5 for i in range(len(slots))])
    ax.set_yticklabels(["slot %d" % s if s is not None else "no slot"
                        for s in slots], fontsize=7)
    ax.set_ylim(0, max(len(slots), 1))
    ax.set_title("stall reasons: each slot's samples per bucket by reason "
                 "(%s)" % ", ".join(
                     "%s %s" % (n, c) for n, c in zip(
                         stalls.REASONS, ("grey", "blue", "purple", "red",
                                          "orange", "brown"))), fontsize=9)


def _legend(fig, tl, colours, axis):
    handles = [Patch(color=c, label=fn) for fn, c in colours.items()]
    handles.append(Patch(color=OTHER_COLOUR, label=OTHER))
    handles.append(Patch(facecolor=UNSAMPLED_COLOUR, edgecolor="black",
                         linewidth=0.6, label=UNSAMPLED))
    handles.append(Patch(facecolor=IDLE_COLOUR, edgecolor="#d0d0d0",
                         hatch="//", label=IDLE))
    if _boot_drawn(axis):
        handles.append(Patch(color=BOOT_COLOUR, label=BOOT))
    kinds = sorted({r["kind"] for r in tl.sched
                    if r["slot"] is not None and r["slot"] >= 0
                    and r["kind"] in SLOT_EVENTS})
    for kind in kinds:
        marker, colour = SLOT_EVENTS[kind]
        handles.append(Line2D([], [], linestyle="none", marker=marker,
                              color=colour, label="event: %s" % kind))
    if any(r["slot"] is None or r["slot"] < 0 for r in tl.sched):
        handles.append(Line2D([], [], linestyle="none",
                              marker=OTHER_EVENT[0], color=OTHER_EVENT[1],
                              label="event on no slot"))
    if host_tracks(tl):
        for state, colour in HOST_COLOURS.items():
            handles.append(Patch(color=colour, label="host thread %s" % state))
        handles.append(Line2D([], [], linestyle="none", marker="|",
                              color="black", label="host sample"))
    fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(0.8, 0.93),
               fontsize=7, frameon=False)


def host_tracks(tl):
    """The host threads to draw: the host program's and the QEMUs' that
    did something (ran, or were sampled), in tid order."""
    host = getattr(tl, "host", None)
    if host is None:
        return []
    sampled = {s[1] for s in tl.host_samples}
    return sorted(tid for tid, ivs in tl.host_states.items()
                  if host.threads.get(tid) is not None and
                  host.threads[tid]["role"] in HOST_ROLES and
                  (tid in sampled or
                   any(iv.state == "running" and iv.end_ns > iv.start_ns
                       for iv in ivs)))


def _host_row_label(tl, tid):
    """"host-pipeline 1234": the thread's name (comm) and Linux tid (the
    JSON's track names add its role)."""
    t = tl.host.threads.get(tid)
    name = (t["comm"] or t["role"]) if t is not None else "thread"
    return "%s %d" % (name, tid)


def host_panel(ax, tl, tids, axis):
    """A row per host thread: its states as bars, its samples as ticks."""
    row = {tid: i for i, tid in enumerate(tids)}
    for tid in tids:
        for state in HOST_COLOURS:
            spans = [(axis.ms(iv.start_ns),
                      max(axis.ms(iv.end_ns) - axis.ms(iv.start_ns), 1e-3))
                     for iv in tl.host_states[tid] if iv.state == state]
            if spans:
                ax.broken_barh(spans, (row[tid] - 0.35, 0.7),
                               facecolors=HOST_COLOURS[state], linewidth=0)
    xs = [axis.ms(s[0]) for s in tl.host_samples if s[1] in row]
    ys = [row[s[1]] for s in tl.host_samples if s[1] in row]
    if xs:
        ax.plot(xs, ys, "|", color="black", markersize=6,
                label="_host samples")
    ax.set_yticks(range(len(tids)))
    ax.set_yticklabels([_host_row_label(tl, t) for t in tids], fontsize=6)
    ax.set_ylim(-0.6, len(tids) - 0.4)
    ax.invert_yaxis()
    ax.set_title("host threads (Linux scheduler) and host samples",
                 fontsize=9)


def figure(tl, title=None):
    """The matplotlib Figure of Timeline tl: axes "slots" and "functions"
    (their labels), and "host threads" with the host side, sharing the
    time axis."""
    axis = _Axis(tl)
    colours = function_colours(tl)
    rows = len(_slot_rows(tl)) + 1
    host_tids = host_tracks(tl)
    heights = [0.42 * rows + 0.6, 2.6]
    stall_slots = len({s for s, _ in tl.stall_buckets})
    if stall_slots:
        heights.append(0.42 * stall_slots + 0.8)
    if host_tids:
        heights.append(0.3 * len(host_tids) + 0.8)
    fig, panels = plt.subplots(
        len(heights), 1, sharex=True, figsize=(13, 3 + sum(heights)),
        gridspec_kw={"height_ratios": heights,
                     "left": 0.08, "right": 0.79, "top": 0.93,
                     "bottom": 0.08, "hspace": 0.18})
    top, bottom = panels[0], panels[1]
    top.set_label("slots")
    bottom.set_label("functions")
    draw_slots(top, tl, axis, colours)
    draw_functions(bottom, tl, axis, colours)
    if stall_slots:
        panels[2].set_label("stall reasons")
        draw_stalls(panels[2], tl, axis)
    if host_tids:
        panels[-1].set_label("host threads")
        host_panel(panels[-1], tl, host_tids, axis)
    panels[-1].set_xlabel("ms since the stream's START (CLOCK_MONOTONIC)%s"
                          % ("; the %.0f ms before the first sample drawn "
                             "compressed, left of the dashed break"
                             % axis.boot
                             if axis.boot else ""), fontsize=8)
    from matplotlib.ticker import FuncFormatter
    panels[-1].xaxis.set_major_formatter(
        FuncFormatter(lambda x, _: "%g" % round(axis.label(x), 1)))
    for ax in panels:
        ax.tick_params(labelsize=7)
    fig.suptitle(title or "timeline", fontsize=10)
    _legend(fig, tl, colours, axis)
    return fig


def write_png(tl, path, title=None):
    """Draw Timeline tl to path (PNG; a path or a binary file object).
    OSError when path is unwritable."""
    fig = figure(tl, title)
    try:
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
