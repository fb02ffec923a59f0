"""Session-end processing: every seed rule with worked numbers, through the real database,
and the same rules as pure functions with no connection (hag/session/rules.py)."""

from __future__ import annotations

import math
import re
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hag import settings
from hag.evidence import model
from hag.session import ladder, rules
from hag.session.contract import Observation, Struggle, Turn
from hag.session.ladder import Catalogue, Resolution
from hag.storage import db
from hag.storage.edges import EdgeObservation
from tests import factories as f
from tests.session_builders import edge_row, entry_row, payload, run, sequence, turn

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


@pytest.fixture
def pair(db):
    """Two topic entries A and B in cryptography, committed."""
    a = f.entry(db, concept_slug="rsa", confidence=0.8)
    b = f.entry(db, concept_slug="modular-arithmetic", confidence=0.8)
    db.commit()
    return a, b


def test_an_edge_observed_in_one_to_four_sessions_reads_03_03_06_06(db, pair):
    """A learned edge enters at 0.3 / hit 1, stays 0.3 at hit 2, reaches 0.6 at hit 3 and stays."""
    a, b = pair
    seen = []
    for n in range(4):
        run(db, sequence(f"s{n}", a, b, day=n))
        row = edge_row(db, a, b, "leads_to")
        seen.append((row["confidence"], row["hit_count"]))
    assert seen == [(0.3, 1), (0.3, 2), (0.6, 3), (0.6, 4)]
    row = edge_row(db, a, b, "leads_to")
    assert row["source_type"] == "learned" and row["source_session_id"] == "s0"


def test_an_edge_graded_up_to_075_stays_075_when_re_observed(db, pair):
    """Re-observation raises a floor; it never lowers an edge that grading lifted past it."""
    a, b = pair
    f.edge(db, a, b, "leads_to", confidence=0.75, source_type="learned", hit_count=5)
    db.commit()
    run(db, sequence("s1", a, b))
    row = edge_row(db, a, b, "leads_to")
    assert (row["confidence"], row["hit_count"]) == (0.75, 6)


def test_the_same_edge_twice_in_one_session_is_one_observation(db, pair):
    """hit_count counts sessions: A->B seen in two turn pairs of one session counts once."""
    a, b = pair
    turns = [
        turn(0, decision=a, outcome="success"),
        turn(1, decision=b, outcome="failure"),
        turn(2, decision=a, outcome="success"),
        turn(3, decision=b),
    ]
    run(db, payload("s1", turns))
    assert edge_row(db, a, b, "leads_to")["hit_count"] == 1


@pytest.mark.parametrize(
    ("start", "outcome", "expected"),
    [
        (0.07, "failure", 0.05),  # max(0.05, 0.02)
        (0.05, "failure", 0.05),  # stays on the floor
        (0.50, "failure", 0.45),
        (0.98, "success", 1.0),  # min(1.0, 1.03)
        (1.0, "success", 1.0),  # stays on the ceiling
        (0.50, "success", 0.55),
    ],
)
def test_edge_grading_moves_005_within_the_floor_and_the_ceiling(
    db, pair, start, outcome, expected
):
    """An edge rendered in a turn moves by 0.05 with its outcome, clamped to [0.05, 1.0]."""
    a, b = pair
    e = f.edge(db, a, b, "prerequisite", confidence=start)
    db.commit()
    run(db, payload("s1", [turn(0, rendered=[e], outcome=outcome)]))
    row = db.execute(
        "SELECT confidence, traversal_count, last_traversed_at FROM hag_edges WHERE id = %s", (e,)
    ).fetchone()
    assert row["confidence"] == pytest.approx(expected, abs=1e-12)
    assert row["traversal_count"] == 1
    assert row["last_traversed_at"].isoformat() == "2026-03-01T12:00:00+00:00"


def test_an_edge_rendered_in_three_turns_is_graded_turn_by_turn(db, pair):
    """Success, failure, failure from 0.98: 1.0 (capped), 0.95, 0.90 — not 0.98 - 0.05."""
    a, b = pair
    e = f.edge(db, a, b, "prerequisite", confidence=0.98)
    db.commit()
    run(
        db,
        payload(
            "s1",
            [
                turn(0, rendered=[e], outcome="success"),
                turn(1, rendered=[e], outcome="failure"),
                turn(2, rendered=[e], outcome="failure"),
                turn(3, rendered=[e]),
            ],
        ),
    )
    row = db.execute(
        "SELECT confidence, traversal_count FROM hag_edges WHERE id = %s", (e,)
    ).fetchone()
    assert row["confidence"] == pytest.approx(0.90, abs=1e-12)
    assert row["traversal_count"] == 4


@pytest.mark.parametrize(
    ("maturity", "outcome", "expected"),
    [
        ("proven", "success", 0.62),  # 0.6 + 0.10 * 0.4 * 0.5
        ("candidate", "success", 0.64),  # 0.6 + 0.20 * 0.4 * 0.5
        ("pattern", "success", 0.64),
        ("proven", "failure", 0.57),  # 0.6 - 0.10 * 0.6 * 0.5
        ("candidate", "failure", 0.54),  # 0.6 - 0.20 * 0.6 * 0.5
    ],
)
def test_entry_update_proven_vs_candidate_at_strength_05(db, maturity, outcome, expected):
    """Entries move by the asymmetric saturating rule, lr 0.10 when proven and 0.20 otherwise."""
    e = f.entry(db, concept_slug="rsa", maturity=maturity, confidence=0.6)
    db.commit()
    run(db, payload("s1", [turn(0, used=[e], outcome=outcome, strength=0.5)]))
    row = entry_row(db, e)
    assert row["confidence"] == pytest.approx(expected, abs=1e-12)
    assert (row["success_count"], row["failure_count"]) == (
        (1, 0) if outcome == "success" else (0, 1)
    )
    assert row["last_matched_at"].isoformat() == "2026-03-01T12:00:00+00:00"


def test_a_turn_without_strength_uses_the_default_strength(db):
    """outcome_strength missing means the dial outcome_strength_default (1.0): 0.5 -> 0.6."""
    e = f.entry(db, concept_slug="rsa", maturity="candidate", confidence=0.5)
    db.commit()
    run(db, payload("s1", [turn(0, used=[e], outcome="success")]))
    assert entry_row(db, e)["confidence"] == pytest.approx(0.6, abs=1e-12)


def test_reinforcement_lands_before_grading_in_the_same_session(db, pair):
    """An edge at 0.3 with 2 hits, re-observed and rendered in a failed turn, ends at 0.55.

    Reinforce first: max(0.3, 0.6) = 0.6, then graded down to 0.55. Graded first it would
    have read max(0.25, 0.6) = 0.6.
    """
    a, b = pair
    e = f.edge(db, a, b, "leads_to", confidence=0.3, source_type="learned", hit_count=2)
    db.commit()
    run(
        db,
        payload(
            "s1",
            [
                turn(0, decision=a, outcome="success"),
                turn(1, decision=b, rendered=[e], outcome="failure"),
            ],
        ),
    )
    row = edge_row(db, a, b, "leads_to")
    assert (row["hit_count"], row["confidence"]) == (3, pytest.approx(0.55, abs=1e-12))
    reasons = [
        r["reason"]
        for r in db.execute(
            "SELECT reason FROM hag_confidence_history WHERE entity_id = %s ORDER BY history_id",
            (e,),
        )
    ]
    assert reasons[-2:] == [
        "session reinforcement (discovery, prerequisite proposals)",
        "outcome grading",
    ]


def test_recovery_makes_a_fallback_edge_with_a_condition(db, pair):
    """Turn t failed on A, turn t+1 succeeded on B: fallback A -> B (when: what failed)."""
    a, b = pair
    run(
        db,
        payload(
            "s1",
            [
                turn(
                    0,
                    decision=a,
                    outcome="failure",
                    struggles=[
                        {
                            "concept_slug": "rsa",
                            "missing_slug": "modular-arithmetic",
                            "evidence": "what is mod?",
                        }
                    ],
                ),
                turn(1, decision=b, outcome="success"),
            ],
        ),
    )
    row = edge_row(db, a, b, "fallback")
    assert row["condition"] == "the student did not get rsa (missing modular-arithmetic)"
    assert (row["confidence"], row["hit_count"]) == (0.3, 1)
    assert edge_row(db, a, b, "leads_to") is None  # a failed turn is no sequence


def test_a_turn_without_a_decision_breaks_the_chain(db, pair):
    """A, (no decision), B: no edge, since only consecutive decisions are linked."""
    a, b = pair
    run(
        db,
        payload(
            "s1",
            [
                turn(0, decision=a, outcome="success"),
                turn(1, outcome="success"),
                turn(2, decision=b, outcome="success"),
            ],
        ),
    )
    assert db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"] == 0


def test_unanchored_entries_never_get_edges(db, pair):
    """Discovery and proposals skip `_unanchored_` entries, wherever they stand in the chain."""
    a, b = pair
    u = f.entry(db, concept_slug="_unanchored_", confidence=0.8)
    db.commit()
    summary = run(
        db,
        payload(
            "s1",
            [
                turn(0, decision=a, outcome="success"),
                turn(1, decision=u, outcome="failure"),
                turn(
                    2,
                    decision=b,
                    outcome="success",
                    struggles=[
                        {
                            "concept_slug": "_unanchored_",
                            "missing_slug": "rsa",
                            "evidence": "I am lost",
                        }
                    ],
                    observations=[{"graph": "topic", "concept": "?", "text": "Something vague."}],
                ),
            ],
        ),
    )
    n = db.execute(
        "SELECT count(*) AS n FROM hag_edges e JOIN hag_entries s ON s.id = e.source_entry_id "
        "JOIN hag_entries t ON t.id = e.target_entry_id "
        "WHERE '_unanchored_' IN (s.concept_slug, t.concept_slug)"
    ).fetchone()["n"]
    assert n == 0
    assert edge_row(db, a, u, "leads_to") is None and edge_row(db, u, b, "fallback") is None
    assert summary.struggles_unresolved == 1 and summary.entries_created == 1


def test_a_struggle_with_evidence_proposes_a_prerequisite(db, pair):
    """A struggle with quoted evidence: prerequisite from the struggled to the missing concept."""
    a, b = pair
    summary = run(
        db,
        payload(
            "s1",
            [
                turn(
                    0,
                    outcome="failure",
                    struggles=[
                        {
                            "concept_slug": "rsa",
                            "missing_slug": "modular-arithmetic",
                            "evidence": "I don't get why we take the remainder",
                        }
                    ],
                )
            ],
        ),
    )
    row = edge_row(db, a, b, "prerequisite")
    assert (row["confidence"], row["hit_count"], row["source_type"]) == (0.3, 1, "learned")
    assert summary.struggles_proposed == 1


def test_a_struggle_with_no_evidence_proposes_nothing(db, pair):
    """Empty or blank evidence is no evidence: no edge, and the summary says so."""
    summary = run(
        db,
        payload(
            "s1",
            [
                turn(
                    0,
                    outcome="failure",
                    struggles=[
                        {
                            "concept_slug": "rsa",
                            "missing_slug": "modular-arithmetic",
                            "evidence": "  ",
                        },
                        {"concept_slug": "rsa", "missing_slug": "modular-arithmetic"},
                    ],
                )
            ],
        ),
    )
    assert db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"] == 0
    assert summary.struggles_without_evidence == 2


def test_co_occurrence_alone_proposes_nothing(db, pair):
    """Two concepts used and named together in failing turns make no prerequisite."""
    a, b = pair
    turns = [
        turn(i, concepts=["rsa", "modular-arithmetic"], used=[a, b], outcome="failure")
        for i in range(5)
    ]
    run(db, payload("s1", turns))
    assert db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"] == 0


def test_a_struggle_naming_a_concept_without_an_entry_is_unresolved(db, pair):
    """No topic entry for the missing concept: nothing proposed, counted as unresolved."""
    summary = run(
        db,
        payload(
            "s1",
            [
                turn(
                    0,
                    struggles=[
                        {
                            "concept_slug": "rsa",
                            "missing_slug": "group-theory",
                            "evidence": "what's a group",
                        }
                    ],
                )
            ],
        ),
    )
    assert db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"] == 0
    assert summary.struggles_unresolved == 1


def test_a_struggle_resolves_names_through_the_catalogue(db, pair):
    """A struggle may name a concept by alias: 'Modular Arithmetic' finds modular-arithmetic."""
    a, b = pair
    f.concept(
        db,
        "cryptography",
        "modular-arithmetic",
        title="Modular arithmetic",
        aliases=["clock arithmetic"],
    )
    db.commit()
    run(
        db,
        payload(
            "s1",
            [
                turn(
                    0,
                    struggles=[
                        {
                            "concept_slug": "rsa",
                            "missing_slug": "Clock Arithmetic",
                            "evidence": "mod confuses me",
                        }
                    ],
                )
            ],
        ),
    )
    assert edge_row(db, a, b, "prerequisite") is not None


def test_history_records_session_time_reason_and_session(db, pair):
    """Every confidence change is in the history with the session, the reason and ended_at."""
    a, b = pair
    run(db, sequence("s1", a, b, day=3))
    h = db.execute("SELECT * FROM hag_confidence_history WHERE entity_kind = 'edge'").fetchone()
    assert (h["old_value"], h["new_value"], h["session_id"]) == (None, 0.3, "s1")
    assert h["at"].isoformat() == "2026-03-04T12:00:00+00:00"
    row = edge_row(db, a, b, "leads_to")
    assert row["created_at"].isoformat() == "2026-03-04T12:00:00+00:00"


# --- the same rules as pure functions: no connection (hag/session/rules.py, docs/rules.md) ----


@pytest.fixture
def no_connection(monkeypatch):
    """Any attempt to open a database connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a pure rule opened a database connection")

    monkeypatch.setattr(psycopg, "connect", refuse)
    monkeypatch.setattr(psycopg.Connection, "connect", refuse)
    monkeypatch.setattr(db, "pool", refuse)


ROOT = Path(__file__).resolve().parent.parent
SEED = settings.defaults()
A, B, C = (uuid.UUID(int=n) for n in (1, 2, 3))
CATALOGUE = Catalogue.from_rows(
    "cryptography",
    [
        {"slug": "rsa", "title": "RSA", "aliases": ["rivest shamir adleman"], "embedding": None},
        {"slug": "modular-arithmetic", "title": "Modular arithmetic", "embedding": None},
    ],
)


def _turn(i: int, decision=None, outcome=None, **fields) -> Turn:
    return Turn(
        turn_index=i, student_message="hi", decision_entry_id=decision, outcome=outcome, **fields
    )


def _at_cosine(cos: float) -> np.ndarray:
    """A unit vector at cosine `cos` from (1, 0, 0)."""
    return np.array([cos, math.sqrt(1 - cos * cos), 0.0], dtype=np.float32)


def _resolved(
    graph: str, slug: str, step: str = "exact", text: str = "advice"
) -> rules.ResolvedObservation:
    obs = Observation(graph=graph, concept=slug, text=text)
    return rules.ResolvedObservation(0, obs, Resolution(slug, step, ladder.quality(step, SEED)))


X = np.array([1.0, 0.0, 0.0], dtype=np.float32)


@pytest.mark.parametrize(("cosine", "twin"), [(0.73, True), (0.72, True), (0.70, False)])
def test_student_pattern_dedup_at_cosine_072(no_connection, cosine, twin):
    """A new student pattern within cosine 0.72 of one of the learner's is its twin (seed)."""
    patterns = [rules.Pattern("off-by-one", _at_cosine(cosine))]
    assert rules.is_twin_pattern("rushes-ahead", X, patterns, SEED) is twin


def test_student_pattern_dedup_reads_its_dial(no_connection):
    """The 0.72 is the dial student_pattern_dedup_threshold: raised to 0.9, 0.8 is no twin."""
    patterns = [rules.Pattern("off-by-one", _at_cosine(0.8))]
    assert rules.is_twin_pattern("rushes-ahead", X, patterns, SEED)
    strict = SEED.with_overrides(student_pattern_dedup_threshold=0.9)
    assert not rules.is_twin_pattern("rushes-ahead", X, patterns, strict)


def test_student_pattern_with_the_same_concept_is_a_twin_at_any_cosine(no_connection):
    """Same concept merges even when the texts are orthogonal; no patterns, no twin."""
    assert rules.is_twin_pattern(
        "off-by-one", X, [rules.Pattern("off-by-one", _at_cosine(0.0))], SEED
    )
    assert not rules.is_twin_pattern("off-by-one", X, [], SEED)


def test_decide_entries_merges_twins_within_the_session_and_drops_unanchored_drawings(
    no_connection,
):
    """Step 1: twins and repeated identities merge, unanchored drawings drop, rows start at base x quality."""
    observations = [
        _resolved("student", "off-by-one"),
        _resolved("student", "rushes-ahead"),  # at cosine 0.8 of the first: a twin
        _resolved("topic", "rsa"),
        _resolved("topic", "rsa"),  # same identity
        _resolved("visual", "_unanchored_", "unanchored"),
        _resolved("student", "_unanchored_", "unanchored"),
        _resolved("student", "_unanchored_", "unanchored"),
        _resolved("topic", "padding-oracle", "minted"),
    ]
    vectors = [X, _at_cosine(0.8), X, X, X, X, X, X]
    decision = rules.decide_entries(observations, vectors, [], "learner-1", SEED)
    assert (decision.merged, decision.dropped) == (2, 1)
    assert [(e.slug, e.scope) for e in decision.new] == [
        ("off-by-one", "student:learner-1"),
        ("rsa", "public"),
        ("_unanchored_", "student:learner-1"),
        ("_unanchored_", "student:learner-1"),
        ("padding-oracle", "public"),
    ]
    # 0.5 base x ladder quality: exact 1.0, unanchored 0.25, minted 0.6
    assert [e.confidence for e in decision.new] == pytest.approx([0.5, 0.5, 0.125, 0.125, 0.3])
    assert [m.slug for m in decision.minted] == ["padding-oracle"]


def test_decide_entries_merges_into_the_learners_stored_patterns(no_connection):
    """A pattern read from the memory is a twin target like one made in this session."""
    stored = [rules.Pattern("off-by-one", _at_cosine(0.75))]
    decision = rules.decide_entries([_resolved("student", "new-trait")], [X], stored, "l", SEED)
    assert (decision.new, decision.merged) == ((), 1)


def test_discovery_sequence_and_recovery(no_connection):
    """Success then B -> leads_to; failure then success on B -> fallback naming what failed."""
    struggle = Struggle(
        concept_slug="rsa", missing_slug="modular-arithmetic", evidence="what is mod"
    )
    turns = [
        _turn(0, A, "success"),
        _turn(1, B, "failure", struggles=[struggle]),
        _turn(2, C, "success"),
        _turn(3, C, "success"),  # same entry: nothing
    ]
    got = rules.discover(turns, {A: "rsa", B: "modular-arithmetic", C: "primes"})
    assert got == [
        EdgeObservation(A, B, "leads_to"),
        EdgeObservation(
            B,
            C,
            "fallback",
            "the student did not get modular-arithmetic (missing modular-arithmetic)",
        ),
    ]


def test_discovery_breaks_on_a_turn_without_decision_and_skips_unanchored(no_connection):
    """No decision breaks the chain; `_unanchored_` takes part in nothing; failure-failure is nothing."""
    slugs = {A: "rsa", B: "_unanchored_", C: "primes"}
    assert rules.discover([_turn(0, A, "success"), _turn(1), _turn(2, C, "success")], slugs) == []
    assert rules.discover([_turn(0, A, "success"), _turn(1, B, "success")], slugs) == []
    assert rules.discover([_turn(0, A, "failure"), _turn(1, C, "failure")], slugs) == []


def test_proposals_only_from_struggles_with_evidence_named_through_the_catalogue(no_connection):
    """Only quoted evidence proposes; an alias names the canonical concept; no entry is unresolved."""
    turns = [
        _turn(
            0,
            struggles=[
                Struggle(
                    concept_slug="Rivest Shamir Adleman",
                    missing_slug="modular-arithmetic",
                    evidence="mod?",
                ),
                Struggle(concept_slug="rsa", missing_slug="primes", evidence="   "),
                Struggle(concept_slug="rsa", missing_slug="euler-totient", evidence="phi?"),
                Struggle(concept_slug="rsa", missing_slug="RSA", evidence="again?"),
            ],
        )
    ]
    pairs = rules.struggle_pairs(turns, CATALOGUE)
    assert pairs == [
        rules.StrugglePair("rsa", "modular-arithmetic"),
        rules.StrugglePair("rsa", "euler-totient"),
        rules.StrugglePair("rsa", "rsa"),
    ]
    assert rules.struggles_without_evidence(turns) == 1
    assert rules.proposal_slugs(pairs) == ["euler-totient", "modular-arithmetic", "rsa"]
    proposals = rules.propose_prerequisites(pairs, {"rsa": A, "modular-arithmetic": B})
    assert proposals.observed == (EdgeObservation(A, B, "prerequisite"),)
    assert proposals.unresolved == 2  # no entry for euler-totient; rsa -> rsa is one entry


def test_reinforcement_floor_reads_03_03_06_06_and_never_lowers(no_connection):
    """An edge seen in 1..4 sessions: 0.3, 0.3, 0.6, 0.6; one graded up to 0.75 stays 0.75."""
    confidence, seen = float(SEED["edge_new_confidence"]), []
    for hits in range(1, 5):
        if hits > 1:
            confidence = rules.reinforced_confidence(confidence, hits, SEED)
        seen.append(confidence)
    assert seen == pytest.approx([0.3, 0.3, 0.6, 0.6])
    assert rules.reinforced_confidence(0.75, 4, SEED) == 0.75
    assert rules.reinforcement_floor(2, SEED.with_overrides(edge_reinforce_min_hits=2)) == 0.6


def test_lift_sources_only_under_the_lift_rule(no_connection):
    """The concepts a session reports struggles on are re-weighed only under the lift rule."""
    observed = [EdgeObservation(B, A, "prerequisite"), EdgeObservation(A, C, "leads_to")]
    assert model.lift_sources(observed, SEED) == []
    lift = SEED.with_overrides(prerequisite_confidence_rule="lift")
    assert model.lift_sources(observed, lift) == [B]


def test_evidence_confidence_of_a_learned_edge_is_the_lift_ladder(no_connection):
    """Lift: one uncontested report earns a learned edge 1/3; an authored edge with few reports keeps its own."""
    fact = model.PrerequisiteEvidence(A, "learned", 0.3, 1, 1, 28, 0, None, None, None)
    assert model.evidence_state(fact, SEED) == (pytest.approx(1 / 3), None)
    authored = model.PrerequisiteEvidence(A, "seed", 0.9, 1, 1, 28, 0, None, None, None)
    assert model.evidence_state(authored, SEED) == (0.9, None)


def test_grading_plan_counts_an_edge_once_per_turn_and_uses_the_default_strength(no_connection):
    """An edge rendered twice in a turn is one traversal; no strength means 1.0; decision graded."""
    turns = [
        _turn(0, A, "success", rendered_edge_ids=[C, C], used_entry_ids=[B], outcome_strength=0.5),
        _turn(1, None, "failure", rendered_edge_ids=[C], used_entry_ids=[B]),
        _turn(2, A, None),
    ]
    plan = rules.grading_plan(turns, SEED)
    assert plan.edge_outcomes == {C: ["success", "failure"]}
    assert plan.entry_steps == {
        B: [("success", 0.5), ("failure", 1.0)],
        A: [("success", 0.5), (None, 1.0)],
    }


def test_edge_outcome_grading_005_within_floor_and_ceiling(no_connection):
    """Seed: +0.05 on success up to 1.0, -0.05 on failure down to 0.05, turn by turn."""
    shifts = rules.edge_shifts(
        {A: ["success"], B: ["failure", "failure"], C: ["success"]}, {}, SEED
    )
    assert shifts[A](0.3) == pytest.approx(0.35)
    assert shifts[B](0.12) == pytest.approx(0.05)
    assert shifts[C](0.98) == pytest.approx(1.0)


def test_edge_outcome_grading_skips_prerequisites_under_lift(no_connection):
    """Under the lift rule a prerequisite's state makes it ungraded; other types are graded."""
    lift = SEED.with_overrides(prerequisite_confidence_rule="lift")
    assert rules.needs_edge_state(lift) and not rules.needs_edge_state(SEED)
    state = {
        A: rules.EdgeGradingState("prerequisite", 0, 0, 0),
        B: rules.EdgeGradingState("leads_to", 0, 0, 0),
    }
    shifts = rules.edge_shifts({A: ["success"], B: ["success"]}, state, lift)
    assert shifts[A](0.4) == 0.4
    assert shifts[B](0.4) == pytest.approx(0.45)


@pytest.mark.parametrize(
    ("outcome", "proven", "candidate"), [("success", 0.525, 0.55), ("failure", 0.475, 0.45)]
)
def test_entry_update_at_strength_05_by_maturity(no_connection, outcome, proven, candidate):
    """Seed: lr 0.10 proven / 0.20 otherwise, c + lr(1-c)s or c - lr c s, from 0.5; counters move."""
    grading = rules.entry_gradings({A: [(outcome, 0.5)]}, SEED)[A]
    assert grading.proven(0.5) == pytest.approx(proven)
    assert grading.default(0.5) == pytest.approx(candidate)
    assert (grading.successes, grading.failures) == ((1, 0) if outcome == "success" else (0, 1))


def test_docs_rules_table_names_only_functions_and_tests_that_exist(no_connection):
    """docs/rules.md stays true: every `rules.x` it names is in hag/session/rules.py, every
    `model.x` in hag/evidence/model.py, every test exists."""
    text = (ROOT / "docs" / "rules.md").read_text()
    named = set(re.findall(r"`rules\.(\w+)`", text)) - {"py"}
    assert named and sorted(n for n in named if not hasattr(rules, n)) == []
    in_model = set(re.findall(r"`model\.(\w+)`", text)) - {"py"}
    assert in_model and sorted(n for n in in_model if not hasattr(model, n)) == []
    tests = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    cited = set(re.findall(r"\b(test_\w+?)(?:_\*)?`", text))
    assert cited and sorted(t for t in cited if f"def {t}" not in tests) == []


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["topic", "tutor", "student", "visual"]),
            st.sampled_from(["rsa", "primes", "_unanchored_"]),
            st.floats(-1.0, 1.0),
        ),
        max_size=12,
    )
)
def test_decide_entries_accounts_for_every_observation_once(items):
    """Any observations: new + merged + dropped is their number, and no anchored identity is new twice."""
    observations = [
        _resolved(graph, slug, "unanchored" if slug == "_unanchored_" else "exact")
        for graph, slug, _ in items
    ]
    vectors = [_at_cosine(abs(c)) for _, _, c in items]
    decision = rules.decide_entries(observations, vectors, [], "l", SEED)
    assert len(decision.new) + decision.merged + decision.dropped == len(items)
    anchored = [(e.slug, e.scope) for e in decision.new if e.slug != "_unanchored_"]
    assert len(anchored) == len(set(anchored))
