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

Then the overlay watch: build/examples/overlays.elf (7 overlay loads per
round) in fast mode at a high rate, watched (the default for an image with
overlays) against --no-watch, pairs alternating the same way: the cost of
comparing the guard words at every capture and pushing an event per swap.

Then the dither: kernels.elf in fast mode at a capture every 997
instructions, --dither SEED against exact intervals, pairs alternating:
the cost of drawing a jitter and computing the interval's LFSR value at
every reload.

Then call stacks (--call-graph): the trace unit without them must cost
what it did before they existed, so this build's fast mode without
--call-graph against main's build of cop-run and its plugin
(--main-build, default ../main/build beside this worktree's folder) on
kernels.elf at a capture every 997 instructions; and what they cost when
on: calltree.elf (a call or return every few instructions: the worst
case) with --call-graph 16 against without, pairs alternating; and the
same on copsim's slot model, where a context's stack is saved and
restored at every switch: four calltree contexts time-sliced on two slots
under copsim's one command (SPU_CYCLES:997), --call-graph=16 against
without, pairs alternating.

Then the FIFO-full policy, where the driver drains: host-pipeline under
copsim's one command (`copsim --event=SPU_CYCLES:997 --stream-out F --
host-pipeline`, 16 contexts on 8 slots), the stall policy (with the
doorbell) against drop, pairs alternating, for the default 1024-entry FIFO
and deeper ones: the wall and CPU ratios, what drop lost, and each slot's
stall share (its stall time over the run's wall time: a slot runs at most
that long, so its share of its own run time is at least this).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

COUNTERS = re.compile(r"captures=(\d+) dropped=(\d+) instructions=(\d+)")
SLOT = re.compile(r"^copsim: slot (\d+): captures=(\d+) dropped=(\d+) "
                  r"outside=\d+ cycles=\d+ stalls=(\d+) stall_ns=(\d+)$",
                  re.M)
TOTALS = re.compile(r"samples=(\d+) lost=(\d+) .* polls=(\d+) "
                    r"doorbell-polls=(\d+) stalls=(\d+) stall-ns=(\d+)")
EVENTS = re.compile(r"events=(\d+) events_dropped=(\d+)")
MIN_INSTRUCTIONS = 500000000
# The examples that run alone under cop-run, with their arguments
# (pingpong needs its host program: under cop-run it waits for ever).
CPI_EXAMPLES = (("alias.elf", []), ("bare.elf", []), ("kernels.elf", []),
                ("overlays.elf", []), ("pipeline.elf", []),
                ("stream.elf", ["double"]))


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
    parser.add_argument("--watch-every", type=int, default=997, metavar="N",
                        help="the overlay watch's run: one capture every N "
                             "instructions (default 997)")
    parser.add_argument("--overlay-rounds", type=int, default=2000,
                        help="overlays.elf's argument for the watch's run "
                             "(default 2000, about a billion instructions)")
    parser.add_argument("--policy-every", type=int, default=997,
                        metavar="N",
                        help="the FIFO-full policy's run: SPU_CYCLES:N "
                             "(default 997)")
    parser.add_argument("--pipeline-args", default="--frames 30 --rounds 10",
                        help="host-pipeline's arguments for the policy's "
                             "run (default '--frames 30 --rounds 10', "
                             "about 260 million instructions)")
    parser.add_argument("--fifo-depths", default="1024,4096,16384",
                        help="FIFO depths the policies are compared at "
                             "(default 1024,4096,16384)")
    parser.add_argument("--dither-every", type=int, default=997,
                        metavar="N",
                        help="the dither's run: one capture every N "
                             "instructions of kernels.elf (default 997)")
    parser.add_argument("--main-build", metavar="DIR",
                        help="main's build folder for the call stacks' "
                             "off-path comparison (default: ../main/build "
                             "beside the source tree, when it exists)")
    parser.add_argument("--calltree-rounds", type=int, default=40000,
                        help="calltree.elf's argument for the cost of call "
                             "stacks (default 40000, about 460 million "
                             "instructions)")
    parser.add_argument("--only", choices=("trace", "timing", "watch",
                                           "dither",
                                           "callgraph", "policy"),
                        help="run one part only")
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
    if args.only == "watch":
        measure_watch(args, cop_run)
        return
    if args.only == "policy":
        measure_policy(args)
        return
    if args.only == "dither":
        measure_dither(args, cop_run)
        return
    if args.only == "callgraph":
        measure_callgraph(args, cop_run)
        return
    if args.only == "timing":
        measure_timing(args, cop_run)
        return
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
    if args.only == "trace":
        return
    measure_timing(args, cop_run)
    measure_watch(args, cop_run)
    measure_dither(args, cop_run)
    measure_callgraph(args, cop_run)
    measure_policy(args)


def measure_timing(args, cop_run):
    """The timing model (SPU_CYCLES) against today's instruction counting
    (SPU_INSTRUCTIONS, which registers no main-memory callback) on the
    long-running example, fast mode, side by side in pairs of alternating
    order: median ratios, the target (at most 1.2x wall) met or not, and
    the load average; then each example's cycles per instruction from its
    exact counts under SPU_CYCLES (main-memory and DMA waits included)."""
    kernels = os.path.join(args.build, "examples", "kernels.elf")
    every = str(args.sample_every)
    cycles = [cop_run, "--event", "SPU_CYCLES", "--sample-every", every,
              kernels, str(args.rounds)]
    insns = [cop_run, "--event", "SPU_INSTRUCTIONS", "--sample-every", every,
             kernels, str(args.rounds)]
    load_before = os.getloadavg()
    walls, cpus, _ = measure(cycles, insns, args.pairs)
    load_after = os.getloadavg()
    wall = statistics.median(walls)
    print("SPU_CYCLES / SPU_INSTRUCTIONS: kernels.elf %d, median %.2fx wall, "
          "%.2fx CPU  (pairs, wall: %s; CPU: %s)"
          % (args.rounds, wall, statistics.median(cpus),
             " ".join("%.2f" % r for r in walls),
             " ".join("%.2f" % r for r in cpus)))
    print("  target at most 1.2x wall: %s; load average %.2f before, %.2f "
          "after (%d cores)" % ("met" if wall <= 1.2 else "NOT met",
                                load_before[0], load_after[0],
                                os.cpu_count()))
    for name, example_args in CPI_EXAMPLES:
        elf = os.path.join(args.build, "examples", name)
        with tempfile.TemporaryDirectory() as tmp:
            counts = os.path.join(tmp, "counts")
            subprocess.run([cop_run, "--event", "SPU_CYCLES",
                            "--sample-every", "1000003", "--exact-counts",
                            counts, elf] + example_args,
                           capture_output=True, timeout=600)
            ends = [line.split() for line in open(counts)
                    if line.startswith("end ")]
        fields = dict(w.split("=") for w in ends[-1][1:]) if ends else {}
        if "cycles" in fields:
            print("%-13s %d instructions, %d cycles: %.2f cycles per "
                  "instruction" % (os.path.basename(elf),
                                   int(fields["instructions"]),
                                   int(fields["cycles"]),
                                   int(fields["cycles"])
                                   / int(fields["instructions"])))


def measure_dither(args, cop_run):
    """Dithered intervals against exact ones, fast mode."""
    example = os.path.join(args.build, "examples", "kernels.elf")
    exact = [cop_run, "--sample-every", str(args.dither_every), example,
             str(args.rounds)]
    dithered = exact[:1] + ["--dither", "12345"] + exact[1:]
    walls, cpus, stderr = measure(dithered, exact, args.pairs)
    counters = COUNTERS.search(stderr)
    print("dither / exact: kernels.elf %d, one capture every %d: median "
          "%.2fx wall, %.2fx CPU  (pairs, wall: %s; %s captures)"
          % (args.rounds, args.dither_every, statistics.median(walls),
             statistics.median(cpus), " ".join("%.2f" % r for r in walls),
             counters.group(1) if counters else "?"))


def main_build(args):
    """main's build folder, or None when there is none to compare with."""
    if args.main_build:
        return args.main_build
    source = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    candidate = os.path.join(os.path.dirname(source), "main", "build")
    return candidate if os.path.exists(candidate) else None


def measure_callgraph(args, cop_run):
    """Call stacks: off against main's path, on against off."""
    kernels = os.path.join(args.build, "examples", "kernels.elf")
    calltree = os.path.join(args.build, "tests", "cop", "calltree.elf")
    if not os.path.exists(calltree):
        sys.exit("bench/trace-unit: %s is missing: run make" % calltree)
    main = main_build(args)
    if main:
        main_run = os.path.join(main, "bin", "cop-run")
        off = [cop_run, "--sample-every", str(args.dither_every), kernels,
               str(args.rounds)]
        before = [main_run] + off[1:]
        walls, cpus, _ = measure(off, before, args.pairs)
        print("call stacks off / main's build (%s): kernels.elf %d, one "
              "capture every %d: median %.3fx wall, %.3fx CPU  (pairs, "
              "wall: %s)" % (main, args.rounds, args.dither_every,
                             statistics.median(walls),
                             statistics.median(cpus),
                             " ".join("%.3f" % r for r in walls)))
    else:
        print("call stacks off / main's build: no main build found "
              "(--main-build DIR)")
    off = [cop_run, "--sample-every", str(args.dither_every), calltree,
           str(args.calltree_rounds)]
    on = off[:1] + ["--call-graph", "16"] + off[1:]
    walls, cpus, stderr = measure(on, off, args.pairs)
    counters = COUNTERS.search(stderr)
    print("call stacks on / off: calltree.elf %d, one capture every %d, 16 "
          "frames: median %.2fx wall, %.2fx CPU  (pairs, wall: %s; %s "
          "instructions)" % (args.calltree_rounds, args.dither_every,
                             statistics.median(walls),
                             statistics.median(cpus),
                             " ".join("%.2f" % r for r in walls),
                             counters.group(3) if counters else "?"))
    measure_slot_callgraph(args)


def slot_calltree(args, work, call_graph):
    """copsim's one command: four calltree contexts on two slots."""
    rounds = str(max(1, args.calltree_rounds // 4))
    return ([os.path.join(args.build, "bin", "copsim"),
             "--event=SPU_CYCLES:%d" % args.dither_every, "--stream-out",
             os.path.join(work, "stream"), "--slots", "2",
             "--context-model=slot"]
            + (["--call-graph=16"] if call_graph else []) +
            ["--", os.path.join(args.build, "tests", "cop-host"),
             "--contexts", "4", "--threads", "4", "--console-file",
             "/dev/null", os.path.join(args.build, "tests", "cop",
                                       "calltree.elf"), rounds])


def measure_slot_callgraph(args):
    """Call stacks on copsim's slot model: on against off."""
    with tempfile.TemporaryDirectory(prefix="bench-slot-stacks-") as work:
        walls, cpus, _ = measure(slot_calltree(args, work, True),
                                 slot_calltree(args, work, False),
                                 args.pairs)
    print("call stacks on / off on the slot model: 4 calltree.elf %d "
          "contexts on 2 slots, one capture every %d, 16 frames: median "
          "%.2fx wall, %.2fx CPU  (pairs, wall: %s)"
          % (max(1, args.calltree_rounds // 4), args.dither_every,
             statistics.median(walls), statistics.median(cpus),
             " ".join("%.2f" % r for r in walls)))


def measure_watch(args, cop_run):
    """The overlay watch against none, on the overlays example."""
    example = os.path.join(args.build, "examples", "overlays.elf")
    if not os.path.exists(example):
        sys.exit("bench/trace-unit: %s is missing: run make" % example)
    watched = [cop_run, "--sample-every", str(args.watch_every), example,
               str(args.overlay_rounds)]
    unwatched = watched[:1] + ["--no-watch"] + watched[1:]
    walls, cpus, stderr = measure(watched, unwatched, args.pairs)
    counters, events = COUNTERS.search(stderr), EVENTS.search(stderr)
    print("overlay watch / none: overlays.elf %d, one capture every %d: "
          "median %.2fx wall, %.2fx CPU  (pairs, wall: %s; %s captures, %s "
          "events, %s dropped)"
          % (args.overlay_rounds, args.watch_every, statistics.median(walls),
             statistics.median(cpus), " ".join("%.2f" % r for r in walls),
             counters.group(1) if counters else "?",
             events.group(1) if events else "?",
             events.group(2) if events else "?"))


def policy_run(args, copsim, host, depth, policy, stream):
    """copsim's one command with host-pipeline: the command for timed()."""
    return [copsim, "--event=SPU_CYCLES:%d" % args.policy_every,
            "--fifo-depth", str(depth), "--fifo-full=" + policy,
            "--stream-out", stream, "--", host] + args.pipeline_args.split()


def slot_stats(stderr):
    """{slot: (captures, dropped, stalls, stall_ns)} and the totals."""
    slots = {int(m[0]): tuple(int(x) for x in m[1:])
             for m in SLOT.findall(stderr)}
    totals = TOTALS.search(stderr)
    if not slots or not totals:
        sys.exit("bench/trace-unit: no counters from copsim: %s" % stderr)
    return slots, tuple(int(x) for x in totals.groups())


def measure_policy(args):
    """Stall (and the doorbell) against drop, per FIFO depth."""
    copsim = os.path.join(args.build, "bin", "copsim")
    host = os.path.join(args.build, "examples", "host-pipeline")
    for path in (copsim, host):
        if not os.path.exists(path):
            sys.exit("bench/trace-unit: %s is missing: run make" % path)
    stream = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                          "bench-trace-unit-%d.stream" % os.getpid())
    print("FIFO-full policy: copsim --event=SPU_CYCLES:%d -- host-pipeline "
          "%s, %d pairs alternating" % (args.policy_every,
                                        args.pipeline_args, args.pairs))
    try:
        for depth in (int(d) for d in args.fifo_depths.split(",")):
            policy_at_depth(args, copsim, host, depth, stream)
    finally:
        if os.path.exists(stream):
            os.unlink(stream)


def policy_at_depth(args, copsim, host, depth, stream):
    stall = policy_run(args, copsim, host, depth, "stall", stream)
    drop = policy_run(args, copsim, host, depth, "drop", stream)
    walls, cpus, shares, lost, captures, stall_totals = [], [], {}, [], [], []
    for pair in range(args.pairs):
        runs = {}
        for policy in (("stall", "drop") if pair % 2 == 0
                       else ("drop", "stall")):
            runs[policy] = timed(stall if policy == "stall" else drop)
        (s_wall, s_cpu, s_err), (d_wall, d_cpu, d_err) = \
            runs["stall"], runs["drop"]
        walls.append(s_wall / d_wall)
        cpus.append(s_cpu / d_cpu)
        slots, totals = slot_stats(s_err)
        for slot, (_, dropped, _, ns) in slots.items():
            shares.setdefault(slot, []).append(ns / 1e9 / s_wall)
            if dropped:
                sys.exit("bench/trace-unit: stall dropped %d on slot %d"
                         % (dropped, slot))
        stall_totals.append(totals)
        d_slots, d_totals = slot_stats(d_err)
        lost.append(d_totals[1])
        captures.append(sum(c for c, *_ in d_slots.values()))
    print("  %5d entries: stall / drop median %.2fx wall, %.2fx CPU (pairs, "
          "wall: %s); drop lost %s of %s captures; stall lost 0, "
          "stalls %s, doorbell polls %s of %s"
          % (depth, statistics.median(walls), statistics.median(cpus),
             " ".join("%.2f" % r for r in walls),
             "/".join(str(n) for n in lost), "/".join(str(n) for n in
                                                      captures),
             "/".join(str(t[4]) for t in stall_totals),
             "/".join(str(t[3]) for t in stall_totals),
             "/".join(str(t[2]) for t in stall_totals)))
    print("         stall share per slot (median of pairs): %s; the largest "
          "%.2f%% (target < 2%%)"
          % (" ".join("%d:%.2f%%" % (slot, 100 * statistics.median(v))
                      for slot, v in sorted(shares.items())),
             100 * max(max(v) for v in shares.values())))


if __name__ == "__main__":
    main()
