"""Session-end throughput on a big memory, beside the same sessions on a 30-entry memory.

One embedded PostgreSQL (the settings of bench_retrieval: shared_buffers 3 GB), two
databases in it, measured in the same run, alternately (`HAG_BENCH_WRITES_ROUNDS` rounds):

- *small*: the world of `bench sessions` alone (30 entries, 60 edges, one topic);
- *big*: the same world inside a memory of `HAG_BENCH_WRITES_ROWS` entries (default
  1,000,000) at 1,536 dimensions and as many edges. The filler is loaded by SQL (a pool of
  4,096 distinct unit vectors, bulk INSERT with the triggers off, the search copy filled in
  one statement, the tutor HNSW index built after): the writes never compare vectors, so
  the pool only has to make the rows as wide as real ones (one 1,536-d row fills a page).
  The world's topic is one of the filler's 50 topics (20,000 rows each at 1M).

The server has bench_retrieval's settings with `HAG_BENCH_WRITES_SHARED_BUFFERS` (default
1GB). Each measurement: the world reset, `HAG_BENCH_WRITES_SESSIONS` sessions of 20 turns
ingested, a CHECKPOINT, then `process_pending` on one worker. Printed per run: seconds,
sessions per minute, the server's CPU per session, WAL bytes, records and full-page images
per session (pg_stat_wal and pg_current_wal_lsn), and per table the updates, how many of them
were HOT (pg_stat_user_tables.n_tup_upd / n_tup_hot_upd), the inserts and deletes.

`HAG_BENCH_KEEP_DIR=DIR` keeps the database in DIR/writes-<rows>: the next run finds the
filler loaded and only resets the world (the load takes minutes at 1M).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.figures import record

ROWS = int(os.environ.get("HAG_BENCH_WRITES_ROWS", "1000000"))
SESSIONS = int(os.environ.get("HAG_BENCH_WRITES_SESSIONS", "1000"))
ROUNDS = int(os.environ.get("HAG_BENCH_WRITES_ROUNDS", "2"))
SHARED_BUFFERS = os.environ.get("HAG_BENCH_WRITES_SHARED_BUFFERS", "1GB")
DIM = 1536
POOL = 4096
TOPIC = "cryptography"  # the world's topic (bench_sessions), one of the filler's 50
FILLER_BEFORE = "2026-01-01"  # filler rows are created before this, the world's after

LOAD_ENTRIES = """
INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence,
                         instruction, embedding, success_count, failure_count, created_at,
                         updated_at)
SELECT CASE WHEN i %% 50 = 0 THEN %(topic)s ELSE 't' || lpad((i %% 50)::text, 2, '0') END,
       'c-' || i,
       CASE WHEN i %% 20 = 1 THEN 'tutor' WHEN i %% 10 = 2 THEN 'student:lf' || (i %% 20000)
            ELSE 'public' END,
       (ARRAY['candidate', 'candidate', 'pattern', 'pattern', 'proven'])[1 + (i %% 5)],
       random(), 'filler advice number ' || i, v.embedding,
       (random() * 12)::int, (random() * 4)::int,
       timestamptz '2025-12-01' - random() * interval '300 days', timestamptz '2025-12-01'
FROM generate_series(1, %(n)s) AS i
JOIN bench_vectors v ON v.k = i %% %(pool)s
"""

# Edge i goes from entry i to entry i + 2 + (i mod 1000) (bench_nightly's shape).
LOAD_EDGES = """
INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, hit_count,
                       source_type, traversal_count, created_at, updated_at)
SELECT s.id, t.id, 'related', 0.05 + random() * 0.6, 1,
       (ARRAY['seed', 'learned', 'learned', 'learned', 'enriched'])[1 + (n.i %% 5)],
       CASE WHEN random() < 0.7 THEN 0 ELSE 1 + (random() * 5)::int END, n.at, n.at
FROM (SELECT i, timestamptz '2025-12-01' - random() * interval '300 days' AS at
      FROM generate_series(1, %(n)s) AS i) AS n
JOIN numbered s ON s.n = n.i
JOIN numbered t ON t.n = (n.i + 1 + (n.i %% 1000)) %% %(n)s + 1
"""

# What applied sessions write besides the memory's rows: emptied before each run.
SESSION_TABLES = (
    "hag_edge_audit",
    "hag_confidence_history",
    "hag_session_quarantine",
    "hag_sessions",
    "hag_runs",
    "hag_edge_learner_reports",
    "hag_maturity_history",
    "hag_learner_successes",
)

TABLE_STATS = """
SELECT coalesce(pg_partition_root(relid)::regclass::text, relname::text) AS t,
       sum(n_tup_upd)::bigint AS upd, sum(n_tup_hot_upd)::bigint AS hot,
       sum(n_tup_ins)::bigint AS ins, sum(n_tup_del)::bigint AS del
FROM pg_stat_user_tables GROUP BY 1
"""


def _shared_buffers(server: Any, url: str) -> None:
    """bench_retrieval's server settings, with `SHARED_BUFFERS` (below the 3 GB at which a
    run on the shared machine must hold its big-run lock; the sessions' rows are few)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SHOW shared_buffers").fetchone()[0] == SHARED_BUFFERS:
            return
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{SHARED_BUFFERS}'")
    server.stop()
    server.start()


def _dsn(uri: str, database: str) -> str:
    head, _, tail = uri.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{database}" + (f"?{tail}" if tail else "")


def _use(url: str) -> None:
    from hag import config, retrieval
    from hag.storage import db
    from hag.vectors import embeddings

    os.environ["DATABASE_URL"] = url
    config.reset_config()
    embeddings.reset_embedder()
    db.close_all()
    retrieval.clear_caches()


def load_filler(n: int) -> None:
    """n entries (1,536-d, 50 topics) and n edges, by SQL; the search copy; the tutor index."""
    import numpy as np
    from pgvector import Vector

    from hag.storage import db
    from hag.storage.sqlfiles import query

    started = time.perf_counter()
    rng = np.random.default_rng(20261202)
    pool = rng.standard_normal((POOL, DIM)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    with db.connect() as conn:
        conn.execute(
            "INSERT INTO hag_topics (topic_id, title) SELECT 't' || lpad(g::text, 2, '0'), "
            "'Topic ' || g FROM generate_series(1, 49) g"
        )
        conn.execute(
            "INSERT INTO hag_topics (topic_id, title) VALUES (%s, 'Cryptography')", (TOPIC,)
        )
        conn.execute(
            f"CREATE TEMP TABLE bench_vectors (k int PRIMARY KEY, embedding vector({DIM}))"
        )
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO bench_vectors VALUES (%s, %s)",
                [(k, Vector(pool[k])) for k in range(POOL)],
            )
        conn.execute("DROP INDEX IF EXISTS hag_entries_tutor_ann_idx")  # built after
        conn.execute("SET session_replication_role = replica")  # no history rows, no copy
        conn.execute(LOAD_ENTRIES, {"n": n, "pool": POOL, "topic": TOPIC})
        entries_s = time.perf_counter() - started
        conn.execute(
            "CREATE TEMP TABLE numbered AS "
            "SELECT row_number() OVER (ORDER BY id) AS n, id FROM hag_entries"
        )
        conn.execute("CREATE INDEX ON numbered (n)")
        conn.execute(LOAD_EDGES, {"n": n})
        conn.execute("SET session_replication_role = origin")
        edges_s = time.perf_counter() - started - entries_s
        mark = time.perf_counter()
        conn.execute(query("retrieval", "search_copy_backfill"))
        conn.commit()
        copy_s = time.perf_counter() - mark
    mark = time.perf_counter()
    with db.connect(autocommit=True) as conn:
        conn.execute(
            "CREATE INDEX hag_entries_tutor_ann_idx ON hag_entries USING hnsw "
            "(embedding vector_cosine_ops) WHERE visibility_scope = 'tutor'"
        )
        conn.execute("COMMENT ON INDEX hag_entries_tutor_ann_idx IS 'hag-ann scope:tutor'")
        tutor_s = time.perf_counter() - mark
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")
        sizes = conn.execute(
            "SELECT pg_total_relation_size('hag_entries') AS e, "
            "pg_total_relation_size('hag_edges') AS g, "
            "(SELECT sum(pg_total_relation_size(relid)) "
            " FROM pg_partition_tree('hag_entry_search')) AS s"
        ).fetchone()
    print(
        f"loaded {n:,} entries x {DIM} in {entries_s:.0f} s, {n:,} edges in {edges_s:.0f} s, "
        f"search copy {copy_s:.0f} s, tutor HNSW ({n // 20:,} rows) {tutor_s:.0f} s; "
        f"entries {sizes['e'] / 2**30:.1f} GiB, edges {sizes['g'] / 2**30:.2f} GiB, "
        f"copy {sizes['s'] / 2**30:.1f} GiB; total {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def reset_world(conn: Any, big: bool) -> None:
    """The world of bench_sessions, fresh: in the small database alone, in the big one beside
    the filler (only what an earlier run of the world wrote is deleted)."""
    from bench.bench_sessions import build_world

    conn.execute(f"TRUNCATE {', '.join(SESSION_TABLES)}")
    if not big:
        build_world(conn)
        return
    conn.execute(
        "CREATE TEMP TABLE world_rows ON COMMIT DROP AS "
        "SELECT id FROM hag_entries WHERE topic_id = %(topic)s AND created_at >= %(cut)s "
        "UNION SELECT id FROM hag_entries WHERE visibility_scope LIKE 'student:learner-%%' "
        "UNION SELECT id FROM hag_entries WHERE visibility_scope = 'tutor' "
        "AND created_at >= %(cut)s",
        {"topic": TOPIC, "cut": FILLER_BEFORE},
    )
    conn.execute(
        "DELETE FROM hag_edges WHERE source_entry_id IN (SELECT id FROM world_rows) "
        "OR target_entry_id IN (SELECT id FROM world_rows)"
    )
    conn.execute("DELETE FROM hag_entries WHERE id IN (SELECT id FROM world_rows)")
    conn.execute("DELETE FROM hag_concepts WHERE topic_id = %s", (TOPIC,))
    conn.commit()
    _insert_world(conn)


def _insert_world(conn: Any) -> None:
    """bench_sessions.build_world without its TRUNCATE (the topic exists already)."""
    from bench import bench_sessions

    real = conn.execute

    def execute(statement: Any, params: Any = None) -> Any:
        text = str(statement)
        if text.startswith("TRUNCATE") or text.startswith("INSERT INTO hag_topics"):
            return None
        return real(statement, params)

    class Wrapped:
        def execute(self, statement: Any, params: Any = None) -> Any:
            return execute(statement, params)

        def commit(self) -> None:
            conn.commit()

    bench_sessions.build_world(Wrapped())


def snapshot(conn: Any) -> tuple[dict[str, tuple[int, ...]], tuple[int, int, int]]:
    from bench.bench_sessions import wal_counters

    tables = {r["t"]: (r["upd"], r["hot"], r["ins"], r["del"]) for r in conn.execute(TABLE_STATS)}
    return tables, wal_counters(conn)


def measure(label: str, url: str, server: Any, big: bool) -> dict[str, float]:
    """One run: reset, ingest, checkpoint, then one worker applies every session."""
    from bench.bench_sessions import Sampler, ingest_all, sessions
    from hag.session.process import process_pending
    from hag.storage import db

    _use(url)
    payloads = sessions(SESSIONS)
    with db.connect() as conn:
        reset_world(conn, big)
        ingest_all(conn, payloads)
        conn.execute("CHECKPOINT")
        conn.commit()
    time.sleep(1.1)  # every backend's statistics flushed
    with db.connect(autocommit=True) as conn:
        tables0, wal0 = snapshot(conn)
    load = os.getloadavg()[0]
    with Sampler(url, server.get_pid()) as sampler:
        started = time.perf_counter()
        summary = process_pending(workers=1)
        seconds = time.perf_counter() - started
    db.close_all()  # the worker's backends exit and flush their statistics
    time.sleep(1.1)
    with db.connect(autocommit=True) as conn:
        tables1, wal1 = snapshot(conn)
    assert summary.sessions == SESSIONS, summary
    wal, records, fpi = (a - b for a, b in zip(wal1, wal0, strict=True))
    rate = SESSIONS / seconds * 60
    cpu_ms = 1000 * sampler.server_cpu_seconds / SESSIONS
    print(
        f"  {label:6} {seconds:7.2f} s {rate:8,.0f}/min  server cpu {cpu_ms:5.1f} ms/session  "
        f"WAL {wal / SESSIONS / 1024:6.1f} kB/session ({records / SESSIONS:.0f} records, "
        f"{fpi / SESSIONS:.1f} FPI)  load {load:.1f}->{os.getloadavg()[0]:.1f}",
        flush=True,
    )
    for table in sorted(tables1):
        before = tables0.get(table, (0, 0, 0, 0))
        upd, hot, ins, dele = (a - b for a, b in zip(tables1[table], before, strict=True))
        if upd or ins or dele:
            share = f"{100 * hot / upd:5.1f}% HOT" if upd else "          "
            print(
                f"         {table:34} upd {upd:7,} ({share})  ins {ins:7,}  del {dele:6,}  "
                f"per session: {upd / SESSIONS:5.1f} upd {ins / SESSIONS:5.1f} ins"
            )
    return {"rate": rate, "cpu_ms": cpu_ms, "wal_kb": wal / SESSIONS / 1024}


def main() -> None:
    from bench.bench_retrieval import start_server
    from hag.storage import migrate

    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ["HAG_EMBEDDING_DIM"] = str(DIM)
    os.environ["HAG_EMBEDDING_PROVIDER"] = "offline"
    keep = os.environ.get("HAG_BENCH_KEEP_DIR")
    folder = (
        os.path.join(keep, f"writes-{ROWS}") if keep else tempfile.mkdtemp(prefix="hag-writes-")
    )
    os.makedirs(folder, exist_ok=True)
    loaded = os.path.exists(os.path.join(folder, "loaded"))
    previous = os.environ.get("DATABASE_URL")
    server = start_server(os.path.join(folder, "pgdata"))
    try:
        big_url = str(server.get_uri())
        _shared_buffers(server, big_url)
        small_url = _dsn(big_url, "hag_small")
        import psycopg

        with psycopg.connect(big_url, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = 'hag_small'").fetchone():
                conn.execute("CREATE DATABASE hag_small")
        print(
            f"session-end on a {ROWS:,} + {ROWS:,} memory x {DIM} beside 30 entries: "
            f"{SESSIONS} sessions x 20 turns per run, 1 worker; load average "
            f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
            + (f"; the memory kept in {folder}" if loaded else ""),
            flush=True,
        )
        from hag.storage import db

        for url in (small_url, big_url):
            _use(url)
            with db.connect() as conn:
                migrate.migrate(conn, DIM)
                conn.commit()
        if not loaded:
            _use(big_url)
            load_filler(ROWS)
            if keep:
                Path(folder, "loaded").touch()
        results: dict[str, list[dict[str, float]]] = {"small": [], "big": []}
        for _ in range(ROUNDS):
            results["small"].append(measure("small", small_url, server, big=False))
            results["big"].append(measure("big", big_url, server, big=True))
        best = {k: max(r["rate"] for r in v) for k, v in results.items()}
        ratio = best["small"] / best["big"]
        print(
            f"best of {ROUNDS}: {best['small']:,.0f} sessions/min on 30 entries, "
            f"{best['big']:,.0f} on {ROWS:,} + {ROWS:,}: 30-entry / big = {ratio:.2f}x "
            f"(goal <= 1.5x: {'met' if ratio <= 1.5 else 'NOT met'})",
            flush=True,
        )
        if ROWS == 1_000_000:
            record("writes.sessions_per_min_30", best["small"])
            record("writes.sessions_per_min_1m", best["big"])
            record("writes.wal_kb_per_session_1m", min(r["wal_kb"] for r in results["big"]))
            record("writes.rate_30_over_1m", ratio)
            record("writes.server_cpu_ms_per_session_1m", min(r["cpu_ms"] for r in results["big"]))
    finally:
        from hag.storage import db

        db.close_all()
        server.stop()
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
