"""Pytest plugin (``-p tests.fix_prefect``): one temporary Prefect server per test session.

Tests that run flows ask for `prefect_harness`; the rules themselves are tested without
Prefect. The harness (SQLite in a temporary PREFECT_HOME) starts on first use only, so a
test session that runs no flow never pays for it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

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
