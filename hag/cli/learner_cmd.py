"""`hag learner export LEARNER --out FILE` and `hag learner erase LEARNER [--dry-run]`."""

from __future__ import annotations

from pathlib import Path

import click

from hag.cli._common import echo_json, json_option, note, ready


@click.group()
def learner() -> None:
    """A learner's own data: everything held about them, to a file; or erased (docs/privacy.md)."""


@learner.command()
@click.argument("learner_id", metavar="LEARNER")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path, dir_okay=False),
    help="The JSON Lines file to write (replaced whole; nothing is written on a refusal).",
)
@json_option
def export(learner_id: str, out: Path, as_json: bool) -> None:
    """Write everything held about LEARNER to a JSON Lines file: their sessions (payloads as
    kept), private entries with their history and edges, prerequisite reports, successes and
    quarantined payloads, one row per line, then a manifest of the rows per table. An unknown
    learner is refused."""
    from hag.operations import privacy

    ready()
    result = privacy.export_learner(learner_id, out)
    if as_json:
        echo_json(result.as_dict())
        return
    for table, n in result.counts.items():
        click.echo(f"{table}: {n}")
    note(f"wrote {sum(result.counts.values())} row(s) about {learner_id!r} to {result.path}")


@learner.command()
@click.argument("learner_id", metavar="LEARNER")
@click.option("--dry-run", is_flag=True, help="Print what would be removed; change nothing.")
@click.option(
    "--operator",
    help="Who asks for the erasure, as the erasure record keeps it (default: the OS user).",
)
@json_option
def erase(learner_id: str, dry_run: bool, operator: str | None, as_json: bool) -> None:
    """Erase LEARNER: every session, private entry and its history, quarantined payload and
    report, in one transaction, audited by an erasure record (a salted hash of the id, who,
    when, the counts). What the shared graph learned from them stays, under a random
    pseudonym; no confidence moves. An unknown learner is refused."""
    from hag.operations import privacy

    ready()
    result = privacy.erase_learner(learner_id, dry_run=dry_run, operator=operator)
    if as_json:
        echo_json(result.as_dict())
        return
    for line in result.lines():
        click.echo(line)
    if dry_run:
        note(f"dry run: nothing was changed; run without --dry-run to erase {learner_id!r}")
    else:
        note(f"erased {learner_id!r} (erasure #{result.erasure_id}, by {result.erased_by})")
