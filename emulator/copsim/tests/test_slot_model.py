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
import re
import signal
import subprocess
import sys
import time

import pytest

from copsim_harness import (SOURCE, check_slot_history, counted_cycles,
                            parse_host_lines, sched_events)

sys.path.insert(0, os.path.join(SOURCE, "tests"))
sys.path.insert(0, os.path.join(SOURCE, "abi"))
import cheader  # noqa: E402
import exact_counts  # noqa: E402

# The slot's layout, read from the header copsim compiles (abi/cheader.py).
SLOT = cheader.load("slot-stub.h").defines


def host(test_bin, sim, *args, timeout=300):
    result = subprocess.run([test_bin("cop-host")] + list(args), env=sim.env,
                            capture_output=True, text=True, timeout=timeout)
    return result, parse_host_lines(result.stdout)


def gathered(copsim, count, *args):
    """A copsim that holds runs until count contexts wait (so that they are
    certainly time-sliced)."""
    os.environ["COPSIM_TEST_GATHER"] = str(count)
    try:
        return copsim(*args)
    finally:
        del os.environ["COPSIM_TEST_GATHER"]


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
    # are preempted (at 100,000-cycle slices; 24 M instructions each, many
    # of copsim's 1 ms ticks), each moved through the slot
    # emulators as saved state: each executes exactly what cop-run counts
    # for it alone, instruction by instruction, costs the cycles it costs
    # alone, pc by pc and reason by reason (the stub's patched words are
    # costed as the image's), and the slots' cycles between its binds and
    # unbinds add up to those cycles.
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    sim = gathered(copsim, 4, "--context-model=slot", "--slots", "2",
                   "--slice", "100000", "--exact-counts",
                   str(counts_dir))
    result, contexts = host(test_bin, sim, "--threads", "4", "--contexts",
                            "4", "--console-file", "/dev/null", "embedded",
                            program, "3000000")
    assert result.returncode == 0, result.stderr + result.stdout
    alone = tmp_path / "alone.counts"
    done = subprocess.run([os.path.join(build_dir, "bin", "cop-run"),
                           "--event", "SPU_INSTRUCTIONS", "--sample-every",
                           "1000003", "--exact-counts", str(alone),
                           probe_image, program, "3000000"],
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


def test_different_code_at_the_same_addresses_alternates(copsim, test_bin,
                                                         probe_image,
                                                         build_dir, tmp_path):
    # Two contexts whose code differs at the same local-store addresses
    # (examples/kernels and copsim-probe) alternate on ONE slot: the plugin
    # copies each one's local store into the slot's RAM from outside, which
    # QEMU's self-modifying-code detection does not see, so the stub has
    # the plugin drop every translation at each switch.  Each context must
    # execute its own code: exactly cop-run's counts for it alone, pc by pc
    # (a stale translation of the other one's code would be counted as the
    # other's bytes, or end the run wrongly).  Both run many of copsim's
    # 1 ms ticks (9 M and 24 M instructions), so that each is preempted
    # again and again however fast the machine.
    counts_dir = tmp_path / "counts"
    counts_dir.mkdir()
    sim = gathered(copsim, 2, "--context-model=slot", "--slots", "1",
                   "--slice", "50000", "--exact-counts",
                   str(counts_dir))
    kernels = os.path.join(build_dir, "examples", "kernels.elf")
    runs = [(kernels, ["20"]), (probe_image, ["spin", "3000000"])]
    hosts = [subprocess.Popen([test_bin("cop-host"), "--console-file",
                               "/dev/null", image] + args, env=sim.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for image, args in runs]
    outputs = [h.communicate(timeout=300) for h in hosts]
    for (image, args), h, (out, err) in zip(runs, hosts, outputs):
        assert h.returncode == 0, (image, out, err)
        (c,) = parse_host_lines(out)
        assert c["reason"] == "exit" and int(c["preemptions"]) >= 2, c
        alone = tmp_path / (os.path.basename(image) + ".counts")
        done = subprocess.run([os.path.join(build_dir, "bin", "cop-run"),
                               "--sample-every", "1000003", "--exact-counts",
                               str(alone), image] + args,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        want = counts_by_pc(str(alone))
        got = counts_by_pc(str(counts_dir / ("context-%s.counts"
                                             % c["context"])))
        assert got == want, image
        assert int(c["instructions"]) == sum(want.values())


def memfd_of(pid, name):
    """/proc path of the memfd called name among pid's descriptors."""
    for fd in os.listdir("/proc/%d/fd" % pid):
        path = "/proc/%d/fd/%s" % (pid, fd)
        try:
            if os.readlink(path).startswith("/memfd:%s " % name):
                return path
        except OSError:
            continue
    raise AssertionError("no memfd %s in copsim" % name)


def size_of(span):
    """The bytes of a /proc/PID/maps address range START-END."""
    start, end = span.split("-")
    return int(end, 16) - int(start, 16)


def test_a_switch_copies_the_local_store_inside_the_emulator(copsim,
                                                             test_bin):
    # Two contexts time-sliced on one slot: the plugin copies each one's
    # local store and boot block between its main-memory file (at
    # SLOT_MAIN_LS) and the slot's RAM, so QEMU's mapping of the slot's RAM
    # stays whole (mapping a context's file over it, as before, split it
    # and cost a TLB shootdown and page faults at every switch), and the
    # RAM holds the local store of the last context that ran.  24 M
    # instructions each are many of copsim's 1 ms ticks.
    sim = gathered(copsim, 2, "--context-model=slot", "--slots", "1",
                   "--slice", "50000")
    result, contexts = host(test_bin, sim, "--threads", "2", "--contexts",
                            "2", "--console-file", "/dev/null", "embedded",
                            "spin", "3000000")
    assert result.returncode == 0, result.stderr + result.stdout
    assert sum(int(c["preemptions"]) for c in contexts) >= 2, contexts
    swap = SLOT["SLOT_SWAP_SIZE"]
    with open(memfd_of(sim.process.pid, "coprof-slot"), "rb") as f:
        assert f.read(swap) != bytes(swap)
    [qemu] = sim.emulators()
    with open("/proc/%d/maps" % qemu) as f:
        maps = [line.split() for line in f]
    ram = [m for m in maps if len(m) > 5 and "coprof-slot" in m[5]
           and int(m[2], 16) == 0 and size_of(m[0]) == SLOT["SLOT_RAM_SIZE"]]
    assert len(ram) == 1, [m for m in maps if len(m) > 5 and "coprof" in m[5]]


def slot_emulator_stats(sim):
    """Stops copsim; the counters of each slot emulator it printed then
    (switches, flushes, kept, rings, interrupts), by slot."""
    sim.process.send_signal(signal.SIGTERM)
    sim.process.wait(timeout=60)
    stats = {}
    for line in sim.errors().splitlines():
        m = re.match(r"copsim: slot emulator (\d+): (.*)", line)
        if m:
            stats[int(m.group(1))] = {k: int(v) for k, v in (
                item.split("=") for item in m.group(2).split())}
    return stats


def instructions_alone(build_dir, tmp_path, image, args):
    """What cop-run counts for the image alone (exact counts' total)."""
    alone = tmp_path / (os.path.basename(image) + ".alone")
    done = subprocess.run([os.path.join(build_dir, "bin", "cop-run"),
                           "--sample-every", "1000003", "--exact-counts",
                           str(alone), image] + list(args),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return sum(counts_by_pc(str(alone)).values())


def four_sliced_spins(sim, test_bin, probe_image, build_dir, tmp_path):
    """Four copsim-probe spin contexts time-sliced on sim's one slot, each
    executing exactly what it executes alone; their preemptions, and the
    slot emulator's counters at copsim's stop."""
    result, contexts = host(test_bin, sim, "--threads", "4", "--contexts",
                            "4", "--console-file", "/dev/null", "embedded",
                            "spin", "2000000")
    assert result.returncode == 0, result.stderr
    want = instructions_alone(build_dir, tmp_path, probe_image,
                              ["spin", "2000000"])
    preemptions = 0
    for c in contexts:
        assert c["reason"] == "exit", c
        assert int(c["instructions"]) == want, c
        preemptions += int(c["preemptions"])
    assert preemptions >= 3, contexts
    (stats,) = slot_emulator_stats(sim).values()
    return preemptions, stats


def test_contexts_of_one_image_keep_their_translations(copsim, test_bin,
                                                        probe_image,
                                                        build_dir, tmp_path):
    # Four contexts of one image time-sliced on ONE slot: the code copsim
    # writes at every switch is the code QEMU translated, so the plugin
    # keeps the translations (no flush at all), and each context still
    # executes exactly what it executes alone.  Every preemption is asked
    # for by the ring (an interrupt at once), not by a timer of the stub.
    # The plugin keeps each context's main-memory file open once it has
    # mapped it, so it opens each of the four once however often they
    # come back; every switch is timed, from the ring to the incoming
    # context's first block.
    sim = gathered(copsim, 4, "--context-model=slot", "--slots", "1",
                   "--slice", "50000")
    preemptions, stats = four_sliced_spins(sim, test_bin, probe_image,
                                           build_dir, tmp_path)
    assert stats["flushes"] == 0, stats
    assert stats["kept"] >= preemptions, stats
    assert stats["rings"] >= preemptions, stats
    assert stats["windows"] >= preemptions and stats["opened"] == 4, stats
    assert stats["timed"] == preemptions, stats
    assert 0 < stats["switch_us"] <= stats["switch_us_p95"], stats


@pytest.mark.parametrize("ring", ["vcpu", "uart"])
def test_the_ring_comes_from_the_vcpu_or_the_uart(copsim, test_bin,
                                                 probe_image, build_dir,
                                                 tmp_path, ring):
    # The plugin raises the ring itself, a store to the CLINT from the
    # vCPU's thread, when QEMU exports its memory API (Debian's does):
    # every preemption is then such a ring, none a byte through the UART.
    # A QEMU without it (the plugin's test hook) gets every ring through
    # the UART.  Either way four contexts time-sliced on one slot each
    # execute exactly what they execute alone.
    if ring == "uart":
        os.environ["COPTRACE_TEST_UART_RING"] = "1"
    try:
        sim = gathered(copsim, 4, "--context-model=slot", "--slots", "1",
                       "--slice", "50000")
    finally:
        os.environ.pop("COPTRACE_TEST_UART_RING", None)
    preemptions, stats = four_sliced_spins(sim, test_bin, probe_image,
                                           build_dir, tmp_path)
    assert stats["rings"] >= preemptions, stats
    if ring == "vcpu":
        assert stats["soft_rings"] == stats["rings"], stats
    else:
        assert stats["soft_rings"] == 0, stats


def test_a_context_runs_without_the_stubs_timer(copsim, test_bin):
    # In place the ring preempts, so a context runs with the stub's timer
    # off: arming it (MMIO under QEMU's global lock, a wake of QEMU's main
    # loop) at every switch cost tens of microseconds.  A context that
    # runs 1.3 s of the guest's time (the 10 MHz timer; the stub's backstop
    # was 1 s) alone on its slot takes no interrupt at all.
    sim = copsim("--context-model=slot", "--slots", "1")
    result, (c,) = host(test_bin, sim, "embedded", "wait", "1300")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("waited 1300 ms\n")
    (stats,) = slot_emulator_stats(sim).values()
    assert stats["interrupts"] == 0 and stats["rings"] == 0, stats


def test_different_code_flushes_without_exact_counts(copsim, test_bin,
                                                     probe_image, build_dir,
                                                     tmp_path):
    # Without --exact-counts (which flushes at every switch) the plugin
    # compares the incoming code with what it translated: examples/kernels
    # and copsim-probe alternating on one slot differ, so switches flush,
    # and each executes exactly its instructions alone (a stale block of
    # the other's code would change the count or the end).  Reference
    # mode (a callback per instruction) makes kernels last many ticks.
    sim = gathered(copsim, 2, "--context-model=slot", "--slots", "1",
                   "--slice", "50000", "--reference")
    kernels = os.path.join(build_dir, "examples", "kernels.elf")
    runs = [(kernels, []), (probe_image, ["spin", "300000"])]
    hosts = [subprocess.Popen([test_bin("cop-host"), "--console-file",
                               "/dev/null", image] + args, env=sim.env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for image, args in runs]
    outputs = [h.communicate(timeout=300) for h in hosts]
    for (image, args), h, (out, err) in zip(runs, hosts, outputs):
        assert h.returncode == 0, (image, out, err)
        (c,) = parse_host_lines(out)
        assert c["reason"] == "exit" and int(c["preemptions"]) >= 2, c
        assert int(c["instructions"]) == instructions_alone(
            build_dir, tmp_path, image, args), image
    (stats,) = slot_emulator_stats(sim).values()
    assert stats["flushes"] >= 2, stats


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


def test_a_trap_storm_faults_and_leaves_the_slot_usable(copsim, test_bin,
                                                         build_dir):
    # Issue 32: storm.elf points its trap vector at an illegal word, so
    # every trap is taken at the vector itself.  The stub ends the context
    # at the first such trap (a fault naming the vector, long before the
    # cycle limit that would stop it on the old stub), and the slot then
    # serves the next context.
    sim = copsim("--context-model=slot", "--slots", "1")
    storm = os.path.join(build_dir, "tests", "guest", "storm.elf")
    result, (c,) = host(test_bin, sim, "--cycle-limit", "5000000", storm)
    assert result.returncode == 1, result.stdout + result.stderr
    assert c["reason"] == "fault" and c["status"] == "132", c
    vector = re.fullmatch(r"trap storm at (0x[0-9a-f]{8}) \(mtvec (\1)\)",
                          c["fault"])
    assert vector, c["fault"]
    assert int(c["instructions"]) < 1000, c
    result, (fine,) = host(test_bin, sim, "embedded", "hello")
    assert fine["reason"] == "exit", result.stdout + result.stderr
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
    assert 1 <= len(sim.emulators()) <= 8     # started as slots were needed
    check_slot_history(sched_events(build_dir, sim.log), 8)


def test_thousand_live_contexts_wait_in_main_memory(copsim, test_bin,
                                                    build_dir, tmp_path):
    # A thousand contexts alive at once (cop-host --all-live creates and
    # fills every one before any runs), all waiting together on eight slots
    # (gathered: nothing is bound until the thousand runs are queued, and
    # the SCHED log shows every run before the first bind), each with its
    # own data window through its slot's main-memory window: each exits 0
    # with its own data (data[i] * 3 + 1 of index * 100000 + i, checked
    # by cop-host) and prints its own sum.  With main memory as one 1 GiB
    # window, CREATE refused the 65th.
    sim = gathered(copsim, 1000, "--context-model=slot", "--slots", "8")
    result, contexts = host(test_bin, sim, "--all-live", "--threads", "1000",
                            "--contexts", "1000", "--data-words", "64",
                            "--console-file", str(tmp_path / "console-%d"),
                            "embedded", "data", "64", timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(int(c["index"]) for c in contexts) == list(range(1000))
    assert all(c["reason"] == "exit" and c["status"] == "0"
               and c["data"] == "ok" for c in contexts)
    for index in range(1000):
        total = sum((index * 100000 + i) * 3 + 1 for i in range(64))
        console = (tmp_path / ("console-%d" % index)).read_text()
        assert console == "data 64 sum=%08x\n" % (total & 0xffffffff), index
    events = sched_events(build_dir, sim.log)
    kinds = [e["kind"] for e in events]
    first_bind = kinds.index("bind")
    assert kinds[:first_bind].count("run") == 1000
    check_slot_history(events, 8)


def test_out_of_descriptors_is_a_clear_create_error(copsim, test_bin,
                                                    probe_image):
    # A context's main memory is a file of copsim's: when copsim may open
    # no more (its hard limit, here 64), the context that needed one is
    # refused in one line naming the cause (at CREATE: its main-memory file,
    # its eventfd or the maps of its process, whichever came to the limit,
    # "(copsim may open 64 files)" for the first two; or its connection, on
    # copsim's stderr, which closes it), copsim goes on serving (no spin on
    # a readable socket), and contexts run once descriptors are free.
    sim = copsim("--context-model=slot", "--slots", "2",
                 prefix=("prlimit", "--nofile=64:64",
                         os.path.join(sim_bin(test_bin), "copsim")))
    result, contexts = host(test_bin, sim, "--all-live", "--threads", "4",
                            "--contexts", "40", "--console-file",
                            "/dev/null", "embedded", "hello")
    assert result.returncode == 1
    assert contexts == []
    refusals = [line for line in result.stderr.splitlines()
                if line.startswith("cop-host: context ")]
    assert len(refusals) == 1, result.stderr
    assert ("Too many open files" in refusals[0]
            or "copsim: a connection refused: Too many open files (copsim "
               "may open 64 files)" in sim.errors()), (refusals, sim.errors())
    result, contexts = host(test_bin, sim, "--threads", "2", "--contexts",
                            "4", "--console-file", "/dev/null", "embedded",
                            "hello")
    assert result.returncode == 0, result.stderr
    assert [c["reason"] for c in contexts] == ["exit"] * 4


def sim_bin(test_bin):
    """build/bin, beside build/tests."""
    return os.path.join(os.path.dirname(os.path.dirname(test_bin("cop-host"))),
                        "bin")


def test_bad_context_model_refused(build_dir):
    done = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                           "--context-model=threads"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr == \
        "copsim: --context-model 'threads': process or slot\n"


def test_slot_model_is_the_default_also_with_call_graph(
        copsim, test_bin, build_dir):
    # By default copsim runs slots, whose emulators start on demand.
    assert copsim("--slots", "2").emulators() == []
    # --call-graph stays on the slot model (a context's shadow stack
    # travels with it: test_slot_call_stacks.py), with or without the
    # model named: after one context, its emulator is a slot's (slot=).
    for model in ([], ["--context-model=slot"]):
        sim = copsim("--slots", "4", "--call-graph", *model)
        assert sim.emulators() == []
        result, contexts = host(test_bin, sim, "embedded", "exit", "0")
        assert result.returncode == 0, result.stderr
        [pid] = sim.emulators()
        with open("/proc/%d/cmdline" % pid) as f:
            assert ",slot=0," in f.read()


def test_missing_emulator_stops_copsim_at_its_start(build_dir, tmp_path):
    # Slot emulators start on demand, but copsim looks for the QEMU at its
    # start, so a missing one is an error then (the process model's is a
    # run's, test_copsim.py).
    for qemu in ("/nonexistent/qemu-system-riscv32", "no-such-qemu-here"):
        done = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                               "--socket", str(tmp_path / "s.sock"),
                               "--event-log", str(tmp_path / "log"),
                               "--qemu", qemu],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1
        assert done.stderr == ("copsim: %s: not found (install the Debian "
                               "package qemu-system-misc)\n" % qemu)


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_slots_start_on_demand_and_idle_ones_cost_nothing(copsim, test_bin):
    # No emulator until a context needs a slot; one context starts one
    # slot's QEMU, whatever the slot count; once it ended, that QEMU
    # sleeps (its vCPU waits on a futex in the plugin, its stub neither
    # spins nor arms a timer): over 2 s it uses at most 3 clock ticks of
    # CPU (30 ms: ticks are counted, not wall time, so load elsewhere on
    # the machine does not matter).
    sim = copsim("--context-model=slot", "--slots", "4")
    assert sim.emulators() == []
    result, contexts = host(test_bin, sim, "--console-file", "/dev/null",
                            "embedded", "hello")
    assert result.returncode == 0, result.stderr
    assert contexts[0]["reason"] == "exit"
    (qemu,) = sim.emulators()
    before = cpu_ticks(qemu)
    time.sleep(2)
    assert cpu_ticks(qemu) - before <= 3


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
