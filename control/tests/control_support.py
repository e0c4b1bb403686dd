"""Helpers of control/'s tests: private copsim sockets and data folders
(Env, the cenv fixture of conftest.py), session.db queries, error lines.

Every test gets COPSIM_SOCKET in a fresh short folder under /tmp and
XDG_DATA_HOME in its tmp_path, so it never touches the user's copsim or
sessions; at the end whatever copcontrol started there is stopped.
"""

import glob
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time

FIVE_TABLES = ("samples", "ambiguous_samples", "unmapped_samples",
               "orphan_samples", "pending_samples")


class Env:
    def __init__(self, coprof_bin, build_dir, tmp_path):
        self.state = tempfile.mkdtemp(prefix="cc-", dir="/tmp")
        self.socket = os.path.join(self.state, "run", "copsim.sock")
        self.tmp = tmp_path
        self.build = build_dir
        self.env = dict(os.environ, COPSIM_SOCKET=self.socket,
                        XDG_DATA_HOME=str(tmp_path / "data"))
        self.env.pop("COPSIM_EVENT_LOG", None)
        self.copcontrol_path = coprof_bin("copcontrol")
        self.coprof_path = coprof_bin("coprof")
        self.recordings = []        # Recording: ended by cleanup()

    def run(self, program, args, timeout=180, **kw):
        return subprocess.run([program] + list(args), env=self.env,
                              capture_output=True, text=True,
                              timeout=timeout, **kw)

    def copcontrol(self, *args, **kw):
        return self.run(self.copcontrol_path, args, **kw)

    def coprof(self, *args, **kw):
        return self.run(self.coprof_path, args, **kw)

    def host_pipeline(self, *args):
        program = os.path.join(self.build, "examples", "host-pipeline")
        return self.run(program, ["--contexts", "4", "--threads", "2",
                                  "--frames", "1"] + list(args))

    def state_file(self, name):
        return os.path.join(self.state, "run", name)

    def pid(self, name):
        try:
            with open(self.state_file(name)) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return 0

    def cleanup(self):
        """Ends what the test started, also when it failed half-way: its
        recordings (coprof, held at a test point or not), copcontrol's
        daemons, and then anything still naming the state directory
        (copsim, its QEMUs, coprofd, a host program of a recording)."""
        for recording in self.recordings:
            if recording.process.poll() is None:
                recording.process.kill()
                recording.process.communicate(timeout=60)
        try:
            self.copcontrol("--shutdown", timeout=60)
        finally:
            for name in ("coprofd.pid", "copsim.pid", "coprof-host.pid"):
                pid = self.pid(name)
                if pid and alive(pid):
                    os.kill(pid, signal.SIGKILL)
            for pid in running_with(self.state):
                os.kill(pid, signal.SIGKILL)
            shutil.rmtree(self.state, ignore_errors=True)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def stopped_group():
    """Popen's arguments for a process that will stop itself at a test
    point: a process group of its own, whose parent (this test) is in
    another group of the same session, so the group is never orphaned.
    The kernel sends SIGHUP and SIGCONT to an orphaned group with a
    stopped member when one of its processes exits (the command of a
    coprof record ending), which would let it go on by itself."""
    return dict(process_group=0)


def stopped(pid):
    """Whether pid is stopped (SIGSTOP: state T)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def wait_gone(pid, seconds=30):
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


def session(path):
    """The session.db of a session directory, read-only."""
    return sqlite3.connect("file:%s?mode=ro" % os.path.join(str(path),
                                                          "session.db"),
                           uri=True)


def key(db, name):
    row = db.execute("SELECT value FROM session WHERE key = ?",
                     (name,)).fetchone()
    return None if row is None else int(row[0])


def end(db):
    """(end_state, end_reason): what the session says of its end."""
    values = dict(db.execute("SELECT key, value FROM session WHERE key IN "
                             "('end_state', 'end_reason')"))
    return values.get("end_state"), values.get("end_reason")


def table_samples(db):
    return sum(db.execute("SELECT COALESCE(SUM(count), 0) FROM %s" %
                          t).fetchone()[0] for t in FIVE_TABLES)


def context_totals(db):
    return db.execute("SELECT COALESCE(SUM(exact + unmapped + ambiguous + "
                      "pending), 0) FROM context_totals").fetchone()[0]


def count(db, table):
    return db.execute("SELECT COUNT(*) FROM %s" % table).fetchone()[0]


def one_error_line(result, program, status):
    """A failure: the exit status, and one line `program: ...` on stderr."""
    assert result.returncode == status, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(program + ": "), result.stderr
    return lines[0]


def process_table():
    """{pid: (ppid, comm)} of every process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        table[int(name)] = (int(stat[stat.rindex(")") + 2:].split()[1]),
                            comm)
    return table


def running_with(text):
    """The live processes whose command line holds text."""
    found = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            with open(path, "rb") as f:
                if text.encode() in f.read():
                    found.append(int(path.split("/")[2]))
        except OSError:
            continue
    return [pid for pid in found if alive(pid)]


def children(pid):
    """{comm: [pid, ...]} of the processes whose parent is pid."""
    found = {}
    for child, (ppid, comm) in process_table().items():
        if ppid == pid:
            found.setdefault(comm, []).append(child)
    return found


def wait_for(condition, what, seconds=60):
    """Waits until condition() is true (a state the test drives to, never
    a time); fails naming what after seconds."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "never happened: " + what
        time.sleep(0.02)


class Recording:
    """`coprof record` of a long host-pipeline run (4 contexts, rounds
    enough to outlast any test) in its own TMPDIR, for fault injection:
    wait_samples() drives the recording to a known point, processes()
    names its processes, finish() waits for coprof's end."""

    ROUNDS = "100000"

    def __init__(self, cenv, out, command=None, args=(), pause=None):
        self.out = str(out)
        self.tmpdir = os.path.join(cenv.state, "tmp")
        os.makedirs(self.tmpdir, exist_ok=True)
        env = dict(cenv.env, TMPDIR=self.tmpdir)
        group = {}
        if pause:       # cli_test_point(): stop there (wait_paused())
            env["COPROF_TEST_PAUSE"] = pause
            group = stopped_group()
        host = os.path.join(cenv.build, "examples", "host-pipeline")
        # The host program's consoles go to a folder of the test's own: a
        # host killed by a fault cannot remove a temporary one of its own,
        # and TMPDIR must show only what coprof leaves.
        consoles = os.path.join(cenv.state, "consoles")
        os.makedirs(consoles, exist_ok=True)
        command = command or [host, "--contexts", "4", "--threads", "2",
                              "--frames", "1", "--rounds", self.ROUNDS,
                              "--console-dir", consoles]
        self.process = subprocess.Popen(
            [cenv.coprof_path, "record", "--event=SPU_CYCLES:997", "-o",
             self.out] + list(args) + ["--"] + command, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            **group)
        self.seen = set()
        cenv.recordings.append(self)

    def samples(self):
        """stream.samples of the last flush (0 before the first)."""
        try:
            with session(self.out) as db:
                return key(db, "stream.samples") or 0
        except sqlite3.Error:
            return 0

    def wait_samples(self, n):
        wait_for(lambda: self.process.poll() is None and
                 self.samples() >= n, "a session of %d samples" % n)

    def processes(self):
        """{name: pid} of coprof's copsim, coprofd and command, and of
        copsim's QEMUs (qemu: the first of them)."""
        found = {comm: pids[0] for comm, pids in
                 children(self.process.pid).items()}
        qemus = [pid for comm, pids in children(found["copsim"]).items()
                 if comm.startswith("qemu") for pid in pids]
        if qemus:
            found["qemu"] = qemus[0]
        self.seen.update(found.values())
        self.seen.update(qemus)
        return found

    def wait_paused(self, pid=None):
        """Waits until pid (coprof itself by default) stopped itself at
        the test point named by pause."""
        pid = pid or self.process.pid
        wait_for(lambda: stopped(pid), "pid %d at its test point" % pid)

    def finish(self):
        """coprof's (status, stdout, stderr), also kept as out, err."""
        self.out_text, self.err = self.process.communicate(timeout=300)
        return self.process.returncode, self.out_text, self.err

    def assert_nothing_left(self):
        """No process of the recording runs, and its TMPDIR is empty:
        no socket, register file or private directory left."""
        for pid in self.seen:
            wait_for(lambda: not alive(pid), "the end of pid %d" % pid)
        left = os.listdir(self.tmpdir)
        assert left == [], "left in TMPDIR: %s" % left


def on_a_terminal(cenv, args, on_output=None, stdout=True):
    """coprof ARGS run on a pty (its stdin and stderr, and its stdout
    unless stdout is False: then /dev/null; 120x30, TERM xterm) in a
    session of its own: (exit status, all it wrote to the pty).
    on_output(text so far, process) is called after each read."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0,
                                                       0))
    env = dict(cenv.env, TERM="xterm")
    process = subprocess.Popen(
        [cenv.coprof_path] + list(args), stdin=slave,
        stdout=slave if stdout else subprocess.DEVNULL, stderr=slave,
        env=env, start_new_session=True)
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if on_output is not None:
            on_output(output.decode(errors="replace"), process)
    process.wait(timeout=120)
    os.close(master)
    return process.returncode, output.decode(errors="replace")
