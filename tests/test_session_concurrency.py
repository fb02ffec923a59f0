"""Four workers over 200 sessions that share edges end in the state of serial processing."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

import pytest
from pgvector import Vector

from hag import settings
from hag.session.process import process_pending
from hag.session.queue import apply_pending_session
from hag.session.steps import Caches
from hag.session.summary import ProcessSummary
from tests.factories import vec
from tests.fix_db import reset_database
from tests.session_builders import T0, ingest, payload, turn
from tests.test_session_properties import memory

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

SLUGS = ["rsa", "modular-arithmetic", "primes", "hashing", "signatures", "key-exchange"]


def entry_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=100 + k)


def edge_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=900 + k)


SEED_EDGES = [
    (0, 1, "prerequisite", 0.9),
    (0, 2, "prerequisite", 0.4),
    (3, 4, "leads_to", 0.12),
    (4, 5, "related", 0.97),
    (5, 0, "fallback", 0.3),
]


def build_world(db):
    reset_database(db)
    db.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('cryptography', 'Cryptography')")
    for k, slug in enumerate(SLUGS):
        db.execute(
            "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, confidence, "
            "instruction, embedding, created_at, updated_at) VALUES (%s, 'cryptography', %s, 'public', "
            "%s, 0.5, %s, %s, %s, %s)",
            (
                entry_id(k),
                slug,
                ["candidate", "pattern", "proven"][k % 3],
                f"About {slug}.",
                Vector(vec(0.3, axis=5 + k)),
                T0 - timedelta(days=9),
                T0 - timedelta(days=9),
            ),
        )
    for k, (s, t, kind, c) in enumerate(SEED_EDGES):
        db.execute(
            "INSERT INTO hag_edges (id, source_entry_id, target_entry_id, edge_type, confidence, source_type, "
            "created_at, updated_at) VALUES (%s, %s, %s, %s, %s, 'seed', %s, %s)",
            (
                edge_id(k),
                entry_id(s),
                entry_id(t),
                kind,
                c,
                T0 - timedelta(days=9),
                T0 - timedelta(days=9),
            ),
        )
    db.commit()


def sessions(n: int = 200, seed: int = 7) -> list[dict]:
    """Sessions over six entries: shared decisions, renderings, struggles and observations."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        turns = []
        for t in range(rng.randint(2, 8)):
            decision = rng.choice([None, *range(len(SLUGS))])
            turns.append(
                turn(
                    t,
                    decision=entry_id(decision) if decision is not None else None,
                    used=[entry_id(k) for k in rng.sample(range(len(SLUGS)), rng.randint(0, 3))],
                    rendered=[
                        edge_id(k) for k in rng.sample(range(len(SEED_EDGES)), rng.randint(0, 3))
                    ],
                    outcome=rng.choice(["success", "failure", None]),
                    strength=rng.choice([None, 0.5, 1.0]),
                    struggles=[
                        {
                            "concept_slug": rng.choice(SLUGS),
                            "missing_slug": rng.choice(SLUGS + ["lattices"]),
                            "evidence": "I don't see why",
                        }
                    ]
                    if rng.random() < 0.3
                    else [],
                    observations=[
                        {
                            "graph": rng.choice(["topic", "student", "tutor"]),
                            "concept": rng.choice(
                                ["Lattices", "visual learner", "rsa", "group theory"]
                            ),
                            "text": rng.choice(["Draw it.", "Draw it!", "Use small numbers."]),
                        }
                    ]
                    if rng.random() < 0.3
                    else [],
                )
            )
        out.append(
            payload(
                f"s{i:03d}",
                turns,
                learner=f"l{i % 3}",
                ended_at=T0 + timedelta(minutes=rng.randint(0, 600)),
            )
        )
    return out


def test_four_workers_end_in_the_state_of_serial_processing(db):
    """Concurrent commit order replayed serially gives the same memory; counters add up exactly."""
    batch = sessions()
    build_world(db)
    assert all(r.accepted for r in ingest(db, *batch))
    concurrent = process_pending(batch_size=25, workers=4)
    assert (concurrent.sessions, concurrent.rejects) == (200, 0)
    order = [
        r["session_id"]
        for r in db.execute("SELECT session_id FROM hag_sessions ORDER BY applied_seq").fetchall()
    ]
    parallel_state = memory(db)
    history_rows = db.execute("SELECT count(*) AS n FROM hag_confidence_history").fetchone()["n"]

    # Exact counters, from the payloads alone: one traversal per turn that rendered an edge.
    rendered = sum(len(set(t["rendered_edge_ids"])) for s in batch for t in s["turns"])
    assert db.execute("SELECT sum(traversal_count) AS n FROM hag_edges").fetchone()["n"] == rendered
    successes = sum(
        len({*t["used_entry_ids"], *([t["decision_entry_id"]] if t["decision_entry_id"] else [])})
        for s in batch
        for t in s["turns"]
        if t["outcome"] == "success"
    )
    assert (
        db.execute("SELECT sum(success_count) AS n FROM hag_entries").fetchone()["n"] == successes
    )

    build_world(db)
    assert all(r.accepted for r in ingest(db, *batch))
    summary = ProcessSummary()
    caches = Caches()
    dials = settings.current()
    from hag import db as hdb

    with hdb.pool().connection() as conn:
        for session_id in order:
            assert (
                apply_pending_session(
                    conn, dials, run_id=None, caches=caches, summary=summary, session_id=session_id
                )
                == session_id
            )
    assert memory(db) == parallel_state
    assert (
        db.execute("SELECT count(*) AS n FROM hag_confidence_history").fetchone()["n"]
        == history_rows
    )
    learned = db.execute(
        "SELECT count(*) AS n FROM hag_edges WHERE source_type = 'learned'"
    ).fetchone()["n"]
    assert learned > 5  # the sessions really did share learned edges, not only seed ones
