"""`hag reembed`: move the memory to the configured embedder (docs/embedders.md)."""

from __future__ import annotations

import click

from hag.cli._common import echo_json, json_option, note


@click.command()
@click.option(
    "--batch-size",
    type=click.IntRange(min=1, max=10000),
    default=None,
    help="Texts embedded and committed per batch (default: the reembed_batch_size dial).",
)
@json_option
def reembed(batch_size: int | None, as_json: bool) -> None:
    """Re-embed every entry and concept with the configured embedder, then switch to it.

    Resumable: a killed run keeps its finished batches and the next run goes on from there.
    Reads use the old vectors until the switch, which is one transaction.
    """
    from hag.operations.reembed import reembed as run
    from hag.vectors.embeddings import announce

    announce()
    report = run(batch_size=batch_size, progress=note)
    if as_json:
        echo_json(report.as_dict())
    else:
        click.echo(
            f"re-embedded {report.entries} entries and {report.concepts} concepts: the memory "
            f"is now {report.target} (restart processes started before the switch)"
        )
