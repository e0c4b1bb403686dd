#!/usr/bin/python3
"""bench/contexts — contexts as saved state in long-lived slots (the slot
stub, emulator/copsim/stub/) against a QEMU process per context (today's
copsim path), side by side in one run.

1. A context's round trip: one small context (the `short` test guest) at
   a time.  Slot: filled into an idle slot's entry until its end is seen
   (slotrun --slots 1 --entries 1).  Process: `coptrace run` of the same
   program in a QEMU of its own, started and ended (what copsim pays per
   context today, before its socket round trips).  Medians and the ratio.

2. A switch on copsim's slot model: four copsim-probe spin contexts on
   one slot at 200,000-cycle slices; per preemption, from copsim's
   PREEMPT (the ring) to the next context's bind (hand-back, local store
   copied out and in, unbind and bind, the driver's hooks), from the
   SCHED records: the median; and the whole switch, from the ring to the
   next context's first block (the vCPU woken, its window mapped, the
   flush decision), from the slot emulator's line at copsim's stop.

3. Memory per waiting context: the allocated bytes of the slot's RAM file
   and main memory with 24 `kernels` contexts waiting against 1 (per
   context, the difference over 23),
   against the resident memory of one QEMU process per context (peak
   VmRSS of an emulator running `spin`, read from /proc).

4. Time slicing on the stand-alone stub (slotrun, whose stub copies the
   local stores with guest stores): four contexts of the `kernels`
   example (1.8 M instructions each) on one slot at 1 ms slices against
   the same four one after another on one slot (never switched): the
   median ratio of wall times, run pairs alternating (the switches'
   copies and the retranslation of each incoming context's code).
   copsim's time slicing, with its target, is bench/copsim's.

5. Through copsim: a context's round trip through libcop (cop-host, one
   copsim-probe "hello" at a time, 40 of them, after 8 contexts started
   the slots' emulators) on copsim --context-model=slot against the default (a QEMU per context), and
   1,000 contexts from 8 threads through 8 slots against 48 with a QEMU
   each: medians and contexts per second, and their ratios.

6. Many contexts: 1,000 `short` contexts through 8 slots (4 entries each)
   against the same program in one QEMU per context, 8 at a time (a
   smaller count, --process-contexts), as contexts per second.

7. 1,000 live contexts waiting in copsim: cop-host --all-live creates
   1,000 copsim-probe contexts (each fills 64 words of its data window)
   and runs them from 1,000 threads on 8 slots, copsim gathering 1,001
   so that all 1,000 wait in its run queue at once (until the gather's
   60 s time limit).  Memory per waiting context: copsim's VmRSS (saved
   state, connection threads; less its mappings of the contexts' files)
   plus the allocated bytes of every context's main-memory file (image,
   data pages, local store and boot block), with 1,000 waiting against
   none, over 1,000; then the contexts per second once they are let go,
   every one checked (exit 0, its own data).
"""

import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# benchlib.py is installed beside this script (or is in bench/ above it)
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
import benchlib  # noqa: E402


def parse_args():
    p = benchlib.parser(
        __file__,
        "Measure contexts as saved state in long-lived slots "
        "(the slot stub) against a QEMU process per context: round trip, "
        "switch, memory per waiting context, 1,000 contexts through 8 "
        "slots; ratios side by side.",
        source=True)
    p.add_argument("--runs", type=int, default=5,
                   help="runs per measurement (default 5)")
    p.add_argument("--process-contexts", type=int, default=48,
                   help="contexts run one QEMU each in part 4 (default 48)")
    return p.parse_args()


class Bench:
    def __init__(self, args):
        self.args = args
        self.slotrun = os.path.join(args.source, "emulator", "copsim",
                                    "stub", "slotrun.py")
        self.coptrace = os.path.join(args.build, "bin", "coptrace")
        self.slot_dir = os.path.join(args.build, "tests", "slot")
        self.guest_dir = os.path.join(args.build, "tests", "guest")
        for path in (self.slotrun, self.coptrace,
                     os.path.join(self.slot_dir, "slot-stub.elf"),
                     os.path.join(self.guest_dir, "short.elf")):
            if not os.path.exists(path):
                sys.exit("bench/contexts: %s is missing: run make" % path)

    def slot(self, *options):
        """Runs slotrun; returns its stderr."""
        cmd = ["/usr/bin/python3", self.slotrun, "--coptrace", self.coptrace,
               "--stub", os.path.join(self.slot_dir, "slot-stub.elf")]
        done = subprocess.run(cmd + list(options), capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            sys.exit("bench/contexts: slotrun failed: %s" %
                     done.stderr.strip())
        return done.stderr

    def process_command(self, guest):
        return [self.coptrace, "run", "--sample-every", "1000003", "--",
                "qemu-system-riscv32", "-M", "virt", "-bios", "none",
                "-display", "none", "-monitor", "none", "-serial", "stdio",
                "-kernel", os.path.join(self.guest_dir, guest + ".elf")]

    def process_round_trip(self):
        start = time.monotonic()
        done = subprocess.run(self.process_command("short"),
                              capture_output=True, stdin=subprocess.DEVNULL)
        if done.returncode != 7:        # short's own status
            sys.exit("bench/contexts: short in its own QEMU: status %d" %
                     done.returncode)
        return time.monotonic() - start


def field(text, name):
    return float(re.search(r"\b%s=([0-9.]+)" % name, text).group(1))


def round_trips(b):
    slot = [field(b.slot("--slots", "1", "--entries", "1", "--repeat", "50",
                         "--slice-us", "200",
                         os.path.join(b.slot_dir, "short.elf")),
                  "median") / 1e3 for _ in range(b.args.runs)]
    process = [b.process_round_trip() for _ in range(b.args.runs * 2)]
    return statistics.median(slot), statistics.median(process)


def switch_us(b):
    """copsim's switch on the slot model: four copsim-probe spin contexts
    on one slot; per preemption, from the PREEMPT (ring) to the next
    context's bind, from the SCHED records; the median."""
    sys.path.insert(0, os.path.join(b.args.source, "emulator", "copsim",
                                    "tests"))
    import copsim_harness as harness
    sim = harness.Copsim(b.args.build, ["--context-model=slot", "--slots",
                                        "1", "--slice", "200000"])
    try:
        subprocess.run([os.path.join(b.args.build, "tests", "cop-host"),
                        "--threads", "4", "--contexts", "4",
                        "--console-file", "/dev/null", "embedded", "spin",
                        "25000000"], env=sim.env, check=True,
                       capture_output=True)
        events = harness.sched_events(b.args.build, sim.log)
        sim.process.send_signal(signal.SIGTERM)
        sim.process.wait(timeout=60)
        whole = int(re.search(r"copsim: slot emulator 0: .*\bswitch_us=(\d+)",
                              sim.errors()).group(1))
    finally:
        sim.stop()
    stills, pending = [], None
    for e in events:
        if e["kind"] == "preempt":
            pending = e
        elif e["kind"] == "bind" and pending:
            stills.append((e["mono"] - (pending["mono"] - pending["hold_ns"]))
                          / 1e3)
            pending = None
    return statistics.median(stills), len(stills), whole


def slot_memory_per_context(b):
    """Allocated bytes per waiting context (kernels): the slot's RAM file
    (staging area, save area) and main memory (its image window)."""
    sys.path.insert(0, os.path.dirname(b.slotrun))
    import slotrun
    image = slotrun.Image(os.path.join(b.args.build, "examples",
                                       "kernels.elf"),
                          cop_run=os.path.join(b.args.build, "bin",
                                               "cop-run"))
    stub = os.path.join(b.slot_dir, "slot-stub.elf")
    sizes = {}
    for count in (1, 24):
        with tempfile.TemporaryDirectory() as work:
            main = slotrun.MainMemory(work)
            slot = slotrun.Slot(work, stub, count, 10000, main)
            for _ in range(count):
                slot.add(image)
            slot.ram.flush()
            main.map.flush()
            sizes[count] = sum(os.stat(path).st_blocks * 512
                               for path in (slot.path, main.path))
            slot.ram.close()
            main.map.close()
    return (sizes[24] - sizes[1]) / 23, len(image.window)


def process_memory(b):
    """Peak VmRSS of one emulator process per context (spin, read every
    20 ms while it runs)."""
    proc = subprocess.Popen(b.process_command("spin"),
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
        qemu = None
        deadline = time.monotonic() + 30
        while qemu is None and time.monotonic() < deadline:
            time.sleep(0.05)
            for pid in os.listdir("/proc"):
                try:
                    with open("/proc/%s/stat" % pid) as f:
                        stat = f.read()
                except OSError:
                    continue
                if pid.isdigit() and "qemu-system" in stat and \
                        int(stat.rsplit(")", 1)[1].split()[1]) == proc.pid:
                    qemu = pid
        if qemu is None:
            sys.exit("bench/contexts: the emulator of spin never appeared")
        peak = 0
        while True:                 # its peak while it runs
            try:
                with open("/proc/%s/status" % qemu) as f:
                    rss = re.search(r"VmRSS:\s+(\d+) kB", f.read())
            except OSError:
                break
            if not rss:
                break
            peak = max(peak, int(rss.group(1)) * 1024)
            time.sleep(0.02)
        return peak
    finally:
        proc.kill()
        proc.wait()


def time_slicing(b):
    """Median wall ratio of four kernels contexts time-sliced at 1 ms on
    one slot against the four run one after another on one slot."""
    kernels = os.path.join(b.args.build, "examples", "kernels.elf")
    ratios, switches = [], 0
    for pair in range(b.args.runs):
        runs = {}
        for mode in (("sliced", "serial") if pair % 2 == 0
                     else ("serial", "sliced")):
            start = time.monotonic()
            if mode == "sliced":
                out = b.slot("--slice-us", "1000", *[kernels] * 4)
                switches += int(field(out, "switches"))
            else:
                b.slot("--slots", "1", "--entries", "1", "--repeat", "4",
                       "--slice-us", "1000", kernels)
            runs[mode] = time.monotonic() - start
        ratios.append(runs["sliced"] / runs["serial"])
    return statistics.median(ratios), switches / b.args.runs


def through_copsim(b, model, threads, contexts):
    """Seconds per context of cop-host hello on a fresh copsim."""
    sys.path.insert(0, os.path.join(b.args.source, "emulator", "copsim",
                                    "tests"))
    import copsim_harness as harness
    sim = harness.Copsim(b.args.build, ["--context-model=" + model,
                                        "--slots", "8"])
    try:
        warm = subprocess.run(      # the slots' emulators started
            [os.path.join(b.args.build, "tests", "cop-host"), "--threads",
             "8", "--contexts", "8", "--console-file", "/dev/null",
             "embedded", "hello"], env=sim.env, capture_output=True)
        if warm.returncode != 0:
            sys.exit("bench/contexts: cop-host failed: %s" % warm.stderr)
        start = time.monotonic()
        done = subprocess.run(
            [os.path.join(b.args.build, "tests", "cop-host"), "--threads",
             str(threads), "--contexts", str(contexts), "--console-file",
             "/dev/null", "embedded", "hello"], env=sim.env,
            capture_output=True, text=True)
        wall = time.monotonic() - start
    finally:
        sim.stop()
    if done.returncode != 0:
        sys.exit("bench/contexts: cop-host on the %s model failed: %s"
                 % (model, done.stderr.strip()))
    return wall / contexts


def many(b):
    short = os.path.join(b.slot_dir, "short.elf")
    out = b.slot("--slots", "8", "--entries", "4", "--repeat", "1000",
                 "--slice-us", "500", short)
    if "exit:7=1000" not in out:
        sys.exit("bench/contexts: not every context ended: %s" % out.strip())
    slot_rate = 1000 / field(out, "wall")
    n = b.args.process_contexts
    start = time.monotonic()
    running = []
    for _ in range(n):
        if len(running) == 8:
            running.pop(0).wait()
        running.append(subprocess.Popen(
            b.process_command("short"), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
    for p in running:
        p.wait()
    return slot_rate, n / (time.monotonic() - start)


def context_mappings_rss(pid):
    """Bytes of copsim's resident set in its mappings of the contexts'
    main-memory files (their local stores), from /proc/PID/smaps."""
    total, inside = 0, False
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = re.match(r"[0-9a-f]+-[0-9a-f]+ ", line)
            if head:
                inside = "/memfd:coprof-context" in line
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1]) * 1024
    return total


def copsim_memory(pid):
    """copsim's VmRSS plus the allocated bytes of its contexts' main-memory
    files (memfds named coprof-context, through /proc/PID/fd); the pages of
    those files copsim maps (a context's local store) count once, as the
    files'."""
    with open("/proc/%d/status" % pid) as f:
        total = int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) * 1024
    total -= context_mappings_rss(pid)
    fds = "/proc/%d/fd" % pid
    for fd in os.listdir(fds):
        try:
            if os.readlink(os.path.join(fds, fd)).startswith(
                    "/memfd:coprof-context"):
                total += os.stat(os.path.join(fds, fd)).st_blocks * 512
        except OSError:
            pass
    return total


def live_contexts(b, count=1000):
    """Memory per waiting context in copsim's slot model, the image's
    size, and contexts per second once the count waiting are let go."""
    sys.path.insert(0, os.path.join(b.args.source, "emulator", "copsim",
                                    "tests"))
    import copsim_harness as harness
    os.environ["COPSIM_TEST_GATHER"] = str(count + 1)
    try:
        sim = harness.Copsim(b.args.build, ["--context-model=slot",
                                            "--slots", "8"])
    finally:
        del os.environ["COPSIM_TEST_GATHER"]
    try:
        before = copsim_memory(sim.process.pid)
        host = subprocess.Popen(
            [os.path.join(b.args.build, "tests", "cop-host"), "--all-live",
             "--threads", str(count), "--contexts", str(count),
             "--data-words", "64", "--console-file", "/dev/null",
             "embedded", "data", "64"], env=sim.env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        waiting = []
        while len(waiting) < count and host.poll() is None:
            time.sleep(1)
            waiting = [e for e in harness.sched_events(b.args.build, sim.log)
                       if e["kind"] == "run"]
        if len(waiting) < count:
            sys.exit("bench/contexts: cop-host --all-live ended early: %s"
                     % host.stderr.read().strip())
        per_context = (copsim_memory(sim.process.pid) - before) / count
        events = harness.sched_events(b.args.build, sim.log)
        image = next(e["size"] for e in events if e["kind"] == "load")
        if any(e["kind"] == "bind" for e in events):
            sys.exit("bench/contexts: a context was bound before all waited")
        while not sim.errors().count("COPSIM_TEST_GATHER"):
            time.sleep(0.2)         # the gather's time limit lets them go
        start = time.monotonic()
        out, err = host.communicate()
        wall = time.monotonic() - start
    finally:
        sim.stop()
    contexts = harness.parse_host_lines(out)
    if host.returncode != 0 or len(contexts) != count or not all(
            c["data"] == "ok" and c["status"] == "0" for c in contexts):
        sys.exit("bench/contexts: the %d live contexts did not all end "
                 "right: %s" % (count, err.strip()[-500:]))
    return per_context, image, count / wall


def main():
    b = Bench(parse_args())
    slot_trip, process_trip = round_trips(b)
    print("round trip of a context: slot %.2f ms, QEMU per context %.1f ms "
          "(medians): %.0fx faster (target <= 5 ms)" %
          (slot_trip * 1e3, process_trip * 1e3, process_trip / slot_trip))
    switch, switches, whole = switch_us(b)
    print("switch on copsim's slot model (ring, hand-back, unbind and "
          "bind): %.0f us median of %d; to the next "
          "context's first block %d us median (target <= 100 us)"
          % (switch, switches, whole))
    per_slot, image = slot_memory_per_context(b)
    per_process = process_memory(b)
    print("memory per waiting context: slot %.0f KiB (staging, save area "
          "and its %.0f KiB image in main memory), QEMU per context %.0f KiB "
          "(VmRSS): %.0fx less (target <= 1024 KiB plus the image)" %
          (per_slot / 1024, image / 1024, per_process / 1024,
           per_process / per_slot))
    ratio, switches = time_slicing(b)
    print("time slicing on the stand-alone stub (slotrun; copsim's: "
          "bench/copsim): 4 kernels contexts on one slot at 1 ms slices "
          "(%.0f switches) against one after another: %.3fx wall (median "
          "of %d pairs)" % (switches, ratio, b.args.runs))
    trips = {m: statistics.median(through_copsim(b, m, 1, 40)
                                  for _ in range(b.args.runs))
             for m in ("slot", "process")}
    print("round trip through libcop and copsim: slot model %.2f ms, QEMU "
          "per context %.1f ms (medians): %.0fx faster (target <= 3 ms)" %
          (trips["slot"] * 1e3, trips["process"] * 1e3,
           trips["process"] / trips["slot"]))
    slot_each = through_copsim(b, "slot", 8, 1000)
    process_each = through_copsim(b, "process", 8, b.args.process_contexts)
    print("contexts through copsim's 8 slots: 1000 on the slot model "
          "%.0f/s, %d with a QEMU each %.1f/s: %.0fx" %
          (1 / slot_each, b.args.process_contexts, 1 / process_each,
           process_each / slot_each))
    per_live, image, live_rate = live_contexts(b)
    print("1000 live contexts waiting at once in copsim on 8 slots: %.0f KiB "
          "per waiting context (copsim's VmRSS and its main-memory file, "
          "with a %.0f KiB image; target <= 1024 KiB plus the image), then "
          "%.0f contexts/s, every one exact" %
          (per_live / 1024, image / 1024, live_rate))
    slot_rate, process_rate = many(b)
    print("contexts through 8 slots: 1000 in slots %.0f/s, %d with a QEMU "
          "each %.1f/s: %.0fx" % (slot_rate, b.args.process_contexts,
                                  process_rate, slot_rate / process_rate))


if __name__ == "__main__":
    main()
