"""Thin Prefect tasks around `hag.enrichment`: the run itself, and its two artifacts.

The data-quality suites after a run are the shared `tasks.checks.run_expectations`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from hag.enrichment import EnrichmentSummary, enrich
from hag.enrichment.report import cost_table, render_markdown


@task(name="enrich-orphans", cache_policy=NO_CACHE)
def enrich_orphans(
    topic: str | None,
    limit: int | None,
    dry_run: bool,
    model: str | None,
    as_of: datetime | None = None,
) -> EnrichmentSummary:
    """One enrichment run. Never cached, never retried here: the attempt budget is per model
    call, inside hag.enrichment, and a re-run skips what the ledger already holds."""
    return enrich(topic=topic, limit=limit, dry_run=dry_run, model=model, as_of=as_of)


@task(name="publish-cost-ledger", cache_policy=NO_CACHE)
def publish_cost_ledger(summary: EnrichmentSummary) -> Any:
    """The token/cost ledger of the run: one row per model call, then the run totals."""
    cost = summary.cost()
    return create_table_artifact(
        table=cost_table(summary),
        key="enrichment-cost-ledger",
        description=f"Model calls of enrichment run {summary.run_id} ({summary.proposer_line}); "
        f"{cost['total_tokens']} tokens in {cost['calls']} call(s)"
        + (" - dry run, nothing written" if summary.dry_run else ""),
    )


@task(name="publish-proposals", cache_policy=NO_CACHE)
def publish_proposals(summary: EnrichmentSummary) -> Any:
    """Accepted and rejected proposals per orphan, with the reject reasons."""
    totals = summary.totals()
    return create_markdown_artifact(
        markdown=render_markdown(summary),
        key="enrichment-proposals",
        description=f"{totals['accepted']} accepted, {totals['rejected']} rejected, "
        f"{totals['failed']} failed orphan(s)",
    )
