"""The timeline PNG of the demo's session, checked from matplotlib's
objects (axes, tracks, labels, colours), not from pixels.

The session is recorded as `make demo` and the README do it: `coprof
record -- host-pipeline` at the default rate (16 contexts on 8 slots)."""

import collections
import os
import subprocess

import pytest

from coprof_report import plot, timeline
from coprof_report import session as session_mod
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.colors import to_rgba


@pytest.fixture(scope="module")
def demo_session(coprof_bin, build_dir, tmp_path_factory):
    """The directory of the demo's session."""
    d = tmp_path_factory.mktemp("demo")
    result = subprocess.run(
        [coprof_bin("coprof"), "record", "--quiet", "--",
         os.path.join(build_dir, "examples", "host-pipeline")],
        cwd=d, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return str(d / "coprof_data")


@pytest.fixture(scope="module")
def demo_timeline(demo_session):
    s = session_mod.Session.open(demo_session)
    try:
        tl = timeline.build(s)
    finally:
        s.close()
    fig = plot.figure(tl, "timeline")
    yield tl, fig
    plot.plt.close(fig)


def axes(fig):
    return {ax.get_label(): ax for ax in fig.axes}


def bars(ax, prefix):
    """{label without prefix: [PolyCollection]} of a panel."""
    out = collections.defaultdict(list)
    for c in ax.collections:
        if isinstance(c, PolyCollection) and \
                c.get_label().startswith(prefix):
            out[c.get_label()[len(prefix):]].append(c)
    return out


def test_two_panels_sharing_time(demo_timeline):
    tl, fig = demo_timeline
    panels = axes(fig)
    # coprof record records the Linux scheduler's events when it may (as
    # root, make check): then a panel of host threads; the samples' stall
    # reasons (SPU_CYCLES, the default event) a panel of their own
    host = {"host threads"} if plot.host_tracks(tl) else set()
    assert tl.stalls_recorded
    assert set(panels) == {"slots", "functions", "stall reasons"} | host
    assert [ax.get_label() for ax in fig.axes][:3] == \
        ["slots", "functions", "stall reasons"]
    for name in host | {"stall reasons"}:
        assert panels["slots"].get_shared_x_axes().joined(panels["slots"],
                                                          panels[name])
    assert panels["slots"].get_shared_x_axes().joined(panels["slots"],
                                                      panels["functions"])


def test_stall_reasons_panel(demo_session, demo_timeline):
    """A band per slot; each bucket a column of its reasons' shares of
    the slot's samples there, stacked from issue, in the reasons'
    colours; every sample of stall_timeline drawn."""
    from coprof_report import stalls
    tl, fig = demo_timeline
    panel = axes(fig)["stall reasons"]
    slots = sorted({s for s, _ in tl.stall_buckets})
    assert slots and set(slots) <= {b.slot for b in tl.bindings}
    assert [t.get_text() for t in panel.get_yticklabels()] == \
        ["slot %d" % s for s in slots]
    s = session_mod.Session.open(demo_session)
    try:
        recorded = sum(r[-1] for r in s.stall_timeline_of())
    finally:
        s.close()
    assert sum(b.total for b in tl.stall_buckets.values()) == recorded
    drawn = collections.defaultdict(list)   # (row, x) -> [(y, h, reason)]
    for c in panel.containers:
        reason = c.get_label()
        colour = to_rgba(plot.REASON_COLOURS[stalls.REASONS.index(reason)])
        for patch in c.patches:
            assert patch.get_facecolor() == colour, reason
            drawn[(int(patch.get_y()), round(patch.get_x(), 6))].append(
                (patch.get_y(), patch.get_height(), reason))
    axis = plot._Axis(tl)
    want = {}
    for (slot, bucket), b in tl.stall_buckets.items():
        key = (slots.index(slot), round(axis.ms(bucket), 6))
        want[key] = [(stalls.name(code), n / b.total)
                     for code, n in sorted(b.counts.items())]
    assert set(drawn) == set(want)
    waits = 0
    for key, column in drawn.items():
        column.sort()
        assert [r for _, _, r in column] == [r for r, _ in want[key]]
        y = key[0] + 0.1
        for (bottom, h, reason), (_, share) in zip(column, want[key]):
            assert bottom == pytest.approx(y) and \
                h == pytest.approx(0.8 * share)
            y += h
            waits += reason != "issue"
        assert y == pytest.approx(key[0] + 0.9)
    assert waits        # the pipeline waits, and that is drawn


def test_used_slots_have_a_row(demo_timeline):
    """A row per slot that did something; the others named in the title,
    not drawn as rows of "idle"."""
    tl, fig = demo_timeline
    slots = axes(fig)["slots"]
    labels = [t.get_text() for t in slots.get_yticklabels()]
    assert tl.slots == 8
    used = sorted({b.slot for b in tl.bindings})
    assert used and len(used) < 8
    assert labels == ["scheduler"] + ["slot %d" % s for s in used]
    unused = sorted(set(range(8)) - set(used))
    assert "unused, not shown" in slots.get_title()
    assert ", ".join(map(str, unused)) in slots.get_title()
    assert not [t for t in slots.texts
                if t.get_text() == "idle: no context ran on this slot"]


def test_host_threads_by_name_and_only_busy(demo_timeline):
    tl, fig = demo_timeline
    tids = plot.host_tracks(tl)
    if not tids:
        pytest.skip("no host side recorded (not root)")
    host = axes(fig)["host threads"]
    labels = [t.get_text() for t in host.get_yticklabels()]
    for tid, label in zip(tids, labels):
        assert label == "%s %d" % (tl.host.threads[tid]["comm"], tid)
        assert any(iv.state == "running" for iv in tl.host_states[tid]) or \
            tid in {s[1] for s in tl.host_samples}
    assert not [x for x in labels if x.startswith(("command ", "qemu "))]


def test_contexts_labelled_on_their_bars(demo_timeline):
    tl, fig = demo_timeline
    slots = axes(fig)["slots"]
    labels = [t for t in slots.texts if t.get_gid() == "context-label"]
    assert len(labels) == len(tl.bindings)
    numbers = sorted(int(t.get_text().split()[0]) for t in labels)
    assert numbers == sorted(b.context for b in tl.bindings)
    assert set(numbers) == set(tl.contexts) == set(range(1, 17))
    for t in labels:
        if " " in t.get_text():     # wide enough: the image too
            number, image = t.get_text().split()
            assert tl.contexts[int(number)].image.short_name == image
    outlines = bars(slots, "_binding ")
    assert sum(len(c.get_paths()) for cs in outlines.values()
               for c in cs) == len(tl.bindings)


def test_one_colour_per_function_in_both_panels(demo_timeline):
    tl, fig = demo_timeline
    panels = axes(fig)
    colours = plot.function_colours(tl)
    assert len(colours) == plot.TOP
    assert len({to_rgba(c) for c in colours.values()}) == len(colours)
    assert to_rgba(plot.OTHER_COLOUR) not in \
        {to_rgba(c) for c in colours.values()}
    stacked = {c.get_label(): c for c in panels["functions"].containers}
    assert list(stacked) == list(colours) + [plot.OTHER]
    for fn, colour in colours.items():
        for patch in stacked[fn].patches:
            assert patch.get_facecolor() == to_rgba(colour)
    on_slots = bars(panels["slots"], "_function ")
    assert set(colours) & set(on_slots)     # the top ones are on the bars
    for fn, collections_ in on_slots.items():
        want = to_rgba(colours.get(fn, plot.OTHER_COLOUR))
        for c in collections_:
            assert tuple(c.get_facecolor()[0]) == want, fn
    assert "pipeline:stage_denoise" == list(colours)[0]


def test_scheduler_events_drawn(demo_timeline):
    tl, fig = demo_timeline
    slots = axes(fig)["slots"]
    drawn = collections.Counter()
    for c in slots.collections:
        if isinstance(c, PathCollection) and \
                c.get_label().startswith("_event "):
            drawn[c.get_label()[len("_event "):]] += len(c.get_offsets())
    kinds = collections.Counter(r["kind"] for r in tl.sched)
    assert drawn == kinds
    assert {"bind", "unbind", "exit", "create", "load", "run"} <= set(drawn)


def test_legend_names_functions_idle_and_events(demo_timeline):
    tl, fig = demo_timeline
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    colours = plot.function_colours(tl)
    assert texts[:len(colours)] == list(colours)
    for text in (plot.OTHER, plot.IDLE, plot.UNSAMPLED, "event: bind",
                 "event: exit", "event on no slot"):
        assert text in texts
    if plot.host_tracks(tl):
        for state in plot.HOST_COLOURS:
            assert "host thread %s" % state in texts
    assert not [ax for ax in fig.axes if ax.get_legend() is not None]


def test_axis_before_the_first_sample_is_small(demo_timeline):
    """Slots start on demand: a slot's emulator boots after its first
    binding, so the bound time before the first sample is boot, not
    work.  The axis before the first sample (its bucket) is drawn at
    most BOOT_COMPRESS of the axis wide, shaded over the bars, said in
    the note, the legend and the axis label."""
    tl, fig = demo_timeline
    slots = axes(fig)["slots"]
    first = min(b for b, _ in tl.buckets)
    axis = plot._Axis(tl)
    assert axis.ms(first) / axis.span <= plot.BOOT_COMPRESS + 1e-9
    real = (first - tl.start_ns) / 1e6
    assert axis.label(axis.ms(first)) == pytest.approx(real)
    (note,) = [t for t in slots.texts
               if "before the first sample" in t.get_text()]
    assert note.get_text().startswith("%.0f ms before the first sample"
                                      % real)
    (shade,) = [p for p in slots.patches if p.get_label() == "_boot"]
    xs = [x for x, _ in shade.get_xy()]
    assert min(xs) == 0 and max(xs) == pytest.approx(axis.ms(first))
    assert slots.get_xlim()[0] == 0
    (legend,) = fig.legends
    assert plot.BOOT in [t.get_text() for t in legend.get_texts()]
    # compressed when longer than BOOT_COMPRESS of the session, to
    # BOOT_SHOWN of the axis, the ticks in real ms, the break said
    span = (max(b.end_ns for b in tl.bindings) - tl.start_ns) / 1e6
    if real > plot.BOOT_COMPRESS * span:
        assert axis.ms(first) == pytest.approx(
            plot.BOOT_SHOWN * axis.span, rel=0.05)
        assert "(compressed)" in note.get_text()
        assert "before the first sample drawn compressed" in \
            fig.axes[-1].get_xlabel()


def test_write_png(demo_timeline, tmp_path):
    tl, _ = demo_timeline
    path = tmp_path / "t.png"
    plot.write_png(tl, str(path), "timeline")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
