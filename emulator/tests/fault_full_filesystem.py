"""Register files and guest RAM files on a full file system (make
check-faults: needs root to mount a tmpfs).

Every tool that creates one of them (coptrace create, copsim's register
file, cop-run --sample-every's private register file in TMPDIR, cop-run
--ram-file) reserves the whole file before mapping it, so a full file
system is one line naming the file and the reason, never a SIGBUS (exit
135) at the first store into a page of a sparse file.  Each test fills a
tmpfs of its own to the last block first, so nothing depends on sizes.
"""

import errno
import os
import subprocess

import pytest

SIGBUS_STATUS = 128 + 7


@pytest.fixture
def full_dir(tmp_path):
    """A directory on a tmpfs with no free block left."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700",
                    "tmpfs", str(mount)], check=True)
    try:
        fill(mount / "filler")
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def fill(path):
    block = b"\0" * 4096
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e


def run(command, **kw):
    return subprocess.run([str(c) for c in command], capture_output=True,
                          text=True, timeout=120, **kw)


def assert_one_line(result, tool, path, what):
    assert result.returncode not in (0, SIGBUS_STATUS, -7), result
    line, = result.stderr.splitlines()
    assert line.startswith("%s: %s" % (tool, path)), line
    assert "cannot reserve" in line and what in line, line
    assert line.endswith(": No space left on device"), line


def test_coptrace_create(coprof_bin, full_dir):
    regs = full_dir / "regs"
    result = run([coprof_bin("coptrace"), "create", regs])
    assert_one_line(result, "coptrace", regs, "register file")
    assert not regs.exists()


def test_copsim_register_file(coprof_bin, full_dir, tmp_path):
    state = full_dir / "state"
    result = run([coprof_bin("copsim"), "--socket", tmp_path / "s.sock",
                  "--state-dir", state, "--event-log", tmp_path / "log"])
    assert_one_line(result, "copsim", state / "copsim.regs", "register file")
    assert not (tmp_path / "s.sock").exists()


def test_cop_run_sample_every_in_tmpdir(coprof_bin, build_dir, full_dir):
    result = run([coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "1000",
                  os.path.join(build_dir, "examples", "kernels.elf")],
                 env=dict(os.environ, TMPDIR=str(full_dir)))
    assert_one_line(result, "cop-run", full_dir, "register file")
    assert os.listdir(full_dir) == ["filler"]


def test_cop_run_ram_file(coprof_bin, build_dir, full_dir):
    ram = full_dir / "ram"
    result = run([coprof_bin("cop-run"), "--ram-file", ram,
                  os.path.join(build_dir, "examples", "kernels.elf")])
    assert_one_line(result, "cop-run", ram, "guest RAM")
