"""The data-quality suites as a task every flow calls last: a failed expectation fails the run."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE


class ExpectationsFailed(Exception):
    """Raised with every failing expectation listed, so the flow run fails and says why."""


@task(name="run-expectations", cache_policy=NO_CACHE)
def run_expectations() -> dict[str, Any]:
    """Run every suite (`expectations/suites/`); publish the outcome; raise if any failed."""
    from hag import quality  # Great Expectations loads only when a suite runs

    result = quality.run_all(progress=get_run_logger().info)  # a log line per suite
    create_markdown_artifact(
        key="data-quality",
        markdown="# Data-quality suites\n\n```\n" + result.report() + "\n```\n",
        description="passed" if result.success else f"{len(result.failures)} expectation(s) failed",
    )
    if not result.success:
        raise ExpectationsFailed(
            f"{len(result.failures)} expectation(s) failed:\n"
            + "\n".join(f"- {f.line()}" for f in result.failures)
        )
    return result.as_dict()
