"""A private embedded database for a simulation whose figures must not depend on history.

A simulation's figures are reproducible only from the same starting memory, and a run
changes the memory it runs on; so the demo and the benchmark run on an embedded server of
their own in a folder they empty first, never on the operator's database.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _stop_server_in(pgdata: Path) -> None:
    from hag import db

    if db.running_postmaster(pgdata) is not None:
        db.embedded_server(pgdata).stop()


def _switch(url: str | None) -> None:
    """Point the process (config, pools, caches) at `url` (None: back to the configured one)."""
    from hag import config, db, settings

    if url is None:
        os.environ.pop("DATABASE_URL", None)
    else:
        os.environ["DATABASE_URL"] = url
    config.reset_config()
    db.close_all()  # the read pool too
    settings.invalidate()
    try:
        from hag.retrieval import clear_caches

        clear_caches()
    except ImportError:  # the read path is optional for a database switch
        pass


@contextmanager
def private_database(folder: Path, *, keep_running: bool = False) -> Iterator[str]:
    """An emptied, migrated embedded database in `folder` for the duration of the block.

    The environment's DATABASE_URL is put back afterwards; the server is stopped unless
    `keep_running` (then `DATABASE_URL=<printed url>` reaches it later).
    """
    from hag import db
    from hag.migrate import migrate_database

    folder = Path(folder)
    pgdata = folder / "pgdata"
    _stop_server_in(pgdata)
    if folder.exists():
        shutil.rmtree(folder)
    pgdata.mkdir(parents=True)
    server = db.embedded_server(pgdata)
    previous = os.environ.get("DATABASE_URL")
    url = str(server.get_uri())
    _switch(url)
    try:
        migrate_database()
        yield url
    finally:
        _switch(previous)
        if not keep_running:
            server.stop()
