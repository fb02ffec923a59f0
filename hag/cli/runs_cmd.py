"""`hag runs`: the run ledger (`hag_runs`), newest first."""

from __future__ import annotations

from typing import Any

import click

from hag.cli._common import COUNT, echo_json, json_option, ready


def counts(summary: dict[str, Any] | None) -> str:
    """A run's recorded numbers in one short cell (`culled 3, archived 1`), zeros left out; a
    failed run's error first, then the counts of what it had committed."""
    if not summary:
        return ""
    shown = ", ".join(
        f"{key.replace('_', ' ')} {value}"
        for key, value in summary.items()
        if isinstance(value, int | float) and not isinstance(value, bool) and value
    )
    if "error" in summary:
        return f"error: {str(summary['error'])[:60]}" + (f"; {shown}" if shown else "")
    return shown


def _kind(value: str | None) -> str | None:
    """A run kind as stored (a deployment's spelling, session-end, read the same); a kind no
    run is written with is refused, not answered with "no runs"."""
    from hag.storage.runs import KINDS

    if value is None:
        return None
    kind = value.replace("-", "_")
    if kind not in KINDS:
        raise click.BadParameter(f"{value!r} is not a kind of run: one of {', '.join(KINDS)}")
    return kind


@click.command()
@click.option(
    "--kind",
    callback=lambda _ctx, _param, value: _kind(value),
    help="Only runs of this kind (nightly, session_end, enrichment, restore; a deployment's "
    "spelling, session-end, is read the same).",
)
@click.option(
    "--limit",
    type=COUNT,
    help="The newest this many runs (default: the runs_default_limit dial).",
)
@json_option
def runs(kind: str | None, limit: int | None, as_json: bool) -> None:
    """The batch jobs' runs, newest first: kind, status, id, started and ended, counts.

    The id column is the ending of each run's id (the part that tells time-ordered ids
    apart); every command that takes a run id accepts it back, or any unique prefix. A run
    that Prefect ran has its flow run's id.
    """
    from hag import settings
    from hag.storage import db
    from hag.storage import runs as ledger

    ready()
    with db.connect() as conn:
        rows = ledger.listing(limit or settings.load(conn).runs_default_limit, kind=kind, conn=conn)
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no runs" + (f" of kind {kind!r}" if kind else ""))
        return
    header = ("kind", "status", "id", "started", "ended", "counts")
    body = [
        (
            r["kind"],
            r["status"] + (" (dry run)" if r["dry_run"] else ""),
            ledger.short(r["run_id"]),
            f"{r['started_at']:%Y-%m-%d %H:%M:%S}",
            f"{r['finished_at']:%H:%M:%S}" if r["finished_at"] else "",
            counts(r["summary"]),
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, strict=True)]
    for line in (header, *body):
        click.echo("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())
