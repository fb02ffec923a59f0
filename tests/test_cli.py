"""The `hag` command line: help everywhere, one-line failures, JSON where machines read."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner
from psycopg.conninfo import make_conninfo

from hag import PROJECT_ROOT
from hag.cli import cli
from tests.fix_cli import run_hag

# The product's commands and the ones the lab adds by entry point (hag demo, hag simulate).
ALL_COMMANDS = cli.list_commands(click.Context(cli))


@pytest.mark.parametrize("name", ALL_COMMANDS)
def test_every_command_has_help(name):
    """`hag NAME --help` (and each sub-command's) exits 0 and shows its usage."""
    cmd = cli.get_command(click.Context(cli), name)
    assert cmd is not None, name
    paths = [[name]]
    if isinstance(cmd, click.Group):
        paths.extend([name, sub] for sub in sorted(cmd.commands))
    for path in paths:
        result = CliRunner().invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Usage: " in result.output


def test_every_command_is_in_the_readme():
    """The README documents every top-level command."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert [name for name in ALL_COMMANDS if f"hag {name}" not in readme] == []


def test_a_refused_setting_exits_non_zero_with_one_line(db, database_url):
    """A bad value: exit 1, exactly one line on stderr naming the dial and the bound."""
    result = run_hag(database_url, "settings", "set", "floor_proven", "1.7")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "hag: floor_proven must be between 0 and 1, not '1.7'"
    ]


def test_settings_set_then_get_round_trips(db, database_url):
    """`settings set` stores a validated value that `settings get --json` reads back."""
    assert run_hag(database_url, "settings", "set", "floor_pattern", "0.45").returncode == 0
    result = run_hag(database_url, "settings", "get", "floor_pattern", "--json")
    assert json.loads(result.stdout) == {"key": "floor_pattern", "value": 0.45}


def test_load_corpus_and_export_use_column_names(db, database_url, tmp_path):
    """Exported edges are a JSON array of objects keyed by hag_edges' column names."""
    loaded = run_hag(
        database_url, "load-corpus", str(PROJECT_ROOT / "hag/data/demo_corpus.json"), "--json"
    )
    assert loaded.returncode == 0, loaded.stderr
    assert "embedder: offline-hash-1536" in loaded.stderr
    result = run_hag(database_url, "export", "edges")
    rows = json.loads(result.stdout)
    columns = {
        r["column_name"]
        for r in db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'hag_edges'"
        ).fetchall()
    }
    assert len(rows) == json.loads(loaded.stdout)["edges"]
    assert set(rows[0]) == columns


def test_a_missing_corpus_file_is_one_line(db, database_url):
    """Bad input names the file and exits 1."""
    result = run_hag(database_url, "load-corpus", "/nonexistent/corpus.json")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "hag: /nonexistent/corpus.json: no such file"


def test_a_directory_as_corpus_is_one_line(db, database_url, tmp_path):
    """`hag load-corpus DIR` exits 1 with one line naming the path, not a traceback."""
    result = run_hag(database_url, "load-corpus", str(tmp_path))
    assert result.returncode == 1
    assert (
        result.stderr.strip().splitlines()[-1] == f"hag: {tmp_path}: cannot read (Is a directory)"
    )
    assert "Traceback" not in result.stderr


def test_a_database_refusal_is_one_line(db, database_url):
    """A read-only database (a replica) refusing `settings set`: exit 1, one line, no traceback."""
    read_only = make_conninfo(database_url, options="-c default_transaction_read_only=on")
    result = run_hag(read_only, "settings", "set", "floor_pattern", "0.45")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "hag: database error: cannot execute UPDATE in a read-only transaction"
    ]
