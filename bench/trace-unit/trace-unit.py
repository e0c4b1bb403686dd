#!/usr/bin/python3
"""bench/trace-unit — what the trace unit costs the emulator.

Runs the long-running example (build/examples/kernels.elf, 4000 rounds:
1.8 billion instructions, so QEMU's start-up weighs little) under cop-run
in three ways: with the trace unit in fast mode, in reference mode, and
with --no-trace (bare QEMU, no plugin).  Each traced run is paired with a bare
run, the two run one after the other in alternating order, and the ratio of
their wall times is taken per pair, so slow drifts of a busy machine cancel
out.  It prints the median ratio of each mode and every pair's ratio, and
the median ratio of CPU time (cop-run and QEMU, user + system), which other
work on the machine disturbs less.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time

COUNTERS = re.compile(r"captures=(\d+) dropped=(\d+) instructions=(\d+)")
MIN_INSTRUCTIONS = 500000000


def parse_args():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="Measure the trace unit's overhead on the long-running "
                    "example: fast and reference modes against bare QEMU "
                    "(cop-run --no-trace), pairs run alternately, median "
                    "ratios printed.")
    parser.add_argument("--build", default=os.environ.get(
                            "COPROF_BUILD", os.path.join(here, "..")),
                        help="the build folder (default: the one holding "
                             "this program, or $COPROF_BUILD)")
    parser.add_argument("--pairs", type=int, default=5,
                        help="traced/bare pairs per mode (default 5)")
    parser.add_argument("--sample-every", type=int, default=100000,
                        metavar="N",
                        help="one capture every N instructions (default "
                             "100000)")
    parser.add_argument("--rounds", type=int, default=4000,
                        help="the example's argument (default 4000, about "
                             "1.8 billion instructions; at least 1200)")
    return parser.parse_args()


def timed(command):
    """Runs command; returns its wall time, CPU time and stderr."""
    start = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit("bench/trace-unit: %s failed (status %d): %s"
                 % (" ".join(command), proc.returncode, stderr.strip()))
    return elapsed, usage.ru_utime + usage.ru_stime, stderr


def measure(mode_args, bare, pairs):
    """Wall and CPU ratios of traced to bare, one per pair."""
    walls, cpus, stderr = [], [], ""
    for pair in range(pairs):
        if pair % 2 == 0:
            traced_wall, traced_cpu, stderr = timed(mode_args)
            bare_wall, bare_cpu, _ = timed(bare)
        else:
            bare_wall, bare_cpu, _ = timed(bare)
            traced_wall, traced_cpu, stderr = timed(mode_args)
        walls.append(traced_wall / bare_wall)
        cpus.append(traced_cpu / bare_cpu)
    return walls, cpus, stderr


def main():
    args = parse_args()
    cop_run = os.path.join(args.build, "bin", "cop-run")
    example = os.path.join(args.build, "examples", "kernels.elf")
    for path in (cop_run, example):
        if not os.path.exists(path):
            sys.exit("bench/trace-unit: %s is missing: run make" % path)
    traced = [cop_run, "--sample-every", str(args.sample_every), example,
              str(args.rounds)]
    bare = [cop_run, "--sample-every", str(args.sample_every), "--no-trace",
            example, str(args.rounds)]

    bare_time, _, _ = timed(bare)
    _, _, stderr = timed(traced)
    match = COUNTERS.search(stderr)
    if not match:
        sys.exit("bench/trace-unit: no counters from cop-run: %s" % stderr)
    instructions = int(match.group(3))
    if instructions < MIN_INSTRUCTIONS:
        sys.exit("bench/trace-unit: the example ran %d instructions, fewer "
                 "than %d" % (instructions, MIN_INSTRUCTIONS))
    print("kernels.elf %d: %d instructions, one capture every %d; bare QEMU "
          "%.2f s (%.0f M instructions/s)"
          % (args.rounds, instructions, args.sample_every, bare_time,
             instructions / bare_time / 1e6))
    for name, mode in (("fast", traced),
                       ("reference", traced[:1] + ["--reference"]
                        + traced[1:])):
        walls, cpus, stderr = measure(mode, bare, args.pairs)
        match = COUNTERS.search(stderr)
        print("%-9s / no-trace: median %.2fx wall, %.2fx CPU  (pairs, wall: "
              "%s; %s captures)"
              % (name, statistics.median(walls), statistics.median(cpus),
                 " ".join("%.2f" % r for r in walls),
                 match.group(1) if match else "?"))


if __name__ == "__main__":
    main()
