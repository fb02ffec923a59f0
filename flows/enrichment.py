"""The enrichment flow: wire orphan concepts into the graph, and publish what it cost."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import flow

from tasks.checks import run_expectations
from tasks.enrichment import enrich_orphans, publish_cost_ledger, publish_proposals


@flow(name="enrichment")
def enrichment_flow(
    topic: str | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    model: str | None = None,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """Enrich orphans (validated proposals), publish the cost ledger and the proposals, check.

    The same parameters as `hag enrich`: a backfill from the Prefect UI is this deployment
    run with a topic, a limit, a model, or as a dry run.
    """
    summary = enrich_orphans(topic, limit, dry_run, model, as_of)
    publish_cost_ledger(summary)
    publish_proposals(summary)
    if not dry_run:
        run_expectations()  # the shared suites task (tasks/checks.py), as every flow ends
    return summary.to_dict()
