"""Pytest plugin: the quick loop, and the suite's wall time.

`make test-fast` (`pytest -m fast`) runs a curated set, marked `fast` here: the pure tests
(those of PURE_MODULES that ask for no database) and one smoke test of each job against the
embedded database (JOB_SMOKE). A new module is outside the loop until it is listed here;
tests/test_speed_markers.py holds the lists to tests that exist and to every job.

Every run ends with one line giving its wall time and the load average, so that a figure
read off `make test` or CI says how loaded the machine was. Speed is never a verdict here:
Hypothesis's per-example deadline is off for every property test (a stall of a shared
machine fails it with no fault in the code), as benchmarks measure speed instead.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("hag", deadline=None)
settings.load_profile("hag")

# Modules whose tests that use no database are the loop's pure tests: rules, the settings
# registry, the command line's help and refusals, the layer and wiring checks. Left out:
# pure tests that start a server or a process, import Great Expectations, or draw the lab's
# plots (the full suite runs them).
PURE_MODULES = frozenset(
    {
        "test_cli",  # every command's --help
        "test_cli_errors",  # the refusals that need no database
        "test_corpus",
        "test_enrichment_rules",
        "test_evidence_rules",
        "test_hostile_input",
        "test_json_duplicates",
        "test_layers",
        "test_openai_stub",
        "test_pg_support",
        "test_retrieval_rules",
        "test_runs",
        "test_session_failures",
        "test_session_properties",
        "test_session_rules",
        "test_settings",
        "test_speed_markers",
        "test_sqlfiles",
    }
)

# One direct run of each job on the embedded database, by node id (module::test).
JOB_SMOKE = {
    "session-end": "test_session_ingest.py::test_re_ingesting_a_processed_session_does_not_apply_it_again",
    "nightly": "test_sweeps.py::test_run_is_recorded_with_its_counts",
    "enrichment": "test_enrichment.py::test_a_good_reply_is_written_enriched_at_the_dial_confidence",
    "retrieval": "test_retrieval.py::test_rendered_text_byte_for_byte_for_a_fixed_corpus",
    "service": "test_service.py::test_retrieve_over_http_is_the_in_process_result",
}

DATABASE_FIXTURE = "database_url"  # every fixture that reaches the database asks for it

_loaded = time.monotonic()


def _process_age() -> float:
    """Seconds since this process started (Linux's /proc), else since this plugin loaded:
    the interpreter's start and pytest's imports count, as they do for whoever waits."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime
        return float(Path("/proc/uptime").read_text().split()[0]) - started
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _loaded


def is_fast(item: pytest.Item) -> bool:
    """In the quick loop: a pure test of a listed module, or a job's smoke test."""
    module = item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""
    if module in PURE_MODULES and DATABASE_FIXTURE not in getattr(item, "fixturenames", ()):
        return True
    return item.nodeid.removeprefix("tests/") in JOB_SMOKE.values()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_fast(item):
            item.add_marker(pytest.mark.fast)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    minutes, seconds = divmod(round(_process_age()), 60)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    terminalreporter.write_line(
        f"wall time: {minutes} min {seconds} s since the process started "
        f"(load average {load}, {os.cpu_count()} CPUs)",
        bold=True,
    )
