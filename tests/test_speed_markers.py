"""The quick loop's selection (tests/fix_speed.py) names tests that exist and every job."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.fix_speed import JOB_SMOKE, PURE_MODULES

HERE = Path(__file__).resolve().parent
JOBS = {"session-end", "nightly", "enrichment", "retrieval", "service"}


def _test_params(module: str) -> dict[str, list[str]]:
    """Each test function of a module, with the fixtures it asks for by name."""
    tree = ast.parse((HERE / module).read_text())
    return {
        node.name: [a.arg for a in node.args.args]
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    }


def test_every_pure_module_exists():
    """A module renamed or removed would leave the list stale and the loop silently smaller."""
    assert sorted(m for m in PURE_MODULES if not (HERE / f"{m}.py").is_file()) == []


def test_each_job_has_one_smoke_test_on_the_database():
    """session-end, the nightly, enrichment, retrieval and the service each have a smoke
    test in the loop that exists and runs against the embedded database."""
    assert set(JOB_SMOKE) == JOBS
    for job, node in JOB_SMOKE.items():
        module, name = node.split("::")
        params = _test_params(module).get(name)
        assert params is not None, f"{job}: {node} is not a test"
        assert {"db", "client", "service"} & set(params), f"{job}: {node} has no database"


def test_this_pure_test_is_in_the_loop(request):
    """The plugin marks the pure tests of the listed modules `fast` (this one is one)."""
    assert request.node.get_closest_marker("fast") is not None


def test_property_tests_have_no_deadline():
    """A property test's verdict is never its speed: the suite's Hypothesis profile has no
    per-example deadline (a stalled example on a shared machine fails nothing)."""
    from hypothesis import settings

    assert settings.default.deadline is None
    assert settings.get_profile("hag").deadline is None
