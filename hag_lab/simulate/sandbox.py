"""A private embedded database for a simulation whose figures must not depend on history.

A simulation's figures are reproducible only from the same starting memory, and a run
changes the memory it runs on; so the demo and the benchmark run on an embedded server of
their own in a folder they empty first, never on the operator's database: a folder they
did not make (no marker file) is refused, never cleared.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hag.errors import FolderError

# Written into every folder hag makes to clear again later (a simulation's OUT, a private
# database's folder): only a folder carrying it, or an empty one, is ever cleared.
MARKER = ".made-by-hag"


def claim_folder(folder: Path, what: str) -> Path:
    """`folder`, made ours: created with the marker, or taken when it is empty or already
    carries it. A folder with other files (an operator's database, a report folder of
    theirs) is refused and left untouched (FolderError, one line)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise FolderError(f"{what} {folder} is a file, not a folder")
    if folder.is_dir() and not (folder / MARKER).is_file() and any(folder.iterdir()):
        raise FolderError(
            f"{what} {folder} is not empty and hag did not make it (no {MARKER}): "
            "choose a new or empty folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text("made by hag: hag may clear what it wrote here\n")
    return folder


def _stop_server_in(pgdata: Path) -> None:
    from hag.storage import db

    if db.running_postmaster(pgdata) is not None:
        db.embedded_server(pgdata).stop()


def _switch(url: str | None) -> None:
    """Point the process (config, pools, caches) at `url` (None: back to the configured one)."""
    from hag import config, settings
    from hag.storage import db

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
def private_database(
    folder: Path, *, keep_running: bool = False, drop: bool = False
) -> Iterator[str]:
    """An emptied, migrated embedded database in `folder` for the duration of the block.

    `folder` must be new, empty, or one this function made before (claim_folder): only then
    is its database stopped and cleared.

    The environment's DATABASE_URL is put back afterwards; the server is stopped unless
    `keep_running` (then `DATABASE_URL=<printed url>` reaches it later). With `drop` the
    stopped server's folder is removed as well once the block has finished (a run that keeps
    only its report); a block that raised leaves it.
    """
    if drop and keep_running:
        raise ValueError("a private database cannot be both kept running and dropped")
    from hag.storage import db
    from hag.storage.migrate import migrate_database

    folder = claim_folder(folder, "database folder")
    pgdata = folder / "pgdata"
    _stop_server_in(pgdata)  # a server of an earlier run of ours
    if pgdata.exists():
        shutil.rmtree(pgdata)
    pgdata.mkdir()
    server = db.embedded_server(pgdata)
    previous = os.environ.get("DATABASE_URL")
    url = str(server.get_uri())
    _switch(url)
    finished = False
    try:
        migrate_database()
        yield url
        finished = True
    finally:
        _switch(previous)
        if not keep_running:
            server.stop()
    if drop and finished:  # a run that failed keeps its database, to be read
        shutil.rmtree(folder)
