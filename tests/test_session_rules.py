"""Session-end processing: every seed rule with worked numbers, through the real database."""

from __future__ import annotations

import pytest

from tests import factories as f
from tests.session_builders import edge_row, entry_row, payload, run, sequence, turn


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
