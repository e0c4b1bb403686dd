"""coprofd --replay on streams with known content.

Random runs come from coprofd_support.Simulation, which keeps the true
guard state behind every sample; coprofd's session must hold exactly what
the Model of the attribution rules predicts, and the Model checks the rules
against the truth as it goes (an exact sample is where it really was, an
ambiguous one has its true place among its candidates).
"""

import collections
import re
import subprocess

import coprof_stream as cs
import pytest

from coprofd_support import (Model, Simulation, Writer, identity,
                             layout_of_overlay_test_image, open_session,
                             session_counts)


def replay(coprofd, stream_bytes, tmp_path, name="session"):
    stream = tmp_path / (name + ".bin")
    stream.write_bytes(stream_bytes)
    session = tmp_path / name
    result = coprofd("--replay", stream, "--session-dir", session)
    assert result.returncode == 0, result.stderr
    return stream, session, result


def summary(result):
    line = result.stdout.strip().splitlines()[-1]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


@pytest.fixture(scope="module")
def image_sets(test_image, example_image, resolver):
    """Images a run's contexts use: overlay/'s test images (the first one's
    layout is known: layout_of_overlay_test_image), or the SDK's overlays
    and kernels examples."""
    return {
        "test": [layout_of_overlay_test_image(test_image("overlays.elf")),
                 resolver.info(test_image("plain.elf"))],
        "examples": [resolver.info(example_image("overlays")),
                     resolver.info(example_image("kernels"))],
    }


RUNS = ([("test", n, "none") for n in range(1, 7)] +
        [("examples", n, "none") for n in range(1, 5)] +
        [("test", n, "half") for n in range(7, 10)] +
        [("examples", n, "half") for n in range(5, 7)] +
        [("test", n, "all") for n in range(10, 12)] +
        [("examples", n, "all") for n in range(7, 9)])


@pytest.mark.parametrize("images, seed, watch", RUNS)
def test_random_run_matches_model(images, seed, watch, image_sets, tmp_path,
                                  resolver, coprofd, coprof_bin):
    """watch: which contexts have the overlay watch on (placed OVERLAYs
    among their samples, no poll reads reported)."""
    sim = Simulation(seed, image_sets[images], slots=3, contexts=5,
                     steps=150, watch=watch)
    stream, session, result = replay(coprofd, sim.writer.bytes(), tmp_path)
    model = Model(sim, resolver)
    db = open_session(session)
    exact, ambiguous, unmapped = session_counts(db)

    assert exact == model.exact
    assert ambiguous == model.ambiguous
    assert unmapped == model.unmapped
    assert db.execute("SELECT COUNT(*) FROM pending_samples"
                      ).fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM orphan_samples").fetchone()[0] == 0
    placed = db.execute("SELECT COUNT(*) FROM overlay_events WHERE placed"
                        ).fetchone()[0]
    assert placed == sim.placed
    if watch == "none":
        assert sum(model.ambiguous.values()) > 0, "a run without ambiguity"
    else:
        assert placed > 0, "a run without placed changes"
    if watch == "all":
        # Only the tails the stop leaves are ambiguous: the placed changes
        # open no window.
        assert all(key[4] == -1 for key in model.ambiguous)

    # Per context, every sample the driver drained is in the session once.
    per_context = collections.Counter()
    for context_id, total in db.execute(
            "SELECT c.context_id, t.exact + t.ambiguous + t.unmapped"
            " FROM context_totals t JOIN contexts c ON c.id = t.context"):
        per_context[context_id] += total
    assert per_context == model.per_context

    # The timeline holds the exact samples of groups closed by TIME.
    timeline = collections.Counter()
    for context_id, total in db.execute(
            "SELECT c.context_id, SUM(t.count) FROM sample_timeline t"
            " JOIN contexts c ON c.id = t.context GROUP BY c.context_id"):
        timeline[context_id] = total
    assert timeline == model.timeline

    # The same totals as copstream check, and in the summary line.
    check = subprocess.run([coprof_bin("copstream"), "check", str(stream)],
                           capture_output=True, text=True)
    counted = dict(re.findall(r"(\w+)=(\d+)", check.stdout))
    numbers = summary(result)
    assert int(counted["samples"]) == numbers["samples"] == sim.writer.samples
    assert int(counted["errors"]) == numbers["errors"] == 0
    assert numbers["exact"] == sum(model.exact.values())
    assert numbers["ambiguous"] == sum(model.ambiguous.values())
    assert numbers["lost"] == sim.writer.lost
    assert int(counted["lost"]) == sim.writer.lost


def test_ambiguous_candidates_are_the_overlays(tmp_path, example_image,
                                               resolver, coprofd):
    image = example_image("overlays")
    sim = Simulation(3, [resolver.info(image)], slots=2, contexts=3,
                     steps=150)
    _, session, _ = replay(coprofd, sim.writer.bytes(), tmp_path)
    db = open_session(session)
    stored = collections.defaultdict(dict)
    for address, overlay, offset in db.execute(
            "SELECT ls_addr, overlay, file_offset FROM ambiguous_candidates"):
        stored[address][overlay] = offset
    addresses = {a for (a,) in db.execute(
        "SELECT DISTINCT ls_addr FROM ambiguous_samples")}
    assert addresses and set(stored) == addresses
    for address in addresses:
        assert stored[address] == resolver.candidates(image, address)


def test_session_tables_describe_the_run(tmp_path, test_image, coprofd):
    image = test_image("overlays.elf")
    ident = identity(image)
    w = Writer()
    w.start()
    w.image(image)
    w.context(4, 7, ident, cycle=500, pid=321, tid=322)
    for region, guard in enumerate((2, 5, 0)):
        w.overlay(4, region, guard, 500)
    w.sample(4, 0x150, 3)
    w.overlay(4, 0, 3, 700)
    w.lost_samples(4, 1, 9, 700)
    w.time(4, 800, 10_000)
    w.release(4, 900)
    w.stop(20_000)
    _, session, _ = replay(coprofd, w.bytes(), tmp_path)
    db = open_session(session)

    assert db.execute("SELECT context_id, pid, tid, object_id, first_slot,"
                      " first_cycle FROM contexts").fetchall() == [
        (7, 321, 322, "0x5000", 4, 500)]
    row = db.execute("SELECT path, image_offset, device, inode, size, hash,"
                     " status, short_name FROM images").fetchone()
    assert row == (image, 0, ident["device"], ident["inode"], ident["size"],
                   "%016x" % ident["hash"], "ok", "ovl-test.1")
    assert db.execute("SELECT region, guard, cycle, initial FROM"
                      " overlay_events ORDER BY id").fetchall() == [
        (1, 2, 500, 1), (2, 5, 500, 1), (3, 0, 500, 1), (1, 3, 700, 0)]
    assert db.execute("SELECT slot, start_cycle, end_cycle, start_time_ns,"
                      " end_time_ns, end_reason FROM bindings").fetchall() == [
        (4, 500, 900, 9_700, 10_100, "release")]
    assert db.execute("SELECT cause_name, count, cycle FROM lost_events"
                      ).fetchall() == [("fifo-overflow", 9, 700)]
    assert db.execute("SELECT slot, cycle, time_ns FROM time_sync"
                      ).fetchall() == [(4, 800, 10_000)]
    assert db.execute("SELECT ls_addr, region, guard_from, guard_to, count"
                      " FROM ambiguous_samples").fetchall() == [
        (0x150, 1, 2, 3, 3)]
    meta = dict(db.execute("SELECT key, value FROM session"))
    assert meta["stream.stop_samples"] == 3 and meta["stream.complete"] == 1
    assert meta["stream.clock_hz"] == 10**9 and meta["format_version"] == 1
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_sampling_and_stalls(tmp_path, test_image, coprofd):
    """A 1.2 START's FIFO-full policy and dither become the sampling.*
    keys; STALL records become rows of stalls under the context bound to
    the slot then (NULL without one), summed by stall_by_context; a 1.1
    START reads as drop, no dither."""
    image = test_image("overlays.elf")
    ident = identity(image)
    w = Writer()
    w.start(fifo_full=cs.FIFO_STALL, dither=1, dither_seed=2 ** 64 - 5,
            watermark=512, event=cs.EVENT_INSTRUCTIONS)
    w.image(image)
    w.context(1, 7, ident, cycle=100)
    w.sample(1, 0x150, 2)
    w.stall(1, 3, 40_000, 200)
    w.time(1, 200, 5_000)
    w.stall(1, 1, 2_000, 300)
    w.context(1, 8, ident, cycle=400)
    w.stall(1, 5, 7_000, 500)
    w.release(1, 600)
    w.stall(2, 2, 100, 700)
    w.stop(20_000)
    _, session, _ = replay(coprofd, w.bytes(), tmp_path)
    db = open_session(session)
    meta = dict(db.execute("SELECT key, value FROM session"))
    assert meta["sampling.fifo_full"] == "stall"
    assert meta["sampling.dither"] == "on"
    assert meta["sampling.dither_seed"] == str(2 ** 64 - 5)
    assert meta["sampling.watermark"] == 512
    assert meta["sampling.event"] == "SPU_INSTRUCTIONS"
    ids = dict(db.execute("SELECT context_id, id FROM contexts"))
    assert db.execute("SELECT slot, context, count, ns, cycle FROM stalls"
                      " ORDER BY id").fetchall() == [
        (1, ids[7], 3, 40_000, 200), (1, ids[7], 1, 2_000, 300),
        (1, ids[8], 5, 7_000, 500), (2, None, 2, 100, 700)]
    assert sorted(db.execute("SELECT context, count, ns FROM"
                             " stall_by_context"),
                  key=lambda r: (r[0] is not None, r[0])) == [
        (None, 2, 100), (ids[7], 4, 42_000), (ids[8], 5, 7_000)]
    db.close()

    old = Writer()
    old.start()
    old.stop(20_000)
    _, session, _ = replay(coprofd, old.bytes(), tmp_path, name="old")
    db = open_session(session)
    meta = dict(db.execute("SELECT key, value FROM session"))
    assert (meta["sampling.fifo_full"], meta["sampling.dither"],
            meta["sampling.dither_seed"]) == ("drop", "off", "0")
    assert db.execute("SELECT COUNT(*) FROM stalls").fetchone() == (0,)
    db.close()

    # A 1.4 START (no event word): its SPU_CYCLES counted instructions,
    # so the session records no event.
    v14 = Writer()
    v14.record("start", version=1 << 16 | 4, slots=8, lfsr_value=0xFFFFFE,
               lfsr_count=1, clock_hz=10**9, fifo_depth=1024,
               ls_size=0x40000, poll_interval_ns=10**6, start_time_ns=1000,
               fifo_full=0, dither=0, dither_seed=0, watermark=512)
    v14.stop(20_000)
    _, session, _ = replay(coprofd, v14.bytes(), tmp_path, name="v14")
    db = open_session(session)
    meta = dict(db.execute("SELECT key, value FROM session"))
    assert meta["stream.version"] == "1.4" and "sampling.event" not in meta
    db.close()
