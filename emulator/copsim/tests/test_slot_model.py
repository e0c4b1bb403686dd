"""copsim's slot model (--context-model=slot): a slot is one long-lived
emulator running the resident slot stub, a context is saved state
(emulator/copsim/README.md, "Slots as long-lived emulators").

The whole copsim, driver, accuracy and overlay suites also run against it
with COPSIM_CONTEXT_MODEL=slot in copsim's environment (all but the tests
of a QEMU per context, whose processes, RAM files and start errors the
slot model does not have); these tests are its own, in make check.
"""

import collections
import os
import subprocess
import sys

import pytest

from copsim_harness import (SOURCE, check_slot_history, counted_cycles,
                            parse_host_lines, sched_events)

sys.path.insert(0, os.path.join(SOURCE, "tests"))
import exact_counts  # noqa: E402


def host(test_bin, sim, *args, timeout=300):
    result = subprocess.run([test_bin("cop-host")] + list(args), env=sim.env,
                            capture_output=True, text=True, timeout=timeout)
    return result, parse_host_lines(result.stdout)


def counts_by_pc(path, cycles=False):
    """Exact counts of a file's runs, by pc: instructions, or with
    cycles=True (pc, reason): cycles."""
    counts = collections.Counter()
    for run in exact_counts.read_counts(path):
        for code in run.codes:
            for insn in code.insns:
                if not cycles:
                    counts[insn.pc] += insn.count
                    continue
                for reason in exact_counts.REASONS:
                    counts[insn.pc, reason] += getattr(insn, reason)
    return counts


# spin: arithmetic; hop: a loop whose every block's exit costs cycles (a
# mispredicted branch, an indirect jump), so that a preemption lands after
# such an exit, which must be charged for the block the context resumes at.
@pytest.mark.parametrize("program", ["spin", "hop"])
def test_preempted_contexts_count_as_under_cop_run(copsim, test_bin,
                                                   probe_image, build_dir,
                                                   tmp_path, program):
    # Four contexts on two slots, gathered so that they certainly wait and
    # are preempted (at 100,000-cycle slices), each moved through the slot
    # emulators as saved state: each executes exactly what cop-run counts
    # for it alone, instruction by instruction, costs the cycles it costs
    # alone, pc by pc and reason by reason (the stub's patched words are
    # costed as the image's), and the slots' cycles between its binds and
    # unbinds add up to those cycles.
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    os.environ["COPSIM_TEST_GATHER"] = "4"
    try:
        sim = copsim("--context-model=slot", "--slots", "2", "--slice",
                     "100000", "--exact-counts", str(counts_dir))
    finally:
        del os.environ["COPSIM_TEST_GATHER"]
    result, contexts = host(test_bin, sim, "--threads", "4", "--contexts",
                            "4", "--console-file", "/dev/null", "embedded",
                            program, "300000")
    assert result.returncode == 0, result.stderr + result.stdout
    alone = tmp_path / "alone.counts"
    done = subprocess.run([os.path.join(build_dir, "bin", "cop-run"),
                           "--event", "SPU_INSTRUCTIONS", "--sample-every",
                           "1000003", "--exact-counts", str(alone),
                           probe_image, program, "300000"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    want = counts_by_pc(str(alone))
    want_cycles = counts_by_pc(str(alone), cycles=True)
    events = sched_events(build_dir, sim.log)
    bindings = check_slot_history(events, 2)
    for c in contexts:
        assert c["reason"] == "exit" and int(c["preemptions"]) >= 1, c
        got = counts_by_pc(str(counts_dir / ("context-%s.counts"
                                             % c["context"])))
        assert got == want
        assert counts_by_pc(str(counts_dir / ("context-%s.counts"
                                              % c["context"])),
                            cycles=True) == want_cycles
        assert int(c["instructions"]) == sum(want.values())
        # copsim's slots count SPU_CYCLES: the timing model's cycles,
        # which the context's exact counts carry.
        assert sum(end - start for _, start, end, _ in
                   bindings[int(c["context"])]) == counted_cycles(
            counts_dir, c["context"])


def test_faults_leave_the_slot_usable(copsim, test_bin):
    # One slot: a trap, a loop stopped at its cycle limit, then programs
    # that run as ever on the same emulator.
    sim = copsim("--context-model=slot", "--slots", "1")
    _, (trap,) = host(test_bin, sim, "embedded", "trap")
    assert trap["reason"] == "fault" and trap["status"] == "132"
    assert trap["fault"].startswith("cop: trap: illegal instruction at 0x")
    _, (loop,) = host(test_bin, sim, "--cycle-limit", "3000000", "embedded",
                      "loop")
    assert loop["fault"] == \
        "looping: stopped after its limit of 3000000 cycles"
    _, (exit7,) = host(test_bin, sim, "embedded", "exit", "7")
    assert exit7["reason"] == "exit" and exit7["status"] == "7"
    result, (fine,) = host(test_bin, sim, "embedded", "hello")
    assert fine["reason"] == "exit"
    assert result.stdout.startswith("hello from copsim-probe\n")
    assert len(sim.emulators()) == 1        # the slot's, all along


def test_data_windows_live_in_main_memory(copsim, test_bin):
    sim = copsim("--context-model=slot", "--slots", "2")
    result, contexts = host(test_bin, sim, "--threads", "3", "--contexts",
                            "6", "--console-file", "/dev/null",
                            "--data-words", "20000", "embedded", "data",
                            "20000")
    assert result.returncode == 0, result.stderr + result.stdout
    assert [c["data"] for c in contexts] == ["ok"] * 6


def test_thousand_contexts_through_eight_slots(copsim, test_bin, build_dir):
    # Created, run and destroyed through libcop, eight at a time, on the
    # eight slot emulators copsim started: nothing runs out.
    sim = copsim("--context-model=slot", "--slots", "8")
    result, contexts = host(test_bin, sim, "--threads", "8", "--contexts",
                            "1000", "--console-file", "/dev/null",
                            "embedded", "hello", timeout=600)
    assert result.returncode == 0, result.stderr
    assert len(contexts) == 1000
    assert all(c["reason"] == "exit" for c in contexts)
    assert len(sim.emulators()) == 8
    check_slot_history(sched_events(build_dir, sim.log), 8)


def test_bad_context_model_refused(build_dir):
    done = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                           "--context-model=threads"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == \
        "copsim: --context-model 'threads': process or slot\n"


def test_slot_model_is_the_default_and_call_graph_takes_processes(
        copsim, build_dir, monkeypatch):
    # By default copsim starts its slots' emulators before it serves.
    assert len(copsim("--slots", "2").emulators()) == 2
    # --call-graph keeps a shadow stack per QEMU, so it takes the process
    # model (no emulator until a context runs), even over the environment.
    monkeypatch.setenv("COPSIM_CONTEXT_MODEL", "slot")
    assert copsim("--slots", "2", "--call-graph").emulators() == []
    # Asked for both on the command line, copsim refuses.
    done = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                           "--context-model=slot", "--call-graph"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (
        "copsim: --call-graph: call stacks are kept per context by a QEMU "
        "of its own; the slot model's emulators run many (use "
        "--context-model=process)\n")


def test_missing_emulator_stops_copsim_at_its_start(build_dir, tmp_path):
    # A slot's emulator starts with copsim, so a missing QEMU is an error
    # then (the process model's is a run's, test_copsim.py).
    done = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                           "--socket", str(tmp_path / "s.sock"),
                           "--event-log", str(tmp_path / "log"),
                           "--qemu", "/nonexistent/qemu-system-riscv32"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith("copsim: slot 0: "), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr


def test_ram_dir_takes_processes(copsim, build_dir, tmp_path):
    # RAM files in --ram-dir are a QEMU per context's, so --ram-dir takes
    # the process model (no emulator until a context runs) ...
    ram = tmp_path / "ram"
    ram.mkdir(mode=0o700)
    assert copsim("--slots", "2", "--ram-dir", str(ram)).emulators() == []
    # ... and is refused beside --context-model=slot, never ignored.
    done = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                           "--context-model=slot", "--ram-dir", str(ram)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == (
        "copsim: --ram-dir: a RAM file per context is the process model's; "
        "the slot model keeps contexts in its own memory (use "
        "--context-model=process)\n")


# examples/stream's DMA waits are computed on the context's cycles: a
# context that costs one cycle more or less on a slot waits differently.
@pytest.mark.parametrize("mode", ["single", "double"])
@pytest.mark.parametrize("model", ["slot", "process"])
def test_dma_kernel_costs_as_under_cop_run(copsim, test_bin, build_dir,
                                           tmp_path, model, mode):
    image = os.path.join(build_dir, "examples", "stream.elf")
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    sim = copsim("--context-model=" + model, "--exact-counts",
                 str(counts_dir))
    result, contexts = host(test_bin, sim, "--console-file", "/dev/null",
                            image, mode, "4")
    assert result.returncode == 0, result.stderr + result.stdout
    alone = tmp_path / "alone.counts"
    done = subprocess.run([os.path.join(build_dir, "bin", "cop-run"),
                           "--sample-every", "1000003", "--exact-counts",
                           str(alone), image, mode, "4"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (c,) = contexts
    got = exact_counts.cycles_by_pc(str(counts_dir / ("context-%s.counts"
                                                      % c["context"])))
    assert got == exact_counts.cycles_by_pc(str(alone))
    assert sum(r["dma_wait"] for r in got.values()) > 0
