"""copsim's files are its user's alone, whatever the umask and however
open the state directory's parent: the register file, the socket, image
copies, the event log and the guest RAM files of --ram-dir."""

import os
import stat
import subprocess

from copsim_harness import wait_for


def loose(top):
    """Every directory and file under top whose mode lets others in."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for path in [dirpath] + [os.path.join(dirpath, n) for n in filenames]:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            if mode & 0o077:
                found[path] = "%04o" % mode
    return found


def test_state_and_ram_files_are_private(copsim, test_bin, tmp_path):
    old = os.umask(0o022)
    try:
        ram = tmp_path / "ram"
        ram.mkdir(mode=0o700)
        state = tmp_path / "state"
        # The process model: only it writes RAM files in --ram-dir.
        sim = copsim("--context-model=process", "--ram-dir", str(ram),
                     "--state-dir", str(state))
        host = subprocess.Popen([test_bin("cop-host"), "anonymous", "loop"],
                                env=sim.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: len(sim.emulators()) == 1)
            assert os.listdir(ram)                  # the context's RAM file
            assert os.listdir(state / "images")     # the anonymous image
            assert "copsim.regs" in os.listdir(state)
            assert loose(ram) == {}
            assert loose(state) == {}
            for path in (sim.socket, sim.log):
                assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600, path
        finally:
            host.kill()
            host.communicate(timeout=60)
    finally:
        os.umask(old)


def test_a_state_directory_others_can_write_is_refused(build_dir, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    result = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                             "--socket", str(shared / "copsim.sock")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr == ("copsim: %s: writable by others (mode 0777): "
                             "refusing to use it\n" % shared)
    assert os.listdir(shared) == []
