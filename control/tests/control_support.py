"""Helpers of control/'s tests: private copsim sockets and data folders
(Env, the cenv fixture of conftest.py), session.db queries, error lines.

Every test gets COPSIM_SOCKET in a fresh short folder under /tmp and
XDG_DATA_HOME in its tmp_path, so it never touches the user's copsim or
sessions; at the end whatever copcontrol started there is stopped.
"""

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
        self.copcontrol("--shutdown", timeout=60)
        for name in ("coprofd.pid", "copsim.pid"):
            pid = self.pid(name)
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.state, ignore_errors=True)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


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
