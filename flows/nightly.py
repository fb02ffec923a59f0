"""The nightly flow: promote, archive and cull as of a moment; index; report; check."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import flow

from tasks.checks import run_expectations
from tasks.runtime import nightly_run_name, require_database_in_deployment, tag_dry_run
from tasks.sweeps import build_topic_indexes, nightly_sweep, publish_nightly_report


@flow(name="nightly", flow_run_name=nightly_run_name, validate_parameters=True)
def nightly_flow(as_of: datetime | None = None, dry_run: bool = False) -> dict[str, Any]:
    """Run the sweeps (one transaction, audited cull; a big night pauses for an operator's
    decision), build the per-topic search indexes a grown topic needs, publish the report,
    run the suites (not after a dry run, which changed nothing).

    A dry run changes nothing and builds no index (`topic_indexes` is then None; otherwise
    the topics that have one).

    Args:
        as_of: 'Now' for the age rules (promotion and cull ages) and the time the run stamps
            on what it changes, for backfills; empty means now. A time without a zone is UTC.
        dry_run: Report what would change and change nothing (the run is tagged dry-run and
            publishes under nightly-dry-run-* artifact keys).
    """
    require_database_in_deployment()
    tag_dry_run(dry_run)
    summary = nightly_sweep(as_of, dry_run)
    indexed = None if dry_run else build_topic_indexes()
    publish_nightly_report(summary)
    if not dry_run:  # a dry run changed nothing: nothing new to check
        run_expectations()
    return {**summary.as_dict(), "topic_indexes": indexed}
