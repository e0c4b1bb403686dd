"""coprofd end to end with copsim (issue 8): a real stream recorded by
`copsim --event=SPU_CYCLES:N --stream-out FILE -- host-pipeline`, with more
contexts than slots so that they are time-sliced, replayed by `coprofd
--replay`.  Per context, the session holds exactly the samples the stream
carries for it (as `copstream check` and the Python decoder count them);
the totals, the losses and the images agree; and across the whole
pipeline the trace unit's captures are conserved: every capture of a slot
is a sample or a loss of that slot in the stream, and a slot captured
exactly one instruction in N of those it ran.  Run with lossless and
overflowing FIFOs."""

import collections
import os
import re
import subprocess

import coprof_stream as cs
import pytest
from coprofd_support import open_session

CONTEXTS = 8            # on 2 slots, from 6 threads: time-sliced
SLOT_LINE = re.compile(r"^copsim: slot (\d+): captures=(\d+) dropped=(\d+) "
                       r"outside=(\d+) cycles=(\d+) stalls=\d+ "
                       r"stall_ns=\d+$", re.M)


def record(coprof_bin, build_dir, tmp_path, every, fifo_depth, options):
    """Runs host-pipeline under the one-command copsim, undithered, with
    the extra copsim options given, time-sliced: its scheduler binds
    nothing until 6 contexts (one per host thread) wait (copsim's
    COPSIM_TEST_GATHER hook), so 4 of them wait while 2 run and the running
    ones are preempted, however the emulators' starts overlap.  Returns the
    stream path, the host program's path and copsim's stderr."""
    host = os.path.join(build_dir, "examples", "host-pipeline")
    stream = tmp_path / "stream"
    proc = subprocess.run(
        [coprof_bin("copsim"), "--event=SPU_CYCLES:%d" % every,
         "--stream-out", str(stream), "--slots", "2", "--slice", "20000",
         "--fifo-depth", str(fifo_depth), "--no-dither"] + options + [
         "--", host, "--threads", "6",
         "--contexts", str(CONTEXTS), "--frames", "2", "--rounds", "2",
         "--console-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, COPSIM_TEST_GATHER="6"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    binds = [int(n) for n in re.findall(r" binds=(\d+) ", proc.stdout)]
    assert len(binds) == CONTEXTS, proc.stdout
    assert sum(binds) > CONTEXTS, proc.stdout      # time-sliced
    return stream, host, proc.stderr


def stream_counts(stream):
    """Per context id: samples and lost; per slot: samples and lost; the
    decoder's stats.  A slot's samples and losses belong to the context
    its last CONTEXT named, until RELEASE."""
    events, stats = cs.decode(stream.read_bytes())
    bound = {}
    samples, lost = collections.Counter(), collections.Counter()
    slot_samples, slot_lost = collections.Counter(), collections.Counter()
    for event in events:
        if isinstance(event, cs.Sample):
            samples[bound[event.slot]] += 1
            slot_samples[event.slot] += 1
        elif isinstance(event, cs.Record) and event.name == "context":
            bound[event.fields["slot"]] = event.fields["context_id"]
        elif isinstance(event, cs.Record) and event.name == "release":
            bound[event.fields["slot"]] = None
        elif isinstance(event, cs.Record) and event.name == "lost":
            slot = event.fields["slot"]
            lost[bound.get(slot)] += event.fields["count"]
            slot_lost[slot] += event.fields["count"]
    return samples, lost, slot_samples, slot_lost, stats


# A sparse run that loses nothing (FIFOs that stall when full, the
# default), and a dense one into 4-entry FIFOs that drop, as the Cell's
# did, and lose most captures to overflow (at a nominal clock of 100 kHz,
# so that the minimum-rate rule takes N = 13 with such a FIFO).  Both
# undithered: a slot captures exactly one instruction in N.
@pytest.mark.parametrize("every,fifo_depth,options", [
    (997, 1024, []),
    (13, 4, ["--fifo-full=drop", "--clock", "100kHz"])],
    ids=["sparse", "overflowing"])
def test_session_equals_the_copsim_stream(coprof_bin, build_dir, tmp_path,
                                          every, fifo_depth, options):
    stream, host, copsim_err = record(coprof_bin, build_dir, tmp_path, every,
                                      fifo_depth, options)

    check = subprocess.run([coprof_bin("copstream"), "check", str(stream)],
                           capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stderr
    checked = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", check.stdout)}
    assert checked["errors"] == 0 and checked["samples"] > 0

    samples, lost, slot_samples, slot_lost, stats = stream_counts(stream)
    assert stats.summary() == check.stdout.strip()
    assert sum(samples.values()) == checked["samples"]
    assert sum(lost.values()) == checked["lost"]
    assert None not in samples
    assert len(samples) == CONTEXTS
    # Time slicing happened: contexts were bound more than once.
    assert checked["contexts"] > CONTEXTS

    session = tmp_path / "session"
    replay = subprocess.run(
        [coprof_bin("coprofd"), "--replay", str(stream), "--session-dir",
         str(session)], capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr
    line = [x for x in (replay.stdout + replay.stderr).splitlines()
            if x.startswith("coprofd: ") and "samples=" in x]
    assert len(line) == 1, replay.stdout + replay.stderr
    summary = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line[0])}
    assert summary["samples"] == checked["samples"]
    assert summary["lost"] == checked["lost"]
    assert summary["errors"] == 0 and summary["contexts"] == CONTEXTS

    db = open_session(str(session))
    keys = dict(db.execute("SELECT key, value FROM session"))
    assert int(keys["stream.complete"]) == 1
    assert int(keys["stream.samples"]) == checked["samples"]
    assert int(keys["stream.lost"]) == checked["lost"]
    assert int(keys["stream.errors"]) == 0
    assert int(keys["stream.stop_samples"]) == checked["samples"]
    assert int(keys["stream.stop_lost"]) == checked["lost"]

    # Per context: the session's totals are the stream's samples for it.
    totals, session_lost = collections.Counter(), collections.Counter()
    for context_id, n, n_lost in db.execute(
            "SELECT c.context_id, t.exact + t.unmapped + t.ambiguous"
            " + t.pending, t.lost"
            " FROM context_totals t JOIN contexts c ON c.id = t.context"):
        totals[context_id] += n
        session_lost[context_id] += n_lost
    assert totals == samples
    assert sum(session_lost.values()) == checked["lost"]
    assert +session_lost == +lost
    if fifo_depth == 4:
        assert checked["lost"] > 0

    # Every context's image is host-pipeline's embedded copy, resolved.
    images = db.execute(
        "SELECT DISTINCT i.path, i.image_offset, i.status, i.short_name"
        " FROM contexts c JOIN images i ON i.id = c.image").fetchall()
    assert {name for _, _, _, name in images} == \
        {"kernels", "overlays", "pipeline"}
    for path, offset, status, name in images:
        assert os.path.realpath(path) == os.path.realpath(host), name
        assert offset > 0 and status == "ok", (name, offset, status)
    assert db.execute("SELECT COUNT(*) FROM samples").fetchone()[0] > 0

    # Conservation through the pipeline: the trace unit's captures of each
    # slot are its samples plus its losses in the stream, and it captured
    # one instruction in EVERY of those that ran on it.
    slots = {int(s): tuple(map(int, rest))
             for s, *rest in SLOT_LINE.findall(copsim_err)}
    assert slots, copsim_err
    assert set(slots) == set(slot_samples) | set(slot_lost)
    for slot, (captures, dropped, outside, cycles) in slots.items():
        assert captures == slot_samples[slot] + slot_lost[slot], slot
        assert captures == cycles // every, slot
    assert sum(c for c, *_ in slots.values()) == \
        checked["samples"] + checked["lost"]
    db.close()
