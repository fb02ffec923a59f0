"""What a flow run says about itself in the Prefect UI: its name from its parameters, and a
`dry-run` tag, so an operator tells runs apart at a glance (`nightly 2027-09-01`,
`nightly dry-run 2027-09-01`, `enrich cryptography ×5`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prefect.runtime import deployment, flow_run

DRY_RUN_TAG = "dry-run"


def _day(as_of: Any) -> str:
    """The day a run works on: its `as_of`, else the day it was scheduled for (UTC)."""
    if isinstance(as_of, str) and as_of:
        as_of = datetime.fromisoformat(as_of.replace("Z", "+00:00"))
    if not isinstance(as_of, datetime):
        as_of = flow_run.get_scheduled_start_time() or datetime.now(UTC)
    return f"{as_of:%Y-%m-%d}"


def _dry(parameters: dict[str, Any]) -> str:
    return "dry-run " if parameters.get("dry_run") else ""


def nightly_run_name() -> str:
    """`nightly 2027-09-01`, `nightly dry-run 2027-09-01`."""
    p = flow_run.get_parameters()
    return f"nightly {_dry(p)}{_day(p.get('as_of'))}"


def enrichment_run_name() -> str:
    """`enrich cryptography ×5`, `enrich dry-run all topics ×default`."""
    p = flow_run.get_parameters()
    limit = p.get("limit")
    return f"enrich {_dry(p)}{p.get('topic') or 'all topics'} ×{limit or 'default'}"


def session_end_run_name() -> str:
    """`session-end 2027-09-01 02:35` (the scheduled minute), with the worker count if > 1."""
    p = flow_run.get_parameters()
    when = flow_run.get_scheduled_start_time() or datetime.now(UTC)
    workers = p.get("workers") or 1
    return f"session-end {when:%Y-%m-%d %H:%M}" + (f" ×{workers} workers" if workers > 1 else "")


def restore_run_name() -> str:
    """`restore run 9b1e2b57`, `restore dry-run 2 edge(s)`."""
    p = flow_run.get_parameters()
    what = f"run {p['run']}" if p.get("run") else f"{len(p.get('edge_ids') or [])} edge(s)"
    return f"restore {_dry(p)}{what}"


def tag_dry_run(dry_run: bool) -> None:
    """Add the `dry-run` tag to the current flow run (tags are otherwise set at creation)."""
    if not dry_run:
        return
    from prefect.client.orchestration import get_client

    run_id = flow_run.get_id()
    if run_id is None:
        return
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(run_id)
        if DRY_RUN_TAG not in current.tags:
            client.update_flow_run(run_id, tags=[*current.tags, DRY_RUN_TAG])


def require_database_in_deployment() -> None:
    """In a flow run of a deployment, refuse to start an embedded database (hag.db).

    A worker without DATABASE_URL would otherwise start, migrate and process an empty
    memory of its own and report success. Called first in every flow body; a flow called
    directly (the CLI, tests, `hag demo`) keeps the embedded default.
    """
    if deployment.id is None:
        return
    from hag import db

    db.refuse_embedded(f"a flow run of deployment {deployment.name or deployment.id}")
