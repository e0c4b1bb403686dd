"""Fixtures of copreport's tests.

real_session: one real run, shared by every test: host-pipeline (4
pipeline, 2 kernels and 2 overlays contexts, 8 rounds: enough that every
hot overlay function has exact samples although many are ambiguous) under copsim's one
command mode sampling every 997 cycles with the SCHED event log, replayed
by coprofd into a session.

new_session(dir): an empty session.db made with coprofd's tables of the
session schema (abi/session-schema.sql, which the C writers are built
from), for hand-built sessions; host_schema is coprof-host's, for the
host side's tables.

test_image: overlay/'s test image (build/tests/overlay/overlays.elf),
whose overlays share local-store addresses, for hand-built sessions.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.dirname(HERE)
SOURCE = os.path.dirname(REPORT)
if REPORT not in sys.path:
    sys.path.insert(0, REPORT)

from coprof_report import session_schema  # noqa: E402

PYTHON = "/usr/bin/python3"


def store_schema():
    """The CREATE script of coprofd's tables (abi/session-schema.sql)."""
    return session_schema.load().script("coprofd")


@pytest.fixture(scope="session")
def host_schema():
    """The CREATE script of coprof-host's tables (the host side)."""
    return session_schema.load().script("coprof-host")


@pytest.fixture(scope="session")
def test_image(build_dir):
    """overlay/'s test image, whose overlays share local-store addresses."""
    p = os.path.join(build_dir, "tests", "overlay", "overlays.elf")
    if not os.path.isfile(p):
        pytest.fail("%s is not built: run make" % p)
    return p


@pytest.fixture(scope="session")
def new_session():
    def make(directory, keys=None, version=1):
        os.makedirs(directory, exist_ok=True)
        db = sqlite3.connect(os.path.join(directory, "session.db"))
        db.executescript(store_schema())
        db.execute("PRAGMA application_id = %d" % 0x436F7072)
        db.execute("PRAGMA user_version = %d" % version)
        base = {"format_version": version, "stream.complete": 1,
                "stream.slots": 8, "timeline.bucket_ns": 10000000}
        base.update(keys or {})
        db.executemany("INSERT INTO session VALUES (?, ?)", base.items())
        db.commit()
        return db
    return make


@pytest.fixture(scope="session")
def copreport(coprof_bin):
    """copreport(*args, cwd=None, env=None) -> CompletedProcess (text)."""
    exe = coprof_bin("copreport")

    def run(*args, cwd=None, env=None, check=False):
        p = subprocess.run([exe] + [str(a) for a in args], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            pytest.fail("copreport %s: exit %d\n%s" % (
                " ".join(map(str, args)), p.returncode, p.stderr))
        return p
    return run


class Real:
    """The shared session: dir, host (the host-pipeline path), db."""


@pytest.fixture(scope="session")
def real_session(tmp_path_factory, coprof_bin, build_dir):
    work = tmp_path_factory.mktemp("real")
    stream = work / "stream"
    log = work / "events.coplog"
    sess = work / "session"
    host = os.path.join(build_dir, "examples", "host-pipeline")
    if not os.access(host, os.X_OK):
        pytest.fail("%s is not built: run make" % host)
    env = dict(os.environ)
    env.pop("COPSIM_SOCKET", None)
    p = subprocess.run(
        [coprof_bin("copsim"), "--event=SPU_CYCLES:997",
         "--stream-out", str(stream), "--event-log", str(log), "--",
         host, "--contexts", "8", "--frames", "1", "--rounds", "8",
         "--console-dir", str(work)],
        capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run(
        [coprof_bin("coprofd"), "--replay", str(stream), "--session-dir",
         str(sess), "--event-log", str(log), "--quiet"],
        capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    r = Real()
    r.dir = str(sess)
    r.host = os.path.realpath(host)
    r.db = sqlite3.connect("file:%s?mode=ro" % os.path.join(r.dir,
                                                            "session.db"),
                           uri=True)
    yield r
    r.db.close()


@pytest.fixture(scope="session")
def report_json(real_session, copreport):
    """report_json(*args) -> the parsed JSON report of the real session."""
    cache = {}

    def get(*args):
        if args not in cache:
            p = copreport("-d", real_session.dir, "--format", "json", *args,
                          check=True)
            cache[args] = json.loads(p.stdout)
        return cache[args]
    return get


@pytest.fixture
def session_copy(real_session, tmp_path):
    """A writable copy of the real session."""
    d = tmp_path / "copy"
    shutil.copytree(real_session.dir, str(d))
    return str(d)


class Knob:
    """Sessions of report/tests/knob: same (two runs of knob.elf at other
    dither seeds), slow (knob-slow.elf: knob_work twice as slow),
    nodebug (knob.elf without debug information), other_rate (knob.elf
    at another period); elf: the path of knob.elf."""


def record(coprof_bin, out, command, event="SPU_CYCLES:2003", seed=1):
    """`coprof record` of command into the session out (fixed seed)."""
    env = dict(os.environ)
    env.pop("COPSIM_SOCKET", None)
    p = subprocess.run([coprof_bin("coprof"), "record", "--event=" + event,
                        "--dither-seed=%d" % seed, "-o", str(out), "--"] +
                       [str(c) for c in command],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return str(out)


@pytest.fixture(scope="session")
def record_session(coprof_bin):
    """record_session(out, command, event=..., seed=...): record()."""
    def run(out, command, event="SPU_CYCLES:2003", seed=1):
        return record(coprof_bin, out, command, event, seed)
    return run


@pytest.fixture(scope="session")
def knob(tmp_path_factory, coprof_bin, build_dir):
    work = tmp_path_factory.mktemp("knob")
    host = os.path.join(build_dir, "tests", "cop-host")
    elf = os.path.join(build_dir, "tests", "report", "knob.elf")
    slow = os.path.join(build_dir, "tests", "report", "knob-slow.elf")
    for p in (host, elf, slow):
        if not os.path.isfile(p):
            pytest.fail("%s is not built: run make" % p)
    nodebug = work / "knob-nodebug.elf"
    subprocess.run(["riscv64-unknown-elf-strip", "--strip-debug", "-o",
                    str(nodebug), elf], check=True)
    k = Knob()
    k.elf = elf
    k.a = record(coprof_bin, work / "a", [host, elf], seed=11)
    k.b = record(coprof_bin, work / "b", [host, elf], seed=12)
    k.slow = record(coprof_bin, work / "slow", [host, slow], seed=13)
    k.nodebug = record(coprof_bin, work / "nodebug", [host, nodebug],
                       seed=14)
    k.other_rate = record(coprof_bin, work / "rate", [host, elf],
                          event="SPU_CYCLES:997", seed=15)
    return k
