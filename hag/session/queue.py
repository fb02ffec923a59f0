"""The session queue: claim a pending session, apply it, commit; retry, reject or fail it.

Each session is applied in its own transaction (`hag.session.steps.apply_session`), and its
ledger row turns `processed` in the same transaction, so a session is applied exactly once.
The claim's row lock is taken before a savepoint and the session is applied after it: when
the apply raises, the savepoint is rolled back and the claim is still held, so the session's
outcome is recorded in the same transaction and no other worker can claim it in between. A
deadlock or serialization failure is retried on the same claim; after its retries, and for
any other error, `hag.session.outcome` says whether the payload is the cause (the session is
`rejected`, its payload quarantined) or not (it is `failed`, kept whole for
`--retry-failed`). Either way the sessions behind it are still applied. A batch shares a
budget of sessions between its workers: every session it takes ends in one of the three
states (or is left pending when its connection was lost), and is counted once.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from uuid import UUID

import psycopg
from psycopg.pq import TransactionStatus

from hag.errors import EmbedderMismatch, EmbedderUnavailable
from hag.session import facts, write
from hag.session.contract import SessionPayload
from hag.session.facts import Connection
from hag.session.outcome import Outcome, SessionRefused, classify, error_class
from hag.session.steps import Caches, apply_session
from hag.session.summary import ProcessSummary
from hag.settings import Settings
from hag.storage.sqlfiles import query
from hag.support import bounds
from hag.vectors import embedder_identity

__all__ = [
    "SessionRefused",
    "apply_pending_session",
    "check_session",
    "fail_session",
    "process_batch",
    "reject_session",
]

# The retriers' jitter has its own generator, so a worker never moves the global `random`
# state a caller (a seeded simulation, a property test) may rely on.
_JITTER = random.Random()
_SAVEPOINT = "hag_claimed_session"


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

    Returns the session id applied, rejected or failed; None when nothing was pending. A
    deadlock or serialization failure is retried (dial session_max_retries) on the same
    claim. Any other failure rolls the session's work back to the savepoint after its claim
    and records it, in the same transaction, as rejected (its payload) or failed (anything
    else: hag/session/outcome.py). A lost connection, which can record nothing there, is
    recorded on another connection when one can be had, and raised.
    """
    while True:
        claimed = facts.claim(conn, session_id)
        if claimed is None:
            conn.rollback()
            return None
        if _apply_claimed(conn, claimed, dials, run_id, caches, summary):
            return claimed
        if session_id is not None:  # the named session was finished by another worker
            return None


def _apply_claimed(
    conn: Connection,
    claimed: str,
    dials: Settings,
    run_id: UUID | None,
    caches: Caches,
    summary: ProcessSummary,
) -> bool:
    """Apply a claimed session, retrying and recording its outcome; False when the claim was
    lost (a failed commit ends the transaction) and another worker finished the session."""
    attempts = 0
    while True:
        conn.execute(f"SAVEPOINT {_SAVEPOINT}")
        try:
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
            return True
        except (EmbedderUnavailable, EmbedderMismatch):
            conn.rollback()  # not the session's fault: it stays pending for the next run
            raise
        except Exception as exc:
            if getattr(conn, "broken", False) or getattr(conn, "closed", False):
                _fail_elsewhere(claimed, exc, run_id)
                raise
            outcome = classify(exc)
            if outcome is Outcome.RETRY and attempts < dials.session_max_retries:
                attempts += 1
                summary.retries += 1
                if not _roll_back_to_claim(conn, claimed):
                    return False
                time.sleep(_JITTER.uniform(0, 0.005 * attempts))  # de-synchronise the retriers
                continue
            if not _roll_back_to_claim(conn, claimed):
                return False
            _record(conn, claimed, exc, outcome, attempts, run_id, dials, summary)
            conn.commit()
            return True


def _roll_back_to_claim(conn: Connection, claimed: str) -> bool:
    """Undo the session's work and keep its claim: back to the savepoint when the transaction
    is still open; after a failed commit (the transaction is gone, and its lock), claim the
    same session again. False when it is no longer pending (another worker finished it)."""
    if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
        conn.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
        conn.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        return True
    conn.rollback()
    if facts.claim(conn, claimed) is None:
        conn.rollback()
        return False
    return True


def _record(
    conn: Connection,
    session_id: str,
    exc: BaseException,
    outcome: Outcome,
    attempts: int,
    run_id: UUID | None,
    dials: Settings,
    summary: ProcessSummary,
) -> None:
    """Record a session that did not apply: rejected (its payload) or failed (anything else)."""
    retried = f" (after {attempts} retries)" if attempts else ""
    if outcome is Outcome.REJECTED:
        reason = f"cannot be applied: {_one_line(exc)}"
        if reject_session(conn, session_id, reason, run_id, dials):
            summary.rejects += 1
            summary.rejected.append({"session_id": session_id, "reason": reason})
        return
    reason = f"failed: {_one_line(exc)}{retried}"
    if fail_session(conn, session_id, reason, error_class(exc), run_id):
        summary.failures += 1
        summary.failed.append(
            {"session_id": session_id, "reason": reason, "class": error_class(exc)}
        )


def _fail_elsewhere(session_id: str, exc: BaseException, run_id: UUID | None) -> None:
    """Mark a session failed on a fresh connection after its own connection was lost; when
    none can be had either, the session stays pending (its claim died with the connection)."""
    from hag.storage import db

    with contextlib.suppress(psycopg.Error), db.pool().connection() as other:
        fail_session(other, session_id, f"failed: {_one_line(exc)}", error_class(exc), run_id)


def check_session(conn: Connection, session: SessionPayload, dials: Settings) -> None:
    """Hold a queued session to the ingest rules that depend on the memory or the dials, which
    may have changed since it was queued: every entry it names (an edge's ends included) is
    readable by its learner in its topic, its time is within bounds, and it holds no more
    observations, struggles or successful concepts than the dials allow."""
    from hag.session.ingest import count_problem, named_ids, unreadable

    problem = bounds.timestamp_problem(session.ended_at, dials)
    if problem:
        raise SessionRefused(f"ended_at: {problem}")
    too_many = count_problem(session, dials)
    if too_many:
        raise SessionRefused(too_many[0])
    entries, edges = named_ids(session)
    if edges:
        for edge_id, source, target in facts.edge_ends(conn, edges):
            field, turn_index = edges[edge_id]
            for end in (source, target):
                entries.setdefault(end, (field, turn_index))
    denied = unreadable(conn, session, entries, dials)
    if denied:
        raise SessionRefused(denied[0])


def fail_session(
    conn: Connection,
    session_id: str,
    reason: str,
    fail_class: str,
    run_id: UUID | None,
) -> bool:
    """Mark a pending session `failed` with the error's text and class (its payload stays, for
    `--retry-failed`); False when it is no longer pending."""
    row = conn.execute(
        query("session", "fail_session"),
        {"session_id": session_id, "run_id": run_id, "reason": reason, "fail_class": fail_class},
    ).fetchone()
    return row is not None


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
    from hag import settings
    from hag.storage import db, pool_sizes

    if not 1 <= workers <= pool_sizes.MAX_SESSION_WORKERS:
        raise ValueError(
            f"workers must be 1 to {pool_sizes.MAX_SESSION_WORKERS} (the writers' pool holds "
            f"{pool_sizes.WRITE_CONNECTIONS} connections and keeps two free), got {workers}"
        )
    dials = dials or settings.current()
    caches = caches or Caches()
    budget = _Budget(size)
    summaries = [ProcessSummary(run_id=run_id) for _ in range(workers)]
    start = time.perf_counter()

    def work(summary: ProcessSummary) -> None:
        with db.pool().connection() as conn:
            # One unit of the budget per session taken: apply_pending_session returns only
            # once that session is applied, rejected or failed (a retried session and a
            # claim lost to another worker are not new sessions), or None when none is left.
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
    """How many more sessions this batch may take (shared by its workers)."""

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
