"""The session directory a user names, against another local user (issue
32, item 3; common/safe-file.h's rule, safe_dir_make()).

`coprof record -o DIR` and `coprofd --session-dir DIR` (and copcontrol
--session-dir, which prepares DIR with the same session_prepare() as
coprof record) refuse a DIR of another user's, and a path through a link
another user planted, with one line naming it; leave an empty DIR of the
user's 0700, not 0777; and create only DIR itself: a missing parent is a
one-line error naming it, and nothing is made.  The tests with another
user (nobody) run as root, as in CI.
"""

import os
import stat
import subprocess

import pytest

NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to "
                                "make files of another user (nobody)")


def record(coprof_bin, out):
    env = dict(os.environ)
    env.pop("COPSIM_SOCKET", None)
    return subprocess.run([coprof_bin("coprof"), "record", "-o", str(out),
                           "--", "true"], capture_output=True, text=True,
                          timeout=120, env=env, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def stream(tmp_path_factory, coprof_bin):
    """A small recorded stream for coprofd --replay."""
    out = tmp_path_factory.mktemp("stream") / "stream"
    env = dict(os.environ)
    env.pop("COPSIM_SOCKET", None)
    p = subprocess.run([coprof_bin("copsim"), "--event=SPU_CYCLES:997",
                        "--stream-out", str(out), "--", "true"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    return str(out)


def replay(coprof_bin, stream, out):
    return subprocess.run([coprof_bin("coprofd"), "--replay", stream,
                           "--session-dir", str(out), "--quiet"],
                          capture_output=True, text=True, timeout=120)


def tools(coprof_bin, stream):
    return {"coprof record": lambda out: record(coprof_bin, out),
            "coprofd": lambda out: replay(coprof_bin, stream, out)}


def refused(p, *words):
    assert p.returncode != 0, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], p.stderr
    return lines[0]


@pytest.mark.parametrize("tool", ["coprof record", "coprofd"])
def test_a_missing_parent_is_not_created(tool, coprof_bin, stream,
                                         tmp_path):
    p = tools(coprof_bin, stream)[tool](tmp_path / "a" / "b" / "s")
    refused(p, str(tmp_path / "a"), "no such directory")
    assert os.listdir(str(tmp_path)) == []


@pytest.mark.parametrize("tool", ["coprof record", "coprofd"])
def test_an_empty_own_directory_is_made_private(tool, coprof_bin, stream,
                                                tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    os.chmod(str(d), 0o777)
    p = tools(coprof_bin, stream)[tool](d)
    assert p.returncode in (0, 1), p.stderr     # true runs no context
    assert os.path.isfile(str(d / "session.db")), p.stderr
    assert stat.S_IMODE(os.stat(str(d)).st_mode) == 0o700


@needs_root
@pytest.mark.parametrize("tool", ["coprof record", "coprofd"])
def test_another_users_directory_is_refused(tool, coprof_bin, stream,
                                            tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    os.chmod(str(d), 0o777)
    os.chown(str(d), NOBODY, NOBODY)
    p = tools(coprof_bin, stream)[tool](d)
    refused(p, str(d), "owned by uid %d" % NOBODY)
    assert os.listdir(str(d)) == []
    assert stat.S_IMODE(os.stat(str(d)).st_mode) == 0o777


@needs_root
@pytest.mark.parametrize("tool", ["coprof record", "coprofd"])
def test_a_planted_parent_link_is_not_followed(tool, coprof_bin, stream,
                                               tmp_path):
    pub = tmp_path / "pub"
    pub.mkdir()
    os.chown(str(pub), NOBODY, NOBODY)
    target = tmp_path / "roots"
    target.mkdir()
    os.symlink(str(target), str(pub / "parent"))
    os.lchown(str(pub / "parent"), NOBODY, NOBODY)
    p = tools(coprof_bin, stream)[tool](pub / "parent" / "sess")
    refused(p, str(pub / "parent"), "refusing to follow it")
    assert os.listdir(str(target)) == []
