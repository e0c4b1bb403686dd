"""copreport callgraph on a recording of calltree (emulator/tests/calltree/),
a program whose call tree is known: main -> a -> hot_b (three times the
work of) main -> c -> hot_b, a tail call e => d, recursion, overlays that
replace their caller, a longjmp.

The truth is the trace unit's own stack at every modelled cycle (cop-run
--event SPU_CYCLES --sample-every 1 --call-graph, the event the session
samples): the sampled session's inclusive and self
shares must hold it within their 95% intervals (the recording's dither
seed is fixed, so the test is deterministic), and the edges must be the
program's."""

import collections
import json
import os
import shutil
import sqlite3
import subprocess

import pytest

from coprof_report import callgraph, profile, session as session_mod
from emulator.tests.test_call_stacks import OVERLAYS, Symbols

ROUNDS = "100"
# Inclusive shares checked against the report's 95% intervals ...
HEADLINE = ("main", "a", "c", "hot_b")
# ... and every share of these against 99.9% ones: 18 checks at 95% would
# miss one in two recordings.
CHECKED = ("main", "a", "c", "hot_b", "d", "fib", "ping", "pong", "jump")
Z999 = 3.2905


@pytest.fixture(scope="module")
def calltree(build_dir):
    return os.path.join(build_dir, "tests", "cop", "calltree.elf")


@pytest.fixture(scope="module")
def recorded(coprof_bin, build_dir, calltree, tmp_path_factory):
    """A session of calltree recorded with --call-graph."""
    out = tmp_path_factory.mktemp("callgraph") / "session"
    proc = subprocess.run(
        [coprof_bin("coprof"), "record", "--call-graph", "-q",
         "--event=SPU_CYCLES:157", "--dither-seed=4242", "-o", str(out),
         "--", os.path.join(build_dir, "tests", "cop-host"), calltree,
         ROUNDS], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return str(out)


@pytest.fixture(scope="module")
def truth(coprof_bin, calltree, tmp_path_factory):
    """{function: (inclusive, self) fraction} of every cycle the program
    ran, from the trace unit's stacks at every cycle (SPU_CYCLES, as the
    session records)."""
    d = tmp_path_factory.mktemp("truth")
    subprocess.run([coprof_bin("cop-run"), "--event", "SPU_CYCLES",
                    "--sample-every", "1",
                    "--call-graph", "64", "--fifo-depth", str(1 << 21),
                    "--samples-out", str(d / "s"), "--events-out",
                    str(d / "e"), calltree, ROUNDS],
                   check=True, capture_output=True, timeout=600)
    symbols = Symbols(calltree)
    guard_at = {}                   # line -> region 1's guard from then on
    for line in (d / "e").read_text().splitlines():
        pos, region, guard = map(int, line.split())
        if region == 0:
            guard_at[pos] = guard
    inclusive, self_count = collections.Counter(), collections.Counter()
    guard, total = 0, 0
    for n, line in enumerate((d / "s").read_text().splitlines()):
        guard = guard_at.get(n, guard)
        fields = line.split()
        pc = int(fields[0], 16)
        leaf = symbols.name(pc)
        if leaf in OVERLAYS.values():
            leaf = OVERLAYS[guard]
        names = {leaf}
        for frame in fields[1:]:
            address, _, overlay = frame.partition("@")
            names.add(symbols.name(int(address, 16) - 4, int(overlay or 0)))
        inclusive.update(names)
        self_count[leaf] += 1
        total += 1
    return {f: (inclusive[f] / total, self_count[f] / total)
            for f in inclusive}


def graph_json(copreport, recorded, *args):
    p = copreport("callgraph", "-d", recorded, "--format", "json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def by_name(functions):
    return {f["function"].split(".")[0]: f for f in functions}


def test_shares_hold_the_truth(copreport, recorded, truth):
    g = graph_json(copreport, recorded)
    assert g["samples"] > 3000
    functions = by_name(g["functions"])
    for name in HEADLINE:
        got = functions[name]["inclusive"]
        assert got["ci_low"] <= 100 * truth[name][0] <= got["ci_high"], \
            (name, truth[name], got)
    for name in CHECKED:
        for kind, true in zip(("inclusive", "self"), truth[name]):
            _, low, high = profile.interval(functions[name][kind]["samples"],
                                            g["samples"], Z999)
            assert low <= true <= high, (name, kind, true, low, high)
    # The known tree: a's work through hot_b is three times c's.
    callers = {c["function"].split(".")[0]: c["samples"]
               for c in functions["hot_b"]["callers"]}
    assert 2.5 < callers["a"] / callers["c"] < 3.5


def test_edges_are_the_programs(copreport, recorded):
    functions = by_name(graph_json(copreport, recorded)["functions"])

    def names(f, kind):
        return {(c["function"].split(".")[0], c["overlay"])
                for c in functions[f][kind]}
    assert names("hot_b", "callers") == {("a", 0), ("c", 0), ("jump", 0),
                                         ("pong", 2)}
    assert names("pong", "callers") == {("ping", 1)}
    assert functions["ping"]["section"] == ".overlay.ping"
    assert names("d", "callers") == {("main", 0)}   # e tail-called it
    # e may be sampled in its own few instructions, but leaves no frame:
    # it is nobody's caller
    assert not [f for f in functions if ("e", 0) in names(f, "callers")]
    assert names("fib", "callers") == {("fib", 0), ("main", 0)}
    assert ("jump", 0) in names("jump", "callers")
    # the longjmp left no jump frame above main
    assert names("main", "callers") == {("__cop_start", 0)}


def test_call_stacks_yields_each_stack(recorded, copreport):
    g = graph_json(copreport, recorded)
    s = session_mod.Session.open(recorded)
    try:
        stacks = list(callgraph.call_stacks(s))
    finally:
        s.close()
    assert sum(count for _, _, count in stacks) == g["samples"]
    for context, frames, count in stacks:
        assert context.id == 1 and count > 0
        assert frames[-1].function == "_start"
        if frames[0].function == "pong":
            assert frames[0].overlay == 2 and frames[1].overlay == 1


def test_text_report(copreport, recorded):
    p = copreport("callgraph", "-d", recorded, "--threshold", "5")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "copreport callgraph: %s, functions under 5%% " \
        "inclusive hidden" % recorded
    assert "samples with call stacks in 1 context" in lines[1]
    rows = [l for l in lines if l.endswith(" hot_b")]
    assert rows and "calltree (calltree.elf)" in rows[0]
    assert any(" caller a.constprop.0" in l for l in lines)
    table = lines[:lines.index("callers and callees: the samples with the "
                               "callee right inside the caller")]
    assert any(l.endswith(" hot_b") for l in table)
    assert not any(l.endswith(" jump") for l in table)   # under 5%


def test_sessions_without_stacks(copreport, recorded, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(recorded, old)
    db = sqlite3.connect(old / "session.db")
    db.execute("DROP TABLE stacks")
    db.commit()
    db.close()
    assert copreport("-d", old).returncode == 0
    p = copreport("callgraph", "-d", old)
    assert p.returncode == 1
    assert p.stderr == "copreport: %s: no call stacks in this session " \
        "(record with coprof record --call-graph or copcontrol " \
        "--call-graph)\n" % old


def test_damaged_stacks_refused(copreport, recorded, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(recorded, bad)
    db = sqlite3.connect(bad / "session.db")
    db.execute("UPDATE stacks SET frames = 'main+4' WHERE frames ="
               " (SELECT frames FROM stacks LIMIT 1)")
    db.commit()
    db.close()
    p = copreport("callgraph", "-d", bad)
    assert p.returncode == 1
    assert p.stderr.count("\n") == 1
    assert "stacks.frames is 'main+4', not a call stack" in p.stderr


def test_usage_errors(copreport, recorded):
    p = copreport("callgraph", "-d", recorded, "--context", "9")
    assert p.returncode == 2
    assert p.stderr == "copreport: 9: no such context in the session\n"
    p = copreport("callgraph", "-d", recorded, "--format", "csv")
    assert p.returncode == 2
    assert copreport("callgraph", "--help").stdout.startswith("usage:")


def test_exports_carry_the_call_stacks(copreport, recorded, tmp_path):
    """The folded export of a --call-graph session has the real stacks,
    root to leaf, and as many samples as the call graph."""
    g = graph_json(copreport, recorded)
    out = tmp_path / "stacks.folded"
    copreport("export", "-d", recorded, "--format", "folded", "-o",
              str(out), check=True)
    lines = out.read_text().splitlines()
    total = sum(int(line.rsplit(" ", 1)[1]) for line in lines)
    assert total == g["samples"]
    hot = [line for line in lines
           if line.rsplit(" ", 1)[0].split(";")[-1].startswith("hot_b ")]
    assert hot
    for line in hot:
        frames = [f.split(" (")[0] for f in line.rsplit(" ", 1)[0].split(";")]
        assert frames[1] == "_start"    # after the context, the root
        assert "main" in frames
