#!/usr/bin/python3
"""bench/trace-unit — what the trace unit costs the emulator.

Runs the long-running example (build/examples/kernels.elf, about 540
million instructions at its default of 1200 rounds) under cop-run in three
ways: with the trace unit in fast mode, in reference mode, and with
--no-trace (bare QEMU, no plugin).  Each traced run is paired with a bare
run, the two run one after the other in alternating order, and the ratio of
their wall times is taken per pair, so slow drifts of a busy machine cancel
out.  It prints the median ratio of each mode and every pair's ratio.
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
    parser.add_argument("--rounds", type=int, default=1200,
                        help="the example's argument (default 1200, about "
                             "540 million instructions)")
    return parser.parse_args()


def timed(command):
    start = time.monotonic()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    elapsed = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit("bench/trace-unit: %s failed (status %d): %s"
                 % (" ".join(command), proc.returncode, proc.stderr.strip()))
    return elapsed, proc.stderr


def measure(mode_args, bare, pairs):
    ratios, stderr = [], ""
    for pair in range(pairs):
        if pair % 2 == 0:
            traced_time, stderr = timed(mode_args)
            bare_time, _ = timed(bare)
        else:
            bare_time, _ = timed(bare)
            traced_time, stderr = timed(mode_args)
        ratios.append(traced_time / bare_time)
    return ratios, stderr


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

    bare_time, _ = timed(bare)
    _, stderr = timed(traced)
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
        ratios, stderr = measure(mode, bare, args.pairs)
        match = COUNTERS.search(stderr)
        print("%-9s / no-trace: median %.2fx  (pairs: %s; %s captures)"
              % (name, statistics.median(ratios),
                 " ".join("%.2f" % r for r in ratios),
                 match.group(1) if match else "?"))


if __name__ == "__main__":
    main()
