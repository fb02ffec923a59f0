"""`hag enrich [--topic T] [--limit N] [--dry-run] [--model M] [--json]`: a manual backfill."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import click

from hag.cli._common import COUNT, TIMESTAMP, dispatch, echo_json, json_option, note, ready


def _edge(p: dict[str, Any]) -> str:  # a proposal as JSON
    return f"{p.get('source')} -{p.get('edge_type')}-> {p.get('target')}"


@click.command()
@click.option("--topic", help="Only orphans of this topic (default: every topic).")
@click.option(
    "--limit",
    type=COUNT,
    help="At most this many orphans (default: the enrichment_default_limit dial).",
)
@click.option(
    "--dry-run", is_flag=True, help="Propose and validate, show everything, write nothing."
)
@click.option("--model", help="The chat model to ask (default: HAG_LLM_MODEL); the ledger key.")
@click.option(
    "--as-of",
    type=TIMESTAMP,
    help="The moment the accepted edges are created at (default: now); naive = UTC.",
)
@json_option
def enrich(
    topic: str | None,
    limit: int | None,
    dry_run: bool,
    model: str | None,
    as_of: datetime | None,
    as_json: bool,
) -> None:
    """Wire orphan concepts into their topic's graph with model-proposed, validated edges.

    Without an API key the deterministic offline proposer runs instead (and says so).
    Orphans already sent to the same model are skipped, so a re-run never pays twice.
    With PREFECT_API_URL set, this is a run of the enrichment flow on that server (recorded
    there with its cost ledger and proposals); without it, no Prefect at all.
    Exits 1 when an orphan failed after its attempt budget (nothing of it was written).
    """
    ready()

    def direct() -> dict[str, Any]:
        from hag.enrichment import enrich as run_enrichment

        return run_enrichment(
            topic=topic, limit=limit, dry_run=dry_run, model=model, as_of=as_of
        ).as_dict()

    def through_flow() -> dict[str, Any]:
        from hag.support.orchestration import run_summary

        return run_summary(
            "enrichment", topic=topic, limit=limit, dry_run=dry_run, model=model, as_of=as_of
        )

    summary = dispatch("enrichment", direct, through_flow, force_direct=False)
    note(summary["proposer_line"])
    if as_json:
        echo_json(summary)
    else:
        _print_summary(summary, topic)
    failed = summary["totals"]["failed"]
    if failed:
        # The first orphan's reason, and which model where: an endpoint that is down says so.
        errors = [o["error"] for o in summary["orphans"] if o["error"]]
        asked = summary["proposer_line"].removeprefix("proposer: ").split(" (")[0]
        first = f" (the first: {_one_line(errors[0]).rstrip('.')}; asked {asked})" if errors else ""
        click.echo(
            f"hag: {failed} orphan(s) failed after their attempt budget{first}; "
            "nothing of them was written",
            err=True,
        )
        sys.exit(1)


def _print_summary(summary: dict[str, Any], topic: str | None) -> None:
    heading = "dry run (nothing written)" if summary["dry_run"] else f"run {summary['run_id']}"
    click.echo(
        f"enrichment {heading}: {len(summary['orphans'])} orphan(s)"
        f"{f' in {topic}' if topic else ''}, {summary['totals']['already_enriched']} already "
        f"enriched by {summary['proposer']}"
    )
    for o in summary["orphans"]:
        click.echo(
            f"  {o['topic_id']}/{o['concept_slug']}: {o['status']} "
            f"({len(o['accepted'])} accepted, {len(o['rejected'])} rejected, "
            f"{o['attempts']} call(s), {o['candidates']} candidates, "
            f"{o['prompt_chars']} prompt chars)"
        )
        for a in o["accepted"]:
            click.echo(f"      + {_edge(a)}  {a.get('reason', '')}")
        for r in o["rejected"]:
            click.echo(f"      - {_edge(r)}  [{r['reject']}] {r['detail']}")
        if o["error"]:
            click.echo(f"      ! {o['error']}")
    cost = summary["cost"]
    usd = "price unknown" if cost["cost_usd"] is None else f"${cost['cost_usd']:.4f}"
    click.echo(
        f"cost: {cost['calls']} call(s) to {cost['model']}, {cost['prompt_tokens']} prompt + "
        f"{cost['completion_tokens']} completion = {cost['total_tokens']} tokens ({usd}), "
        f"{cost['latency_ms']:.0f} ms"
    )


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())
