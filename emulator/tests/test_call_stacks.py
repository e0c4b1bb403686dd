"""The trace unit's call stacks (`cop-run --call-graph`): the stack held at
each capture of the fast mode equals the reference mode's walk at every
instruction, on programs with recursion, tail calls, overlays calling each
other through the manager and a longjmp; on the calltree program, whose
call tree is known, every capture's frames are its real callers, with the
overlay each caller ran in."""

import bisect
import os
import subprocess

import pytest

from emulator.tests.test_cop_run_trace import COUNTERS, PROGRAMS

CALLTREE = ("calltree", "tests/cop", ["2"])
OVERLAYS = {1: "ping", 2: "pong"}   # calltree's overlays, both in region 1


def run(coprof_bin, tmp_path, image, args, every, depth, *options):
    samples = tmp_path / ("stacks-%d-%d-%s" % (every, depth,
                                               "-".join(options)))
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", str(every),
         "--call-graph", str(depth), "--samples-out", str(samples),
         "--fifo-depth", str(1 << 21), *options, image, *args],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    match = COUNTERS.search(proc.stderr)
    assert match and int(match.group(2)) == 0, proc.stderr
    return samples.read_text().splitlines()


@pytest.mark.parametrize("depth", [16, 3])
@pytest.mark.parametrize("every", [1, 7, 1000])
@pytest.mark.parametrize("name,folder,args", PROGRAMS + [CALLTREE],
                         ids=[p[0] for p in PROGRAMS + [CALLTREE]])
def test_fast_stacks_equal_reference_walk(coprof_bin, build_dir, tmp_path,
                                          name, folder, args, every, depth):
    image = os.path.join(build_dir, folder, name + ".elf")
    fast = run(coprof_bin, tmp_path, image, args, every, depth)
    reference = run(coprof_bin, tmp_path, image, args, every, depth,
                    "--reference")
    assert fast == reference
    assert any(len(line.split()) > 2 for line in fast)


def test_stacks_leave_captures_unchanged(coprof_bin, build_dir, tmp_path):
    image = os.path.join(build_dir, "tests", "cop", "calltree.elf")
    stacked = run(coprof_bin, tmp_path, image, ["2"], 7, 8)
    plain = tmp_path / "plain"
    subprocess.run([coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "7",
                    "--samples-out", str(plain), "--fifo-depth",
                    str(1 << 21), image, "2"], check=True,
                   capture_output=True)
    assert [line.split()[0] for line in stacked] == \
        plain.read_text().split()


class Symbols:
    """The calltree image's functions, by local-store offset."""

    def __init__(self, image):
        out = subprocess.run(["riscv64-unknown-elf-nm", "-n", image],
                             check=True, capture_output=True,
                             text=True).stdout
        self.starts, self.names = [], []
        for line in out.splitlines():
            value, kind, name = line.split()[:3]
            if kind in "tT":
                self.starts.append(int(value, 16) - 0x80000000)
                self.names.append(name.split(".")[0])

    def name(self, offset, overlay=0):
        if overlay:
            return OVERLAYS[overlay]
        return self.names[bisect.bisect_right(self.starts, offset) - 1]


def parse(line, symbols):
    """(function of the PC, [(caller function, overlay), ...] innermost
    first): a frame's function is the one its return address is in."""
    fields = line.split()
    frames = []
    for frame in fields[1:]:
        address, _, overlay = frame.partition("@")
        overlay = int(overlay or 0)
        frames.append((symbols.name(int(address, 16) - 4, overlay), overlay))
    return symbols.name(int(fields[0], 16)), frames


def test_calltree_frames_are_the_real_callers(coprof_bin, build_dir,
                                              tmp_path):
    image = os.path.join(build_dir, "tests", "cop", "calltree.elf")
    lines = run(coprof_bin, tmp_path, image, ["2"], 1, 64)
    symbols = Symbols(image)
    base = [("__cop_start", 0), ("_start", 0)]
    seen = {}
    for line in lines:
        function, frames = parse(line, symbols)
        seen.setdefault(function, set()).add(tuple(frames))
    assert seen["main"] == {tuple(base)}
    # hot_b: through a and c, through pong (in overlay 2) called from ping
    # (overlay 1, which pong replaced meanwhile), and at the bottom of
    # jump's recursion; a tail call leaves e out of d's callers.
    assert seen["hot_b"] == {
        tuple([("a", 0), ("main", 0)] + base),
        tuple([("c", 0), ("main", 0)] + base),
        tuple([("pong", 2), ("ping", 1), ("main", 0)] + base),
        tuple([("jump", 0)] * 7 + [("main", 0)] + base),
    }
    assert seen["d"] == {tuple([("main", 0)] + base)}
    assert "e" not in {f for s in seen.values() for t in s for f, _ in t}
    assert seen["fib"] == {tuple([("fib", 0)] * k + [("main", 0)] + base)
                           for k in range(9)}
    # After the longjmp nothing of jump is left: main's frames above.
    assert seen["longjmp"] == {tuple([("jump", 0)] * 7 + [("main", 0)]
                                     + base)}
