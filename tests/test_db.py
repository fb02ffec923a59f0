"""The one pool module: hag/storage/db.py makes both pools, and closing them forgets what was read."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from hag import PROJECT_ROOT
from hag.storage import db as hdb
from hag.storage.db import one


def test_only_hag_db_makes_connection_pools():
    """No module but hag/storage/db.py constructs a psycopg pool (connections are made in one place)."""
    makers = [
        str(path.relative_to(PROJECT_ROOT))
        for folder in ("hag", "tasks", "flows", "expectations")
        for path in (PROJECT_ROOT / folder).rglob("*.py")
        if re.search(r"\bConnectionPool\(", path.read_text())
    ]
    assert makers == ["hag/storage/db.py"]


def test_both_pools_hand_out_dict_rows_and_the_read_pool_refuses_writes(db: Any):
    """Writers and readers get dict rows; a reader's connection is read-only at the server."""
    with hdb.pool().connection() as writer:
        assert writer.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    with hdb.read_pool().connection() as reader:
        assert reader.execute("SELECT 2 AS two").fetchone() == {"two": 2}
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            reader.execute("CREATE TEMP TABLE nope (x int)")


def test_closing_the_pools_closes_the_read_pool_and_calls_its_forget_hooks(
    db: Any, monkeypatch: pytest.MonkeyPatch
):
    """close_all closes the read pool too and calls every hook once; the next read opens anew."""
    monkeypatch.setattr(hdb, "_read_pool_closed", list(hdb._read_pool_closed))
    calls: list[str] = []

    def forget() -> None:
        calls.append("forgot")

    hdb.on_read_pool_closed(forget)
    hdb.on_read_pool_closed(forget)  # registered once only
    before = hdb.read_pool()
    hdb.close_all()
    assert before.closed and calls == ["forgot"]
    after = hdb.read_pool()
    assert after is not before and not after.closed
    with after.connection() as reader:
        assert reader.execute("SELECT 3 AS three").fetchone() == {"three": 3}


def test_pool_connections_opened_before_the_first_migrate_learn_the_vector_type(
    fresh: Any, database_url: str, monkeypatch: pytest.MonkeyPatch
):
    """A service started before `hag migrate`: both pools' connections, opened while the
    extension did not exist, read and write vectors as soon as migrate has made it."""
    import numpy as np
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from hag import config
    from hag.storage import migrate

    url = make_conninfo(database_url, dbname=conninfo_to_dict(fresh.info.dsn)["dbname"])
    monkeypatch.setenv("DATABASE_URL", url)
    config.reset_config()
    hdb.close_all()
    try:
        writers, readers = hdb.pool(), hdb.read_pool()
        writers.wait()
        readers.wait()  # every connection either keeps is open before the extension exists
        opened = {
            source.name: source.get_stats()["connections_num"] for source in (writers, readers)
        }
        with hdb.connect() as conn:
            migrate.migrate(conn, 3)
        given = np.array([1.0, 2.0, 3.0], dtype=np.float32)
        for source in (writers, readers):
            with source.connection() as conn:
                row = conn.execute("SELECT %s::vector AS v, '[4,5,6]'::vector AS w", [given])
                got = one(row.fetchone())
                # pgvector's own type, not the text a connection without the adapter reads
                assert [got[k].to_list() for k in ("v", "w")] == [[1, 2, 3], [4, 5, 6]]
            # the connection was one opened before migrate, not a new one
            assert source.get_stats()["connections_num"] == opened[source.name]
    finally:
        hdb.close_all()
        monkeypatch.undo()
        config.reset_config()


def test_connections_keep_tcp_alive_unless_the_url_says(db: Any, monkeypatch: pytest.MonkeyPatch):
    """HAG_DATABASE_KEEPALIVE_SECONDS reaches libpq on every connection the project makes (a
    third of it between probes, three probes); a keepalives parameter in the URL, or 0,
    leaves libpq's own."""
    from psycopg.conninfo import make_conninfo

    from hag import config

    monkeypatch.setenv("HAG_DATABASE_KEEPALIVE_SECONDS", "45")
    config.reset_config()
    hdb.close_all()
    url = hdb.database_url()
    keys = (
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "tcp_user_timeout",
    )
    try:
        with hdb.connect() as direct, hdb.pool().connection() as pooled:
            for conn in (direct, pooled):
                given = conn.info.get_parameters()
                assert [given.get(k) for k in keys] == ["1", "45", "15", "3", "90000"]
        assert not set(keys) & set(hdb.connection_kwargs(url=make_conninfo(url, keepalives=0)))
        monkeypatch.setenv("HAG_DATABASE_KEEPALIVE_SECONDS", "0")
        config.reset_config()
        assert not set(keys) & set(hdb.connection_kwargs(url=url))
    finally:
        hdb.close_all()
        monkeypatch.undo()
        config.reset_config()
