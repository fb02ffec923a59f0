"""`hag settings list|get KEY|set KEY VALUE|reset KEY|profile NAME`."""

from __future__ import annotations

import json

import click

from hag.cli._common import echo_json, json_option, ready


@click.group()
def settings() -> None:
    """Read and change the dials (validated; the running processes see them within 60 s)."""


@settings.command("list")
@json_option
def list_(as_json: bool) -> None:
    """Every dial with its value, default, bounds and reader."""
    from hag import db  # noqa: PLC0415
    from hag import settings as s  # noqa: PLC0415

    ready()
    with db.connect() as conn:
        rows = s.listing(conn)
    if as_json:
        echo_json(rows)
        return
    width = max(len(r["key"]) for r in rows)
    for r in rows:
        marker = (
            ""
            if r["value"] == r["default_value"]
            else f"   (default {json.dumps(r['default_value'])})"
        )
        click.echo(f"{r['key']:<{width}}  {json.dumps(r['value']):<22} {r['description']}{marker}")


@settings.command()
@click.argument("key")
@json_option
def get(key: str, as_json: bool) -> None:
    """One dial's value."""
    from hag import db  # noqa: PLC0415
    from hag import settings as s  # noqa: PLC0415

    s.dial(key)
    ready()
    with db.connect() as conn:
        value = s.load(conn)[key]
    echo_json({"key": key, "value": value}) if as_json else click.echo(json.dumps(value))


@settings.command("set")
@click.argument("key")
@click.argument("value")
def set_(key: str, value: str) -> None:
    """Change a dial after checking its type and range."""
    from hag import db  # noqa: PLC0415
    from hag import settings as s  # noqa: PLC0415

    s.validate(key, value)
    ready()
    with db.connect() as conn:
        stored = s.set_value(conn, key, value)
        conn.commit()
    click.echo(f"{key} = {json.dumps(stored)}")


@settings.command()
@click.argument("key")
def reset(key: str) -> None:
    """Put a dial back to its registry default."""
    from hag import db  # noqa: PLC0415
    from hag import settings as s  # noqa: PLC0415

    s.dial(key)
    ready()
    with db.connect() as conn:
        stored = s.reset_value(conn, key)
        conn.commit()
    click.echo(f"{key} = {json.dumps(stored)}")


@settings.command()
@click.argument("name", type=click.Choice(["seed", "evidence"]))
@json_option
def profile(name: str, as_json: bool) -> None:
    """Set a whole rule profile in one step (seed: the seed's rules; evidence: issue 14's).

    Prints every dial it changed, with the old and new value (nothing when already set).
    """
    from hag import db  # noqa: PLC0415
    from hag import settings as s  # noqa: PLC0415

    ready()
    with db.connect() as conn:
        changed = s.apply_profile(conn, name)
        conn.commit()
    if as_json:
        echo_json(
            {"profile": name, "changed": [{"key": k, "old": o, "new": n} for k, o, n in changed]}
        )
        return
    if not changed:
        click.echo(f"profile {name}: every dial already set, nothing changed")
        return
    click.echo(f"profile {name}: {len(changed)} dial(s) changed")
    for key, old, new in changed:
        click.echo(f"  {key}: {json.dumps(old)} -> {json.dumps(new)}")
