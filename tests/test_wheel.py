"""The built wheel installs the product and its lab, carries its SQL, and runs outside a checkout."""

from __future__ import annotations

import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hag import PROJECT_ROOT
from tests.wheels import Installed, build_wheel, clean_env, install, own_folder


@pytest.fixture(scope="module")
def installed() -> Iterator[Installed]:
    """`uv build --wheel` of this checkout, installed with every extra into a fresh venv."""
    with own_folder("hag-wheel-") as root:
        yield install(build_wheel(root), root / "venv", extras="all")


def _hag(inst: Installed, cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(inst.bin / "hag"), *args],
        cwd=cwd,
        env=clean_env(**extra),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_the_wheel_installs_only_hag_with_its_sql_and_suites(installed):
    """Top-level names: `hag`, its lab `hag_lab` and the dist-info only (no generic
    flows/tasks/expectations), and every file of the checkout's sql/ tree and suites is
    inside the package."""
    names = zipfile.ZipFile(installed.wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"hag", "hag_lab", "hag_memory-0.1.0.dist-info"}
    sql = {str(p.relative_to(PROJECT_ROOT / "sql")) for p in (PROJECT_ROOT / "sql").rglob("*.sql")}
    assert {n.removeprefix("hag/_sql/") for n in names if n.startswith("hag/_sql/")} == sql
    suites = {p.name for p in (PROJECT_ROOT / "expectations" / "suites").glob("*.json")}
    assert {n.removeprefix("hag/_suites/") for n in names if n.startswith("hag/_suites/")} == suites
    assert "hag/data/demo_corpus.json" in names
    assert "hag/py.typed" in names  # type checkers read the package's annotations


def test_the_installed_hag_runs_the_demo_outside_a_checkout(installed, tmp_path):
    """`hag demo` (a short run) from a directory outside the checkout exits 0, keeps its
    database under ./.hag and writes its report to ./reports/demo."""
    done = _hag(installed, tmp_path, "demo", "--sessions", "40", "--days", "3")
    assert done.returncode == 0, done.stderr[-2000:]
    report = (tmp_path / "reports" / "demo" / "report.md").read_text()
    assert "simulated 40 sessions" in done.stdout
    assert "40 simulated sessions" in report and "over 3 simulated days" in report
    assert (tmp_path / ".hag" / "demo").is_dir()


def test_the_installed_hag_says_in_one_line_that_the_flows_are_not_installed(installed, tmp_path):
    """With a Prefect server configured, the wheel (which has no flows) refuses a flow run in
    one line, and `hag serve` says it needs a checkout; its state went to the current
    directory (no checkout to hold it)."""
    done = _hag(installed, tmp_path, "process-sessions", PREFECT_API_URL="http://127.0.0.1:9/api")
    _hag(installed, tmp_path, "db", "stop", "--all")
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()[-1]
    assert "the session-end flow" in error and "is not installed" in error, done.stderr
    served = _hag(installed, tmp_path, "serve", "--no-worker")
    assert served.returncode != 0 and "only a checkout" in served.stderr, served.stderr
    assert (tmp_path / ".hag").is_dir()
