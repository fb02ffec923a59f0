"""The learner-export flow: everything held about one learner, to a file, from the Prefect UI."""

from __future__ import annotations

from typing import Annotated, Any

from prefect import flow
from pydantic import Field

from hag.errors import HagError
from tasks.privacy import export_learner_data, export_path, publish_export_manifest
from tasks.runtime import learner_run_name, refused, use_deployment_database

LearnerId = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")]


@flow(name="learner-export", flow_run_name=learner_run_name, validate_parameters=True)
def learner_export_flow(
    learner_id: LearnerId,
    out: Annotated[str | None, Field(min_length=1, max_length=4096)] = None,
) -> dict[str, Any]:
    """Write everything held about one learner to a JSON Lines file, then report the counts.

    Their sessions (payloads as kept), private entries with history and edges, prerequisite
    reports, successes and quarantined payloads, one row per line, and a manifest last
    (docs/privacy.md). An unknown learner fails the run with one line.

    Args:
        learner_id: The learner, as the tutor names them in session payloads.
        out: The file to write on the worker's machine, an absolute path (a deployment's
            run works in a temporary folder); empty means the data folder's
            exports/learner-export-<flow run id>.jsonl (the worker's HAG_DATA_DIR, which
            `hag serve` sets).
    """
    use_deployment_database()
    try:  # where the file goes is the operator's to fix: one line, not a traceback
        path = str(export_path(out))
    except HagError as exc:
        return refused(f"export refused: {exc}")  # type: ignore[no-any-return]
    result = export_learner_data(learner_id, path)
    publish_export_manifest(result)
    return result.as_dict()
