"""`hag demo`: the main job end to end on the embedded defaults."""

from __future__ import annotations

import click

from hag.cli._common import echo_json, json_option


@click.command()
@click.option(
    "--keep-running",
    is_flag=True,
    help="Leave the demo's database running afterwards and print how to query it.",
)
@json_option
def demo(keep_running: bool, as_json: bool) -> None:
    """The memory's whole life on the demo corpus, on a fresh private embedded database.

    Demo corpus, simulated sessions through ingest and session-end processing, nightly
    sweeps as the simulated days pass, enrichment of orphans, the expectation suites, and
    the report on whether the memory learned (reports/demo/).
    """
    from hag.demo import run_demo

    summary = run_demo(keep_running=keep_running, quiet=as_json)
    if as_json:
        echo_json(summary)
