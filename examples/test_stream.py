"""The streaming example (examples/stream/): single- and double-buffered
DMA compute the same result, and the exact counts show the DMA-wait
cycles falling from one to the other (the classic SPU pattern)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import exact_counts  # noqa: E402

BLOCKS = 16


def dma_wait(run, image, mode, tmp_path):
    counts = str(tmp_path / (mode + ".counts"))
    proc = run(image, mode, BLOCKS, options=["--sample-every", "1000",
                                             "--exact-counts", counts])
    assert proc.returncode == 0, proc.stderr
    cycles = exact_counts.cycles_by_pc(counts)
    return proc.stdout, sum(c["dma_wait"] for c in cycles.values())


def test_double_buffering_hides_the_dma_wait(run, example, tmp_path):
    image = example("stream")
    single_out, single = dma_wait(run, image, "single", tmp_path)
    double_out, double = dma_wait(run, image, "double", tmp_path)
    assert single_out.split()[2:] == double_out.split()[2:]    # the digest
    # single waits for every 4 KiB get and put as it is issued: at most the
    # model's 300 + 4096 / 8 cycles each, 2 per block; double only for the
    # first get and the last puts.
    assert BLOCKS * 812 <= single <= 2 * BLOCKS * 812
    assert double * 10 < single


def test_stream_usage(run, example):
    proc = run(example("stream"), "triple")
    assert proc.returncode == 2
    assert "usage: stream single|double [BLOCKS]" in proc.stdout
