"""The learner-erase flow: erase one learner's data, audited, from the Prefect UI."""

from __future__ import annotations

from typing import Annotated, Any

from prefect import flow
from pydantic import Field

from tasks.checks import run_expectations
from tasks.privacy import erase_learner_data, publish_erasure_report
from tasks.runtime import learner_run_name, tag_dry_run, use_deployment_database

LearnerId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")]


@flow(name="learner-erase", flow_run_name=learner_run_name, validate_parameters=True)
def learner_erase_flow(
    learner_id: LearnerId,
    dry_run: bool = True,
    operator: Annotated[str | None, Field(min_length=1, max_length=200)] = None,
) -> dict[str, Any]:
    """Erase one learner in one transaction (a dry run, the default, only counts), then report.

    Sessions, private entries and their history, quarantined payloads go; the shared graph's
    evidence stays under a random pseudonym and no confidence moves; an erasure record keeps
    who, when, a salted hash of the id and the counts (docs/privacy.md). An unknown learner
    fails the run with one line. The run's parameters (the id) stay in Prefect's database:
    delete the run afterwards.

    Args:
        learner_id: The learner to erase, as the tutor names them in session payloads.
        dry_run: Only count what would be erased; change nothing.
        operator: Who asks for the erasure (recorded beside this flow run's id).
    """
    use_deployment_database()
    tag_dry_run(dry_run)
    result = erase_learner_data(learner_id, dry_run, operator)
    publish_erasure_report(result)
    if not dry_run:
        run_expectations()  # the shared suites task (tasks/checks.py), as every flow ends
    return result.as_dict()
