"""`hag db …` runs the embedded server from the wheel in a data folder of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hag import PROJECT_ROOT


def _hag(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
        timeout=180,
    )


def test_start_status_migrate_stop_on_a_private_data_folder(tmp_path):
    """With no DATABASE_URL, start → status → migrate → stop works on the embedded server."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HAG_DATABASE_URL")}
    env["HAG_DATA_DIR"] = str(tmp_path / "hagdata")
    try:
        started = _hag(env, "db", "start")
        assert started.returncode == 0, started.stderr
        assert (
            started.stdout.strip()
            == f"postgresql://postgres:@/postgres?host={tmp_path / 'hagdata' / 'pgdata'}"
        )
        status = json.loads(_hag(env, "db", "status", "--json").stdout)
        assert (status["embedded"], status["running"], status["migrations_applied"]) == (
            True,
            True,
            0,
        )
        assert _hag(env, "migrate").returncode == 0
        status = json.loads(_hag(env, "db", "status", "--json").stdout)
        assert status["migrations_applied"] == status["migrations_on_disk"] > 0
        assert status["embedding_dim"] == 1536
        assert status["embedder"] == "offline/hash-v1 (1536 dims)"  # recorded by migrate
    finally:
        stopped = _hag(env, "db", "stop")
    assert stopped.stdout.strip() == "stopped"
    assert json.loads(_hag(env, "db", "status", "--json").stdout)["running"] is False


def test_database_url_points_everything_elsewhere(database_url):
    """With DATABASE_URL set, `hag db url` prints it and `hag db start` starts nothing."""
    env = {**os.environ, "DATABASE_URL": database_url}
    assert _hag(env, "db", "url").stdout.strip() == database_url
    started = _hag(env, "db", "start")
    assert "DATABASE_URL is set: nothing to start" in started.stderr
