"""Fail closed: where a missing DATABASE_URL would hide a mistake, no embedded database starts."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from hag import PROJECT_ROOT, config
from hag.storage import db as hdb

REFUSED = "hag: DATABASE_URL is not set and an embedded database is refused"


def _hag(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HAG_DATABASE_URL")}
    base.pop("HAG_REQUIRE_DATABASE", None)
    base.update({"HAG_DATA_DIR": str(tmp_path / "hag"), **env})
    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        env=base,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_require_database_option_refuses_the_embedded_server(tmp_path):
    """`hag --require-database` with DATABASE_URL unset: one line, exit 1, no server started."""
    done = _hag(["--require-database", "process-sessions"], tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip() == (f"{REFUSED} (--require-database or HAG_REQUIRE_DATABASE=1)")
    assert not (tmp_path / "hag" / "pgdata").exists()


def test_require_database_environment_refuses_every_command(tmp_path):
    """HAG_REQUIRE_DATABASE=1 refuses as the option does (here `hag db url` and `retrieve`)."""
    for args in (["db", "url"], ["retrieve", "--topic", "t", "--learner", "l", "--message", "m"]):
        done = _hag(args, tmp_path, HAG_REQUIRE_DATABASE="1")
        assert done.returncode == 1, (args, done.stderr)
        assert done.stderr.strip().splitlines() == [
            f"{REFUSED} (--require-database or HAG_REQUIRE_DATABASE=1)"
        ], args
    assert not (tmp_path / "hag" / "pgdata").exists()


def test_require_database_with_a_url_runs(database_url, tmp_path):
    """With DATABASE_URL set, `--require-database` changes nothing: the command runs."""
    done = _hag(["--require-database", "db", "url"], tmp_path, DATABASE_URL=database_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == database_url


@pytest.fixture
def no_database_url(db: Any, tmp_path: Path) -> Iterator[Path]:
    """This process without DATABASE_URL (an empty HAG_DATA_DIR), put back afterwards."""
    saved = {k: os.environ.pop(k) for k in ("DATABASE_URL", "HAG_DATABASE_URL") if k in os.environ}
    saved_dir = os.environ.get("HAG_DATA_DIR")
    os.environ["HAG_DATA_DIR"] = str(tmp_path / "hag")
    config.reset_config()
    hdb.close_all()
    try:
        yield tmp_path / "hag"
    finally:
        os.environ.update(saved)
        if saved_dir is None:
            os.environ.pop("HAG_DATA_DIR", None)
        else:
            os.environ["HAG_DATA_DIR"] = saved_dir
        hdb.refuse_embedded(None)
        config.reset_config()
        hdb.close_all()


# Parameters a flow needs to get past its own checks to its first database use.
PARAMETERS = {
    "restore": {"run": "0123abcd"},
    "learner-export": {"learner_id": "ada"},
    "learner-erase": {"learner_id": "ada"},
}


def _deployment_run(flow: Any, name: str, parameters: dict[str, Any]) -> Any:
    """A real flow run of a real deployment of `flow`, run in this process; its final state."""
    from prefect.client.orchestration import get_client
    from prefect.flow_engine import run_flow

    with get_client(sync_client=True) as client:
        flow_id = client.create_flow_from_name(flow.name)
        deployment_id = client.create_deployment(flow_id=flow_id, name=name)
        flow_run = client.create_flow_run_from_deployment(deployment_id, parameters=parameters)
    return run_flow(flow, flow_run=flow_run, parameters=parameters, return_type="state")


def test_every_deployment_flow_run_refuses_an_embedded_database(prefect_harness, no_database_url):
    """A flow run of any deployment in prefect.yaml fails, naming the refusal, when its process
    has no DATABASE_URL; no embedded server is started."""
    deployments = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())["deployments"]
    assert len(deployments) >= 4
    for deployment in deployments:
        path, attr = deployment["entrypoint"].split(":")
        flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), attr)
        parameters = PARAMETERS.get(deployment["name"], {})
        state = _deployment_run(flow, f"refusal-{deployment['name']}", parameters)
        assert state.is_failed(), (deployment["name"], state)
        message = str(state.message)
        assert "DATABASE_URL is not set and an embedded database is refused" in message
        assert f"a flow run of deployment refusal-{deployment['name']}" in message
        hdb.refuse_embedded(None)
    assert not (no_database_url / "pgdata").exists()
