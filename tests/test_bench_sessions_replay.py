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


def _record(db, payloads):
    bench.build_world(db)
    bench.ingest_all(db, payloads)
    recorder = bench.Recorder(db)
    summary, caches, dials = ProcessSummary(), Caches(), settings.current()
    while apply_pending_session(recorder, dials, run_id=None, caches=caches, summary=summary):
        pass
    return recorder.transactions, bench.fingerprint(db), summary


def test_the_replayed_statements_leave_the_memory_the_pipeline_left(db):
    """40 sessions of the bench: the pipeline learns edges (ids from gen_random_uuid) that
    later sessions name; the replay carries the new ids forward and ends where the pipeline
    ended, edge for edge."""
    payloads = bench.sessions(40)
    trace, recorded, summary = _record(db, payloads)
    assert summary.sessions == 40 and len(trace) == 40
    edges, _, _, _, processed = recorded
    assert processed == 40 and edges > len(bench.EDGES)  # it learned edges of its own
    bench.build_world(db)
    bench.ingest_all(db, payloads)
    bench.replay(db, trace)
    assert bench.fingerprint(db) == recorded


def test_a_replay_without_the_new_ids_fails_where_a_learned_edge_is_named(db, monkeypatch):
    """The id carrying is what makes it equal: replayed with the recorded ids, the first
    report naming an edge learned earlier names an edge that does not exist."""
    payloads = bench.sessions(40)
    trace, _, _ = _record(db, payloads)
    bench.build_world(db)
    bench.ingest_all(db, payloads)
    monkeypatch.setattr(bench, "_renamed", lambda value, ids: value)
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
