"""Direct loads and stores to the data window, charged as main-memory
access (the timing model's memory.latency, ../timing/spu.model;
docs/coprocessor-abi.md "Direct access to the data window"), through
cop-run and the trace unit, on the SDK's memory-probe program
(sdk/tests/memory-probe.c, built as build/tests/cop/memory-probe.elf):

- the exact counts' MEMORY cycles of a loop of N window loads, and of N
  window stores, are N x memory.latency at the load or store, read from
  the model file; the local-store loads cost what they did (no MEMORY);
- the share of SPU_CYCLES samples of the function doing window loads is
  within 3.5 sigma of its share of the exact cycles;
- the captures and the exact counts are the same in the fast and the
  reference modes.
"""

import math
import os
import sys

import pytest
from elftools.elf.elffile import ELFFile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "tests"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "sdk", "tests"))
import copimage  # noqa: E402
from copimage import run  # noqa: E402,F401  (a fixture)
import exact_counts  # noqa: E402

MODEL = os.path.join(os.path.dirname(__file__), "..", "timing", "spu.model")
WORDS = 300


def model():
    """The machine description's numbers, {key: int}."""
    out = {}
    with open(MODEL) as f:
        for line in f:
            words = line.split("#")[0].split()
            if len(words) == 2 and words[1].isdigit():
                out[words[0]] = int(words[1])
    return out


@pytest.fixture(scope="module")
def probe(build_dir):
    return copimage.image_path(build_dir, "tests", "cop", "memory-probe.elf")


def functions(image):
    with open(image, "rb") as f:
        tab = ELFFile(f).get_section_by_name(".symtab")
        return {s.name: s["st_value"] for s in tab.iter_symbols()
                if s.name in ("window_loads", "ls_loads", "window_stores")}


def traced(run, probe, tmp_path, every=1000, reference=False):
    tmp_path.mkdir(exist_ok=True)
    counts = str(tmp_path / "probe.counts")
    samples = str(tmp_path / "probe.samples")
    options = ["--sample-every", str(every), "--exact-counts", counts,
               "--samples-out", samples, "--fifo-depth", str(1 << 20)]
    if reference:
        options.append("--reference")
    proc = run(probe, str(WORDS), options=options)
    assert proc.returncode == 0, proc.stderr
    return counts, samples


def test_memory_cycles_are_the_models_arithmetic(run, probe, tmp_path):
    counts, _ = traced(run, probe, tmp_path)
    cycles = exact_counts.cycles_by_pc(counts)
    at = functions(probe)
    latency = model()["memory.latency"]
    # window_loads and ls_loads: li a2, 0; lw a3, 0(a0); ...
    # window_stores: sw a1, 0(a0); ...
    assert cycles[at["window_loads"] + 4]["memory"] == WORDS * latency
    assert cycles[at["window_stores"]]["memory"] == WORDS * latency
    ls_load = cycles[at["ls_loads"] + 4]
    assert ls_load["memory"] == 0
    assert ls_load["issue"] == WORDS * model()["load.issue"]
    # the add after each load waits for it as before: load.latency - 1
    assert (cycles[at["ls_loads"] + 8]["dependency"]
            == WORDS * (model()["load.latency"] - 1))
    assert (cycles[at["window_loads"] + 8]["dependency"]
            == WORDS * (model()["load.latency"] - 1))
    assert (sum(c["memory"] for c in cycles.values())
            == 2 * WORDS * latency)


def test_sampled_memory_share(run, probe, tmp_path):
    """window_loads' share of SPU_CYCLES:101 samples is within 3.5 sigma
    of its share of the exact cycles (mostly MEMORY)."""
    counts, samples = traced(run, probe, tmp_path, every=101)
    start = functions(probe)["window_loads"]
    end = functions(probe)["ls_loads"]
    cycles = exact_counts.cycles_by_pc(counts)
    total = sum(sum(c.values()) for pc, c in cycles.items()
                if pc >= 0x80000000)
    exact = sum(sum(c.values()) for pc, c in cycles.items()
                if start <= pc < end)
    with open(samples) as f:
        fields = [0x80000000 + int(w, 16) for w in f.read().split()]
    n = len(fields)
    assert n > 1000
    got = sum(1 for pc in fields if start <= pc < end) / n
    p = exact / total
    assert p > 0.3
    assert abs(got - p) <= 3.5 * math.sqrt(p * (1 - p) / n), (got, p)


@pytest.mark.parametrize("every", [7, 101])
def test_fast_and_reference_agree(run, probe, tmp_path, every):
    counts_fast, samples_fast = traced(run, probe, tmp_path / "f", every)
    counts_ref, samples_ref = traced(run, probe, tmp_path / "r", every,
                                     reference=True)
    with open(samples_fast) as f, open(samples_ref) as r:
        assert f.read() == r.read()
    assert (exact_counts.cycles_by_pc(counts_fast)
            == exact_counts.cycles_by_pc(counts_ref))
