"""DMA between the local store and the data window (cop.h's cop_dma_*,
docs/coprocessor-abi.md "DMA"), through cop-run and the trace unit, on
the dma-probe program (sdk/tests/dma-probe.c):

- a get waited for at once: the exact counts' DMA-wait cycles at the wait
  marker equal the model's arithmetic (latency + bytes / bandwidth, less
  the cycles of the instructions between the issue and the wait);
- data arrives only at the wait (a get and a put read before it see the
  old bytes), tags complete independently, and a DMA over code runs the
  new code afterwards (no stale translation);
- a bad tag, a range outside the local store or the data window, a
  misaligned size and a 17th outstanding command end the program with
  one "cop: dma:" line and status 134;
- the captures are the same in the fast and the reference modes, and so
  are their stall reasons; a DMA-wait capture names the tag and the get
  that issued it (cop-run --reasons-out);
- through copsim and coprofd, each (function, stall reason) share of the
  session's samples is within 3.5 sigma of the exact share, on an idle
  and a busy machine, and dma_wait_samples names the wait, the tag and
  the issuing get (its file offset resolved).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "tests"))
import exact_counts  # noqa: E402
import stall_shares  # noqa: E402

# emulator/timing/spu.model
DMA_LATENCY, DMA_BYTES_PER_CYCLE = 300, 8
ISSUE_MARK, WAIT_MARK = 0x7c10100f, 0x7c20100f


@pytest.fixture(scope="module")
def probe(test_image):
    return test_image("dma-probe")


def traced(run, probe, case, tmp_path, every=1000, reference=False):
    tmp_path.mkdir(exist_ok=True)
    counts = str(tmp_path / (case + ".counts"))
    samples = str(tmp_path / (case + ".samples"))
    options = ["--sample-every", str(every), "--exact-counts", counts,
               "--samples-out", samples, "--fifo-depth", "65536",
               "--reasons-out", samples + ".reasons"]
    if reference:
        options.append("--reference")
    proc = run(probe, case, options=options)
    return proc, counts, samples


def markers(counts):
    """{word: pc} of the DMA markers that ran."""
    found = {}
    for run in exact_counts.read_counts(counts):
        for code in run.codes:
            for insn in code.insns:
                word = int.from_bytes(insn.data, "little")
                if word in (ISSUE_MARK, WAIT_MARK):
                    found[word] = insn.pc
    return found


def test_wait_cycles_are_the_models_arithmetic(run, probe, tmp_path):
    proc, counts, _ = traced(run, probe, "time", tmp_path)
    assert proc.returncode == 0, proc.stderr
    cycles = exact_counts.cycles_by_pc(counts)
    mark = markers(counts)
    issue, wait = mark[ISSUE_MARK], mark[WAIT_MARK]
    assert issue < wait
    # time_one runs three times, for 16, 4096 and 16384 bytes: each
    # transfer finds the bus free, so it completes latency + size/8
    # cycles after its issue marker; the wait marker comes the cycles of
    # the instructions after the issue marker, up to itself, later.
    between = sum(cycles[pc]["issue"] + cycles[pc]["dependency"]
                  + cycles[pc]["branch"]
                  for pc in cycles if issue < pc <= wait)
    expected = sum(DMA_LATENCY + size // DMA_BYTES_PER_CYCLE
                   for size in (16, 4096, 16384)) - between
    assert cycles[wait]["dma_wait"] == expected
    assert sum(c["dma_wait"] for c in cycles.values()) == expected
    assert sum(c["mailbox_wait"] + c["memory"] for c in cycles.values()) == 0


def test_data_arrives_only_at_the_wait(run, probe, tmp_path):
    proc, _, _ = traced(run, probe, "stale", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["get before=b0b after=a11ce",
                                        "put before=0 after=c0de"]


def test_tags_complete_independently(run, probe, tmp_path):
    # Tag 1's transfer holds the bus first; tag 2's follows it: a wait for
    # either returns tag 1 alone, tag 2's bytes are still the old ones, and
    # waiting for tag 2 brings them.
    proc, counts, _ = traced(run, probe, "tags", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "any=2 status=0 first=111 second=0", "all=4 second=222"]


def test_dma_into_code_runs_the_new_code(run, probe, tmp_path):
    proc, _, _ = traced(run, probe, "code", tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["code before=1 stale=1 after=2"]


def test_untraced_runs_complete_at_the_wait(run, probe):
    proc = run(probe, "tags")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "any=6 status=4 first=111 second=222", "all=4 second=222"]


@pytest.mark.parametrize("case, message", [
    ("bad-tag", "cop: dma: get with tag 32: tags are 0..31"),
    ("bad-ls", "cop: dma: get of 32 bytes at ls 0x8003fff0: outside the "
               "local store"),
    ("bad-ea", "cop: dma: get of 32 bytes at ea 0x80dffff0: outside the "
               "data window"),
    ("misaligned", "cop: dma: get of 20 bytes ls 0x"),
    ("overflow", "cop: dma: get with 16 commands outstanding: the queue is "
                 "full"),
])
def test_bad_transfers_are_a_clean_fault(run, probe, tmp_path, case, message):
    proc, _, _ = traced(run, probe, case, tmp_path)
    assert proc.returncode == 134, proc.stderr
    assert message in proc.stdout
    assert "not refused" not in proc.stdout


def test_dma_wait_captures_name_the_transfer(run, probe, tmp_path):
    """cop-run --reasons-out: every DMA-wait capture of time_one is at its
    wait, on tag 5, issued by its get (the issue marker's LS address)."""
    proc, counts, samples = traced(run, probe, "time", tmp_path, every=37)
    assert proc.returncode == 0, proc.stderr
    ls_base = exact_counts.read_counts(counts)[0].ls_base
    mark = markers(counts)
    waits = [line.split() for line in open(samples + ".reasons")
             if line.split()[1] == "3"]
    assert len(waits) > 20
    assert {tuple(w) for w in waits} == {
        ("0x%05x" % (mark[WAIT_MARK] - ls_base), "3", "5",
         "0x%05x" % (mark[ISSUE_MARK] - ls_base))}
    with open(samples) as f:
        assert [line.split()[0] for line in open(samples + ".reasons")] \
            == f.read().split()


@pytest.mark.parametrize("case", ["time", "tags"])
def test_fast_and_reference_captures_agree(run, probe, tmp_path, case):
    fast, counts_fast, samples_fast = traced(run, probe, case,
                                             tmp_path / "f", every=37)
    ref, counts_ref, samples_ref = traced(run, probe, case, tmp_path / "r",
                                          every=37, reference=True)
    assert fast.returncode == ref.returncode == 0
    with open(samples_fast) as f, open(samples_ref) as r:
        assert f.read() == r.read()
    # The same reason (and transfer) for every capture, DMA waits among them.
    with open(samples_fast + ".reasons") as f, \
            open(samples_ref + ".reasons") as r:
        fast_reasons, ref_reasons = f.read(), r.read()
    assert fast_reasons == ref_reasons
    assert any(line.split()[1] == "3"
               for line in fast_reasons.splitlines())
    assert (exact_counts.cycles_by_pc(counts_fast)
            == exact_counts.cycles_by_pc(counts_ref))


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_session_dma_wait_shares(build_dir, probe, tmp_path, busy):
    with stall_shares.burners(2 if busy else 0):
        db, counts = stall_shares.record(
            build_dir, [os.path.join(build_dir, "tests", "cop-host"), probe,
                        "time"], tmp_path)
    got, want = stall_shares.compare(db, counts, probe)
    dma_wait = exact_counts.REASONS.index("dma_wait")
    assert got[("time_one", dma_wait)] > 0
    [(run,)] = [exact_counts.read_counts(path) for path in counts]
    mark = markers(counts[0])
    offsets = {a.pc: a.file_offset
               for a in exact_counts.attribute(counts[0], probe)}
    rows = db.execute("SELECT file_offset, tag, issuer_ls_addr,"
                      " issuer_offset, count FROM dma_wait_samples").fetchall()
    assert rows == [(offsets[mark[WAIT_MARK]], 5,
                     mark[ISSUE_MARK] - run.ls_base,
                     offsets[mark[ISSUE_MARK]], got[("time_one", dma_wait)])]
