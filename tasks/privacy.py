"""Thin Prefect tasks around `hag.operations.privacy`: a learner's export and erasure, and their reports.

The artifacts say how many rows of which table were written or erased; they never name the
learner (an artifact lives in Prefect's own database, which an erasure does not reach).
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from hag.config import get_config
from hag.operations import privacy
from hag.operations.privacy import ErasureResult, ExportResult


def default_export_path() -> Path:
    """Where an export goes when the operator names no file: the data folder's `exports/`,
    named by the flow run (not by the learner)."""
    folder = get_config().data_dir / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"learner-export-{flow_run.get_id() or 'local'}.jsonl"


@task(name="export-learner-data", cache_policy=NO_CACHE)
def export_learner_data(learner_id: str, out: str | None) -> ExportResult:
    """Write everything held about one learner to a JSON Lines file on the worker's machine."""
    result = privacy.export_learner(learner_id, Path(out) if out else default_export_path())
    get_run_logger().info(
        "exported %d row(s) to %s: %s",
        sum(result.counts.values()),
        result.path,
        ", ".join(f"{t} {n}" for t, n in result.counts.items()),
    )
    return result


@task(name="erase-learner-data", cache_policy=NO_CACHE)
def erase_learner_data(learner_id: str, dry_run: bool, operator: str | None) -> ErasureResult:
    """Erase one learner in one transaction (a dry run rolls it back); who ran it is the
    operator named, and the flow run."""
    by = f"prefect flow run {flow_run.get_id()}" + (f" for {operator}" if operator else "")
    result = privacy.erase_learner(learner_id, dry_run=dry_run, operator=by)
    logger = get_run_logger()
    for line in result.lines():
        logger.info("%s%s", "would be " if dry_run else "", line)
    logger.info(
        "%s learner %s (erasure record %s)",
        "dry run: nothing changed for" if dry_run else "erased",
        result.learner_hash[:12],
        result.erasure_id,
    )
    return result


@task(name="publish-export-manifest", cache_policy=NO_CACHE)
def publish_export_manifest(result: ExportResult) -> None:
    """The rows per table the export wrote, and where the file is."""
    create_table_artifact(
        key="learner-export",
        table=[{"table": t, "rows": n} for t, n in result.counts.items()],
        description=f"{sum(result.counts.values())} row(s) written to {result.path}",
    )


@task(name="publish-erasure-report", cache_policy=NO_CACHE)
def publish_erasure_report(result: ErasureResult) -> None:
    """The rows per table and action (a dry run under its own key); the learner by hash."""
    create_table_artifact(
        key="learner-erasure-dry-run" if result.dry_run else "learner-erasure",
        table=[
            {"table": t, "action": a, "rows": n}
            for t, actions in result.counts.items()
            for a, n in actions.items()
        ],
        description=(
            f"learner {result.learner_hash[:12]} (salted hash): "
            + ("dry run, nothing changed" if result.dry_run else f"erasure #{result.erasure_id}")
        ),
    )
