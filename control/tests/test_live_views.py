"""Views of a live copcontrol session (issue 31): `coprof top` on a pty
shows the functions and quits on q; `copcontrol --serve-pprof` answers
`go tool pprof -top http://127.0.0.1:PORT/debug/pprof/profile?seconds=2`
with the functions sampled during those seconds."""

import os
import pty
import re
import select
import shutil
import signal
import socket
import subprocess
import time

import pytest

from control_support import key, session, wait_for


@pytest.fixture
def live(cenv, tmp_path):
    """A copcontrol session recording a long host-pipeline run, its
    first flush with samples done; stopped at the end."""
    sdir = tmp_path / "live"
    result = cenv.copcontrol("--init")
    assert result.returncode == 0, result.stderr
    result = cenv.copcontrol("--start", "--event=SPU_CYCLES:997",
                             "--session-dir=%s" % sdir)
    assert result.returncode == 0, result.stderr
    consoles = tmp_path / "consoles"
    consoles.mkdir()
    host = subprocess.Popen(
        [os.path.join(cenv.build, "examples", "host-pipeline"),
         "--contexts", "4", "--threads", "2", "--frames", "1", "--rounds",
         "100000", "--console-dir", str(consoles)], env=cenv.env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def samples():
        try:
            with session(sdir) as db:
                return key(db, "stream.samples") or 0
        except Exception:
            return 0
    wait_for(lambda: samples() > 0, "a flush with samples")
    yield sdir
    host.send_signal(signal.SIGTERM)
    host.wait(timeout=60)
    cenv.copcontrol("--stop")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_coprof_top_shows_functions_and_quits(cenv, live):
    master, slave = pty.openpty()
    env = dict(cenv.env, TERM="xterm", LINES="30", COLUMNS="120")
    process = subprocess.Popen([cenv.coprof_path, "top", "-d", str(live)],
                               env=env, stdin=slave, stdout=slave,
                               stderr=slave)
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 60
    while b"(kernels)" not in screen or b"samples/s" not in screen:
        assert time.monotonic() < deadline, screen[-2000:]
        ready, _, _ = select.select([master], [], [], 1)
        if ready:
            screen += os.read(master, 65536)
    os.write(master, b"q")
    assert process.wait(timeout=30) == 0
    os.close(master)
    text = screen.decode("utf-8", "replace")
    assert re.search(r"\w+ \(kernels\)", text), text[-2000:]


def test_coprof_top_help(cenv):
    """coprof top and coprof archive are copreport's, under coprof's name."""
    result = cenv.coprof("top", "--help")
    assert result.returncode == 0 and "live view" in result.stdout
    assert result.stdout.startswith("usage: coprof top "), result.stdout
    result = cenv.coprof("archive", "--help")
    assert result.stdout.startswith("usage: coprof archive "), result.stdout


def test_serve_pprof_to_go_tool_pprof(cenv, live, tmp_path):
    go = shutil.which("go")
    assert go, "go is missing: make deps installs golang-go"
    port = _free_port()
    server = subprocess.Popen(
        [cenv.copcontrol_path, "--serve-pprof=127.0.0.1:%d" % port],
        env=cenv.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        def up():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        wait_for(lambda: server.poll() is None and up(), "the endpoint")
        env = dict(os.environ, HOME=str(tmp_path),
                   PPROF_TMPDIR=str(tmp_path))
        p = subprocess.run(
            [go, "tool", "pprof", "-top",
             "http://127.0.0.1:%d/debug/pprof/profile?seconds=2" % port],
            capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stderr
        assert re.search(r"Duration: 2s", p.stdout + p.stderr), p.stdout
        # the kernels and overlays contexts run for the whole test
        assert re.search(r"\s(matrix_multiply|crc32_bitwise|insertion_sort"
                         r"|crc16_bitwise|count_primes|blur_picture|"
                         r"shell_sort|histogram_median)\b", p.stdout), p.stdout
        totals = re.search(r"of (\d+) total", p.stdout)
        assert totals and int(totals.group(1)) > 0, p.stdout
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)
