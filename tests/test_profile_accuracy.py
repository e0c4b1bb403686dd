"""The whole user path, judged against the truth, on an idle machine and
beside two CPU-burning processes.

`coprof record` profiles examples/host-pipeline (pipeline, kernels and
overlays contexts, embedded in the host executable) at SPU_CYCLES:997
with the defaults a user gets (the 4096-entry FIFO, FIFO-full policy
stall, dither on) while its private copsim also writes every context's
exact counts (`copsim --exact-counts`, reference mode).
`copreport --format json` then gives the per-symbol profile;
profile_truth.py and the report's own symbolizer turn the exact counts'
modelled cycles (what SPU_CYCLES samples) into the true share of every
function.

The run is made twice: alone, and with two processes spinning on the CPU
beside it (as many as this machine's cores: the case where the driver's
poll thread is late and a FIFO would overflow).  Both times no capture may
be lost (stall: the coprocessor waits for the driver instead), and every
function above 1% of the instructions, overlay functions included, must
lie within 3 binomial standard errors of its true share.  The trace
unit's overlay watch places every guard change in the sample stream, so
no sample may be ambiguous.
"""

import os
import subprocess

import pytest

import profile_truth

COUNT = 997             # prime: no loop of the examples has that period
ARGS = ["--contexts", "8", "--threads", "4", "--frames", "2", "--rounds", "3"]
ABOVE = 0.01            # the share above which a function is judged
SIGMAS = 3.0
BURNERS = 2
BURN_SECONDS = 900      # a burner ends by itself even if never stopped

BURN = "import time\nend = time.monotonic() + %d\n" \
       "while time.monotonic() < end:\n    pass\n" % BURN_SECONDS


@pytest.fixture(scope="module")
def cpu_burners():
    """Starts BURNERS processes spinning on the CPU; a function that stops
    them (killed and reaped), also called at the module's end."""
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", BURN])
             for _ in range(BURNERS)]

    def stop():
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            p.wait()
    yield stop
    stop()


@pytest.fixture(scope="module", params=["idle", "loaded"])
def recorded(request, build_dir, coprof_bin, tmp_path_factory):
    top = tmp_path_factory.mktemp("accuracy-" + request.param)
    host = os.path.join(build_dir, "examples", "host-pipeline")
    stop = request.getfixturevalue("cpu_burners") \
        if request.param == "loaded" else None
    try:
        rec = profile_truth.record(
            coprof_bin("coprof"), coprof_bin("copreport"), top,
            [host] + ARGS, ["--event=SPU_CYCLES:%d" % COUNT])
    finally:
        if stop:
            stop()
    return dict(rec._asdict(), host=host, load=request.param, rec=rec)


def test_every_context_has_exact_counts(recorded):
    contexts = recorded["profile"]["contexts"]
    assert len(contexts) == 8
    for context in contexts:
        path = os.path.join(recorded["counts"], "context-%d.counts"
                            % context["context_id"])
        assert profile_truth.exact_counts.total_instructions(path) > 0


def test_sampled_with_the_user_defaults(recorded):
    """What this run is about: stall, dither, the default FIFO."""
    smp = recorded["profile"]["sampling"]
    assert (smp["period_cycles"], smp["fifo_full"], smp["dither"]) == \
        (COUNT, "stall", "on")
    assert smp["dither_seed"]


def test_nothing_lost(recorded):
    """No capture lost to the FIFO or the driver's buffer, idle or
    loaded.  A capture of QEMU's reset code (outside-ls) is no sample of
    the coprocessor's program: it is counted, but not a loss of shares."""
    profile = recorded["profile"]
    lost = {c["cause_name"]: c["count"] for c in profile["lost_by_cause"]}
    assert set(lost) <= {"outside-ls"}, lost
    assert lost.get("outside-ls", 0) <= len(profile["contexts"])
    assert not [g for g in profile["groups"] if g["biased"]]
    assert profile["warnings"] == []


def test_shares_agree_with_exact_counts(recorded, build_dir):
    symbols = profile_truth.report_package(build_dir)
    rec = recorded["rec"]
    profile = rec.profile
    assert profile["totals"]["ambiguous"] == 0
    assert profile["totals"]["pending"] == 0
    n = profile["totals"]["samples"]
    assert n > 5000, "too few samples to judge: %d" % n

    verdicts = profile_truth.judge(profile_truth.true_counts(rec, symbols,
                                                             cycles=True),
                                   profile_truth.sampled_counts(profile), n,
                                   ABOVE, SIGMAS)
    wrong = [profile_truth.describe(v) for v in verdicts
             if abs(v.got - v.share) > v.error]
    assert not wrong, "%s: %s" % (recorded["load"], "; ".join(wrong))
    names = {v.key[1] for v in verdicts}
    # The examples' hot functions (examples/README.md) are all judged.
    for name in ("stage_denoise", "matrix_multiply", "crc32_bitwise",
                 "crc16_bitwise", "count_primes", "blur_picture",
                 "shell_sort", "histogram_median"):
        assert name in names, sorted(names)


def test_overlay_functions_are_rows_of_their_own_overlay(recorded):
    rows = [r for r in recorded["profile"]["rows"] if r["kind"] == "exact"]
    hot = {"blur_picture": ".overlay.blur", "crc16_bitwise": ".overlay.crc",
           "histogram_median": ".overlay.histogram",
           "count_primes": ".overlay.sieve", "shell_sort": ".overlay.sort"}
    for name, section in hot.items():
        mine = [r for r in rows if r["symbol"] == name]
        assert mine, name
        assert {r["overlay"] for r in mine} == {section}, mine
    # Overlays of one region share local-store addresses: distinct rows at
    # distinct file offsets.
    blur = next(r for r in rows if r["symbol"] == "blur_picture")
    crc = next(r for r in rows if r["symbol"] == "crc16_bitwise")
    assert blur["file_offset_lo"] != crc["file_offset_lo"]


def test_embedded_images_resolve_to_the_host_binary(recorded):
    profile = recorded["profile"]
    names = {i["short_name"] for i in profile["images"]}
    assert names == {"pipeline", "kernels", "overlays"}
    with open(recorded["host"], "rb") as f:
        host = f.read()
    for image in profile["images"]:
        assert os.path.realpath(image["path"]) == \
            os.path.realpath(recorded["host"])
        assert image["status"] == "ok"
        offset = image["image_offset"]
        assert offset > 0 and host[offset:offset + 4] == b"\x7fELF"
