"""The nightly flow: promote, archive and cull as of a moment; upkeep; report; check."""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger
from prefect.states import Cancelled

from hag.nightly import sweeps
from tasks.checks import run_expectations
from tasks.runtime import (
    Moment,
    nightly_run_name,
    refused,
    start_refusal,
    tag_dry_run,
    use_deployment_database,
)
from tasks.sweeps import build_topic_indexes, nightly_sweep, publish_nightly_report


@flow(name="nightly", flow_run_name=nightly_run_name, validate_parameters=True)
def nightly_flow(
    as_of: Moment = None,
    dry_run: bool = False,
    ask_operator: bool = True,
    check: bool = True,
) -> dict[str, Any]:
    """Run the sweeps (one transaction, audited cull; a big night pauses for an operator's
    decision), then the search copy's upkeep (per-topic indexes, clustering, change rows
    folded), publish the report, run the suites (not after a dry run, which changed
    nothing). The steps and their order are `hag.nightly.sweeps.nightly`'s, as for `hag nightly`.

    A dry run changes nothing and does no upkeep (`topic_indexes` is then None; otherwise
    the topics that have an index).

    Args:
        as_of: 'Now' for the age rules (promotion and cull ages) and the time the run stamps
            on what it changes, for backfills; empty means now. An ISO-8601 date or time
            (2026-03-01T02:30:00+01:00; no zone means UTC); anything else is refused when
            the run is created.
        dry_run: Report what would change and change nothing (the run is tagged dry-run and
            publishes under nightly-dry-run-* artifact keys).
        ask_operator: Pause a big night (over the cull_guard_* dials) for an operator's
            decision; unticked, the cull goes ahead as the rule says (the command line's
            runs: the command line never pauses).
        check: Run the data-quality suites after a real run.
    """
    use_deployment_database()
    tag_dry_run(dry_run)
    refusal = start_refusal(as_of)
    if refusal is not None:
        return refused(f"nightly refused: {refusal}")  # type: ignore[no-any-return]
    busy = None if dry_run else sweeps.other_nightly()
    if busy is not None:  # one nightly at a time (why not by a concurrency limit: there)
        get_run_logger().error("%s", busy)
        # called in process (`hag nightly` through a server) the flow raises it: one line
        return Cancelled(message=busy, data=sweeps.AnotherNightly(busy))  # type: ignore[return-value]
    try:
        night = sweeps.nightly(
            as_of,
            dry_run,
            sweep_step=lambda moment, dry: nightly_sweep(moment, dry, ask_operator),
            upkeep_step=build_topic_indexes,
        )
    except sweeps.FailedAfterDone as done:  # the run is done: its report and checks stand
        publish_nightly_report(done.summary)
        if check:
            run_expectations()
        raise
    publish_nightly_report(night.summary)
    if check and not dry_run:  # a dry run changed nothing: nothing new to check
        run_expectations()
    return night.as_dict()
