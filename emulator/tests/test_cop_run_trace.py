"""The trace unit through `cop-run --sample-every`: the fast mode gives the
reference mode's captures on every example program and the SDK's test
programs (overlays rewrite the local store's code while they run), for
several N including 1; and cop-run's trace options and their errors."""

import os
import re
import signal
import subprocess
import time

import pytest

COUNTERS = re.compile(r"^captures=(\d+) dropped=(\d+) instructions=(\d+) "
                      r"outside_ls=(\d+)$", re.M)

# Program, folder under build/, arguments: each runs half a million to a
# million instructions.
PROGRAMS = [
    ("kernels", "examples", ["1"]),
    ("overlays", "examples", ["1"]),
    ("pipeline", "examples", ["1"]),
    ("overlay-calls", "tests/cop", ["recurse", "100"]),
    ("runtime-probe", "tests/cop", ["printf"]),
]


def cop_run(coprof_bin, tmp_path, image, args, every, *options,
            reasons=None):
    """The run, its counters and its samples; with reasons (a list) also
    its --reasons-out lines into it."""
    samples = tmp_path / ("samples-%d-%s" % (every, "-".join(options)))
    out = tmp_path / ("reasons-%d-%s" % (every, "-".join(options)))
    more = ["--reasons-out", str(out)] if reasons is not None else []
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", str(every),
         "--samples-out", str(samples), "--fifo-depth", str(1 << 21),
         *more, *options, image, *args],
        capture_output=True, text=True, timeout=300)
    match = COUNTERS.search(proc.stderr)
    assert match, proc.stderr
    counters = dict(zip(("captures", "dropped", "instructions", "outside"),
                        (int(g) for g in match.groups())))
    if reasons is not None:
        reasons.extend(out.read_text().splitlines())
    return proc, counters, samples.read_text().split()


@pytest.mark.parametrize("every", [1, 7, 1000, 65537])
@pytest.mark.parametrize("name,folder,args", PROGRAMS,
                         ids=[p[0] for p in PROGRAMS])
def test_fast_mode_equals_reference_mode(coprof_bin, build_dir, tmp_path,
                                         name, folder, args, every):
    image = os.path.join(build_dir, folder, name + ".elf")
    fast_reasons, ref_reasons = [], []
    fast, fast_counters, fast_samples = cop_run(coprof_bin, tmp_path, image,
                                                args, every,
                                                reasons=fast_reasons)
    ref, ref_counters, ref_samples = cop_run(coprof_bin, tmp_path, image,
                                             args, every, "--reference",
                                             reasons=ref_reasons)
    assert fast.returncode == ref.returncode == 0, fast.stderr
    # SPU_INSTRUCTIONS: every capture is ISSUE, in both modes alike.
    assert fast_reasons == ref_reasons
    assert fast_reasons == [pc + " 0" for pc in fast_samples]
    assert fast.stdout == ref.stdout
    assert fast_counters == ref_counters
    assert fast_counters["dropped"] == 0
    assert fast_counters["captures"] == fast_counters["instructions"] // every
    assert len(fast_samples) == \
        fast_counters["captures"] - fast_counters["outside"]
    assert fast_samples == ref_samples


@pytest.mark.parametrize("every", [7, 1001])
@pytest.mark.parametrize("name,folder,args", PROGRAMS,
                         ids=[p[0] for p in PROGRAMS])
def test_dithered_fast_equals_reference(coprof_bin, build_dir, tmp_path,
                                        name, folder, args, every):
    """With --dither SEED both modes draw the same intervals: the same
    captures, sample for sample; about one per N instructions (the mean
    interval is N), and not the undithered sequence."""
    image = os.path.join(build_dir, folder, name + ".elf")
    seed = ["--dither", "424242"]
    fast, fast_counters, fast_samples = cop_run(coprof_bin, tmp_path, image,
                                                args, every, *seed)
    ref, ref_counters, ref_samples = cop_run(coprof_bin, tmp_path, image,
                                             args, every, "--reference",
                                             *seed)
    _, _, plain = cop_run(coprof_bin, tmp_path, image, args, every)
    assert fast.returncode == ref.returncode == 0, fast.stderr
    assert fast_counters == ref_counters
    assert fast_samples == ref_samples
    assert fast_samples != plain
    n = fast_counters["instructions"] / every
    assert abs(fast_counters["captures"] - n) <= 5 * n ** 0.5 + 2


def test_small_fifo_stall_loses_nothing(coprof_bin, build_dir, tmp_path):
    """--fifo-full stall into a 4-entry FIFO: nothing dropped, and the
    capture sequence is the one a FIFO too deep to fill gives; the
    stalls are counted."""
    image = os.path.join(build_dir, "examples", "pipeline.elf")
    samples = tmp_path / "samples"
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "7", "--fifo-depth", "4",
         "--fifo-full", "stall", "--samples-out", str(samples), image, "1"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    captures, dropped, instructions, outside = (
        int(g) for g in COUNTERS.search(proc.stderr).groups())
    stalls = re.search(r"^stalls=(\d+) stall_ns=(\d+)$", proc.stderr, re.M)
    assert stalls and int(stalls.group(1)) > 0, proc.stderr
    assert dropped == 0
    assert captures == instructions // 7
    _, deep, want = cop_run(coprof_bin, tmp_path, image, ["1"], 7)
    assert samples.read_text().split() == want
    assert deep["captures"] == captures


def test_boot_code_outside_local_store(coprof_bin, build_dir, tmp_path):
    """QEMU's reset code at 0x1000 runs before _start: counted, not queued."""
    image = os.path.join(build_dir, "examples", "kernels.elf")
    proc, counters, samples = cop_run(coprof_bin, tmp_path, image, ["1"], 1)
    assert proc.returncode == 0
    assert counters["outside"] > 0
    assert counters["captures"] == counters["instructions"]
    assert samples[0] == "0x00000"            # _start, the first LS address


def test_no_trace_runs_without_the_plugin(coprof_bin, build_dir, tmp_path):
    image = os.path.join(build_dir, "examples", "kernels.elf")
    samples = tmp_path / "samples"
    bare = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "100", "--samples-out",
         str(samples), "--no-trace", image, "1"],
        capture_output=True, text=True, timeout=120)
    traced, counters, _ = cop_run(coprof_bin, tmp_path, image, ["1"], 100)
    assert bare.returncode == traced.returncode == 0
    assert bare.stdout == traced.stdout
    assert bare.stderr == ""                  # no counters: no trace unit
    assert not samples.exists()
    assert counters["captures"] > 0


def test_small_fifo_drops_are_counted(coprof_bin, build_dir, tmp_path):
    image = os.path.join(build_dir, "examples", "pipeline.elf")
    samples = tmp_path / "samples"
    proc = subprocess.run(
        [coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "1", "--fifo-depth", "2",
         "--samples-out", str(samples), image, "1"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    captures, dropped, instructions, outside = (
        int(g) for g in COUNTERS.search(proc.stderr).groups())
    assert captures == instructions
    assert dropped > 0
    assert len(samples.read_text().split()) == captures - dropped - outside


@pytest.mark.parametrize("options,message", [
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "5", "--fifo-full", "wait"],
     "--fifo-full 'wait': not stall or drop"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "5", "--dither", "x"],
     "--dither 'x': not a decimal seed"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "0"], "--sample-every '0': not a count from 1 to "
                              "16777215"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "16777216"], "not a count from 1 to 16777215"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "9x"], "--sample-every '9x'"),
    (["--reference"], "--reference, --samples-out, --reasons-out, "
                      "--events-out, --no-watch, --exact-counts and "
                      "--call-graph need --sample-every N"),
    (["--reasons-out", "x"], "need --sample-every N"),
    (["--call-graph", "4"], "need --sample-every N"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "5", "--call-graph", "65"],
     "--call-graph '65': not a depth from 1 to 64"),
    (["--samples-out", "x"], "need --sample-every N"),
    (["--exact-counts", "x"], "need --sample-every N"),
    (["--events-out", "x"], "need --sample-every N"),
    (["--no-watch"], "need --sample-every N"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "5",
      "--events-out", "/nonexistent/dir/e"],
     "/nonexistent/dir/e: /nonexistent: no such directory"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "5",
      "--fifo-depth", "1000"],
     "FIFO depth 1000 is not a power of two"),
    (["--event", "SPU_INSTRUCTIONS", "--sample-every", "5",
      "--samples-out", "/nonexistent/dir/s"],
     "/nonexistent/dir/s: /nonexistent: no such directory"),
])
def test_trace_option_errors(coprof_bin, build_dir, options, message):
    image = os.path.join(build_dir, "examples", "kernels.elf")
    proc = subprocess.run([coprof_bin("cop-run"), *options, image, "1"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 125
    assert proc.stdout == ""                  # the program never ran
    assert proc.stderr.splitlines() == ["cop-run: " + proc.stderr[9:].strip()]
    assert message in proc.stderr


def test_missing_plugin_is_reported(coprof_bin, build_dir, tmp_path):
    image = os.path.join(build_dir, "examples", "kernels.elf")
    env = dict(os.environ, COPROF_TRACE_PLUGIN=str(tmp_path / "nothing.so"))
    proc = subprocess.run([coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "5",
                           image, "1"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 125
    assert "cannot find libcoptrace.so" in proc.stderr


def test_private_register_file_is_never_left_behind(coprof_bin, build_dir,
                                                    tmp_path):
    """cop-run unlinks its register file once QEMU has attached to it, so a
    run killed from outside leaves nothing in $TMPDIR."""
    image = os.path.join(build_dir, "examples", "kernels.elf")
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen([coprof_bin("cop-run"), "--event", "SPU_INSTRUCTIONS", "--sample-every", "1000",
                             image, "100000"], env=env,
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        start = time.monotonic()
        while time.monotonic() - start < 30:
            left = [f for f in os.listdir(tmp_path)
                    if f.startswith("coptrace-")]
            if not left and time.monotonic() - start > 0.5:
                break
            time.sleep(0.02)
        assert proc.poll() is None            # QEMU still runs
        assert not left
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert not [f for f in os.listdir(tmp_path) if f.startswith("coptrace-")]
