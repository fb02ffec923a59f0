"""Enrichment: does the prompt, and the time per orphan, stay flat as a topic grows?

One orphan in a topic of 50 concepts (the baseline) and of 5,000, on a private embedded
database, offline proposer, dry run (the full select → prompt → propose → validate path,
no writes). Printed: the prompt's characters and candidates, and the milliseconds per
orphan, each beside the baseline with the ratio. The prompt must not grow (ratio ~1.00x);
the time grows only with the exact candidate scan.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

SIZES = (50, 5000)
REPEATS = 5


def _topic(conn, n: int) -> None:
    conn.execute("TRUNCATE hag_edges, hag_entries, hag_concepts, hag_topics CASCADE")
    conn.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('big', 'Big topic')")
    # n - 1 wired concepts at cosine 0.2 (tilted to distinct axes) and one orphan on axis 0.
    conn.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence, "
        "instruction, embedding) "
        "SELECT 'big', 'concept-' || lpad(g::text, 5, '0'), 'public', 'pattern', 0.8, "
        "'Teach concept ' || g || ' with a worked example and a check question.', "
        "(SELECT array_agg(CASE WHEN i = 1 THEN 0.2 WHEN i = 3 + g %% 1500 THEN sqrt(0.96) "
        "ELSE 0 END ORDER BY i) FROM generate_series(1, 1536) i)::vector "
        "FROM generate_series(1, %s) g",
        (n - 1,),
    )
    conn.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, source_type) "
        "SELECT e.id, h.id, 'related', 0.8, 'seed' FROM hag_entries e, "
        "(SELECT id FROM hag_entries ORDER BY concept_slug LIMIT 1) h WHERE e.id <> h.id"
    )
    conn.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence, "
        "instruction, embedding) SELECT 'big', 'the-orphan', 'public', 'pattern', 0.8, "
        "'Teach the orphan.', (SELECT array_agg(CASE WHEN i = 1 THEN 1 ELSE 0 END ORDER BY i) "
        "FROM generate_series(1, 1536) i)::vector"
    )
    conn.commit()


def main() -> None:
    from hag.enrichment import enrich
    from hag.storage import db
    from hag_lab.simulate.sandbox import private_database

    figures = {}
    with (
        tempfile.TemporaryDirectory(prefix="hag-bench-enrichment-") as tmp,
        private_database(Path(tmp) / "db"),
        db.connect() as conn,
    ):
        for n in SIZES:
            _topic(conn, n)
            best = float("inf")
            for _ in range(REPEATS):
                started = time.perf_counter()
                summary = enrich(topic="big", dry_run=True, conn=conn)
                best = min(best, time.perf_counter() - started)
            [orphan] = summary.orphans
            figures[n] = (orphan.prompt_chars, orphan.candidates, best * 1000)
    base = figures[SIZES[0]]
    for n, (chars, cands, ms) in figures.items():
        print(
            f"{n:>5} concepts: prompt {chars} chars ({chars / base[0]:.2f}x), {cands} candidates, "
            f"{ms:.1f} ms per orphan ({ms / base[2]:.2f}x)  [baseline: {SIZES[0]} concepts]"
        )
