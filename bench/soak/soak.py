#!/usr/bin/python3
"""bench/soak — coprofd, copsim and coprof-host over thousands of short
contexts.

The way a long-running system is profiled with copcontrol (issue 21):
`copcontrol --start`, host programs that create contexts all the time
(examples/host-pipeline run again and again, a context per frame job),
`copcontrol --dump` every 10 s, `copcontrol --stop`.  Meanwhile the
resident memory (VmRSS) and open descriptors of coprofd and copsim are
read from /proc every half second, against the number of contexts that
have ended so far (host-pipeline prints a line per context as it ends);
likewise coprof-host's, which records the host side by default (the
Linux scheduler's events of the host programs' threads).

It prints, for each daemon, the value at the 1,000th context, the peak,
and the slope per 1,000 contexts (least squares over the samples from
the 1,000th context on), the descriptors' range, and the session's size
per context (its directory's blocks on disk) and what it is made of: each
file's bytes and, from SQLite's dbstat, each table's with its indexes,
the biggest first, per context.  Targets: coprofd's and
coprof-host's slope under 1 MB per 1,000 contexts, coprofd's peak under
96 MB, descriptors flat; the session at most 5 KB per context (issue
25).  Everything runs in a temporary
directory with its own copsim socket; nothing is left behind.
"""

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

# benchlib.py is installed beside this script (or is in bench/ above it)
sys.path[:0] = [os.path.dirname(os.path.abspath(__file__)),
                os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
import benchlib  # noqa: E402

SLOPE_TARGET_MB = 1.0       # per 1,000 contexts
SESSION_TARGET_BYTES = 5000     # per context
PEAK_TARGET_MB = 96.0
DUMP_EVERY_S = 10.0
SAMPLE_EVERY_S = 0.5


def parse_args():
    parser = benchlib.parser(
        __file__,
        "Profile thousands of short coprocessor contexts "
        "through copcontrol --start, --dump every 10 s and "
        "--stop, and report how coprofd's and copsim's "
        "resident memory and descriptors grow with the "
        "contexts, and the session's size per context.")
    parser.add_argument("--seconds", type=float, default=180.0,
                        help="how long to make contexts (default 180)")
    parser.add_argument("--contexts", type=int, default=20000,
                        help="stop making contexts after this many "
                             "(default 20000)")
    parser.add_argument("--event", default="SPU_CYCLES:9973",
                        help="the rate (default %(default)s)")
    parser.add_argument("--batch", type=int, default=400,
                        help="contexts per host-pipeline run "
                             "(default %(default)s)")
    return parser.parse_args()


def read_status(pid):
    """(VmRSS in MB, open descriptors) of a process, or None."""
    try:
        with open("/proc/%d/status" % pid) as f:
            rss = next(int(line.split()[1]) for line in f
                       if line.startswith("VmRSS:"))
        fds = len(os.listdir("/proc/%d/fd" % pid))
    except (OSError, StopIteration):
        return None
    return rss / 1024.0, fds


def read_pid(path):
    with open(path) as f:
        return int(f.readline().split()[0])


class Sampler(threading.Thread):
    """Reads the daemons' /proc entries every SAMPLE_EVERY_S against the
    contexts ended so far."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids = pids            # {"coprofd": pid, "copsim": pid}
        self.contexts = 0           # ended so far (the main thread counts)
        self.samples = {name: [] for name in pids}  # [(contexts, mb, fds)]
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(SAMPLE_EVERY_S):
            self.sample()

    def sample(self):
        for name, pid in self.pids.items():
            got = read_status(pid)
            if got is not None:
                self.samples[name].append((self.contexts,) + got)


def slope(points):
    """Least-squares slope of mb over contexts, per 1,000 contexts."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return 0.0
    return 1000.0 * sum((p[0] - mx) * (p[1] - my) for p in points) / sxx


def summary(name, points):
    """One line: at the 1,000th context, peak, slope, descriptors."""
    if not points:
        return "%-8s no samples" % name, 0.0, 0.0
    after = [p for p in points if p[0] >= 1000] or points
    at_1000 = after[0][1]
    peak = max(p[1] for p in points)
    per_1000 = slope(after)
    fds = [p[2] for p in after]
    return ("%-8s RSS at the 1,000th context %6.1f MB, peak %6.1f MB, "
            "slope %+6.2f MB per 1,000 contexts; descriptors %d-%d"
            % (name, at_1000, peak, per_1000, min(fds), max(fds)),
            peak, per_1000)


def copcontrol(args, env, *options):
    return subprocess.run([os.path.join(args.build, "bin", "copcontrol")] +
                          list(options), env=env, check=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True).stdout


def run_batches(args, env, sampler, deadline):
    """host-pipeline runs until the deadline or enough contexts; counts
    contexts as their lines come.  Returns the contexts made."""
    program = os.path.join(args.build, "examples", "host-pipeline")
    next_dump = time.monotonic() + DUMP_EVERY_S
    made = 0
    while time.monotonic() < deadline and made < args.contexts:
        proc = subprocess.Popen([program, "--contexts", str(args.batch),
                                 "--threads", "8", "--frames", "1"],
                                env=env, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            if line.startswith("context "):
                made += 1
                sampler.contexts = made
            if time.monotonic() >= next_dump:
                copcontrol(args, env, "--dump")
                next_dump = time.monotonic() + DUMP_EVERY_S
        if proc.wait() != 0:
            sys.exit("bench/soak: host-pipeline exited with status %d"
                     % proc.returncode)
    return made


def files_bytes(session):
    """(name, bytes on disk) of the session directory's files, the
    images folder as one."""
    sizes = {}
    for name in os.listdir(session):
        path = os.path.join(session, name)
        sizes[name + "/" if os.path.isdir(path) else name] = \
            benchlib.disk_bytes(path) if os.path.isdir(path) else \
            os.lstat(path).st_blocks * 512
    return sorted(sizes.items(), key=lambda item: -item[1])


def tables_bytes(session):
    """(table, bytes) of session.db from dbstat, an index counted with
    its table, the biggest first."""
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(session,
                                                          "session.db"),
                         uri=True)
    try:
        owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_master"))
        sizes = {}
        for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat "
                                     "GROUP BY name"):
            table = owner.get(name, name)
            sizes[table] = sizes.get(table, 0) + size
    finally:
        db.close()
    return sorted(sizes.items(), key=lambda item: -item[1])


def print_sizes(label, sizes, made, shown=8):
    """The biggest of sizes, in bytes per context."""
    parts = ["%s %.0f" % (name, size / max(made, 1))
             for name, size in sizes[:shown] if size]
    for at in range(0, len(parts), 4):
        print("%-8s %s" % (label if at == 0 else "", "; ".join(parts[at:at + 4])))


def main():
    args = parse_args()
    top = tempfile.mkdtemp(prefix="coprof-soak-")
    os.chmod(top, 0o700)
    env = dict(os.environ, COPSIM_SOCKET=os.path.join(top, "run",
                                                      "copsim.sock"),
               XDG_DATA_HOME=os.path.join(top, "data"))
    state = os.path.join(top, "run")
    session = os.path.join(top, "session")
    started = False
    try:
        print(copcontrol(args, env, "--start", "--event=" + args.event,
                         "--session-dir", session).strip())
        started = True
        pids = {"coprofd": read_pid(os.path.join(state, "coprofd.pid")),
                "copsim": read_pid(os.path.join(state, "copsim.pid"))}
        if os.path.exists(os.path.join(state, "coprof-host.pid")):
            pids["coprof-host"] = read_pid(os.path.join(state,
                                                        "coprof-host.pid"))
        sampler = Sampler(pids)
        sampler.sample()
        sampler.start()
        begin = time.monotonic()
        made = run_batches(args, env, sampler, begin + args.seconds)
        elapsed = time.monotonic() - begin
        sampler.sample()
        sampler.done.set()
        sampler.join()
        print(copcontrol(args, env, "--stop").strip())
        started = False
        size = benchlib.disk_bytes(session)
        print("bench/soak: %d contexts in %.0f s (%.0f a second), %s, "
              "a dump every %.0f s"
              % (made, elapsed, made / elapsed, args.event, DUMP_EVERY_S))
        ok = True
        for name in pids:
            line, peak, per_1000 = summary(name, sampler.samples[name])
            print(line)
            if name == "coprofd":
                ok = peak < PEAK_TARGET_MB and per_1000 < SLOPE_TARGET_MB
            if name == "coprof-host":
                host_ok = per_1000 < SLOPE_TARGET_MB
        per_context = size / max(made, 1)
        print("session  %.1f MB on disk, %.0f bytes per context"
              % (size / 1e6, per_context))
        print_sizes("files", files_bytes(session), made)
        print_sizes("tables", tables_bytes(session), made)
        print("targets  coprofd slope under %.0f MB per 1,000 contexts, "
              "peak under %.0f MB: %s"
              % (SLOPE_TARGET_MB, PEAK_TARGET_MB, "met" if ok else "MISSED"))
        if "coprof-host" in pids:
            print("targets  coprof-host slope under %.0f MB per 1,000 "
                  "contexts: %s" % (SLOPE_TARGET_MB,
                                    "met" if host_ok else "MISSED"))
        print("targets  session at most %d bytes per context: %s"
              % (SESSION_TARGET_BYTES,
                 "met" if per_context <= SESSION_TARGET_BYTES
                 else "MISSED"))
    finally:
        if started:
            subprocess.run([os.path.join(args.build, "bin", "copcontrol"),
                            "--stop"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        subprocess.run([os.path.join(args.build, "bin", "copcontrol"),
                        "--shutdown"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
