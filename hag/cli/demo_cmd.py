"""`hag demo`: the main job end to end on the embedded defaults."""

from __future__ import annotations

import click

from hag.cli._common import echo_json, json_option


@click.command()
@json_option
def demo(as_json: bool) -> None:
    """Start the embedded database, migrate, load the demo corpus and summarise the graphs."""
    from hag.demo import run_demo  # noqa: PLC0415

    summary = run_demo()
    if as_json:
        echo_json(summary)
