"""copreport export: each format read back by its viewer's own tool.

On the shared host-pipeline session (three images, overlays sharing
addresses, eight contexts): `go tool pprof -top` shows the report's top
functions with its counts and `-tags` every context, image and overlay;
`callgrind_annotate` reads the callgrind file and gives the same totals
and functions; the folded lines sum to the session's samples, one root
per context; the speedscope file has every field its file format
requires (src/lib/file-format-spec.ts of speedscope) and a profile per
context.  Two sessions given with -d are both in the export.
"""

import collections
import gzip
import json
import os
import re
import shutil
import subprocess



def _export(copreport, session, fmt, path, *more):
    copreport("export", "-d", session, "--format", fmt, "-o", path, *more,
              check=True)
    return path


def _rows_by_name(report):
    """{(image, overlay or "resident", symbol): samples} of a report."""
    out = collections.Counter()
    for r in report["rows"]:
        out[(r["image"], r["overlay"] or "resident", r["symbol"])] += \
            r["samples"]
    return out


def _tool(name, package):
    """The path of a viewer's tool, which make deps installs."""
    path = shutil.which(name)
    assert path, "%s is missing: make deps installs %s" % (name, package)
    return path


def _top(report, n):
    rows = sorted(report["rows"], key=lambda r: -r["samples"])
    return [(r["symbol"], r["samples"]) for r in rows[:n]]


def test_pprof_top_is_the_report(real_session, copreport, report_json,
                                 tmp_path):
    go = _tool("go", "golang-go")
    path = _export(copreport, real_session.dir, "pprof",
                   tmp_path / "coprof.pb.gz")
    with gzip.open(str(path)) as f:     # gzipped, as the format says
        assert f.read(1)
    env = dict(os.environ, HOME=str(tmp_path), PPROF_TMPDIR=str(tmp_path))
    p = subprocess.run([go, "tool", "pprof", "-top", "-nodecount=6",
                        str(path)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    top = []
    for line in p.stdout.splitlines():
        m = re.match(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+\d+\s+[\d.]+%\s+(\S+)$",
                     line)
        if m:
            top.append((m.group(2), int(m.group(1))))
    report = report_json()
    assert top == _top(report, 6)
    total = report["totals"]["samples"]
    assert re.search(r"of %d total" % total, p.stdout)

    p = subprocess.run([go, "tool", "pprof", "-tags", str(path)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    tags = p.stdout
    for c in report["contexts"]:
        assert re.search(r"context %d pid %d tid %d\n" % (c["id"], c["pid"],
                                                         c["tid"]), tags)
    for image in ("pipeline", "kernels", "overlays"):
        assert re.search(r"\): %s\n" % image, tags)
    for section in (".overlay.crc", ".overlay.blur", ".overlay.sieve"):
        assert section in tags


def _callgrind_costs(line, n):
    """([n costs], the rest) of a line of callgrind_annotate's tables:
    each cost "12,345 (16.54%)" or "0" (an event the place lacks)."""
    costs = []
    rest = line
    for _ in range(n):
        m = re.match(r"^\s*([\d,]+)(?: \(\s*[\d.]+%\))?(?=\s)", rest)
        if m is None:
            return None
        costs.append(int(m.group(1).replace(",", "")))
        rest = rest[m.end():]
    return costs, rest.strip()


def test_callgrind_annotate_reads_it(real_session, copreport, report_json,
                                     tmp_path):
    """Samples and a cost per stall reason (issue 29), as the report's
    rows[].samples and rows[].stall."""
    tool = _tool("callgrind_annotate", "valgrind")
    path = _export(copreport, real_session.dir, "callgrind",
                   tmp_path / "callgrind.out.coprof")
    p = subprocess.run([tool, "--threshold=100", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = report_json()
    assert report["stall_reasons"]
    reasons = list(next(r["stall"] for r in report["rows"] if r["stall"]))
    events = ["Samples"] + reasons
    assert re.search(r"^Events shown: +%s$" % " ".join(events), p.stdout,
                     re.M), p.stdout[:2000]
    totals = [c for c in (_callgrind_costs(line, len(events))
                          for line in p.stdout.splitlines())
              if c and c[1] == "PROGRAM TOTALS"]
    assert len(totals) == 1, p.stdout[:2000]
    total = report["totals"]["samples"]
    assert totals[0][0][0] == total
    seen = {}
    for line in p.stdout.splitlines():
        c = _callgrind_costs(line, len(events))
        # FILE:FUNCTION (IMAGE[ OVERLAY]) [OB]
        m = c and re.match(r"^\S+:(\S+) \((\S+?)(?: (\S+))?\) \[", c[1])
        if m:
            seen[(m.group(2), m.group(3) or "resident", m.group(1))] = c[0]
    want = collections.defaultdict(lambda: [0] * len(events))
    for r in report["rows"]:
        if r["symbol"].startswith("["):
            continue
        w = want[(r["image"], r["overlay"] or "resident", r["symbol"])]
        w[0] += r["samples"]
        for i, reason in enumerate(reasons):
            w[1 + i] += (r["stall"] or {}).get(reason, 0)
    assert seen == dict(want)
    # every sample has its reason: the reasons' columns sum to Samples
    assert sum(totals[0][0][1:]) == total


def test_callgrind_annotates_the_source(real_session, copreport, tmp_path):
    """Real file names and lines: callgrind_annotate --auto=yes annotates
    stages.c with the samples of stage_denoise's lines."""
    tool = _tool("callgrind_annotate", "valgrind")
    path = _export(copreport, real_session.dir, "callgrind",
                   tmp_path / "callgrind.out.coprof")
    p = subprocess.run([tool, "--auto=yes", str(path)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert re.search(r"Auto-annotated source: \S*examples/pipeline/"
                     r"stages\.c", out), out[:3000]
    part = out.split("examples/pipeline/stages.c", 2)[-1]
    counted = [line for line in part.splitlines()
               if re.match(r"^\s*[\d,]+ \(\s*[\d.]+%\)\s+\S", line)]
    assert counted, part[:3000]


def test_pprof_lines_and_images_apart(real_session, copreport, report_json,
                                      tmp_path):
    """go tool pprof -list finds stage_edges' source and puts samples on
    its lines; the three images' main are three rows of -top; a Mapping
    per image with its build id."""
    go = _tool("go", "golang-go")
    path = _export(copreport, real_session.dir, "pprof",
                   tmp_path / "coprof.pb.gz")
    env = dict(os.environ, HOME=str(tmp_path), PPROF_TMPDIR=str(tmp_path))
    p = subprocess.run([go, "tool", "pprof", "-list", "stage_edges",
                        str(path)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    assert "could not find file" not in p.stdout + p.stderr
    assert re.search(r"ROUTINE =+ stage_edges in \S*stages\.c", p.stdout), \
        p.stdout
    lines = [m for m in re.finditer(r"^\s+(\d+)\s+\d+\s+(\d+):", p.stdout,
                                    re.M)]
    assert sum(int(m.group(1)) for m in lines) > 0, p.stdout
    p = subprocess.run([go, "tool", "pprof", "-top", "-nodecount=200", "-nodefraction=0",
                        str(path)], capture_output=True, text=True,
                       timeout=300, env=env)
    mains = set(re.findall(r"\s(main \(\w+\))$", p.stdout, re.M))
    want = {"main (%s)" % image for image, _, symbol
            in _rows_by_name(report_json()) if symbol == "main"}
    assert len(want) >= 2 and mains == want, p.stdout
    p = subprocess.run([go, "tool", "pprof", "-raw", str(path)],
                       capture_output=True, text=True, timeout=300, env=env)
    maps = re.findall(r"^\s*\d+: 0x\w+/0x\w+/0x\w+ (\S+) (\w+)", p.stdout,
                      re.M)
    assert len(maps) == 3 and all(len(b) >= 16 for _, b in maps), p.stdout


def test_folded_sums_to_the_samples(real_session, copreport, report_json,
                                    tmp_path):
    """A line per stack, "context;function[;[reason]] count": a leaf frame
    [reason] when the samples waited (report/README.md "Stall reasons"),
    none when they issued.  The lines sum to the samples, per context and
    per function, and a function's [reason] leaves to its rows[].stall."""
    path = _export(copreport, real_session.dir, "folded",
                   tmp_path / "coprof.folded")
    report = report_json()
    total = 0
    roots = collections.Counter()
    leaves = collections.Counter()
    waits = collections.Counter()       # (function frame, reason)
    with open(str(path)) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            # context; function, then the reason's leaf when waiting
            assert len(frames) in (2, 3), line
            if len(frames) == 3:
                m = re.match(r"^\[(\w+)\]$", frames[2])
                assert m and m.group(1) != "issue", line
                waits[(frames[1], m.group(1))] += int(count)
            roots[frames[0]] += int(count)
            leaves[frames[1]] += int(count)
            total += int(count)
    assert total == report["totals"]["samples"]
    by_context = {"context %d pid %d tid %d" % (c["id"], c["pid"], c["tid"]):
                  c["samples"] for c in report["contexts"] if c["samples"]}
    assert dict(roots) == by_context
    assert waits        # the pipeline waits (memory, dependency, ...)
    crc = [r for r in report["rows"] if r["symbol"] == "crc16_bitwise"][0]
    frame = "crc16_bitwise (overlays .overlay.crc)"
    assert leaves[frame] == crc["samples"]
    assert {reason: n for (fn, reason), n in waits.items() if fn == frame} \
        == {reason: n for reason, n in crc["stall"].items()
            if n and reason != "issue"}


def _check_speedscope(doc):
    """The fields speedscope's file format requires, and their types."""
    assert doc["$schema"] == \
        "https://www.speedscope.app/file-format-schema.json"
    assert isinstance(doc["version"], str)
    frames = doc["shared"]["frames"]
    assert frames and all(isinstance(f["name"], str) for f in frames)
    assert all(isinstance(f.get("file", ""), str) for f in frames)
    assert doc["profiles"]
    for p in doc["profiles"]:
        assert p["type"] == "sampled"
        assert isinstance(p["name"], str)
        assert p["unit"] in ("none", "nanoseconds", "microseconds",
                             "milliseconds", "seconds", "bytes")
        assert p["endValue"] >= p["startValue"]
        assert len(p["samples"]) == len(p["weights"])
        for stack in p["samples"]:
            assert stack and all(isinstance(i, int) and
                                 0 <= i < len(frames) for i in stack)
        assert all(isinstance(w, (int, float)) and w >= 0
                   for w in p["weights"])
    return frames


def test_speedscope_has_the_required_fields(real_session, copreport,
                                            report_json, tmp_path):
    path = _export(copreport, real_session.dir, "speedscope",
                   tmp_path / "coprof.speedscope.json")
    with open(str(path)) as f:
        doc = json.load(f)
    frames = _check_speedscope(doc)
    report = report_json()
    assert sum(sum(p["weights"]) for p in doc["profiles"]) == \
        report["totals"]["samples"]
    names = {p["name"] for p in doc["profiles"]}
    assert names == {"context %d pid %d tid %d" % (c["id"], c["pid"],
                                                   c["tid"])
                     for c in report["contexts"] if c["samples"]}
    files = {f["file"] for f in frames}
    assert "overlays:.overlay.crc" in files and "pipeline:resident" in files


def test_two_sessions_in_one_export(knob, copreport, tmp_path):
    path = tmp_path / "two.folded"
    copreport("export", "-d", knob.a, "-d", knob.b, "--format", "folded",
              "-o", path, check=True)
    roots = collections.Counter()
    for line in open(str(path)):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        roots[stack.split(";")[0].split(": ")[0]] += int(count)
    totals = {}
    for d in (knob.a, knob.b):
        r = json.loads(copreport("-d", d, "--format", "json",
                                 check=True).stdout)
        totals[d] = r["totals"]["samples"]
    assert dict(roots) == totals


def test_export_errors(knob, copreport, tmp_path):
    p = copreport("export", "-d", knob.a, "--format", "svg", "-o",
                  tmp_path / "x")
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert p.stderr.startswith("copreport: ")
    p = copreport("export", "-d", knob.a, "--format", "pprof", "-o",
                  tmp_path / "no" / "such" / "dir")
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    p = copreport("export", "-d", knob.a, "-d", knob.other_rate, "--format",
                  "folded", "-o", tmp_path / "x")
    assert p.returncode == 1 and p.stderr.count("\n") == 1
    assert "different periods" in p.stderr
