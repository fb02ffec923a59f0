"""Helpers of the session-end tests: the memory by natural keys, a world of six concepts with
its seeded sessions (concurrency, load, workers), hostile payloads, and the evidence profile
as the earlier rounds measured it."""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from datetime import timedelta

from pgvector import Vector

from hag.storage.sqlfiles import query
from tests.factories import vec
from tests.fix_db import reset_database
from tests.session_builders import T0, payload, turn


def memory(db):
    """Entries and edges by natural keys (new rows get random ids)."""
    keys = {
        r["id"]: (r["concept_slug"], r["visibility_scope"], r["instruction"], r["created_at"])
        for r in db.execute("SELECT * FROM hag_entries").fetchall()
    }
    entries = sorted(
        (
            keys[r["id"]],
            r["maturity"],
            round(r["confidence"], 12),
            r["concept_match_quality"],
            r["success_count"],
            r["failure_count"],
            r["last_matched_at"],
            r["updated_at"],
        )
        for r in db.execute("SELECT * FROM hag_entries").fetchall()
    )
    edges = sorted(
        (
            keys[r["source_entry_id"]],
            keys[r["target_entry_id"]],
            r["edge_type"],
            r["condition"],
            round(r["confidence"], 12),
            r["hit_count"],
            r["source_type"],
            r["source_session_id"],
            r["traversal_count"],
            r["last_traversed_at"],
            r["created_at"],
            r["updated_at"],
        )
        for r in db.execute("SELECT * FROM hag_edges").fetchall()
    )
    return entries, edges


# The lift rule's mechanisms as the earlier rounds measured them: the evidence profile's
# lift values before the sixth round scaled the chance by a concept's reversal share (k 2,
# spread 8, no noise weight) and its negative evidence before the seventh (from 5 reports,
# lowered at 5% support or less), every session counting 1 (issue 29 retired the repeat
# weights). The arithmetic of each mechanism is pinned with these; the units rule, which the
# profile now selects, is pinned in tests/test_evidence_units.py.
EARLIER_ROUNDS = {
    # the lift rule, which the rounds before issue 29 measured (the profile now selects units)
    "prerequisite_confidence_rule": "lift",
    "prerequisite_lift_k": 2.0,
    "prerequisite_lift_chance_spread": 8.0,
    "prerequisite_lift_noise_weight": 0.0,
    "prerequisite_unlearn_min_reports": 5,
    "prerequisite_unlearn_max_share": 0.05,
    # the baseline grading of every edge type, as those rounds measured it (the profile now
    # selects units: leads_to and fallback from sequence evidence, tests/test_sequence_evidence)
    "edge_grading_rule": "baseline",
}


# The evidence profile's lift values as they stood before issue 29 (less the retired repeat
# weights): the tests named for the rounds that adopted these values pin its arithmetic.
LIFT_PROFILE = {
    "prerequisite_confidence_rule": "lift",
    "prerequisite_lift_k": 1.5,
    "prerequisite_lift_chance_spread": 24.0,
    "prerequisite_lift_noise_weight": 20.0,
    "prerequisite_unlearn_min_reports": 3,
    "prerequisite_unlearn_max_share": 0.0,
    "edge_grading_rule": "baseline",
    "reprieve_idle_days": 7,
}


SLUGS = ["rsa", "modular-arithmetic", "primes", "hashing", "signatures", "key-exchange"]


def entry_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=100 + k)


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


# About 18 KB of words that do not compress (an index row holds about 2.7 KB, compressed).
LONG_CONCEPT = " ".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(280))


def queue_unchecked(db, body):
    """Queue a payload the way an older ingest did, with none of today's checks."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    db.execute(
        query("session", "queue_session"),
        {
            "session_id": body["session_id"],
            "learner_id": body["learner_id"],
            "topic_id": body["topic_id"],
            "ended_at": body["ended_at"],
            "payload": text,
            "payload_sha256": hashlib.sha256(text.encode()).hexdigest(),
        },
    )
    db.commit()


def edge_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=900 + k)


SEED_EDGES = [
    (0, 1, "prerequisite", 0.9),
    (0, 2, "prerequisite", 0.4),
    (3, 4, "leads_to", 0.12),
    (4, 5, "related", 0.97),
    (5, 0, "fallback", 0.3),
]
