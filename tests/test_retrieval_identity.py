"""Resident sets across databases (migration 125): a database swapped behind the read URL
(a restore, a failover to a differently-aged copy) never answers from sets read before.

Each test builds two memories of one content history, reads one through the read pool until
its topic is resident, swaps the other in behind the same URL (by renaming the databases,
as a restore into a new database and a rename does), and checks every next answer against
the seed's exact query over the database now behind the URL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector import Vector
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from hag import config, settings
from hag.retrieval import resident, store
from hag.storage import db as hdb
from hag.storage import migrate
from tests.fix_db import migrate_up_to

DIM = 8  # migrate_up_to's dimension
SHARED_ROWS = 30
EXTRA_ROWS = 22  # rows only the second memory holds: each is the query of one read
LIVE = "hag_identity_live"


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def insert_rows(conn: Any, rows: list[tuple[uuid.UUID, np.ndarray]]) -> None:
    conn.execute(
        "INSERT INTO hag_topics (topic_id, title) VALUES ('t', 'T') ON CONFLICT DO NOTHING"
    )
    for i, (entry_id, vector) in enumerate(rows):
        conn.execute(
            "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, "
            "confidence, instruction, embedding) VALUES (%s, 't', %s, 'public', 'proven', 0.9, "
            "'Advice.', %s)",
            (entry_id, f"c{i}-{entry_id.hex[:6]}", Vector(vector)),
        )


@pytest.fixture
def memories(database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """`make(name)` creates an empty database; the read path points at LIVE; all dropped."""
    made: list[str] = []

    def admin() -> psycopg.Connection[Any]:
        return psycopg.connect(database_url, autocommit=True)

    def make(name: str, template: str | None = None) -> psycopg.Connection[Any]:
        with admin() as a:
            a.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            a.execute(f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
        made.append(name)
        conn = psycopg.connect(make_conninfo(database_url, dbname=name), row_factory=dict_row)
        hdb.configure_connection(conn)
        return conn

    def swap(other: str) -> None:
        """Put database `other` behind LIVE's name; the old one moves aside."""
        with admin() as a:
            a.execute(f"ALTER DATABASE {LIVE} WITH ALLOW_CONNECTIONS false")
            a.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (LIVE,),
            )
            a.execute(f"ALTER DATABASE {LIVE} RENAME TO {LIVE}_old")
            a.execute(f"ALTER DATABASE {other} RENAME TO {LIVE}")
        made.append(f"{LIVE}_old")
        hdb.read_pool().check()  # the pool replaces its terminated connections; sets stay

    monkeypatch.setenv("HAG_READ_DATABASE_URL", make_conninfo(database_url, dbname=LIVE))
    config.reset_config()
    hdb.close_read_pool()
    yield make, swap, tmp_path
    hdb.close_read_pool()
    monkeypatch.delenv("HAG_READ_DATABASE_URL")
    config.reset_config()
    resident.residents.clear()
    settings.invalidate()
    with admin() as a:
        for name in made:
            a.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def wrong_answers(database_url: str, queries: list[np.ndarray]) -> tuple[int, list[str]]:
    """Read each query through the read pool; how many top-5s differ from the seed's query
    over LIVE as it now is, and the paths that answered."""
    wrong, paths = 0, []
    with psycopg.connect(make_conninfo(database_url, dbname=LIVE), row_factory=dict_row) as c:
        hdb.configure_connection(c)
        current = settings.load(c)
        for q in queries:
            with store.reader() as conn:
                rows, report = store.semantic_pass(
                    conn, "pass", q, "t", ("public",), 5, current, False
                )
            paths.append(report.path)
            seed = [
                r["id"]
                for r in c.execute(
                    "SELECT id FROM match_hag_entries(%s, 't', ARRAY['public'], "
                    "p_match_count => 5)",
                    (Vector(q),),
                ).fetchall()
            ]
            wrong += [r["id"] for r in rows] != seed
            resident.residents.wait()
    return wrong, paths


def hold_live_topic() -> resident.SetKey:
    """Read LIVE's topic 't' into the process's resident sets, through the read pool."""
    resident.residents.clear()
    settings.invalidate()
    with store.reader() as conn:
        current = settings.load(conn)
        key = resident.filter_key("topic", "t", ("public",), store.filters(current))
        assert resident.residents.load(conn, key, current)
    return key


def two_histories(
    make: Callable[..., Any], tmp_path: Path
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """LIVE and 'hag_identity_b', both written before migration 095 and migrated up since:
    the same rows (ids and vectors), and b has EXTRA_ROWS more. The queries: b's extra rows."""
    rng = np.random.default_rng(24)
    shared = [(uuid.uuid4(), unit(rng.standard_normal(DIM))) for _ in range(SHARED_ROWS)]
    extra = [(uuid.uuid4(), unit(rng.standard_normal(DIM))) for _ in range(EXTRA_ROWS)]
    for n, (name, rows) in enumerate(((LIVE, shared), ("hag_identity_b", shared + extra))):
        conn = make(name)
        folder = tmp_path / str(n)
        folder.mkdir()
        migrate_up_to(conn, folder, 95)
        conn.commit()
        hdb.configure_connection(conn)
        insert_rows(conn, rows)
        conn.commit()
        migrate.migrate(conn, DIM)
        conn.commit()
        conn.close()
    return [v for _, v in shared], [v for _, v in extra]


def test_a_memory_swapped_behind_the_read_url_never_answers_from_the_old_sets(
    database_url, memories
):
    """Two memories written before migration 095 with one history but for b's extra rows:
    once b is behind the read URL, every answer is b's (0 of 22 from the old resident set)."""
    make, swap, tmp_path = memories
    _, queries = two_histories(make, tmp_path)
    hold_live_topic()
    swap("hag_identity_b")
    wrong, paths = wrong_answers(database_url, queries)
    assert wrong == 0, f"{wrong} of {len(queries)} answers came from the old database ({paths})"


def test_stamps_start_random_and_the_identity_is_per_database(database_url, memories):
    """Migration 125 leaves no stamp at 0, and a copy of a database (CREATE DATABASE …
    TEMPLATE) has another identity, though its rows, stamps and hag_meta are the same."""
    make, _, tmp_path = memories
    two_histories(make, tmp_path)
    copy = make("hag_identity_copy", template="hag_identity_b")
    stamps, identities = [], []
    for name in ("hag_identity_b", "hag_identity_copy"):
        with psycopg.connect(make_conninfo(database_url, dbname=name)) as c:
            stamps.append(
                c.execute("SELECT sum(changes) FROM hag_entry_search_changes").fetchone()[0]
            )
            identities.append(c.execute("SELECT hag_database_identity()").fetchone()[0])
    copy.close()
    assert stamps[0] == stamps[1] and stamps[0] > 0
    assert identities[0] != identities[1]


def test_a_copy_at_an_equal_stamp_with_other_rows_never_answers_from_the_old_sets(
    database_url, memories
):
    """A copy of LIVE (same system identifier and hag_meta id) given other rows at the very
    same stamp (the change rows put back by hand: a collision) is told apart by its oid."""
    make, swap, tmp_path = memories
    live = make(LIVE)
    migrate.migrate(live, DIM)
    live.commit()
    hdb.configure_connection(live)
    rng = np.random.default_rng(125)
    insert_rows(live, [(uuid.uuid4(), unit(rng.standard_normal(DIM))) for _ in range(SHARED_ROWS)])
    live.commit()
    live.close()
    copy = make("hag_identity_b", template=LIVE)
    before = copy.execute("SELECT * FROM hag_entry_search_changes").fetchall()
    extra = [unit(rng.standard_normal(DIM)) for _ in range(EXTRA_ROWS)]
    insert_rows(copy, [(uuid.uuid4(), v) for v in extra])
    copy.execute("DELETE FROM hag_entry_search_changes")
    for row in before:
        copy.execute(
            "INSERT INTO hag_entry_search_changes (set_key, changes) VALUES (%s, %s)",
            (row["set_key"], row["changes"]),
        )
    copy.commit()
    copy.close()
    hold_live_topic()
    swap("hag_identity_b")
    wrong, paths = wrong_answers(database_url, extra)
    assert wrong == 0, f"{wrong} of {len(extra)} answers came from the old database ({paths})"
