"""copsim's COPSIM_TEST_GATHER=N test hook: the scheduler binds nothing
until N contexts wait in its run queue, so that tests with more contexts
than slots see contexts wait, and preemptions, however the emulators'
starts overlap (daemon/tests/test_copsim_e2e.py and
tests/test_exact_counts.py count on it); a bad value stops copsim at
start with one line."""

import os
import subprocess

import pytest

from copsim_harness import parse_host_lines, sched_events


def gathering_copsim(copsim, build_dir, n, *options):
    return copsim(*options, prefix=("env", "COPSIM_TEST_GATHER=%s" % n,
                                    os.path.join(build_dir, "bin", "copsim")))


def test_nothing_is_bound_until_all_wait(copsim, test_bin, build_dir,
                                         tmp_path):
    sim = gathering_copsim(copsim, build_dir, 3, "--slots", "1", "--slice",
                           "100000")
    result = subprocess.run(
        [test_bin("cop-host"), "--threads", "3", "--contexts", "3",
         "--console-file", str(tmp_path / "console-%d"), "embedded", "spin",
         "20000000"], env=sim.env, capture_output=True, text=True,
        timeout=300)
    assert result.returncode == 0, result.stderr + result.stdout
    contexts = parse_host_lines(result.stdout)
    assert len(contexts) == 3
    events = sched_events(build_dir, sim.log)
    kinds = [e["kind"] for e in events]
    first_bind = kinds.index("bind")
    # every context had asked to run before the first was bound ...
    assert kinds[:first_bind].count("run") == 3, kinds
    # ... so the one slot was shared: every context was preempted
    assert all(int(c["preemptions"]) >= 1 for c in contexts), contexts
    preempted = {e["context"] for e in events if e["kind"] == "preempt"}
    assert preempted == {int(c["context"]) for c in contexts}


@pytest.mark.parametrize("value", ["abc", "0", "-2", "3x"])
def test_bad_value_stops_copsim(build_dir, tmp_path, value):
    env = dict(os.environ, COPSIM_TEST_GATHER=value)
    env.pop("COPSIM_SOCKET", None)
    p = subprocess.run([os.path.join(build_dir, "bin", "copsim"),
                        "--socket", str(tmp_path / "s"), "--state-dir",
                        str(tmp_path), "--event-log",
                        str(tmp_path / "log")],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        "copsim: COPSIM_TEST_GATHER=%s: not a number of contexts" % value]
