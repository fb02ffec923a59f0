"""The one pool module: hag/storage/db.py makes both pools, and closing them forgets what was read."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest

from hag import PROJECT_ROOT
from hag.storage import db as hdb


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
