#!/usr/bin/python3
"""bench/hostprof — what the host side of `coprof record` costs the host
program, against `perf record` on the same program.

split-host (hostprof/tests) spins SPIN iterations on its main thread, a
loop with no system call, while two worker threads run kernels contexts;
it prints the spin's wall time and its thread's CPU time (user and
system: the cost of a sampling interrupt lands there, while the wall time
also carries whatever else the 2 cores run).  It runs four ways, in rounds whose order
rotates, all under `coprof record` (the coprocessor side the same in
each):

  off     --no-host-sched: no coprof-host at all (host sampling off)
  sched   the default: the Linux scheduler's events, no host samples
  host    --host-event=cpu-clock: scheduler events and host samples at
          the default period (250 us, 4 kHz), user space
  perf    --no-host-sched, with `perf record -e cpu-clock:u -c 250000`
          between coprof and split-host: perf's sampling of the same
          program at the same period, the anchor

It prints, per way, the median spin CPU time, spin wall time and wall
time of the whole `coprof record`, with their ratios to `off`, and the
host samples taken (coprof's from the session, perf's from `perf
script`).
"""

import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

# benchlib.py is installed beside this script (or is in bench/ above it)
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
import benchlib  # noqa: E402

WAYS = ("off", "sched", "host", "perf")
SPIN_RE = re.compile(r"split-host: spin [0-9a-f]+ in ([0-9.]+) ms, on CPU "
                     r"([0-9.]+) ms")


def parse_args():
    parser = benchlib.parser(
        __file__,
        "Measure what coprof record's host side (the Linux "
        "scheduler's events, host samples at cpu-clock's "
        "default period) costs a host program, against the "
        "same program with the host side off and under perf "
        "record at the same period.")
    parser.add_argument("--rounds", type=int, default=7,
                        help="rounds, each running every way once "
                             "(default 7)")
    parser.add_argument("--spin", type=int, default=600000000,
                        help="split-host's spin iterations (default 600 "
                             "million)")
    return parser.parse_args()


def command(way, coprof, split_host, session, spin, perf_data):
    base = [coprof, "record", "--quiet", "-o", session]
    program = [split_host, "2", "4", str(spin)]
    if way == "off":
        return base + ["--no-host-sched", "--"] + program
    if way == "sched":
        return base + ["--"] + program
    if way == "host":
        return base + ["--host-event=cpu-clock", "--"] + program
    return base + ["--no-host-sched", "--", "perf", "record", "-q",
                   "-e", "cpu-clock:u", "-c", "250000", "-o",
                   perf_data, "--"] + program


def host_samples(way, session, perf_data):
    if way == "host":
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(
            session, "session.db"), uri=True)
        try:
            return db.execute("SELECT COUNT(*) FROM host_samples").\
                fetchone()[0]
        finally:
            db.close()
    if way == "perf":
        out = subprocess.run(["perf", "script", "-i", perf_data, "-F",
                              "ip"], capture_output=True, text=True).stdout
        return len(out.splitlines())
    return 0


def run_once(way, args, work):
    coprof = os.path.join(args.build, "bin", "coprof")
    split_host = os.path.join(args.build, "tests", "split-host")
    session = os.path.join(work, "session")
    perf_data = os.path.join(work, "perf.data")
    start = time.monotonic()
    p = subprocess.run(command(way, coprof, split_host, session, args.spin,
                               perf_data),
                       capture_output=True, text=True)
    wall = time.monotonic() - start
    m = SPIN_RE.search(p.stdout)
    if p.returncode != 0 or not m:
        sys.exit("bench/hostprof: %s: failed (status %d): %s"
                 % (way, p.returncode, (p.stderr + p.stdout)[-400:]))
    n = host_samples(way, session, perf_data)
    for d in (session, session + ".old"):
        shutil.rmtree(d, ignore_errors=True)
    if os.path.exists(perf_data):
        os.unlink(perf_data)
    return float(m.group(2)), float(m.group(1)), wall, n


def main():
    args = parse_args()
    if not shutil.which("perf"):
        sys.exit("bench/hostprof: perf is not installed (Debian's "
                 "linux-perf; make deps)")
    for p in ("bin/coprof", "tests/split-host"):
        if not os.access(os.path.join(args.build, p), os.X_OK):
            sys.exit("bench/hostprof: %s/%s is not built: run make"
                     % (args.build, p))
    print("split-host 2 4 %d under coprof record, %d rounds, order "
          "rotating; ratios to 'off' (no host side)" % (args.spin,
                                                        args.rounds))
    work = tempfile.mkdtemp(prefix="bench-hostprof-", dir="/tmp")
    cpus = {w: [] for w in WAYS}
    spins = {w: [] for w in WAYS}
    walls = {w: [] for w in WAYS}
    samples = {w: [] for w in WAYS}
    try:
        for r in range(args.rounds):
            order = WAYS[r % len(WAYS):] + WAYS[:r % len(WAYS)]
            for way in order:
                cpu, spin, wall, n = run_once(way, args, work)
                cpus[way].append(cpu)
                spins[way].append(spin)
                walls[way].append(wall)
                samples[way].append(n)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {w: (statistics.median(cpus[w]), statistics.median(spins[w]),
               statistics.median(walls[w])) for w in WAYS}
    base = med["off"]
    print("%-6s %11s %7s %11s %7s %9s %7s  %s" % (
        "way", "spin CPU ms", "ratio", "spin ms", "ratio", "wall s",
        "ratio", "host samples"))
    for way in WAYS:
        m = med[way]
        print("%-6s %11.1f %6.3fx %11.1f %6.3fx %9.3f %6.3fx  %s" % (
            way, m[0], m[0] / base[0], m[1], m[1] / base[1], m[2],
            m[2] / base[2], "%d..%d" % (min(samples[way]),
                                        max(samples[way]))
            if way in ("host", "perf") else "-"))
    host, perf = med["host"][0] / base[0], med["perf"][0] / base[0]
    print("on the spin's CPU time: host sampling %+.1f%%, perf record "
          "%+.1f%%; host sampling off (no coprof-host) is the base, the "
          "scheduler's events alone %+.1f%%"
          % (100 * (host - 1), 100 * (perf - 1),
             100 * (med["sched"][0] / base[0] - 1)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
