"""Several Prefect workers, as if on separate hosts, drain one session queue: each session once.

A real Prefect server on a free port, a `process` work pool, a session-end deployment defined
here (prefect.yaml's own is scheduled; this one is not) and two `prefect worker` processes,
each with its own PREFECT_HOME and name like a worker on another machine, each allowed two
flow runs at a time. Four flow runs of the deployment share the pending queue of the test
database; sessions are claimed with FOR UPDATE SKIP LOCKED. Each worker pulls from a work
queue of its own and the runs alternate between the two queues, so each host runs two of
them by construction: left to one shared queue, whichever worker polls first may take all
four before the other asks. Every process started here is stopped at the end, flow-run
children included, whether the test passed or not.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from hag import PROJECT_ROOT, settings
from hag.cli import serve_cmd
from hag.session.queue import apply_pending_session
from hag.session.steps import Caches
from hag.session.summary import ProcessSummary
from hag.storage import db as hdb
from tests.fix_prefect import free_port
from tests.fix_session import build_world, memory, sessions
from tests.session_builders import ingest

POOL = "hag-scale-out"
HOSTS = ("host-a", "host-b")
SESSIONS = 60
FLOW_RUNS = 4  # each takes a quarter of the queue at most, so at least two runs must share it
RUN_TIMEOUT_SECONDS = 300


async def _deploy_and_wait(
    api_url: str, parameters: dict[str, Any], start_workers: Callable[[], None]
) -> Any:
    """Make the pool, start the workers, deploy session-end, queue the runs, wait for them."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.workers.process import ProcessWorker

    from flows.session_end import session_end_flow

    with temporary_settings(updates={PREFECT_API_URL: api_url}):
        async with get_client() as client:
            template = ProcessWorker.get_default_base_job_template()
            await client.create_work_pool(
                WorkPoolCreate(name=POOL, type="process", base_job_template=template)
            )
            for host in HOSTS:
                await client.create_work_queue(name=host, work_pool_name=POOL)
            start_workers()  # they boot (about as long as the deployment takes) meanwhile
            source = await session_end_flow.afrom_source(
                source=str(PROJECT_ROOT), entrypoint="flows/session_end.py:session_end_flow"
            )
            deployment_id = await source.adeploy(
                name="session-end-scale-out",
                work_pool_name=POOL,
                parameters=parameters,
                build=False,
                push=False,
                print_next_steps=False,
                ignore_warnings=True,
            )
            runs = [
                await client.create_flow_run_from_deployment(
                    deployment_id, work_queue_name=HOSTS[n % len(HOSTS)]
                )
                for n in range(FLOW_RUNS)
            ]
            deadline = time.monotonic() + RUN_TIMEOUT_SECONDS
            while time.monotonic() < deadline and not all(
                r.state is not None and r.state.is_final() for r in runs
            ):
                await asyncio.sleep(1)
                runs = [await client.read_flow_run(r.id) for r in runs]
            return runs


def _stop_all(workers: list[subprocess.Popen[bytes]], server: Any) -> None:
    """Stop the workers, any flow run they left behind, then the server."""
    children = []
    for proc in workers:
        with contextlib.suppress(psutil.NoSuchProcess):
            children += psutil.Process(proc.pid).children(recursive=True)
    for proc in workers:
        serve_cmd.stop(proc)
    for child in children:  # flow runs may live in sessions of their own
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(children, timeout=15)
    if server is not None:
        serve_cmd.stop(server)


def test_two_workers_on_one_pool_apply_every_session_exactly_once(db, database_url, tmp_path):
    """Four flow runs on two worker processes: all 60 applied once, serial-equivalent memory."""
    batch = sessions(SESSIONS)
    build_world(db)
    assert all(r.accepted for r in ingest(db, *batch))

    port = free_port()
    env = serve_cmd.prefect_env(tmp_path / "server-home", port)
    env.update(
        {
            "DATABASE_URL": database_url,
            "PREFECT_UI_ENABLED": "false",
            "PREFECT_WORKER_QUERY_SECONDS": "1",
            "PREFECT_WORKER_PREFETCH_SECONDS": "5",
        }
    )
    logs = {host: tmp_path / f"{host}.log" for host in HOSTS}
    workers: list[subprocess.Popen[bytes]] = []
    server = None

    def start_workers() -> None:
        for host in HOSTS:
            host_env = {**env, "PREFECT_HOME": str(tmp_path / host)}
            Path(host_env["PREFECT_HOME"]).mkdir()
            with open(logs[host], "wb") as log:
                workers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "prefect", "worker", "start"]
                        + ["--pool", POOL, "--work-queue", host, "--name", host]
                        + ["--limit", str(FLOW_RUNS // len(HOSTS))],
                        env=host_env,
                        cwd=PROJECT_ROOT,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )

    try:
        with open(tmp_path / "server.log", "wb") as server_log:
            server = serve_cmd.start_server(env, port, server_log, timeout=150)
        parameters = {"batch_size": 5, "limit": SESSIONS // FLOW_RUNS, "check": False}
        runs = asyncio.run(_deploy_and_wait(env["PREFECT_API_URL"], parameters, start_workers))
    finally:
        _stop_all(workers, server)

    worker_logs = {host: logs[host].read_text(errors="replace") for host in HOSTS}
    if not all(r.state is not None and r.state.is_completed() for r in runs):
        pytest.fail(
            f"flow runs ended {[r.state.type if r.state else None for r in runs]}; logs:\n"
            + "\n".join(f"--- {h}\n{text[-2000:]}" for h, text in worker_logs.items())
        )
    # A worker reports each run it takes as "submitted to infrastructure", under the name the
    # run had then (the flow renames itself from its parameters once it starts), so runs are
    # matched by count: each host ran the two of its own queue. Exactly-once is proven by the
    # memory below.
    ran_by = {
        host: re.findall(r"Flow run '([^']+)' submitted to infrastructure", text)
        for host, text in worker_logs.items()
    }
    assert {host: len(names) for host, names in ran_by.items()} == {
        host: FLOW_RUNS // len(HOSTS) for host in HOSTS
    }, ran_by

    # Exactly once, by the ledger and by counters derived from the payloads alone.
    statuses = db.execute(
        "SELECT status, count(*) AS n, count(DISTINCT applied_seq) AS seqs FROM hag_sessions "
        "GROUP BY status"
    ).fetchall()
    assert [(r["status"], r["n"], r["seqs"]) for r in statuses] == [
        ("processed", SESSIONS, SESSIONS)
    ]
    recorded = db.execute(
        "SELECT (summary->>'sessions')::int AS n FROM hag_runs WHERE kind = 'session_end'"
    ).fetchall()
    assert sorted(r["n"] for r in recorded) == [SESSIONS // FLOW_RUNS] * FLOW_RUNS
    rendered = sum(len(set(t["rendered_edge_ids"])) for s in batch for t in s["turns"])
    assert db.execute("SELECT sum(traversal_count) AS n FROM hag_edges").fetchone()["n"] == rendered

    # Serial-equivalent: the same sessions applied one by one in the workers' commit order.
    order = [
        r["session_id"]
        for r in db.execute("SELECT session_id FROM hag_sessions ORDER BY applied_seq").fetchall()
    ]
    across_hosts = memory(db)
    build_world(db)
    assert all(r.accepted for r in ingest(db, *batch))
    summary, caches, dials = ProcessSummary(), Caches(), settings.current()
    with hdb.pool().connection() as conn:
        for session_id in order:
            apply_pending_session(
                conn, dials, run_id=None, caches=caches, summary=summary, session_id=session_id
            )
    assert memory(db) == across_hosts
