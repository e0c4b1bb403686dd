"""tests/runner.py itself: run on a tiny failing pytest file and a tiny
failing TAP program (GLib's --tap output, one assertion that fails and one
that aborts), its own output names every failed test with its reason, a
bounded number of lines each, and still ends with "N passed, N failed"."""

import os
import subprocess

import pytest

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")

TAP_PROGRAM = """\
#!/bin/sh
echo "# random seed: R02S1"
echo "1..3"
echo "# Start of suite tests"
echo "ok 1 /suite/good"
echo "# ERROR:t.c:42:bad: assertion failed (x == 2): (1 == 2)"
echo "not ok 2 /suite/bad"
echo "# End of suite tests"
echo "Bail out! ERROR:t.c:50:crash: assertion failed: (p != NULL)"
kill -ABRT $$
"""

PYTEST_FILE = """\
def test_good():
    pass


def test_bad():
    x = 1
    assert x == 2, "x went wrong"


def test_many_lines():
    raise AssertionError("\\n".join("line %d" % i for i in range(100)))


def test_wide():
    raise AssertionError("w" * 5000)


def test_setup_error(no_such_fixture):
    pass
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("runner")
    tap = work / "tap-test"
    tap.write_text(TAP_PROGRAM)
    tap.chmod(0o755)
    tiny = work / "test_tiny.py"
    tiny.write_text(PYTEST_FILE)
    p = subprocess.run(["/usr/bin/python3", RUNNER, "--build",
                        str(work / "build"), "--gtest", str(tap),
                        "--pytest", str(tiny)], cwd=str(work),
                       capture_output=True, text=True, timeout=300)
    return p


def reasons(output):
    """{FAILED name: [reason lines]} from the runner's output."""
    out, current = {}, None
    for line in output.splitlines():
        if line.startswith("FAILED "):
            current = out.setdefault(line[len("FAILED "):], [])
        elif line.startswith("    ") and current is not None:
            current.append(line[4:])
        else:
            current = None
    return out


def test_summary_counts_every_result(run):
    assert run.returncode == 1
    # tap: 1 ok, 1 not ok, 1 never reported; pytest: 1 passed, 4 failed
    assert run.stdout.splitlines()[-1] == "2 passed, 6 failed"


def test_gtest_failures_show_their_lines(run):
    r = reasons(run.stdout)
    assert r["tap-test:2 /suite/bad"] == [
        "# ERROR:t.c:42:bad: assertion failed (x == 2): (1 == 2)"]
    crashed = [k for k in r if k.startswith("tap-test: exited with status")]
    assert len(crashed) == 1 and "1 test(s) without a result" in crashed[0]
    assert r[crashed[0]] == [
        "Bail out! ERROR:t.c:50:crash: assertion failed: (p != NULL)"]


def test_pytest_failures_show_their_assertion(run):
    r = reasons(run.stdout)
    bad = r["test_tiny::test_bad"]
    assert "E       AssertionError: x went wrong" in bad
    assert "E       assert 1 == 2" in bad
    assert bad[-1] == "test_tiny.py:7: AssertionError"
    setup = r["test_tiny::test_setup_error"]
    assert any("fixture 'no_such_fixture' not found" in ln for ln in setup)


def test_reasons_are_bounded(run, runner_module):
    r = reasons(run.stdout)
    many = r["test_tiny::test_many_lines"]
    assert len(many) == runner_module.REASON_LINES
    assert "line 0" in many[0] and many[-1].startswith("test_tiny.py:")
    wide = r["test_tiny::test_wide"]
    assert all(len(ln) <= runner_module.REASON_WIDTH for ln in wide)
    assert any(ln.endswith("...") for ln in wide)


@pytest.fixture(scope="module")
def runner_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("runner", RUNNER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
