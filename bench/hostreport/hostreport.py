#!/usr/bin/python3
"""bench/hostreport — what copreport costs on a session of many short
contexts with its host side (issue 25).

It records `coprof record --event=SPU_CYCLES:9973 -- host-pipeline
--contexts 3000 --threads 8 --frames 1` (the host side at its default:
the Linux scheduler's events of the command's threads; with --host-sched
others, e.g. all), then runs, each as a child of its own: copreport's
default report, --side=cop, --separate=context --format json, and
copreport timeline; for each its wall time and peak resident memory
(ru_maxrss from wait4), and the timeline JSON's size.  Also printed: the
session's size on disk and its host events (aggregated, kept raw).
Targets: the default report at most 3 s and 200 MB, the timeline JSON
at most 20 MB.
"""

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

# benchlib.py is installed beside this script (or is in bench/ above it)
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
import benchlib  # noqa: E402

REPORT_S, REPORT_MB, TIMELINE_MB = 3.0, 200.0, 20.0


def parse_args():
    p = benchlib.parser(
        __file__,
        "Measure copreport's default report, --side=cop, --separate and "
        "timeline on a session of thousands of short contexts recorded "
        "with the host side: wall time, peak memory, the JSON's size.")
    p.add_argument("--contexts", type=int, default=3000,
                   help="host-pipeline --contexts (default 3000)")
    p.add_argument("--host-sched", default="command",
                   choices=("command", "all"),
                   help="coprof record --host-sched (default command)")
    return p.parse_args()


def run_child(command):
    """Wall seconds and peak RSS (MB) of command, which must succeed."""
    start = time.monotonic()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit("bench/hostreport: %s failed (status %d): %s"
                 % (" ".join(command), child.returncode, err.strip()[-400:]))
    return wall, usage.ru_maxrss / 1024.0


def host_numbers(session):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(session,
                                                          "session.db"),
                         uri=True)
    try:
        keys = dict(db.execute("SELECT key, value FROM session"))
    finally:
        db.close()
    return (int(keys.get("host.sched_events", 0)),
            int(keys.get("host.raw_events", 0)),
            int(keys.get("host.raw_dropped", 0)))


def main():
    args = parse_args()
    bin_dir = os.path.join(args.build, "bin")
    host = os.path.join(args.build, "examples", "host-pipeline")
    if not os.access(host, os.X_OK):
        sys.exit("bench/hostreport: %s is not built: run make" % host)
    work = tempfile.mkdtemp(prefix="bench-hostreport-", dir="/tmp")
    session = os.path.join(work, "session")
    copreport = os.path.join(bin_dir, "copreport")
    try:
        wall, _ = run_child([os.path.join(bin_dir, "coprof"), "record",
                             "--quiet", "--event=SPU_CYCLES:9973",
                             "--host-sched=" + args.host_sched, "-o",
                             session, "--", host, "--contexts",
                             str(args.contexts), "--threads", "8",
                             "--frames", "1"])
        events, raw, dropped = host_numbers(session)
        print("coprof record --host-sched=%s -- host-pipeline --contexts %d "
              "--threads 8 --frames 1: %.1f s; session %.1f MB on disk, "
              "%d host events aggregated, %d kept raw (%d let go)"
              % (args.host_sched, args.contexts, wall,
                 benchlib.disk_bytes(session) / 1e6, events, raw, dropped))
        timeline = os.path.join(work, "t.json")
        results = {}
        for name, command in (
                ("default report", [copreport, "-d", session]),
                ("--side=cop", [copreport, "-d", session, "--side=cop"]),
                ("--separate=context json", [copreport, "-d", session,
                                             "--separate=context",
                                             "--format", "json"]),
                ("timeline", [copreport, "timeline", "-d", session, "-o",
                              timeline])):
            results[name] = run_child(command)
            print("%-24s %6.2f s  peak %6.1f MB" % ((name,) +
                                                   results[name]))
        json_mb = os.path.getsize(timeline) / 1e6
        print("%-24s %6.1f MB of JSON" % ("timeline", json_mb))
        wall, mb = results["default report"]
        print("targets  default report at most %.0f s and %.0f MB: %s; "
              "timeline JSON at most %.0f MB: %s"
              % (REPORT_S, REPORT_MB, "met" if wall <= REPORT_S and
                 mb <= REPORT_MB else "NOT met", TIMELINE_MB,
                 "met" if json_mb <= TIMELINE_MB else "NOT met"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
