"""Thin Prefect tasks around `hag.nightly.audit`: restore culled edges, and say what came back."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.artifacts import create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from hag.nightly import audit
from hag.nightly.audit import RestoreResult
from hag.storage import runs


@task(name="restore-culled-edges", cache_policy=NO_CACHE)
def restore_culled_edges(
    run: str | None, edge_ids: list[str] | None, dry_run: bool
) -> RestoreResult:
    """Put back what one run culled, or the edges named (ids or unique prefixes)."""
    result = audit.restore(
        edge_id=edge_ids or None,
        run_id=run or None,
        dry_run=dry_run,
        by="prefect restore deployment",
        flow_run_id=flow_run.get_id(),
    )
    logger = get_run_logger()
    verb = "would restore" if dry_run else "restored"
    logger.info("%s %d edge(s), refused %d", verb, len(result.restored), len(result.refused))
    for e in result.edges:
        logger.info(
            "%s %s -%s-> %s (%s, confidence %.3f) edge %s",
            f"refused ({e['refusal']})" if e["refusal"] else verb,
            e["source_concept"],
            e["edge_type"],
            e["target_concept"],
            e["source_type"],
            e["confidence"],
            e["edge_id"],
        )
    return result


@task(name="publish-restore-report", cache_policy=NO_CACHE)
def publish_restore_report(result: RestoreResult) -> None:
    """The edges asked for, with what happened to each (a dry run under its own key)."""
    verb = "would come back" if result.dry_run else "restored"
    create_table_artifact(
        key="restore-dry-run" if result.dry_run else "restore",
        table=[
            {
                "source": e["source_concept"] or "?",
                "target": e["target_concept"] or "?",
                "type": e["edge_type"],
                "provenance": e["source_type"],
                "confidence": round(e["confidence"], 3),
                "outcome": f"refused: {e['refusal']}" if e["refusal"] else verb,
                "edge": runs.short(e["edge_id"]),
            }
            for e in result.edges
        ],
        description=f"{len(result.restored)} edge(s) {verb}, {len(result.refused)} refused"
        + (" - dry run, nothing changed" if result.dry_run else ""),
    )
