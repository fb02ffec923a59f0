"""The enrichment flow: wire orphan concepts into the graph, and publish what it cost."""

from __future__ import annotations

from typing import Annotated, Any

from prefect import flow
from pydantic import Field

from tasks.checks import run_expectations
from tasks.enrichment import enrich_orphans, publish_cost_ledger, publish_proposals
from tasks.runtime import (
    Moment,
    enrichment_run_name,
    partly_failed,
    refused,
    start_refusal,
    tag_dry_run,
    use_deployment_database,
)


# Bounds are declared on the types (the run form and the API refuse a bad value before a
# run exists); the descriptions are the docstring's Args, which Prefect shows in the form.
@flow(name="enrichment", flow_run_name=enrichment_run_name, validate_parameters=True)
def enrichment_flow(
    topic: Annotated[str | None, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=200)] = None,
    limit: Annotated[int | None, Field(ge=1, le=100_000)] = None,
    dry_run: bool = False,
    model: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
    as_of: Moment = None,
) -> dict[str, Any]:
    """Enrich orphans (validated proposals), publish the cost ledger and the proposals, check.

    The same parameters as `hag enrich`: a backfill from the Prefect UI is this deployment
    run with a topic, a limit, a model, or as a dry run.

    Args:
        topic: Only orphans of this topic (its slug, e.g. cryptography); empty: every topic.
        limit: At most this many orphans, 1 to 100000 (each costs model calls); empty: the
            enrichment_default_limit dial.
        dry_run: Ask the model and validate, but write nothing (the run is tagged dry-run).
        model: The model to ask (e.g. gpt-4o-mini); empty: the configured one.
        as_of: The moment accepted edges are created at, for backfills; empty means now.
            An ISO-8601 date or time (no zone means UTC), checked when the run is created.
    """
    use_deployment_database()
    tag_dry_run(dry_run)
    refusal = start_refusal(as_of, topic=topic)
    if refusal is not None:
        return refused(f"enrichment refused: {refusal}")  # type: ignore[no-any-return]
    summary = enrich_orphans(topic, limit, dry_run, model, as_of)
    publish_cost_ledger(summary)
    publish_proposals(summary)
    if not dry_run:
        run_expectations()  # the shared suites task (tasks/checks.py), as every flow ends
    result = summary.as_dict()
    failed = result["totals"]["failed"]
    if failed:  # as `hag enrich` exits 1: the run ends Failed, its report published
        return partly_failed(
            f"{failed} orphan(s) failed after their attempt budget; nothing of them was "
            "written (the enrichment-proposals artifact says why)",
            result,
        )
    return result
