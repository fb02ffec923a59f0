"""The session-end flow: apply pending sessions to the memory in batches, report, check.

One flow run handles many sessions (Prefect costs about a second per flow run, so one run
per session would not scale); each session is still its own transaction inside a batch.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow

from hag import settings
from hag.session.process import ProcessSummary, drain
from tasks.checks import run_expectations
from tasks.session import (
    apply_session_batch,
    close_session_run,
    open_session_run,
    publish_session_summary,
)


@flow(name="session-end")
def session_end_flow(
    batch_size: int | None = None, limit: int | None = None, workers: int = 1, check: bool = True
) -> dict[str, Any]:
    """Open a run, apply pending sessions batch by batch, publish the summary, close the run,
    then run the data-quality suites (a failed expectation fails the flow run)."""
    size = int(batch_size or settings.current()["session_batch_size"])
    run_id = open_session_run({"batch_size": size, "limit": limit, "workers": workers})
    total = ProcessSummary(run_id=run_id)
    start = time.perf_counter()
    try:
        drain(lambda want: apply_session_batch(run_id, want, workers), size, limit, total)
    except BaseException:
        total.seconds = time.perf_counter() - start
        close_session_run(run_id, total, "failed")
        raise
    total.seconds = time.perf_counter() - start
    publish_session_summary(total)
    close_session_run(run_id, total, "done")
    if check:
        run_expectations()  # the expectation suites (tasks/checks.py), last, on the whole memory
    return total.as_dict()
