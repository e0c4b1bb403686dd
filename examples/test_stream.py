"""The streaming example (examples/stream/): single- and double-buffered
DMA compute the same result, and the exact counts show the DMA-wait
cycles of the streaming function falling from one to the other (the
classic SPU pattern), with no direct main-memory access anywhere."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import exact_counts  # noqa: E402
import stall_shares  # noqa: E402

BLOCKS = 16
# emulator/timing/spu.model: a 4 KiB transfer holds the bus 4096 / 8
# cycles and completes dma.latency = 300 cycles later.
TRANSFER = 300 + 4096 // 8
DMA_WAIT = exact_counts.REASONS.index("dma_wait")
MEMORY = exact_counts.REASONS.index("memory")


def exact_by_function(run, image, mode, tmp_path):
    """(the program's output, {(function, stall): cycles}) of one run."""
    counts = str(tmp_path / (mode + ".counts"))
    proc = run(image, mode, BLOCKS, options=["--sample-every", "1000",
                                             "--exact-counts", counts])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout, stall_shares.exact_by_function(counts, image)


def by_reason(cycles, reason):
    return sum(n for (_, stall), n in cycles.items() if stall == reason)


def test_double_buffering_hides_the_dma_wait(run, example, tmp_path):
    image = example("stream")
    single_out, single = exact_by_function(run, image, "single", tmp_path)
    double_out, double = exact_by_function(run, image, "double", tmp_path)
    assert single_out.split()[2:] == double_out.split()[2:]    # the digest
    # The data window is reached by DMA only: no main-memory access.
    assert by_reason(single, MEMORY) == 0
    assert by_reason(double, MEMORY) == 0
    # single_buffered waits for every 4 KiB get and put as it is issued:
    # the whole transfer less the few cycles between issue and wait, 2 per
    # block; double_buffered only for the first get and the last puts.
    waited = single.get(("single_buffered", DMA_WAIT), 0)
    assert 2 * BLOCKS * (TRANSFER - 20) <= waited <= 2 * BLOCKS * TRANSFER
    hidden = double.get(("double_buffered", DMA_WAIT), 0)
    assert 0 < hidden <= 3 * TRANSFER and hidden * 10 < waited
    # Filling the input and digesting the output are the same in both
    # modes and double-buffered: they wait for one transfer each at most.
    for phase in ("fill_input", "digest"):
        assert single.get((phase, DMA_WAIT), 0) == \
            double.get((phase, DMA_WAIT), 0) <= TRANSFER


def test_stream_usage(run, example):
    proc = run(example("stream"), "triple")
    assert proc.returncode == 2
    assert "usage: stream single|double [BLOCKS]" in proc.stdout
