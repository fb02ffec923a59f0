"""Thin Prefect tasks around `hag.sweeps`: the run itself, and the report it publishes."""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from hag.sweeps import NightlySummary, counts_table, culled_table, render_markdown, run_nightly


@task(name="nightly-sweep")
def nightly_sweep(as_of: datetime | None, dry_run: bool) -> NightlySummary:
    """Promotion, archiving and the audited cull, in one transaction (or a dry run)."""
    return run_nightly(as_of=as_of, dry_run=dry_run)


@task(name="build-topic-indexes")
def build_topic_indexes() -> list[str]:
    """The missing per-topic HNSW indexes, for topics past `topic_exact_scan_max_rows`.

    Built CONCURRENTLY (sessions keep writing); a build that cannot finish (a transaction
    held open past `ann_build_lock_timeout_seconds`) is logged and left for the next night.
    Returns the topics that have an index now.
    """
    from hag.retrieval import ann  # noqa: PLC0415

    return ann.build_topic_indexes(concurrently=True, strict=False)


@task(name="publish-nightly-report")
def publish_nightly_report(summary: NightlySummary) -> None:
    """Three artifacts: the counts, the culled edges, and a summary an operator can read."""
    suffix = " (dry run: nothing changed)" if summary.dry_run else ""
    create_table_artifact(
        key="nightly-counts",
        table=counts_table(summary),
        description=f"Nightly run {summary.run_id} as of {summary.as_of.isoformat()}{suffix}",
    )
    create_table_artifact(
        key="nightly-culled-edges",
        table=culled_table(summary),
        description=f"Edges culled by run {summary.run_id}{suffix}: source → target, type, "
        f"provenance, confidence, age ({len(summary.culled_edges)} of {summary.culled} shown)",
    )
    create_markdown_artifact(
        key="nightly-summary",
        markdown=render_markdown(summary),
        description=f"Nightly run {summary.run_id}{suffix}",
    )
