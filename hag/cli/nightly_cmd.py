"""`hag nightly [--dry-run] [--as-of TS]` and `hag audit culled|restore`."""

from __future__ import annotations

import csv
import sys
from datetime import datetime
from typing import Any

import click

from hag.cli._common import (
    COUNT,
    TIMESTAMP,
    dispatch,
    echo_json,
    json_option,
    note,
    prefect_api_url,
    ready,
)


@click.command()
@click.option("--dry-run", is_flag=True, help="Report what would change; change nothing.")
@click.option(
    "--as-of", type=TIMESTAMP, help="'Now' for the age rules (default: now); naive = UTC."
)
@click.option(
    "--no-check",
    is_flag=True,
    help="Skip the data-quality suites after the sweep (a dry run does).",
)
@json_option
def nightly(dry_run: bool, as_of: datetime | None, no_check: bool, as_json: bool) -> None:
    """Promote, archive and cull (audited), in one transaction, as of a moment; then check.

    The same steps the Prefect deployment `nightly/nightly` runs on its schedule: the
    sweep, then the search copy's upkeep (the per-topic search indexes of topics past
    `topic_exact_scan_max_rows`, clustering, its change rows folded). It never pauses for
    an operator: a big night culls what the rule allows, as the report says. After a real
    run the data-quality suites run (as `hag check`); exit 1 when an expectation fails. A
    dry run changes nothing, so it leaves them to `hag check`.
    With PREFECT_API_URL set, this is a run of the nightly flow on that server (recorded
    there with its report; the flow runs the suites); without it, no Prefect at all.
    """
    from hag.cli.check_cmd import preload_suites, run_suites
    from hag.support import extras

    check = not (no_check or dry_run) and prefect_api_url() is None  # a flow run checks itself
    if check:
        # Refused before the sweep: a run whose check cannot follow would report half a job.
        extras.require("jobs", "hag nightly", "; --no-check sweeps without the suites")
        preload_suites()  # Great Expectations loads while the sweep runs in PostgreSQL
    ready()

    def direct() -> dict[str, Any]:
        from hag.nightly import sweeps

        try:
            return sweeps.nightly(as_of, dry_run).as_dict()  # the flow's steps, in its order
        except sweeps.FailedAfterDone as done:  # the run is done: its summary, then the error
            summary = sweeps.NightlyResult(done.summary, None).as_dict()
            echo_json(summary) if as_json else _print_summary(summary)
            raise

    def through_flow() -> dict[str, Any]:
        from hag.support.orchestration import run_summary

        # The command line never pauses (a big night culls as without Prefect), and its
        # --no-check holds for the flow run too.
        return run_summary(
            "nightly", as_of=as_of, dry_run=dry_run, ask_operator=False, check=not no_check
        )

    result = dispatch("nightly", direct, through_flow, force_direct=False)
    if as_json:
        echo_json(result)
    else:
        _print_summary(result)
    if dry_run and not no_check:
        note("data-quality suites: skipped, a dry run changes nothing (`hag check` runs them)")
    if check:
        suites = run_suites()  # a line per suite on stderr as it finishes
        for failure in suites.failures:
            note(f"  - {failure.line()}")
        if not suites.success:
            click.echo(f"hag: {len(suites.failures)} expectation(s) failed", err=True)
            sys.exit(1)


def _print_summary(summary: dict[str, Any]) -> None:
    from hag.storage import runs

    dry_run = summary["dry_run"]
    # A dry run records nothing, so it has no id to show (there would be nothing to look up).
    what = "dry run (nothing changed)" if dry_run else f"run {summary['run_id']}"
    click.echo(f"nightly {what} as of {summary['as_of']} in {summary['seconds']:.2f} s")
    click.echo(f"  candidate -> pattern  {summary['promoted_to_pattern']}")
    click.echo(f"  pattern -> proven     {summary['promoted_to_proven']}")
    click.echo(f"  archived              {summary['archived']}")
    if any(summary.get("retention", {}).values()):  # the retention dials (docs/privacy.md)
        r = summary["retention"]
        click.echo(
            f"  messages stripped     {r['sessions_stripped']} session(s), "
            f"{r['quarantine_stripped']} quarantined payload(s)"
        )
    by_type = ", ".join(f"{k} {v}" for k, v in summary["culled_by_source_type"].items())
    culled = summary["culled"]
    click.echo(f"  edges culled          {culled}" + (f" ({by_type})" if by_type else ""))
    for e in summary["culled_edges"]:
        click.echo(
            f"    {e['source_concept']} -{e['edge_type']}-> {e['target_concept']}  "
            f"{e['source_type']} {e['confidence']:.3f}, {e['age_days']} days  {e['edge_id']}"
        )
    if culled > len(summary["culled_edges"]):
        rest = f"`hag audit culled --run {runs.short(summary['run_id'])}` lists them all"
        note(
            f"(showing {len(summary['culled_edges'])} of {culled}; "
            + ("a real run's audit lists them all)" if dry_run else f"{rest})")
        )
    guard = summary.get("guard")
    if guard:
        click.echo(f"  big-night guard       {guard['reason']}; {guard['decision']}")
    elif dry_run:
        click.echo("  big-night guard       under its limits: a scheduled run would not pause")
    if summary.get("topic_indexes") is not None:
        click.echo(f"  topic search indexes  {', '.join(summary['topic_indexes']) or 'none'}")


@click.group()
def audit() -> None:
    """Review culled edges and put them back."""


@audit.command()
@click.option("--since", type=TIMESTAMP, help="Only edges culled at or after this moment.")
@click.option(
    "--run",
    "run_id",
    help="Only edges culled by this run: its id, a unique prefix, or the ending listings print.",
)
@click.option("--limit", type=COUNT, help="At most this many rows.")
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV (every column) instead of a table.")
def culled(
    since: datetime | None, run_id: Any, limit: int | None, as_json: bool, as_csv: bool
) -> None:
    """Culled edges, newest first: when, which run, source -> target, type, provenance, confidence."""
    from hag.nightly import audit as hag_audit

    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    ready()
    rows = hag_audit.culled(since=since, run_id=run_id, limit=limit)
    if as_json:
        echo_json(rows)
    elif as_csv:
        writer = csv.DictWriter(
            sys.stdout, fieldnames=list(rows[0]) if rows else hag_audit.culled_columns()
        )
        writer.writeheader()
        writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    else:
        _table(rows)


def _table(rows: list[dict[str, Any]]) -> None:
    from hag.storage import runs

    if not rows:
        click.echo("no culled edges")
        return
    header = (
        "deleted",
        "run",
        "edge",
        "source -> target",
        "type",
        "provenance",
        "conf",
        "restored",
    )
    body = [
        (
            r["deleted_at"].strftime("%Y-%m-%d %H:%M"),
            runs.short(r["run_id"]),  # accepted back by --run (hag/storage/runs.py)
            str(r["edge_id"]),
            f"{r['source_concept'] or '?'} -> {r['target_concept'] or '?'}",
            r["edge_type"],
            r["source_type"],
            f"{r['confidence']:.3f}",
            r["restored_at"].strftime("%Y-%m-%d") if r["restored_at"] else "",
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body, strict=True)]
    for line in (header, *body):
        click.echo("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())


@audit.command()
@click.argument("edge_ids", nargs=-1)
@click.option(
    "--run",
    "run_id",
    help="Restore every edge this run culled: its id, a unique prefix, or its printed ending.",
)
@click.option("--dry-run", is_flag=True, help="Say what would come back; change nothing.")
@json_option
def restore(edge_ids: tuple[str, ...], run_id: str | None, dry_run: bool, as_json: bool) -> None:
    """Put culled edges back exactly as they were (EDGE_ID..., or --run RUN_ID).

    Edge and run ids may be given whole, as a unique prefix, or by the 8-digit ending the
    listings and artifacts print. An edge whose endpoint entry no longer exists, or which
    has since been recreated, is refused with the reason; the others are restored. Exits 1
    when anything was refused. A restored edge is never culled again by the rule.
    """
    from hag.nightly import audit as hag_audit

    if bool(edge_ids) == (run_id is not None):
        raise click.UsageError("give exactly one of EDGE_ID... or --run RUN_ID")
    ready()
    result = hag_audit.restore(
        edge_id=list(edge_ids) if edge_ids else None, run_id=run_id, dry_run=dry_run
    )
    if as_json:
        echo_json(result.as_dict())
    else:
        verb = "would restore" if dry_run else "restored"
        for e in result.restored:
            click.echo(f"{verb} {e}")
        for r in result.refused:
            click.echo(f"refused  {r.edge_id}: {r.reason}")
    if result.refused:
        click.echo(
            f"hag: {len(result.refused)} edge(s) refused, {len(result.restored)} restored", err=True
        )
        sys.exit(1)
