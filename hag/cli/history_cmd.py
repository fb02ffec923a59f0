"""`hag history ID` and `hag history --after-session S`."""

from __future__ import annotations

import click

from hag.cli._common import COUNT, echo_json, json_option, note, ready


@click.command()
@click.argument("entity_id", required=False)
@click.option("--after-session", "session_id", help="The whole memory right after this session.")
@click.option(
    "--limit",
    type=COUNT,
    help="With ENTITY_ID: the newest events shown (default: the history_default_limit dial).",
)
@json_option
def history(
    entity_id: str | None, session_id: str | None, limit: int | None, as_json: bool
) -> None:
    """Why an entry or edge has its confidence, or what the memory believed after a session.

    ENTITY_ID is an entry's or edge's id, whole, by a unique prefix, or by the ending the
    listings print. With ENTITY_ID: the newest events of that entry or edge (each confidence change with its
    reason and the session or run that made it, each cull and restore), oldest first, in the
    memory's own time (a session's end, a run's as-of; a restore never before its cull).
    With --after-session: every entry's and edge's confidence, by concept, as it stood right
    after that session was applied.
    """
    from hag import settings as s
    from hag.storage import db, runs
    from hag.storage.history import confidence_history, memory_after_session

    if (entity_id is None) == (session_id is None):
        raise click.UsageError("give exactly one of: an entry/edge id, or --after-session SESSION")
    ready()
    with db.connect() as conn:
        if entity_id is not None:
            shown = limit or s.load(conn).history_default_limit
            rows = confidence_history(conn, entity_id, shown)
            if rows[0]["total"] > len(rows):
                note(f"(the newest {len(rows)} of {rows[0]['total']} events; --limit shows more)")
        else:
            rows = memory_after_session(conn, str(session_id))
    if as_json:
        echo_json(rows)
        return
    if entity_id is not None:
        for r in rows:
            old = "—" if r["old_value"] is None else f"{r['old_value']:.4f}"
            new = "gone" if r["new_value"] is None else f"{r['new_value']:.4f}"
            # The short run id every listing prints, accepted back by `hag audit --run`.
            source = r["session_id"] or runs.short(r["run_id"])
            click.echo(
                f"{r['at']:%Y-%m-%d %H:%M}  {old:>6} -> {new:>6}  {r['reason']}  {source}".rstrip()
            )
    else:
        for r in rows:
            name = f"{r['topic_id']}/{r['name']}" if r["name"] else f"(deleted) {r['entity_id']}"
            click.echo(f"{r['entity_kind']:<5} {r['confidence']:.4f}  {name}")
