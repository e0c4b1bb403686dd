"""copsim and libcop end to end: contexts run by cop-host (a libcop host
program embedding copsim-probe) on a copsim of the test's own, with its
SCHED records checked."""

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

import pytest

from copsim_harness import (SOURCE, check_slot_history, counted_cycles,
                            parse_host_lines, sched_events, wait_for)

sys.path.insert(0, os.path.join(SOURCE, "escape-protocol"))
import coprof_stream  # noqa: E402  (needs the path above)


def host(test_bin, sim, *args, check=True, timeout=120):
    """Runs cop-host against sim; returns (result, context lines)."""
    result = subprocess.run([test_bin("cop-host")] + list(args), env=sim.env,
                            capture_output=True, text=True, timeout=timeout)
    if check:
        assert result.returncode == 0, result.stderr + result.stdout
    return result, parse_host_lines(result.stdout)


def test_runs_an_embedded_program(copsim, test_bin, build_dir):
    sim = copsim("--slots", "2")
    result, (ctx,) = host(test_bin, sim, "embedded", "hello")
    assert result.stdout.startswith("hello from copsim-probe\n")
    assert ctx["reason"] == "exit" and ctx["status"] == "0"
    assert int(ctx["instructions"]) > 0 and ctx["binds"] == "1"
    kinds = [(e["kind"], e.get("context")) for e in
             sched_events(build_dir, sim.log) if e["kind"] != "start"]
    c = int(ctx["context"])
    assert kinds == [("create", c), ("load", c), ("run", c), ("bind", c),
                     ("exit", c), ("unbind", c), ("destroy", c)]


def test_sched_records_carry_identity_and_clocks(copsim, test_bin,
                                                 build_dir, tmp_path):
    sim = copsim("--exact-counts", str(tmp_path))
    before = time.monotonic_ns()
    result, (ctx,) = host(test_bin, sim, "embedded", "spin", "1000")
    after = time.monotonic_ns()
    events = {e["kind"]: e for e in sched_events(build_dir, sim.log)}
    create, bind, exit_ = events["create"], events["bind"], events["exit"]
    pid = create["pid"]
    assert os.path.exists("/proc/%d" % pid) is False   # cop-host has ended
    for e in (events["load"], events["run"], bind, exit_, events["unbind"]):
        assert e["pid"] == pid and e["context"] == int(ctx["context"])
    assert create["mono"] <= bind["mono"] <= exit_["mono"]
    # mono and the record's time are CLOCK_MONOTONIC, the test's clock: both
    # within the host's run (the log's TSC calibration within 10 us)
    assert before <= create["mono"] and exit_["mono"] <= after
    assert before - 10_000 <= bind["time_ns"] <= after + 10_000
    # The slot's clock counts SPU_CYCLES, the context's its instructions.
    assert exit_["cycles"] - bind["cycles"] == counted_cycles(
        tmp_path, ctx["context"])
    assert exit_["instructions"] == int(ctx["instructions"])
    # The creation call stack names the host program and libc.
    frames = create["stack"].split()
    assert frames[0].startswith(test_bin("cop-host") + "+0x")
    assert any("libc.so" in f for f in frames)


def test_data_window_is_shared_with_the_host(copsim, test_bin):
    sim = copsim("--slots", "2")
    _, contexts = host(test_bin, sim, "--threads", "3", "--contexts", "3",
                       "--console-file", "/dev/null", "--data-words", "20000",
                       "embedded", "data", "20000")
    assert len(contexts) == 3
    assert all(c["data"] == "ok" for c in contexts)


def test_console_goes_to_a_named_file(copsim, test_bin, tmp_path):
    sim = copsim()
    pattern = str(tmp_path / "console-%d.txt")
    result, contexts = host(test_bin, sim, "--contexts", "2",
                            "--console-file", pattern, "embedded", "hello")
    assert "hello" not in result.stdout
    for i in range(2):
        with open(pattern % i) as f:
            assert f.read() == "hello from copsim-probe\n"


def test_consoles_sharing_stdout_keep_whole_lines(copsim, test_bin):
    sim = copsim()
    result, contexts = host(test_bin, sim, "--threads", "6", "--contexts",
                            "6", "embedded", "hello")
    lines = result.stdout.splitlines()
    assert lines.count("hello from copsim-probe") == 6 and len(contexts) == 6
    assert len(lines) == 12


def test_time_slices_preempt_every_context(copsim, test_bin, build_dir,
                                           tmp_path):
    counts = tmp_path / "counts"
    counts.mkdir()
    sim = copsim("--slots", "2", "--slice", "100000", "--exact-counts",
                 str(counts))
    _, contexts = host(test_bin, sim, "--threads", "4", "--contexts", "4",
                       "--console-file", str(tmp_path / "console-%d"),
                       "--rendezvous", "embedded", "rendezvous", "5000000")
    assert len(contexts) == 4
    assert all(c["reason"] == "exit" for c in contexts)
    assert all(int(c["preemptions"]) >= 1 for c in contexts), contexts
    events = sched_events(build_dir, sim.log)
    bindings = check_slot_history(events, 2)
    preempted = {e["context"] for e in events if e["kind"] == "preempt"}
    assert preempted == {int(c["context"]) for c in contexts}
    for c in contexts:
        runs = bindings[int(c["context"])]
        # Every cycle the context ran is on one of its bindings.
        assert sum(end - start for _, start, end, _ in runs) == \
            counted_cycles(counts, c["context"])
        assert [r for _, _, _, r in runs][-1] == "exit"
        assert len(runs) == int(c["binds"]) == int(c["preemptions"]) + 1


def test_object_ids_resolve_to_readelf_offsets(copsim, test_bin, build_dir):
    sim = copsim()
    for source, binary, symbol in (
            ("embedded", test_bin("cop-host"), "copsim_probe.elf_image"),
            ("library", test_bin("libcop-host-probe.so"),
             "copsim_probe_in_library.elf_image")):
        _, (ctx,) = host(test_bin, sim, source, "hello")
        assert ctx["path"] == os.path.realpath(binary)
        assert int(ctx["offset"]) == readelf_file_offset(binary, symbol)
        assert int(ctx["hash"], 16) == coprof_stream.image_hash(binary)
    load = [e for e in sched_events(build_dir, sim.log) if e["kind"] == "load"]
    st = os.stat(test_bin("libcop-host-probe.so"))
    assert (load[1]["inode"], load[1]["dev"], load[1]["size"]) == \
        (st.st_ino, st.st_dev, st.st_size)


def readelf_file_offset(binary, symbol):
    """The file offset of a symbol, from readelf's symbols and segments."""
    symbols = subprocess.run(["readelf", "-sW", binary], capture_output=True,
                             text=True, check=True).stdout
    value = next(int(line.split()[1], 16) for line in symbols.splitlines()
                 if line.split()[-1:] == [symbol])
    segments = subprocess.run(["readelf", "-lW", binary], capture_output=True,
                              text=True, check=True).stdout
    for line in segments.splitlines():
        fields = line.split()
        if fields[:1] == ["LOAD"]:
            offset, vaddr, filesz = (int(fields[i], 16) for i in (1, 2, 4))
            if vaddr <= value < vaddr + filesz:
                return value - vaddr + offset
    raise AssertionError("%s is in no PT_LOAD segment of %s"
                         % (symbol, binary))


def test_anonymous_image_is_copied(copsim, test_bin, probe_image):
    sim = copsim()
    _, (ctx,) = host(test_bin, sim, "anonymous", "hello")
    assert ctx["anonymous"] == "1" and ctx["offset"] == "0"
    assert os.path.dirname(ctx["path"]) == os.path.join(sim.dir, "images")
    with open(ctx["path"], "rb") as copy, open(probe_image, "rb") as image:
        assert copy.read() == image.read()
    assert int(ctx["hash"], 16) == coprof_stream.image_hash(probe_image)


def test_image_file_is_loaded_by_mapping(copsim, test_bin, probe_image):
    sim = copsim()
    result, (ctx,) = host(test_bin, sim, probe_image, "hello")
    assert ctx["path"] == os.path.realpath(probe_image)
    assert ctx["offset"] == "0" and ctx["anonymous"] == "0"


def test_faults_are_reported_and_copsim_goes_on(copsim, test_bin, build_dir):
    sim = copsim("--slots", "1")
    _, (trap,) = host(test_bin, sim, "embedded", "trap", check=False)
    assert trap["reason"] == "fault" and trap["status"] == "132"
    assert trap["fault"].startswith("cop: trap: illegal instruction at 0x")
    _, (loop,) = host(test_bin, sim, "--cycle-limit", "3000000", "embedded",
                      "loop", check=False)
    assert loop["reason"] == "fault"
    assert loop["fault"] == \
        "looping: stopped after its limit of 3000000 cycles"
    assert int(loop["instructions"]) >= 3000000
    _, (exit7,) = host(test_bin, sim, "embedded", "exit", "7", check=False)
    assert exit7["reason"] == "exit" and exit7["status"] == "7"
    _, (fine,) = host(test_bin, sim, "embedded", "hello")
    assert fine["reason"] == "exit"
    faults = [e for e in sched_events(build_dir, sim.log)
              if e["kind"] == "fault"]
    assert [e["context"] for e in faults] == [int(trap["context"]),
                                             int(loop["context"])]
    assert faults[1]["reason"].startswith("looping")


def test_copsim_limit_stops_a_looping_program(copsim, test_bin):
    sim = copsim("--max-cycles", "2000000")
    _, (loop,) = host(test_bin, sim, "embedded", "loop", check=False)
    assert loop["fault"] == \
        "looping: stopped after its limit of 2000000 cycles"


def test_host_killed_mid_run_is_reaped(copsim, test_bin, build_dir):
    # The process model: the test counts the host's QEMUs, one per context.
    sim = copsim("--context-model=process", "--slots", "2")
    victim = subprocess.Popen([test_bin("cop-host"), "--threads", "3",
                               "--contexts", "3", "embedded", "loop"],
                              env=sim.env, stdout=subprocess.DEVNULL)

    def running():
        events = sched_events(build_dir, sim.log)
        return (sum(e["kind"] == "bind" for e in events) >= 2
                and sum(e["kind"] == "run" for e in events) == 3)
    wait_for(running)
    assert len(sim.emulators()) == 3
    victim.send_signal(signal.SIGKILL)
    victim.wait()

    def reaped():
        events = sched_events(build_dir, sim.log)
        return sum(e["kind"] == "reap" for e in events) == 3 and events
    events = wait_for(reaped)
    check_slot_history(events, 2)
    unbinds = [e["reason"] for e in events if e["kind"] == "unbind"]
    # Both slots were busy when the host died; the third context waited
    # (and may have been bound once more before its hang-up was seen).
    assert set(unbinds) <= {"preempt", "reap"}
    assert 2 <= unbinds.count("reap") <= 3
    assert not [e for e in events if e["kind"] in ("exit", "fault")]
    assert all(e["pid"] == victim.pid for e in events if "pid" in e
               and e["kind"] != "start")
    wait_for(lambda: not sim.emulators())
    _, (after,) = host(test_bin, sim, "embedded", "hello")
    assert after["reason"] == "exit"


def test_missing_emulator_is_a_clear_error(copsim, test_bin, build_dir):
    # The process model: a QEMU starts at each run, so a missing one is a
    # run's error (the slot model's is copsim's start, test_slot_model.py).
    sim = copsim("--context-model=process",
                 "--qemu", "/nonexistent/qemu-system-riscv32")
    result, contexts = host(test_bin, sim, "embedded", "hello", check=False)
    assert result.returncode == 1 and contexts == []
    assert result.stderr == (
        "cop-host: context 0: /nonexistent/qemu-system-riscv32: not found "
        "(install the Debian package qemu-system-misc)\n")
    assert sim.alive()
    errors = [e for e in sched_events(build_dir, sim.log)
              if e["kind"] == "error"]
    assert "not found" in errors[0]["what"]


def test_emulator_that_fails_to_start_is_a_clear_error(copsim, test_bin,
                                                       tmp_path):
    fake = tmp_path / "qemu"
    fake.write_text("#!/bin/sh\necho 'qemu: cannot start today' >&2\nexit 3\n")
    fake.chmod(0o755)
    # The process model: the emulator starts at the run (see above).
    sim = copsim("--context-model=process", "--qemu", str(fake))
    result, _ = host(test_bin, sim, "embedded", "hello", check=False)
    assert result.returncode == 1
    assert "exited with status 3 before the program started: qemu: cannot " \
        "start today" in result.stderr
    _, (ctx,) = host(test_bin, copsim(), "embedded", "hello")
    assert ctx["reason"] == "exit"


def test_full_disk_fails_one_context_not_copsim(copsim, build_dir, test_bin,
                                               tmp_path):
    """Guest RAM files on a 24 MiB tmpfs of copsim's own mount namespace:
    one 16 MiB RAM fits, a second does not; copsim says so and goes on."""
    if os.getuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root (and unshare) for a tmpfs of its own")
    ram = tmp_path / "ram"
    ram.mkdir()
    wrapper = tmp_path / "copsim-on-tmpfs"
    wrapper.write_text('#!/bin/sh\nmount -t tmpfs -o size=24m tmpfs %s && '
                       'exec %s "$@"\n' % (ram, os.path.join(build_dir, "bin",
                                                             "copsim")))
    wrapper.chmod(0o755)
    # The process model: only it keeps guest RAM files in --ram-dir (the
    # slot model's contexts are in memfds).
    sim = copsim("--context-model=process", "--ram-dir", str(ram),
                 "--slots", "2", prefix=["unshare", "-m", str(wrapper)])
    first = subprocess.Popen([test_bin("cop-host"), "--console-file",
                              "/dev/null", "embedded", "spin", "300000000"],
                             env=sim.env, stdout=subprocess.PIPE, text=True)

    def first_runs():
        return any(e["kind"] == "bind"
                   for e in sched_events(build_dir, sim.log))
    wait_for(first_runs)
    result, contexts = host(test_bin, sim, "embedded", "hello", check=False)
    assert result.returncode == 1 and contexts == []
    assert result.stderr == "cop-host: context 0: %s/ram-2: cannot reserve " \
        "16 MiB of guest RAM: No space left on device\n" % ram
    out, _ = first.communicate(timeout=120)
    assert first.returncode == 0
    assert parse_host_lines(out)[0]["reason"] == "exit"
    _, (again,) = host(test_bin, sim, "embedded", "hello")
    assert again["reason"] == "exit"


def test_socket_is_owner_only(copsim):
    sim = copsim()
    assert stat.S_IMODE(os.stat(sim.socket).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.join(sim.dir, "images")).st_mode) \
        == 0o700


def test_other_users_cannot_connect(copsim, test_bin):
    if os.getuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as another user")
    sim = copsim()
    os.chmod(sim.dir, 0o755)    # only the socket's own mode protects it now
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534",
                             "--clear-groups", test_bin("cop-host"),
                             "embedded", "hello"],
                            env=sim.env, capture_output=True, text=True)
    assert result.returncode == 1
    assert "cannot connect to copsim: Permission denied" in result.stderr


def test_second_copsim_on_the_same_socket_is_refused(copsim, build_dir):
    sim = copsim()
    second = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                             "--socket", sim.socket, "--event-log",
                             sim.log + ".2"],
                            capture_output=True, text=True, timeout=30)
    assert second.returncode == 1
    assert second.stderr == "copsim: %s: another copsim serves this socket\n" \
        % sim.socket
    assert sim.alive()


def test_private_copsim_is_started_and_stopped(test_bin, tmp_path):
    env = dict(os.environ)
    env["COPSIM_SOCKET"] = str(tmp_path / "nobody-listens.sock")
    env["COPSIM_EVENT_LOG"] = str(tmp_path / "private.coplog")
    env["TMPDIR"] = str(tmp_path)
    # One thread, so that the two consoles do not interleave on stdout.
    result = subprocess.run([test_bin("cop-host"), "--contexts", "2",
                             "embedded", "hello"],
                            env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("hello from copsim-probe") == 2
    # Nothing is left behind but the event log it was told to write.
    assert sorted(os.listdir(tmp_path)) == ["private.coplog"]
    build_dir = os.path.dirname(os.path.dirname(test_bin("cop-host")))
    events = sched_events(build_dir, env["COPSIM_EVENT_LOG"])
    assert [e["kind"] for e in events][0] == "start"
    assert events[-1]["kind"] == "stop"
    assert not os.path.exists("/proc/%d" % events[0]["pid"])


def test_usage_errors(build_dir):
    copsim_bin = os.path.join(build_dir, "bin", "copsim")
    for args, message in (
            (["--slots", "0"], "--slots: '0' is not a number from 1 to 64"),
            (["--slice", "ten"], "--slice: 'ten' is not a number from 1 to"),
            (["--clock", "fast"], "--clock: 'fast' is not a frequency"),
            (["extra"], "unexpected argument 'extra'")):
        result = subprocess.run([copsim_bin] + args, capture_output=True,
                                text=True)
        assert result.returncode == 2
        assert result.stderr.startswith("copsim: " + message), result.stderr
    assert "--slice CYCLES" in subprocess.run(
        [copsim_bin, "--help"], capture_output=True, text=True).stdout


def run_copsim(build_dir, *args):
    return subprocess.run([os.path.join(build_dir, "bin", "copsim")]
                          + [str(a) for a in args], capture_output=True,
                          text=True, timeout=60)


def test_socket_path_that_is_not_a_socket_is_kept(build_dir, tmp_path):
    """Only a stale socket may be removed: a regular file, a directory or a
    symbolic link at the socket's path stays, and copsim says why."""
    target = tmp_path / "precious"
    target.write_text("data")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(target)
    for name in ("precious", "dir", "link"):
        path = tmp_path / name
        result = run_copsim(build_dir, "--socket", path, "--state-dir",
                            tmp_path / "state", "--event-log",
                            tmp_path / "log")
        assert result.returncode == 1
        assert result.stderr == ("copsim: %s: exists and is not a socket; "
                                 "not removed\n" % path)
        assert os.path.lexists(path)
    assert target.read_text() == "data"


def test_stale_socket_is_replaced(copsim, tmp_path):
    """A socket nobody listens on (its copsim died) is removed and served
    again."""
    path = tmp_path / "stale.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stale.bind(str(path))
    stale.close()
    sim = copsim("--socket", str(path))
    client = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    client.connect(str(path))
    client.close()
    assert sim.alive()


@pytest.mark.parametrize("setup, reason", [
    ("closed", "Bad file descriptor"),
    ("read-only", "open for reading only"),
])
def test_ready_fd_that_cannot_be_written_is_refused(build_dir, tmp_path,
                                                     setup, reason):
    """--ready-fd naming a closed or read-only descriptor: a usage error
    before copsim starts (it used to go on serving, unannounced)."""
    read_end, write_end = os.pipe()
    os.close(write_end)
    fd = read_end if setup == "read-only" else write_end
    try:
        result = subprocess.run(
            [os.path.join(build_dir, "bin", "copsim"), "--socket",
             str(tmp_path / "s.sock"), "--ready-fd", str(fd)],
            pass_fds=(read_end,), capture_output=True, text=True, timeout=60)
    finally:
        os.close(read_end)
    assert result.returncode == 2
    assert result.stderr == "copsim: --ready-fd %d: %s\n" % (fd, reason)
    assert not (tmp_path / "s.sock").exists()


def test_ready_fd_whose_reader_is_gone_stops_copsim(build_dir, tmp_path):
    """The write of "ready" fails (nobody reads the pipe): copsim says so
    and stops instead of serving a client that is not waiting."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [os.path.join(build_dir, "bin", "copsim"), "--socket",
             str(tmp_path / "s.sock"), "--event-log", str(tmp_path / "log"),
             "--ready-fd", str(write_end)],
            pass_fds=(write_end,), capture_output=True, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert result.returncode == 1
    assert result.stderr == "copsim: --ready-fd %d: Broken pipe\n" % write_end
    assert not (tmp_path / "s.sock").exists()


@pytest.mark.parametrize("kind, reason", [
    ("missing", "No such file or directory"),
    ("file", "not a directory"),
])
def test_ram_dir_must_be_a_directory(build_dir, tmp_path, kind, reason):
    ram = tmp_path / "ram"
    if kind == "file":
        ram.write_text("")
    result = run_copsim(build_dir, "--socket", tmp_path / "s.sock",
                        "--event-log", tmp_path / "log", "--ram-dir", ram)
    assert result.returncode == 1
    assert result.stderr == "copsim: --ram-dir %s: %s\n" % (ram, reason)


@pytest.mark.parametrize("images", ["empty", "with a copy"])
def test_private_copsim_that_fails_leaves_the_state_alone(copsim, build_dir,
                                                          images):
    """A --private copsim refused on a socket another copsim serves must not
    touch that copsim's state directory: its image copies, its images
    directory even when empty, its default event log."""
    sim = copsim()
    images_dir = os.path.join(sim.dir, "images")
    kept = os.path.join(images_dir, "kept.elf")
    if images != "empty":
        with open(kept, "w") as f:
            f.write("image")
    default_log = os.path.join(sim.dir, "copsim.coplog")
    with open(default_log, "w") as f:
        f.write("log")
    result = run_copsim(build_dir, "--private", os.getpid(), "--socket",
                        sim.socket)
    assert result.returncode == 1
    assert "another copsim serves this socket" in result.stderr
    assert os.path.isdir(images_dir) and os.path.exists(default_log)
    assert images == "empty" or os.path.exists(kept)
    assert sim.alive()


def test_ram_file_is_never_written_through_a_link(copsim, test_bin,
                                                  tmp_path):
    """A symbolic link planted in --ram-dir under the next RAM file's
    name: copsim removes it and makes its own file; the link's target
    keeps its bytes (it used to be truncated and grown to 16 MiB)."""
    ram = tmp_path / "ram"
    ram.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (ram / "ram-1").symlink_to(victim)
    # The process model: only it writes RAM files in --ram-dir.
    sim = copsim("--context-model=process", "--ram-dir", str(ram))
    _, (ctx,) = host(test_bin, sim, "embedded", "hello")
    assert ctx["reason"] == "exit"
    assert victim.read_text() == "precious"
    assert not os.path.lexists(ram / "ram-1")


def test_private_copsim_that_fails_removes_what_it_made(build_dir,
                                                        tmp_path):
    """... while the directories it made itself go."""
    state = tmp_path / "state"
    result = run_copsim(build_dir, "--private", os.getpid(), "--socket",
                        tmp_path / "s.sock", "--state-dir", state,
                        "--event-log", tmp_path / "log", "--ram-dir",
                        tmp_path / "missing")
    assert result.returncode == 1
    assert not state.exists()
