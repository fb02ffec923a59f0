"""The session-end flow: apply pending sessions to the memory in batches, report, check.

One flow run handles many sessions (Prefect costs about a second per flow run, so one run
per session would not scale); each session is still its own transaction inside a batch.
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from hag.session.process import process_pending
from tasks.checks import run_expectations
from tasks.session import apply_session_batch, publish_session_summary


@flow(name="session-end")
def session_end_flow(
    batch_size: int | None = None, limit: int | None = None, workers: int = 1, check: bool = True
) -> dict[str, Any]:
    """Apply pending sessions batch by batch in one recorded run (hag.session.process:
    process_pending, each batch a task), publish the summary, then run the data-quality
    suites (a failed expectation fails the flow run)."""
    total = process_pending(
        batch_size,
        limit,
        workers=workers,
        run_batch=lambda run_id, want: apply_session_batch(run_id, want, workers),
    )
    publish_session_summary(total)
    if check:
        run_expectations()  # the expectation suites (tasks/checks.py), last, on the whole memory
    return total.as_dict()
