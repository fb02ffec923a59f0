"""The deployment recipe end to end: a real Prefect server, prefect.yaml deployed, a run by a worker.

Drives the same steps `hag serve` takes (hag.cli.serve_cmd) on a free port and a temporary
PREFECT_HOME, reads the deployments and schedules back through the Prefect client, and runs
one parameterised nightly deployment run to completion with a process worker against the
test database. Nothing is skipped: a step that cannot run fails the test with its reason.
"""

from __future__ import annotations

import asyncio
import importlib
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from hag import PROJECT_ROOT
from hag.cli import serve_cmd
from tests import factories as f
from tests.fix_prefect import free_port

AS_OF = f.NOW


def _deployments() -> list[dict]:
    return yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())["deployments"]


def test_every_flow_is_in_prefect_yaml_and_every_entrypoint_loads():
    """Each flow module has a deployment, and each deployment's entrypoint names a real flow."""
    entrypoints = {d["entrypoint"] for d in _deployments()}
    modules = {p.stem for p in (PROJECT_ROOT / "flows").glob("*.py") if p.stem != "__init__"}
    assert {
        e.split(":")[0].removeprefix("flows/").removesuffix(".py") for e in entrypoints
    } == modules
    for entrypoint in sorted(entrypoints):
        path, attr = entrypoint.split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        assert hasattr(getattr(module, attr), "deploy"), f"{entrypoint} is not a Prefect flow"


@pytest.mark.fast
def test_the_as_of_pattern_refuses_at_run_creation_what_the_run_could_not_parse():
    """The server checks `as_of` against the pattern alone (no format checker), so the pattern
    must refuse exactly what pydantic refuses when the run starts: every day of 14 months of
    31-plus days in common, leap and century years, and times with their zones."""
    import re
    from datetime import datetime

    from pydantic import TypeAdapter

    from tasks.runtime import ISO_MOMENT

    parse = TypeAdapter(datetime | None)

    def parses(value: str) -> bool:
        try:
            parse.validate_python(value)
        except ValueError:
            return False
        return True

    days = [
        f"{y}-{m:02d}-{d:02d}"
        for y in ("2026", "2027", "2028", "1900", "2000", "2100", "2400")
        for m in range(14)
        for d in range(33)
    ]
    times = ["T00:00", "T23:59", "T24:00", "T12:60", "T12:30:59", "T12:30:60", "t02:30",
             "T12:30:00.1234567891", " 02:30", "T02:30Z", "T02:30+01", "T02:30+0100",
             "T02:30+01:00", "T02:30-23:59", "T02:30+24:00", "T02:30+01:60", "T2:30", "x"]  # fmt: skip
    values = days + [f"2028-02-29{t}" for t in times] + ["yesterday-ish", ""]
    wrong = [v for v in values if bool(re.match(ISO_MOMENT, v)) != parses(v)]
    assert not wrong, wrong
    assert sum(parses(v) for v in days) == 4 * 365 + 3 * 366  # 1900 and 2100 are not leap


def test_every_task_declares_the_one_cache_policy():
    """Every Prefect task under tasks/ declares cache_policy=NO_CACHE (tasks/__init__ says
    why): no task relies on, or mixes in, another policy or Prefect's default."""
    from prefect import Task
    from prefect.cache_policies import NO_CACHE

    found = {}
    for path in sorted((PROJECT_ROOT / "tasks").glob("*.py")):
        module = importlib.import_module(f"tasks.{path.stem}")
        found |= {t.name: t.cache_policy for t in vars(module).values() if isinstance(t, Task)}
    assert len(found) >= 10
    assert {name: policy for name, policy in found.items() if policy is not NO_CACHE} == {}


async def _read_back(api_url: str):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        async with get_client() as client:
            found = await client.read_deployments()
            return {d.name: d for d in found}


async def _run_and_wait(api_url: str, deployment_id, parameters: dict, timeout: float):
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        async with get_client() as client:
            run = await client.create_flow_run_from_deployment(deployment_id, parameters=parameters)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                run = await client.read_flow_run(run.id)
                if run.state is not None and run.state.is_final():
                    return run
                await asyncio.sleep(1)
            return run


def _bare_clone(tmp_path) -> Path:
    """A bare clone of this checkout's committed code: the repository a remote worker pulls."""
    bare = tmp_path / "hag-memory.git"
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(PROJECT_ROOT), str(bare)], check=True, timeout=120
    )
    return bare


def _use(api_url: str, *, repository: Path, database_url: str) -> None:
    """The pull step's Variables, and the database URL in the Secret block."""
    from prefect.blocks.system import Secret
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.variables import Variable

    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        Variable.set("hag_repository", str(repository), overwrite=True)
        Variable.set("hag_branch", "", overwrite=True)
        Secret(value=database_url).save("hag-database-url", overwrite=True)


def test_recipe_registers_schedules_and_runs_a_parameterised_deployment(db, database_url, tmp_path):
    """Server up, `prefect deploy --all`, schedules read back; a nightly run with as_of
    completes on a worker with no checkout and no DATABASE_URL: the pull step clones a bare
    repository, the flow finds its database in the Secret block; a bad as_of is refused."""
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    f.edge(
        db,
        a,
        b,
        "related",
        confidence=0.1,
        source_type="learned",
        created_at=AS_OF - timedelta(days=100),
    )
    db.commit()

    port = free_port()
    env = serve_cmd.prefect_env(tmp_path / "prefect-home", port)
    for name in ("DATABASE_URL", "HAG_DATABASE_URL"):
        env.pop(name, None)  # the worker's environment names no database: the Secret does
    env.update(
        {
            "PREFECT_UI_ENABLED": "false",
            "PREFECT_WORKER_QUERY_SECONDS": "2",
            "PREFECT_WORKER_PREFETCH_SECONDS": "5",
        }
    )
    api_url = env["PREFECT_API_URL"]
    started = []
    logs = tmp_path / "logs"
    logs.mkdir()
    try:
        with open(logs / "server.log", "wb") as server_log:
            started.append(serve_cmd.start_server(env, port, server_log, timeout=150))
        serve_cmd.create_work_pool(env)
        _use(api_url, repository=_bare_clone(tmp_path), database_url=database_url)
        serve_cmd.deploy_all(env)

        deployments = asyncio.run(_read_back(api_url))
        assert set(deployments) == {
            "session-end",
            "nightly",
            "enrichment",
            "restore",
            "learner-export",
            "learner-erase",
        }
        assert all(d.work_pool_name == serve_cmd.WORK_POOL for d in deployments.values())

        nightly = deployments["nightly"]
        [scheduled] = nightly.schedules
        cron = scheduled.schedule
        assert (cron.cron, cron.timezone) == ("30 2 * * *", "Europe/Berlin")
        # The zone where the operator sees the schedule: its slug and the description.
        assert scheduled.slug == "nightly-0230-europe-berlin"
        assert "02:30 Europe/Berlin" in nightly.description
        # none: a paused run loses a limit's lease and is ended (hag/nightly/sweeps.py)
        assert nightly.global_concurrency_limit is None
        [every] = [s.schedule for s in deployments["session-end"].schedules]
        assert every.interval == timedelta(minutes=5)
        enrichment = deployments["enrichment"]
        assert enrichment.schedules == []
        assert {"topic", "limit", "dry_run", "model", "as_of"} <= set(
            enrichment.parameter_openapi_schema["properties"]
        )
        limit = enrichment.parameter_openapi_schema["properties"]["limit"]
        assert limit["description"] and limit["anyOf"][0]["minimum"] == 1
        assert deployments["restore"].parameters["dry_run"] is True

        assert nightly.pull_steps[0]["prefect.deployments.steps.git_clone"]["repository"] == (
            "{{ prefect.variables.hag_repository }}"  # read when a run starts
        )
        with pytest.raises(Exception, match="409"):
            asyncio.run(_run_and_wait(api_url, nightly.id, {"as_of": "yesterday-ish"}, 0))

        elsewhere = tmp_path / "worker-cwd"  # no checkout here, and not on the path
        elsewhere.mkdir()
        with open(logs / "worker.log", "wb") as worker_log:
            started.append(serve_cmd.start_worker(env, log=worker_log, cwd=elsewhere))
        run = asyncio.run(
            _run_and_wait(
                api_url, nightly.id, {"as_of": AS_OF.isoformat(), "dry_run": False}, timeout=300
            )
        )
        if not (run.state and run.state.is_completed()):
            pytest.fail(
                f"the nightly deployment run ended {run.state!r}; worker log:\n"
                + (logs / "worker.log").read_text()[-3000:]
            )
    finally:
        for proc in reversed(started):
            serve_cmd.stop(proc)

    recorded = db.execute(
        "SELECT as_of, status, summary FROM hag_runs WHERE kind = 'nightly'"
    ).fetchall()
    assert [(r["as_of"], r["status"], r["summary"]["culled"]) for r in recorded] == [
        (AS_OF, "done", 1)
    ]


def test_hag_serve_starts_everything_and_stops_on_ctrl_c(db, database_url, tmp_path):
    """`hag serve` brings the server up with every deployment registered, and Ctrl-C stops it."""
    import os
    import signal
    import subprocess
    import sys

    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "PREFECT_UI_ENABLED": "false"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hag.cli",
            "serve",
            "--no-worker",
            "--port",
            str(port),
            "--home",
            str(tmp_path / "home"),
        ],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Ctrl-C as a terminal delivers it: a test run started in the background by a
        # non-interactive shell ignores SIGINT, and its children would inherit that
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Prefect UI:") or proc.poll() is not None:
                break
        assert any(f"http://127.0.0.1:{port}" in line for line in lines), "".join(lines)
        deployments = asyncio.run(_read_back(f"http://127.0.0.1:{port}/api"))
        assert set(deployments) == {
            "session-end",
            "nightly",
            "enrichment",
            "restore",
            "learner-export",
            "learner-erase",
        }
        proc.send_signal(signal.SIGINT)
        # read what it prints while it stops (a full pipe would block it), and show it
        rest, _ = proc.communicate(timeout=90)
        assert proc.returncode == 0, "".join(lines) + rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0, "the Prefect server outlived hag serve"


def _paused_flow_run(api_url: str, deployment_id, timeout: float):
    """Start a nightly deployment run and wait until it is paused; the flow run, or None."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with (
        temporary_settings(updates={PREFECT_API_URL: api_url}),
        get_client(sync_client=True) as client,
    ):
        run = client.create_flow_run_from_deployment(
            deployment_id, parameters={"as_of": AS_OF.isoformat()}
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = client.read_flow_run(run.id)
            if run.state is not None and (run.state.is_paused() or run.state.is_final()):
                return run
            time.sleep(1)
        return run


def test_hag_serve_stopped_with_sigterm_cancels_a_paused_big_night(
    db, dials, database_url, tmp_path
):
    """SIGTERM to `hag serve` while a big night waits for an operator: the flow-run process
    (its own session) is ended, its run is cancelled in Prefect and in hag_runs, and no
    process, advisory lock or connection of it is left."""
    import os
    import signal
    import sqlite3
    import sys

    for n in range(3):
        a = f.entry(db, concept_slug=f"s-{n}")
        b = f.entry(db, concept_slug=f"t-{n}")
        f.edge(
            db,
            a,
            b,
            "related",
            confidence=0.1,
            source_type="learned",
            created_at=AS_OF - timedelta(days=100),
        )
    db.commit()
    dials(cull_guard_max_edges=2, cull_guard_timeout_seconds=3600)
    port = free_port()
    home = tmp_path / "home"
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "2",
        "PREFECT_WORKER_PREFETCH_SECONDS": "5",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "hag.cli", "serve", "--port", str(port), "--home", str(home)],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    api_url = f"http://127.0.0.1:{port}/api"
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("Prefect UI:") or proc.poll() is not None:
                break
        nightly = asyncio.run(_read_back(api_url))["nightly"]
        run = _paused_flow_run(api_url, nightly.id, timeout=300)
        assert run.state.is_paused(), (
            f"{run.state!r}\n" + (home / "logs" / "worker.log").read_text()[-3000:]
        )
        pid = int(str(run.infrastructure_pid).rpartition(":")[2])
        holders = {
            r["pid"]
            for r in db.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory'").fetchall()
        }
        row = db.execute("SELECT run_id, status FROM hag_runs WHERE kind = 'nightly'").fetchone()
        db.rollback()
        assert holders and row["status"] == "running" and row["run_id"] == run.id
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, "".join(lines) + rest
        assert f"cancelled flow run {run.id}" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert not serve_cmd._alive(pid), "the flow-run process outlived hag serve"
    # a backend leaves a moment after its client died: waited for, up to a deadline
    deadline = time.monotonic() + 30
    while True:
        left = db.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY(%s)", (list(holders),)
        ).fetchone()["n"]
        locks = db.execute(
            "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory'"
        ).fetchone()["n"]
        db.rollback()
        if (left, locks) == (0, 0) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    row = db.execute(
        "SELECT status, status_note FROM hag_runs WHERE run_id = %s", (run.id,)
    ).fetchone()
    db.rollback()
    assert (left, locks, row["status"]) == (0, 0, "cancelled"), row
    with sqlite3.connect(home / "prefect.db") as prefect_db:
        [(state,)] = prefect_db.execute(
            "SELECT state_type FROM flow_run WHERE id = ?", (str(run.id),)
        ).fetchall()
    assert state == "CANCELLED"
