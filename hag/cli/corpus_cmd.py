"""`hag load-corpus FILE` and `hag export entries|edges`."""

from __future__ import annotations

from pathlib import Path

import click

from hag.cli._common import echo_json, json_option, note, ready


@click.command("load-corpus")
@click.argument("file", type=click.Path(path_type=Path))
@json_option
def load_corpus(file: Path, as_json: bool) -> None:
    """Load topics, concepts, entries and edges from a JSON corpus (all or nothing)."""
    from hag.corpus import load_file  # noqa: PLC0415
    from hag.embeddings import announce  # noqa: PLC0415

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
    from hag import db  # noqa: PLC0415
    from hag.corpus import export_rows  # noqa: PLC0415

    ready()
    with db.connect() as conn:
        rows = export_rows(conn, what, topic, with_embeddings=with_embeddings)
    note(f"{len(rows)} {what}")
    echo_json(rows)
