"""The session-end flow: apply pending sessions to the memory in batches, report, check.

One flow run handles many sessions (Prefect costs about a second per flow run, so one run
per session would not scale); each session is still its own transaction inside a batch.
With nothing pending (most of the scheduled runs) it records nothing, publishes nothing and
runs no suite: it finishes in about a second. The suites run after a run that changed the
memory. A run that left sessions failed for a reason outside their payload (kept whole, not
quarantined) ends Failed after publishing its summary, so the UI shows it; `retry_failed`
puts such sessions back to pending first.
"""

from __future__ import annotations

from typing import Annotated, Any

from prefect import flow
from pydantic import Field

from hag.session.outcome import SessionsFailed
from hag.storage.pool_sizes import MAX_SESSION_WORKERS
from tasks.checks import run_expectations
from tasks.runtime import session_end_run_name, use_deployment_database
from tasks.session import (
    count_pending,
    process_sessions,
    publish_session_summary,
    retry_failed_sessions,
)


# Bounds are declared on the types (the run form and the API refuse a bad value before a
# run exists); the descriptions are the docstring's Args, which Prefect shows in the form.
@flow(name="session-end", flow_run_name=session_end_run_name, validate_parameters=True)
def session_end_flow(
    batch_size: Annotated[int | None, Field(ge=1, le=100_000)] = None,
    limit: Annotated[int | None, Field(ge=1, le=10_000_000)] = None,
    workers: Annotated[int, Field(ge=1, le=MAX_SESSION_WORKERS)] = 1,
    check: bool = True,
    retry_failed: bool = False,
) -> dict[str, Any]:
    """Apply pending sessions batch by batch in one recorded run, publish the summary, then
    run the data-quality suites (a failed expectation fails the flow run). With nothing
    pending: nothing recorded, published or checked.

    Args:
        batch_size: Sessions applied per batch (one task run each), 1 to 100000; empty: the
            session_batch_size dial.
        limit: At most this many sessions, 1 to 10000000; empty: every pending session.
        workers: Sessions applied concurrently, 1 to 6 (the writers' pool holds 8
            connections and keeps two free), each in its own transaction (the result equals
            some serial order); 1 applies them in ended_at order.
        check: Run the data-quality suites after a run that changed the memory.
        retry_failed: First put back to pending the sessions an earlier run failed to apply
            for a reason outside their payload (a database error), once its cause is fixed.
    """
    use_deployment_database()
    if retry_failed:
        retry_failed_sessions()
    if count_pending() == 0:
        return {"run_id": None, "sessions": 0, "rejects": 0, "idle": True}
    total = process_sessions(batch_size, limit, workers)
    publish_session_summary(total)
    if check and total.sessions:  # a run that only rejected payloads changed no memory
        run_expectations()  # the expectation suites (tasks/checks.py), last, on the whole memory
    if total.failures:  # after the summary is published: the flow run ends Failed
        raise SessionsFailed(total.failures)
    return total.as_dict()
