"""Helpers of the command-line tests: every command an operator can run, and `hag` run as a
subprocess against a database (tests/test_cli*.py, test_output_folders, test_settings_writes)."""

from __future__ import annotations

import os
import subprocess
import sys

import click

from hag import PROJECT_ROOT
from hag.cli import cli


def leaf_commands() -> list[str]:
    """Every command an operator can run (the lab's included), sub-commands of groups too."""
    leaves = []
    for name in cli.list_commands(click.Context(cli)):
        cmd = cli.get_command(click.Context(cli), name)
        if isinstance(cmd, click.Group):
            leaves.extend(f"{name} {sub}" for sub in sorted(cmd.commands))
        else:
            leaves.append(name)
    return leaves


def run_hag(database_url, *args, **env):
    full_env = {**os.environ, "DATABASE_URL": database_url, **env}
    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=PROJECT_ROOT,
        timeout=120,
    )
