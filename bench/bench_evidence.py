"""Session-end under the evidence profile, on a topic with 10k and with 1M past sessions.

The re-weigh reads sums kept when reports are written (migrations 210, 213 and 221: per
edge, per (edge, learner), and the learners per concept of its prerequisites), not every
past report, so its cost should not grow with a topic's history. Two topics of the same
shape share one private embedded database: one carries `PAST[0]` past sessions, the other
`PAST[1]`, by the same `LEARNERS` learners over the same pairs. The history is synthetic and
loaded set-based in SQL (sessions, reports, the sums by the migrations' own grouping, and
what each past session's learner succeeded on, which the contradiction lookup probes; the
row triggers are off for the load only). Each past session also made one unprompted move
along the topic's `leads_to` and `fallback` edges (`MOVES`: the moves the new sessions make,
a few along authored lines), so the sequence re-weigh reads a history of moves as large as
the prerequisites' (its pool is every sequence edge of the topic, its sums kept per edge and
learner). It is loaded as the forward rule would have left it: out of a concept the history
succeeds on (the first `SHOWN`) stand only the reports each learner's first session made
naming another of them (answered: the learner showed their targets), since its next session
would have withdrawn any other, and the new sessions succeed on those concepts only, as the
history does. Each new success then reads its learner's answered reports and the learner's
successes since its first session: ten sessions at 10k, a thousand at 1M. A history whose
reports no success had read would have the first new success per learner and concept
withdraw that learner's whole record there, a hundred times larger at 1M. The learned edges'
confidences are then re-weighed once, and batches of `SESSIONS` new sessions per topic go
through `process_pending` in the order A B B A A B B A, with the load average printed beside
every batch. The figure: sessions per minute on each topic and their ratio (the goal: at
most 1.5).

Run: `python -m bench evidence`; `HAG_BENCH_EVIDENCE_PAST=10000,1000000` and
`HAG_BENCH_EVIDENCE_SESSIONS` (new sessions per batch, default 100) set the sizes.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

PAST = tuple(int(x) for x in os.environ.get("HAG_BENCH_EVIDENCE_PAST", "10000,1000000").split(","))
SESSIONS = int(os.environ.get("HAG_BENCH_EVIDENCE_SESSIONS", "100"))
CONCEPTS = 30
LEARNERS = 1000
TURNS = 10
SHOWN = 5  # every past learner succeeded on concepts 0-4 (the contradiction lookup's hits)
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _topic(past: int) -> str:
    return f"history-{past}"


def _entry_id(topic: int, k: int) -> uuid.UUID:
    return uuid.UUID(int=(topic + 1) * 1_000_000 + k)


def _pairs() -> list[tuple[int, int, str]]:
    """The topic's prerequisites (source builds on target): 30 authored ones down a layered
    order, and 60 pairs its past sessions reported (the authored ones among them)."""
    rng = random.Random(3)
    authored = {(k, rng.randrange(k)) for k in range(1, CONCEPTS)}
    while len(authored) < 30:
        s = rng.randrange(1, CONCEPTS)
        authored.add((s, rng.randrange(s)))
    learned: set[tuple[int, int]] = set()
    while len(learned) < 30:
        s, t = rng.sample(range(CONCEPTS), 2)
        if (s, t) not in authored and (t, s) not in authored:
            learned.add((s, t))
    return sorted((s, t, "seed") for s, t in authored) + sorted(
        (s, t, "learned") for s, t in learned
    )


PAIRS = _pairs()


def _moves() -> list[tuple[int, int, str, str]]:
    """The topic's sequence edges (source, target, type, provenance): the moves the new
    sessions make, a `leads_to` out of each concept the history succeeds on into every other
    concept and a `fallback` out of each concept a struggle names into each of those; every
    seventh `leads_to` authored (a move along it counts in the learned edges' sums)."""
    leads = [(a, b) for a in range(SHOWN) for b in range(CONCEPTS) if a != b]
    failing = sorted({s for s, _, _ in PAIRS})
    falls = [(s, b) for s in failing for b in range(SHOWN) if s != b]
    return [
        (a, b, "leads_to", "seed" if n % 7 == 0 else "learned") for n, (a, b) in enumerate(leads)
    ] + [(s, b, "fallback", "learned") for s, b in falls]


MOVES = _moves()


def build_topic(conn: Any, index: int, past: int) -> None:
    """One topic: its concepts and public entries, the prerequisites and sequence edges, and
    `past` processed sessions by the learners, each reporting one or two pairs (share 1, or
    1/2 each) and making one move."""
    from pgvector import Vector

    from hag.vectors.embeddings import embed_texts

    topic = _topic(past)
    conn.execute("INSERT INTO hag_topics (topic_id, title) VALUES (%s, %s)", (topic, topic))
    texts = [
        f"Advice about concept {k}: explain it with a worked example." for k in range(CONCEPTS)
    ]
    vectors = embed_texts(texts)
    for k in range(CONCEPTS):
        conn.execute(
            "INSERT INTO hag_concepts (topic_id, slug, title, description, embedding) "
            "VALUES (%s, %s, %s, %s, %s)",
            (topic, f"concept-{k}", f"Concept {k}", texts[k], Vector(vectors[k])),
        )
        conn.execute(
            "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, "
            "confidence, instruction, embedding, created_at, updated_at) "
            "VALUES (%s, %s, %s, 'public', 'pattern', 0.6, %s, %s, %s, %s)",
            (_entry_id(index, k), topic, f"concept-{k}", texts[k], Vector(vectors[k]), T0, T0),
        )
    conn.execute(
        "CREATE TEMPORARY TABLE bench_pairs (n integer, source uuid, target uuid, "
        "edge_type text, kind text, edge_id uuid) ON COMMIT DROP"
    )
    edges = [(s, t, "prerequisite", kind) for s, t, kind in PAIRS] + MOVES
    for n, (s, t, edge_type, kind) in enumerate(edges):  # the moves numbered after the pairs
        conn.execute(
            "INSERT INTO bench_pairs VALUES (%s, %s, %s, %s, %s, gen_random_uuid())",
            (n, _entry_id(index, s), _entry_id(index, t), edge_type, kind),
        )
    conn.execute(
        "INSERT INTO hag_edges (id, source_entry_id, target_entry_id, edge_type, condition, "
        "confidence, source_type, created_at, updated_at) "
        "SELECT edge_id, source, target, edge_type, CASE edge_type WHEN 'fallback' THEN "
        "'the student did not get it' END, CASE kind WHEN 'seed' THEN 0.9 ELSE 0.3 END, kind, "
        "%s, %s FROM bench_pairs",
        (T0, T0),
    )
    # The history, set-based: session i by learner h(i) mod LEARNERS reports pair h'(i) mod P
    # (share 1), and every third session also pair h''(i) mod P (the two share the unit);
    # h, h', h'' are hashes, so each learner of the large topic reports nearly every pair
    # (the most (edge, learner) totals the history can give). The row triggers (the report's
    # edge check, the erased-session tombstone check) are off for the load only; the totals
    # are grouped after, by the migrations' own statements.
    conn.execute("SET LOCAL session_replication_role = replica")
    conn.execute(
        "INSERT INTO hag_sessions (session_id, learner_id, topic_id, ended_at, payload, "
        "payload_sha256, status, received_at, processed_at) "
        "SELECT %(topic)s || '-past-' || i, "
        "'learner-' || (abs(hashtext('l' || i)) %% %(learners)s), %(topic)s, "
        "%(t0)s::timestamptz - make_interval(secs => %(past)s - i), '{}'::jsonb, 'bench', "
        "'processed', %(t0)s, %(t0)s FROM generate_series(1, %(past)s) AS i",
        {"topic": topic, "learners": LEARNERS, "t0": T0, "past": past},
    )
    conn.execute(
        "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, "
        "reported_at) "
        "SELECT p.edge_id, %(topic)s || '-past-' || r.i, "
        "'learner-' || (abs(hashtext('l' || r.i)) %% %(learners)s), 1, r.share, %(t0)s FROM ("
        "  SELECT i, abs(hashtext('a' || i)) %% %(n)s AS n, "
        "         CASE WHEN i %% 3 = 0 AND abs(hashtext('a' || i)) %% %(n)s"
        "                                 <> abs(hashtext('b' || i)) %% %(n)s"
        "              THEN 0.5 ELSE 1.0 END AS share"
        "    FROM generate_series(1, %(past)s) i"
        "  UNION ALL SELECT i, abs(hashtext('b' || i)) %% %(n)s, 0.5"
        "    FROM generate_series(3, %(past)s, 3) i"
        "   WHERE abs(hashtext('a' || i)) %% %(n)s <> abs(hashtext('b' || i)) %% %(n)s"
        ") r JOIN bench_pairs p ON p.n = r.n "
        # none out of a concept the history succeeds on: every learner's next session
        # succeeds on it, so under the forward rule no such report would still stand
        "WHERE p.source <> ALL(%(succeeded)s::uuid[])",
        {"topic": topic, "learners": LEARNERS, "t0": T0, "past": past, "n": len(PAIRS),
         "succeeded": [_entry_id(index, k) for k in range(SHOWN)]},
    )  # fmt: skip
    # the reports a success must read for the forward rule: each learner's first session
    # named every pair between the concepts the history succeeds on, and the learner showed
    # their targets in that session or soon after, so they stand (answered) and every new
    # success on their concept reads them and the learner's successes since, a whole history
    conn.execute(
        "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, "
        "reported_at) "
        "SELECT p.edge_id, f.session_id, f.learner_id, 1, 0.2, f.ended_at FROM ("
        "  SELECT DISTINCT ON (learner_id) session_id, learner_id, ended_at FROM hag_sessions"
        "   WHERE topic_id = %(topic)s ORDER BY learner_id, ended_at) f "
        "JOIN bench_pairs p ON p.edge_type = 'prerequisite' "
        "                  AND p.source = ANY(%(succeeded)s::uuid[]) "
        "                  AND p.target = ANY(%(succeeded)s::uuid[])",
        {"topic": topic, "succeeded": [_entry_id(index, k) for k in range(SHOWN)]},
    )
    # the unprompted moves: session i made move g(i) mod M (its share 1, g a hash), so each
    # learner of the large topic has moved along nearly every sequence edge, the authored ones
    # too (all of them in the learned edges' chance and reverse sums)
    conn.execute(
        "INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, "
        "reported_at) "
        "SELECT p.edge_id, %(topic)s || '-past-' || i, "
        "'learner-' || (abs(hashtext('l' || i)) %% %(learners)s), 1, 1.0, %(t0)s "
        "FROM generate_series(1, %(past)s) i "
        "JOIN bench_pairs p ON p.n = %(pairs)s + abs(hashtext('m' || i)) %% %(moves)s",
        {"topic": topic, "learners": LEARNERS, "t0": T0, "past": past, "pairs": len(PAIRS),
         "moves": len(MOVES)},
    )  # fmt: skip
    # what each past session's learner succeeded on (written at ingest, migration 097): three
    # of the first `SHOWN` concepts, so every learner with two past sessions has shown all of
    # them (all but a handful when `past` is well above `LEARNERS`, as at 10k and 1M) and the
    # contradiction lookup (`session.sql: shown_concepts`) drops the same share of the
    # new sessions' reports on both topics while probing an index `past` times as large
    conn.execute(
        "INSERT INTO hag_learner_successes (session_id, concept_slug, topic_id, learner_id, "
        "ended_at) "
        "SELECT %(topic)s || '-past-' || i, 'concept-' || ((i + j) %% %(shown)s), %(topic)s, "
        "'learner-' || (abs(hashtext('l' || i)) %% %(learners)s), "
        "%(t0)s::timestamptz - make_interval(secs => %(past)s - i) "
        "FROM generate_series(1, %(past)s) AS i CROSS JOIN generate_series(0, 2) AS j",
        {"topic": topic, "learners": LEARNERS, "t0": T0, "past": past, "shown": SHOWN},
    )
    conn.execute("SET LOCAL session_replication_role = origin")
    # the sums the triggers keep, grouped as the migration groups them (the per-edge units at
    # the cap the profile set, as a report's trigger would have summed them)
    conn.execute(
        "INSERT INTO hag_edge_learner_units (edge_id, learner_id, source_entry_id, "
        "prerequisite, share, sessions) "
        "SELECT r.edge_id, r.learner_id, p.source, p.edge_type = 'prerequisite', "
        "sum(r.share), count(*) "
        "FROM hag_edge_learner_reports r JOIN bench_pairs p ON p.edge_id = r.edge_id "
        "GROUP BY r.edge_id, r.learner_id, p.source, p.edge_type"
    )
    conn.execute(
        "INSERT INTO hag_edge_units (edge_id, source_entry_id, cap, units, learners, sessions) "
        "SELECT u.edge_id, u.source_entry_id, c.cap, sum(least(c.cap, u.share)), count(*), "
        "sum(u.sessions) FROM hag_edge_learner_units u "
        "JOIN bench_pairs p ON p.edge_id = u.edge_id "
        "CROSS JOIN (SELECT hag_setting_float('prerequisite_learner_cap') AS cap) c "
        "GROUP BY u.edge_id, u.source_entry_id, c.cap"
    )
    conn.execute(
        "INSERT INTO hag_concept_learners (source_entry_id, learner_id, pairs) "
        "SELECT u.source_entry_id, u.learner_id, count(*) FROM hag_edge_learner_units u "
        "JOIN bench_pairs p ON p.edge_id = u.edge_id WHERE u.prerequisite "
        "GROUP BY u.source_entry_id, u.learner_id"
    )
    conn.execute(
        "UPDATE hag_edges e SET hit_count = c.n FROM (SELECT r.edge_id, count(*) AS n "
        "FROM hag_edge_learner_reports r JOIN bench_pairs p ON p.edge_id = r.edge_id "
        "GROUP BY r.edge_id) c WHERE e.id = c.edge_id"
    )


def new_sessions(index: int, past: int, batch: int, count: int) -> list[dict[str, Any]]:
    """`count` new sessions on one topic: TURNS turns each, a fifth of them failing with a
    struggle on a reported pair (with quoted evidence), by the history's learners. Like the
    history's sessions, the others succeed on one of the first `SHOWN` concepts: a success
    withdraws the learner's reports out of it made since its last one (the forward rule), as
    many on either topic."""
    rng = random.Random(batch)
    topic = _topic(past)
    out = []
    for i in range(count):
        turns = []
        for t in range(TURNS):
            s, m, _ = PAIRS[rng.randrange(len(PAIRS))]
            failed = rng.random() < 0.2
            if not failed:
                s = rng.randrange(SHOWN)
            turns.append(
                {
                    "turn_index": t,
                    "student_message": f"question {t}",
                    "concept_slugs": [f"concept-{s}"],
                    "decision_entry_id": str(_entry_id(index, s)),
                    "used_entry_ids": [str(_entry_id(index, s))],
                    "rendered_edge_ids": [],
                    "outcome": "failure" if failed else "success",
                    "struggles": (
                        [
                            {
                                "concept_slug": f"concept-{s}",
                                "missing_slug": f"concept-{m}",
                                "evidence": "I don't see where that comes from",
                            }
                        ]
                        if failed
                        else []
                    ),
                    "observations": [],
                }
            )
        out.append(
            {
                "session_id": f"{topic}-new-{batch}-{i}",
                "learner_id": f"learner-{rng.randrange(LEARNERS)}",
                "topic_id": topic,
                "ended_at": (T0 + timedelta(minutes=batch * count + i)).isoformat(),
                "turns": turns,
            }
        )
    return out


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure() -> None:
    from bench.figures import record
    from hag import settings
    from hag.evidence.reweigh import reweigh_every_edge
    from hag.session.ingest import ingest_payload
    from hag.session.process import process_pending
    from hag.storage import db

    with db.connect() as conn:
        settings.apply_profile(conn, "evidence", by="bench")
        conn.commit()
        for index, past in enumerate(PAST):
            start = time.perf_counter()
            build_topic(conn, index, past)
            conn.commit()
            print(
                f"  topic {_topic(past)}: {past:,} past sessions loaded in "
                f"{time.perf_counter() - start:.1f} s (load average {load()})",
                flush=True,
            )
    with db.connect() as conn:
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE")
    with db.connect() as conn:
        start = time.perf_counter()
        moved, moved_sequences = reweigh_every_edge(conn, settings.load(conn), at=T0)
        conn.commit()
        print(
            f"  history re-weighed once: {moved} prerequisite and {moved_sequences} sequence "
            f"confidences moved, {time.perf_counter() - start:.1f} s"
        )
        counts = conn.execute(
            "SELECT (SELECT count(*) FROM hag_sessions) AS sessions, "
            "(SELECT count(*) FROM hag_learner_successes) AS successes, "
            "(SELECT count(*) FROM hag_edge_learner_reports) AS reports, "
            "(SELECT count(*) FROM hag_edge_learner_reports r JOIN hag_edges e "
            " ON e.id = r.edge_id AND e.edge_type <> 'prerequisite') AS moves, "
            "(SELECT count(*) FROM hag_edge_learner_units) AS totals"
        ).fetchone()
        print(
            f"  memory: {counts['sessions']:,} sessions, {counts['reports']:,} reports "
            f"({counts['moves']:,} of them moves along {len(MOVES)} sequence edges a topic), "
            f"{counts['totals']:,} (edge, learner) totals, {counts['successes']:,} past "
            f"successes (the contradiction lookup's index)"
        )
    settings.invalidate()
    with db.connect() as conn:  # warm-up, untimed: imports, caches, a first plan of each query
        for which, past in enumerate(PAST):
            for payload in new_sessions(which, past, 99, 10):
                assert ingest_payload(conn, payload, source="bench").accepted
        conn.commit()
    assert process_pending().sessions == 10 * len(PAST)
    seconds = dict.fromkeys(PAST, 0.0)
    done = dict.fromkeys(PAST, 0)
    reweigh = dict.fromkeys(PAST, 0.0)
    order = [0, 1, 1, 0, 0, 1, 1, 0]  # A B B A A B B A
    for batch, which in enumerate(order):
        past = PAST[which]
        with db.connect() as conn:
            for payload in new_sessions(which, past, batch, SESSIONS):
                assert ingest_payload(conn, payload, source="bench").accepted
            conn.commit()
        before = load()
        start = time.perf_counter()
        summary = process_pending()
        took = time.perf_counter() - start
        assert summary.sessions == SESSIONS and summary.rejects == 0, summary
        seconds[past] += took
        done[past] += summary.sessions
        step = summary.step_seconds.get("reinforcement", 0.0)  # the re-weigh is in this step
        reweigh[past] += step
        print(
            f"  batch {batch + 1} ({_topic(past)}): {SESSIONS} sessions in {took:6.2f} s, "
            f"{SESSIONS / took * 60:7,.0f} sessions/min, reinforcement and re-weigh "
            f"{1000 * step / SESSIONS:5.1f} ms/session, {summary.edges_reweighed} re-weighed, "
            f"{summary.struggles_contradicted} of "
            f"{summary.struggles_contradicted + summary.struggles_proposed} struggles "
            f"contradicted, {summary.reports_withdrawn} past reports withdrawn "
            f"(load average {before} -> {load()})",
            flush=True,
        )
    rates = {past: done[past] / seconds[past] * 60 for past in PAST}
    small, large = PAST
    ratio = max(rates.values()) / min(rates.values())
    for past in PAST:
        print(
            f"  {past:>9,} past sessions: {rates[past]:7,.0f} sessions/min, reinforcement and "
            f"re-weigh {1000 * reweigh[past] / done[past]:5.1f} ms/session"
        )
    print(
        f"  ratio (faster / slower) {ratio:.2f}; goal <= 1.5 -> {'met' if ratio <= 1.5 else 'NOT met'}"
    )
    print(f"  load average {load()}")
    record("evidence.sessions_per_min_10k", rates[small])
    record("evidence.sessions_per_min_1m", rates[large])
    record("evidence.history_ratio", ratio)


def main() -> None:
    from bench.private_db import migrated_server

    print(
        f"session-end, evidence profile: topics with {' and '.join(f'{p:,}' for p in PAST)} past "
        f"sessions by {LEARNERS} learners over {len(PAIRS)} prerequisites and {len(MOVES)} "
        f"sequence edges of {CONCEPTS} concepts; "
        f"{SESSIONS} new sessions of {TURNS} turns per batch, batches A B B A A B B A"
    )
    with migrated_server("hag-bench-evidence-"):
        measure()


if __name__ == "__main__":
    main()
