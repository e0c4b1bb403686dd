#!/usr/bin/python3
"""Run every coprof test and print one summary line.

`make check` calls this with the GTest programs and the pytest paths that
the parts' module.mk fragments registered.  Each GTest program runs with
--tap; its "ok"/"not ok" lines are counted, and tests that its plan
announced but that never reported (the program crashed or timed out) count
as failed.  pytest runs once over all Python paths on /usr/bin/python3 and
reports through a JUnit XML file.

The last line printed is always "N passed, N failed" (", N skipped" when
any were skipped), and the exit status is 0 only when nothing failed.
Before it, every failed test is named on a "FAILED" line followed by its
reason, at most REASON_LINES lines of REASON_WIDTH characters: for a
pytest test the "E" lines of its failure or error in the JUnit XML and the
line that raised (else the end of its traceback), for a GTest its TAP
output since the previous result (the assertion GLib printed), for a
GTest program that crashed or timed out the last lines it printed.  Full
output of each program is kept under build/test-logs/.

Under `make check-sanitize` every sanitizer report goes to a file of the
folder given by --sanitizer-logs; each such file counts as one failed test,
named by the file and the report's first line.
"""

import argparse
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

GTEST_TIMEOUT = 600          # seconds for one GTest program
PYTEST_TIMEOUT = 3600        # seconds for the whole pytest run

TAP_RESULT = re.compile(r"^(not ok|ok)\b(.*)$")
TAP_PLAN = re.compile(r"^1\.\.(\d+)")
TAP_NOISE = re.compile(r"^# (Start|End) of ")
REASON_LINES = 12            # lines of reason shown per failed test
REASON_WIDTH = 200           # characters per reason line


class Tally:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.failures = []          # [(name, [reason line, ...])]

    def fail(self, name, reason=(), count=1):
        self.failed += count
        self.failures.append((name, bounded(reason)))


def bounded(lines):
    """The last REASON_LINES non-blank lines, each cut to REASON_WIDTH."""
    lines = [ln.rstrip() for ln in lines if ln.strip()][-REASON_LINES:]
    return [ln if len(ln) <= REASON_WIDTH else ln[:REASON_WIDTH - 3] + "..."
            for ln in lines]


def tap_reason(lines):
    """What a GTest printed for one test: its lines without GLib's
    "# Start of" / "# End of" markers."""
    return [ln for ln in lines if not TAP_NOISE.match(ln)]


def junit_reason(element):
    """The reason of a JUnit <failure> or <error>: pytest's "E" lines and
    the "file:line: Exception" line after them, else the end of the
    traceback, else the message attribute."""
    text = (element.text or "").splitlines()
    errors = [i for i, ln in enumerate(text) if ln.startswith("E ")]
    if errors:
        picked = [text[i] for i in errors][:REASON_LINES - 1]
        tail = [ln for ln in text[errors[-1] + 1:] if ln.strip()]
        return picked + tail[-1:]
    if any(ln.strip() for ln in text):
        return text
    return (element.get("message") or "").splitlines()


def run_gtest(program, logdir, env, tally):
    name = os.path.basename(program)
    log = os.path.join(logdir, name + ".log")
    try:
        proc = subprocess.run([program, "--tap"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=GTEST_TIMEOUT, text=True,
                              errors="replace")
        output, status = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") \
            if isinstance(e.stdout, bytes) else (e.stdout or "")
        output += "\n[runner] timed out after %d s\n" % GTEST_TIMEOUT
        status = -1
    with open(log, "w") as f:
        f.write(output)

    planned, seen, failed_here = None, 0, 0
    since = []                  # lines since the last result
    for line in output.splitlines():
        plan = TAP_PLAN.match(line)
        if plan:
            planned = int(plan.group(1))
            continue
        result = TAP_RESULT.match(line)
        if not result:
            since.append(line)
            continue
        seen += 1
        verdict, rest = result.groups()
        if "# SKIP" in rest:
            tally.skipped += 1
        elif verdict == "ok":
            tally.passed += 1
        else:
            failed_here += 1
            tally.fail("%s:%s" % (name, rest.strip()), tap_reason(since))
        since = []
    missing = (planned or 0) - seen
    if missing > 0 or (status != 0 and failed_here == 0):
        tally.fail("%s: exited with status %d, %d test(s) without a result "
                   "(see %s)" % (name, status, max(missing, 1), log),
                   tap_reason(since), count=max(missing, 1))
    print("  %-28s %d run%s" % (name, seen,
                                ", FAILED" if failed_here or missing > 0
                                or status != 0 else ""))


def run_pytest(paths, build, logdir, env, tally):
    xml_path = os.path.join(logdir, "pytest.xml")
    log = os.path.join(logdir, "pytest.log")
    if os.path.exists(xml_path):
        os.unlink(xml_path)
    cmd = ["/usr/bin/python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
           "--junitxml", xml_path] + paths
    try:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              errors="replace", timeout=PYTEST_TIMEOUT)
        output = proc.stdout
    except subprocess.TimeoutExpired:
        output = "[runner] pytest timed out after %d s\n" % PYTEST_TIMEOUT
    with open(log, "w") as f:
        f.write(output)
    if not os.path.exists(xml_path):
        tally.fail("pytest: produced no report (see %s)" % log,
                   output.splitlines())
        return
    root = ET.parse(xml_path).getroot()
    run = 0
    for case in root.iter("testcase"):
        run += 1
        name = "%s::%s" % (case.get("classname"), case.get("name"))
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        if case.find("skipped") is not None and bad is None:
            tally.skipped += 1
        elif bad is not None:
            tally.fail(name, junit_reason(bad))
        else:
            tally.passed += 1
    print("  %-28s %d run" % ("pytest", run))


def count_sanitizer_reports(folder, tally):
    """One failure per report file that ASan or UBSan left in folder, its
    first lines as the reason."""
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        with open(path, errors="replace") as f:
            lines = [line.rstrip() for line in f
                     if line.strip() and not line.startswith("=")]
        first = lines[0].strip() if lines else ""
        tally.fail("sanitizer %s: %s" % (path, first),
                   lines[1:REASON_LINES + 1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build",
                        help="the build folder (default: build)")
    parser.add_argument("--log-dir", metavar="DIR",
                        help="where the full output goes "
                             "(default: BUILD/test-logs)")
    parser.add_argument("--gtest", nargs="*", default=[], metavar="PROGRAM",
                        help="GTest programs to run")
    parser.add_argument("--pytest", nargs="*", default=[], metavar="PATH",
                        help="files or folders of pytest tests")
    parser.add_argument("--sanitizer-logs", metavar="DIR",
                        help="count each sanitizer report file in DIR "
                             "as a failure")
    args = parser.parse_args()

    build = os.path.abspath(args.build)
    logdir = args.log_dir or os.path.join(build, "test-logs")
    os.makedirs(logdir, exist_ok=True)
    env = dict(os.environ, COPROF_BUILD=build,
               COPROF_SOURCE=os.path.abspath(os.path.dirname(
                   os.path.dirname(__file__))))

    tally = Tally()
    for program in args.gtest:
        run_gtest(program, logdir, env, tally)
    if args.pytest:
        run_pytest(args.pytest, build, logdir, env, tally)

    if args.sanitizer_logs:
        count_sanitizer_reports(args.sanitizer_logs, tally)
    for name, reason in tally.failures:
        print("FAILED " + name)
        for line in reason:
            print("    " + line)
    summary = "%d passed, %d failed" % (tally.passed, tally.failed)
    if tally.skipped:
        summary += ", %d skipped" % tally.skipped
    print(summary)
    return 1 if tally.failed or tally.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
