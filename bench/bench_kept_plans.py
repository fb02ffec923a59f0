"""A large write on a connection whose first writes were small, beside the same write on a
fresh connection (the baseline, same run, same rows).

PL/pgSQL keeps each static statement's plan per connection, planned for the row counts of an
early call; a statement trigger that joins two sets of its statement's rows (the history's
and the search copy's old and new rows, the kept sums' insert) joined by a nested loop in
every later statement of a connection that began small: quadratic (migration 230, which
plans those joins per call). Three writes of `HAG_BENCH_KEPT_PLANS_ROWS` rows (default
20,000) each, on a private memory of twice as many entries and edges (8-dimension vectors):
entries' confidence, edges' confidence, learner reports inserted; each on a fresh connection,
then on one that first made ten one-row writes of the same kind. The ratio is the price of a
kept plan: about 1 when the joins are planned per call, 54-67 before (migration 229 and
earlier, measured here on 2026-12-07).

Then the other direction: writes of one edge on a connection whose first write covered
`HAG_BENCH_KEPT_PLANS_ROWS` edges, beside the same writes on a fresh connection (median of
`SMALL_WRITES` after five to warm). A statement that reads its statement's rows beside a
table (the reports' and the audit's cascades from a deleted edge, the kept sums' removal)
kept the hash join of its first call and read the whole table for every later small write
(migration 231): an edge deleted, an edge's reports deleted, their share updated, with two
reports per edge in the memory.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

import psycopg
from psycopg.rows import dict_row

from bench.private_db import migrated_server

ROWS = int(os.environ.get("HAG_BENCH_KEPT_PLANS_ROWS", "20000"))
SMALL_WRITES = 10
WARM = 5


def _load(url: str, n: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("SET session_replication_role = replica")  # bulk load: no trigger rows
        conn.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('t', 'T')")
        conn.execute(
            "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity,"
            " confidence, instruction, embedding)"
            " SELECT 't', 'c-' || i, 'public', 'pattern', 0.5, 'advice ' || i,"
            " '[1,0,0,0,0,0,0,0]' FROM generate_series(1, %s) i",
            (2 * n,),
        )
        # (the search copy's insert trigger fires under the replica role too: ENABLE ALWAYS)
        conn.execute(
            "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence,"
            " source_type) SELECT a.id, b.id, 'prerequisite', 0.5, 'learned'"
            " FROM (SELECT id, row_number() OVER (ORDER BY id) r FROM hag_entries) a"
            " JOIN (SELECT id, row_number() OVER (ORDER BY id) r FROM hag_entries) b"
            " ON b.r = a.r %% %s + 1",
            (2 * n,),
        )
        conn.execute("SET session_replication_role = origin")
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def _writes() -> dict[str, Callable[[psycopg.Connection, list, float], None]]:
    def entries(conn, ids, bump):
        conn.execute(
            "UPDATE hag_entries SET confidence = confidence + %s WHERE id = ANY(%s)", (bump, ids)
        )

    def edges(conn, ids, bump):
        conn.execute(
            "UPDATE hag_edges SET confidence = confidence + %s WHERE id = ANY(%s)", (bump, ids)
        )

    def reports(conn, ids, bump):
        conn.execute(
            "INSERT INTO hag_edge_learner_reports"
            " (edge_id, session_id, learner_id, turns, share, reported_at)"
            " SELECT e, 's-' || %s || '-' || e, 'learner-' || abs(hashtext(e::text)) %% 3000,"
            " 1, 1, now() FROM unnest(%s::uuid[]) e",
            (str(bump), ids),
        )

    return {"entries": entries, "edges": edges, "reports": reports}


def _add_reports(url: str) -> None:
    """Two learner reports on every edge (the kept sums' triggers fill their tables)."""
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO hag_edge_learner_reports"
            " (edge_id, session_id, learner_id, turns, share, reported_at)"
            " SELECT e.id, 'r-' || g || '-' || e.id,"
            " 'learner-' || abs(hashtext(e.id::text || g)) % 3000, 1, 1, now()"
            " FROM hag_edges e, generate_series(1, 2) g"
        )
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")


def _small_writes() -> dict[str, Callable[[psycopg.Connection, list], None]]:
    def edge_deleted(conn, ids):
        conn.execute("DELETE FROM hag_edges WHERE id = ANY(%s)", (ids,))

    def reports_deleted(conn, ids):
        conn.execute("DELETE FROM hag_edge_learner_reports WHERE edge_id = ANY(%s)", (ids,))

    def reports_updated(conn, ids):
        conn.execute(
            "UPDATE hag_edge_learner_reports SET share = share * 0.5 WHERE edge_id = ANY(%s)",
            (ids,),
        )

    return {
        "an edge deleted": edge_deleted,
        "an edge's reports deleted": reports_deleted,
        "an edge's reports updated": reports_updated,
    }


def _one_row_ms(url: str, write, ids: list, large_first: bool) -> float:
    """The median milliseconds of writes of one edge, each rolled back, after a first write
    of the same kind over `ROWS` edges (rolled back) or on a fresh connection."""
    with psycopg.connect(url) as conn:
        if large_first:
            write(conn, ids[:ROWS])
            conn.rollback()
        times = []
        for k in range(WARM + SMALL_WRITES):
            one = ids[ROWS + k : ROWS + k + 1]
            start = time.perf_counter()
            write(conn, one)
            times.append(time.perf_counter() - start)
            conn.rollback()
    return statistics.median(times[WARM:]) * 1000


def _timed(url: str, write, ids: list, small: int) -> float:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        for k in range(small):
            write(conn, ids[k : k + 1], 0.0001 * (k + 1))
        start = time.perf_counter()
        write(conn, ids, 0.00005)
        seconds = time.perf_counter() - start
        conn.rollback()
    return seconds


def main() -> None:
    with migrated_server("hag-bench-kept-plans-", dim=8) as (server, _):
        url = str(server.get_uri())
        _load(url, ROWS)
        with psycopg.connect(url) as conn:
            ids = {
                "entries": [r[0] for r in conn.execute(
                    "SELECT id FROM hag_entries ORDER BY id LIMIT %s", (ROWS,))],
                "edges": [r[0] for r in conn.execute(
                    "SELECT id FROM hag_edges ORDER BY id LIMIT %s", (ROWS,))],
            }  # fmt: skip
            every_edge = [r[0] for r in conn.execute("SELECT id FROM hag_edges ORDER BY id")]
        ids["reports"] = ids["edges"]
        for name, write in _writes().items():
            fresh = _timed(url, write, ids[name], 0)
            kept = _timed(url, write, ids[name], SMALL_WRITES)
            print(
                f"{ROWS:,} {name} in one statement: fresh connection {fresh:6.2f} s, after "
                f"{SMALL_WRITES} one-row writes {kept:6.2f} s, ratio {kept / fresh:5.1f}x",
                flush=True,
            )
        _add_reports(url)
        for name, write in _small_writes().items():
            fresh = _one_row_ms(url, write, every_edge, large_first=False)
            kept = _one_row_ms(url, write, every_edge, large_first=True)
            print(
                f"{name}: fresh connection {fresh:6.2f} ms, after a first write "
                f"over {ROWS:,} edges {kept:6.2f} ms, ratio {kept / fresh:5.1f}x",
                flush=True,
            )
