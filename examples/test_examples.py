"""The example programs under cop-run: their output against the Python
models of example_models.py, their exit status, the overlays example's guard
words and load count, and the pipeline's results in the data window."""

import struct

import pytest

import copimage
import example_models


@pytest.mark.parametrize("rounds", [1, 3])
def test_kernels(run, example, rounds):
    result = run(example("kernels"), rounds)
    assert result.returncode == 0, result.stderr
    assert result.stdout == example_models.kernels(rounds) + "\n"


def test_kernels_default_rounds(run, example):
    result = run(example("kernels"))
    assert result.returncode == 0
    assert result.stdout == example_models.kernels(4) + "\n"


@pytest.mark.parametrize("count", ["0", "99999999999999999999"])
@pytest.mark.parametrize("name", ["kernels", "overlays", "pipeline",
                                  "alias"])
def test_bad_count_is_refused(run, example, name, count):
    """0, and a count strtol cannot hold (it sets errno, ERANGE)."""
    result = run(example(name), count)
    assert result.returncode == 2
    assert "must be a positive number" in result.stdout


def test_kernels_has_its_hot_functions(example):
    symbols = copimage.Image(example("kernels")).symbols
    for function in ("matrix_multiply", "crc32_bitwise", "insertion_sort"):
        assert function in symbols


def test_alias(run, example):
    result = run(example("alias"), 2)
    assert result.returncode == 0, result.stderr
    assert result.stdout == example_models.alias(2) + "\n"


def test_alias_loop_is_seven_instructions(example):
    """1, 2 and 4 instructions of 4 bytes, one after the other: the loop
    whose length divides N = 1001."""
    image = copimage.Image(example("alias"))
    head, mid, tail = (image.symbols[f] for f in
                       ("alias_head", "alias_mid", "alias_tail"))
    assert (mid - head, tail - mid) == (4, 8)
    with open(example("alias"), "rb") as f:
        from elftools.elf.elffile import ELFFile
        sizes = {s.name: s["st_size"] for s in
                 ELFFile(f).get_section_by_name(".symtab").iter_symbols()}
    # alias_tail's 4 loop instructions, then the 2 of its return
    assert (sizes["alias_head"], sizes["alias_mid"], sizes["alias_tail"]) \
        == (4, 8, 24)


@pytest.mark.parametrize("rounds", [1, 4])
def test_overlays(run, example, tmp_path, rounds):
    image = copimage.Image(example("overlays"))
    ram = str(tmp_path / "ram")
    result = run(image.path, rounds, ram_file=ram)
    assert result.returncode == 0, result.stderr
    histogram = image.overlay("histogram").index
    sort = image.overlay("sort").index
    assert result.stdout == \
        "overlays rounds=%d digest=%08x loads=%d guards=%d,%d\n" % (
            rounds, example_models.overlays(rounds), 7 * rounds, histogram, sort)
    # The guard words in the RAM file name the last overlay of each region.
    assert copimage.guard_words(image, ram) == [histogram, sort]
    assert image.overlay("histogram").buf == 1
    assert image.overlay("sort").buf == 2


def test_overlays_layout(example):
    image = copimage.Image(example("overlays"))
    assert [(e.name, e.buf) for e in image.overlays] == [
        ("blur", 1), ("crc", 1), ("histogram", 1), ("sieve", 2), ("sort", 2)]
    hot = {"blur": "blur_picture", "crc": "crc16_bitwise",
           "histogram": "histogram_median", "sieve": "count_primes",
           "sort": "shell_sort"}
    for entry in image.overlays:
        address = image.symbols[hot[entry.name]]
        assert entry.vma <= address < entry.vma + entry.size


def frame_lines(results):
    return ["frame %d mean=%d edges=%d threshold=%d runs=%d checksum=%08x" % r
            for r in results]


def test_pipeline_makes_its_own_frames(run, example, tmp_path):
    frames = 3
    ram = str(tmp_path / "ram")
    result = run(example("pipeline"), frames, ram_file=ram)
    assert result.returncode == 0, result.stderr
    expected = example_models.pipeline(example_models.camera_frames(frames))
    assert result.stdout.splitlines() == frame_lines(expected) + [
        "pipeline frames=%d" % frames]
    # The data window: header, the frames made, and one result per frame.
    header = copimage.read_words(ram, copimage.DATA_BASE, 8)
    results_offset = 64 + frames * example_models.FRAME
    assert header == [0x534d5246, 64, 48, frames, 64, results_offset, frames, 0]
    assert copimage.read_ram(ram, copimage.DATA_BASE + 64,
                             frames * example_models.FRAME) == \
        b"".join(example_models.camera_frames(frames))
    records = copimage.read_words(ram, copimage.DATA_BASE + results_offset,
                                  5 * frames)
    assert [tuple(records[5 * k:5 * k + 5]) for k in range(frames)] == \
        [(k, e, t, r, c) for k, _, e, t, r, c in expected]


def test_pipeline_processes_host_frames(run, example, tmp_path):
    """Frames put in the data window beforehand (as a host program would)
    are processed instead of the camera's."""
    frames = [bytes((x * 5 + y * 3 + k * 40) & 0xff if (x // 8 + y // 8) % 2
                    else 30 for y in range(48) for x in range(64))
              for k in range(2)]
    data = tmp_path / "frames.bin"
    data.write_bytes(struct.pack("<8I", 0x534d5246, 64, 48, 2, 64,
                                 64 + 2 * example_models.FRAME, 0, 0) +
                     bytes(32) + b"".join(frames))
    result = run(example("pipeline"), 9, options=["--data-file", str(data)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == \
        frame_lines(example_models.pipeline(frames)) + ["pipeline frames=2"]


def test_pipeline_refuses_other_frame_sizes(run, example, tmp_path):
    data = tmp_path / "frames.bin"
    data.write_bytes(struct.pack("<8I", 0x534d5246, 32, 32, 1, 64, 2048, 0, 0))
    result = run(example("pipeline"), options=["--data-file", str(data)])
    assert result.returncode == 134
    assert result.stdout == \
        "cop: pipeline: host frames are 32x32, expected 64x48\n"
