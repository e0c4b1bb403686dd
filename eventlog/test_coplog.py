"""Tests of the coplog command line: create, write, dump, tail, stat, set,
the manual, and one-line errors for bad files and bad usage."""

import json
import os
import queue
import signal
import subprocess
import threading
import time

import pytest


def run(coprof_bin, *args, check=True):
    result = subprocess.run([coprof_bin("coplog"), *map(str, args)],
                            capture_output=True, text=True, timeout=60)
    if check and result.returncode != 0:
        raise AssertionError("coplog %s failed (%d): %s"
                             % (" ".join(map(str, args)), result.returncode,
                                result.stderr))
    return result


@pytest.fixture
def log(coprof_bin, tmp_path):
    """A log with a cyclic SCHED and a one-shot APP of 4 records per ring."""
    path = tmp_path / "run.coplog"
    run(coprof_bin, "create", path, "SCHED,records=64",
        "APP,records=4,oneshot,args=12,strings=1K")
    return path


def dump_json(coprof_bin, path, *args):
    out = run(coprof_bin, "dump", path, "--format", "json", *args).stdout
    return [json.loads(line) for line in out.splitlines()]


def stat_json(coprof_bin, path):
    return json.loads(run(coprof_bin, "stat", path, "--format", "json").stdout)


def subsystem(stat, name):
    return next(s for s in stat["subsystems"] if s["name"] == name)


def test_write_and_dump_text(coprof_bin, log):
    run(coprof_bin, "write", log, "SCHED", "bind slot %u context %d", 3, 7)
    run(coprof_bin, "write", log, "APP", "--level", "warning",
        "%s took %.3f ms", "decode", 12.5)
    lines = run(coprof_bin, "dump", log).stdout.splitlines()
    assert len(lines) == 2
    fields = lines[0].split()
    assert float(fields[0]) > 0
    assert fields[1:4] == ["SCHED", "terse", fields[3]]
    assert fields[3].startswith("cpu")
    assert "/" in fields[4]
    assert lines[0].endswith("bind slot 3 context 7")
    assert lines[1].split()[1:3] == ["APP", "warning"]
    assert lines[1].endswith("decode took 12.500 ms")
    # The time column is CLOCK_MONOTONIC seconds: close to now.
    assert abs(float(fields[0]) - time.clock_gettime(time.CLOCK_MONOTONIC)) < 60


def test_dump_json_types(coprof_bin, log):
    run(coprof_bin, "write", log, "APP", "--", "%d %u %x %.2f %s %p %c",
        -5, 7, 255, 2.25, "text", "0x1234", "Z")
    (event,) = dump_json(coprof_bin, log)
    assert event["subsys"] == "APP"
    assert event["level"] == "terse"
    assert event["format"] == "%d %u %x %.2f %s %p %c"
    assert event["args"] == [-5, 7, 255, 2.25, "text", "0x1234", 90]
    assert event["message"] == "-5 7 ff 2.25 text 0x1234 Z"
    assert event["pid"] > 0 and event["tid"] > 0
    assert event["caller"].startswith("0x")
    assert event["time_ns"] > 0 and event["order"] > 0


def test_dump_long_and_merge_order(coprof_bin, log):
    for i in range(6):
        run(coprof_bin, "write", log, "SCHED" if i % 2 else "APP", "n %d", i)
    events = dump_json(coprof_bin, log)
    assert [e["message"] for e in events] == ["n %d" % i for i in range(6)]
    orders = [e["order"] for e in events]
    assert orders == sorted(orders)
    long_lines = run(coprof_bin, "dump", log, "--long").stdout.splitlines()
    assert long_lines[0].split()[1] == "#%d" % orders[0]
    assert ":" in long_lines[0].split()[2]


def test_dump_subsys_and_since(coprof_bin, log):
    for i in range(4):
        run(coprof_bin, "write", log, "SCHED", "s %d", i)
        run(coprof_bin, "write", log, "APP", "a %d", i)
    sched = dump_json(coprof_bin, log, "--subsys", "SCHED")
    assert [e["message"] for e in sched] == ["s %d" % i for i in range(4)]
    both = dump_json(coprof_bin, log, "--subsys", "SCHED", "--subsys", "APP")
    assert len(both) == 8
    third = both[2]
    since_order = dump_json(coprof_bin, log, "--since-order", third["order"])
    assert [e["message"] for e in since_order] == \
        [e["message"] for e in both[2:]]
    since_time = dump_json(coprof_bin, log, "--since",
                           "%.9f" % (third["time_ns"] / 1e9))
    assert since_time[0]["message"] in (both[1]["message"], third["message"])
    assert len(since_time) in (6, 7)


def test_stat_counts(coprof_bin, log):
    for i in range(11):
        run(coprof_bin, "write", log, "APP", "n %d", i, check=False)
    stat = stat_json(coprof_bin, log)
    app = subsystem(stat, "APP")
    assert app["policy"] == "oneshot" and app["capacity"] == 4
    assert app["args"] == 12
    rings = app["rings"]
    # Every write got a slot or was refused; when no writer is active the
    # counts add up exactly.
    assert app["reserved"] == 11
    assert app["records"] + app["refused"] == 11
    assert app["records"] <= 4 * rings
    assert app["reserved"] == (app["records"] + app["in_progress"] +
                               app["unclaimed"] + app["overwritten"] +
                               app["refused"])
    assert stat["clock"] in ("tsc", "monotonic")
    assert stat["formats"] == 1
    text = run(coprof_bin, "stat", log).stdout
    assert "SUBSYS" in text and "OVERWRITTEN" in text and "REFUSED" in text
    assert any(line.split()[0] == "APP" for line in text.splitlines()[4:])


def test_cyclic_overwrites(coprof_bin, tmp_path):
    path = tmp_path / "ring.coplog"
    run(coprof_bin, "create", path, "RING,records=4,shared")
    for i in range(10):
        run(coprof_bin, "write", path, "RING", "n %d", i)
    ring = subsystem(stat_json(coprof_bin, path), "RING")
    assert (ring["reserved"], ring["records"], ring["overwritten"]) == (10, 4, 6)
    events = dump_json(coprof_bin, path)
    assert [e["message"] for e in events] == ["n %d" % i for i in range(6, 10)]
    dump = run(coprof_bin, "dump", path)
    assert "6 missed" in dump.stderr


def test_oneshot_full_refuses(coprof_bin, tmp_path):
    path = tmp_path / "once.coplog"
    run(coprof_bin, "create", path, "ONCE,records=2,oneshot,shared")
    assert run(coprof_bin, "write", path, "ONCE", "a").returncode == 0
    assert run(coprof_bin, "write", path, "ONCE", "b").returncode == 0
    refused = run(coprof_bin, "write", path, "ONCE", "c", check=False)
    assert refused.returncode == 1
    assert "one-shot ring is full" in refused.stderr


def test_set_level_and_switches(coprof_bin, log):
    run(coprof_bin, "set", log, "SCHED", "terse")
    assert subsystem(stat_json(coprof_bin, log), "SCHED")["level"] == "terse"
    verbose = run(coprof_bin, "write", log, "SCHED", "--level", "verbose", "v",
                  check=False)
    assert verbose.returncode == 1
    assert "keeps no verbose records" in verbose.stderr
    run(coprof_bin, "set", log, "SCHED", "off")
    assert run(coprof_bin, "write", log, "SCHED", "x",
               check=False).returncode == 1
    run(coprof_bin, "set", log, "all", "on")
    run(coprof_bin, "set", log, "all", "5")
    run(coprof_bin, "set", log, "APP", "echo")
    stat = stat_json(coprof_bin, log)
    assert all(s["enabled"] and s["level"] == "prolog"
               for s in stat["subsystems"])
    assert subsystem(stat, "APP")["echo"] is True
    echoed = run(coprof_bin, "write", log, "APP", "--level", "prolog",
                 "hello %d", 42)
    assert "coplog APP prolog" in echoed.stderr
    assert echoed.stderr.rstrip().endswith("hello 42")
    run(coprof_bin, "set", log, "APP", "noecho")
    assert run(coprof_bin, "write", log, "APP", "quiet").stderr == ""
    assert [e["message"] for e in dump_json(coprof_bin, log)] == \
        ["hello 42", "quiet"]


def test_tail_follows(coprof_bin, log):
    for i in range(3):
        run(coprof_bin, "write", log, "SCHED", "old %d", i)
    tail = subprocess.Popen([coprof_bin("coplog"), "tail", str(log), "-n", "2",
                             "--interval", "0.02"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in tail.stdout],
                     daemon=True).start()

    def next_line():
        try:
            return lines.get(timeout=20)
        except queue.Empty:
            raise AssertionError("coplog tail printed nothing for 20 s")
    try:
        assert next_line().endswith("old 1\n")
        assert next_line().endswith("old 2\n")
        for i in range(3):
            run(coprof_bin, "write", log, "APP" if i % 2 else "SCHED",
                "new %d", i)
            assert next_line().endswith("new %d\n" % i)
    finally:
        tail.send_signal(signal.SIGTERM)
        tail.wait(timeout=20)
    assert tail.returncode == 0


def test_manual(coprof_bin):
    manual = run(coprof_bin, "--help").stdout
    for heading in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS",
                    "OUTPUT", "EXIT STATUS", "EXAMPLES"):
        assert "\n%s\n" % heading in "\n" + manual
    for command in ("dump", "tail", "stat", "set", "create", "write"):
        assert "coplog %s " % command in manual
        part = run(coprof_bin, command, "--help").stdout
        assert "coplog %s" % command in part
        assert "DESCRIPTION" in part


@pytest.mark.parametrize("args, status, words", [
    (["dump", "{missing}"], 1, ["{missing}", "cannot open", "No such file"]),
    (["dump", "{truncated}"], 1, ["{truncated}", "truncated"]),
    (["stat", "{garbage}"], 1, ["{garbage}", "not a coplog file"]),
    (["set", "{log}", "SCHED", "loud"], 2, ["'loud' is not a level"]),
    (["set", "{log}", "NOPE", "on"], 1, ["no subsystem 'NOPE'"]),
    (["dump", "{log}", "--subsys", "NOPE"], 2, ["no subsystem 'NOPE'"]),
    (["dump", "{log}", "--format", "xml"], 2, ["'xml' is neither"]),
    (["dump", "{log}", "--since", "soon"], 2, ["'soon' is not a number"]),
    (["write", "{log}", "SCHED", "%d %d", "1"], 2,
     ["takes 2 arguments, 1 given"]),
    (["write", "{log}", "SCHED", "%d", "x1"], 2, ["'x1' for %d"]),
    (["write", "{log}", "SCHED", "%d" * 14] + ["1"] * 14, 2,
     ["has 14 conversions", "at most 12 arguments"]),
    (["write", "{log}", "NOPE", "hi"], 2, ["no subsystem 'NOPE'"]),
    (["create", "{new}", "A,records=1000"], 1, ["capacity 1000"]),
    (["create", "{new}", "A,bogus"], 2, ["'bogus' is not a subsystem option"]),
    (["create", "{new}", "A", "A"], 1, ["'A' appears twice"]),
    (["frobnicate"], 2, ["'frobnicate' is not a command"]),
    (["dump"], 2, ["needs a FILE"]),
])
def test_errors(coprof_bin, log, tmp_path, args, status, words):
    truncated = tmp_path / "truncated.coplog"
    truncated.write_bytes(log.read_bytes()[:5000])
    garbage = tmp_path / "garbage.coplog"
    garbage.write_bytes(b"\x00" * 4096 + b"hello" * 1000)
    names = {"log": log, "missing": tmp_path / "missing.coplog",
             "truncated": truncated, "garbage": garbage,
             "new": tmp_path / "new.coplog"}
    args = [a.format(**names) for a in args]
    words = [w.format(**names) for w in words]
    result = run(coprof_bin, *args, check=False)
    assert result.returncode == status
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("coplog: ")
    for word in words:
        assert word in lines[0]
    if args[0] == "create":
        assert not os.path.exists(names["new"])
