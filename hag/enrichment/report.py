"""What an enrichment run reports, as plain values: the cost ledger and the proposals.

The Prefect tasks (tasks/enrichment.py) publish these as artifacts; the CLI and tests read
them without Prefect.
"""

from __future__ import annotations

from typing import Any

from hag.enrichment.run import EnrichmentSummary

LEDGER_COLUMNS = (
    "concept_slug",
    "attempt",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_ms",
    "ok",
    "error",
)


def cost_table(summary: EnrichmentSummary) -> list[dict[str, Any]]:
    """The token/cost ledger of the run: one row per model call, then the run totals.

    Cost in USD at the model's price (the enrichment_prices_usd_per_million_tokens dial;
    None for an unpriced model), latency in whole milliseconds.
    """
    cost = summary.cost()
    rows = []
    for c in summary.calls:
        call = {**c.as_dict(), "cost_usd": c.cost_usd(summary.prices)}
        call["latency_ms"] = round(c.latency_ms)
        rows.append({k: call[k] for k in LEDGER_COLUMNS})
    rows.append(
        {
            "concept_slug": "TOTAL",
            "attempt": cost["calls"],
            "model": cost["model"],
            "prompt_tokens": cost["prompt_tokens"],
            "completion_tokens": cost["completion_tokens"],
            "cost_usd": cost["cost_usd"],
            "latency_ms": cost["latency_ms"],
            "ok": cost["failed_calls"] == 0,
            "error": None,
        }
    )
    return rows


def render_markdown(summary: EnrichmentSummary) -> str:
    """Accepted and rejected proposals per orphan, with the reject reasons, then the totals."""
    lines = [
        # A dry run records nothing, so it shows no run id (there is nothing to look up).
        "# Enrichment dry run (nothing written)"
        if summary.dry_run
        else f"# Enrichment run `{summary.run_id}`",
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
    lines += ["", ", ".join(f"{k}: {v}" for k, v in summary.totals().items())]
    return "\n".join(lines)
