"""Thin Prefect tasks around `hag.operations.privacy`: a learner's export and erasure, and their reports.

The artifacts say how many rows of which table were written or erased; they never name the
learner (an artifact lives in Prefect's own database, which an erasure does not reach).
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import deployment, flow_run

from hag.config import get_config
from hag.errors import ValidationError
from hag.operations import privacy
from hag.operations.privacy import ErasureResult, ExportResult


def export_path(out: str | None) -> Path:
    """Where an export goes: `out`, or the data folder's `exports/` named by the flow run
    (not by the learner). A deployment's run works in a clone in a temporary folder that is
    deleted when it ends, so there a relative `out`, or the data folder's default (inside
    that clone), is refused: the file would be gone with the run."""
    in_deployment = deployment.get_id() is not None
    if out:
        path = Path(out)
        if in_deployment and not path.is_absolute():
            raise ValidationError(
                f"out {out!r} is relative: a deployment's run works in a temporary folder "
                "deleted when it ends; give an absolute path on the worker's machine"
            )
        return path
    config = get_config()
    if in_deployment and (
        "data_dir" not in config.model_fields_set or not config.data_dir.is_absolute()
    ):
        raise ValidationError(
            "no folder outlives this run for the export: give `out` as an absolute path on "
            "the worker's machine, or an absolute HAG_DATA_DIR for the worker (`hag serve` "
            "sets it)"
        )
    folder = config.data_dir / "exports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"learner-export-{flow_run.get_id() or 'local'}.jsonl"


@task(name="export-learner-data", cache_policy=NO_CACHE)
def export_learner_data(learner_id: str, out: str | None) -> ExportResult:
    """Write everything held about one learner to a JSON Lines file on the worker's machine."""
    result = privacy.export_learner(learner_id, export_path(out))
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
