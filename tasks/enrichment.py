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
    rows = [
        {
            k: c.as_dict()[k]
            for k in (
                "concept_slug",
                "attempt",
                "model",
                "prompt_tokens",
                "completion_tokens",
                "latency_ms",
                "ok",
                "error",
            )
        }
        for c in summary.calls
    ]
    rows.append(
        {
            "concept_slug": "TOTAL",
            "attempt": cost["calls"],
            "model": cost["model"],
            "prompt_tokens": cost["prompt_tokens"],
            "completion_tokens": cost["completion_tokens"],
            "latency_ms": cost["latency_ms"],
            "ok": cost["failed_calls"] == 0,
            "error": None,
        }
    )
    return create_table_artifact(
        table=rows,
        key="enrichment-cost-ledger",
        description=f"Model calls of enrichment run {summary.run_id} ({summary.proposer_line}); "
        f"{cost['total_tokens']} tokens in {cost['calls']} call(s)"
        + (" - dry run, nothing written" if summary.dry_run else ""),
    )


@task(name="publish-proposals", cache_policy=NO_CACHE)
def publish_proposals(summary: EnrichmentSummary) -> Any:
    """Accepted and rejected proposals per orphan, with the reject reasons."""
    lines = [
        f"# Enrichment {'dry run' if summary.dry_run else 'run'} `{summary.run_id}`",
        "",
        f"{summary.proposer_line}",
        "",
        "| orphan | status | edge | verdict | why |",
        "| --- | --- | --- | --- | --- |",
    ]
    for o in summary.orphans:
        shown = False
        for a in o.accepted:
            lines.append(
                f"| {o.concept_slug} | {o.status} | {a['source']} -{a['edge_type']}-> "
                f"{a['target']} | accepted | {a.get('reason', '')} |"
            )
            shown = True
        for r in o.rejected:
            lines.append(
                f"| {o.concept_slug} | {o.status} | {r.get('source')} -{r.get('edge_type')}-> "
                f"{r.get('target')} | rejected: {r['reject']} | {r['detail']} |"
            )
            shown = True
        if not shown:
            lines.append(f"| {o.concept_slug} | {o.status} | | | {o.error or 'no proposals'} |")
    totals = summary.totals()
    lines += ["", ", ".join(f"{k}: {v}" for k, v in totals.items())]
    return create_markdown_artifact(
        markdown="\n".join(lines),
        key="enrichment-proposals",
        description=f"{totals['accepted']} accepted, {totals['rejected']} rejected, "
        f"{totals['failed']} failed orphan(s)",
    )
