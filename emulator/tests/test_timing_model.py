"""The timing model (emulator/timing/spu.model, docs/trace-unit.md "Timing
model") through coptrace and qemu-system-riscv32, on the microbenchmarks
of tests/guest/timing.c:

- the exact counts' cycles per (pc, reason) equal the model's arithmetic,
  written out here instruction by instruction from the model's figures;
- SPU_CYCLES captures are the same in the fast and reference modes, and
  SPU_INSTRUCTIONS ones count instructions as before;
- the share of SPU_CYCLES samples of each function is within 3.5 sigma of
  its share of the exact cycles, and through copsim and coprofd (the
  session's sample_stalls) so is each (function, stall reason)'s, on an
  idle and on a busy machine; SPU_INSTRUCTIONS samples are all ISSUE.
"""

import math
import os
import subprocess
import sys

import pytest
from elftools.elf.elffile import ELFFile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "tests"))
import exact_counts  # noqa: E402
import stall_shares  # noqa: E402

# emulator/timing/spu.model
INT_LAT, MUL_LAT, LOAD_LAT, MISS = 2, 7, 6, 18
MUL_ROUNDS, BRANCH_ROUNDS, LOAD_ROUNDS = 3000, 4000, 2000


def symbols(elf_path):
    with open(elf_path, "rb") as f:
        tab = ELFFile(f).get_section_by_name(".symtab")
        return {s.name: (s["st_value"], s["st_size"]) for s in tab.iter_symbols()
                if s["st_info"]["type"] in ("STT_FUNC", "STT_NOTYPE")
                and s.name}


def run(coprof_bin, command, tmp_path, every, event="SPU_CYCLES",
        reference=False, counts=None, name="run"):
    samples = str(tmp_path / (name + ".samples"))
    args = [coprof_bin("coptrace"), "run", "--sample-every", str(every),
            "--event", event, "--samples-out", samples,
            "--fifo-depth", str(1 << 20)]
    if reference:
        args.append("--reference")
    if counts:
        args += ["--exact-counts", counts]
    proc = subprocess.run(args + ["--"] + command, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode in (0, 7), proc.stderr     # short returns 7
    with open(samples) as f:
        return [int(w, 16) for w in f.read().split()]


@pytest.fixture(scope="module")
def timing_counts(coprof_bin, qemu_command, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("timing") / "timing.counts")
    run(coprof_bin, qemu_command("timing"), tmp_path_factory.mktemp("t"),
        1000, counts=path)
    return exact_counts.cycles_by_pc(path)


def at(counts, pc):
    """The cycles of pc by reason; these programs never wait (no DMA, no
    mailbox, no main memory), which is checked and left out."""
    cycles = dict(counts[pc])
    for reason in ("dma_wait", "mailbox_wait", "memory"):
        assert cycles.pop(reason) == 0
    return cycles


def test_mul_chain_cycles(timing_counts, guest):
    """li a2; 8 x mul a0,a0,a2; addi a1; bne a1 (backward): every mul after
    the first waits MUL_LAT - 1 cycles for its predecessor; the first waits
    INT_LAT - 1 for li the one time it shares li's block; bne waits
    INT_LAT - 1 for addi and falls through once (predicted taken)."""
    base = symbols(guest("timing"))["mul_chain"][0]
    c = timing_counts
    assert at(c, base) == {"issue": 1, "dependency": 0, "branch": 0}
    assert at(c, base + 4) == {"issue": MUL_ROUNDS,
                               "dependency": INT_LAT - 1, "branch": 0}
    for k in range(1, 8):
        assert at(c, base + 4 + 4 * k) == {
            "issue": MUL_ROUNDS, "dependency": (MUL_LAT - 1) * MUL_ROUNDS,
            "branch": 0}
    assert at(c, base + 36) == {"issue": MUL_ROUNDS, "dependency": 0,
                                "branch": 0}
    assert at(c, base + 40) == {"issue": MUL_ROUNDS,
                                "dependency": (INT_LAT - 1) * MUL_ROUNDS,
                                "branch": MISS}
    assert at(c, base + 44) == {"issue": 1, "dependency": 0, "branch": MISS}


def test_taken_branch_loop_cycles(timing_counts, guest):
    """addi a0; bne a0 (forward, taken every round but the last, predicted
    not taken: MISS each time it is taken); j back (direct: no cost)."""
    base = symbols(guest("timing"))["branch_loop"][0]
    c = timing_counts
    bne = at(c, base + 8)
    assert bne["issue"] == BRANCH_ROUNDS
    assert bne["dependency"] == (INT_LAT - 1) * BRANCH_ROUNDS
    assert bne["branch"] == MISS * (BRANCH_ROUNDS - 1)
    assert at(c, base + 20) == {"issue": BRANCH_ROUNDS - 1, "dependency": 0,
                                "branch": 0}


def test_load_use_cycles(timing_counts, guest):
    """lw a3; add a2,a2,a3: the add waits LOAD_LAT - 1 cycles."""
    base = symbols(guest("timing"))["load_use"][0]
    add = at(timing_counts, base + 8)
    assert add == {"issue": LOAD_ROUNDS,
                   "dependency": (LOAD_LAT - 1) * LOAD_ROUNDS, "branch": 0}


# N = 7 and 101 on every guest; N = 1 (a capture every cycle, slow in the
# reference mode) on the short one.
@pytest.mark.parametrize("name,every", [
    (name, every) for name in ("timing", "mix", "short") for every in (7, 101)
] + [("short", 1)])
def test_cycles_fast_equals_reference(coprof_bin, qemu_command, tmp_path,
                                      name, every):
    fast = run(coprof_bin, qemu_command(name), tmp_path, every, name="fast")
    ref = run(coprof_bin, qemu_command(name), tmp_path, every,
              reference=True, name="ref")
    assert fast == ref
    assert fast


def test_instructions_event_counts_instructions(coprof_bin, qemu_command,
                                                tmp_path):
    """SPU_INSTRUCTIONS:1 captures every instruction: as many captures as
    the exact count's instructions (the local store's and the reset code's,
    which is counted outside)."""
    counts = str(tmp_path / "short.counts")
    samples = run(coprof_bin, qemu_command("short"), tmp_path, 1,
                  event="SPU_INSTRUCTIONS", counts=counts)
    runs = exact_counts.read_counts(counts)
    inside = sum(i.count for r in runs for c in r.codes for i in c.insns
                 if i.pc >= 0x80000000)
    assert len(samples) == inside
    cycles = run(coprof_bin, qemu_command("short"), tmp_path, 1,
                 name="cycles")
    assert len(cycles) > len(samples)


def test_sampled_cycle_shares(coprof_bin, qemu_command, guest, tmp_path):
    """Each function's share of SPU_CYCLES:101 samples is within 3.5 sigma
    of its share of the exact cycles."""
    counts = str(tmp_path / "timing.counts")
    samples = run(coprof_bin, qemu_command("timing"), tmp_path, 101,
                  counts=counts)
    syms = symbols(guest("timing"))
    funcs = {n: syms[n] for n in ("mul_chain", "branch_loop", "load_use")}

    def owner(pc):
        for n, (start, _) in funcs.items():
            end = min([s for s, _ in syms.values() if s > start]
                      or [start + 4096])
            if start <= pc < end:
                return n
        return None

    exact = {}
    total = 0
    for pc, reasons in exact_counts.cycles_by_pc(counts).items():
        cyc = sum(reasons.values())
        total += cyc if pc >= 0x80000000 else 0
        n = owner(pc)
        if n:
            exact[n] = exact.get(n, 0) + cyc
    got = {}
    for field in samples:
        n = owner(0x80000000 + field)
        if n:
            got[n] = got.get(n, 0) + 1
    n_samples = len(samples)
    assert n_samples > 1000
    for name in funcs:
        p = exact[name] / total
        sigma = math.sqrt(p * (1 - p) / n_samples)
        assert abs(got.get(name, 0) / n_samples - p) <= 3.5 * sigma, (
            name, got.get(name, 0) / n_samples, p)


def cop_host(build_dir):
    return os.path.join(build_dir, "tests", "cop-host")


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_session_stall_shares(build_dir, guest, tmp_path, busy):
    """Through copsim and coprofd: each (function, stall reason) share of
    the session's sample_stalls is within 3.5 sigma of its share of the
    exact cycles, with two CPU burners beside it too; the multiply chain
    is sampled waiting on its operands, the taken branch on its branch."""
    with stall_shares.burners(2 if busy else 0):
        db, counts = stall_shares.record(
            build_dir, [cop_host(build_dir), guest("timing")], tmp_path)
    got, want = stall_shares.compare(db, counts, guest("timing"))
    dependency, branch = exact_counts.REASONS.index("dependency"), \
        exact_counts.REASONS.index("branch")
    assert got[("mul_chain", dependency)] > 0.5 * want[("mul_chain",
                                                        dependency)] \
        * sum(got.values()) / sum(want.values())
    assert got[("branch_loop", branch)] > 0
    assert sum(n for (f, s), n in got.items() if f == "mul_chain"
               and s == branch) <= 3       # one fall-through: 18 cycles


def test_session_instructions_are_all_issue(build_dir, guest, tmp_path):
    """Under SPU_INSTRUCTIONS every sample is ISSUE, and sample_stalls
    holds every exact sample."""
    db, _ = stall_shares.record(build_dir,
                                [cop_host(build_dir), guest("timing")],
                                tmp_path, every=157,
                                event="SPU_INSTRUCTIONS")
    rows = dict(db.execute("SELECT stall, SUM(count) FROM sample_stalls"
                           " GROUP BY stall"))
    assert list(rows) == [0]
    assert rows[0] == db.execute("SELECT SUM(count) FROM samples"
                                 ).fetchone()[0] > 300
