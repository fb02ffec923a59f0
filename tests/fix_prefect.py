"""Pytest plugin (``-p tests.fix_prefect``): one temporary Prefect server per test session,
and how a test reads a flow run and its artifacts back from it.

Tests that run flows ask for `prefect_harness`; the rules themselves are tested without
Prefect. The harness (SQLite in a temporary PREFECT_HOME) starts on first use only, so a
test session that runs no flow never pays for it.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """A throwaway Prefect API for the whole session (flows, task runs, artifacts)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=90):
        yield


def prefect_client():
    from prefect.client.orchestration import get_client

    return get_client(sync_client=True)


def run_logs(flow_run_id, wait_for: str, timeout: float = 30.0, also: str = "") -> list[str]:
    """The run's log lines on the server, once one holds `wait_for` (and `also`): the API
    handler ships them in batches."""
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId

    deadline = time.monotonic() + timeout
    while True:
        with prefect_client() as client:
            lines = [
                log.message
                for log in client.read_logs(
                    log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id]))
                )
            ]
        if any(wait_for in line and also in line for line in lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.5)


def read_flow_run(flow_run_id):
    with prefect_client() as client:
        return client.read_flow_run(flow_run_id)


def flow_run_artifacts(flow_run_id) -> dict[str, Any]:
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with prefect_client() as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found}


async def flow_run_artifacts_async(flow_run_id):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async with get_client() as client:
        found = await client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
