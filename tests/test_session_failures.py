"""A session that fails for a reason outside its payload is kept as failed, never quarantined;
the run says so and exits non-zero; `--retry-failed` applies it exactly once. A batch's
budget counts sessions, not claims."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys

import psycopg
import pytest
from psycopg import errors as pg_errors
from pydantic import ValidationError

from hag import PROJECT_ROOT
from hag.session import queue
from hag.session.outcome import Outcome, SessionRefused, classify, error_class
from hag.session.process import process_pending
from hag.storage.sqlfiles import query
from tests import factories as f
from tests.session_builders import ingest, payload, turn


def _world(db):
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    e = f.edge(db, a, b, "prerequisite", confidence=0.5)
    db.commit()
    return a, b, e


def _graded(session_id, a, e, day=0):
    """A session that grades entry `a` and edge `e` (one traversal each time it applies)."""
    return payload(
        session_id, [turn(0, decision=a, used=[a], rendered=[e], outcome="success")], day=day
    )


def _status(db):
    return {
        r["session_id"]: r["status"]
        for r in db.execute("SELECT session_id, status FROM hag_sessions").fetchall()
    }


def _traversals(db, e):
    return db.execute("SELECT traversal_count FROM hag_edges WHERE id = %s", (e,)).fetchone()[
        "traversal_count"
    ]


def _quarantined(db):
    return db.execute("SELECT count(*) AS n FROM hag_session_quarantine").fetchone()["n"]


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (pg_errors.DeadlockDetected(), Outcome.RETRY),
        (pg_errors.SerializationFailure(), Outcome.RETRY),
        (pg_errors.NumericValueOutOfRange(), Outcome.REJECTED),
        (pg_errors.ForeignKeyViolation(), Outcome.REJECTED),
        (pg_errors.ProgramLimitExceeded(), Outcome.REJECTED),
        (psycopg.DataError("year 0 is out of range"), Outcome.REJECTED),
        (SessionRefused("ended_at: too far"), Outcome.REJECTED),
        (pg_errors.OutOfMemory(), Outcome.FAILED),
        (pg_errors.LockNotAvailable(), Outcome.FAILED),
        (pg_errors.QueryCanceled(), Outcome.FAILED),
        (pg_errors.FeatureNotSupported(), Outcome.FAILED),
        (pg_errors.UndefinedFunction(), Outcome.FAILED),
        (pg_errors.UndefinedColumn(), Outcome.FAILED),
        (pg_errors.InternalError_(), Outcome.FAILED),
        (pg_errors.AdminShutdown(), Outcome.FAILED),
        (psycopg.OperationalError("connection lost"), Outcome.FAILED),
        (KeyError("a bug"), Outcome.FAILED),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else v.value,
)
def test_a_failure_is_classed_by_its_exception_not_its_message(exc, outcome):
    """Payload errors (SQLSTATE 22/23/54, contract) reject; the rest fail; deadlocks retry."""
    assert classify(exc) is outcome


def test_a_contract_error_rejects_and_the_class_names_the_sqlstate():
    """A payload the contract refuses when read back is rejected; a class shows its SQLSTATE."""
    from hag.session.contract import SessionPayload

    with pytest.raises(ValidationError) as caught:
        SessionPayload.model_validate_json("{}")
    assert classify(caught.value) is Outcome.REJECTED
    assert error_class(pg_errors.OutOfMemory()) == "OutOfMemory (53200)"


@contextlib.contextmanager
def _out_of_shared_memory(db, instruction="explode"):
    """A trigger that fails an entry insert as a full lock table does (SQLSTATE 53200)."""
    db.execute(
        f"""
        CREATE FUNCTION pg_temp_no_locks() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.instruction = '{instruction}' THEN
                RAISE EXCEPTION 'out of shared memory'
                    USING ERRCODE = 'out_of_memory',
                          HINT = 'You might need to increase "max_locks_per_transaction".';
            END IF;
            RETURN NEW;
        END $$;
        CREATE TRIGGER no_locks BEFORE INSERT ON hag_entries
            FOR EACH ROW EXECUTE FUNCTION pg_temp_no_locks();
        """
    )
    db.commit()
    try:
        yield
    finally:
        db.rollback()
        db.execute("DROP TRIGGER no_locks ON hag_entries; DROP FUNCTION pg_temp_no_locks()")
        db.commit()


def _exploding(session_id, a, e, day=0):
    body = _graded(session_id, a, e, day)
    body["turns"][0]["observations"] = [{"graph": "tutor", "concept": "rsa", "text": "explode"}]
    return body


def test_out_of_shared_memory_fails_the_session_and_a_retry_applies_it_once(db):
    """A full lock table: failed (not quarantined), the rest applied; retried: applied once."""
    a, _, e = _world(db)
    ingest(db, _exploding("big", a, e), _graded("after", a, e, day=1))
    with _out_of_shared_memory(db):
        first = process_pending()
    assert (first.sessions, first.rejects, first.failures) == (1, 0, 1)
    assert (first.left_pending, first.left_failed) == (0, 1)
    assert first.failed[0]["class"] == "OutOfMemory (53200)"
    assert "out of shared memory" in first.failed[0]["reason"]
    assert _status(db) == {"big": "failed", "after": "processed"}
    assert _quarantined(db) == 0 and _traversals(db, e) == 1
    again = process_pending()  # a plain run leaves a failed session alone
    assert again.handled == 0 and again.left_failed == 1
    retried = process_pending(retry_failed=True)
    assert (retried.sessions, retried.failures, retried.left_failed) == (1, 0, 0)
    assert _status(db) == {"big": "processed", "after": "processed"}
    assert _traversals(db, e) == 2
    row = db.execute(
        "SELECT fail_count, fail_class FROM hag_sessions WHERE session_id = 'big'"
    ).fetchone()
    assert (row["fail_count"], row["fail_class"]) == (1, "OutOfMemory (53200)")


def _hag(database_url, *args):
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        env={**env, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        timeout=180,
    )


def _database_lock_timeout(db, value):
    """Set (or reset, None) lock_timeout for new connections to this database."""
    name = db.execute("SELECT current_database() AS d").fetchone()["d"]
    quoted = psycopg.sql.Identifier(name).as_string(db)
    if value is None:
        db.execute(f"ALTER DATABASE {quoted} RESET lock_timeout")
    else:
        db.execute(f"ALTER DATABASE {quoted} SET lock_timeout = '{value}'")
    db.commit()


def test_a_lock_timeout_fails_the_run_in_one_line_and_retry_failed_applies_it_once(
    db, database_url
):
    """A row held by another connection past lock_timeout: the CLI exits 1 naming one failed
    session and the retry command; after the lock is gone --retry-failed applies it once."""
    a, _, e = _world(db)
    ingest(db, _graded("held", a, e))
    holder = psycopg.connect(database_url)
    _database_lock_timeout(db, "300ms")
    try:
        holder.execute("SELECT id FROM hag_entries WHERE id = %s FOR UPDATE", (a,))
        first = _hag(database_url, "process-sessions", "--no-prefect")
    finally:
        holder.rollback()
        holder.close()
        _database_lock_timeout(db, None)
    assert first.returncode == 1, first.stderr
    last = first.stderr.strip().splitlines()[-1]
    assert last.startswith("hag: 1 session(s) failed") and "--retry-failed" in last
    assert "left 0 pending, 1 failed" in first.stdout
    assert "LockNotAvailable (55P03)" in first.stdout
    db.rollback()
    assert _status(db) == {"held": "failed"} and _quarantined(db) == 0
    assert _traversals(db, e) == 0

    retried = _hag(database_url, "process-sessions", "--no-prefect", "--retry-failed")
    assert retried.returncode == 0, retried.stderr
    assert "1 session(s) applied" in retried.stdout
    db.rollback()
    assert _status(db) == {"held": "processed"} and _traversals(db, e) == 1
    assert _hag(database_url, "process-sessions", "--no-prefect", "--retry-failed").returncode == 0
    db.rollback()
    assert _traversals(db, e) == 1  # applied exactly once


def test_a_deadlock_after_its_retries_is_failed_not_raised(db, dials, monkeypatch):
    """Deadlocks past session_max_retries fail the session (kept) and the run goes on."""
    dials(session_max_retries=2)
    a, _, e = _world(db)
    ingest(db, _graded("stuck", a, e), _graded("after", a, e, day=1))
    real = queue.apply_session
    calls = []

    def deadlocking(conn, session, *args, **kwargs):
        calls.append(session.session_id)
        if session.session_id == "stuck":
            raise pg_errors.DeadlockDetected("deadlock detected")
        return real(conn, session, *args, **kwargs)

    monkeypatch.setattr(queue, "apply_session", deadlocking)
    summary = process_pending()
    assert calls.count("stuck") == 3  # the first try and two retries, on the same claim
    assert (summary.sessions, summary.failures, summary.retries) == (1, 1, 2)
    assert "after 2 retries" in summary.failed[0]["reason"]
    assert _status(db) == {"stuck": "failed", "after": "processed"}


def test_a_failing_session_stays_claimed_until_its_outcome_is_recorded(
    db, database_url, monkeypatch
):
    """While a failed session is recorded, no other worker can claim it (it cannot be taken
    twice and use up a batch)."""
    a, _, e = _world(db)
    ingest(db, _exploding("big", a, e))
    seen = []
    record = queue._record

    def record_after_peeking(conn, session_id, *args, **kwargs):
        with psycopg.connect(database_url) as other:
            seen.append(other.execute(query("session", "claim_next_session")).fetchone())
        return record(conn, session_id, *args, **kwargs)

    monkeypatch.setattr(queue, "_record", record_after_peeking)
    with _out_of_shared_memory(db):
        summary = process_pending()
    assert seen == [None]
    assert summary.failures == 1


def test_a_batch_takes_exactly_its_size_in_sessions_when_many_fail(db):
    """Four workers, a batch of 10 over 24 sessions of which half fail: 10 taken, counted once."""
    a, _, e = _world(db)
    bodies = [(_exploding if i % 2 else _graded)(f"s{i:02d}", a, e, day=i) for i in range(24)]
    ingest(db, *bodies)
    with _out_of_shared_memory(db):
        batch = queue.process_batch(10, workers=4)
        assert batch.handled == 10
        statuses = _status(db)
        assert sum(s != "pending" for s in statuses.values()) == 10
        rest = process_pending(batch_size=5, workers=4)
    assert rest.handled == 14 and rest.left_pending == 0
    assert batch.failures + rest.failures == 12 and batch.sessions + rest.sessions == 12


def test_re_ingesting_a_session_says_where_it_stands(db, database_url, tmp_path):
    """Ingest again: one line per session that is applied, failed or quarantined."""
    import json

    a, _, e = _world(db)
    bodies = {
        "applied": _graded("applied", a, e),
        "failed": _exploding("failed", a, e, day=1),
        "bad": _graded("bad", a, e, day=2),
        "waiting": _graded("waiting", a, e, day=3),
    }
    ingest(db, bodies["applied"], bodies["failed"], bodies["bad"])
    with _out_of_shared_memory(db):
        process_pending()
    ingest(db, bodies["waiting"])
    # as a payload rejected when applied stands (its reason does not matter here)
    db.execute("UPDATE hag_sessions SET status = 'rejected' WHERE session_id = 'bad'")
    db.commit()
    path = tmp_path / "again.jsonl"
    path.write_text("\n".join(json.dumps(b) for b in bodies.values()) + "\n")
    result = _hag(database_url, "ingest", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"already received {path}:1: session 'applied' is applied",
        f"already received {path}:2: session 'failed' is failed",
        f"already received {path}:3: session 'bad' is quarantined",
        "0 accepted, 4 already received, 0 quarantined",
    ]


def test_the_flow_run_ends_failed_after_publishing_its_summary(db, prefect_harness):
    """A flow run leaving a failed session ends Failed (the UI shows it), summary published;
    retry_failed=True applies the session and the run completes."""
    from flows.session_end import session_end_flow
    from tests.fix_prefect import flow_run_artifacts_async

    a, _, e = _world(db)
    ingest(db, _exploding("big", a, e), _graded("after", a, e, day=1))
    with _out_of_shared_memory(db):
        state = session_end_flow(check=False, return_state=True)
    assert state.is_failed()
    assert "1 session(s) failed" in state.message and "--retry-failed" in state.message
    artifacts = asyncio.run(flow_run_artifacts_async(state.state_details.flow_run_id))
    markdown = artifacts["session-end-summary"].data
    assert "1 failed" in markdown and "Left in the queue: 0 pending, 1 failed." in markdown
    assert "`big`" in markdown
    retried = session_end_flow(check=False, retry_failed=True, return_state=True)
    assert retried.is_completed(), retried.message
    assert retried.result()["sessions"] == 1
    assert _status(db) == {"big": "processed", "after": "processed"}
    assert _traversals(db, e) == 2


def test_a_lost_connection_marks_the_session_failed_elsewhere_and_stops_the_run(db, monkeypatch):
    """The worker's backend killed mid-apply: the run raises, the session is failed (recorded
    on another connection, not quarantined), and a retry applies it once."""
    a, _, e = _world(db)
    ingest(db, _graded("cut", a, e))
    real = queue.apply_session

    def cut_off(conn, session, *args, **kwargs):
        conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return real(conn, session, *args, **kwargs)

    monkeypatch.setattr(queue, "apply_session", cut_off)
    with pytest.raises(psycopg.OperationalError):
        process_pending()
    monkeypatch.undo()
    row = db.execute(
        "SELECT status, fail_class FROM hag_sessions WHERE session_id = 'cut'"
    ).fetchone()
    assert row["status"] == "failed" and row["fail_class"].startswith("AdminShutdown")
    assert _quarantined(db) == 0 and _traversals(db, e) == 0
    db.commit()
    assert process_pending(retry_failed=True).sessions == 1
    assert _traversals(db, e) == 1


@pytest.mark.fast
def test_more_workers_than_the_pool_allows_are_refused_before_any_session():
    """Each worker holds a writers' pool connection for its batch; a seventh would leave the
    settings reads beside them waiting on the pool (8 connections), so it is refused by name."""
    from hag.session import queue

    with pytest.raises(ValueError, match="workers must be 1 to 6 .* got 7"):
        queue.process_batch(10, workers=7)
    with pytest.raises(ValueError, match="got 0"):
        queue.process_batch(10, workers=0)
