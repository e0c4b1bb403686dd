"""A recorded profile judged against the exact instruction counts: what
the accuracy and aliasing tests share.

    record(coprof, copreport, workdir, command, flags)
        runs `coprof record FLAGS --copsim-arg=--exact-counts=DIR --
        COMMAND` (copsim's reference mode counts every instruction of
        every context) and returns a Recorded: the session, the counts
        folder, the summary line, and the `copreport --format json`
        profile.
    true_counts(recorded, symbols, cycles=False)
        {(image id, function, section): instructions} over every context
        (cycles: modelled cycles, the truth of SPU_CYCLES samples), by
        the report's own symbolizer: the keys of sampled_counts().
    sampled_counts(profile)
        {(image id, function, section): exact samples} of the report.
    judge(truth, sampled, samples, above, sigmas)
        a Verdict per function whose true share is above `above`: its
        true share, the sampled one and `sigmas` binomial standard errors.

Standard library and the tree's modules only (/usr/bin/python3).
"""

import collections
import json
import math
import os
import re
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
import exact_counts  # noqa: E402

Recorded = collections.namedtuple("Recorded",
                                  "session counts summary profile")
Verdict = collections.namedtuple("Verdict", "key share got error")

SUMMARY = re.compile(r"^coprof: samples=(\d+) lost=(\d+) .*$", re.M)


def report_package(build_dir):
    """copreport's package (for its symbolizer), from the build."""
    path = os.path.join(build_dir, "lib", "coprof", "python")
    if path not in sys.path:
        sys.path.insert(0, path)
    from coprof_report import symbols
    return symbols


def record(coprof, copreport, workdir, command, flags=(), timeout=600):
    """Records command with exact counts; fails loudly (AssertionError)
    when coprof or copreport do."""
    counts = os.path.join(str(workdir), "counts")
    session = os.path.join(str(workdir), "session")
    os.makedirs(counts)
    run = subprocess.run(
        [coprof, "record", "-o", session,
         "--copsim-arg=--exact-counts=%s" % counts] + list(flags) +
        ["--"] + list(command),
        capture_output=True, text=True, timeout=timeout)
    assert run.returncode == 0, run.stderr
    summary = SUMMARY.search(run.stderr)
    assert summary, run.stderr
    report = subprocess.run(
        [copreport, "-d", session, "--format", "json", "--separate", "none"],
        capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    return Recorded(session, counts, run.stderr, json.loads(report.stdout))


def image_id_of(profile, context):
    """The image id of a context of the JSON profile (it names the short
    name; the image list holds the ids)."""
    for image in profile["images"]:
        if image["short_name"] == context["image"]:
            return image["id"]
    raise AssertionError("context %r names no image" % (context,))


def true_counts(recorded, symbols, cycles=False):
    profile = recorded.profile
    images = {i["id"]: i for i in profile["images"]}
    truth = {}
    for context in profile["contexts"]:
        image = images[image_id_of(profile, context)]
        path, base = image["path"], image["image_offset"]
        sym = symbols.symbolizer(path, base)
        counts_file = os.path.join(recorded.counts, "context-%d.counts"
                                   % context["context_id"])
        for offset, n in exact_counts.counts_by_file_offset(
                counts_file, path, base, cycles).items():
            f = sym.function_at(offset - base)
            key = (image["id"], f.name if f else None,
                   f.section if f else None)
            truth[key] = truth.get(key, 0) + n
    return truth


def sampled_counts(profile):
    sampled = {}
    for row in profile["rows"]:
        if row["kind"] == "exact":
            key = (row["image_id"], row["symbol"], row["section"])
            sampled[key] = sampled.get(key, 0) + row["samples"]
    return sampled


def judge(truth, sampled, samples, above, sigmas):
    """Verdicts of the functions above `above` of the instructions,
    largest first; ok when abs(got - share) <= error."""
    instructions = sum(truth.values())
    out = []
    for key, count in sorted(truth.items(), key=lambda kv: -kv[1]):
        share = count / instructions
        if share < above or key[1] is None:
            continue
        error = sigmas * math.sqrt(share * (1 - share) / samples)
        out.append(Verdict(key, share, sampled.get(key, 0) / samples, error))
    return out


def describe(v):
    return "%s in %s: true share %.4f, sampled %.4f, bound %.4f" % (
        v.key[1], v.key[2], v.share, v.got, v.error)
