"""libcop as a host program's library: built out of tree through its
pkg-config file, and the private copsim it starts when none answers."""

import os
import re
import signal
import subprocess

import pytest

from copsim_harness import SOURCE, sched_events, wait_for

HOST_SOURCE = r"""
#include <libcop.h>
#include <stdio.h>

extern const cop_program_handle_t probe;

int main(void)
{
    cop_context_t *ctx = cop_context_create();
    struct cop_stop_info stop;
    char *argv[] = {"probe", "exit", "42", NULL};

    if (!ctx || cop_context_load(ctx, &probe) < 0
        || cop_context_run(ctx, 3, argv, &stop) < 0) {
        fprintf(stderr, "%s\n", cop_last_error());
        return 1;
    }
    printf("reason=%d status=%d\n", stop.reason, stop.status);
    return cop_context_destroy(ctx) < 0;
}
"""


def private_env(tmp_path):
    """An environment in which no copsim answers, so libcop starts one."""
    env = dict(os.environ)
    env["COPSIM_SOCKET"] = str(tmp_path / "nobody-listens.sock")
    env["COPSIM_EVENT_LOG"] = str(tmp_path / "private.coplog")
    env["TMPDIR"] = str(tmp_path)
    return env


def test_pkg_config_builds_a_host_program(build_dir, probe_image, tmp_path):
    env = private_env(tmp_path / "run")
    os.mkdir(tmp_path / "run")
    env["PKG_CONFIG_PATH"] = os.path.join(build_dir, "lib", "pkgconfig")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libcop"],
                           env=env, capture_output=True, text=True, check=True)
    source = tmp_path / "host.c"
    source.write_text(HOST_SOURCE)
    embedded = tmp_path / "probe.o"
    subprocess.run([os.path.join(build_dir, "bin", "cop-embed"), probe_image,
                    "probe", str(embedded)], check=True)
    program = tmp_path / "host"
    subprocess.run(["gcc", str(source), str(embedded), "-o", str(program)]
                   + flags.stdout.split(), check=True)
    result = subprocess.run([str(program)], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "reason=1 status=42\n"


def test_installed_library_builds_through_pkg_config(tmp_path):
    dest = tmp_path / "root"
    subprocess.run(["make", "-s", "install", "PREFIX=/opt/libcop-test",
                    "DESTDIR=%s" % dest], cwd=SOURCE, check=True,
                   capture_output=True, timeout=600)
    env = dict(os.environ)
    env["PKG_CONFIG_PATH"] = str(dest / "opt/libcop-test/lib/pkgconfig")
    env["PKG_CONFIG_SYSROOT_DIR"] = str(dest)
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libcop"],
                           env=env, capture_output=True, text=True, check=True)
    assert flags.stdout.split()[:2] == [
        "-I%s/opt/libcop-test/include/coprof/sdk" % dest,
        "-L%s/opt/libcop-test/lib/coprof" % dest]
    source = tmp_path / "host.c"
    # Linked only, never run: a handle of its own instead of an embedding.
    source.write_text(HOST_SOURCE.replace("extern const", "const"))
    subprocess.run(["gcc", str(source), "-o", str(tmp_path / "host")]
                   + flags.stdout.split(), check=True)


def test_private_copsim_follows_a_killed_host(test_bin, build_dir, tmp_path):
    env = private_env(tmp_path)
    victim = subprocess.Popen([test_bin("cop-host"), "--threads", "2",
                               "--contexts", "2", "embedded", "loop"],
                              env=env, stdout=subprocess.DEVNULL)
    log = env["COPSIM_EVENT_LOG"]

    def both_bound():
        events = (sched_events(build_dir, log) if os.path.exists(log)
                  else [])
        return sum(e["kind"] == "bind" for e in events) == 2 and events
    events = wait_for(both_bound)
    private_pid = events[0]["pid"]
    with open("/proc/%d/task/%d/children" % (private_pid, private_pid)) as f:
        emulators = [int(pid) for pid in f.read().split()]
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    # copsim sees its parent die, kills the emulators, removes its files.
    wait_for(lambda: not os.path.exists("/proc/%d" % private_pid))
    for pid in emulators:
        assert not os.path.exists("/proc/%d" % pid)
    assert sorted(os.listdir(tmp_path)) == ["private.coplog"]
    events = sched_events(build_dir, log)
    assert [e["kind"] for e in events][-1] == "stop"
    assert sum(e["kind"] == "reap" for e in events) == 2


def test_copsim_gone_mid_run_is_an_error(copsim, test_bin, build_dir):
    sim = copsim()
    host = subprocess.Popen([test_bin("cop-host"), "embedded", "loop"],
                            env=sim.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: any(e["kind"] == "bind"
                         for e in sched_events(build_dir, sim.log)))
    sim.process.send_signal(signal.SIGTERM)
    out, err = host.communicate(timeout=60)
    assert host.returncode == 1
    assert err == "cop-host: context 0: copsim: hung up (did it stop?)\n"
    assert sim.process.wait(timeout=30) == 0


@pytest.mark.parametrize("source", ["embedded", "library"])
def test_console_defaults_to_stdout(copsim, test_bin, source):
    sim = copsim()
    result = subprocess.run([test_bin("cop-host"), source, "hello"],
                            env=sim.env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == "hello from copsim-probe"


def test_cop_host_times_each_round_trip(copsim, test_bin):
    # bench/copsim's round trip: cop-host --time says, after each
    # context's line, how long its create, load, run and destroy took in
    # the one host process, a context after the other.
    sim = copsim()
    result = subprocess.run([test_bin("cop-host"), "--time", "--contexts",
                             "3", "--console-file", "/dev/null", "embedded",
                             "hello"], env=sim.env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[1] for line in lines[1::2]] == \
        ["index=0", "index=1", "index=2"]
    for context, trip in zip(lines[0::2], lines[1::2]):
        assert context.startswith("context=") and " status=0 " in context
        assert re.fullmatch(r"round-trip index=\d+ us=[1-9]\d*", trip)
