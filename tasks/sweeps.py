"""Thin Prefect tasks around `hag.nightly.sweeps`: the run, the operator's decision on a big night,
and the report it publishes.

Dry runs publish under their own artifact keys (`nightly-dry-run-…`), so the latest
artifact under a real key (`nightly-…`) is always a real run's.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import FlowPauseTimeout
from prefect.flow_runs import pause_flow_run
from prefect.input import RunInput
from prefect.runtime import flow_run
from pydantic import Field

from hag import settings
from hag.nightly.sweeps import (
    Decision,
    NightlySummary,
    counts_table,
    culled_table,
    render_markdown,
    run_nightly,
)
from tasks.runtime import library_logs_in_run

FORECAST_KEY = "nightly-cull-forecast"


class CullDecision(RunInput):
    """The form a paused big night shows in the Prefect UI."""

    approve: bool = Field(
        default=False,
        description="Cull exactly the forecast edges (see the nightly-cull-forecast artifact). "
        "Leave unticked to cull nothing tonight.",
    )
    note: str = Field(default="", max_length=500, description="Why (kept in the run's summary).")


def artifact_key(name: str, dry_run: bool) -> str:
    """A report's artifact key: `nightly-<name>`, or `nightly-dry-run-<name>` for a dry run."""
    return f"nightly-{'dry-run-' if dry_run else ''}{name}"


@task(name="nightly-sweep", cache_policy=NO_CACHE)
def nightly_sweep(as_of: datetime | None, dry_run: bool, ask: bool = True) -> NightlySummary:
    """Promotion, archiving and the audited cull (or a dry run); a big night asks first
    (unless `ask` is False: the command line's runs never pause)."""
    logger = get_run_logger()
    summary = run_nightly(
        as_of=as_of,
        dry_run=dry_run,
        flow_run_id=flow_run.get_id(),
        decide=ask_operator if ask else None,
    )
    log_summary(logger, summary)
    return summary


def log_summary(logger: Any, summary: NightlySummary) -> None:
    """What each step did, with counts and timings, and what was culled, in the run's log."""
    steps = summary.step_seconds
    would = "would be " if summary.dry_run else ""
    if summary.run_id is not None:
        logger.info("nightly run %s as of %s", summary.run_id, summary.as_of.isoformat())
    else:
        logger.info("nightly dry run as of %s: nothing changes", summary.as_of.isoformat())
    logger.info(
        "promotion%s: %d candidate → pattern, %d pattern → proven (%.2f s)",
        " (would be)" if summary.dry_run else "",
        summary.promoted_to_pattern,
        summary.promoted_to_proven,
        steps.get("promotion", 0.0),
    )
    for p in summary.promoted:
        logger.info(
            "promoted %s/%s to %s, entry %s",
            p["topic_id"],
            p["concept_slug"],
            p["new_maturity"],
            p["entry_id"],
        )
    if summary.promotions > len(summary.promoted) and summary.promoted:
        logger.info(
            "… and %d more promotion(s) (nightly_log_max_promotions %d names the first)",
            summary.promotions - len(summary.promoted),
            len(summary.promoted),
        )
    logger.info(
        "archive: %d entries %sarchived (%.2f s)",
        summary.archived,
        would,
        steps.get("archive", 0.0),
    )
    if any(summary.retention.values()):  # the retention dials (docs/privacy.md)
        logger.info(
            "retention: student messages %sstripped from %d session(s), raw text from %d "
            "quarantined payload(s) (%.2f s)",
            would,
            summary.retention["sessions_stripped"],
            summary.retention["quarantine_stripped"],
            steps.get("retention", 0.0),
        )
    by_type = ", ".join(f"{k} {v}" for k, v in summary.culled_by_source_type.items()) or "none"
    logger.info(
        "cull: %d edges %sculled (%s) (%.2f s)",
        summary.culled,
        would,
        by_type,
        steps.get("cull", 0.0),
    )
    for e in summary.culled_edges:
        logger.info(
            "%sculled %s -%s-> %s (%s, confidence %.3f, %d days) edge %s",
            would,
            e.source_concept,
            e.edge_type,
            e.target_concept,
            e.source_type,
            e.confidence,
            e.age_days,
            e.edge_id,
        )
    if summary.guard:
        logger.warning(
            "big-night guard: %s; decision: %s", summary.guard["reason"], summary.guard["decision"]
        )


def ask_operator(summary: NightlySummary) -> Decision:
    """Publish the forecast beside the pause, then wait for the operator's answer.

    No answer within `cull_guard_timeout_seconds` culls nothing (and the report says so).
    """
    logger = get_run_logger()
    guard = summary.guard or {}
    timeout = settings.current().cull_guard_timeout_seconds
    create_table_artifact(
        key=FORECAST_KEY,
        table=culled_table(summary, restorable=False),
        description=f"Awaiting an operator: {guard.get('reason', '')}. Approve in the paused run's "
        f"form to cull exactly these {summary.culled} edges ({len(summary.culled_edges)} shown); "
        f"no answer within {timeout} s culls nothing.",
    )
    logger.warning(
        "big-night guard: %s; pausing for an operator's decision (timeout %d s)",
        guard.get("reason"),
        timeout,
    )
    try:
        answer = pause_flow_run(wait_for_input=CullDecision, timeout=timeout, key="big-night")
    except FlowPauseTimeout:
        logger.warning("no decision within %d s: culling nothing tonight", timeout)
        _resume_after_timeout()
        decision = Decision(False, "timed out", f"no answer within {timeout} s")
    else:
        outcome = "approved" if answer.approve else "rejected"
        logger.warning("operator %s the cull of %d edges", outcome, summary.culled)
        decision = Decision(answer.approve, outcome, answer.note)
    publish_decision(summary, decision)
    return decision


def publish_decision(summary: NightlySummary, decision: Decision) -> None:
    """The forecast artifact again (a new version under its key), now saying what was
    decided, so it no longer reads as awaiting an operator."""
    reason = (summary.guard or {}).get("reason", "")
    what = (
        f"Approved: exactly these {summary.culled} edges are culled"
        if decision.approved
        else f"{decision.outcome.capitalize()}: none of these {summary.culled} edges is culled "
        "tonight"
    )
    create_table_artifact(
        key=FORECAST_KEY,
        table=culled_table(summary, restorable=False),
        description=f"{what} ({reason})." + (f" Note: {decision.note}" if decision.note else ""),
    )


def _resume_after_timeout() -> None:
    """A pause that timed out leaves the run Paused on the server: mark it Running again, so
    the rest of the night (report, suites) runs and the run can complete."""
    from prefect.client.orchestration import get_client
    from prefect.states import Running

    with get_client(sync_client=True) as client:
        client.set_flow_run_state(flow_run.get_id(), Running(), force=True)


@task(name="build-topic-indexes", cache_policy=NO_CACHE)
def build_topic_indexes() -> list[str]:
    """The missing per-topic HNSW indexes, for topics past `topic_exact_scan_max_rows`,
    then the search copy's large partitions put back in read order (CLUSTER).

    Built CONCURRENTLY (sessions keep writing); a build that cannot finish (a transaction
    held open past `ann_build_lock_timeout_seconds`) is logged and left for the next night.
    Returns the topics that have an index now.
    """
    from hag.retrieval import ann

    started = time.perf_counter()
    with library_logs_in_run():  # a build skipped or refused is said in the run's log
        built = ann.nightly_upkeep()
    get_run_logger().info(
        "topic search indexes: %s (%.2f s)",
        ", ".join(built) or "none",
        time.perf_counter() - started,
    )
    return built


@task(name="publish-nightly-report", cache_policy=NO_CACHE)
def publish_nightly_report(summary: NightlySummary) -> None:
    """Three artifacts: the counts, the culled edges, and a summary an operator can read."""
    dry = summary.dry_run
    what = "Dry run (nothing changed)" if dry else f"Nightly run {summary.run_id}"
    create_table_artifact(
        key=artifact_key("counts", dry),
        table=counts_table(summary),
        description=f"{what} as of {summary.as_of.isoformat()}",
    )
    create_table_artifact(
        key=artifact_key("culled-edges", dry),
        table=culled_table(summary),
        description=f"{what}: edges {'that would be ' if dry else ''}culled "
        f"({len(summary.culled_edges)} of {summary.culled} shown)",
    )
    create_markdown_artifact(
        key=artifact_key("summary", dry), markdown=render_markdown(summary), description=what
    )
