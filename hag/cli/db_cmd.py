"""`hag db start|stop|status|url` and `hag migrate`."""

from __future__ import annotations

import click

from hag.cli._common import echo_json, json_option, note


@click.group()
def db() -> None:
    """Run the embedded PostgreSQL + pgvector (ignored when DATABASE_URL is set)."""


@db.command()
def start() -> None:
    """Start the embedded server (data in .hag/pgdata) and print its URL.

    With DATABASE_URL set there is nothing to start: the command checks that server answers.
    """
    from hag.storage import db as hdb

    if not hdb.is_embedded():
        hdb.connect().close()  # a server that does not answer is said, never "started"
        note("DATABASE_URL is set: nothing to start")
        click.echo(hdb.database_url())
        return
    click.echo(hdb.start_embedded())


@db.command()
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every embedded server under HAG_DATA_DIR (the default one, the demo's, ...).",
)
def stop(every: bool) -> None:
    """Stop the embedded server: the default one, or the one DATABASE_URL reaches.

    A DATABASE_URL that points at an embedded server's socket folder (as `hag demo
    --keep-running` prints it) stops that server; any other DATABASE_URL is not ours to stop.
    """
    from hag.config import get_config
    from hag.storage import db as hdb

    if every:
        folders = hdb.embedded_data_folders(get_config().data_dir)
        stopped = [f for f in folders if hdb.stop_server_in(f)]
        for folder in stopped:
            click.echo(f"stopped {folder}")
        if not stopped:
            click.echo("not running")
        return
    url = get_config().database_url
    if url is None:
        click.echo("stopped" if hdb.stop_embedded() else "not running")
        return
    pgdata = hdb.embedded_pgdata(url)
    if pgdata is None:
        note("DATABASE_URL names a server hag did not start: nothing to stop")
        return
    click.echo(f"stopped {pgdata}" if hdb.stop_server_in(pgdata) else "not running")


@db.command()
@json_option
def status(as_json: bool) -> None:
    """Say whether the database runs, where, and how far it is migrated."""
    from hag.storage import db as hdb
    from hag.storage.migrate import applied, migrations, stored_dimension
    from hag.vectors import embedder_identity

    st = hdb.status()
    info: dict[str, object] = {
        "embedded": st.embedded,
        "running": st.running,
        "url": st.url,
        "data_dir": st.data_dir,
    }
    if st.running:
        with hdb.connect() as conn:
            ledger = applied(conn)
            info["migrations_applied"] = len(ledger)
            info["migrations_on_disk"] = len(migrations())
            info["embedding_dim"] = stored_dimension(conn)
            held = embedder_identity.held(conn)
            info["embedder"] = held[0].label if held else None
    if as_json:
        echo_json(info)
    else:
        for key, value in info.items():
            click.echo(f"{key}: {value}")


@db.command()
def url() -> None:
    """Print the database URL (starting the embedded server if needed)."""
    from hag.storage import db as hdb

    click.echo(hdb.database_url())


@click.command()
def migrate() -> None:
    """Apply pending migrations, refresh the SQL functions and the settings registry; then
    name, on stderr, the dials the memory took from its rule profile that a release has
    since moved, if any."""
    from hag import settings
    from hag.storage import db as hdb
    from hag.storage.migrate import migrate_database
    from hag.vectors.embeddings import announce

    announce()
    done = migrate_database(verify_embedder=True)
    click.echo(f"applied {len(done)} migration(s)" + (": " + ", ".join(done) if done else ""))
    with hdb.connect() as conn:
        moved = settings.profile_moved(conn)
    if moved is not None:  # a release moved a value the memory took from its profile
        note(moved)
