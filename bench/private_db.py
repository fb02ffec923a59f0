"""A private embedded PostgreSQL for one benchmark: in a temporary folder (never the project's
.hag database), migrated, `DATABASE_URL` pointing at it while the
benchmark runs; stopped and removed after, whatever happens."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def migrated_server(prefix: str, dim: int | None = None) -> Iterator[tuple[Any, Path]]:
    """(the running server, its temporary folder), the schema migrated for `dim`-dimension
    embeddings (default: the configured embedder's)."""
    from hag import config
    from hag.storage import db, migrate
    from hag.vectors import embeddings

    folder = Path(tempfile.mkdtemp(prefix=prefix))
    server = db.embedded_server(folder / "pgdata")
    os.environ["DATABASE_URL"] = str(server.get_uri())
    config.reset_config()
    embeddings.reset_embedder()
    db.close_all()
    try:
        with db.connect() as conn:
            migrate.migrate(conn, dim or embeddings.get_embedder().dim)
        yield server, folder
    finally:
        db.close_all()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
