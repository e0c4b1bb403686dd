#!/usr/bin/python3
"""bench/module — copdrv.ko's cost per sample against the hosted driver's.

The same session runs through each driver, in pairs whose order
alternates: `copcontrol --driver=D --start` at SPU_CYCLES:997 without
dither, host-pipeline (made longer than its defaults), then `copcontrol
--status` before `--stop`.  The cost per sample is the driver core's own
measure in both places: the wall time spent inside its polls (STATS
poll_ns: draining the slots' FIFOs, encoding, the event buffer) divided by
the samples it took.  Through the module that is guest time under QEMU's
TCG (the guest's CPU is emulated, so a guest nanosecond costs the host
more than one); through the hosted driver it is copsim's poll thread on
the host.  It prints both per pair, their medians and the ratio
module/hosted side by side, with the polls per sample and the wall time
of the whole cycle (the module's includes booting its guest).
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# benchlib.py is installed beside this script (or is in bench/ above it)
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
import benchlib  # noqa: E402

EVENT = "SPU_CYCLES:997"
POLLS = re.compile(r"^polls:\s+(\d+), ([\d.]+) ms in them", re.M)
SAMPLES = re.compile(r"^samples:\s+(\d+)", re.M)


def parse_args():
    parser = benchlib.parser(
        __file__,
        "Measure copdrv.ko's cost per sample (time inside the "
        "driver's polls per sample, in the guest) against the "
        "hosted driver's (copsim's poll thread), the same "
        "session through each, pairs alternating.")
    parser.add_argument("--pairs", type=int, default=3,
                        help="pairs (default 3)")
    parser.add_argument("--frames", type=int, default=12,
                        help="host-pipeline --frames (default 12)")
    return parser.parse_args()


def run(command, env):
    result = subprocess.run(command, env=env, capture_output=True,
                            text=True, timeout=600)
    if result.returncode != 0:
        sys.exit("bench/module: %s failed (status %d): %s"
                 % (" ".join(command), result.returncode,
                    (result.stdout + result.stderr).strip()[-400:]))
    return result.stdout


def one(args, driver, tmp):
    """(ns in polls a sample, polls a sample, samples, wall s) of one
    session through driver."""
    state = tempfile.mkdtemp(dir=tmp)
    env = dict(os.environ, COPSIM_SOCKET=os.path.join(state, "copsim.sock"),
               XDG_DATA_HOME=os.path.join(state, "data"))
    copcontrol = os.path.join(args.build, "bin", "copcontrol")
    start = time.monotonic()
    try:
        run([copcontrol, "--driver=" + driver, "--event=" + EVENT,
             "--no-dither", "--start"], env)
        run([os.path.join(args.build, "examples", "host-pipeline"),
             "--frames", str(args.frames)], env)
        status = run([copcontrol, "--status"], env)
        run([copcontrol, "--stop"], env)
    finally:
        subprocess.run([copcontrol, "--shutdown"], env=env,
                       capture_output=True, timeout=600)
    wall = time.monotonic() - start
    polls, ms = POLLS.search(status).groups()
    samples = int(SAMPLES.search(status).group(1))
    if samples == 0:
        sys.exit("bench/module: %s: no samples" % driver)
    return ms and float(ms) * 1e6 / samples, int(polls) / samples, \
        samples, wall


def main():
    args = parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-module-")
    results = {"linux": [], "hosted": []}
    try:
        for pair in range(args.pairs):
            order = ("linux", "hosted") if pair % 2 == 0 else \
                ("hosted", "linux")
            for driver in order:
                results[driver].append(one(args, driver, tmp))
            print("pair %d: module %.0f ns/sample (%d samples), hosted "
                  "%.0f ns/sample (%d samples)"
                  % (pair + 1, results["linux"][-1][0],
                     results["linux"][-1][2], results["hosted"][-1][0],
                     results["hosted"][-1][2]), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def median(driver, i):
        return statistics.median(r[i] for r in results[driver])

    print("host-pipeline --frames %d at %s, no dither, %d pairs (medians):"
          % (args.frames, EVENT, args.pairs))
    print("%-28s %12s %12s %10s" % ("", "copdrv.ko", "hosted", "ratio"))
    for label, i, fmt in (("ns in polls per sample", 0, "%12.0f"),
                          ("polls per sample", 1, "%12.4f"),
                          ("samples", 2, "%12.0f"),
                          ("wall s (start to shutdown)", 3, "%12.2f")):
        m, h = median("linux", i), median("hosted", i)
        print(("%-28s " + fmt + " " + fmt + " %9.2fx")
              % (label, m, h, m / h if h else float("nan")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
