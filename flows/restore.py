"""The restore flow: put culled edges back from the audit, from the Prefect UI."""

from __future__ import annotations

from typing import Annotated, Any

from prefect import flow
from pydantic import Field

from hag.errors import HagError, ValidationError
from hag.nightly import audit
from hag.storage import runs
from tasks.audit import publish_restore_report, restore_culled_edges
from tasks.checks import run_expectations
from tasks.runtime import (
    partly_failed,
    refused,
    restore_run_name,
    tag_dry_run,
    use_deployment_database,
)

HexId = Annotated[str, Field(pattern=r"^[0-9a-fA-F-]{4,36}$")]


# Bounds are declared on the types (the run form and the API refuse a bad value before a
# run exists); the descriptions are the docstring's Args, which Prefect shows in the form.
@flow(name="restore", flow_run_name=restore_run_name, validate_parameters=True)
def restore_flow(
    run: HexId | None = None,
    edge_ids: Annotated[list[HexId] | None, Field(min_length=1, max_length=10_000)] = None,
    dry_run: bool = True,
) -> dict[str, Any]:
    """Restore culled edges exactly as they were (by run, or by edge ids), then report.

    A dry run (the default: look first) publishes what would come back; an edge whose
    endpoint is gone or that has been recreated is refused with the reason.

    Args:
        run: Restore every edge this run culled: the nightly run's id (its flow run's), a
            unique prefix of at least 4 hex digits, or the 8-digit ending listings show.
        edge_ids: Or the culled edges to restore, by id, unique prefix or ending (the short
            ids in the nightly-culled-edges artifact's restore column).
        dry_run: Only show what would come back and what would be refused; change nothing.
    """
    use_deployment_database()
    tag_dry_run(dry_run)
    try:  # an unknown or ambiguous id is the operator's to fix: one line, not a traceback
        if bool(run) == bool(edge_ids):
            raise ValidationError("give exactly one of run or edge_ids")
        run = str(runs.resolve(run)) if run else None
        edge_ids = [str(audit.resolve_edge(e)) for e in edge_ids or []] or None
    except HagError as exc:
        return refused(f"restore refused: {exc}")  # type: ignore[no-any-return]
    result = restore_culled_edges(run, edge_ids, dry_run)
    publish_restore_report(result)
    if result.restored and not dry_run:
        run_expectations()  # the shared suites task (tasks/checks.py), as every flow ends
    if result.refused and not dry_run:  # as `hag audit restore` exits 1: the run ends Failed
        return partly_failed(
            f"{len(result.refused)} edge(s) refused, {len(result.restored)} restored "
            "(the restore report says why)",
            result.as_dict(),
        )
    return result.as_dict()
