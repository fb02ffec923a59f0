"""The audited cull of learned edges that carry learner reports, at two sizes and beside the
same cull of edges without reports.

A learned edge is culled with the reports of the learners who named it: the cascade deletes
them, the trigger that keeps the evidence sums (migrations 210-221) takes them out of the
sums, and the audit copies them beside the edge's row (migration 220). The nightly bench's
culled edges carry no reports, so this one measures that part: `EDGES` weak, old, learned
prerequisites with `REPORTS` reports each (a learner each), culled by one DELETE as the
nightly's cull does; a quarter of them the same way; and `EDGES` edges of the same shape
without reports. Each DELETE runs in a transaction rolled back, in turn, `ROUNDS` times;
the figures are medians. Linear work gives 4x from the quarter to the whole (a rescan per
culled edge gave 16x, 22 s for 20,000 edges before migration 221).

Run: `python -m bench cull`; `HAG_BENCH_CULL_EDGES` (default 20000) and
`HAG_BENCH_CULL_REPORTS` (default 3) set the sizes.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

EDGES = int(os.environ.get("HAG_BENCH_CULL_EDGES", "20000"))
REPORTS = int(os.environ.get("HAG_BENCH_CULL_REPORTS", "3"))
ROUNDS = 3
CONCEPTS = 400  # 159,600 ordered pairs: room for both sets


def load(conn: Any, dim: int) -> dict[str, list[Any]]:
    """The entries, the reported edges (first `EDGES` pairs) and the bare ones (next
    `EDGES`), the reports; returns the edge ids of each set."""
    conn.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('cull', 'cull')")
    conn.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, confidence, "
        "instruction, embedding) SELECT 'cull', 'c' || g, 'topic', 0.5, 'x', "
        "array_fill(0.1::real, ARRAY[%s])::vector FROM generate_series(1, %s) g",
        (dim, CONCEPTS),
    )
    ids = [r["id"] for r in conn.execute("SELECT id FROM hag_entries ORDER BY concept_slug")]
    pairs = [(a, b) for a in ids for b in ids if a != b][: 2 * EDGES]
    sets: dict[str, list[Any]] = {}
    for name, chunk in (("reported", pairs[:EDGES]), ("bare", pairs[EDGES:])):
        rows = conn.execute(
            "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
            "hit_count, source_type, created_at, updated_at) "
            "SELECT s, t, 'prerequisite', 0.1, %s, 'learned', now() - interval '200 days', "
            "now() - interval '200 days' FROM unnest(%s::uuid[], %s::uuid[]) AS p (s, t) "
            "RETURNING id",
            (REPORTS, [p[0] for p in chunk], [p[1] for p in chunk]),
        ).fetchall()
        sets[name] = [r["id"] for r in rows]
    conn.execute(
        "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, "
        "reported_at) SELECT e, 's' || g || '-' || e, 'learner-' || g, 1, 1, now() "
        "FROM unnest(%s::uuid[]) AS e CROSS JOIN generate_series(1, %s) g",
        (sets["reported"], REPORTS),
    )
    conn.commit()
    conn.execute("ANALYZE")
    conn.commit()
    return sets


def cull(conn: Any, edge_ids: list[Any]) -> float:
    """The audited DELETE of these edges as the nightly's cull runs it, rolled back."""
    conn.execute("SELECT set_config('hag.delete_reason', 'cull', true)")
    start = time.perf_counter()
    conn.execute("DELETE FROM hag_edges WHERE id = ANY (%s::uuid[])", (edge_ids,))
    seconds = time.perf_counter() - start
    conn.rollback()
    return seconds


def measure(conn: Any, sets: dict[str, list[Any]]) -> None:
    from bench.figures import record

    cases = {
        "reported": sets["reported"],
        "quarter": sets["reported"][: EDGES // 4],
        "bare": sets["bare"],
    }
    for ids in cases.values():  # warm
        cull(conn, ids)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for turn in range(ROUNDS):
        order = list(cases) if turn % 2 == 0 else list(reversed(cases))
        for name in order:
            times[name].append(cull(conn, cases[name]))
    med = {k: statistics.median(v) for k, v in times.items()}
    reported = EDGES * REPORTS
    print(f"audited cull of {EDGES:,} edges with {reported:,} reports: {med['reported']:.2f} s")
    print(f"audited cull of {EDGES // 4:,} of them:                {med['quarter']:.2f} s")
    print(f"baseline: {EDGES:,} edges without reports:       {med['bare']:.2f} s")
    growth = med["reported"] / med["quarter"]
    print(f"ratio whole / quarter: {growth:.1f}x (linear work: 4x)")
    print(f"ratio with reports / without: {med['reported'] / med['bare']:.1f}x")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    record("cull.reported_seconds", med["reported"])
    record("cull.whole_over_quarter", growth)


def main() -> None:
    from bench.private_db import migrated_server
    from hag.storage import db
    from hag.vectors import embeddings

    with migrated_server("hag-bench-cull-"), db.connect() as conn:
        measure(conn, load(conn, embeddings.get_embedder().dim))


if __name__ == "__main__":
    main()
