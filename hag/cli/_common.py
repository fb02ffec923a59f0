"""Small helpers the commands share: JSON output and start-up."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

import click


def to_jsonable(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, Decimal):
        return float(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "to_list"):
        return value.to_list()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def echo_json(data: Any) -> None:
    click.echo(json.dumps(data, default=to_jsonable, indent=2, sort_keys=False))


json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def ready() -> None:
    """Make sure the database runs and is migrated (every data command calls this first)."""
    from hag.migrate import ensure_migrated  # noqa: PLC0415

    ensure_migrated()


def note(message: str) -> None:
    """A progress or provenance line for the operator, on stderr (stdout stays data)."""
    click.echo(message, err=True)


class Timestamp(click.ParamType):
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
