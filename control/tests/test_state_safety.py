"""copcontrol's state directory against another user of the machine: a
directory someone else made first, symlinks planted in it, a socket served
by another uid, and the modes of every file copcontrol, copsim and coprofd
create there and in the session.

"Another user" is uid 65534 (nobody): tests that need to chown to it or
run a server as it need root and are skipped otherwise."""

import os
import signal
import socket
import stat

import pytest

from control_support import one_error_line, wait_gone

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="chown/setuid to another uid needs root")


def run_dir(cenv):
    """The state directory: the socket's."""
    return os.path.dirname(cenv.socket)


def plant(cenv, tmp_path, names):
    """The state directory made 0700 by this user, with each name a symlink
    to a victim file; returns the victim's path."""
    run = run_dir(cenv)
    os.mkdir(run, 0o700)
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    for name in names:
        os.symlink(victim, os.path.join(run, name))
    return victim


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_settings_never_written_through_a_symlink(cenv, tmp_path):
    victim = plant(cenv, tmp_path, ["copcontrol.conf.new"])
    result = cenv.copcontrol("--event=SPU_CYCLES:100000")
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious\n"
    conf = cenv.state_file("copcontrol.conf")
    assert not os.path.islink(conf) and mode(conf) == 0o600
    assert "event=SPU_CYCLES:100000" in open(conf).read()


def test_logs_and_pid_files_never_written_through_a_symlink(cenv, tmp_path):
    victim = plant(cenv, tmp_path, ["copsim.log"])
    line = one_error_line(cenv.copcontrol("--init"), "copcontrol", 1)
    assert cenv.state_file("copsim.log") in line
    assert "symbolic link" in line
    assert victim.read_text() == "precious\n"

    os.unlink(cenv.state_file("copsim.log"))
    os.symlink(victim, cenv.state_file("copsim.pid"))
    result = cenv.copcontrol("--init")
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "precious\n"
    pidfile = cenv.state_file("copsim.pid")
    assert not os.path.islink(pidfile) and mode(pidfile) == 0o600


def test_a_state_directory_symlink_is_refused(cenv, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    os.symlink(elsewhere, run_dir(cenv))
    line = one_error_line(cenv.copcontrol("--status"), "copcontrol", 1)
    assert run_dir(cenv) in line and "symbolic link" in line
    assert os.listdir(elsewhere) == []


def test_a_state_directory_others_can_write_is_refused(cenv, tmp_path):
    victim = plant(cenv, tmp_path, ["copcontrol.conf.new", "copsim.log"])
    os.chmod(run_dir(cenv), 0o777)
    line = one_error_line(cenv.copcontrol("--event=SPU_CYCLES:100000"),
                          "copcontrol", 1)
    assert run_dir(cenv) in line and "writable by others" in line
    assert victim.read_text() == "precious\n"


@needs_root
def test_a_state_directory_of_another_user_is_refused(cenv, tmp_path):
    victim = plant(cenv, tmp_path, ["copcontrol.conf.new", "copsim.log",
                                     "copsim.pid", "coprofd.pid"])
    os.chown(run_dir(cenv), NOBODY, NOBODY)
    for action in ("--init", "--status", "--event=SPU_CYCLES:100000"):
        line = one_error_line(cenv.copcontrol(action), "copcontrol", 1)
        assert run_dir(cenv) in line, action
        assert "owned by uid %d" % NOBODY in line, action
    assert victim.read_text() == "precious\n"


def impostor(path):
    """A SOCK_SEQPACKET server on path that runs as nobody, in a child
    process: returns (pid, a pipe) on which it writes, for each connection,
    the size of the first message the client sent (0: it hung up without
    sending anything), and hangs up."""
    ready_r, ready_w = os.pipe()
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(ready_r)
            os.close(report_r)
            server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            server.bind(path)
            os.chmod(path, 0o666)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            server.listen(8)        # SO_PEERCRED: the uid at listen()
            os.write(ready_w, b"r")
            while True:
                conn, _ = server.accept()
                got = len(conn.recv(65536))
                conn.close()
                os.write(report_w, b"%d\n" % got)
        finally:
            os._exit(0)
    os.close(ready_w)
    os.close(report_w)
    assert os.read(ready_r, 1) == b"r"
    os.close(ready_r)
    return pid, report_r


@needs_root
def test_a_socket_served_by_another_uid_gets_nothing(cenv, tmp_path):
    os.mkdir(run_dir(cenv), 0o700)
    pid, report = impostor(cenv.socket)
    try:
        line = one_error_line(cenv.copcontrol("--status"), "copcontrol", 1)
        assert "served by uid %d" % NOBODY in line and cenv.socket in line
        assert os.read(report, 64) == b"0\n"    # it heard nothing

        cop_host = os.path.join(cenv.build, "tests", "cop-host")
        result = cenv.run(cop_host, ["exit", "0"])
        assert result.returncode != 0
        assert "served by uid %d" % NOBODY in result.stderr
        assert os.read(report, 64) == b"0\n"
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(report)


def private_tree(top):
    """Every directory and file under top whose mode lets others in."""
    loose = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for path in [dirpath] + [os.path.join(dirpath, n) for n in filenames]:
            if mode(path) & 0o077:
                loose[path] = "%04o" % mode(path)
    return loose


def test_every_file_is_private(cenv, tmp_path):
    """With a umask that would let everyone read, the state directory, the
    session and every file in them are the user's alone."""
    old = os.umask(0o022)
    try:
        sdir = tmp_path / "s"
        result = cenv.copcontrol("--start", "--event=SPU_CYCLES:100000",
                                 "--session-dir=%s" % sdir)
        assert result.returncode == 0, result.stderr
        host = cenv.host_pipeline()
        assert host.returncode == 0, host.stderr
        result = cenv.copcontrol("--dump")
        assert result.returncode == 0, result.stderr
        run = run_dir(cenv)
        names = set(os.listdir(run))
        assert {"copcontrol.conf", "copsim.pid", "copsim.log", "coprofd.pid",
                "coprofd.log", "copsim.regs", "copsim.coplog",
                "copsim.sock"} <= names
        session = set(os.listdir(sdir))
        assert {"session.db", "session.db-wal", "images"} <= session
        images = os.listdir(sdir / "images")
        assert images
        assert private_tree(run) == {}
        assert private_tree(sdir) == {}
        assert mode(cenv.state_file("copsim.sock")) == 0o600
        assert cenv.copcontrol("--stop").returncode == 0
    finally:
        os.umask(old)



def test_coprof_record_session_is_private(cenv, tmp_path):
    old = os.umask(0o022)
    try:
        out = tmp_path / "rec"
        result = cenv.coprof("record", "-o", str(out), "--",
                             os.path.join(cenv.build, "examples",
                                          "host-pipeline"),
                             "--contexts", "2", "--frames", "1")
        assert result.returncode == 0, result.stderr
        assert {"session.db", "images", "events.coplog",
                "coprofd.log"} <= set(os.listdir(out))
        assert mode(out) == 0o700
        assert private_tree(out) == {}
    finally:
        os.umask(old)


def test_libcop_never_runs_unprofiled_under_copcontrol(cenv, tmp_path):
    """copsim killed during a copcontrol session: the host program's
    contexts fail, one line from libcop, instead of running on a private
    copsim nobody profiles."""
    result = cenv.copcontrol("--start", "--session-dir=%s" % (tmp_path / "s"))
    assert result.returncode == 0, result.stderr
    copsim = cenv.pid("copsim.pid")
    host = cenv.pid("coprof-host.pid")
    os.kill(copsim, signal.SIGKILL)
    assert wait_gone(copsim)
    # coprof-host follows that copsim: it stores what it has and ends
    assert host and wait_gone(host)
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    cenv.env["TMPDIR"] = str(tmpdir)
    host = cenv.host_pipeline()
    assert host.returncode != 0, host.stdout
    lines = [l for l in host.stderr.splitlines() if l.startswith("libcop: ")]
    assert lines, host.stderr
    assert "the profiling session's copsim is gone" in lines[0]
    assert cenv.state_file("coprofd.pid") in lines[0]
    assert os.listdir(tmpdir) == []             # no private copsim
