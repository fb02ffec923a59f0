"""The nightly flow: promote, archive and cull as of a moment; index; report; check."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import flow

from tasks.checks import run_expectations
from tasks.sweeps import build_topic_indexes, nightly_sweep, publish_nightly_report


@flow(name="nightly")
def nightly_flow(as_of: datetime | None = None, dry_run: bool = False) -> dict[str, Any]:
    """Run the sweeps (one transaction, audited cull), build the per-topic search indexes a
    grown topic needs, publish the report, run the suites.

    `as_of` is "now" for the age rules (backfills); a dry run changes nothing and builds no
    index (`topic_indexes` is then None; otherwise the topics that have one).
    """
    summary = nightly_sweep(as_of, dry_run)
    indexed = None if dry_run else build_topic_indexes()
    publish_nightly_report(summary)
    run_expectations()
    return {**summary.to_dict(), "topic_indexes": indexed}
