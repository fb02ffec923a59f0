"""`python -m bench sessions`' baseline: the pipeline's statements replayed as bare SQL leave
the memory the pipeline left, though the database generates other edge ids on replay."""

from __future__ import annotations

import psycopg
import pytest

from bench import bench_sessions as bench
from hag import settings
from hag.session.queue import apply_pending_session
from hag.session.steps import Caches
from hag.session.summary import ProcessSummary
from tests import test_evidence_units

units = test_evidence_units.units  # the fixture: the evidence profile as it ships


def _record(db, payloads):
    bench.build_world(db)
    bench.ingest_all(db, payloads)
    recorder = bench.Recorder(db)
    summary, caches, dials = ProcessSummary(), Caches(), settings.current()
    while apply_pending_session(recorder, dials, run_id=None, caches=caches, summary=summary):
        pass
    return recorder.transactions, bench.fingerprint(db), summary


def _replayed_equal(db, count):
    payloads = bench.sessions(count)
    trace, recorded, summary = _record(db, payloads)
    assert summary.sessions == count and len(trace) == count
    learned = db.execute("SELECT count(*) AS n FROM hag_edges WHERE source_type = 'learned'")
    assert learned.fetchone()["n"] > 0  # ids from gen_random_uuid that later sessions name
    bench.build_world(db)
    bench.ingest_all(db, payloads)
    bench.replay(db, trace)
    assert bench.fingerprint(db) == recorded


def test_the_replayed_statements_leave_the_memory_the_pipeline_left(db):
    """40 sessions of the bench under the shipped dials: the replay carries the new ids
    forward and ends where the pipeline ended, row for row by natural identity."""
    _replayed_equal(db, 40)


def test_the_replay_holds_under_the_evidence_profile(db, units):
    """The same under the evidence profile, whose re-weighs list learned edges by id (so in
    another order on replay) and whose learner reports name them."""
    _replayed_equal(db, 40)


def test_the_fingerprint_tells_two_edges_swapped_values_apart(db):
    """A replay that wrote to the wrong edges keeps the count and sums; the fingerprint
    does not: two learned edges' confidences swapped change it."""
    _, recorded, _ = _record(db, bench.sessions(20))
    two = db.execute(
        "(SELECT id, confidence FROM hag_edges WHERE source_type = 'learned' "
        "ORDER BY confidence LIMIT 1) UNION ALL (SELECT id, confidence FROM hag_edges "
        "WHERE source_type = 'learned' ORDER BY confidence DESC LIMIT 1)"
    ).fetchall()
    assert len(two) == 2 and two[0]["confidence"] != two[1]["confidence"]
    for row, other in ((two[0], two[1]), (two[1], two[0])):
        db.execute(
            "UPDATE hag_edges SET confidence = %s WHERE id = %s", (other["confidence"], row["id"])
        )
    assert bench.fingerprint(db) != recorded
    db.rollback()


def test_a_replay_without_the_new_ids_fails_where_a_learned_edge_is_named(db, monkeypatch):
    """The id carrying is what makes it equal: replayed with the recorded ids, the first
    report naming an edge learned earlier names an edge that does not exist."""
    payloads = bench.sessions(40)
    trace, _, _ = _record(db, payloads)
    bench.build_world(db)
    bench.ingest_all(db, payloads)
    monkeypatch.setattr(bench, "_renamed", lambda value, ids, named=None: value)
    with pytest.raises(psycopg.errors.ForeignKeyViolation, match="does not exist"):
        bench.replay(db, trace)
    db.rollback()


@pytest.mark.fast
def test_recorded_ids_are_renamed_inside_parameters_of_every_shape():
    import uuid

    from psycopg.types.json import Jsonb

    old, new = uuid.uuid4(), uuid.uuid4()
    ids = {old: new}
    value = (old, [old, 1], {"e": str(old)}, Jsonb({"edge": str(old)}), "x", str(uuid.uuid4()))
    renamed = bench._renamed(value, ids)
    assert renamed[:3] == (new, [new, 1], {"e": str(new)})
    assert renamed[3].obj == {"edge": str(new)} and renamed[4:] == value[4:]


@pytest.mark.fast
def test_returned_rows_are_matched_by_their_values_not_their_order():
    """Recorded (X1, a), (X2, b); replayed (Y2, b), (Y1, a): X1 is Y1 and X2 is Y2. A world
    id returned in both runs stays itself; a fresh id matched two ways stops the replay."""
    import uuid

    x1, x2, y1, y2, world = (uuid.uuid4() for _ in range(5))
    ids = bench.IdMap()
    ids.match("q", [(x1, "a", world), (x2, "b", world)], [
        {"id": y2, "slug": "b", "w": world}, {"id": y1, "slug": "a", "w": world}])  # fmt: skip
    assert ids.ids == {x1: y1, x2: y2}
    assert ids.name([x1, str(x2), world]) == [y1, str(y2), world]
    again = bench.IdMap()
    again.ids[x1] = y1
    with pytest.raises(AssertionError, match="replayed as"):
        again.match("q", [(x1, "a")], [{"id": y2, "slug": "a"}])


@pytest.mark.fast
def test_generated_ids_inside_arrays_and_json_results_are_mapped():
    """A result naming generated ids inside an array or json (as strings) maps them as a
    column does; the same ids in another array order stop the replay, not mislead it."""
    import uuid

    x1, x2, y1, y2 = (uuid.uuid4() for _ in range(4))
    ids = bench.IdMap()
    ids.match("q", [("a", [x1, x2], {"edge": str(x1), "n": 1.0})], [
        {"s": "a", "ids": [y1, y2], "j": {"n": 1.0000000000001, "edge": str(y1)}}])  # fmt: skip
    assert ids.ids == {x1: y1, x2: y2}
    assert ids.name({"e": [str(x2)]}) == {"e": [str(y2)]}
    x3, y3 = uuid.uuid4(), uuid.uuid4()
    with pytest.raises(AssertionError, match="no replayed row matches"):
        ids.match("q", [([x1, x3],)], [{"ids": [y3, y1]}])
