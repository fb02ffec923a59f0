"""Thin Prefect tasks around `hag.session.process`: apply a batch, report."""

from __future__ import annotations

from uuid import UUID

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from hag.session.process import pending_count, process_pending, requeue_failed
from hag.session.queue import process_batch
from hag.session.report import render_markdown, summary_table
from hag.session.summary import ProcessSummary
from hag.storage import db


def count_pending() -> int:
    """Sessions waiting to be applied (a plain read: an idle run costs no task run)."""
    with db.pool().connection() as conn:
        n = pending_count(conn)
    get_run_logger().info("%d session(s) pending", n)
    return n


def retry_failed_sessions() -> int:
    """Put the failed sessions back to pending (a plain write, before the pending count)."""
    n = len(requeue_failed())
    get_run_logger().info("%d failed session(s) put back to pending for a retry", n)
    return n


def process_sessions(batch_size: int | None, limit: int | None, workers: int) -> ProcessSummary:
    """One recorded run (hag_runs, linked to this flow run), each batch a task run."""
    from hag.vectors.embeddings import describe, get_embedder

    get_run_logger().info("%s", describe(get_embedder()))  # the offline default says so
    total = process_pending(
        batch_size,
        limit,
        workers=workers,
        run_batch=lambda run_id, want: apply_session_batch(run_id, want, workers),
        flow_run_id=flow_run.get_id(),
    )
    counts = total.as_dict()
    get_run_logger().info(
        "session-end run %s: %d applied, %d rejected, %d failed in %.2f s; left %s pending, "
        "%s failed; entries %d new, %d merged; edges %d new, %d reinforced, %d graded up, "
        "%d graded down; steps %s",
        total.run_id,
        total.sessions,
        total.rejects,
        total.failures,
        total.seconds,
        total.left_pending,
        total.left_failed,
        counts["entries_created"],
        counts["entries_merged"],
        counts["edges_created"],
        counts["edges_reinforced"],
        counts["edges_graded_up"],
        counts["edges_graded_down"],
        ", ".join(f"{k} {v:.2f} s" for k, v in total.step_seconds.items()),
    )
    for r in total.rejected:
        get_run_logger().warning("rejected %s", ", ".join(f"{k} {v}" for k, v in r.items()))
    for r in total.failed:
        get_run_logger().error("failed %s", ", ".join(f"{k} {v}" for k, v in r.items()))
    return total


# No caching: every call writes to the memory, and the inputs (summaries) are not keys.
@task(name="apply-session-batch", cache_policy=NO_CACHE)
def apply_session_batch(run_id: UUID, size: int, workers: int = 1) -> ProcessSummary:
    """Apply up to `size` pending sessions, each in its own transaction, the five steps in the
    seed's order (observations, discovery, proposals, reinforcement, grading)."""
    batch = process_batch(size, run_id=run_id, workers=workers)
    get_run_logger().info(
        "batch: %d applied, %d rejected, %d failed (%.2f s)",
        batch.sessions,
        batch.rejects,
        batch.failures,
        batch.seconds,
    )
    return batch


@task(name="publish-session-summary", cache_policy=NO_CACHE)
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
