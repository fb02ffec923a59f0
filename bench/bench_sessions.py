"""Session-end throughput: 1,000 sessions of 20 turns through the flow, beside bare SQL.

The baseline is the same work as bare SQL: the exact statements (and parameters) that the
pipeline sends for each session are recorded once, the database is reset, and they are
replayed one transaction per session with no Python rules, no pydantic and no Prefect.
Then the same sessions go through `process_pending` (no Prefect) and through the
session-end flow (Prefect, warmed up first; the expectation suites are timed apart).

Run: `python -m bench sessions` (a private embedded PostgreSQL in a temporary folder).
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SESSIONS = int(os.environ.get("HAG_BENCH_SESSIONS", "1000"))
TURNS = 20
ENTRIES = 30
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _entry_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=10_000 + k)


def _edge_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=20_000 + k)


def _edges() -> list[tuple[int, int, str]]:
    rng = random.Random(1)
    out: set[tuple[int, int, str]] = set()
    while len(out) < 2 * ENTRIES:
        s, t = rng.sample(range(ENTRIES), 2)
        out.add((s, t, rng.choice(["prerequisite", "leads_to", "related", "fallback"])))
    return sorted(out)


EDGES = _edges()


def build_world(conn: Any) -> None:
    from pgvector import Vector

    from hag.embeddings import embed_texts

    conn.execute(
        "TRUNCATE hag_edge_audit, hag_confidence_history, hag_session_quarantine, hag_sessions, "
        "hag_runs, hag_edges, hag_entries, hag_concepts, hag_topics RESTART IDENTITY CASCADE"
    )
    conn.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('cryptography', 'Cryptography')")
    texts = [
        f"Advice about concept {k}: explain it with a small worked example." for k in range(ENTRIES)
    ]
    vectors = embed_texts(texts)
    for k in range(ENTRIES):
        conn.execute(
            "INSERT INTO hag_concepts (topic_id, slug, title, description, embedding) "
            "VALUES ('cryptography', %s, %s, %s, %s)",
            (f"concept-{k}", f"Concept {k}", texts[k], Vector(vectors[k])),
        )
        conn.execute(
            "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, confidence, "
            "instruction, embedding, created_at, updated_at) VALUES (%s, 'cryptography', %s, 'public', %s, "
            "0.6, %s, %s, %s, %s)",
            (
                _entry_id(k),
                f"concept-{k}",
                ["candidate", "pattern", "proven"][k % 3],
                texts[k],
                Vector(vectors[k]),
                T0 - timedelta(days=30),
                T0 - timedelta(days=30),
            ),
        )
    for k, (s, t, kind) in enumerate(EDGES):
        conn.execute(
            "INSERT INTO hag_edges (id, source_entry_id, target_entry_id, edge_type, confidence, source_type, "
            "created_at, updated_at) VALUES (%s, %s, %s, %s, 0.5, 'seed', %s, %s)",
            (
                _edge_id(k),
                _entry_id(s),
                _entry_id(t),
                kind,
                T0 - timedelta(days=30),
                T0 - timedelta(days=30),
            ),
        )
    conn.commit()


def sessions() -> list[dict[str, Any]]:
    """Realistic-looking sessions: a decision per turn, its edges rendered, some struggles."""
    rng = random.Random(7)
    by_source: dict[int, list[int]] = {}
    for k, (s, _, _) in enumerate(EDGES):
        by_source.setdefault(s, []).append(k)
    out = []
    for i in range(SESSIONS):
        turns = []
        for t in range(TURNS):
            d = rng.randrange(ENTRIES)
            struggles = (
                [
                    {
                        "concept_slug": f"concept-{d}",
                        "missing_slug": f"concept-{rng.randrange(ENTRIES)}",
                        "evidence": "I don't see where that comes from",
                    }
                ]
                if rng.random() < 0.1
                else []
            )
            observations = (
                [
                    {
                        "graph": rng.choice(["topic", "student", "tutor"]),
                        "concept": rng.choice(
                            [f"Concept {rng.randrange(ENTRIES)}", "drift thing", "visual learner"]
                        ),
                        "text": f"Observed in session {i} turn {t}: draw it first.",
                    }
                ]
                if rng.random() < 0.05
                else []
            )
            turns.append(
                {
                    "turn_index": t,
                    "student_message": f"question {t} of session {i}",
                    "concept_slugs": [f"concept-{d}"],
                    "decision_entry_id": str(_entry_id(d)),
                    "used_entry_ids": [str(_entry_id(d)), str(_entry_id(rng.randrange(ENTRIES)))],
                    "rendered_edge_ids": [str(_edge_id(k)) for k in by_source.get(d, [])[:2]],
                    "outcome": rng.choice(["success", "success", "failure", None]),
                    "outcome_strength": rng.choice([None, 0.5, 1.0]),
                    "struggles": struggles,
                    "observations": observations,
                }
            )
        out.append(
            {
                "session_id": f"bench-{i:05d}",
                "learner_id": f"learner-{i % 50}",
                "topic_id": "cryptography",
                "ended_at": (T0 + timedelta(minutes=i)).isoformat(),
                "turns": turns,
            }
        )
    return out


def ingest_all(conn: Any, payloads: list[dict[str, Any]]) -> float:
    from hag.session.ingest import ingest_payload

    start = time.perf_counter()
    for p in payloads:
        assert ingest_payload(conn, p, source="bench").accepted
    conn.commit()
    return time.perf_counter() - start


class Recorder:
    """A connection stand-in that records every statement a session sends, per transaction."""

    def __init__(self, conn: Any):
        self.conn, self.current, self.transactions = conn, [], []

    def execute(self, statement: Any, params: Any = None) -> Any:
        self.current.append((statement, params))
        return self.conn.execute(statement, params)

    def commit(self) -> None:
        self.conn.commit()
        self.transactions.append(self.current)
        self.current = []

    def rollback(self) -> None:
        self.conn.rollback()
        self.current = []


def main() -> None:
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    from hag import config, db, embeddings, migrate, settings
    from hag.session.process import Caches, ProcessSummary, apply_pending_session, process_pending

    folder = tempfile.mkdtemp(prefix="hag-bench-sessions-")
    os.environ.setdefault("PREFECT_HOME", os.path.join(folder, "prefect"))
    server = db.embedded_server(Path(folder) / "pgdata")
    os.environ["DATABASE_URL"] = str(server.get_uri())
    config.reset_config()
    embeddings.reset_embedder()
    db.close_all()
    try:
        with db.connect() as conn:
            migrate.migrate(conn, embeddings.get_embedder().dim)
        payloads = sessions()
        print(
            f"{SESSIONS} sessions x {TURNS} turns; {ENTRIES} entries, {len(EDGES)} seed edges; "
            f"embedder {embeddings.get_embedder().name}"
        )
        with db.connect() as conn:
            build_world(conn)
            ingest_seconds = ingest_all(conn, payloads)
            # Record the exact statements of each session's transaction (untimed).
            recorder = Recorder(conn)
            summary = ProcessSummary()
            caches, dials = Caches(), settings.current()
            while apply_pending_session(
                recorder, dials, run_id=None, caches=caches, summary=summary
            ):
                pass
            trace = recorder.transactions

            build_world(conn)
            ingest_all(conn, payloads)
            start = time.perf_counter()
            for statements in trace:
                for statement, params in statements:
                    conn.execute(statement, params)
                conn.commit()
            bare = time.perf_counter() - start

            build_world(conn)
            ingest_all(conn, payloads)
        direct = process_pending()
        assert direct.sessions == SESSIONS, direct

        from flows.session_end import session_end_flow

        session_end_flow(check=False)  # warm-up: starts the temporary Prefect server
        with db.connect() as conn:
            build_world(conn)
            ingest_all(conn, payloads)
        start = time.perf_counter()
        result = session_end_flow(check=False)
        flow_seconds = time.perf_counter() - start
        assert result["sessions"] == SESSIONS, result
        start = time.perf_counter()
        try:
            import expectations

            expectations.run_all()
            checks = f"{time.perf_counter() - start:.2f} s (once per flow run, not per session)"
        except Exception as exc:  # noqa: BLE001 - a report line, not a failure of the benchmark
            checks = f"not measured ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"

        def rate(seconds: float) -> str:
            return f"{seconds:7.2f} s  {SESSIONS / seconds * 60:9,.0f} sessions/min"

        print(f"  ingest (validate + queue)     {rate(ingest_seconds)}")
        print(f"  bare SQL (same statements)    {rate(bare)}   baseline")
        print(
            f"  process_pending (no Prefect)  {rate(direct.seconds)}   ratio {direct.seconds / bare:.2f}"
        )
        print(
            f"  session-end flow (Prefect)    {rate(flow_seconds)}   ratio {flow_seconds / bare:.2f}"
        )
        print(f"  expectation suites            {checks}")
        steps = ", ".join(f"{k} {v:.2f} s" for k, v in direct.step_seconds.items())
        print(f"  time per step (no Prefect): {steps}")
        print(
            f"  goal: >= 1,000 sessions/min through the flow, ratio <= 2 "
            f"-> {'met' if SESSIONS / flow_seconds * 60 >= 1000 and flow_seconds / bare <= 2 else 'NOT met'}"
        )
    finally:
        db.close_all()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
