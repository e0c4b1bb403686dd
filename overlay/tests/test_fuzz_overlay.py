"""A short libFuzzer run of overlay/ (build/tests/fuzz-overlay) in make check.

The corpus starts from the test images; the run lasts FUZZ_SECONDS and must
end without a crash, a sanitizer report or a broken resolution rule (the
target aborts on those).  `make fuzz` runs the same target for longer.
"""

import os
import shutil
import subprocess

FUZZ_SECONDS = 20


def test_fuzz_briefly(build_dir, overlay_image, tmp_path):
    fuzzer = os.path.join(build_dir, "tests", "fuzz-overlay")
    assert os.access(fuzzer, os.X_OK), "%s is not built: run make" % fuzzer
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("overlays.elf", "plain.elf"):
        shutil.copy(overlay_image(name), corpus)
    result = subprocess.run(
        [fuzzer, "-max_total_time=%d" % FUZZ_SECONDS, "-timeout=10",
         "-rss_limit_mb=2048", "-artifact_prefix=%s/" % tmp_path,
         str(corpus)],
        capture_output=True, text=True, timeout=FUZZ_SECONDS + 120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Done" in result.stderr
    assert not [f for f in os.listdir(tmp_path) if f.startswith("crash-")]
