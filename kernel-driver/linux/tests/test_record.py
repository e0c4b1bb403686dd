"""`coprof record --driver=linux`: the module records what the hosted
driver records.

host-pipeline is recorded twice at SPU_CYCLES:2003 with --no-dither, once
through copdrv.ko in a guest and once through the driver hosted in copsim;
neither may lose a sample, and the two sessions must hold the same samples
per context and per (context, image, file offset).  A capture that falls in
QEMU's reset code, before a context's first instruction, is counted by the
stream as LOST with cause outside-ls (stream.lost includes it) but is no
loss (no context's code: README.md, "Profile a program"); the two drivers
must count the same of those.  The program runs its
contexts from one thread (--threads 1): the trace unit's LFSR belongs to
the slot, not the context (docs/trace-unit.md), so with several threads the
order in which contexts reach the slots is a race, and so is each
context's capture phase; two hosted runs then differ as well.  From one
thread, contexts are created in the same order (context_id names the same
work in both sessions) and every capture is the same instruction.

The module's stream, copied in the guest to a second port
($COPROF_GUEST_STREAM_COPY), passes `copstream check` with errors=0, and
the guest's dmesg after rmmod (in DIR/guest.log) has no warning.
"""

import os
import re
import signal
import sqlite3
import subprocess
import time

import pytest

from module_fixtures import copdrv_ko  # noqa: F401

HOST_PIPELINE_ARGS = ["--threads", "1", "--contexts", "8"]


FIXED = ("--event=SPU_CYCLES:2003", "--no-dither")


def record(build_dir, out, driver, env=None, sampling=FIXED):
    cmd = [os.path.join(build_dir, "bin", "coprof"), "record",
           "--driver=" + driver, *sampling, "--quiet", "-o", out, "--",
           os.path.join(build_dir, "examples", "host-pipeline"),
           *HOST_PIPELINE_ARGS]
    return subprocess.run(cmd, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})), timeout=300)


def session(path):
    """(keys, samples per context, samples per (context, image, offset)),
    contexts by copsim's context_id, images by content hash and offset."""
    db = sqlite3.connect(os.path.join(path, "session.db"))
    keys = dict(db.execute("SELECT key, value FROM session"))
    per_context = dict(db.execute(
        "SELECT c.context_id, SUM(s.count) FROM samples s "
        "JOIN contexts c ON c.id = s.context GROUP BY c.context_id"))
    per_offset = {(ctx, img, off): n for ctx, img, off, n in db.execute(
        "SELECT c.context_id, i.hash || '@' || i.image_offset, "
        "s.file_offset, s.count FROM samples s "
        "JOIN contexts c ON c.id = s.context "
        "JOIN images i ON i.id = s.image")}
    db.close()
    return keys, per_context, per_offset


def processes_with(text):
    """The pids of the processes whose command line holds text."""
    found = []
    for name in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if name.isdigit() and text.encode() in f.read():
                    found.append(int(name))
        except OSError:
            continue
    return found


def losses(path):
    """{cause name: captures} of a session's LOST records, but outside-ls
    (the reset code's, no loss), and its outside-ls count."""
    db = sqlite3.connect(os.path.join(path, "session.db"))
    causes = dict(db.execute("SELECT cause_name, SUM(count) FROM "
                             "lost_by_cause GROUP BY cause"))
    db.close()
    outside = causes.pop("outside-ls", 0)
    return {c: n for c, n in causes.items() if n}, outside


@pytest.fixture
def copcontrol(build_dir, tmp_path):
    """(its state directory, the environment, run(*ARGS)) of a copcontrol
    with a socket and session directory of this test's own.  Whatever it
    started is ended after the test, also one that failed half-way:
    --shutdown, then SIGKILL for anything still naming the state directory
    (copsim, its QEMUs, coprofd, the guest and guest.py)."""
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = dict(os.environ, COPSIM_SOCKET=str(state / "copsim.sock"),
               XDG_DATA_HOME=str(tmp_path / "data"))
    program = os.path.join(build_dir, "bin", "copcontrol")

    def run(*args):
        return subprocess.run([program, *args], capture_output=True,
                              text=True, env=env, timeout=300)
    try:
        yield state, env, run
    finally:
        try:
            run("--shutdown")
        finally:
            for pid in processes_with(str(state)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass


def kernel_trouble(text):
    return [line for line in text.splitlines()
            if re.search(r"WARNING:|BUG:|Oops|Call Trace|kernel BUG", line)]


@pytest.mark.parametrize("sampling", [
    FIXED,
    ("--event=SPU_CYCLES:997", "--dither-seed=12345", "--slots=4",
     "--buffer-size=16384")], ids=["fixed", "dithered"])
def test_module_records_what_the_hosted_driver_records(copdrv_ko, build_dir,
                                                       tmp_path, sampling):
    """At a fixed rate without dither, and dithered with one seed on four
    slots and a small buffer: the same samples through both drivers."""
    copy = str(tmp_path / "module.stream")
    linux = record(build_dir, str(tmp_path / "linux"), "linux",
                   {"COPROF_GUEST_STREAM_COPY": copy}, sampling)
    assert linux.returncode == 0, linux.stderr
    hosted = record(build_dir, str(tmp_path / "hosted"), "hosted",
                    sampling=sampling)
    assert hosted.returncode == 0, hosted.stderr

    lkeys, lcontexts, loffsets = session(str(tmp_path / "linux"))
    hkeys, hcontexts, hoffsets = session(str(tmp_path / "hosted"))
    assert (lkeys["driver"], hkeys["driver"]) == ("linux", "hosted")
    for path, keys in ((tmp_path / "linux", lkeys),
                       (tmp_path / "hosted", hkeys)):
        assert keys["end_state"] == "complete", keys
        lost, outside = losses(str(path))
        assert lost == {}, keys
        assert int(keys["stream.lost"]) == outside <= 8, keys
        assert int(keys["stream.errors"]) == 0, keys
    assert lkeys["stream.lost"] == hkeys["stream.lost"]
    assert len(lcontexts) == 8
    assert sum(lcontexts.values()) > 5000
    assert lcontexts == hcontexts
    assert loffsets == hoffsets

    check = subprocess.run([os.path.join(build_dir, "bin", "copstream"),
                            "check", copy], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert re.search(r"samples=%s lost=%s contexts=8 errors=0"
                     % (lkeys["stream.samples"], lkeys["stream.lost"]),
                     check.stdout), check.stdout

    with open(tmp_path / "linux" / "guest.log") as f:
        console = f.read()
    assert "coprof-guest: dmesg:" in console, console
    dmesg = console.split("coprof-guest: dmesg:", 1)[1]
    assert re.search(r"copdrv 0000:00:10.0: trace unit: %d slots"
                     % (4 if "--slots=4" in sampling else 8), dmesg)
    assert kernel_trouble(dmesg) == [], dmesg
    assert "stop -> ok warnings=0" in console, console


def test_a_module_that_is_missing_is_one_line(copdrv_ko, build_dir,
                                              tmp_path):
    """One line naming the packages; the previous session (hosted) is put
    back, though the failed start wrote its guest.log beside it."""
    previous = record(build_dir, str(tmp_path / "s"), "hosted")
    assert previous.returncode == 0, previous.stderr
    missing = str(tmp_path / "no" / "copdrv.ko")
    done = record(build_dir, str(tmp_path / "s"), "linux",
                  {"COPROF_MODULE": missing})
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == ("coprof: %s: not built (make builds it once the "
                         "Debian packages qemu-system-x86 linux-image-amd64 "
                         "linux-headers-amd64 busybox-static are installed)"
                         % missing), done.stderr
    assert session(str(tmp_path / "s"))[0]["driver"] == "hosted"
    assert not os.path.exists(tmp_path / "s.old")
    assert not os.path.exists(tmp_path / "s" / "guest.log")


def test_copcontrol_with_the_module(copdrv_ko, build_dir, tmp_path,
                                    copcontrol):
    """copcontrol --driver=linux, saved like the other settings: --start
    boots the guest under a copsim without a driver of its own, --stop
    ends the session complete, --shutdown leaves nothing running."""
    state, env, run = copcontrol
    saved = run("--driver=linux", "--event=SPU_CYCLES:2003", "--no-dither")
    assert saved.returncode == 0, saved.stderr
    assert "driver=linux\n" in (state / "copcontrol.conf").read_text()
    started = run("--start")
    assert started.returncode == 0, started.stderr
    program = subprocess.run(
        [os.path.join(build_dir, "examples", "host-pipeline"),
         *HOST_PIPELINE_ARGS], capture_output=True, text=True, env=env,
        timeout=300)
    assert program.returncode == 0, program.stdout + program.stderr
    stopped = run("--stop")
    assert stopped.returncode == 0, stopped.stderr
    shutdown = run("--shutdown")
    assert shutdown.returncode == 0, shutdown.stderr
    current = str(tmp_path / "data" / "coprof" / "current")
    keys, contexts, _ = session(current)
    assert keys["driver"] == "linux"
    assert keys["end_state"] == "complete", keys
    lost, outside = losses(current)
    assert lost == {}, keys
    assert int(keys["stream.lost"]) == outside <= 8, keys
    assert len(contexts) == 8
    assert not (state / "guest.sock").exists()
    assert "stop -> ok warnings=0" in (state / "guest.log").read_text()


def qemu_of(regs):
    """The pid of the guest's QEMU whose ivshmem is the file regs."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                words = f.read().split(b"\0")
        except OSError:
            continue
        if words[0].endswith(b"qemu-system-x86_64") and any(
                b"mem-path=%s," % regs.encode() in w for w in words):
            return int(pid)
    return None


def wait_dead(pid):
    """Returns once process pid is dead: gone, or a zombie its parent
    (guest.py serve) has not reaped yet.  SIGKILL is delivered
    asynchronously; the next step must find QEMU dead, not dying."""
    while True:
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.01)


def test_a_guest_that_dies_is_one_line_and_an_incomplete_session(
        copdrv_ko, tmp_path, copcontrol):
    """QEMU killed while the session runs: --stop says so in one line and
    fails, the session is incomplete with that reason, --shutdown stops
    copsim and nothing of the guest is left."""
    state, env, run = copcontrol
    started = run("--driver=linux", "--start")
    assert started.returncode == 0, started.stderr
    qemu = qemu_of(str(state / "copsim.regs"))
    assert qemu, "no QEMU runs with %s" % (state / "copsim.regs")
    os.kill(qemu, 9)
    wait_dead(qemu)
    stopped = run("--stop")
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    lines = stopped.stderr.strip().splitlines()
    assert len(lines) == 1, stopped.stderr
    # Whether guest.py saw QEMU's end before --stop asked or after, the
    # line says how it ended and where its console is.
    assert re.match(r"copcontrol: session .* is incomplete: the driver's "
                    r"stream ended without STOP: .*qemu-system-x86_64 was "
                    r"killed by signal 9 .*\(its console: .*guest.log\)$",
                    lines[0]), lines[0]
    keys, _, _ = session(str(tmp_path / "data" / "coprof" / "current"))
    assert keys["end_state"] == "incomplete"
    assert "qemu-system-x86_64 was killed by signal 9" in keys["end_reason"]
    shutdown = run("--shutdown")
    assert shutdown.returncode == 0, shutdown.stderr
    assert qemu_of(str(state / "copsim.regs")) is None
    assert not (state / "guest.sock").exists()


def test_an_unknown_driver_is_a_usage_error(build_dir, tmp_path):
    done = subprocess.run([os.path.join(build_dir, "bin", "coprof"),
                           "record", "--driver=bsd", "-o",
                           str(tmp_path / "s"), "--", "true"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == "coprof: --driver=bsd: not hosted or linux\n"
    assert not os.path.exists(tmp_path / "s")


def test_copcontrol_refuses_a_copsim_that_hosts_its_driver(copcontrol):
    """Its acks would let a slot run on before the module drained it."""
    state, env, run = copcontrol
    assert run("--init").returncode == 0
    try:
        refused = run("--driver=linux", "--start")
        assert refused.returncode == 1
        assert refused.stderr == (
            "copcontrol: %s: this copsim hosts its own driver, whose acks "
            "would not wait for the module's: --shutdown it, then --start "
            "with --driver=linux (copsim --no-driver)\n"
            % (state / "copsim.sock")), refused.stderr
        assert not (state / "guest.sock").exists()
        assert not (state / "copcontrol.conf").exists()
    finally:
        assert run("--shutdown").returncode == 0
