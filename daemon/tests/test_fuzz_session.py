"""A short run of coprofd's fuzz target (daemon/fuzz-session.c) from its
seeds; `make fuzz` runs it for longer."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_fuzz_session_short_run(build_dir, test_image, tmp_path):
    fuzzer = os.path.join(build_dir, "tests", "fuzz-session")
    assert os.access(fuzzer, os.X_OK), "%s is not built: run make" % fuzzer
    corpus = tmp_path / "corpus"
    image = test_image("overlays.elf")
    subprocess.run([sys.executable, os.path.join(HERE, "fuzz_seeds.py"),
                    str(corpus), "--image", image], check=True)
    result = subprocess.run(
        [fuzzer, "-max_total_time=12", "-max_len=16384", "-timeout=10",
         "-artifact_prefix=%s/" % tmp_path, str(corpus)],
        env=dict(os.environ, COPROFD_FUZZ_IMAGE=image),
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Done" in result.stderr
