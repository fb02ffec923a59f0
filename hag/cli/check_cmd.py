"""`hag check [--json]`: the data-quality suites (hag.quality); exit 1 when any fails."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from hag.cli._common import echo_json, json_option, note, ready

if TYPE_CHECKING:
    from hag.quality import CheckResult


@click.command()
@json_option
def check(as_json: bool) -> None:
    """Run every Great Expectations suite over the memory; exit 1 naming each failure.

    A line per suite goes to stderr as it finishes; the report (or JSON) goes to stdout.
    """
    from hag.support import extras

    extras.require("jobs", "hag check")
    preload_suites()  # Great Expectations loads while the database is made ready
    ready()
    result = run_suites()
    if as_json:
        echo_json(result.as_dict())
    else:
        click.echo(result.report())
    if not result.success:
        click.echo(f"hag: {len(result.failures)} expectation(s) failed", err=True)
        sys.exit(1)


def preload_suites() -> None:
    """Start loading Great Expectations on a thread (the command waits on the database)."""
    from hag import quality  # light: Great Expectations itself loads on the thread

    quality.preload()


def run_suites() -> CheckResult:
    """Every suite over the configured database, a progress line each on stderr."""
    from hag import quality

    note("data-quality suites: running")
    return quality.run_all(progress=note)
