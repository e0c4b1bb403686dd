#!/usr/bin/python3
"""bench/copsim — what copsim's scheduling costs.

Three measurements of one run:

1. Context switches.  Four contexts of copsim-probe "spin N" (8 N
   instructions each) from four threads of cop-host on a copsim with ONE
   slot and a short time slice.  From its SCHED records: per preemption,
   how long the emulator took to hand the context back once rung
   (hold_ns), and how long until the next context's bind (hold, copy
   out, unbind and driver hook, copy in, bind, the records); from the
   slot emulator's line at copsim's stop: the whole switch, from the ring
   to the incoming context's first block (switch_us, switch_us_p95: the
   vCPU woken, the window mapped, the flush decision, the stub's return).

2. Time slicing overall.  The same four contexts with the short slice and
   with a slice longer than any of them (never preempting: one after
   another), pairs run in alternating order: the median ratios of wall
   time and of CPU time (copsim and the emulators it reaped, which other
   load disturbs less).  copsim preempts at its 1 ms tick once a slice is
   over, so a slice shorter than a millisecond's cycles is a 1 ms slice.
   Then the same with four contexts of the kernels example (a real
   program, with its data in the local store, which every switch moves).

3. A context's round trip.  "hello" contexts one after another through
   libcop on a running copsim whose slot emulator has started (cop-host
   --time: create, load, run and destroy, timed inside the one host
   process, the first context, which starts the slot, left out): the
   median and the 90th percentile.  Beside it, what a host program
   started per context costs (cop-host run once per context: exec,
   dynamic linking, libcop's connection and the same round trip), and
   cop-run of the same image (a QEMU started directly).
"""

import os
import re
import signal
import statistics
import subprocess
import sys
import time

# benchlib.py is installed beside this script (or is in bench/ above it)
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
import benchlib  # noqa: E402


def parse_args():
    parser = benchlib.parser(
        __file__,
        "Measure copsim's scheduling costs: context switch "
        "latency, time slicing on one slot against none, and a "
        "context's round trip through libcop against cop-run.",
        source=True)
    parser.add_argument("--pairs", type=int, default=3,
                        help="pairs per comparison (default 3)")
    parser.add_argument("--spin", type=int, default=100000000,
                        help="rounds of each context's spin (default "
                             "100000000, 800 M instructions)")
    parser.add_argument("--slice", type=int, default=200000,
                        help="the short time slice in cycles (default "
                             "200000)")
    parser.add_argument("--kernels-rounds", type=int, default=1200,
                        help="rounds of each kernels context (default "
                             "1200, about 540 M instructions)")
    return parser.parse_args()


def timed(command, env):
    """Runs command; returns its wall time and standard output."""
    start = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.monotonic() - start
    if result.returncode != 0:
        sys.exit("bench/copsim: %s failed (status %d): %s"
                 % (" ".join(command), result.returncode,
                    result.stderr.strip()))
    return elapsed, result.stdout


def slot_stop_line(sim):
    """Stops copsim; the numbers of its slot emulator's line (slot 0)."""
    sim.process.send_signal(signal.SIGTERM)
    sim.process.wait(timeout=60)
    m = re.search(r"copsim: slot emulator 0: (.*)", sim.errors())
    if not m:
        sys.exit("bench/copsim: copsim printed no slot emulator line: %s"
                 % sim.errors().strip()[-500:])
    return {k: int(v) for k, v in (i.split("=") for i in m.group(1).split())}


def four_contexts(args, harness, slice_cycles, program):
    """Wall and CPU seconds of four contexts of program (cop-host's
    IMAGE ARGS) on a fresh one-slot copsim, its SCHED records and its slot
    emulator's numbers."""
    sim = harness.Copsim(args.build, ["--slots", "1", "--slice",
                                      str(slice_cycles)])
    try:
        wall, _ = timed([os.path.join(args.build, "tests", "cop-host"),
                         "--threads", "4", "--contexts", "4",
                         "--console-file", "/dev/null"] + program, sim.env)
        cpu = sim.cpu_seconds()
        events = harness.sched_events(args.build, sim.log)
        stats = slot_stop_line(sim)
    finally:
        sim.stop()
    return wall, cpu, events, stats


def switch_latencies(events):
    """Per preemption: (hold_ns, ns from closing the gate to the next
    bind on the slot)."""
    latencies, pending = [], {}
    for e in events:
        if e["kind"] == "preempt":
            pending[e["slot"]] = e
        elif e["kind"] == "bind" and e["slot"] in pending:
            p = pending.pop(e["slot"])
            latencies.append((p["hold_ns"],
                              e["mono"] - (p["mono"] - p["hold_ns"])))
    return latencies


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main():
    args = parse_args()
    sys.path.insert(0, os.path.join(args.source, "emulator", "copsim",
                                    "tests"))
    import copsim_harness as harness
    for path in ("tests/cop-host", "bin/cop-run", "bin/copsim",
                 "tests/cop/copsim-probe.elf", "examples/kernels.elf"):
        if not os.path.exists(os.path.join(args.build, path)):
            sys.exit("bench/copsim: %s is missing: run make"
                     % os.path.join(args.build, path))

    spin = ["embedded", "spin", str(args.spin)]
    kernels = [os.path.join(args.build, "examples", "kernels.elf"),
               str(args.kernels_rounds)]
    ratios = {"spin": ([], []), "kernels": ([], [])}
    latencies, switches = [], []
    for pair in range(args.pairs):
        for name, program in (("spin", spin), ("kernels", kernels)):
            slices = [args.slice, 1 << 60]
            if pair % 2:
                slices.reverse()
            runs = {s: four_contexts(args, harness, s, program)
                    for s in slices}
            ratios[name][0].append(runs[args.slice][0] / runs[1 << 60][0])
            ratios[name][1].append(runs[args.slice][1] / runs[1 << 60][1])
            if name == "spin":
                latencies += switch_latencies(runs[args.slice][2])
                switches.append(runs[args.slice][3])
    holds = [h / 1000 for h, _ in latencies]
    stills = [s / 1000 for _, s in latencies]
    print("context switch on a slot (%d preemptions, slice %d cycles): hold "
          "%.0f us median, %.0f us p95; to the next bind %.0f us median, "
          "%.0f us p95" % (len(latencies), args.slice,
                           statistics.median(holds), percentile(holds, 0.95),
                           statistics.median(stills),
                           percentile(stills, 0.95)))
    print("context switch, ring to the next context's first block: %.0f us "
          "median (runs: %s), p95 %s us, %d switches timed (target <= 100 "
          "us)" % (statistics.median(s["switch_us"] for s in switches),
                   " ".join(str(s["switch_us"]) for s in switches),
                   " ".join(str(s["switch_us_p95"]) for s in switches),
                   sum(s["timed"] for s in switches)))
    for name, what in (("spin", "%d M instructions of spin"
                        % (8 * args.spin // 1000000)),
                       ("kernels", "kernels %d rounds" % args.kernels_rounds)):
        walls, cpus = ratios[name]
        print("time slicing: 4 contexts x %s on 1 slot, slice %d cycles "
              "(ended at copsim's first 1 ms tick past it) against one "
              "after another: median %.3fx wall, %.3fx CPU (pairs, wall: "
              "%s; CPU: %s; target at 1 ms slices <= 1.10x both)"
              % (what, args.slice, statistics.median(walls),
                 statistics.median(cpus),
                 " ".join("%.3f" % r for r in walls),
                 " ".join("%.3f" % r for r in cpus)))

    sim = harness.Copsim(args.build, [])
    trips, per_process, direct = [], [], []
    try:
        for pair in range(args.pairs * 2):
            runs = [(per_process, [os.path.join(args.build, "tests",
                                                "cop-host"),
                                   "--console-file", "/dev/null",
                                   "embedded", "hello"]),
                    (direct, [os.path.join(args.build, "bin", "cop-run"),
                              os.path.join(args.build, "tests", "cop",
                                           "copsim-probe.elf"), "hello"])]
            for times, command in runs[::1 if pair % 2 == 0 else -1]:
                times.append(timed(command, sim.env)[0])
            _, out = timed([os.path.join(args.build, "tests", "cop-host"),
                            "--time", "--contexts", "21", "--console-file",
                            "/dev/null", "embedded", "hello"], sim.env)
            trips += [int(us) / 1e3 for us in re.findall(
                r"^round-trip index=(?!0 )\d+ us=(\d+)$", out, re.M)]
    finally:
        sim.stop()
    print("round trip of a context through libcop on a running copsim "
          "(create, load, run, destroy; %d contexts): %.2f ms median, %.2f "
          "ms p90 (target <= 3 ms); a host process per context %.1f ms, "
          "cop-run %.0f ms (medians)"
          % (len(trips), statistics.median(trips), percentile(trips, 0.9),
             statistics.median(per_process) * 1e3,
             statistics.median(direct) * 1e3))


if __name__ == "__main__":
    main()
