"""Property tests: the pure rules, and whole sessions applied to the real database."""

from __future__ import annotations

import uuid
from datetime import timedelta

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pgvector import Vector

from hag import settings as hag_settings
from hag.session import rules
from tests.factories import vec
from tests.fix_db import reset_database
from tests.fix_session import memory
from tests.session_builders import T0, ingest, payload, turn

DIALS = hag_settings.defaults()
unit = st.floats(0.0, 1.0, allow_nan=False)
outcomes = st.sampled_from(["success", "failure", None])
DB_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- the pure rules -------------------------------------------------------------------------


@given(st.floats(0.05, 1.0), st.lists(outcomes, max_size=12))
def test_composed_edge_grading_equals_turn_by_turn(c, seq):
    """Composing the clamped steps gives the turn-by-turn result (up to rounding)."""
    step_by_step = c
    for o in seq:
        step_by_step = rules.grade_edge(step_by_step, o, DIALS)
    assert abs(rules.edge_grading(seq, DIALS)(c) - step_by_step) < 1e-9


@given(st.floats(0.001, 1.0), st.lists(outcomes, max_size=30))
def test_edge_grading_stays_within_floor_and_ceiling(c, seq):
    """Graded at least once, an edge lies in [0.05, 1] whatever it started at."""
    if any(o is not None for o in seq):
        assert 0.05 - 1e-12 <= rules.edge_grading(seq, DIALS)(c) <= 1.0 + 1e-12


@given(
    unit, st.lists(st.tuples(outcomes, unit), max_size=20), st.sampled_from(["proven", "candidate"])
)
def test_composed_entry_grading_equals_turn_by_turn_and_stays_in_bounds(c, steps, maturity):
    """The affine composition equals the seed's rule applied turn by turn, within [0, 1]."""
    step_by_step = c
    for o, s in steps:
        step_by_step = rules.grade_entry(step_by_step, o, s, maturity, DIALS)
    composed = rules.entry_grading(steps, rules.learning_rate(maturity, DIALS))(c)
    assert abs(composed - step_by_step) < 1e-9
    assert -1e-12 <= composed <= 1 + 1e-12


@DB_SETTINGS
@given(st.floats(0.05, 1.0), st.integers(1, 50))
@example(0.3, 1).via("the second observation stays at 0.3")
@example(0.3, 2).via("the third observation lifts to 0.6")
@example(0.75, 5).via("a graded-up edge is never lowered")
def test_reinforcement_never_lowers_and_counts_one_hit(db, c, hits):
    """The one edge upsert re-observing an edge: hit + 1, max(c, 0.6 | 0.3), as the pure rule says."""
    from hag.storage.edges import EdgeObservation, upsert_edges

    reset_database(db)
    db.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('cryptography', 'Cryptography')")
    a, b = entry_id(0, 0), entry_id(0, 1)
    for i in (a, b):
        db.execute(
            "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, "
            "confidence, instruction, embedding) VALUES (%s, 'cryptography', %s, 'public', "
            "'pattern', 0.5, 'x', %s)",
            (i, f"c-{i}", Vector(vec(0.5))),
        )
    db.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
        "hit_count, source_type) VALUES (%s, %s, 'leads_to', %s, %s, 'learned')",
        (a, b, c, hits),
    )
    [result] = upsert_edges(
        db,
        [EdgeObservation(a, b, "leads_to")],
        DIALS,
        source_type="learned",
        at=T0,
        session_id="s1",
    )
    db.commit()
    expected = max(
        c, 0.6 if hits + 1 >= 3 else 0.3
    )  # the seed's rule, hit_count after the increment
    assert (result.inserted, result.hit_count, result.confidence) == (False, hits + 1, expected)
    assert result.confidence == rules.reinforced_confidence(c, hits + 1, DIALS)  # SQL = pure rule


# --- whole sessions on the database ---------------------------------------------------------

GROUPS = 2
PER_GROUP = 4


def entry_id(group: int, k: int) -> uuid.UUID:
    return uuid.UUID(int=1000 + group * 100 + k)


def edge_id(group: int, k: int) -> uuid.UUID:
    return uuid.UUID(int=5000 + group * 100 + k)


def build_world(db):
    """Two disjoint groups of four entries (mixed maturity) with edges inside each group."""
    reset_database(db)
    db.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('cryptography', 'Cryptography')")
    maturities = ["candidate", "pattern", "proven", "pattern"]
    for g in range(GROUPS):
        for k in range(PER_GROUP):
            slug = "_unanchored_" if k == 3 else f"g{g}-c{k}"
            db.execute(
                "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, "
                "confidence, instruction, embedding, created_at, updated_at) VALUES "
                "(%s, 'cryptography', %s, 'public', %s, %s, %s, %s, %s, %s)",
                (
                    entry_id(g, k),
                    slug,
                    maturities[k],
                    0.2 + 0.2 * k,
                    f"Advice {g}/{k}.",
                    Vector(vec(0.5, axis=7 + k)),
                    T0 - timedelta(days=30),
                    T0 - timedelta(days=30),
                ),
            )
        for k, (s, t, kind, conf) in enumerate(
            [(0, 1, "prerequisite", 0.06), (1, 2, "leads_to", 0.97), (2, 0, "fallback", 0.5)]
        ):
            db.execute(
                "INSERT INTO hag_edges (id, source_entry_id, target_entry_id, edge_type, confidence, "
                "hit_count, source_type, created_at, updated_at) VALUES (%s, %s, %s, %s, %s, 1, 'seed', %s, %s)",
                (
                    edge_id(g, k),
                    entry_id(g, s),
                    entry_id(g, t),
                    kind,
                    conf,
                    T0 - timedelta(days=30),
                    T0 - timedelta(days=30),
                ),
            )
    db.commit()


def turns_for(group: int):
    entries = st.sampled_from([entry_id(group, k) for k in range(PER_GROUP)])
    slugs = st.sampled_from([f"g{group}-c{k}" for k in range(3)] + ["nowhere"])
    observation = st.fixed_dictionaries(
        {
            "graph": st.sampled_from(["topic", "tutor", "student", "visual"]),
            "concept": st.sampled_from(
                [f"g{group} idea {k}" for k in range(3)] + [f"g{group}-c0", "?"]
            ),
            "text": st.sampled_from([f"Group {group} says {w}." for w in ("this", "that", "more")]),
        }
    )
    one = st.builds(
        lambda decision, used, rendered, outcome, strength, struggles, observations: dict(
            decision=decision,
            used=used,
            rendered=rendered,
            outcome=outcome,
            strength=strength,
            struggles=struggles,
            observations=observations,
        ),
        st.one_of(st.none(), entries),
        st.lists(entries, max_size=3),
        st.lists(st.sampled_from([edge_id(group, k) for k in range(3)]), max_size=3),
        outcomes,
        st.one_of(st.none(), unit),
        st.lists(
            st.fixed_dictionaries(
                {
                    "concept_slug": slugs,
                    "missing_slug": slugs,
                    "evidence": st.sampled_from(["", "I said so"]),
                }
            ),
            max_size=2,
        ),
        st.lists(observation, max_size=2),
    )
    return st.lists(one, min_size=1, max_size=6)


def session_of(group: int, n: int, spec, day: int):
    return payload(
        f"g{group}-s{n}",
        [turn(i, **t) for i, t in enumerate(spec)],
        learner=f"learner-{group}",
        day=day,
    )


def process():
    from hag.session.process import process_pending

    return process_pending()


@DB_SETTINGS
@given(turns_for(0))
def test_applying_a_session_twice_equals_once(db, spec):
    """Ingest and process a session, then again: the second pass changes nothing."""
    build_world(db)
    session = session_of(0, 0, spec, day=0)
    assert ingest(db, session)[0].accepted
    process()
    once = memory(db)
    assert ingest(db, session)[0].status == "duplicate"
    assert process().sessions == 0
    assert memory(db) == once


@DB_SETTINGS
@given(turns_for(0), turns_for(1))
def test_any_order_of_disjoint_sessions_gives_the_same_memory(db, spec0, spec1):
    """Two sessions touching disjoint rows give one memory whichever is applied first."""
    sessions = [session_of(0, 0, spec0, day=1), session_of(1, 0, spec1, day=2)]
    results = []
    for order in (sessions, sessions[::-1]):
        build_world(db)
        for s in order:
            assert ingest(db, s)[0].accepted
            process()
        results.append(memory(db))
    assert results[0] == results[1]


@DB_SETTINGS
@given(st.lists(st.tuples(st.integers(0, GROUPS - 1), st.data()), min_size=1, max_size=5))
def test_confidences_stay_in_bounds_for_any_payload(db, plan):
    """Whatever sessions arrive, entries stay in [0, 1] and graded edges in [0.05, 1]."""
    build_world(db)
    for n, (group, data) in enumerate(plan):
        assert ingest(db, session_of(group, n, data.draw(turns_for(group)), day=n))[0].accepted
    process()
    bad_entries = db.execute(
        "SELECT count(*) AS n FROM hag_entries WHERE confidence < 0 OR confidence > 1"
    )
    bad_edges = db.execute(
        "SELECT count(*) AS n FROM hag_edges WHERE confidence < 0.05 OR confidence > 1"
    )
    assert bad_entries.fetchone()["n"] == 0 and bad_edges.fetchone()["n"] == 0
    counters = db.execute(
        "SELECT count(*) AS n FROM hag_entries WHERE success_count < 0 OR failure_count < 0"
    )
    assert counters.fetchone()["n"] == 0
