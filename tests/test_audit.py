"""Review and restore of culled edges from the audit (hag.nightly.audit)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hag.errors import NotFoundError
from hag.nightly import audit, sweeps
from tests import factories as f
from tests.fix_db import lock_waiters, until

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

AS_OF = f.NOW
DAY = timedelta(days=1)


def _culled_pair(db, n: int = 2):
    """Two entries joined by `n` weak old learned edges, culled by one run; returns (run, ids)."""
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    ids = [
        f.edge(
            db,
            a,
            b,
            t,
            confidence=0.1 + i / 100,
            source_type="learned",
            created_at=AS_OF - 100 * DAY,
        )
        for i, t in enumerate(("prerequisite", "fallback", "leads_to")[:n])
    ]
    db.execute(
        "UPDATE hag_edges SET condition = 'after a failure', hit_count = 2, "
        "source_session_id = 's-9', last_traversed_at = NULL WHERE id = %s",
        (ids[0],),
    )
    db.commit()
    before = {r["id"]: dict(r) for r in db.execute("SELECT * FROM hag_edges").fetchall()}
    run = sweeps.sweep(db, as_of=AS_OF)
    return run, ids, before, (a, b)


def _edges(db):
    return {r["id"]: dict(r) for r in db.execute("SELECT * FROM hag_edges").fetchall()}


def test_culled_lists_every_culled_edge_with_its_concepts(db):
    """The listing shows each culled edge of a run with both concepts and its provenance."""
    run, ids, _, _ = _culled_pair(db)
    rows = audit.culled(run_id=run.run_id, conn=db)
    assert sorted(r["edge_id"] for r in rows) == sorted(ids)
    assert {(r["source_concept"], r["target_concept"], r["source_type"]) for r in rows} == {
        ("rsa", "modular-arithmetic", "learned")
    }
    assert audit.culled(since=AS_OF + DAY, conn=db) == []
    assert len(audit.culled(since=AS_OF, conn=db)) == 2


def test_restore_one_edge_round_trips_exactly(db):
    """A culled edge restored by id is the same row, column for column, as before the cull."""
    run, ids, before, _ = _culled_pair(db)
    result = audit.restore(edge_id=ids[0], conn=db)
    assert result.restored == [ids[0]] and result.refused == []
    assert _edges(db) == {ids[0]: before[ids[0]]}
    row = audit.culled(run_id=run.run_id, conn=db)
    assert {r["edge_id"] for r in row if r["restored_at"] is not None} == {ids[0]}


def test_restore_a_whole_run(db):
    """Restoring a run brings back every edge it culled, exactly."""
    run, ids, before, _ = _culled_pair(db, n=3)
    result = audit.restore(run_id=run.run_id, conn=db)
    assert sorted(result.restored) == sorted(ids)
    assert _edges(db) == before


def test_restored_edge_is_not_culled_again(db):
    """An edge an operator restored survives the next run although the rule still matches it."""
    run, ids, _, _ = _culled_pair(db, n=1)
    audit.restore(edge_id=ids[0], conn=db)
    again = sweeps.sweep(db, as_of=AS_OF + DAY)
    assert again.culled == 0
    assert set(_edges(db)) == {ids[0]}


def test_restore_refuses_when_an_endpoint_is_gone(db):
    """An edge whose target entry no longer exists is refused, with that reason."""
    run, ids, _, (a, b) = _culled_pair(db, n=1)
    db.execute("DELETE FROM hag_entries WHERE id = %s", (b,))
    db.commit()
    with pytest.raises(NotFoundError):
        audit.restore(edge_id=f.uuid.uuid4(), conn=db)
    result = audit.restore(edge_id=ids[0], conn=db)
    assert result.restored == []
    assert [(r.edge_id, r.reason) for r in result.refused] == [
        (ids[0], f"its target entry {b} no longer exists")
    ]
    assert _edges(db) == {}


def test_restore_refuses_when_the_edge_was_recreated(db):
    """An edge whose identity exists again (a session relearned it) is refused, naming the new edge."""
    run, ids, _, (a, b) = _culled_pair(db, n=2)
    twin = f.edge(db, a, b, "prerequisite", confidence=0.3, source_type="learned")
    db.commit()
    result = audit.restore(run_id=run.run_id, conn=db)
    assert result.restored == [ids[1]]
    assert [(r.edge_id, r.reason) for r in result.refused] == [
        (ids[0], f"the edge has since been recreated as {twin}")
    ]


def test_restore_twice_is_refused_the_second_time(db):
    """A restored edge cannot be restored again: nothing waits in the audit."""
    run, ids, _, _ = _culled_pair(db, n=1)
    audit.restore(edge_id=ids[0], conn=db)
    with pytest.raises(NotFoundError, match="already restored"):
        audit.restore(edge_id=ids[0], conn=db)


def test_an_edge_restored_already_is_refused_by_name_beside_one_that_goes_back(db):
    """Two edges asked for, one restored before: the other goes back, and the first is
    refused naming when and by whom (the command then exits 1), not left out of the answer."""
    run, ids, before, _ = _culled_pair(db, n=2)
    audit.restore(edge_id=ids[0], by="first restore", conn=db)
    result = audit.restore(edge_id=[ids[0], ids[1]], conn=db)
    assert result.restored == [ids[1]] and _edges(db) == before
    [(edge, reason)] = [(r.edge_id, r.reason) for r in result.refused]
    assert edge == ids[0] and reason.startswith("restored already, at ")
    assert reason.endswith(" by first restore")


@pytest.mark.parametrize("retries", [0, 1])
def test_a_restore_ended_by_a_deadlock_runs_again(db, retries):
    """A writer holding the pair's new edge (as a session-end does, uncommitted) that then
    locks the culled edge's audit row (as it does to withdraw kept reports), while a restore
    holds that row and waits to put the edge back: each waits on the other. The restore's
    deadlock check runs first (5 s against the writer's 60 s) and ends it. Allowed a retry
    (session_max_retries), it runs again once the writer rolls back and puts the edge back,
    exactly; allowed none, the deadlock is raised, nothing is restored, and the restore's
    connection is left with no transaction open."""
    import threading

    import psycopg
    from psycopg.pq import TransactionStatus

    from hag import settings
    from hag.storage import db as hdb

    run, ids, before, (a, b) = _culled_pair(db, n=1)
    settings.set_value(db, "session_max_retries", retries, by="test")
    db.commit()
    audit_id = db.execute(
        "SELECT audit_id FROM hag_edge_audit WHERE edge_id = %s", (ids[0],)
    ).fetchone()["audit_id"]
    db.rollback()
    with hdb.connect() as writer, hdb.connect() as restoring:
        writer.execute("SET deadlock_timeout = '60s'")
        restoring.execute("SET deadlock_timeout = '5s'")  # its check runs first
        restoring.commit()
        pid = restoring.info.backend_pid
        f.edge(writer, a, b, "prerequisite", confidence=0.3, source_type="learned")
        box: dict = {}

        def restore() -> None:
            try:
                box["result"] = audit.restore(edge_id=ids[0], conn=restoring)
            except psycopg.Error as exc:
                box["error"] = exc

        restorer = threading.Thread(target=restore)
        restorer.start()
        # until the restore waits on the writer's edge
        until(lambda: pid in lock_waiters(db) or not restorer.is_alive())
        assert pid in lock_waiters(db) and restorer.is_alive()
        writer.execute(
            "SELECT 1 FROM hag_edge_audit WHERE audit_id = %s FOR UPDATE", (audit_id,)
        ).fetchall()  # waits until the restore's deadlock check ends it
        writer.rollback()
        restorer.join(60)
        assert not restorer.is_alive()
        assert restoring.info.transaction_status == TransactionStatus.IDLE
    if retries:
        assert "error" not in box and box["result"].restored == [ids[0]]
        assert _edges(db) == {ids[0]: before[ids[0]]}
    else:
        assert isinstance(box.get("error"), psycopg.errors.DeadlockDetected)
        assert _edges(db) == {}
