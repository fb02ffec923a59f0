"""Per-topic approximate-search indexes: which topics get one, building and dropping them.

A topic whose rows in the topic scopes outnumber the `topic_exact_scan_max_rows` dial gets
its own partial HNSW index (`WHERE topic_id = '<topic>'`); below that an exact scan through
the btree on (topic_id, visibility_scope, maturity, confidence) is exact and, measured, about
as fast or faster (bench/bench_retrieval.py, docs/retrieval.md).
One index per topic, not one global index: a global index under a 2% filter loses rows
(the graph is searched first and filtered after), and the planner only matches a partial index to a query that names
its topic, which the read path's custom plans do. Topics are data, so these indexes are
built by an operator step after loading or by the nightly job, never by a migration;
each carries the comment 'hag-ann topic:<topic_id>' by which the read path finds it.
The nightly run also puts the search copy (migration 080) back in read order
(`cluster_search_copy`) and folds its recorded changes (migration 095,
`fold_search_changes`), through `nightly_upkeep`.
"""

from __future__ import annotations

import hashlib
import logging

import psycopg
from psycopg import sql

from hag import settings
from hag.settings import Settings
from hag.storage import db
from hag.storage.db import Conn
from hag.storage.sqlfiles import query

log = logging.getLogger("hag.retrieval.ann")


def index_name(topic_id: str) -> str:
    return "hag_entries_ann_" + hashlib.md5(topic_id.encode()).hexdigest()[:16]


def topics_needing_index(conn: Conn, dials: Settings | None = None) -> list[str]:
    """Topics whose topic-scope rows exceed the topic_exact_scan_max_rows dial."""
    from hag.retrieval import topic_scopes

    dials = dials or settings.load(conn)
    limit = dials.topic_exact_scan_max_rows
    rows = conn.execute(query("retrieval", "topic_sizes"), {"scopes": topic_scopes(dials)})
    return [r["topic_id"] for r in rows.fetchall() if int(r["n"]) > limit]


HNSW_MAX_DIMENSIONS = 2000  # pgvector 0.8: an HNSW index over `vector` stops here


def build_topic_indexes(
    *, concurrently: bool = True, topics: list[str] | None = None, strict: bool = True
) -> list[str]:
    """Build the missing per-topic HNSW indexes; return the topics that have one now.

    CONCURRENTLY (the default) lets sessions keep writing while an index builds; it waits
    for transactions open when it starts, at most `ann_build_lock_timeout_seconds` per wait.
    With `strict` False (the nightly run) a topic whose build fails is logged and skipped,
    so one blocked build never fails the night; its invalid index is dropped on the next
    try. Above 2,000 dimensions no index is built: every pass scans exactly. The build
    needs a session of its own (db.connect(session=True)): behind a transaction-mode pooler
    without a direct URL it is refused, or with `strict` False skipped with a warning.
    """
    if _no_session("building search indexes", strict):
        return []
    with db.connect(autocommit=True, session=True) as conn:
        dials = settings.load(conn)
        meta = conn.execute("SELECT value::integer AS d FROM hag_meta WHERE key = 'embedding_dim'")
        dim = meta.fetchone()
        if dim is not None and int(dim["d"]) > HNSW_MAX_DIMENSIONS:
            return []
        _maintenance_session(conn, dials.ann_build_lock_timeout_seconds, dials.ann_build_memory_mb)
        wanted = topics if topics is not None else topics_needing_index(conn, dials)
        existing = {r["label"] for r in conn.execute(query("retrieval", "ann_indexes"))}
        for topic_id in wanted:
            if f"hag-ann topic:{topic_id}" in existing:
                continue
            try:
                _build(conn, topic_id, dials, concurrently)
            except psycopg.Error as e:
                if strict:
                    raise
                log.warning("no search index for topic %r this time: %s", topic_id, e)
        return sorted(
            r["label"].removeprefix("hag-ann topic:")
            for r in conn.execute(query("retrieval", "ann_indexes"))
            if r["label"].startswith("hag-ann topic:")
        )


def _build(conn: Conn, topic_id: str, dials: Settings, concurrently: bool) -> None:
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
            sql.Literal(dials.hnsw_m),
            sql.Literal(dials.hnsw_ef_construction),
            sql.Literal(topic_id),
        )
    )
    conn.execute(
        sql.SQL("COMMENT ON INDEX {} IS {}").format(name, sql.Literal(f"hag-ann topic:{topic_id}"))
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


def _maintenance_session(conn: Conn, lock_timeout_seconds: int, memory_mb: int) -> None:
    """A maintenance statement on `conn` waits at most this long for its lock, with this much
    maintenance_work_mem (an index build, a CLUSTER)."""
    conn.execute(
        "SELECT set_config('lock_timeout', %s, false), "
        "set_config('maintenance_work_mem', %s, false)",
        (f"{lock_timeout_seconds}s", f"{memory_mb}MB"),
    )


def cluster_search_copy(*, strict: bool = True) -> list[str]:
    """Rewrite each large partition of the search copy in the order its passes read it.

    The copy's triggers append rows as writes come, so one topic's rows end up spread over
    its partition among the other topics' (and the ineligible) rows; CLUSTER puts a topic's
    eligible rows on consecutive pages (the tutor partition: by maturity and confidence),
    halving the pages a 1M topic pass visits (docs/retrieval.md). A partition with no more
    rows than `search_copy_cluster_min_rows` is left as it is. CLUSTER locks its partition
    for the rewrite (reads of it wait), so it waits at most
    `search_copy_cluster_lock_timeout_seconds` for the lock; with `strict` False (the
    nightly run) a partition it could not lock is logged and tried again the next night.
    Returns the partitions clustered. Needs a session of its own, as the index builds do.
    """
    if _no_session("clustering the search copy", strict):
        return []
    with db.connect(autocommit=True, session=True) as conn:
        dials = settings.load(conn)
        _maintenance_session(
            conn, dials.search_copy_cluster_lock_timeout_seconds, dials.ann_build_memory_mb
        )
        smallest = dials.search_copy_cluster_min_rows
        done = []
        for part in conn.execute(query("retrieval", "search_copy_partitions")).fetchall():
            if float(part["rows"]) <= smallest or part["index_name"] is None:
                continue
            try:
                conn.execute(
                    sql.SQL("CLUSTER {} USING {}").format(
                        sql.Identifier(part["partition"]), sql.Identifier(part["index_name"])
                    )
                )
            except psycopg.Error as e:
                if strict:
                    raise
                log.warning("search copy %s not clustered this time: %s", part["partition"], e)
                continue
            done.append(part["partition"])
        for name in done:  # the planner's page counts and the rows' order (correlation) changed
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(name)))
        log.info("search copy clustered: %s", ", ".join(done) or "none")
        return done


def fold_search_changes() -> int:
    """Fold each set's recorded changes (migration 095) into one row; the rows left.

    Every set's stamp (the sum) is the same before and after, in one statement, so resident
    sets stay valid and the readers' stamp lookups stay a few index entries long.
    """
    with db.connect(autocommit=True) as conn:
        folded = conn.execute(query("retrieval", "search_changes_fold")).rowcount
        log.info("search copy changes folded into %s rows", folded)
        return folded


def nightly_upkeep() -> list[str]:
    """The read path's share of the nightly run: the per-topic indexes a grown topic needs,
    the search copy put back in read order, its recorded changes folded; returns the topics
    that have an index."""
    built = build_topic_indexes(concurrently=True, strict=False)
    cluster_search_copy(strict=False)
    fold_search_changes()
    return built


def _no_session(what: str, strict: bool) -> bool:
    """True when `what` must be skipped: it needs a session of its own and none is configured
    (a transaction-mode pooler, no HAG_DIRECT_DATABASE_URL). Logged for the nightly run
    (`strict` False); refused in one line otherwise (db.connect)."""
    if strict or db.session_url() is not None:
        return False
    log.warning(
        "%s skipped: behind a transaction-mode pooler it needs HAG_DIRECT_DATABASE_URL "
        "(a direct connection to the database)",
        what,
    )
    return True
