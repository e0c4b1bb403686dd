"""libcop under a profiling session, and its private copsim's directory.

Under a session (coprof record's $COPROF_SESSION, or copcontrol's mark in
the socket's directory: control/tests/test_state_safety.py) a copsim that
does not answer or hangs up is an error the host program sees, with one
line from libcop, never a silent private copsim that runs the contexts
unprofiled.  Without a session libcop starts its private copsim in a
folder under $TMPDIR, and that folder goes whatever happens."""

import errno
import os
import resource
import shutil
import signal
import subprocess
import tempfile

import pytest

from copsim_harness import sched_events, wait_for

GONE = "the profiling session's copsim is gone"

CREATE_SOURCE = r"""
#include <libcop.h>
#include <errno.h>
#include <stdio.h>

int main(void)
{
    cop_context_t *ctx;

    errno = 0;
    ctx = cop_context_create();
    printf("created=%d errno=%d error=%s\n", ctx != NULL, errno,
           cop_last_error());
    return ctx != NULL;
}
"""


@pytest.fixture
def tmpdir_short():
    """A TMPDIR short enough for libcop to use (a socket path holds about
    100 bytes: libcop takes /tmp instead of a longer one)."""
    path = tempfile.mkdtemp(prefix="lc-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def host_env(tmp_path, tmpdir, **extra):
    """cop-host's environment: no copsim on its socket, TMPDIR its own."""
    env = dict(os.environ, COPSIM_SOCKET=str(tmp_path / "nobody.sock"),
               COPSIM_EVENT_LOG=str(tmp_path / "private.coplog"),
               TMPDIR=tmpdir)
    env.pop("COPROF_SESSION", None)
    env.update(extra)
    return env, tmpdir


def libcop_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("libcop: ")]


def test_no_private_copsim_under_a_coprof_session(test_bin, tmp_path,
                                                  tmpdir_short):
    env, tmpdir = host_env(tmp_path, tmpdir_short,
                           COPROF_SESSION=str(tmp_path / "s"))
    result = subprocess.run([test_bin("cop-host"), "--contexts", "2",
                             "embedded", "exit", "0"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = libcop_lines(result.stderr)
    assert len(lines) == 2, result.stderr       # one per context create
    assert GONE in lines[0] and env["COPSIM_SOCKET"] in lines[0]
    assert "COPROF_SESSION" in lines[0]
    assert "context=" not in result.stdout      # nothing ran unprofiled
    assert os.listdir(tmpdir) == []             # no private copsim


def test_create_under_a_session_sets_errno(build_dir, tmp_path,
                                           tmpdir_short):
    """What a host program sees: NULL, errno, cop_last_error()."""
    env, tmpdir = host_env(tmp_path, tmpdir_short,
                           COPROF_SESSION=str(tmp_path / "s"),
                           PKG_CONFIG_PATH=os.path.join(build_dir, "lib",
                                                        "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libcop"],
                           env=env, capture_output=True, text=True,
                           check=True)
    source = tmp_path / "create.c"
    source.write_text(CREATE_SOURCE)
    program = tmp_path / "create"
    subprocess.run(["gcc", str(source), "-o", str(program)]
                   + flags.stdout.split(), check=True)
    result = subprocess.run([str(program)], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("created=0 errno=%d error=%s"
                                    % (errno.ENOENT, env["COPSIM_SOCKET"]))
    assert GONE in result.stdout
    assert len(libcop_lines(result.stderr)) == 1, result.stderr
    assert os.listdir(tmpdir) == []


def test_copsim_gone_mid_run_under_a_session(copsim, test_bin, tmp_path,
                                             build_dir):
    sim = copsim()
    env = dict(sim.env, COPROF_SESSION=str(tmp_path / "s"))
    host = subprocess.Popen([test_bin("cop-host"), "embedded", "loop"],
                            env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: any(e["kind"] == "bind"
                         for e in sched_events(build_dir, sim.log)))
    sim.process.send_signal(signal.SIGKILL)
    assert sim.process.wait(timeout=30) == -signal.SIGKILL
    out, err = host.communicate(timeout=60)
    assert host.returncode == 1
    lines = libcop_lines(err)
    assert len(lines) == 1 and GONE in lines[0], err
    assert "Connection reset by peer" in lines[0]
    assert "cop-host: context 0: " + lines[0][len("libcop: "):] in err


def test_a_private_copsim_that_died_starting_leaves_nothing(test_bin,
                                                             tmp_path,
                                                             tmpdir_short):
    """A private copsim killed while it set up (SIGXFSZ: its register file
    exceeds the file size limit) left its files; libcop removes them, for
    each context that tried."""
    env, tmpdir = host_env(tmp_path, tmpdir_short)

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    result = subprocess.run([test_bin("cop-host"), "--contexts", "3",
                             "embedded", "exit", "0"], env=env,
                            capture_output=True, text=True, timeout=120,
                            preexec_fn=small_files)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.count("the private copsim did not start") == 3
    assert os.listdir(tmpdir) == []


def test_a_private_copsim_leaves_nothing_after_a_run(test_bin, tmp_path,
                                                     tmpdir_short):
    env, tmpdir = host_env(tmp_path, tmpdir_short)
    result = subprocess.run([test_bin("cop-host"), "--contexts", "3",
                             "--threads", "3", "embedded", "exit", "0"],
                            env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("context=") == 3
    assert os.listdir(tmpdir) == []


def test_a_host_that_blocks_sigterm_still_ends_its_private_copsim(
        test_bin, tmp_path, tmpdir_short):
    """A host program that blocks the ending signals (for a thread that
    waits for them, as examples/host-pipeline does) spawns its private
    copsim with none blocked: libcop's SIGTERM at exit ends it, and the
    program does not wait for ever (it did: copsim inherited the block)."""
    env, tmpdir = host_env(tmp_path, tmpdir_short)

    def block_ending_signals():
        signal.pthread_sigmask(signal.SIG_BLOCK, {
            signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT})

    result = subprocess.run([test_bin("cop-host"), "--contexts", "2",
                             "--threads", "2", "embedded", "exit", "0"],
                            env=env, capture_output=True, text=True,
                            preexec_fn=block_ending_signals, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("context=") == 2
    assert os.listdir(tmpdir) == []


def test_copsim_one_command_mode_marks_a_session(build_dir, tmp_path):
    """copsim --event ... -- COMMAND profiles COMMAND: its libcop must know
    (COPROF_SESSION), so that a copsim gone is an error there too."""
    env = dict(os.environ)
    env.pop("COPROF_SESSION", None)
    result = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                             "--event=SPU_CYCLES:100000", "--stream-out",
                             str(tmp_path / "stream"), "--", "sh", "-c",
                             'printf "%s|%s" "$COPROF_SESSION" '
                             '"$COPSIM_SOCKET"'],
                            env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    session, socket = result.stdout.split("|")
    assert session and session == socket


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to uid 65534 needs root")
def test_a_socket_directory_of_another_user_is_refused(test_bin, tmp_path,
                                                       tmpdir_short):
    """Not a reason to start a private copsim either: the user asked for
    that socket, and someone else controls it."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    env, tmpdir = host_env(tmp_path, tmpdir_short,
                           COPSIM_SOCKET=str(theirs / "copsim.sock"))
    result = subprocess.run([test_bin("cop-host"), "embedded", "exit", "0"],
                            env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 1
    assert result.stderr == ("cop-host: context 0: %s: owned by uid 65534, "
                             "not by this user (uid 0): refusing to use it\n"
                             % theirs)
    assert os.listdir(tmpdir) == []
