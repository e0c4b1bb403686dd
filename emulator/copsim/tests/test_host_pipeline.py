"""examples/host-pipeline on a copsim with fewer slots than contexts: every
result right, the kernels and overlays lines equal to the Python models of
the examples, and a consistent bind/unbind history in the event log."""

import os
import re
import subprocess
import sys

from copsim_harness import (SOURCE, check_slot_history, counted_cycles,
                            sched_events)

sys.path.insert(0, os.path.join(SOURCE, "examples"))
import example_models  # noqa: E402  (needs the path above)


def host_pipeline(build_dir, sim, *args):
    return subprocess.run([os.path.join(build_dir, "examples",
                                        "host-pipeline")] + list(args),
                          env=sim.env, capture_output=True, text=True,
                          timeout=300)


def test_host_pipeline_checks_every_result(copsim, build_dir, tmp_path):
    counts = tmp_path / "counts"
    counts.mkdir()
    sim = copsim("--slots", "3", "--slice", "200000", "--exact-counts",
                 str(counts))
    consoles = tmp_path / "consoles"
    consoles.mkdir()
    result = host_pipeline(build_dir, sim, "--threads", "6", "--contexts",
                           "16", "--console-dir", str(consoles))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[-1] == \
        "host-pipeline: 16 contexts from 6 threads, 16 ok, 0 failed"
    reports = [re.match(r"context (\d+) (\w+) +ok .*: (.*)$", line)
               for line in lines[:-1]]
    assert all(reports) and len(reports) == 16, lines
    for match in reports:
        index, program, verdict = int(match[1]), match[2], match[3]
        assert program == ("pipeline", "pipeline", "kernels",
                           "overlays")[index % 4]
        if program == "kernels":
            assert verdict == example_models.kernels(1)
        elif program == "overlays":
            # histogram (overlay 3) and sort (5) stay loaded at the end.
            assert verdict == "overlays rounds=1 digest=%08x loads=7 " \
                "guards=3,5" % example_models.overlays(1)
        else:
            assert verdict == "3 frames checked"
            with open(consoles / ("context-%d.txt" % index)) as f:
                assert f.read().count("\nframe ") == 2
    events = sched_events(build_dir, sim.log)
    bindings = check_slot_history(events, 3)
    assert len(bindings) == 16
    for e in events:
        if e["kind"] == "exit":
            assert e["status"] == 0
            ran = sum(end - start
                      for _, start, end, _ in bindings[e["context"]])
            assert ran == counted_cycles(counts, e["context"])
    # Contexts came from several host threads of one process.
    creators = {e["tid"] for e in events if e["kind"] == "create"}
    assert len(creators) == 6
    assert len({e["pid"] for e in events if e["kind"] == "create"}) == 1


def test_host_pipeline_reports_a_failed_context(copsim, build_dir):
    """Both pipeline contexts over copsim's cycle limit.  copsim checks the
    limit at its scheduler's tick (1 ms), so a context must not be able to
    finish between two ticks however loaded the machine: 2000 frames (as
    many as the data window holds) are 1.6 billion instructions, 1600
    times the limit (3 frames, 2.4 million, once finished first)."""
    sim = copsim("--max-cycles", "1000000")
    result = host_pipeline(build_dir, sim, "--threads", "2", "--contexts", "2",
                           "--frames", "2000")
    assert result.returncode == 1
    assert "context 0 pipeline FAILED binds=1 preemptions=0: looping: " \
        "stopped after its limit of 1000000 cycles (status 137)" \
        in result.stdout
    assert result.stdout.endswith("2 contexts from 2 threads, 0 ok, 2 "
                                  "failed\n")


def test_host_pipeline_refuses_bad_options(build_dir, copsim):
    sim = copsim()
    result = host_pipeline(build_dir, sim, "--contexts", "0")
    assert result.returncode == 2
    assert result.stderr.startswith("host-pipeline: bad arguments")


def test_host_pipeline_consoles_follow_tmpdir(copsim, build_dir, tmp_path):
    """The temporary console directory is made in $TMPDIR (a missing one is
    named in the error), and removed at the end."""
    sim = copsim()
    tmp = tmp_path / "tmp"
    command = [os.path.join(build_dir, "examples", "host-pipeline"),
               "--threads", "2", "--contexts", "2"]
    missing = subprocess.run(command, env=dict(sim.env, TMPDIR=str(tmp)),
                             capture_output=True, text=True, timeout=300)
    assert missing.returncode == 1
    assert re.fullmatch(r"host-pipeline: %s/host-pipeline-XXXXXX: No such "
                        r"file or directory\n" % re.escape(str(tmp)),
                        missing.stderr)
    tmp.mkdir()
    result = subprocess.run(command, env=dict(sim.env, TMPDIR=str(tmp)),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert os.listdir(tmp) == []
