"""The whole user path, judged against the truth.

`coprof record` profiles examples/host-pipeline (pipeline, kernels and
overlays contexts, embedded in the host executable) while its private
copsim also writes every context's exact instruction counts (`copsim
--exact-counts`, reference mode).  `copreport --format json` then gives the
per-symbol profile; tests/exact_counts.py and the report's own symbolizer
turn the exact counts into the true share of every function.

For every function above 1% of the instructions, overlay functions
included, the sampled share must lie within 3 binomial standard errors of
the true share.  The trace unit's overlay watch places every guard change
in the sample stream, so no sample of this run may be ambiguous.
"""

import json
import math
import os
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TESTS)
import exact_counts  # noqa: E402

COUNT = 997             # prime: no loop of the examples has that period
ARGS = ["--contexts", "8", "--threads", "4", "--frames", "2", "--rounds", "3"]
ABOVE = 0.01            # the share above which a function is judged
SIGMAS = 3.0


def report_package(build_dir):
    path = os.path.join(build_dir, "lib", "coprof", "python")
    if path not in sys.path:
        sys.path.insert(0, path)
    from coprof_report import symbols
    return symbols


@pytest.fixture(scope="module")
def recorded(build_dir, coprof_bin, tmp_path_factory):
    top = tmp_path_factory.mktemp("accuracy")
    counts = top / "counts"
    counts.mkdir()
    session = top / "session"
    host = os.path.join(build_dir, "examples", "host-pipeline")
    run = subprocess.run(
        [coprof_bin("coprof"), "record", "--event=SPU_CYCLES:%d" % COUNT,
         "-o", str(session), "--quiet",
         "--copsim-arg=--exact-counts=%s" % counts,
         # Deep FIFOs: on a busy machine the default 1024 entries may
         # overflow, and lost samples would skew the shares being judged.
         "--copsim-arg=--fifo-depth=16384", "--", host] + ARGS,
        capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    report = subprocess.run(
        [coprof_bin("copreport"), "-d", str(session), "--format", "json",
         "--separate", "none"], capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    return dict(session=session, counts=counts, host=host,
                profile=json.loads(report.stdout))


def true_counts(recorded, symbols):
    """{(image id, function, section): instructions}, over every context
    of the session, from the exact counts: the key of the report's rows."""
    profile = recorded["profile"]
    images = {i["id"]: i for i in profile["images"]}
    truth = {}
    for context in profile["contexts"]:
        image = images[image_id_of(profile, context)]
        path, base = image["path"], image["image_offset"]
        sym = symbols.symbolizer(path, base)
        counts_file = recorded["counts"] / ("context-%d.counts"
                                            % context["context_id"])
        for offset, n in exact_counts.counts_by_file_offset(
                str(counts_file), path, base).items():
            f = sym.function_at(offset - base)
            name = f.name if f else None
            section = f.section if f else None
            key = (image["id"], name, section)
            truth[key] = truth.get(key, 0) + n
    return truth


def image_id_of(profile, context):
    """The image id of a context of the JSON profile (it names the short
    name; the image list holds the ids)."""
    for image in profile["images"]:
        if image["short_name"] == context["image"]:
            return image["id"]
    raise AssertionError("context %r names no image" % (context,))


def test_every_context_has_exact_counts(recorded):
    contexts = recorded["profile"]["contexts"]
    assert len(contexts) == 8
    for context in contexts:
        path = recorded["counts"] / ("context-%d.counts"
                                     % context["context_id"])
        assert exact_counts.total_instructions(str(path)) > 0


def test_shares_agree_with_exact_counts(recorded, build_dir):
    symbols = report_package(build_dir)
    profile = recorded["profile"]
    truth = true_counts(recorded, symbols)
    n = profile["totals"]["samples"]
    # A capture of QEMU's reset code (outside-ls) is no loss of the shares.
    lost = {c["cause_name"]: c["count"] for c in profile["lost_by_cause"]}
    assert set(lost) <= {"outside-ls"}, lost
    assert profile["totals"]["ambiguous"] == 0
    assert profile["totals"]["pending"] == 0
    instructions = sum(truth.values())
    assert n > 5000, "too few samples to judge: %d" % n

    sampled = {}
    for row in profile["rows"]:
        if row["kind"] == "exact":
            key = (row["image_id"], row["symbol"], row["section"])
            sampled[key] = sampled.get(key, 0) + row["samples"]

    judged = []
    for key, count in sorted(truth.items(), key=lambda kv: -kv[1]):
        share = count / instructions
        if share < ABOVE or key[1] is None:
            continue
        error = SIGMAS * math.sqrt(share * (1 - share) / n)
        got = sampled.get(key, 0) / n
        judged.append(key)
        assert abs(got - share) <= error, (
            "%s in %s: true share %.4f, sampled %.4f, 3 SE %.4f"
            % (key[1], key[2], share, got, error))
    names = {key[1] for key in judged}
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
