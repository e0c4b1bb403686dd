"""The pipeline example (examples/pipeline/) the SPU way: main memory by
DMA only, so its cycles are its stages' and none are main-memory access;
stage_fetch waits for one frame's get per frame; the result records go
back by DMA without touching the bytes around them."""

import os
import struct
import sys

import copimage
import example_models

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import exact_counts  # noqa: E402
import stall_shares  # noqa: E402

# emulator/timing/spu.model: a frame's get (64 x 48 bytes) holds the bus
# 3072 / 8 cycles and completes dma.latency = 300 cycles later.
FETCH = 300 + example_models.FRAME // 8
DMA_WAIT = exact_counts.REASONS.index("dma_wait")
MEMORY = exact_counts.REASONS.index("memory")
MAGIC = 0x534d5246


def host_frames(count):
    """count frames of a checkerboard with a gradient, as a host would
    make them."""
    return [bytes((x * 5 + y * 3 + k * 40) & 0xff if (x // 8 + y // 8) % 2
                  else 30 for y in range(48) for x in range(64))
            for k in range(count)]


def host_window(frames, results_offset, fill=b"\0", frames_offset=64):
    """The data window's start: header, padding, frames, then fill up to
    64 bytes past the records' end."""
    head = struct.pack("<8I", MAGIC, 64, 48, len(frames), frames_offset,
                       results_offset, 0, 0)
    body = head + fill * (frames_offset - len(head)) + b"".join(frames)
    end = results_offset + 20 * len(frames) + 64
    return body + fill * (end - len(body))


def frame_lines(results):
    return ["frame %d mean=%d edges=%d threshold=%d runs=%d checksum=%08x" % r
            for r in results]


def exact_by_function(run, tmp_path, *args, options=()):
    """(the finished run of the pipeline, {(function, stall): cycles})."""
    counts = str(tmp_path / "pipeline.counts")
    image = args[0]
    proc = run(*args, options=["--sample-every", "1000",
                               "--exact-counts", counts] + list(options))
    assert proc.returncode == 0, proc.stderr
    return proc, stall_shares.exact_by_function(counts, image)


def cycles_of(cycles, function=None, stall=None):
    return sum(n for (f, s), n in cycles.items()
               if function in (None, f) and stall in (None, s))


def check_dma_only(proc, cycles, expected):
    assert proc.stdout.splitlines() == frame_lines(expected) + [
        "pipeline frames=%d" % len(expected)]
    assert cycles_of(cycles, stall=MEMORY) == 0
    # stage_fetch waits for its get at once: the whole transfer, less the
    # few cycles between the issue and the wait, per frame.
    waited = cycles_of(cycles, "stage_fetch", DMA_WAIT)
    assert len(expected) * (FETCH - 20) <= waited <= len(expected) * FETCH
    by_function = {}
    for (function, _), n in cycles.items():
        by_function[function] = by_function.get(function, 0) + n
    assert max(by_function, key=by_function.get) == "stage_denoise"


def test_camera_frames_by_dma_only(run, example, tmp_path):
    frames = 2
    proc, cycles = exact_by_function(run, tmp_path, example("pipeline"),
                                     frames)
    check_dma_only(proc, cycles, example_models.pipeline(
        example_models.camera_frames(frames)))


def test_host_frames_by_dma_only(run, example, tmp_path):
    frames = host_frames(2)
    data = tmp_path / "frames.bin"
    data.write_bytes(host_window(frames, 64 + 2 * example_models.FRAME))
    proc, cycles = exact_by_function(run, tmp_path, example("pipeline"),
                                     options=["--data-file", str(data)])
    check_dma_only(proc, cycles, example_models.pipeline(frames))


def test_records_written_back_alone(run, example, tmp_path):
    """Records at an offset that is no multiple of 16 land where they
    belong, and the bytes of the 16-byte blocks around them keep what the
    host put there."""
    frames = host_frames(3)
    results_offset = 64 + 3 * example_models.FRAME + 4
    window = host_window(frames, results_offset, fill=b"\xa5")
    data, ram = tmp_path / "frames.bin", str(tmp_path / "ram")
    data.write_bytes(window)
    proc = run(example("pipeline"), ram_file=ram,
               options=["--data-file", str(data)])
    assert proc.returncode == 0, proc.stderr
    after = copimage.read_ram(ram, copimage.DATA_BASE, len(window))
    records = b"".join(struct.pack("<5I", k, e, t, r, c) for k, _, e, t, r, c
                       in example_models.pipeline(frames))
    end = results_offset + len(records)
    assert after[results_offset:end] == records
    assert after[end:] == window[end:]
    assert after[32:results_offset] == window[32:results_offset]
    # The header as the host wrote it, with frames_done.
    assert after[:32] == window[:24] + struct.pack("<2I", 3, 0)


def test_unaligned_frames_are_refused(run, example, tmp_path):
    data = tmp_path / "frames.bin"
    data.write_bytes(host_window(host_frames(1), 72 + example_models.FRAME,
                                 frames_offset=72))
    proc = run(example("pipeline"), options=["--data-file", str(data)])
    assert proc.returncode == 134
    assert proc.stdout == \
        "cop: pipeline: host frames at offset 72, expected a multiple of " \
        "16 (DMA)\n"
