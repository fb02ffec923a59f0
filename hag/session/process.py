"""Session-end runs: apply pending sessions in batches, recorded as a `hag_runs` row.

The job is split as enrichment is: `facts` reads (named SQL into typed facts), `rules`
decides (pure functions, no connection), `write` writes, `steps` composes one session's five
steps in the seed's order, `queue` claims, retries and rejects, `report` renders the run
summary. This module drives a run (tasks/session.py, flows/session_end.py, the CLI and the
simulator call it); the other names are imported from the module that owns them.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any
from uuid import UUID

from hag.session.facts import Connection
from hag.session.queue import process_batch
from hag.session.steps import Caches
from hag.session.summary import ProcessSummary
from hag.settings import Settings
from hag.storage.sqlfiles import query

__all__ = [
    "RUN_KIND",
    "close_run",
    "count_left",
    "drain",
    "open_run",
    "pending_count",
    "process_pending",
    "requeue_failed",
]

RUN_KIND = "session_end"


def process_pending(
    batch_size: int | None = None,
    limit: int | None = None,
    *,
    workers: int = 1,
    run_id: UUID | None = None,
    on_batch: Callable[[ProcessSummary], None] | None = None,
    run_batch: Callable[[UUID, int], ProcessSummary] | None = None,
    flow_run_id: UUID | str | None = None,
    retry_failed: bool = False,
) -> ProcessSummary:
    """Apply pending sessions in batches until none is left (or `limit` were taken).

    With `retry_failed`, the sessions that failed for a reason outside their payload are put
    back to pending first (`requeue_failed()`), so this run applies them too.

    Records a `hag_runs` row of kind 'session_end' (done or failed) unless the caller passes
    its own run id. A single worker applies sessions in `ended_at` order. `run_batch(run_id,
    size)` applies one batch (the flow passes its Prefect task); by default `process_batch`.
    A run of its own holds its liveness lock while it works, and marks runs left `running`
    by a dead process `abandoned` first (hag/storage/runs.py); under a Prefect flow run
    (`flow_run_id`) the run takes the flow run's id.
    """
    from hag import settings
    from hag.storage import runs

    dials = settings.current()
    size = int(batch_size or dials.session_batch_size)
    if retry_failed:
        requeue_failed()
    if run_id is not None:
        return _process_pending(run_id, False, size, limit, workers, dials, on_batch, run_batch)
    run = runs.new_id(flow_run_id)  # a flow run's run has its id (hag/storage/runs.py)
    with runs.alive(run):  # held before the row exists: no reaper ever sees it unheld
        params = {"batch_size": size, "limit": limit, "workers": workers}
        if retry_failed:
            params["retry_failed"] = True
        open_run(params, run, flow_run_id)
        return _process_pending(run, True, size, limit, workers, dials, on_batch, run_batch)


def _process_pending(
    run: UUID,
    own_run: bool,
    size: int,
    limit: int | None,
    workers: int,
    dials: Settings,
    on_batch: Callable[[ProcessSummary], None] | None,
    run_batch: Callable[[UUID, int], ProcessSummary] | None,
) -> ProcessSummary:
    total = ProcessSummary(run_id=run)
    caches = Caches()

    def apply(want: int) -> ProcessSummary:
        if run_batch is not None:
            return run_batch(run, want)
        return process_batch(want, run_id=run, workers=workers, dials=dials, caches=caches)

    start = time.perf_counter()
    status = "failed"
    try:
        drain(apply, size, limit, total, on_batch)
        count_left(total)
        status = "done"
    finally:
        total.seconds = time.perf_counter() - start
        if own_run:
            close_run(run, total, status)
    return total


def drain(
    run_batch: Callable[[int], ProcessSummary],
    size: int,
    limit: int | None,
    total: ProcessSummary,
    on_batch: Callable[[ProcessSummary], None] | None = None,
) -> ProcessSummary:
    """Run batches of `size` until a batch comes back short (the queue is empty) or `limit`."""
    while limit is None or total.handled < limit:
        want = size if limit is None else min(size, limit - total.handled)
        batch = run_batch(want)
        total.merge(batch)
        if on_batch is not None:
            on_batch(batch)
        if batch.handled < want:  # every session a batch takes is counted once: it is empty
            break
    return total


def open_run(
    params: Mapping[str, Any], run_id: UUID | None = None, flow_run_id: UUID | str | None = None
) -> UUID:
    """A new `hag_runs` row of kind 'session_end' (after marking dead runs abandoned)."""
    from hag.storage import db, runs

    with db.pool().connection() as conn:
        runs.reap(conn, keep=(run_id,) if run_id else ())
        row = db.one(
            conn.execute(
                query("session", "open_run"),
                {
                    "run_id": run_id or uuid.uuid4(),
                    "kind": RUN_KIND,
                    "params": json.dumps(dict(params), default=str),
                    "flow_run_id": str(flow_run_id) if flow_run_id else None,
                },
            ).fetchone()
        )
    run: UUID = row["run_id"]
    return run


def close_run(run_id: UUID | None, summary: ProcessSummary, status: str = "done") -> None:
    """Record a run's summary and end."""
    from hag.storage import db

    if run_id is None:
        return
    with db.pool().connection() as conn:
        conn.execute(
            query("session", "close_run"),
            {"run_id": run_id, "status": status, "summary": json.dumps(summary.as_dict())},
        )


def requeue_failed() -> list[str]:
    """Put every failed session back to pending (committed); their ids."""
    from hag.storage import db

    with db.pool().connection() as conn:
        rows = conn.execute(query("session", "retry_failed")).fetchall()
    return [r["session_id"] for r in rows]


def count_left(summary: ProcessSummary) -> None:
    """Fill in what a run left behind: sessions still pending and sessions failed."""
    from hag.storage import db

    with db.pool().connection() as conn:
        row = conn.execute(query("session", "count_left")).fetchone()
    summary.left_pending = 0 if row is None else int(row["pending"])
    summary.left_failed = 0 if row is None else int(row["failed"])


def pending_count(conn: Connection) -> int:
    """Sessions waiting to be applied."""
    row = conn.execute(query("session", "count_pending")).fetchone()
    return 0 if row is None else int(row["pending"])
