"""Thin Prefect tasks around `hag.enrichment`: the run itself, and its two artifacts.

The data-quality suites after a run are the shared `tasks.checks.run_expectations`. A dry
run publishes under its own keys (`enrichment-dry-run-…`), so the latest artifact under a
real key is always a real run's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

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
    summary = enrich(
        topic=topic,
        limit=limit,
        dry_run=dry_run,
        model=model,
        as_of=as_of,
        flow_run_id=flow_run.get_id(),
    )
    _log(summary)
    return summary


def _log(summary: EnrichmentSummary) -> None:
    """What the run did, orphan by orphan, and what it cost, in the run's log."""
    logger = get_run_logger()
    would = "would be " if summary.dry_run else ""
    logger.info(
        "enrichment %s with %s",
        "dry run (nothing written)" if summary.dry_run else f"run {summary.run_id}",
        summary.proposer_line,
    )
    for orphan in summary.orphans:
        logger.info(
            "orphan %s/%s: %s, %d %saccepted, %d rejected",
            orphan.topic_id,
            orphan.concept_slug,
            orphan.status,
            len(orphan.accepted),
            would,
            len(orphan.rejected),
        )
        for a in orphan.accepted:
            logger.info("  %sproposed %s", would, _proposal(a))
        for r in orphan.rejected:
            logger.info("  rejected %s", _proposal(r))
        if orphan.error:
            logger.warning("  failed: %s", orphan.error)
    totals, cost = summary.totals(), summary.cost()
    logger.info(
        "%d accepted, %d rejected, %d failed orphan(s); %d tokens in %d call(s) (%.2f s)",
        totals["accepted"],
        totals["rejected"],
        totals["failed"],
        cost["total_tokens"],
        cost["calls"],
        (summary.finished_at - summary.started_at).total_seconds()
        if summary.finished_at and summary.started_at
        else 0.0,
    )


def _key(name: str, dry_run: bool) -> str:
    return f"enrichment-{'dry-run-' if dry_run else ''}{name}"


@task(name="publish-cost-ledger", cache_policy=NO_CACHE)
def publish_cost_ledger(summary: EnrichmentSummary) -> Any:
    """The token/cost ledger of the run: one row per model call, then the run totals."""
    cost = summary.cost()
    return create_table_artifact(
        table=cost_table(summary),
        key=_key("cost-ledger", summary.dry_run),
        description=f"Model calls of enrichment {_what(summary)} ({summary.proposer_line}); "
        f"{cost['total_tokens']} tokens in {cost['calls']} call(s)"
        + (" - dry run, nothing written" if summary.dry_run else ""),
    )


@task(name="publish-proposals", cache_policy=NO_CACHE)
def publish_proposals(summary: EnrichmentSummary) -> Any:
    """Accepted and rejected proposals per orphan, with the reject reasons."""
    totals = summary.totals()
    return create_markdown_artifact(
        markdown=render_markdown(summary),
        key=_key("proposals", summary.dry_run),
        description=f"{totals['accepted']} accepted, {totals['rejected']} rejected, "
        f"{totals['failed']} failed orphan(s)",
    )


def _what(summary: EnrichmentSummary) -> str:
    return "dry run" if summary.dry_run else f"run {summary.run_id}"


def _proposal(p: dict[str, Any]) -> str:
    """One proposal as a log line: its fields, the reason last when it has one."""
    return ", ".join(f"{k} {v}" for k, v in p.items() if v is not None)
