"""`hag ingest FILE...` and `hag process-sessions`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from hag.cli._common import COUNT, dispatch, echo_json, json_option, note, prefect_api_url, ready
from hag.errors import HagError
from hag.storage.pool_sizes import MAX_SESSION_WORKERS, WRITE_CONNECTIONS


@click.command()
@click.argument("files", nargs=-1, type=click.Path(path_type=Path, allow_dash=True))
@click.option(
    "--quarantined", is_flag=True, help="List the refused payloads instead (newest first)."
)
@click.option(
    "--limit",
    type=COUNT,
    default=50,
    show_default=True,
    help="Rows --quarantined lists.",
)
@json_option
def ingest(files: tuple[Path, ...], quarantined: bool, limit: int, as_json: bool) -> None:
    """Queue session payloads from JSON files (an object or an array) or JSON Lines files
    (.jsonl/.ndjson; `-` reads standard input as JSON Lines).

    A payload that breaks the contract (docs/session-contract.schema.json) is refused whole
    and kept in the quarantine with the reason, the field and the turn; the rest are queued
    as pending for `hag process-sessions`. Exits 1 when any payload was quarantined.
    """
    from hag.session.ingest import ingest_payload, list_quarantined, read_payloads
    from hag.storage import db

    if quarantined and files:
        raise click.UsageError("--quarantined lists the quarantine: give it no FILE")
    ready()
    if quarantined:
        with db.connect() as conn:
            rows = list_quarantined(conn, limit)
        if as_json:
            echo_json(rows)
            return
        for r in rows:
            where = ", ".join(
                x
                for x in (
                    r["field"] and f"field {r['field']}",
                    r["turn_index"] is not None and f"turn {r['turn_index']}",
                )
                if x
            )
            click.echo(
                f"#{r['quarantine_id']} {r['received_at']:%Y-%m-%d %H:%M:%S} {r['source']} "
                f"session={r['session_id'] or '-'} ({r['raw_bytes']} bytes, "
                f"sha256 {r['raw_sha256'][:12]})"
                + (f" [{where}]" if where else "")
                + f"\n    {r['reason']}"
            )
        note(f"{len(rows)} quarantined payload(s) shown")
        return
    if not files:
        raise click.UsageError("give at least one FILE (or --quarantined)")
    for path in files:  # every file named is there, and readable, before any is queued
        if str(path) == "-":
            continue
        if not path.is_file():
            raise click.BadParameter(f"{path} is not a file", param_hint="FILES")
        try:
            with path.open("rb"):
                pass
        except OSError as exc:
            raise click.BadParameter(
                f"{path} cannot be read: {exc.strerror or exc}", param_hint="FILES"
            ) from None
    # Files stream one payload at a time; only the counts (and, for --json, the results)
    # are kept, so memory does not grow with the input.
    results: list[Any] = []
    counts = dict.fromkeys(("accepted", "duplicate", "quarantined"), 0)
    with db.connect() as conn:
        for path in files:
            if str(path) == "-":
                items = read_payloads(Path("stdin"), sys.stdin.buffer)
            else:
                items = read_payloads(path)
            for source, raw in items:
                result = ingest_payload(conn, raw, source=source)
                conn.commit()  # each payload stands alone: a later refusal never undoes it
                counts[result.status] += 1
                if as_json:
                    results.append(result)
                elif result.quarantined:
                    click.echo(f"quarantined {result.source}: {result.reason}")
                elif result.state not in (None, "pending"):
                    click.echo(
                        f"already received {result.source}: session {result.session_id!r} "
                        f"is {result.state}"
                    )
    if as_json:
        echo_json({"counts": counts, "results": [r.as_dict() for r in results]})
    else:
        click.echo(
            f"{counts['accepted']} accepted, {counts['duplicate']} already received, "
            f"{counts['quarantined']} quarantined"
        )
    if counts["quarantined"]:
        click.echo(
            f"hag: {counts['quarantined']} payload(s) quarantined (hag ingest --quarantined)",
            err=True,
        )
        sys.exit(1)


@click.command("process-sessions")
@click.option("--batch-size", type=COUNT, help="Sessions per batch (dial session_batch_size).")
@click.option("--limit", type=COUNT, help="Stop after this many sessions.")
@click.option(
    "--workers",
    type=click.IntRange(1, MAX_SESSION_WORKERS),
    default=1,
    show_default=True,
    help=f"Concurrent workers, each session still one transaction (at most "
    f"{MAX_SESSION_WORKERS} of the pool's {WRITE_CONNECTIONS} connections, so settings reads "
    "never starve).",
)
@click.option(
    "--no-prefect",
    is_flag=True,
    help="Apply the sessions directly even when PREFECT_API_URL is set (no flow run).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Run the data-quality suites afterwards when run directly (a flow run always does).",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="First put back to pending the sessions that failed for a reason outside their "
    "payload (a database error), then apply them with the rest.",
)
@json_option
def process_sessions(
    batch_size: int | None,
    limit: int | None,
    workers: int,
    no_prefect: bool,
    check: bool,
    retry_failed: bool,
    as_json: bool,
) -> None:
    """Apply pending sessions to the memory.

    Each session, in its own transaction: observations -> entries, discovery, prerequisite
    proposals, reinforcement, outcome grading. With PREFECT_API_URL set, this is a run of the
    session-end flow on that server (recorded there, with its summary artifact and the
    data-quality suites); without it, the same job runs directly, with no Prefect at all
    (and the suites only with --check). A session whose payload cannot be applied is
    rejected and quarantined; one that fails for another reason (a database error) is kept
    as failed, and the run exits 1 naming how many: fix the cause, then run again with
    --retry-failed. Exits 1 when an expectation fails.
    """
    from hag.support import extras
    from hag.vectors.embeddings import announce

    if check and (no_prefect or prefect_api_url() is None):  # refused before any work
        extras.require("jobs", "hag process-sessions --check")
    ready()
    announce()

    def direct() -> dict[str, Any]:
        from hag.session.process import process_pending

        return process_pending(
            batch_size=batch_size,
            limit=limit,
            workers=workers,
            on_batch=lambda b: note(
                f"batch: {b.sessions} applied, {b.rejects} rejected, {b.failures} failed"
            ),
            retry_failed=retry_failed,
        ).as_dict()

    def through_flow() -> dict[str, Any]:
        from hag.support.orchestration import run_summary

        return run_summary(
            "session-end",
            batch_size=batch_size,
            limit=limit,
            workers=workers,
            retry_failed=retry_failed,
        )

    result = dispatch("session-end", direct, through_flow, force_direct=no_prefect)
    if as_json:
        echo_json(result)
    else:
        _print_summary(result)
    if check and (no_prefect or prefect_api_url() is None):  # a flow run has run them itself
        from hag import quality  # Great Expectations loads only when a suite runs

        suites = quality.run_all()
        note(suites.report())
        if not suites.success:
            raise HagError(f"{len(suites.failures)} expectation(s) failed")
    if result.get("failures"):  # a flow run raises this itself (its run ends Failed)
        from hag.session.outcome import SessionsFailed

        raise SessionsFailed(result["failures"])


def _print_summary(result: dict[str, Any]) -> None:
    if result.get("idle"):  # the flow's idle answer: nothing pending, nothing recorded
        click.echo("no pending sessions: nothing recorded")
        return
    rate = result["sessions"] / result["seconds"] * 60 if result["seconds"] else 0.0
    click.echo(
        f"run {result['run_id']}: {result['sessions']} session(s) applied, "
        f"{result['rejects']} rejected, {result['failures']} failed, "
        f"in {result['seconds']:.2f} s ({rate:,.0f}/min); left "
        f"{result['left_pending']} pending, {result['left_failed']} failed"
    )
    for key in (
        "entries_created",
        "entries_merged",
        "edges_created",
        "edges_reinforced",
        "edges_graded_up",
        "edges_graded_down",
        "entries_graded",
        "struggles_unresolved",
        "struggles_contradicted",
        "struggles_off_turn",
        "reports_withdrawn",
    ):
        click.echo(f"  {key.replace('_', ' '):<22} {result[key]}")
    for r in result["rejected"]:
        click.echo(f"  rejected {r['session_id']}: {r['reason']}")
    for r in result["failed"]:
        click.echo(f"  failed {r['session_id']}: {r['reason']} [{r['class']}]")
