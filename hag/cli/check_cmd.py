"""`hag check [--json]`: the data-quality suites (expectations/); exit 1 when any fails."""

from __future__ import annotations

import sys

import click

from hag.cli._common import echo_json, json_option, ready


@click.command()
@json_option
def check(as_json: bool) -> None:
    """Run every Great Expectations suite over the memory; exit 1 naming each failure."""
    ready()
    import expectations  # noqa: PLC0415 - Great Expectations costs about 3 s to import

    result = expectations.run_all()
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(result.report())
    if not result.success:
        click.echo(f"hag: {len(result.failures)} expectation(s) failed", err=True)
        sys.exit(1)
