"""The session queue: claim a pending session, apply it, commit; retry or reject it.

Each session is applied in its own transaction (`hag.session.steps.apply_session`), and its
ledger row turns `processed` in the same transaction, so a session is applied exactly once.
A deadlock or serialization failure is retried; any other failure once a session is claimed
rejects that session with the reason (its payload goes to the quarantine), so the sessions
behind it are still applied. A batch shares a budget of claims between its workers.
"""

from __future__ import annotations

import random
import threading
import time
from uuid import UUID

from psycopg import errors as pg_errors

from hag import bounds, embedder_identity
from hag.errors import EmbedderMismatch, EmbedderUnavailable, HagError
from hag.session import facts, write
from hag.session.contract import SessionPayload
from hag.session.facts import Connection
from hag.session.steps import Caches, apply_session
from hag.session.summary import ProcessSummary
from hag.settings import Settings
from hag.sqlfiles import query

_RETRYABLE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)
# The retriers' jitter has its own generator, so a worker never moves the global `random`
# state a caller (a seeded simulation, a property test) may rely on.
_JITTER = random.Random()


def apply_pending_session(
    conn: Connection,
    dials: Settings,
    *,
    run_id: UUID | None,
    caches: Caches,
    summary: ProcessSummary,
    session_id: str | None = None,
) -> str | None:
    """Claim, apply and commit one pending session (the oldest, or the named one).

    Returns the session id applied (or rejected), None when nothing was pending. Retries a
    deadlock or serialization failure. Any other failure once a session is claimed (reading
    its payload, a database error in any step, a bug) rolls it back and rejects that session
    with the reason, so the sessions behind it are still applied; only a lost connection,
    which can record nothing, is raised.
    """
    attempts = 0
    while True:
        claimed: str | None = None
        try:
            claimed = facts.claim(conn, session_id)
            if claimed is None:
                conn.rollback()
                return None
            session = facts.claimed_payload(conn, claimed)
            check_session(conn, session, dials)
            counts = apply_session(
                conn,
                session,
                dials,
                run_id=run_id,
                caches=caches,
                step_seconds=summary.step_seconds,
            )
            embedder_identity.recheck(conn)  # a reembed may have switched since the plan
            write.mark_processed(conn, claimed, run_id, counts.as_dict())
            conn.commit()
            summary.add(counts)
            return claimed
        except _RETRYABLE:
            conn.rollback()
            attempts += 1
            summary.retries += 1
            if attempts > dials.session_max_retries:
                raise
            time.sleep(_JITTER.uniform(0, 0.005 * attempts))  # de-synchronise the retriers
        except (EmbedderUnavailable, EmbedderMismatch):
            conn.rollback()  # not the session's fault: it stays pending for the next run
            raise
        except Exception as exc:
            if claimed is None or getattr(conn, "broken", False) or getattr(conn, "closed", False):
                raise
            conn.rollback()
            reason = f"cannot be applied: {_one_line(exc)}"
            # The claim's lock ended with the rollback: another worker may have rejected it.
            if reject_session(conn, claimed, reason, run_id, dials):
                summary.rejects += 1
                summary.rejected.append({"session_id": claimed, "reason": reason})
            conn.commit()
            return claimed


class SessionRefused(HagError):
    """A queued session breaks a rule that ingest also enforces (checked again when applied)."""


def check_session(conn: Connection, session: SessionPayload, dials: Settings) -> None:
    """Hold a queued session to the ingest rules that depend on the memory or the dials, which
    may have changed since it was queued: every entry it names (an edge's ends included) is
    readable by its learner in its topic, and its time is within bounds."""
    from hag.session.ingest import named_ids, unreadable

    problem = bounds.timestamp_problem(session.ended_at, dials)
    if problem:
        raise SessionRefused(f"ended_at: {problem}")
    entries, edges = named_ids(session)
    if edges:
        for edge_id, source, target in facts.edge_ends(conn, edges):
            field, turn_index = edges[edge_id]
            for end in (source, target):
                entries.setdefault(end, (field, turn_index))
    denied = unreadable(conn, session, entries, dials)
    if denied:
        raise SessionRefused(denied[0])


def reject_session(
    conn: Connection, session_id: str, reason: str, run_id: UUID | None, dials: Settings
) -> bool:
    """Mark a pending session `rejected` with the reason and quarantine its payload; False
    when it is no longer pending (another worker finished it first)."""
    from hag.session.ingest import Refusal, quarantine

    row = conn.execute(
        query("session", "reject_session"),
        {"session_id": session_id, "run_id": run_id, "reason": reason},
    ).fetchone()
    if row is None:
        return False
    quarantine(conn, row["payload_text"], Refusal(reason), "process-sessions", session_id, dials)
    return True


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def process_batch(
    size: int,
    *,
    run_id: UUID | None = None,
    workers: int = 1,
    dials: Settings | None = None,
    caches: Caches | None = None,
) -> ProcessSummary:
    """Apply up to `size` pending sessions, each in its own transaction, with N workers."""
    from hag import db, settings

    dials = dials or settings.current()
    caches = caches or Caches()
    budget = _Budget(size)
    summaries = [ProcessSummary(run_id=run_id) for _ in range(max(1, workers))]
    start = time.perf_counter()

    def work(summary: ProcessSummary) -> None:
        with db.pool().connection() as conn:
            while budget.take():
                if (
                    apply_pending_session(
                        conn, dials, run_id=run_id, caches=caches, summary=summary
                    )
                    is None
                ):
                    budget.close()

    if len(summaries) == 1:
        work(summaries[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(summaries)) as pool:
            for future in [pool.submit(work, s) for s in summaries]:
                future.result()
    total = ProcessSummary(run_id=run_id)
    for s in summaries:
        total.merge(s)
    total.seconds = time.perf_counter() - start
    return total


class _Budget:
    """How many more sessions this batch may claim (shared by its workers)."""

    def __init__(self, size: int):
        self._left = size
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return True

    def close(self) -> None:
        with self._lock:
            self._left = 0
