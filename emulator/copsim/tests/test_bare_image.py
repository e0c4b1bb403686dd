"""Images run unmodified on slots (issue 30): examples/bare, a plain
RISC-V program built without the SDK (its own start code and linker
script), runs on copsim's slot model through libcop, executes exactly
what cop-run counts for it (instruction by instruction, so no instruction
was rewritten and each trapping CSR access counts once), and its profile
attributes samples to its own functions in the shares its exact counts
give."""

import collections
import os
import re
import subprocess
import sys

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(SOURCE, "tests"))
import exact_counts  # noqa: E402


def image(build_dir):
    return os.path.join(build_dir, "examples", "bare.elf")


def counts_by_pc(path):
    counts = collections.Counter()
    for run in exact_counts.read_counts(path):
        for code in run.codes:
            for insn in code.insns:
                counts[insn.pc] += insn.count
    return counts


def functions(path):
    """(start, end, name) of the image's functions, by address."""
    out = subprocess.run(["riscv64-unknown-elf-nm", "-S", "-n", path],
                         check=True, capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        words = line.split()
        if len(words) == 4 and words[2] in "tT":
            start = int(words[0], 16)
            found.append((start, start + int(words[1], 16), words[3]))
    return found


def share(counts, functions_, name):
    start, end, _ = [f for f in functions_ if f[2] == name][0]
    return sum(n for pc, n in counts.items() if start <= pc < end) \
        / sum(counts.values())


def test_bare_image_counts_as_under_cop_run(copsim, test_bin, build_dir,
                                            tmp_path):
    counts = tmp_path / "counts"
    counts.mkdir()
    sim = copsim("--slots", "2", "--context-model=slot", "--exact-counts",
                 str(counts))
    result = subprocess.run([test_bin("cop-host"), "--contexts", "2",
                             "--threads", "2", image(build_dir)],
                            env=sim.env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("bare: sum=2fa11490 walk=4ea29200\n") == 2
    assert result.stdout.count("status=0 reason=exit") == 2
    reference = tmp_path / "reference.counts"
    done = subprocess.run([os.path.join(build_dir, "bin", "cop-run"),
                           "--sample-every", "100000", "--exact-counts",
                           str(reference), image(build_dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    expected = counts_by_pc(str(reference))
    files = sorted(os.listdir(counts))
    assert len(files) == 2
    for name in files:
        assert counts_by_pc(str(counts / name)) == expected
    # The slots' cycles (fast mode: a block counted when it starts) are
    # the same instructions: each emulated CSR access counted once.
    assert [int(n) for n in re.findall(r" instructions=(\d+) ",
                                       result.stdout)] \
        == [sum(expected.values())] * 2


def test_bare_image_is_profiled_by_its_functions(build_dir, test_bin,
                                                 tmp_path):
    stream = tmp_path / "stream"
    counts = tmp_path / "counts"
    counts.mkdir()
    proc = subprocess.run(
        [os.path.join(build_dir, "bin", "copsim"), "--event=SPU_CYCLES:997",
         "--no-dither", "--stream-out", str(stream), "--slots", "1",
         "--context-model=slot", "--exact-counts", str(counts), "--",
         test_bin("cop-host"), image(build_dir)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dump = subprocess.run(
        [os.path.join(build_dir, "bin", "copstream"), "dump", str(stream)],
        capture_output=True, text=True, check=True, timeout=300).stdout
    samples = collections.Counter()
    for line in dump.splitlines():
        words = line.split()
        if words[1] == "sample":
            address = int(words[3].split("=")[1], 16)
            samples[0x80000000 + address] += 1
    assert sum(samples.values()) > 500
    found = functions(image(build_dir))
    [truth] = os.listdir(counts)
    truth = counts_by_pc(str(counts / truth))
    for name in ("checksum", "walk"):
        assert abs(share(samples, found, name)
                   - share(truth, found, name)) < 0.06, name
    assert share(truth, found, "checksum") > 0.5
    assert share(truth, found, "walk") > 0.15
