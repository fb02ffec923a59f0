"""`hag load-corpus FILE` and `hag export entries|edges`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from hag.cli._common import echo_json, json_option, note, ready
from hag.support.jsonkeys import to_jsonable


@click.command("load-corpus")
@click.argument("file", type=click.Path(path_type=Path))
@json_option
def load_corpus(file: Path, as_json: bool) -> None:
    """Load topics, concepts, entries and edges from a JSON corpus (all or nothing)."""
    from hag.operations.corpus import load_file
    from hag.vectors.embeddings import announce

    announce()
    report = load_file(file)
    if as_json:
        echo_json(report.as_dict())
    else:
        click.echo(
            f"loaded {file}: {report.topics} topic(s), {report.concepts} concept(s), "
            f"{report.entries} entr(y/ies), {report.edges} edge(s) new"
        )


@click.command()
@click.argument("what", type=click.Choice(["entries", "edges"]))
@click.option("--topic", help="Only this topic (edges: those leaving its entries).")
@click.option("--with-embeddings", is_flag=True, help="Include the embedding column (entries).")
def export(what: str, topic: str | None, with_embeddings: bool) -> None:
    """Print a table as a JSON array of objects keyed by column name."""
    from hag.operations.corpus import iter_export_rows
    from hag.storage import db

    ready()
    with db.connect() as conn:
        count = echo_json_array(
            iter_export_rows(conn, what, topic, with_embeddings=with_embeddings)
        )
    note(f"{count} {what}")


def echo_json_array(rows: Iterable[Any]) -> int:
    """Print rows as one JSON array, laid out as `echo_json` would, one row at a time (the
    array is never held whole); returns how many were printed."""
    count = 0
    for row in rows:
        item = json.dumps(row, default=to_jsonable, indent=2).replace("\n", "\n  ")
        click.echo(("[\n  " if count == 0 else ",\n  ") + item, nl=False)
        count += 1
    click.echo("\n]" if count else "[]")
    return count
