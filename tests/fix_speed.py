"""Pytest plugin: the quick loop. Modules that start a Prefect server, a worker, another
database server, a subprocess install or a whole simulation are marked `slow`;
`make test-fast` (`pytest -m "not slow"`) runs the rest: the pure rules and one direct run
of each job (session-end, the nightly, enrichment, restore, export and erasure) against the
embedded database. A new module is fast until it is listed here.
"""

from __future__ import annotations

import pytest

SLOW_MODULES = frozenset(
    {
        "test_cli_faults",  # a role, a database and a stub per fault, every command
        "test_cli_processes",  # subprocesses and a Prefect server
        "test_core_install",  # builds a wheel, installs it into a fresh virtualenv
        "test_demo_corpus",  # whole demo-corpus runs
        "test_deployments",  # prefect deploy, a worker, hag serve
        "test_enrichment_flow",  # the Prefect harness
        "test_operator_flows",  # pauses and resumes through a Prefect server
        "test_pgbouncer",  # a PgBouncer in front of the server
        "test_pooler",  # a server of its own, restarted
        "test_privacy_flows",  # the Prefect harness
        "test_read_replica",  # a streaming standby
        "test_reembed",  # a demo-sized memory moved, killed and resumed
        "test_report",  # simulations behind the report
        "test_require_database",  # a deployment run of every flow
        "test_retrieval_identity",  # two databases swapped behind one URL
        "test_retrieval_local_model",  # a 384-dimension database embedded by the local model
        "test_service",  # uvicorn servers and a SIGTERM
        "test_session_flow",  # the Prefect harness
        "test_session_load",  # four workers, a nightly and a restore at once
        "test_session_workers",  # a Prefect server and two workers
        "test_simulate",  # simulations
        "test_simulate_cli",
        "test_simulate_compare",
        "test_simulate_learning",
        "test_sweeps_flow",  # the Prefect harness
        "test_sweeps_kill",  # kill -9 mid-run
        "test_wheel",  # builds and installs the wheel
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
