"""The driver on real runs: the examples under QEMU and the trace-unit
plugin, the hosted driver polling in the harness process (copdrv-qemu),
each stream checked against the reference mode's capture sequence.
"""

import re
import subprocess

import pytest

from driver_fixtures import example, test_bin  # noqa: F401 (fixtures)
from stream_check import Stream, expected_samples, reference_trace

FIFO_DEPTH = 65536      # deep enough that a loaded machine drops nothing


def run_harness(test_bin, tmp_path, options, runs):
    """Runs copdrv-qemu; returns (its report, the decoded stream)."""
    stream_path = tmp_path / "stream"
    command = [test_bin("copdrv-qemu"), "--stream", str(stream_path),
               "--fifo-depth", str(FIFO_DEPTH)] + options + ["--"]
    for i, run in enumerate(runs):
        command += (["+"] if i else []) + [str(a) for a in run]
    result = subprocess.run(command, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    report = {"slot": {}, "context": {}}
    for line in result.stdout.splitlines():
        fields = dict(re.findall(r"(\w+)=(\d+)", line))
        for kind in ("slot", "context"):
            if line.startswith(kind + "="):
                report[kind][int(fields.pop(kind))] = {
                    k: int(v) for k, v in fields.items()}
        if line.startswith("violations="):
            report["violations"] = int(fields["violations"])
    assert report["violations"] == 0, result.stdout
    return report, Stream(stream_path.read_bytes())


def assert_conservation(report, stream):
    """Every slot: capture counter = samples in the stream + lost."""
    for slot, counters in report["slot"].items():
        assert counters["captures"] == (stream.slot_samples[slot] +
                                        stream.lost(slot))
        assert counters["dropped"] == stream.lost(slot, 1)
        assert counters["outside"] == stream.lost(slot, 4)
    assert stream.errors == []
    assert stream.orphans == 0
    assert stream.stop["samples"] == stream.stats.samples


@pytest.fixture(scope="module")
def side_by_side(test_bin, example, tmp_path_factory):
    """kernels and overlays at once, each on its own slot, SPU_CYCLES:997
    (the default event)."""
    return run_harness(test_bin, tmp_path_factory.mktemp("side"),
                       ["--sample-every", "997", "--poll-us", "200"],
                       [(example("kernels"), 2), (example("overlays"), 20)])


def test_side_by_side_conservation(side_by_side):
    report, stream = side_by_side
    assert set(report["slot"]) == {0, 1}
    assert_conservation(report, stream)
    assert stream.start["lfsr_count"] == 997
    assert stream.start["poll_interval_ns"] == 200000
    assert stream.start["event"] == 0           # SPU_CYCLES


@pytest.mark.parametrize("context,name,args", [(1, "kernels", 2),
                                               (2, "overlays", 20)])
def test_side_by_side_matches_reference(side_by_side, coprof_bin, example,
                                        context, name, args):
    """Sample for sample the reference mode's capture sequence of the
    timing model's cycles."""
    report, stream = side_by_side
    addresses, counters = reference_trace(coprof_bin("cop-run"),
                                          example(name), [args], 997,
                                          event="SPU_CYCLES")
    assert counters["dropped"] == 0
    assert report["slot"][context - 1]["dropped"] == 0
    assert stream.samples[context] == addresses
    assert report["context"][context]["instructions"] == \
        counters["instructions"]


def test_overlay_states_follow_the_swaps(side_by_side):
    """The overlays example swaps five overlays through two regions (1-3
    in region 0, 4-5 in region 1) and ends with 3 and 5 loaded: the
    stream reports the guard words as they change, first as read at the
    CONTEXT (nothing loaded yet), last as left at the exit."""
    _, stream = side_by_side
    states = stream.overlays[2]
    assert [(s["region"], s["guard"]) for s in states[:2]] == [(0, 0), (1, 0)]
    seen = {0: [], 1: []}
    for state in states[2:]:
        seen[state["region"]].append(state["guard"])
    assert set(seen[0]) <= {1, 2, 3} and len(set(seen[0])) >= 2
    assert set(seen[1]) <= {4, 5} and len(set(seen[1])) >= 2
    assert seen[0][-1] == 3 and seen[1][-1] == 5
    cycles = [s["cycle"] for s in states]
    assert cycles == sorted(cycles)
    assert stream.overlays.get(1, []) == []     # kernels has no overlays


def test_time_slicing_attributes_every_sample(test_bin, coprof_bin, example,
                                              tmp_path):
    """Three programs share slot 0 in slices of 300 us; the slot's LFSR
    runs on across switches.  From each context's slices (CONTEXT to
    RELEASE cycles) and its every-instruction reference trace, the
    captures it must own are known exactly: the stream gives it those and
    no others.  The slot counts SPU_INSTRUCTIONS, so that a slice's
    length is its instructions."""
    runs = [("kernels", 2), ("overlays", 2), ("pipeline", 1)]
    every = 101
    report, stream = run_harness(
        test_bin, tmp_path, ["--sample-every", str(every), "--slice-us", "300",
                             "--event", "SPU_INSTRUCTIONS"],
        [(example(name), args) for name, args in runs])
    assert_conservation(report, stream)
    assert stream.start["event"] == 1
    assert sum(len(s) for s in stream.slices.values()) > len(runs)
    assert stream.slices[1][0][0] == 0
    outside_total = 0
    for context, (name, args) in enumerate(runs, 1):
        trace, counters = reference_trace(coprof_bin("cop-run"),
                                          example(name), [args], 1)
        assert counters["dropped"] == 0
        slices = stream.slices[context]
        assert sum(end - begin for begin, end in slices) == \
            counters["instructions"] == \
            report["context"][context]["instructions"]
        want, outside = expected_samples(slices, every, trace,
                                         counters["outside_ls"])
        assert stream.samples[context] == want
        outside_total += outside
    assert stream.lost(0, 4) == outside_total
    assert stream.lost(0) == outside_total
