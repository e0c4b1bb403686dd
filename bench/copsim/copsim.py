#!/usr/bin/python3
"""bench/copsim — what copsim's scheduling costs.

Three measurements of one run:

1. Context switches.  Four contexts of copsim-probe "spin N" (8 N
   instructions each) from four threads of cop-host on a copsim with ONE
   slot and a short time slice.  From its SCHED records: per preemption,
   how long the emulator took to stop at its gate once closed (hold_ns),
   and how long the slot stood still, from closing the gate to the next
   context's bind (hold, unbind and driver hook, bind, the records).

2. Time slicing overall.  The same four contexts with the short slice and
   with a slice longer than any of them (never preempting), pairs run in
   alternating order: the median ratios of wall time and of CPU time
   (copsim and the emulators it reaped, which other load disturbs less).

3. A context's round trip.  One "hello" through libcop and copsim (connect,
   create, load, run, destroy; copsim already running) against cop-run of
   the same image (QEMU started directly): the median of each, the ratio.
"""

import os
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


def four_contexts(args, harness, slice_cycles):
    """Wall and CPU seconds of the four contexts on a fresh one-slot
    copsim, and its SCHED records."""
    sim = harness.Copsim(args.build, ["--slots", "1", "--slice",
                                      str(slice_cycles)])
    try:
        wall, _ = timed([os.path.join(args.build, "tests", "cop-host"),
                         "--threads", "4", "--contexts", "4",
                         "--console-file", "/dev/null", "embedded", "spin",
                         str(args.spin)], sim.env)
        cpu = sim.cpu_seconds()
        events = harness.sched_events(args.build, sim.log)
    finally:
        sim.stop()
    return wall, cpu, events


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
                 "tests/cop/copsim-probe.elf"):
        if not os.path.exists(os.path.join(args.build, path)):
            sys.exit("bench/copsim: %s is missing: run make"
                     % os.path.join(args.build, path))

    walls, cpus, latencies = [], [], []
    for pair in range(args.pairs):
        slices = [args.slice, 1 << 60]
        if pair % 2:
            slices.reverse()
        runs = {s: four_contexts(args, harness, s) for s in slices}
        walls.append(runs[args.slice][0] / runs[1 << 60][0])
        cpus.append(runs[args.slice][1] / runs[1 << 60][1])
        latencies += switch_latencies(runs[args.slice][2])
    holds = [h / 1000 for h, _ in latencies]
    stills = [s / 1000 for _, s in latencies]
    print("context switch on a slot (%d preemptions, slice %d cycles): hold "
          "%.0f us median, %.0f us p95; slot still %.0f us median, %.0f us "
          "p95" % (len(latencies), args.slice, statistics.median(holds),
                   percentile(holds, 0.95), statistics.median(stills),
                   percentile(stills, 0.95)))
    print("time slicing: 4 contexts x %d M instructions on 1 slot, slice %d "
          "against none: median %.3fx wall, %.3fx CPU  (pairs, CPU: %s)"
          % (8 * args.spin // 1000000, args.slice, statistics.median(walls),
             statistics.median(cpus), " ".join("%.3f" % r for r in cpus)))

    sim = harness.Copsim(args.build, [])
    through, direct = [], []
    try:
        for pair in range(args.pairs * 2):
            runs = [(through, [os.path.join(args.build, "tests", "cop-host"),
                               "embedded", "hello"]),
                    (direct, [os.path.join(args.build, "bin", "cop-run"),
                              os.path.join(args.build, "tests", "cop",
                                           "copsim-probe.elf"), "hello"])]
            for times, command in runs[::1 if pair % 2 == 0 else -1]:
                times.append(timed(command, sim.env)[0])
    finally:
        sim.stop()
    print("round trip of a context: libcop + copsim %.0f ms, cop-run %.0f ms "
          "(medians): %.2fx" % (statistics.median(through) * 1e3,
                                statistics.median(direct) * 1e3,
                                statistics.median(through)
                                / statistics.median(direct)))


if __name__ == "__main__":
    main()
