"""The erasure of one learner with 1,000 sessions in a demo-sized memory (issue 25: < 10 s).

Its own embedded PostgreSQL in a temporary folder: the demo corpus, then the demo's volume of
sessions (2,500 by 60 other learners) and 1,000 sessions by the learner to erase, every one
ingested and applied by session-end (struggles with quoted evidence, so prerequisite reports
attributed to learners; student observations, so private entries; successes). Then, timed:
the export of that learner, the dry run (the same work, rolled back), and the erasure itself
(one transaction). Baseline, same run, same rows: a bare `DELETE FROM hag_sessions WHERE
learner_id = ...` rolled back (no pseudonyms, no private rows, no record), so the ratio is
the price of everything else the erasure does. `HAG_BENCH_PRIVACY_SESSIONS` scales it.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SESSIONS = int(os.environ.get("HAG_BENCH_PRIVACY_SESSIONS", "1000"))
OTHERS = SESSIONS * 5 // 2  # the demo's 2,500 beside 1,000
OTHER_LEARNERS = 60
TARGET_SECONDS = 10.0
LEARNER = "bench.learner"
T0 = datetime(2026, 6, 1, tzinfo=UTC)


def _payload(rng: random.Random, n: int, learner: str, concepts: list[tuple[str, str]]) -> dict:
    topic = concepts[0][0]
    slugs = [s for t, s in concepts if t == topic]
    turns = []
    for i in range(5):
        a, b = rng.sample(slugs, 2)
        failed = rng.random() < 0.3
        turns.append(
            {
                "turn_index": i,
                "student_message": f"{learner} message {n}.{i}: why does {a} need {b}?",
                "concept_slugs": [a],
                "outcome": "failure" if failed else "success",
                "struggles": (
                    [{"concept_slug": a, "missing_slug": b, "evidence": f"{learner} {n}.{i}"}]
                    if failed
                    else []
                ),
                "observations": (
                    [{"graph": "student", "concept": a, "text": f"gets {a} from examples"}]
                    if rng.random() < 0.1
                    else []
                ),
            }
        )
    return {
        "session_id": f"{learner}-{n}",
        "learner_id": learner,
        "topic_id": topic,
        "ended_at": (T0 + timedelta(minutes=n)).isoformat(),
        "turns": turns,
    }


def build(conn: Any) -> float:
    """The demo corpus and every session, applied; the seconds it took."""
    from hag.operations.corpus import DEMO_CORPUS, load_file
    from hag.session.ingest import ingest_payload
    from hag.session.process import process_pending

    started = time.perf_counter()
    load_file(DEMO_CORPUS)
    corpus = json.loads(DEMO_CORPUS.read_text())
    concepts = [
        (c["topic_id"], c["slug"]) for c in corpus["concepts"] if c["topic_id"] == "cryptography"
    ]
    rng = random.Random(7)
    payloads = [_payload(rng, n, LEARNER, concepts) for n in range(SESSIONS)] + [
        _payload(rng, SESSIONS + n, f"learner-{n % OTHER_LEARNERS}", concepts)
        for n in range(OTHERS)
    ]
    rng.shuffle(payloads)
    for p in payloads:
        result = ingest_payload(conn, p, source="bench")
        assert result.accepted, result
    conn.commit()
    process_pending(batch_size=500)
    return time.perf_counter() - started


def main() -> None:
    from hag.operations import privacy
    from hag.storage import db
    from hag_lab.simulate.sandbox import private_database

    folder = Path(tempfile.mkdtemp(prefix="hag-bench-privacy-"))
    try:
        with private_database(folder / "db"), db.connect() as conn:
            built = build(conn)
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM hag_sessions) AS sessions,"
                " (SELECT count(*) FROM hag_entries) AS entries,"
                " (SELECT count(*) FROM hag_edges) AS edges,"
                " (SELECT count(*) FROM hag_edge_learner_reports) AS reports,"
                " (SELECT count(*) FROM hag_confidence_history) AS history"
            ).fetchone()
            conn.rollback()
            print(
                f"memory: {counts['sessions']} sessions, {counts['entries']} entries, "
                f"{counts['edges']} edges, {counts['reports']} reports, "
                f"{counts['history']} history rows (built and applied in {built:.1f} s)"
            )

            started = time.perf_counter()
            conn.execute(
                "DELETE FROM hag_sessions WHERE learner_id = %(learner)s", {"learner": LEARNER}
            )
            conn.rollback()
            baseline = time.perf_counter() - started

            started = time.perf_counter()
            exported = privacy.export_learner(LEARNER, folder / "export.jsonl", conn=conn)
            export_s = time.perf_counter() - started
            started = time.perf_counter()
            dry = privacy.erase_learner(LEARNER, dry_run=True, conn=conn)
            dry_s = time.perf_counter() - started
            started = time.perf_counter()
            real = privacy.erase_learner(LEARNER, operator="bench", conn=conn)
            erase_s = time.perf_counter() - started
            assert real.counts == dry.counts
            assert real.counts["hag_sessions"]["deleted"] == SESSIONS
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    size = (sum(exported.counts.values()), Path(exported.path).name)
    print(f"export: {size[0]} rows in {export_s:.2f} s")
    print(f"dry run: {dry_s:.2f} s")
    print(
        f"erasure of {SESSIONS} sessions: {erase_s:.2f} s (goal < {TARGET_SECONDS:.0f} s: "
        f"{'met' if erase_s < TARGET_SECONDS else 'MISSED'}); baseline bare DELETE of the "
        f"sessions {baseline:.3f} s, ratio {erase_s / baseline:.0f}x"
    )
    for line in real.lines():
        print(f"  {line}")


if __name__ == "__main__":
    main()
