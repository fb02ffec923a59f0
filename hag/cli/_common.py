"""Small helpers the commands share: JSON output, start-up, and how a job is dispatched."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from hag.storage.schema import PG_INT_MAX
from hag.support.jsonkeys import to_jsonable

# Data printed as JSON: any shape a command returns (rows, summaries, lists of them). The
# only Any of this module's boundary; everything else here has a type.
JSON = Any


def echo_json(data: JSON) -> None:
    click.echo(json.dumps(data, default=to_jsonable, indent=2, sort_keys=False))


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def ready() -> None:
    """Make sure the database runs and is migrated (every data command calls this first)."""
    from hag.storage.migrate import ensure_migrated

    ensure_migrated()


def prefect_api_url() -> str | None:
    """The Prefect API this shell is configured for, or None, without importing Prefect.

    PREFECT_API_URL from the environment, else from the active profile in PREFECT_HOME's
    profiles.toml (what `prefect config set PREFECT_API_URL=...` writes).
    """
    if os.environ.get("PREFECT_API_URL"):
        return os.environ["PREFECT_API_URL"]
    home = Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect").expanduser()
    try:
        profiles = tomllib.loads((home / "profiles.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    active = os.environ.get("PREFECT_PROFILE") or profiles.get("active", "ephemeral")
    url = profiles.get("profiles", {}).get(active, {}).get("PREFECT_API_URL")
    return str(url) if url else None


def dispatch(
    job: str, direct: Callable[[], Any], through_flow: Callable[[], Any], *, force_direct: bool
) -> Any:
    """Run a job directly, or as a flow run when a Prefect server is configured.

    With no PREFECT_API_URL, a flow call would start a temporary Prefect server (about
    10 s, and a failed command when it is slow to start) only to record a run nobody can
    see afterwards; the library job is the same work. With a configured server the flow
    runs, so the run is recorded there with its artifacts. A failed flow run is one line.
    """
    from hag.errors import HagError

    url = None if force_direct else prefect_api_url()
    if url is None:
        return direct()
    from hag.support import extras

    extras.require("jobs", f"a {job} flow run (PREFECT_API_URL is set)")
    note(f"{job}: a flow run on the Prefect server at {url}")
    try:
        return through_flow()
    except HagError:
        raise
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        raise HagError(
            f"the {job} flow run failed: {lines[0] if lines else type(exc).__name__}"
        ) from exc


def note(message: str) -> None:
    """A progress or provenance line for the operator, on stderr (stdout stays data)."""
    click.echo(message, err=True)


class Timestamp(click.ParamType[datetime]):
    """An ISO-8601 moment (`2026-03-01`, `2026-03-01T02:30:00+01:00`); naive means UTC."""

    name = "timestamp"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO-8601 timestamp (e.g. 2026-03-01T02:00:00Z)", param, ctx
            )
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


TIMESTAMP = Timestamp()
# A count of rows or sessions: at least 1, at most what a PostgreSQL integer holds (a larger
# one is refused here by name, not by the database as "integer out of range").
COUNT = click.IntRange(1, PG_INT_MAX)
