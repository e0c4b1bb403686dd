"""A short run of the decoder's libFuzzer target (`make fuzz` runs it long).

The target (fuzz-decoder.c) aborts on a crash, a sanitizer finding, a
difference between decoding whole and in pieces, a byte not accounted for,
or a delivered record that does not re-encode to its own bytes.  Here it
runs a fixed number of inputs with a fixed seed from the seed corpus that
fuzz_seeds.py writes.
"""

import os
import subprocess

import fuzz_seeds

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = 15000


def test_fuzz_decoder_briefly(build_dir, tmp_path):
    fuzzer = os.path.join(build_dir, "tests", "fuzz-copstream")
    assert os.access(fuzzer, os.X_OK), "%s is not built: run make" % fuzzer
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name, data in fuzz_seeds.seeds():
        (corpus / name).write_bytes(data)
    result = subprocess.run(
        [fuzzer, "-runs=%d" % RUNS, "-seed=1", "-max_total_time=60",
         "-max_len=16384", "-dict=" + os.path.join(HERE, "fuzz.dict"),
         "-artifact_prefix=%s/" % tmp_path, str(corpus)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Done %d runs" % RUNS in result.stderr or \
        "Done" in result.stderr, result.stderr[-3000:]
