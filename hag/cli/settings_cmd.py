"""`hag settings list|get KEY|set KEY VALUE|reset KEY|profile NAME`."""

from __future__ import annotations

import json
from typing import Any

import click

from hag.cli._common import echo_json, json_option, ready


@click.group()
def settings() -> None:
    """Read and change the dials (validated; the running processes see them within 60 s)."""


@settings.command("list")
@json_option
def list_(as_json: bool) -> None:
    """Every dial with its value, default, bounds and reader; last, the rule profile the
    dials match, or the nearest one and the dials apart from it."""
    from hag import settings as s
    from hag.storage import db

    ready()
    with db.connect() as conn:
        values, invalid = s.stored(conn)
        rows = s.listing(conn, invalid)
    if as_json:
        echo_json(rows)
        return
    for line in listing_lines(rows):
        click.echo(line)
    click.echo(s.profile_line(values, invalid))


def _bounds(row: dict[str, Any]) -> str:
    lo, hi = row["min_value"], row["max_value"]
    if lo is None and hi is None:
        return ""

    def fmt(x: float | None, none: str) -> str:
        return none if x is None else (str(int(x)) if float(x).is_integer() else str(x))

    return f"[{fmt(lo, '-inf')}, {fmt(hi, 'inf')}]"


def listing_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The table `hag settings list` prints: value, bounds, reader, then what the dial does."""
    table = [
        (
            r["key"],
            json.dumps(r["value"]) + (" (invalid)" if r.get("invalid") else ""),
            _bounds(r),
            r["consumer"],
            r["description"]
            + (
                ""
                if r["value"] == r["default_value"]
                else f" (default {json.dumps(r['default_value'])})"
            ),
        )
        for r in rows
    ]
    header = ("key", "value", "bounds", "reader", "description")
    widths = [max(len(row[i]) for row in (header, *table)) for i in range(4)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths, strict=True)) + "  " + row[4]
        for row in (header, *table)
    ]


@settings.command()
@click.argument("key")
@json_option
def get(key: str, as_json: bool) -> None:
    """One dial's value."""
    from hag import settings as s
    from hag.storage import db

    s.dial(key)
    ready()
    with db.connect() as conn:
        values, invalid = s.stored(conn)
    if key in invalid:  # shown as stored, marked, with its repair (exit 0: this is a read)
        value, reason = invalid[key]
        if as_json:
            echo_json({"key": key, "value": value, "invalid": reason})
        else:
            click.echo(f"{json.dumps(value)} (invalid: {s.invalid_message(key, value, reason)})")
        return
    if as_json:
        echo_json({"key": key, "value": values[key]})
    else:
        click.echo(json.dumps(values[key]))


# ignore_unknown_options: a VALUE such as -0.1 is the value, not an option (click's recipe).
@settings.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Change a dial after checking its type and range (a VALUE may start with `-`).

    A dial the evidence model reads re-weighs every edge it owns under the new value at once,
    in the same transaction (as `hag settings profile` does), and says how many moved."""
    from hag import settings as s

    s.validate(key, value)
    _move_dial(key, value)


def _move_dial(key: str, value: Any, *, reset: bool = False) -> None:
    """Set or reset one dial and re-weigh what it moves (`hag.evidence.reweigh.move_dial`)."""
    from datetime import UTC, datetime

    from hag.evidence.reweigh import move_dial
    from hag.storage import db

    ready()
    with db.connect() as conn:
        move = move_dial(conn, key, value, by="cli", at=datetime.now(UTC), reset=reset)
        conn.commit()
    click.echo(f"{key} = {json.dumps(move.stored)}")
    if move.owed_for:
        click.echo(
            f"  every dial is valid again: the re-weigh that {move.owed_for}'s move waited for "
            "is done"
        )
    under = "under it" if not move.owed_for else "under the dials now stored"
    if move.reweighed:
        click.echo(f"  {move.reweighed} prerequisite confidence(s) re-weighed {under}")
    if move.reweighed_sequences:
        click.echo(
            f"  {move.reweighed_sequences} leads_to/fallback confidence(s) re-weighed {under}"
        )
    if move.clamped:
        click.echo(f"  {move.clamped} edge confidence(s) moved within the edge bounds")
    if move.not_reweighed:
        click.echo(f"  not re-weighed: {move.not_reweighed}")


@settings.command()
@click.argument("key")
def reset(key: str) -> None:
    """Put a dial back to its registry default (a dial the evidence model reads re-weighs
    what it moves, as `hag settings set` does)."""
    from hag import settings as s

    s.dial(key)
    _move_dial(key, None, reset=True)


@settings.command()
@click.argument("name", type=click.Choice(["seed", "evidence"]))
@json_option
def profile(name: str, as_json: bool) -> None:
    """Set a whole rule profile in one step (seed: the seed's rules; evidence: the units rule).

    Prints every dial it changed, with the old and new value (nothing when already set); when
    the profile's rules weigh prerequisites (or leads_to and fallback) by evidence, every such
    edge is re-weighed under them at once, and the counts printed.
    """
    from datetime import UTC, datetime

    from hag.evidence.reweigh import move_to_profile
    from hag.storage import db

    ready()
    with db.connect() as conn:
        move = move_to_profile(conn, name, by="cli", at=datetime.now(UTC))
        conn.commit()
    changed, moved, moved_sequences = move.changed, move.reweighed, move.reweighed_sequences
    if as_json:
        echo_json(
            {
                "profile": name,
                "changed": [{"key": k, "old": o, "new": n} for k, o, n in changed],
                "reweighed": moved,
                "reweighed_sequence_edges": moved_sequences,
            }
        )
        return
    if not changed:
        click.echo(f"profile {name}: every dial already set, nothing changed")
        return
    click.echo(f"profile {name}: {len(changed)} dial(s) changed")
    for key, old, new in changed:
        click.echo(f"  {key}: {json.dumps(old)} -> {json.dumps(new)}")
    if moved:
        click.echo(f"  {moved} prerequisite confidence(s) re-weighed under the new rules")
    if moved_sequences:
        click.echo(
            f"  {moved_sequences} leads_to/fallback confidence(s) re-weighed under the new rules"
        )
