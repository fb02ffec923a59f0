"""What a flow run says about itself in the Prefect UI: its name from its parameters, and a
`dry-run` tag, so an operator tells runs apart at a glance (`nightly 2027-09-01`,
`nightly dry-run 2027-09-01`, `enrich cryptography ×5`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any

from prefect import get_run_logger
from prefect.runtime import deployment, flow_run
from pydantic import Field

DRY_RUN_TAG = "dry-run"

# A flow's `as_of`: an ISO-8601 date or time (a zone, or none for UTC). Prefect's server checks
# a parameter against the deployment's schema when a run is created, but not the schema's
# `format` (its validator is built without a format checker), so the pattern is what refuses
# a bad value there: "yesterday-ish", February 30 (or 29 outside a leap year), hour 24, a zone
# without its minutes, none of which pydantic would parse when the run starts.
_LEAP_YEAR = r"(\d{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
_ISO_DAY = (
    r"(\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\d|3[01])"
    r"|\d{4}-(0[469]|11)-(0[1-9]|[12]\d|30)"
    r"|\d{4}-02-(0[1-9]|1\d|2[0-8])"
    rf"|{_LEAP_YEAR}-02-29)"
)
_ISO_TIME = r"[Tt ]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d+)?)?(Z|[+-]([01]\d|2[0-3]):?[0-5]\d)?"
ISO_MOMENT = rf"^{_ISO_DAY}({_ISO_TIME})?$"
Moment = Annotated[datetime | None, Field(json_schema_extra={"pattern": ISO_MOMENT})]


def _day(as_of: Any) -> str:
    """The day a run works on: its `as_of`, else the day it was scheduled for (UTC)."""
    if isinstance(as_of, str) and as_of:
        as_of = datetime.fromisoformat(as_of.replace("Z", "+00:00"))
    if not isinstance(as_of, datetime):
        as_of = flow_run.get_scheduled_start_time() or datetime.now(UTC)
    return f"{as_of:%Y-%m-%d}"


def _dry(parameters: dict[str, Any]) -> str:
    return "dry-run " if parameters.get("dry_run") else ""


def nightly_run_name() -> str:
    """`nightly 2027-09-01`, `nightly dry-run 2027-09-01`."""
    p = flow_run.get_parameters()
    return f"nightly {_dry(p)}{_day(p.get('as_of'))}"


def enrichment_run_name() -> str:
    """`enrich cryptography ×5`, `enrich dry-run all topics ×default`."""
    p = flow_run.get_parameters()
    limit = p.get("limit")
    return f"enrich {_dry(p)}{p.get('topic') or 'all topics'} ×{limit or 'default'}"


def session_end_run_name() -> str:
    """`session-end 2027-09-01 02:35` (the scheduled minute), with the worker count if > 1."""
    p = flow_run.get_parameters()
    when = flow_run.get_scheduled_start_time() or datetime.now(UTC)
    workers = p.get("workers") or 1
    return f"session-end {when:%Y-%m-%d %H:%M}" + (f" ×{workers} workers" if workers > 1 else "")


def restore_run_name() -> str:
    """`restore run 9b1e2b57`, `restore dry-run 2 edge(s)`."""
    p = flow_run.get_parameters()
    what = f"run {p['run']}" if p.get("run") else f"{len(p.get('edge_ids') or [])} edge(s)"
    return f"restore {_dry(p)}{what}"


def tag_dry_run(dry_run: bool) -> None:
    """Add the `dry-run` tag to the current flow run (tags are otherwise set at creation)."""
    if not dry_run:
        return
    from prefect.client.orchestration import get_client

    run_id = flow_run.get_id()
    if run_id is None:
        return
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(run_id)
        if DRY_RUN_TAG not in current.tags:
            client.update_flow_run(run_id, tags=[*current.tags, DRY_RUN_TAG])


def learner_run_name() -> str:
    """`learner-export ad…`, `learner-erase dry-run ad…`: the learner's first two characters
    only (a list of runs is no list of learners)."""
    p = flow_run.get_parameters()
    who = str(p.get("learner_id") or "")[:2]
    return f"{flow_run.get_flow_name()} {_dry(p)}{who}…"


def start_refusal(as_of: datetime | None, *, topic: str | None = None) -> str | None:
    """Why a nightly or enrichment run may not start, as the one line its run ends with, or
    None: an `as_of` outside `timestamp_window_years`, or (in a deployment's run) later
    than now, or a topic the memory does not hold. Checked before any task runs, so the
    operator's slip is one line in the log, not a task's traceback.

    A deployment's `as_of` is for backfills: a moment past the present would promote,
    archive and stamp the memory as of a time that has not come, for good. In process (the
    simulator, `hag nightly --as-of`) the caller's clock is its own.
    """
    from hag import settings
    from hag.support import bounds

    if as_of is not None:
        moment = as_of if as_of.tzinfo is not None else as_of.replace(tzinfo=UTC)
        problem = bounds.timestamp_problem(moment, settings.current())
        if problem:
            return f"as_of {problem}"
        if deployment.get_id() is not None and moment > datetime.now(UTC):
            return (
                f"as_of {moment.isoformat()} is in the future: a deployment's run takes a "
                "past moment (a backfill) or none (now)"
            )
    if topic is not None:
        from hag.enrichment import graph
        from hag.storage import db

        with db.connect() as conn:
            if not graph.topic_exists(conn, topic):
                return f"unknown topic {topic!r}"
    return None


def refused(reason: str) -> Any:
    """The Failed state of a run refused before it did anything: one error line in its log;
    called in process (`hag nightly` through a server), the flow raises a ValidationError
    with the same line, which the command prints as its one line."""
    from prefect.states import Failed

    from hag.errors import ValidationError

    get_run_logger().error("%s", reason)
    return Failed(message=reason, data=ValidationError(reason))


def partly_failed(reason: str, summary: dict[str, Any]) -> Any:
    """The Failed state a flow ends with when it did its work only in part (an `hag` command
    exits 1 there): one error line in the run's log, the reason as the state's message, no
    traceback; called in process, the flow raises `PartlyFailed` carrying the summary."""
    from prefect.states import Failed

    from hag.errors import PartlyFailed

    get_run_logger().error("%s", reason)
    return Failed(message=reason, data=PartlyFailed(reason, summary))


def use_deployment_database() -> None:
    """Point a deployed flow run at its database before it touches one: the URL in the
    Prefect Secret block named by `HAG_DATABASE_SECRET_BLOCK` (default `hag-database-url`)
    when the server has one, else the worker's `DATABASE_URL`. The password is never a
    deployment parameter or job variable (which Prefect stores and shows in plain text).

    A flow called in-process (`hag nightly` with PREFECT_API_URL, the simulator, tests) is
    not a deployment's run and keeps its caller's database.
    """
    from prefect.blocks.system import Secret

    if deployment.get_id() is None:
        return
    require_database_in_deployment()  # whatever the source, never a new embedded memory

    from hag import config
    from hag.storage import db

    name = config.get_config().database_secret_block
    logger = get_run_logger()
    try:
        url = str(Secret.load(name).get())  # type: ignore[union-attr]  # sync here
    except ValueError:  # no such block: the worker's environment decides
        logger.info("database: the worker's DATABASE_URL (no Secret block %r)", name)
        return
    logger.info("database: from the Secret block %r", name)
    if os.environ.get("DATABASE_URL") != url:
        os.environ["DATABASE_URL"] = url
        os.environ.pop("HAG_DATABASE_URL", None)
        config.reset_config()
        db.close_all()


def require_database_in_deployment() -> None:
    """In a flow run of a deployment, refuse to start an embedded database (hag.storage.db).

    A worker without DATABASE_URL would otherwise start, migrate and process an empty
    memory of its own and report success. Called by use_deployment_database, first in every
    flow body; a flow called
    directly (the CLI, tests, `hag demo`) keeps the embedded default.
    """
    if deployment.id is None:
        return
    from hag.storage import db

    db.refuse_embedded(f"a flow run of deployment {deployment.name or deployment.id}")


class _ToRunLogger(logging.Handler):
    """Hands a library logger's records to the run's logger, so they show in the run's log."""

    def __init__(self) -> None:
        super().__init__()
        self.run_logger = get_run_logger()

    def emit(self, record: logging.LogRecord) -> None:
        self.run_logger.log(record.levelno, "%s", record.getMessage(), exc_info=record.exc_info)


@contextmanager
def library_logs_in_run(name: str = "hag") -> Iterator[None]:
    """While a task calls into the library, what its loggers (`name` and below: the read
    path's index upkeep logs a skipped build there) say goes to the run's log too, where an
    operator reads the run; outside a run they log as before."""
    handler = _ToRunLogger()
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
