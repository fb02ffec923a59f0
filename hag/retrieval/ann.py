"""Per-topic approximate-search indexes: which topics get one, building and dropping them.

A topic whose rows in the topic scopes outnumber the `topic_exact_scan_max_rows` dial gets its own
partial HNSW index (`WHERE topic_id = '<topic>'`); below that an exact scan through the
btree on (topic_id, visibility_scope) is both faster and exact (bench/bench_retrieval.py).
One index per topic, not one global index: a global index under a 2% filter loses rows
(shared/PERF-NOTES.md), and the planner only matches a partial index to a query that names
its topic, which the read path's custom plans do. Topics are data, so these indexes are
built by an operator step after loading (or by the nightly job), never by a migration;
each carries the comment 'hag-ann topic:<topic_id>' by which the read path finds it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from psycopg import sql

from hag import db, settings
from hag.sqlfiles import query


def index_name(topic_id: str) -> str:
    return "hag_entries_ann_" + hashlib.md5(topic_id.encode()).hexdigest()[:16]


def topics_needing_index(conn: Any, dials: Any = None) -> list[str]:
    """Topics whose topic-scope rows exceed the topic_exact_scan_max_rows dial."""
    from hag.retrieval import topic_scopes  # noqa: PLC0415

    dials = dials or settings.load(conn)
    limit = int(dials["topic_exact_scan_max_rows"])
    rows = conn.execute(query("retrieval", "topic_sizes"), {"scopes": topic_scopes(dials)})
    return [r["topic_id"] for r in rows.fetchall() if int(r["n"]) > limit]


def build_topic_indexes(*, concurrently: bool = True, topics: list[str] | None = None) -> list[str]:
    """Build the missing per-topic HNSW indexes; return the topics that have one now.

    CONCURRENTLY (the default) lets sessions keep writing while an index builds.
    """
    with db.connect(autocommit=True) as conn:
        dials = settings.load(conn)
        wanted = topics if topics is not None else topics_needing_index(conn, dials)
        existing = {r["label"] for r in conn.execute(query("retrieval", "ann_indexes"))}
        for topic_id in wanted:
            if f"hag-ann topic:{topic_id}" in existing:
                continue
            name = sql.Identifier(index_name(topic_id))
            conn.execute(
                sql.SQL("DROP INDEX {} {}").format(  # a failed earlier build is invalid
                    sql.SQL("CONCURRENTLY IF EXISTS" if concurrently else "IF EXISTS"), name
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE INDEX {} {} ON hag_entries USING hnsw (embedding vector_cosine_ops) "
                    "WITH (m = {}, ef_construction = {}) WHERE topic_id = {}"
                ).format(
                    sql.SQL("CONCURRENTLY") if concurrently else sql.SQL(""),
                    name,
                    sql.Literal(int(dials["hnsw_m"])),
                    sql.Literal(int(dials["hnsw_ef_construction"])),
                    sql.Literal(topic_id),
                )
            )
            conn.execute(
                sql.SQL("COMMENT ON INDEX {} IS {}").format(
                    name, sql.Literal(f"hag-ann topic:{topic_id}")
                )
            )
        return sorted(
            r["label"].removeprefix("hag-ann topic:")
            for r in conn.execute(query("retrieval", "ann_indexes"))
            if r["label"].startswith("hag-ann topic:")
        )


def drop_topic_indexes() -> int:
    """Drop every per-topic ANN index; return how many were dropped."""
    with db.connect(autocommit=True) as conn:
        rows = conn.execute(query("retrieval", "ann_indexes")).fetchall()
        dropped = 0
        for r in rows:
            if r["label"].startswith("hag-ann topic:"):
                conn.execute(
                    sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(r["index_name"]))
                )
                dropped += 1
        return dropped
