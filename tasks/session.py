"""Thin Prefect tasks around `hag.session.process`: apply a batch, report."""

from __future__ import annotations

from uuid import UUID

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NONE

from hag.session.process import ProcessSummary, process_batch, render_markdown, summary_table


# No caching: every call writes to the memory, and the inputs (summaries) are not keys.
@task(name="apply-session-batch", cache_policy=NONE)
def apply_session_batch(run_id: UUID, size: int, workers: int = 1) -> ProcessSummary:
    """Apply up to `size` pending sessions, each in its own transaction, the five steps in the
    seed's order (observations, discovery, proposals, reinforcement, grading)."""
    return process_batch(size, run_id=run_id, workers=workers)


@task(name="publish-session-summary", cache_policy=NONE)
def publish_session_summary(summary: ProcessSummary) -> None:
    """The run summary as a markdown artifact and the counts as a table artifact."""
    create_markdown_artifact(
        key="session-end-summary",
        markdown=render_markdown(summary),
        description=f"Session-end run {summary.run_id}",
    )
    create_table_artifact(
        key="session-end-counts",
        table=summary_table(summary),
        description=f"Session-end run {summary.run_id}: what changed",
    )
