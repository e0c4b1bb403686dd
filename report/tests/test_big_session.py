"""copreport on a session of many contexts (issue 21): the sample tables
are summed by SQLite, a report reads as many rows as it has places (not
as the session has rows), and --separate=context builds its groups a few
contexts at a time, through the primary key, with the same result as all
at once.  Row counts and query plans, never time."""

import io
import os
import sqlite3
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import big_session  # noqa: E402
from coprof_report import output, profile  # noqa: E402
from coprof_report.session import Session  # noqa: E402

CONTEXTS = 3000


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("big") / "session")
    big_session.make_session(directory, CONTEXTS)
    return directory


def table_value(directory, what, table):
    """SELECT what FROM table of the session's database."""
    db = sqlite3.connect(os.path.join(directory, "session.db"))
    try:
        return db.execute("SELECT %s FROM %s" % (what, table)).fetchone()[0]
    finally:
        db.close()


def table_rows(directory, table):
    return table_value(directory, "COUNT(*)", table)


def table_rows_sum(directory, table):
    return table_value(directory, "SUM(count)", table)


def text_of(directory, separation):
    s = Session.open(directory)
    try:
        prof = profile.build(s, separation)
        out = io.StringIO()
        output.write_text(prof, out, directory)
        return out.getvalue(), s.rows_loaded
    finally:
        s.close()


def test_default_report_reads_places_not_rows(big):
    s = Session.open(big)
    try:
        places = list(s.samples(by_context=False))
        assert s.rows_loaded == len(places) < 40
        assert sum(r["count"] for r in places) == \
            sum(r["count"] for r in s.samples())
    finally:
        s.close()
    assert table_rows(big, "samples") > 10 * len(places)
    text, loaded = text_of(big, "none")
    assert "\ntotal %d samples:" % sum(
        table_rows_sum(big, t) for t in ("samples", "ambiguous_samples",
                                         "unmapped_samples")) in text
    # the (kind, context, image) totals, the places of each table: far
    # fewer than the session's rows of samples
    rows = sum(table_rows(big, t) for t in (
        "samples", "ambiguous_samples", "unmapped_samples"))
    assert loaded <= 4 * CONTEXTS + 100 < rows


def test_context_query_uses_the_primary_key(big):
    db = sqlite3.connect(os.path.join(big, "session.db"))
    try:
        for table, columns in (("samples", "image, file_offset, overlay"),
                               ("ambiguous_samples", "image, ls_addr, region"),
                               ("unmapped_samples", "image, reason"),
                               ("sample_stalls",
                                "image, file_offset, stall"),
                               ("stall_timeline",
                                "image, bucket_start_ns, stall")):
            plan = " ".join(r[-1] for r in db.execute(
                "EXPLAIN QUERY PLAN SELECT context, %s, SUM(count) FROM %s"
                " WHERE context BETWEEN 1 AND 9 GROUP BY context, %s"
                % (columns, table, columns)))
            assert "SEARCH %s USING PRIMARY KEY" % table in plan, plan
    finally:
        db.close()


def test_context_groups_in_chunks_equal_all_at_once(big, monkeypatch):
    monkeypatch.setattr(profile, "CONTEXT_CHUNK", 10 ** 9)
    whole, _ = text_of(big, "context")
    monkeypatch.setattr(profile, "CONTEXT_CHUNK", 7)
    chunked, _ = text_of(big, "context")
    assert chunked == whole
    assert whole.count("\ncontext ") >= CONTEXTS or \
        len([l for l in whole.splitlines() if l.endswith(" samples")]) \
        >= CONTEXTS


def chunk_rows(directory, first, last):
    """Rows of the tables a chunk of contexts first..last is built from:
    the sample tables and the samples' stall reasons."""
    db = sqlite3.connect(os.path.join(directory, "session.db"))
    try:
        return sum(db.execute("SELECT COUNT(*) FROM %s WHERE context "
                              "BETWEEN ? AND ?" % t, (first, last))
                   .fetchone()[0] for t in CHUNKED_TABLES)
    finally:
        db.close()


CHUNKED_TABLES = ("samples", "ambiguous_samples", "unmapped_samples",
                  "sample_stalls")


def test_context_groups_hold_one_chunk(big, monkeypatch):
    chunk = 100
    monkeypatch.setattr(profile, "CONTEXT_CHUNK", chunk)
    s = Session.open(big)
    try:
        prof = profile.build(s, "context")
        seen = 0
        alive = []
        loaded = []         # rows_loaded when each group came
        for g in prof.groups:
            seen += 1
            alive.append(g)
            loaded.append(s.rows_loaded)
            # a chunk's groups are made together; the earlier ones are
            # dropped by the builder (only this list still holds them)
            assert g.rows is None
        assert seen == CONTEXTS
        # each chunk read its contexts' rows only, the stall reasons too
        # (never a table's every row at once): at most the rows of the
        # chunk's contexts, summed by SQLite
        ids = sorted(g.key for g in alive)
        for at in range(chunk, CONTEXTS, chunk):
            read = loaded[at] - loaded[at - 1]
            assert 0 < read <= chunk_rows(big, ids[at],
                                          ids[at + chunk - 1]), at
        # every row of those tables was read once (by context)
        rows = sum(table_rows(big, t) for t in CHUNKED_TABLES)
        assert table_rows(big, "sample_stalls") > 0
        assert s.rows_loaded <= rows + 4 * CONTEXTS + 100
    finally:
        s.close()


def test_timeline_grouped_per_slot_and_image(big):
    from coprof_report import timeline
    s = Session.open(big)
    try:
        tl = timeline.build(s)
    finally:
        s.close()
    trace = timeline.trace_events(tl)
    assert trace["otherData"]["context_tracks"] == "slot-image"
    assert trace["otherData"]["contexts"] == CONTEXTS
    names = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["pid"] == timeline.PID_CONTEXTS and
             e["name"] == "thread_name"}
    assert sorted(names.values()) == ["slot %d ovl-test.1" % n
                                      for n in range(big_session.SLOTS)]
    slices = [e for e in trace["traceEvents"]
              if e["ph"] == "X" and e["pid"] == timeline.PID_CONTEXTS]
    assert sum(e["args"]["samples"] for e in slices) == \
        table_rows_sum(big, "sample_timeline")
    assert {e["args"]["context"] for e in slices} == \
        set(range(1, CONTEXTS + 1))
    last_end = {}
    for e in sorted(slices, key=lambda e: e["ts"]):
        # the generator binds context N on slot N % SLOTS
        assert names[e["tid"]] == "slot %d ovl-test.1" % (
            e["args"]["context"] % big_session.SLOTS)
        assert e["ts"] >= last_end.get(e["tid"], e["ts"]) - 1e-6
        last_end[e["tid"]] = e["ts"] + e["dur"]
    per_context = timeline.trace_events(tl, "context")
    assert per_context["otherData"]["context_tracks"] == "context"
    assert len({e["tid"] for e in per_context["traceEvents"]
                if e["ph"] == "X" and
                e["pid"] == timeline.PID_CONTEXTS}) == CONTEXTS
