"""`hag demo`: the main job end to end on the embedded defaults."""

from __future__ import annotations

from typing import Any

import click

from hag.cli._common import echo_json, json_option, note


@click.command()
@click.option(
    "--keep-running",
    is_flag=True,
    help="Leave the demo's database running afterwards and print how to query it.",
)
@click.option(
    "--sessions",
    type=click.IntRange(min=1),
    default=None,
    help="Fewer simulated sessions than the demo's: a quick smoke run (not the README's figures).",
)
@click.option(
    "--days",
    type=click.IntRange(min=1),
    default=None,
    help="Fewer simulated days than the demo's (with --sessions, a quick smoke run).",
)
@json_option
def demo(keep_running: bool, sessions: int | None, days: int | None, as_json: bool) -> None:
    """The memory's whole life on the demo corpus, on a fresh private embedded database.

    Demo corpus, simulated sessions through ingest and session-end processing, nightly
    sweeps as the simulated days pass, enrichment of orphans, the expectation suites, and
    the report on whether the memory learned (reports/demo/).
    """
    # The extras it needs (its own embedded database, the report's plots) are checked before
    # this module is loaded: pyproject's `hag.commands` entry point names them.
    from hag_lab.demo import run_demo

    # Only what was asked for: the demo's own defaults stay in one place (hag_lab.demo).
    smaller: dict[str, Any] = {"sessions": sessions, "days": days}
    smaller = {k: v for k, v in smaller.items() if v is not None}
    summary = run_demo(keep_running=keep_running, quiet=as_json, note=note, **smaller)
    if as_json:
        echo_json(summary)
