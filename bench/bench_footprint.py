"""Bytes on disk per entry and per edge, at the real embedding sizes: the basis of instance sizing.

Loads `HAG_BENCH_FOOTPRINT_ROWS` entries (default 20,000: 80% topic scope over 50 topics,
10% tutor, 10% student patterns) with random unit-length vectors, and as many edges, into
its own embedded PostgreSQL migrated at 1,536 and at 384 dimensions, then reads the sizes of
the heap, TOAST and every index (the tutor scope's HNSW index included) after VACUUM. Sizes
grow linearly with rows, so docs/scaling.md multiplies these figures out to 1M and 100M.

Run: `python -m bench footprint`.
"""

from __future__ import annotations

import os
import time

ROWS = int(os.environ.get("HAG_BENCH_FOOTPRINT_ROWS", "20000"))
DIMS = (1536, 384)

LOAD_ENTRIES = """
INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity,
                         confidence, instruction, embedding, created_at, updated_at)
SELECT 'topic-' || (i %% 50), 'c-' || i,
       CASE WHEN i %% 10 = 0 THEN 'tutor'
            WHEN i %% 10 = 1 THEN 'student:learner-' || (i %% 5000) ELSE 'public' END,
       (ARRAY['candidate', 'pattern', 'proven'])[1 + (i %% 3)], 0.3 + random() * 0.6,
       'Advice ' || i || ': explain it with one small worked example before the general rule, '
       'then ask the student to try a second example on their own.',
       (SELECT l2_normalize(array_agg(random() - 0.5)::vector)
        FROM generate_series(1, %(dim)s) WHERE i > 0),  -- correlated: one vector per row
       now(), now()
FROM generate_series(1, %(n)s) AS i
"""

LOAD_EDGES = """
INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, source_type,
                       created_at, updated_at)
SELECT s.id, t.id, 'related', 0.5, 'learned', now(), now()
FROM (SELECT row_number() OVER (ORDER BY id) AS n, id FROM hag_entries) AS s
JOIN (SELECT row_number() OVER (ORDER BY id) AS n, id FROM hag_entries) AS t
  ON t.n = (s.n + 1 + (s.n %% 1000)) %% %(n)s + 1
"""

SIZES = """
SELECT pg_relation_size(%(t)s::regclass) AS heap,
       pg_table_size(%(t)s::regclass) - pg_relation_size(%(t)s::regclass) AS toast,
       pg_indexes_size(%(t)s::regclass) AS indexes,
       pg_total_relation_size(%(t)s::regclass) AS total
"""


def measure(dim: int) -> None:
    from bench.private_db import migrated_server
    from hag.storage import db

    with migrated_server("hag-bench-footprint-", dim), db.connect() as conn:
        started = time.perf_counter()
        conn.execute("SET session_replication_role = replica")  # bulk load: no history
        conn.execute(
            "INSERT INTO hag_topics (topic_id, title) "
            "SELECT 'topic-' || i, 'Topic ' || i FROM generate_series(0, 49) i"
        )
        conn.execute(LOAD_ENTRIES, {"n": ROWS, "dim": dim})
        conn.execute(LOAD_EDGES, {"n": ROWS})
        conn.commit()
        loaded = time.perf_counter() - started
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE hag_entries")
        conn.execute("VACUUM ANALYZE hag_edges")
        print(f"  {dim:>5} dims: loaded {ROWS:,} entries + {ROWS:,} edges in {loaded:.1f} s")
        for table, per in (("hag_entries", "entry"), ("hag_edges", "edge")):
            s = conn.execute(SIZES, {"t": table}).fetchone()
            print(
                f"    {table:12} bytes per {per:5}: heap {s['heap'] / ROWS:7,.0f}  "
                f"TOAST {s['toast'] / ROWS:7,.0f}  indexes {s['indexes'] / ROWS:7,.0f}  "
                f"total {s['total'] / ROWS:7,.0f}  (1M: {s['total'] / ROWS / 1000:,.2f} GB)"
            )
        for row in conn.execute(
            "SELECT indexrelid::regclass::text AS name, pg_relation_size(indexrelid) AS bytes "
            "FROM pg_index WHERE indrelid = 'hag_entries'::regclass ORDER BY 2 DESC LIMIT 3"
        ).fetchall():
            print(f"      largest index {row['name']}: {row['bytes'] / ROWS:,.0f} bytes/entry")


def main() -> None:
    previous = os.environ.get("DATABASE_URL")
    print(f"footprint: {ROWS:,} entries and {ROWS:,} edges per dimension, sizes after VACUUM")
    try:
        for dim in DIMS:
            measure(dim)
    finally:
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous


if __name__ == "__main__":
    main()
