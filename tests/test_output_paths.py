"""Every C tool's output a user names, against another local user (issue
32, item 2; common/safe-file.h's rule, safe_out_open()).

For each of `copsim --stream-out`, `cop-run -r/-o/--reasons-out/-e/-c`,
`cop-embed`, `copstream encode -o`, `coptrace run
--samples-out/--exact-counts` and `copsim --exact-counts DIR`:
a symbolic link of nobody's planted at the name, or as a parent directory
of it, in a directory nobody owns (the issue's /tmp/pub) is refused with
one line naming it, and the file it points to is left as it was.  A
stream that copsim writes is 0600, like the session it is replayed into.
The tests that need another user run as root (as in CI).
"""

import os
import signal
import stat
import subprocess
import time

import pytest

NOBODY = 65534

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to "
                                "make files of another user (nobody)")


def image(build_dir):
    p = os.path.join(build_dir, "examples", "kernels.elf")
    if not os.path.isfile(p):
        pytest.fail("%s is not built: run make" % p)
    return p


# name -> argv with "OUT" where the output goes
def commands(coprof_bin, build_dir, tmp_path):
    text = tmp_path / "stream.txt"
    text.write_text("")
    img = image(build_dir)
    return {
        "copsim --stream-out": [coprof_bin("copsim"), "--event=SPU_CYCLES:997",
                                "--stream-out", "OUT", "--", "true"],
        "cop-run -r": [coprof_bin("cop-run"), "-r", "OUT", img],
        "cop-run -o": [coprof_bin("cop-run"), "--sample-every", "1000",
                       "-o", "OUT", img],
        "cop-run --reasons-out": [coprof_bin("cop-run"), "--sample-every",
                                  "1000", "--reasons-out", "OUT", img],
        "cop-run -e": [coprof_bin("cop-run"), "--sample-every", "1000",
                       "-e", "OUT", img],
        "cop-run -c": [coprof_bin("cop-run"), "--sample-every", "1000",
                       "-c", "OUT", img],
        "cop-embed": [coprof_bin("cop-embed"), img, "handle", "OUT"],
        "copstream encode": [coprof_bin("copstream"), "encode", "-o", "OUT",
                             str(text)],
        "coptrace --samples-out": [coprof_bin("coptrace"), "run",
                                   "--sample-every", "100", "--samples-out",
                                   "OUT", "--", "true"],
        "coptrace --exact-counts": [coprof_bin("coptrace"), "run",
                                    "--sample-every", "100", "--exact-counts",
                                    "OUT", "--", "true"],
        "copsim --exact-counts": [coprof_bin("copsim"),
                                  "--event=SPU_CYCLES:997", "--stream-out",
                                  str(tmp_path / "counted-stream"),
                                  "--exact-counts", "OUT", "--",
                                  cop_host(build_dir), img],
    }


def cop_host(build_dir):
    p = os.path.join(build_dir, "tests", "cop-host")
    if not os.path.isfile(p):
        pytest.fail("%s is not built: run make" % p)
    return p


TOOLS = ["copsim --stream-out", "cop-run -r", "cop-run -o",
         "cop-run --reasons-out", "cop-run -e",
         "cop-run -c", "cop-embed", "copstream encode",
         "coptrace --samples-out", "coptrace --exact-counts",
         "copsim --exact-counts"]
FOLDERS = {"copsim --exact-counts"}     # the output is a directory


def run(argv, out):
    env = dict(os.environ)
    env.pop("COPSIM_SOCKET", None)
    return subprocess.run([str(out) if a == "OUT" else a for a in argv],
                          capture_output=True, text=True, timeout=120,
                          env=env, stdin=subprocess.DEVNULL)


@pytest.fixture
def pub(tmp_path):
    """A directory of nobody's, and a file and a folder of root's."""
    d = tmp_path / "pub"
    d.mkdir()
    os.chown(str(d), NOBODY, NOBODY)
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    folder = tmp_path / "roots"
    folder.mkdir()
    return d, victim, folder


def plant(link, target):
    os.symlink(str(target), str(link))
    os.lchown(str(link), NOBODY, NOBODY)


@needs_root
@pytest.mark.parametrize("tool", TOOLS)
def test_a_planted_link_is_not_written_through(tool, coprof_bin, build_dir,
                                               tmp_path, pub):
    d, victim, _ = pub
    plant(d / "out", victim)
    p = run(commands(coprof_bin, build_dir, tmp_path)[tool], d / "out")
    assert p.returncode != 0, p.stderr
    # a file's name: replaced, never written through, unless the link is
    # ours; a folder's (safe_dir_make): no link used at all
    why = "refusing to use it" if tool in FOLDERS else "uid %d" % NOBODY
    assert why in p.stderr and str(d / "out") in p.stderr, p.stderr
    assert victim.read_text() == "root's file\n"


@needs_root
@pytest.mark.parametrize("tool", TOOLS)
def test_a_planted_parent_is_not_followed(tool, coprof_bin, build_dir,
                                          tmp_path, pub):
    d, _, folder = pub
    plant(d / "parent", folder)
    p = run(commands(coprof_bin, build_dir, tmp_path)[tool],
            d / "parent" / "out")
    assert p.returncode != 0, p.stderr
    assert "refusing to follow it" in p.stderr, p.stderr
    assert os.listdir(str(folder)) == []


def test_copsim_stream_is_private(coprof_bin, build_dir, tmp_path):
    out = tmp_path / "stream"
    out.write_text("an older recording\n")
    os.chmod(str(out), 0o644)
    p = run(commands(coprof_bin, build_dir, tmp_path)["copsim --stream-out"],
            out)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(str(out)).st_mode) == 0o600
    assert out.read_bytes() != b"an older recording\n"
    assert sorted(os.listdir(str(tmp_path))) == ["stream", "stream.txt"]


def test_cop_embed_replaces_the_file_not_its_other_links(
        coprof_bin, build_dir, tmp_path):
    out = tmp_path / "k.o"
    out.write_text("old\n")
    os.link(str(out), str(tmp_path / "other"))
    p = run(commands(coprof_bin, build_dir, tmp_path)["cop-embed"], out)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "other").read_text() == "old\n"
    assert out.read_bytes()[:4] == b"\x7fELF"


def test_cop_run_writes_a_file_opened_first(coprof_bin, build_dir, tmp_path):
    """A reader holding the user's own output file open (a temporary file
    handed to cop-run) reads what cop-run wrote: the file is written in
    place, not replaced."""
    out = tmp_path / "samples"
    out.write_text("")
    with open(str(out)) as reader:
        p = run(commands(coprof_bin, build_dir, tmp_path)["cop-run -o"], out)
        assert p.returncode == 0, p.stderr
        assert reader.read().split(), "cop-run's samples"


@needs_root
def test_copsim_counts_do_not_go_through_a_planted_folder(coprof_bin,
                                                          build_dir,
                                                          tmp_path, pub):
    # The audit's repro: nobody's link `counts -> a folder of root's` in a
    # public directory; root's copsim --exact-counts wrote the folder.
    d, _, folder = pub
    plant(d / "counts", folder)
    p = run(commands(coprof_bin, build_dir, tmp_path)["copsim --exact-counts"],
            d / "counts")
    assert p.returncode != 0, p.stderr
    assert "--exact-counts" in p.stderr and "refusing" in p.stderr, p.stderr
    assert os.listdir(str(folder)) == []


def test_copsim_counts_are_private(coprof_bin, build_dir, tmp_path):
    out = tmp_path / "counts"
    p = run(commands(coprof_bin, build_dir, tmp_path)["copsim --exact-counts"],
            out)
    assert p.returncode == 0, p.stderr
    assert stat.S_IMODE(os.stat(str(out)).st_mode) == 0o700
    files = os.listdir(str(out))
    assert files == ["context-1.counts"], files
    assert stat.S_IMODE(os.stat(str(out / files[0])).st_mode) == 0o600
    assert os.path.getsize(str(out / files[0])) > 0


def stopped(pid):
    """Whether pid stopped itself (SIGSTOP at a test point: state T)."""
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_hard_link_swapped_in_after_the_check_is_not_written(
        coprof_bin, build_dir, tmp_path):
    """safe_out_open() writes the user's own file with one link in place;
    when a hard link to another file is swapped in at the name between
    that check and the open (the test point safe-out-in-place), the
    opened file's link count says so, and the name is replaced: the other
    file is not emptied or written."""
    out = tmp_path / "encoded"
    out.write_text("an older stream\n")
    victim = tmp_path / "victim"
    victim.write_text("another file of the user's\n")
    argv = commands(coprof_bin, build_dir, tmp_path)["copstream encode"]
    env = dict(os.environ, COPROF_TEST_PAUSE="safe-out-in-place")
    p = subprocess.Popen([str(out) if a == "OUT" else a for a in argv],
                         env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, process_group=0)
    try:
        deadline = time.monotonic() + 60
        while not stopped(p.pid):
            assert p.poll() is None, "copstream ended before its test point"
            assert time.monotonic() < deadline, "no stop at the test point"
            time.sleep(0.01)
        os.unlink(str(out))
        os.link(str(victim), str(out))
        os.kill(p.pid, signal.SIGCONT)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert victim.read_text() == "another file of the user's\n"
    st = os.stat(str(out))
    assert st.st_ino != os.stat(str(victim)).st_ino and st.st_nlink == 1
