"""The trace unit's overlay watch (docs/trace-unit.md, "Overlay watch"),
end to end: examples/overlays.elf (5 overlays in 2 regions, 7 loads per
round) through `cop-run --sample-every N --events-out E`, in both plugin
modes and at two sampling rates, with a FIFO deep enough to drop nothing.

Checked: every overlay load is one event; replaying the events over the
captures, every capture inside an overlay region falls inside the extent
of the overlay that the guard word of its region names at that capture;
the events end with the guard words the program prints; and the captures
are the same with the watch off.

The extent check only sees an event placed some captures off (overlays of
a region share their start, so a short overlay fits in a longer one).  The
reference mode reads the guards right before each captured instruction,
exact by construction; so the fast mode is held to it: every capture in an
overlay region sees the same guard in both modes.
"""

import os
import re
import subprocess
import sys

import pytest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "sdk", "tests"))
sys.path.insert(0, os.path.join(SOURCE, "abi"))

import cheader  # noqa: E402  (needs the path above)
import copimage  # noqa: E402  (needs the path above)

# The register file's layout, read from the header the plugin compiles.
REGS = cheader.load("trace-regs.h")

COUNTERS = re.compile(r"^events=(\d+) events_dropped=(\d+)\ncaptures=(\d+) "
                      r"dropped=(\d+) instructions=(\d+) outside_ls=(\d+)$",
                      re.M)
RESULT = re.compile(r"^overlays rounds=(\d+) digest=[0-9a-f]+ loads=(\d+) "
                    r"guards=(\d+),(\d+)$", re.M)
ROUNDS = "2"            # 14 loads: the event ring (1024) never fills


@pytest.fixture(scope="module")
def overlays(build_dir):
    path = os.path.join(build_dir, "examples", "overlays.elf")
    if not os.path.exists(path):
        pytest.fail("%s is not built: run make" % path)
    return path, copimage.Image(path)


def cop_run(coprof_bin, tmp_path, image, every, *options):
    """Runs the image traced; returns stdout, the counters, the captured LS
    offsets and the events (position, region, guard)."""
    tag = "%d%s" % (every, "".join(options))
    samples = tmp_path / ("samples-" + tag)
    events = tmp_path / ("events-" + tag)
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", str(every),
         "--fifo-depth", str(1 << 21), "--samples-out", str(samples),
         "--events-out", str(events), *options, image, ROUNDS],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    counters = COUNTERS.search(proc.stderr)
    return (proc.stdout, counters,
            [int(line, 16) for line in samples.read_text().split()],
            [tuple(int(f) for f in line.split())
             for line in events.read_text().splitlines()])


def region_extents(image):
    """LS offset ranges of each region (0-based), from its overlays."""
    extents = {}
    for entry in image.overlays:
        lo, hi = entry.vma - copimage.LS_BASE, \
            entry.vma - copimage.LS_BASE + entry.size
        old = extents.get(entry.buf - 1, (lo, hi))
        extents[entry.buf - 1] = (min(old[0], lo), max(old[1], hi))
    return extents


def overlay_captures(image, samples, events):
    """Replays the events over the captures: (position, LS offset, region,
    its guard word) for every capture inside an overlay region."""
    extents = region_extents(image)
    guards = [0] * image.region_count
    pending = iter(events)
    event = next(pending, None)
    found = []
    for position, offset in enumerate(samples):
        while event is not None and event[0] <= position:
            guards[event[1]] = event[2]
            event = next(pending, None)
        found += [(position, offset, region, guards[region])
                  for region, (lo, hi) in extents.items()
                  if lo <= offset < hi]
    assert event is None or event[0] >= len(samples)
    return found


def misplaced(image, samples, events):
    """The number of captures in an overlay region, and those whose
    region's guard names an overlay that does not cover them."""
    by_index = {e.index: e for e in image.overlays}
    found = overlay_captures(image, samples, events)
    wrong = []
    for capture in found:
        entry = by_index.get(capture[3])
        start = entry.vma - copimage.LS_BASE if entry else 0
        if entry is None or not start <= capture[1] < start + entry.size:
            wrong.append(capture)
    return len(found), wrong


@pytest.mark.parametrize("every", [7, 97])
@pytest.mark.parametrize("mode", ["fast", "reference"])
def test_every_overlay_capture_is_placed(coprof_bin, tmp_path, overlays,
                                         mode, every):
    path, image = overlays
    options = ("--reference",) if mode == "reference" else ()
    stdout, counters, samples, events = cop_run(coprof_bin, tmp_path, path,
                                                every, *options)
    result = RESULT.search(stdout)
    assert result, stdout
    loads, final = int(result.group(2)), [int(result.group(3)),
                                          int(result.group(4))]
    assert counters, "no events line on stderr"
    n_events, events_dropped, captures, dropped, _, outside = \
        (int(g) for g in counters.groups())
    assert dropped == 0 and events_dropped == 0
    assert len(samples) == captures - outside
    assert n_events == len(events)

    # A load takes hundreds of instructions, so each is seen on its own.
    assert len(events) == loads == 7 * int(ROUNDS)
    assert all(0 <= region < image.region_count and 1 <= guard <= 5
               for _, region, guard in events)
    assert [p for p, _, _ in events] == sorted(p for p, _, _ in events)

    inside, wrong = misplaced(image, samples, events)
    assert inside > len(samples) // 2        # most of the time in overlays
    assert wrong == []

    last = [0] * image.region_count
    for _, region, guard in events:
        last[region] = guard
    assert last == final


@pytest.mark.parametrize("every", [7, 97])
def test_fast_mode_places_like_reference_mode(coprof_bin, tmp_path,
                                              overlays, every):
    path, image = overlays
    _, _, fast, fast_events = cop_run(coprof_bin, tmp_path, path, every)
    _, _, ref, ref_events = cop_run(coprof_bin, tmp_path, path, every,
                                    "--reference")
    assert fast == ref
    assert [e[1:] for e in fast_events] == [e[1:] for e in ref_events]
    assert overlay_captures(image, fast, fast_events) == \
        overlay_captures(image, ref, ref_events)


def test_watch_changes_no_capture(coprof_bin, tmp_path, overlays):
    path, _ = overlays
    _, _, watched, events = cop_run(coprof_bin, tmp_path, path, 97)
    _, counters, plain, none = cop_run(coprof_bin, tmp_path, path, 97,
                                       "--no-watch")
    assert events and none == []
    assert counters is None                  # no events line without watch
    assert watched == plain


def test_image_without_overlays_is_not_watched(coprof_bin, tmp_path,
                                               build_dir):
    image = os.path.join(build_dir, "examples", "kernels.elf")
    events = tmp_path / "events"
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "1000", "--events-out",
         str(events), image, "1"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "events=" not in proc.stderr
    assert events.read_text() == ""


@pytest.mark.parametrize("offset,count,ram,message", [
    (0x2050, 65, "RAM", "watches 65 guard words, more than 64"),
    (0x3FFFC, 2, "RAM", "not aligned words inside the 0x40000-byte local "
                        "store"),
    (0x2052, 1, "RAM", "not aligned words"),
    (0x2050, 2, None, "give the guest RAM file with ram=FILE"),
    (0x2050, 2, "RAM.missing", "cannot open: No such file or directory"),
    (0x2050, 2, "SHORT", "not a guest RAM file holding the guard words"),
])
def test_bad_watch_refused(coprof_bin, build_dir, qemu_command, tmp_path,
                           offset, count, ram, message):
    """A watch the plugin cannot keep stops QEMU before the guest runs,
    with one line."""
    regs = tmp_path / "regs"
    subprocess.run([coprof_bin("coptrace"), "create", str(regs)], check=True)
    data = bytearray(regs.read_bytes())
    header = REGS.struct("trace_regs_header").from_buffer(data)
    context = REGS.struct("trace_regs_context").from_buffer(
        data, header.contexts_offset)
    context.guard_ls_offset, context.guard_count = offset, count
    regs.write_bytes(bytes(data))
    (tmp_path / "RAM").write_bytes(bytes(0x40000))
    (tmp_path / "SHORT").write_bytes(bytes(0x2000))
    plugin = os.path.join(build_dir, "lib", "libcoptrace.so")
    argument = "%s,regs=%s,context=0" % (plugin, regs)
    if ram:
        argument += ",ram=%s" % (tmp_path / ram)
    proc = subprocess.run([*qemu_command("mix"), "-plugin", argument],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "mix crc" not in proc.stdout       # the guest never ran
    ours = [line for line in proc.stderr.splitlines()
            if line.startswith("coptrace: ")]
    assert len(ours) == 1 and message in ours[0], proc.stderr
