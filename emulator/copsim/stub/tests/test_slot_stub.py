"""Tests of the resident slot stub (emulator/copsim/stub/): contexts that
are saved state, switched on one long-lived emulator.

Guest time is the instruction count here (slotrun --icount), so every run
ends its slices at the same instructions: a context is certainly preempted
as often as asserted, on a loaded machine too, and the runs repeat.  The
truth is each context run alone on the slot: time-sliced, every context
must print the same, end the same and execute exactly the same
instructions (the plugin's exact counts, kept per context, instruction by
instruction), and the stub's own instructions must count for nobody.
"""

import collections
import os
import re
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "tests"))
import exact_counts  # noqa: E402

SLOTRUN = os.path.join(HERE, "..", "slotrun.py")


@pytest.fixture(scope="module")
def slot(build_dir, coprof_bin):
    """slot(tmp, *images, **options) runs images as contexts of one slot;
    returns (stdout, stderr, results, exact counts by (pc, bytes))."""
    stub = os.path.join(build_dir, "tests", "slot", "slot-stub.elf")

    def image(name):
        path = os.path.join(build_dir, "tests", "slot", name + ".elf")
        if not os.path.exists(path):
            pytest.fail("%s is not built: run make" % path)
        return path

    def run(tmp, *names, slice_us=20, reference=False, extra=()):
        counts = os.path.join(str(tmp), "run-%d.counts" % len(os.listdir(str(tmp))))
        cmd = ["/usr/bin/python3", SLOTRUN, "--stub", stub,
               "--coptrace", coprof_bin("coptrace"), "--icount",
               "--slice-us", str(slice_us), "--exact-counts", counts]
        cmd += ["--reference"] if reference else []
        cmd += list(extra) + [image(n) for n in names]
        done = subprocess.run(cmd, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr
        results = [parse_context(line) for line in done.stderr.splitlines()
                   if line.startswith("context ")]
        assert len(results) == len(names), done.stderr
        return done.stdout, done.stderr, results, by_instruction(counts)
    return run


def parse_context(line):
    m = re.match(r"context (\d+) (\S+): (exit|fault) status=(\d+)(.*) "
                 r"binds=(\d+)$", line)
    assert m, line
    fields = dict(re.findall(r"(\w+)=(\S+)", m.group(5)))
    return {"end": m.group(3), "status": int(m.group(4)),
            "binds": int(m.group(6)), **fields}


def by_instruction(path):
    """Exact counts by context (its entry), each by (pc, instruction
    bytes)."""
    counts = collections.defaultdict(collections.Counter)
    for run in exact_counts.read_counts(path):
        for code in run.codes:
            for insn in code.insns:
                counts[run.context][(insn.pc, insn.data)] += insn.count
    return counts


def same_console(out, lines):
    """The contexts share the slot's one UART, so a switch in the middle of
    a line interleaves two contexts' lines: what was printed must be the
    same characters, and each line alone must come out in order within
    it (a subsequence)."""
    def in_order(line):
        rest = iter(out)
        return all(ch in rest for ch in line)
    return (collections.Counter(out) == collections.Counter("".join(
        line + "\n" for line in lines)) and all(map(in_order, lines)))


def alone(slot, tmp_path, names, reference=False):
    """Each image run alone on the slot: outputs, results, and each one's
    counts (a list, in the order of names)."""
    lines, results, counts = [], [], []
    for name in names:
        out, _, res, by_context = slot(tmp_path, name, reference=reference)
        assert list(by_context) == [0]
        lines += out.splitlines()
        results += res
        counts.append(by_context[0])
    return lines, results, counts


@pytest.mark.parametrize("reference", [False, True],
                         ids=["fast", "reference"])
def test_preempted_contexts_run_as_alone(slot, tmp_path, reference):
    names = ["mix", "short", "mix"]
    out, err, results, counts = slot(tmp_path, *names, reference=reference)
    lines, alone_results, alone_counts = alone(slot, tmp_path, names,
                                               reference)

    # 780,579 instructions in 20,000-instruction slices: dozens of binds.
    assert results[0]["binds"] >= 30 and results[2]["binds"] >= 30, err
    assert int(re.search(r"switches=(\d+)", err).group(1)) >= 60, err
    for got, want in zip(results, alone_results):
        assert (got["end"], got["status"]) == (want["end"], want["status"])
    assert [counts[k] for k in range(len(names))] == alone_counts
    assert same_console(out, lines)


def test_fault_leaves_the_slot_usable(slot, tmp_path):
    names = ["trap", "mix", "short"]
    out, err, results, counts = slot(tmp_path, *names)
    lines, _, alone_counts = alone(slot, tmp_path, names)

    assert results[0]["end"] == "fault" and results[0]["status"] == 132
    assert results[0]["mcause"] == "2", err       # illegal instruction
    assert results[0]["binds"] >= 2, err          # it shared the slot
    assert [(r["end"], r["status"]) for r in results[1:]] == \
        [("exit", 0), ("exit", 7)]
    assert [counts[k] for k in range(len(names))] == alone_counts
    assert same_console(out, lines)


def test_stub_counts_for_nobody(slot, tmp_path):
    # Every instruction captured: none outside the local store, as many
    # captures as instructions, and those are the program's own.
    _, err, _, counts = slot(tmp_path, "short", "short", reference=True,
                             extra=["--sample-every", "1"])
    stats = dict(re.findall(r"(\w+)=(\d+)",
                            [l for l in err.splitlines()
                             if l.startswith("captures=")][0]))
    assert stats["outside_ls"] == "0"
    assert int(stats["captures"]) == int(stats["instructions"]) \
        == sum(sum(c.values()) for c in counts.values())
    assert all(0x80000000 <= pc < 0x80040000
               for c in counts.values() for pc, _ in c)


def test_bad_input_refused(build_dir, tmp_path):
    stub = os.path.join(build_dir, "tests", "slot", "slot-stub.elf")
    junk = tmp_path / "junk.elf"
    junk.write_bytes(b"not an elf")
    for args, message in [
            ([str(junk)], "junk.elf: not an ELF file"),
            ([str(tmp_path / "gone.elf")], "gone.elf: cannot read: No such"),
            ([stub], "outside the local store"),
            ([stub.replace("slot-stub", "short")] * 32,
             "32 contexts: a slot stub holds 1 to 31")]:
        done = subprocess.run(["/usr/bin/python3", SLOTRUN, "--stub", stub]
                              + args, capture_output=True, text=True)
        assert done.returncode == 2
        assert len(done.stderr.splitlines()) == 1
        assert message in done.stderr


def test_thousand_contexts_through_eight_slots(build_dir, coprof_bin):
    # Fed while the emulators run: 8 long-lived QEMUs, 4 entries each,
    # every second context faulting; nothing runs out, every slot goes on.
    slot_dir = os.path.join(build_dir, "tests", "slot")
    done = subprocess.run(
        ["/usr/bin/python3", SLOTRUN, "--stub",
         os.path.join(slot_dir, "slot-stub.elf"),
         "--coptrace", coprof_bin("coptrace"), "--slots", "8",
         "--entries", "4", "--repeat", "500", "--slice-us", "500",
         os.path.join(slot_dir, "short.elf"),
         os.path.join(slot_dir, "trap.elf")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = done.stderr.splitlines()[-1]
    assert "contexts=1000 " in summary, summary
    assert " exit:7=500 fault:132=500 " in summary, summary
    # Eight emulators write one pipe a byte at a time: the same bytes.
    assert collections.Counter(done.stdout) == collections.Counter(
        "short 0x000002a4\n" * 500 + "trap 0x28a1eb17\n" * 500)


def cop_run_counts(coprof_bin, tmp_path, image, args, reference):
    """cop-run's run of image alone (its own QEMU, the test device's exit):
    status, console, exact counts by pc inside the local store."""
    counts = str(tmp_path / ("cop-run-%d.counts" % len(os.listdir(tmp_path))))
    done = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "1000003",
         "--exact-counts", counts] + (["--reference"] if reference else [])
        + [image] + args, capture_output=True, text=True, timeout=600)
    return done.returncode, done.stdout, by_pc(by_instruction(counts)[0])


def by_pc(counts):
    """Counts by pc inside the local store (cop-run's also hold QEMU's reset
    code, which slotrun's contexts, started at their entry, do not run)."""
    out = collections.Counter()
    for (pc, _), n in counts.items():
        if 0x80000000 <= pc < 0x80040000:
            out[pc] += n
    return out


@pytest.mark.parametrize("reference", [False, True],
                         ids=["fast", "reference"])
def test_sdk_programs_run_as_under_cop_run(build_dir, coprof_bin, tmp_path,
                                           reference):
    # SDK images laid out by the project's loader, time-sliced on one slot
    # at 50,000-instruction slices, against cop-run's standalone runs.
    images = [os.path.join(build_dir, "examples", e + ".elf")
              for e in ("kernels", "overlays", "pipeline")]
    probe = os.path.join(build_dir, "tests", "cop", "runtime-probe.elf")
    contexts = [(i, []) for i in images] + [(probe, ["illegal"]),
                                            (probe, ["exit", "5"])]
    counts = str(tmp_path / "slot.counts")
    done = subprocess.run(
        ["/usr/bin/python3", SLOTRUN, "--stub",
         os.path.join(build_dir, "tests", "slot", "slot-stub.elf"),
         "--coptrace", coprof_bin("coptrace"), "--icount",
         "--slice-us", "50", "--exact-counts", counts]
        + (["--reference"] if reference else [])
        + [",".join([image] + args) for image, args in contexts],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    results = [parse_context(line) for line in done.stderr.splitlines()
               if line.startswith("context ")]
    slot_counts = by_instruction(counts)
    alone_lines = []
    for k, (image, args) in enumerate(contexts):
        status, out, alone = cop_run_counts(coprof_bin, tmp_path, image,
                                            args, reference)
        assert results[k]["status"] == status, (image, args)
        assert by_pc(slot_counts[k]) == alone, (image, args)
        alone_lines += out.splitlines()
    # kernels, overlays and pipeline ran 1.8 M to 3.5 M instructions each.
    assert all(r["binds"] >= 30 for r in results[:3]), done.stderr
    assert [r["status"] for r in results[3:]] == [132, 5]
    assert same_console(done.stdout, alone_lines)


def test_windows_are_per_context_in_main_memory(build_dir, coprof_bin,
                                                tmp_path):
    # Each context's image and data windows are its own area of the main
    # memory file (ivshmem's BAR 2 at 0x40000000), named by its boot block:
    # the controller reads what each context wrote, and an overlays image
    # loads its overlays from its image window there.
    probe = os.path.join(build_dir, "tests", "cop", "runtime-probe.elf")
    overlays = os.path.join(build_dir, "examples", "overlays.elf")
    done = subprocess.run(
        ["/usr/bin/python3", SLOTRUN, "--stub",
         os.path.join(build_dir, "tests", "slot", "slot-stub.elf"),
         "--coptrace", coprof_bin("coptrace"), "--icount", "--slice-us", "50",
         "--data-out", str(tmp_path), probe + ",fill-data,100000", overlays,
         probe + ",fill-data,7", probe + ",windows"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    words = lambda n: b"".join(((i * 0x01010101) & 0xffffffff).to_bytes(
        4, "little") for i in range(n)).rstrip(b"\0")
    assert (tmp_path / "context-0.data").read_bytes() == words(100000)
    assert (tmp_path / "context-2.data").read_bytes() == words(7)
    assert "data=0x43800000 size=6291456" in done.stdout
    assert "image=0x43000000 size=" in done.stdout and "magic=ELF" in \
        done.stdout
    assert "overlays rounds=3 digest=578f341a loads=21 guards=3,5" in \
        done.stdout
    results = [parse_context(line) for line in done.stderr.splitlines()
               if line.startswith("context ")]
    assert results[0]["binds"] >= 2, done.stderr    # preempted mid-fill


@pytest.mark.parametrize("example", ["kernels", "overlays", "pipeline"])
def test_context_moves_between_slots(build_dir, coprof_bin, tmp_path,
                                     example):
    # Handed back after every 50,000-instruction slice and resumed on the
    # other slot's emulator: its saved state (local store, boot block,
    # registers; its windows stay in main memory) is the whole context, so
    # it runs exactly as under cop-run, split between two QEMUs.
    image = os.path.join(build_dir, "examples", example + ".elf")
    counts = str(tmp_path / "moving.counts")
    done = subprocess.run(
        ["/usr/bin/python3", SLOTRUN, "--stub",
         os.path.join(build_dir, "tests", "slot", "slot-stub.elf"),
         "--coptrace", coprof_bin("coptrace"), "--icount",
         "--slice-us", "50", "--slots", "2", "--entries", "1", "--migrate",
         "--exact-counts", counts, image],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = done.stderr.splitlines()[-1]
    assert " exit:0=1 " in summary, summary
    # 1.8 M to 3.5 M instructions in 50,000-instruction slices.
    assert int(re.search(r"migrations=(\d+)", summary).group(1)) >= 30
    moved = collections.Counter()
    for n in range(2):
        moved += by_pc(by_instruction(counts + ".slot%d" % n)[0])
    status, out, alone = cop_run_counts(coprof_bin, tmp_path, image, [],
                                        False)
    assert status == 0
    assert moved == alone
    assert done.stdout == out
