"""`hag history ID` and `hag history --after-session S`."""

from __future__ import annotations

import click

from hag.cli._common import echo_json, json_option, ready


@click.command()
@click.argument("entity_id", required=False)
@click.option("--after-session", "session_id", help="The whole memory right after this session.")
@json_option
def history(entity_id: str | None, session_id: str | None, as_json: bool) -> None:
    """Why an entry or edge has its confidence, or what the memory believed after a session.

    With ENTITY_ID: every change of that entry's or edge's confidence, oldest first, with the
    reason, the session or run that made it, and the event time. With --after-session: every
    entry's and edge's confidence as it stood right after that session was applied.
    """
    from hag import db, runs  # noqa: PLC0415
    from hag.history import confidence_history, memory_after_session  # noqa: PLC0415

    if (entity_id is None) == (session_id is None):
        raise click.UsageError("give exactly one of: an entry/edge id, or --after-session SESSION")
    ready()
    with db.connect() as conn:
        rows = (
            confidence_history(conn, entity_id)
            if entity_id is not None
            else memory_after_session(conn, str(session_id))
        )
    if as_json:
        echo_json(rows)
        return
    if entity_id is not None:
        for r in rows:
            old = "—" if r["old_value"] is None else f"{r['old_value']:.4f}"
            # The short run id every listing prints, accepted back by `hag audit --run`.
            source = r["session_id"] or runs.short(r["run_id"])
            click.echo(
                f"{r['at']:%Y-%m-%d %H:%M}  {old:>6} -> {r['new_value']:.4f}  "
                f"{r['reason']}  {source}".rstrip()
            )
    else:
        for r in rows:
            click.echo(f"{r['entity_kind']:<5} {r['entity_id']}  {r['confidence']:.4f}")
