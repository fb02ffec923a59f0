"""Learned `leads_to` and `fallback` under `edge_grading_rule = units` (issue 29,
hag/evidence/sequences.py): a move the tutor made after a line named its pair is no
evidence, a session is one unit however many turns repeat a move, one learner alone never
lifts a sequence edge to the walk floor, and moves alone (no walked prerequisite meaning the
same step) never do either."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import uuid
from datetime import timedelta

import pytest

import hag
from hag import settings
from hag.evidence import sequences
from hag.evidence.explain import edge_sequence_terms
from hag.evidence.sequences import Move, SequenceEvidence
from hag.storage.edges import EdgeObservation
from tests import factories as f
from tests import test_evidence_units
from tests.session_builders import T0, edge_history, edge_row, ingest, payload, run, turn
from tests.test_evidence_session import struggle, topic_entries

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

A, B, C = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
units = test_evidence_units.units  # the fixture: the evidence profile as it ships


def _move(source, target, prompted=False, kind="leads_to"):
    return Move(EdgeObservation(source, target, kind), prompted)


# --- the pure model ---------------------------------------------------------------------------


def test_a_move_is_prompted_by_a_line_joining_its_concepts_either_way():
    assert sequences.is_prompted(("rsa", "primes"), [("primes", "rsa")])
    assert sequences.is_prompted(("rsa", "primes"), [("hashing", "x"), ("rsa", "primes")])
    assert not sequences.is_prompted(("rsa", "primes"), [("rsa", "hashing")])
    assert not sequences.is_prompted(("rsa", "primes"), [])


def test_a_session_gives_a_pair_at_most_one_unit_and_a_prompted_move_none():
    got = sequences.session_units([_move(A, B)] * 1000)
    assert got == {(A, B, "leads_to"): (1000, 1.0)}
    shared = sequences.session_units([_move(A, B), _move(A, C, prompted=True), _move(A, C)])
    assert shared == {(A, B, "leads_to"): (1, pytest.approx(1 / 3)),
                      (A, C, "leads_to"): (1, pytest.approx(1 / 3))}  # fmt: skip
    assert sequences.session_units([_move(A, B, prompted=True)]) == {}
    # a fallback out of A is its own unit beside A's leads_to moves
    both = sequences.session_units([_move(A, B), _move(A, C, kind="fallback")])
    assert both[(A, C, "fallback")] == (1, 1.0) and both[(A, B, "leads_to")] == (1, 1.0)


def test_a_sessions_moves_name_their_reverse_edges_once_and_no_prerequisite():
    moves = [
        EdgeObservation(A, B, "leads_to"),
        EdgeObservation(A, B, "leads_to"),
        EdgeObservation(B, C, "fallback"),
        EdgeObservation(A, C, "prerequisite"),
    ]
    got = sequences.moves_reversed(moves)
    assert sorted(got, key=str) == sorted([(B, A, "leads_to"), (C, B, "fallback")], key=str)


def _fact(**kw):
    base = dict(edge_id=A, edge_type="leads_to", units=2.0, learners=2, out_units=2.0,
                in_units=2.0, total_units=2.0, prerequisite=0.8)  # fmt: skip
    return SequenceEvidence(**(base | kw))


def test_terms_hold_one_learner_and_unsupported_moves_below_the_walk_floor():
    dials = settings.defaults()
    floor = dials.edge_min_confidence
    k = dials.prerequisite_lift_k
    supported = sequences.sequence_terms(_fact(), dials)
    prior = k * 0.8 / 0.2
    assert supported.confidence == pytest.approx((2 + prior) / (2 + prior + k))
    # one learner's moves add nothing to the walked prerequisite's 0.8; without one, below
    # the walk floor
    one = sequences.sequence_terms(_fact(learners=1, units=1.0), dials)
    assert (one.hold, one.confidence) == (0.8, pytest.approx(0.8))
    lone = sequences.sequence_terms(_fact(learners=1, units=1.0, prerequisite=None), dials)
    assert lone.confidence < floor
    alone = sequences.sequence_terms(_fact(prerequisite=None, units=50.0, learners=50), dials)
    assert alone.confidence < floor and alone.unsupported is not None
    below = sequences.sequence_terms(_fact(prerequisite=floor / 2), dials)
    assert below.prior == 0 and below.confidence < floor
    # chance: A's moves going where the others' go
    chance = sequences.chance_units(1.0, out_units=4.0, in_units=6.0, total_units=14.0)
    assert chance == pytest.approx(4.0 * 5.0 / 10.0)
    assert sequences.chance_units(1.0, 1.0, 1.0, 1.0) == 0.0


def test_a_reverse_move_counts_from_min_learners_learners():
    """B -> A's units count against a learned A -> B only once `prerequisite_min_learners`
    learners made B -> A: one learner's 5 units leave A -> B where it stands without them,
    two learners' are netted out whole; with the dial at 3, two learners' do not count."""
    dials = dataclasses.replace(settings.defaults(), prerequisite_min_learners=2)
    k = dials.prerequisite_lift_k
    prior = k * 0.8 / 0.2
    alone = sequences.sequence_terms(_fact(), dials)
    one = sequences.sequence_terms(_fact(reverse_units=5.0, reverse_learners=1), dials)
    assert (one.reverse, one.reverse_learners) == (0.0, 1)
    assert one.confidence == alone.confidence
    two = sequences.sequence_terms(_fact(reverse_units=5.0, reverse_learners=2), dials)
    net = 2.0 + prior - 5.0
    assert two.reverse == 5.0 and two.confidence == pytest.approx(net / (net + k))
    three = dataclasses.replace(dials, prerequisite_min_learners=3)
    held = _fact(units=3.0, learners=3, reverse_units=5.0, reverse_learners=2)
    assert sequences.sequence_terms(held, three).reverse == 0.0
    counted = _fact(units=3.0, learners=3, reverse_units=5.0, reverse_learners=3)
    assert sequences.sequence_terms(counted, three).reverse == 5.0


def test_an_authored_sequence_edge_is_judged_by_the_struggles_on_its_needing_concept():
    dials = dataclasses.replace(
        settings.defaults(), prerequisite_unlearn_min_reports=3, prerequisite_min_learners=2
    )
    authored = _fact(source_type="seed", confidence=0.8, prerequisite=None)
    assert sequences.authored_state(authored, dials) == (0.8, None)  # not judged yet
    judged = _fact(source_type="seed", confidence=0.8, prerequisite=None, needing_units=3.0,
                   needing_learners=2)  # fmt: skip
    assert sequences.authored_state(judged, dials) == (dials.edge_confidence_floor, 0.8)
    # the prior is the value its author wrote it with, whatever the stored state says: a
    # lowered edge whose support arrived goes back to it
    back = _fact(source_type="seed", confidence=0.05, prior_confidence=0.8, prerequisite=0.9,
                 needing_units=3.0, needing_learners=2)  # fmt: skip
    assert sequences.authored_state(back, dials) == (0.8, None)
    terms = sequences.authored_terms(back, dials)
    assert (terms.prior, terms.judged, terms.supported) == (0.8, True, 0.9)
    short = _fact(source_type="seed", confidence=0.05, prior_confidence=0.8, needing_units=3.0,
                  needing_learners=1)  # fmt: skip
    assert sequences.authored_terms(short, dials).judged is False
    assert sequences.authored_state(short, dials) == (0.8, None)


# --- on the database --------------------------------------------------------------------------


def _leads(db, e, learner, session, day, rendered=()):
    """A session whose turn 0 succeeded on rsa (rendering `rendered`) and turn 1 acted on
    signatures: one leads_to rsa -> signatures."""
    return payload(
        session,
        [turn(0, decision=e["rsa"], outcome="success", rendered=rendered),
         turn(1, decision=e["signatures"], outcome="success")],
        learner=learner, day=day,
    )  # fmt: skip


def _confidence(db, e):
    row = edge_row(db, e["rsa"], e["signatures"], "leads_to")
    assert row is not None
    return float(row["confidence"])


def test_a_leads_to_prompted_by_a_rendered_line_does_not_count(db, units):
    """signatures needs rsa (a walked prerequisite at 0.9, so leads_to rsa -> signatures has
    support); three learners move rsa -> signatures right after the prerequisite's line was
    rendered: no unit, and the edge stands at what the prerequisite gives alone, 0.9. Two
    learners making the move unprompted lift it above."""
    assert units.edge_grading_rule == "units"
    e = topic_entries(db)
    line = f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    run(db, *(_leads(db, e, f"l{n}", f"p{n}", n, rendered=[line]) for n in range(3)))
    assert _confidence(db, e) == pytest.approx(0.9)
    reports = db.execute(
        "SELECT count(*) AS n FROM hag_edge_learner_reports WHERE edge_id = %s",
        (edge_row(db, e["rsa"], e["signatures"], "leads_to")["id"],),
    ).fetchone()
    assert reports["n"] == 0
    run(db, *(_leads(db, e, f"u{n}", f"u{n}", 10 + n) for n in range(2)))
    assert _confidence(db, e) > 0.9 + 1e-6


@pytest.mark.parametrize("deleted", ["before its ingest", "before its processing"])
def test_a_move_prompted_by_a_line_deleted_since_is_still_prompted(db, units, deleted):
    """Three learners move rsa -> signatures right after the tutor rendered the line
    signatures -> rsa, and that edge is deleted (audited, as the nightly's cull is) before
    the sessions arrive or before they are processed: the sessions are accepted and the
    moves were prompted all the same, so the leads_to has no learner report (unprompted,
    each would be one)."""
    from hag.session.process import process_pending

    e = topic_entries(db)
    line = f.edge(db, e["signatures"], e["rsa"], confidence=0.32)
    db.commit()
    sessions = [_leads(db, e, f"l{n}", f"p{n}", n, rendered=[line]) for n in range(3)]
    if deleted == "before its processing":
        assert all(r.accepted for r in ingest(db, *sessions))
    db.execute("DELETE FROM hag_edges WHERE id = %s", (line,))
    db.commit()
    if deleted == "before its ingest":
        assert all(r.accepted for r in ingest(db, *sessions))
    assert process_pending().sessions == 3
    leads = edge_row(db, e["rsa"], e["signatures"], "leads_to")
    assert leads is not None
    reports = db.execute(
        "SELECT count(*) AS n FROM hag_edge_learner_reports WHERE edge_id = %s", (leads["id"],)
    ).fetchone()
    assert reports["n"] == 0


def _fallback(e, learner, session, day):
    """A session whose turn 0 failed on signatures and turn 1 succeeded on rsa: one fallback
    signatures -> rsa."""
    return payload(
        session,
        [turn(0, decision=e["signatures"], outcome="failure"),
         turn(1, decision=e["rsa"], outcome="success")],
        learner=learner, day=day,
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["leads_to", "fallback"])
def test_one_learner_alone_never_lifts_a_sequence_edge_to_the_walk_floor(db, units, kind):
    """learner-1 makes the same unprompted move in 100 sessions (leads_to rsa -> signatures,
    or fallback signatures -> rsa) and no walked prerequisite states the step: below the walk
    floor; a second learner's session leaves it there (moves alone are the tutor's habits)."""
    e = topic_entries(db)
    db.commit()
    ends = (e["rsa"], e["signatures"]) if kind == "leads_to" else (e["signatures"], e["rsa"])
    make = _leads if kind == "leads_to" else lambda db, *a: _fallback(*a)
    run(db, *(make(db, e, "learner-1", f"s{n}", n % 20) for n in range(100)))
    assert float(edge_row(db, *ends, kind)["confidence"]) < units.edge_min_confidence
    run(db, make(db, e, "learner-2", "other", 30))
    assert float(edge_row(db, *ends, kind)["confidence"]) < units.edge_min_confidence


@pytest.mark.parametrize("kind", ["leads_to", "fallback"])
def test_one_learners_moves_add_nothing_to_a_walked_prerequisite(db, units, kind):
    """The same 100 sessions with a walked prerequisite signatures -> rsa at 0.9 stating the
    step: the edge stands at 0.9, what the prerequisite gives alone (one learner's moves add
    nothing); a second learner's one session lifts it above."""
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    ends = (e["rsa"], e["signatures"]) if kind == "leads_to" else (e["signatures"], e["rsa"])
    make = _leads if kind == "leads_to" else lambda db, *a: _fallback(*a)
    run(db, *(make(db, e, "learner-1", f"s{n}", n % 20) for n in range(100)))
    assert float(edge_row(db, *ends, kind)["confidence"]) == pytest.approx(0.9)
    run(db, make(db, e, "learner-2", "other", 30))
    assert float(edge_row(db, *ends, kind)["confidence"]) > 0.9 + 1e-6


def test_a_session_of_1000_turns_is_one_unit(db, units):
    """One session moving rsa -> signatures 500 times (1,000 turns) records one row of share 1:
    with a second learner's one-move session the edge stands where two one-move sessions put
    it."""
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    turns = [
        turn(i, decision=e["rsa"] if i % 2 == 0 else e["signatures"],
             outcome="success" if i % 2 == 0 else None)
        for i in range(1000)
    ]  # fmt: skip
    run(db, payload("long", turns), _leads(db, e, "learner-2", "short", 1))
    edge = edge_row(db, e["rsa"], e["signatures"], "leads_to")
    rows = db.execute(
        "SELECT learner_id, turns, share FROM hag_edge_learner_reports WHERE edge_id = %s"
        " ORDER BY learner_id",
        (edge["id"],),
    ).fetchall()
    assert [(r["learner_id"], r["turns"], r["share"]) for r in rows] == [
        ("learner-1", 500, 1.0), ("learner-2", 1, 1.0)
    ]  # fmt: skip
    expected = sequences.sequence_terms(
        SequenceEvidence(edge["id"], "leads_to", 2.0, 2, 2.0, 2.0, 2.0, prerequisite=0.9),
        units,
    ).confidence
    assert _confidence(db, e) == pytest.approx(expected)


def test_one_learner_moving_a_step_the_other_way_does_not_hold_it_down(db, units, database_url):
    """learner r0 moves signatures -> rsa in 20 sessions; then two learners move rsa ->
    signatures (a walked prerequisite signatures -> rsa at 0.9 states the step): the leads_to
    stands where two learners' moves put it with no reverse edge, and `hag explain` says the
    reverse edge's one learner does not count. A second learner's one session the other way
    makes the reverse two learners' (r0's 20 sessions one unit within the cap): with l2's
    session the same way, the edge nets those units out of its three."""
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    run(db, *(_moves(db, e, "signatures", "rsa", "r0", f"r{n}", n % 10) for n in range(20)))
    run(db, *(_moves(db, e, "rsa", "signatures", f"l{n}", f"l{n}", 20 + n) for n in range(2)))
    edge = edge_row(db, e["rsa"], e["signatures"], "leads_to")
    assert edge is not None
    k = units.prerequisite_lift_k
    prior = k * 0.9 / 0.1  # the walked prerequisite's 0.9 as units; chance 0 (one edge into B)
    assert _confidence(db, e) == pytest.approx((2 + prior) / (2 + prior + k))
    text = _explain_cli(database_url, str(edge["id"]))
    assert "the reverse edge is made by 1 learner(s)" in text and "(not counted)" in text
    assert "reverse 0.0000" in text

    run(db, _moves(db, e, "signatures", "rsa", "r1", "r-other", 30),
        _moves(db, e, "rsa", "signatures", "l2", "l2", 31))  # fmt: skip
    reverse = min(units.prerequisite_learner_cap, 20.0) + min(units.prerequisite_learner_cap, 1)
    net = 3 + prior - reverse
    assert _confidence(db, e) == pytest.approx(net / (net + k))
    text = _explain_cli(database_url, str(edge["id"]))
    assert "the reverse edge is made by 2 learner(s)" in text and "(counted)" in text


@pytest.mark.parametrize("kind", ["leads_to", "fallback"])
def test_a_session_moving_the_other_way_re_weighs_the_edge_at_once(db, units, kind):
    """Three learners learn rsa -> signatures (leads_to; fallback: signatures -> rsa, after a
    failure), a walked prerequisite signatures -> rsa at 0.9 stating the step. Then two
    learners' sessions move only the other way: those sessions re-weigh the learned edge
    (its reverse term changed, though it is neither out of their moves' source nor into
    their target), so it stands right after them at (3 + 9k - 2)/(3 + 9k - 2 + k), worked
    by hand, and at its terms' result now."""
    assert units.prerequisite_min_learners == 2  # two reverse learners count
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    forward = ("rsa", "signatures") if kind == "leads_to" else ("signatures", "rsa")
    outcome = "success" if kind == "leads_to" else "failure"
    run(db, *(_moves(db, e, *forward, f"l{n}", f"l{n}", n, outcome) for n in range(3)))
    back = forward[::-1]
    run(db, *(_moves(db, e, *back, f"r{n}", f"r{n}", 10 + n, outcome) for n in range(2)))
    edge = edge_row(db, e[forward[0]], e[forward[1]], kind)
    cap = min(units.prerequisite_learner_cap, 1.0)
    k = units.prerequisite_lift_k
    net = 3 * cap + k * 0.9 / 0.1 - 2 * cap  # chance 0: every move out of A and into B is A -> B
    assert float(edge["confidence"]) == pytest.approx(net / (net + k))
    terms = edge_sequence_terms(db, edge["id"], edge["source_entry_id"], units)
    assert terms is not None and terms["reverse_learners"] == 2
    assert abs(terms["confidence"] - float(edge["confidence"])) <= 1e-9


def test_moves_along_an_authored_line_count_as_the_reverse_of_a_learned_one(db, units):
    """An authored leads_to signatures -> rsa at 0.5 (its line never rendered here); learners
    r0 and r1 move signatures -> rsa unprompted, then l0, l1 and l2 rsa -> signatures (a
    walked prerequisite signatures -> rsa at 0.9 states that step). The moves along the
    authored line are the learners' as any are: two learners' 2 units count against the
    learned edge, and in its topic's total (5 units; chance stays 0, as every move into
    signatures is the edge's own). The authored edge keeps its prior: no struggle judged it."""
    from hag.evidence import store

    assert units.prerequisite_min_learners == 2  # two reverse learners count
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    authored = f.edge(db, e["signatures"], e["rsa"], "leads_to", confidence=0.5)
    db.commit()
    run(db, *(_moves(db, e, "signatures", "rsa", f"r{n}", f"r{n}", n) for n in range(2)))
    run(db, *(_moves(db, e, "rsa", "signatures", f"l{n}", f"l{n}", 10 + n) for n in range(3)))
    k = units.prerequisite_lift_k
    prior = k * 0.9 / 0.1
    reverse = 2 * min(units.prerequisite_learner_cap, 1.0)
    net = 3 * min(units.prerequisite_learner_cap, 1.0) + prior - reverse
    assert _confidence(db, e) == pytest.approx(net / (net + k))
    edge = edge_row(db, e["rsa"], e["signatures"], "leads_to")["id"]
    terms = edge_sequence_terms(db, edge, e["rsa"], units)
    assert terms is not None
    assert (terms["reverse"], terms["reverse_learners"], terms["chance"]) == (
        pytest.approx(reverse), 2, pytest.approx(0.0)
    )  # fmt: skip
    row = db.execute("SELECT confidence FROM hag_edges WHERE id = %s", (authored,)).fetchone()
    assert float(row["confidence"]) == pytest.approx(0.5)
    # the sums chance reads: 3 units out of rsa and into signatures, 2 along the authored
    # line, 5 in the topic
    cap = min(units.prerequisite_learner_cap, 1.0)
    facts = {
        x.edge_id: x for x in store.sequence_evidence(db, [e["rsa"], e["signatures"]], [], units)
    }
    learned = facts[edge]
    assert (learned.out_units, learned.in_units, learned.total_units) == (
        pytest.approx(3 * cap), pytest.approx(3 * cap), pytest.approx(5 * cap)
    )  # fmt: skip
    assert facts[authored].units == pytest.approx(2 * cap)


def test_sequence_evidence_reads_the_kept_units_and_sums_learners_at_another_cap(db, units, dials):
    """learner-1 moves rsa -> signatures in 3 sessions, learner-2 in 1: at the cap the sums
    were kept at (1) the edge has 1 + 1 units from 2 learners; at cap 2 the kept row does not
    apply and the per-learner rows are summed, min(2, 3) + 1 = 3, as hag_edge_evidence sums
    them. Its type's units out of rsa and in the topic are the same sums (the only edge)."""
    from hag.evidence import store

    e = topic_entries(db)
    run(db, *(_leads(db, e, "learner-1", f"s{n}", n) for n in range(3)))
    run(db, _leads(db, e, "learner-2", "other", 5))
    edge = edge_row(db, e["rsa"], e["signatures"], "leads_to")["id"]

    def read():
        facts = store.sequence_evidence(db, [e["rsa"]], [], settings.current())
        fact = next(x for x in facts if x.edge_id == edge)
        return fact.units, fact.learners, fact.out_units, fact.total_units

    assert read() == (pytest.approx(2.0), 2, pytest.approx(2.0), pytest.approx(2.0))
    dials(prerequisite_learner_cap=2.0)
    assert read() == (pytest.approx(3.0), 2, pytest.approx(3.0), pytest.approx(3.0))


def test_every_edge_into_a_concept_reads_its_struggle_evidence_whole(db, units):
    """Three leads_to into signatures share its struggle evidence, read once per concept:
    a carried signatures -> hashing with 3 sessions no learner is recorded for (a unit each,
    one learner while no learner is recorded: 3 units from 1 learner), then reported by
    learner-1 and learner-2, is 2 + 3 units from 2 learners for each of them, the one with no
    report (and no kept units) too, which stands at 0 units from 0 learners."""
    from hag.evidence import store

    e = topic_entries(db)
    f.edge(db, e["signatures"], e["hashing"], confidence=0.5, source_type="learned", hit_count=3)
    quiet = f.edge(db, e["hashing"], e["signatures"], "leads_to", confidence=0.3,
                   source_type="learned")  # fmt: skip
    db.commit()
    primes_then_signatures = payload(
        "m2",
        [turn(0, decision=e["primes"], outcome="success"),
         turn(1, decision=e["signatures"], outcome="success")],
        learner="learner-2", day=2,
    )  # fmt: skip
    run(db, _leads(db, e, "learner-1", "m1", 1), primes_then_signatures)
    into_rsa = edge_row(db, e["rsa"], e["signatures"], "leads_to")["id"]
    carried = store.sequence_evidence(db, [], [e["signatures"]], units)
    assert [(x.needing_units, x.needing_learners) for x in carried if x.edge_id == into_rsa] == [
        (pytest.approx(3.0), 1)
    ]
    for n, who in enumerate(("learner-1", "learner-2")):
        failed = turn(0, outcome="failure", struggles=[struggle("signatures", "hashing")])
        run(db, payload(f"s{n}", [failed], learner=who, day=3 + n))
    into = [
        edge_row(db, e["rsa"], e["signatures"], "leads_to")["id"],
        edge_row(db, e["primes"], e["signatures"], "leads_to")["id"],
        quiet,
    ]
    facts = {x.edge_id: x for x in store.sequence_evidence(db, [], [e["signatures"]], units)}
    for edge in into:
        assert (facts[edge].needing_units, facts[edge].needing_learners) == (
            pytest.approx(5.0), 2
        )  # fmt: skip
    assert (facts[quiet].units, facts[quiet].learners) == (0.0, 0)


def test_moves_do_not_make_a_learner_of_the_concepts_prerequisites(db, units):
    """The prerequisite model counts a concept's learners from struggle reports only: three
    learners' unprompted moves out of rsa (sequence reports in the same table) and one
    learner's struggle on rsa leave rsa with one learner, and culling the moves' edge leaves
    it so (migration 213)."""
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    run(db, *(_leads(db, e, f"m{n}", f"m{n}", n) for n in range(3)))
    failed = payload(
        "struggle",
        [turn(0, decision=e["rsa"], outcome="failure",
              struggles=[struggle("rsa", "signatures")])],
        learner="s1", day=9,
    )  # fmt: skip
    run(db, failed)
    moves = edge_row(db, e["rsa"], e["signatures"], "leads_to")
    assert (
        db.execute(
            "SELECT count(*) AS n FROM hag_edge_learner_reports WHERE edge_id = %s", (moves["id"],)
        ).fetchone()["n"]
        == 3
    )

    def learners_of_rsa():
        rows = db.execute(
            "SELECT learner_id FROM hag_concept_learners WHERE source_entry_id = %s",
            (e["rsa"],),
        ).fetchall()
        return sorted(r["learner_id"] for r in rows)

    assert learners_of_rsa() == ["s1"]
    db.execute("DELETE FROM hag_edges WHERE id = %s", (moves["id"],))
    db.commit()
    assert learners_of_rsa() == ["s1"]


def test_the_seed_rules_keep_discovery_as_it_was(db):
    """Without the units rule nothing is recorded for sequences (the seed's reinforcement)."""
    e = topic_entries(db)
    db.commit()
    run(db, _leads(db, e, "learner-1", "s", 0))
    edge = edge_row(db, e["rsa"], e["signatures"], "leads_to")
    assert edge is not None and edge["hit_count"] == 1
    n = db.execute(
        "SELECT count(*) AS n FROM hag_edge_learner_reports WHERE edge_id = %s", (edge["id"],)
    ).fetchone()["n"]
    assert n == 0


# --- explained, and in the history (`hag explain EDGE`) ----------------------------------------


def _moves(db, e, source, target, learner, session, day, outcome="success"):
    """A session whose turn 0 had `outcome` on `source` and turn 1 succeeded on `target`."""
    return payload(
        session,
        [turn(0, decision=e[source], outcome=outcome),
         turn(1, decision=e[target], outcome="success")],
        learner=learner, day=day,
    )  # fmt: skip


def _explain_cli(database_url, *args):
    done = subprocess.run(
        [sys.executable, "-m", "hag.cli", "explain", *args],
        capture_output=True, text=True, env={**os.environ, "DATABASE_URL": database_url},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_explain_prints_a_learned_sequence_edges_terms_equal_to_its_confidence(
    db, units, database_url
):
    """Real sessions learn leads_to rsa -> signatures (three learners, one of them also moving
    primes -> signatures so chance is not 0) and fallback signatures -> rsa (two learners),
    both supported by the walked prerequisite signatures -> rsa: the terms `hag explain` prints
    (CLI text and --json, and `hag.Memory.explain_edge`) give each one's stored confidence to
    1e-9; an authored sequence edge's terms are its prior, not yet judged."""
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    authored = f.edge(db, e["hashing"], e["primes"], edge_type="leads_to", confidence=0.7)
    db.commit()
    run(db, *(_moves(db, e, "rsa", "signatures", f"l{n}", f"l{n}", n) for n in range(3)),
        _moves(db, e, "primes", "signatures", "l0", "p0", 5),
        *(_moves(db, e, "signatures", "rsa", f"b{n}", f"b{n}", 10 + n, "failure")
          for n in range(2)))  # fmt: skip
    learned = [
        edge_row(db, e["rsa"], e["signatures"], "leads_to"),
        edge_row(db, e["signatures"], e["rsa"], "fallback"),
    ]
    for edge in learned:
        assert edge is not None and edge["source_type"] == "learned"
        terms = edge_sequence_terms(db, edge["id"], edge["source_entry_id"], units)
        assert terms is not None and terms["prior"] > 0
        assert abs(terms["confidence"] - edge["confidence"]) <= 1e-9
        shown = json.loads(_explain_cli(database_url, str(edge["id"])[:12], "--json"))
        assert shown["terms"] == terms
        text = _explain_cli(database_url, str(edge["id"]))
        assert f"result {edge['confidence']:.6f}" in text and "unprompted moves" in text
        with hag.Memory(database_url) as memory:
            why = memory.explain_edge(str(edge["id"]))
        assert why.terms is not None
        assert abs(why.terms["confidence"] - edge["confidence"]) <= 1e-9
    leads, back = (edge_sequence_terms(db, r["id"], r["source_entry_id"], units) for r in learned)
    assert leads is not None and back is not None
    assert (leads["learners"], back["learners"]) == (3, 2) and leads["chance"] > 0
    own = edge_sequence_terms(db, authored, e["hashing"], units)
    assert own is not None and own["source_type"] == "seed"
    assert (own["prior"], own["judged"], own["confidence"]) == (0.7, False, 0.7)
    text = _explain_cli(database_url, str(authored))
    assert "prior 0.700000" in text and "not judged" in text and "result 0.700000" in text


def test_an_authored_leads_to_is_judged_by_struggles_from_its_prior_and_explained(
    db, units, database_url
):
    """An authored leads_to hashing -> primes at 0.7, and no prerequisite primes -> hashing to
    support it: learners who come from hashing and fail on primes, naming rsa as what they
    miss, give primes struggle units; once they reach the dials (units and learners) the edge
    is judged and sits at the edge floor. `hag explain` prints the judgement, its result is
    the stored confidence, and the history row of the move carries the same terms."""
    e = topic_entries(db)
    authored = f.edge(db, e["hashing"], e["primes"], edge_type="leads_to", confidence=0.7)
    db.commit()
    needed = max(int(units.prerequisite_unlearn_min_reports), units.prerequisite_min_learners)
    sessions = [
        payload(
            f"j{n}",
            [turn(0, decision=e["hashing"], outcome="success"),
             turn(1, decision=e["primes"], outcome="failure",
                  struggles=[struggle("primes", "rsa")])],
            learner=f"j{n}", day=n,
        )
        for n in range(needed)
    ]  # fmt: skip
    run(db, *sessions[:-1])
    assert float(edge_row(db, e["hashing"], e["primes"], "leads_to")["confidence"]) == 0.7
    run(db, sessions[-1])
    stored = float(edge_row(db, e["hashing"], e["primes"], "leads_to")["confidence"])
    assert stored == pytest.approx(units.edge_confidence_floor)
    shown = json.loads(_explain_cli(database_url, str(authored), "--json"))["terms"]
    assert shown["judged"] is True and shown["prior"] == 0.7 and shown["prerequisite"] is None
    assert abs(shown["confidence"] - stored) <= 1e-9
    assert "judged: it may hold" in _explain_cli(database_url, str(authored))
    last = db.execute(
        "SELECT terms FROM hag_confidence_history WHERE entity_id = %s "
        "ORDER BY history_id DESC LIMIT 1",
        (authored,),
    ).fetchone()
    assert last["terms"] == shown


def test_the_evidence_profile_moves_learned_sequence_edges_at_once(db, database_url):
    """Under the seed's rules two sessions reinforce a learned leads_to rsa -> signatures and
    record no sequence evidence; `hag settings profile evidence` re-weighs it under units at
    once: no unprompted units from any learner, so it sits at the edge floor, and the count
    is printed."""
    e = topic_entries(db)
    db.commit()
    run(db, _leads(db, e, "learner-1", "a", 0), _leads(db, e, "learner-2", "b", 1))
    before = _confidence(db, e)
    settings.invalidate()
    assert before > settings.current().edge_confidence_floor
    done = subprocess.run(
        [sys.executable, "-m", "hag.cli", "settings", "profile", "evidence", "--json"],
        capture_output=True, text=True, env={**os.environ, "DATABASE_URL": database_url},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reweighed_sequence_edges"] >= 1
    settings.invalidate()
    assert _confidence(db, e) == pytest.approx(settings.current().edge_confidence_floor)


def test_a_moved_leads_to_writes_its_terms_in_the_history_row(db, units, database_url):
    """Every history row the sequence re-weigh writes for a learned leads_to carries the
    formula's terms; the latest equals what `hag explain EDGE --json` prints now."""
    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    for n in range(3):
        run(db, _leads(db, e, f"learner-{n}", f"h{n}", n))
    edge = edge_row(db, e["rsa"], e["signatures"], "leads_to")["id"]
    rows = edge_history(db, edge)
    reweighed = [r for r in rows if r["reason"] == "sequence evidence (units)"]
    assert len(reweighed) >= 2 and all(r["terms"] is not None for r in reweighed)
    last = rows[-1]
    assert last["reason"] == "sequence evidence (units)"
    now = edge_sequence_terms(db, edge, e["rsa"], units)
    assert now is not None and last["terms"] == now
    assert abs(last["new_value"] - now["confidence"]) <= 1e-9
    assert json.loads(_explain_cli(database_url, str(edge), "--json"))["terms"] == last["terms"]


# --- the nightly re-weighs what sessions left behind -------------------------------------------


def test_the_nightly_re_weighs_sequence_edges_no_session_touched(db, units, database_url):
    """Three learners learn leads_to rsa -> signatures (a fourth moves primes -> signatures,
    so its chance is not 0); later sessions move only hashing -> key-exchange, which grows
    the topic's total and shrinks the edge's chance, but no session re-weighs the edge, so its
    stored confidence is no longer its formula's. A dry run says it would move it and moves
    nothing; the nightly moves it, writing the terms and its run id on the history row, and
    after it every sequence edge's stored confidence is `hag explain`'s result to 1e-9."""
    from hag.nightly.sweeps import SEQUENCE_REWEIGH_REASON, run_nightly

    e = topic_entries(db)
    f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    run(db, *(_moves(db, e, "rsa", "signatures", f"l{n}", f"l{n}", n) for n in range(3)),
        _moves(db, e, "primes", "signatures", "l9", "p0", 4))  # fmt: skip
    edge = edge_row(db, e["rsa"], e["signatures"], "leads_to")
    assert edge is not None
    stored = float(edge["confidence"])
    then = edge_sequence_terms(db, edge["id"], edge["source_entry_id"], units)
    assert then is not None and abs(then["confidence"] - stored) <= 1e-9
    run(db, *(_moves(db, e, "hashing", "key-exchange", f"h{n}", f"h{n}", 10 + n)
              for n in range(8)))  # fmt: skip
    assert float(edge_row(db, e["rsa"], e["signatures"], "leads_to")["confidence"]) == stored
    now = edge_sequence_terms(db, edge["id"], edge["source_entry_id"], units)
    assert now is not None and now["chance"] < then["chance"]
    assert abs(now["confidence"] - stored) > 1e-6  # drifted: what the nightly must mend

    as_of = T0 + timedelta(days=40)
    forecast = run_nightly(as_of=as_of, dry_run=True)
    assert forecast.sequence_reweighed >= 1 and forecast.run_id is None
    db.rollback()
    assert float(edge_row(db, e["rsa"], e["signatures"], "leads_to")["confidence"]) == stored

    summary = run_nightly(as_of=as_of)
    assert summary.sequence_reweighed == forecast.sequence_reweighed
    assert summary.counts()["sequence_reweighed"] == summary.sequence_reweighed
    db.rollback()
    after = float(edge_row(db, e["rsa"], e["signatures"], "leads_to")["confidence"])
    assert abs(after - now["confidence"]) <= 1e-9
    history = db.execute(
        "SELECT reason, run_id, terms FROM hag_confidence_history WHERE entity_id = %s "
        "ORDER BY history_id DESC LIMIT 1",
        (edge["id"],),
    ).fetchone()
    assert history["reason"] == SEQUENCE_REWEIGH_REASON
    assert history["run_id"] == summary.run_id and history["terms"] == now
    for row in db.execute(
        "SELECT id, source_entry_id, confidence FROM hag_edges "
        "WHERE edge_type IN ('leads_to', 'fallback')"
    ).fetchall():
        terms = edge_sequence_terms(db, row["id"], row["source_entry_id"], units)
        assert terms is not None and abs(terms["confidence"] - row["confidence"]) <= 1e-9
    assert run_nightly(as_of=as_of).sequence_reweighed == 0  # a fixed point


def _two_moves_culled(db, dials, kind: str):
    """Two learners move unprompted (`kind`: leads_to rsa -> signatures, or fallback
    signatures -> rsa) and the edge is culled (the cull's ceiling raised so it qualifies),
    its two reports kept beside the audit row: the pair's ends, a maker of the same move
    (learner, session, day) and the culled edge's id."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    db.commit()
    ends = (e["rsa"], e["signatures"]) if kind == "leads_to" else (e["signatures"], e["rsa"])

    def make(learner: str, session: str, day: int):
        return (
            _leads(db, e, learner, session, day)
            if kind == "leads_to"
            else _fallback(e, learner, session, day)
        )

    run(db, make("learner-1", "m1", 1), make("learner-2", "m2", 2))
    first = edge_row(db, *ends, kind)["id"]
    dials(cull_max_confidence=0.99)
    sweeps.sweep(db, as_of=T0 + timedelta(days=200))
    assert edge_row(db, *ends, kind) is None
    return ends, make, first


@pytest.mark.parametrize("kind", ["leads_to", "fallback"])
def test_a_sequence_learned_again_resumes_the_moves_of_its_culled_edge(db, units, dials, kind):
    """Two learners move unprompted (leads_to rsa -> signatures, or fallback signatures ->
    rsa); no prerequisite states the step, the edge is culled (the cull's ceiling raised so it
    qualifies) and its two reports are kept beside the audit row. A third learner makes the
    move: the new edge takes the two back and counts 3 learners, 3 units, as if never culled
    (without them: 1 learner, 1 unit); the audit row records the resumption."""
    ends, make, first = _two_moves_culled(db, dials, kind)
    run(db, make("learner-3", "m3", 201))
    again = edge_row(db, *ends, kind)
    assert again is not None and again["id"] != first
    terms = edge_sequence_terms(db, again["id"], ends[0], units)
    assert terms is not None and (terms["learners"], terms["units"]) == (3, pytest.approx(3.0))
    assert abs(terms["confidence"] - float(again["confidence"])) <= 1e-9  # re-weighed with them
    audited = db.execute("SELECT * FROM hag_edge_audit WHERE edge_id = %s", (first,)).fetchone()
    assert (audited["resumed_session_id"], audited["resumed_edge_id"]) == ("m3", again["id"])
    assert audited["resumed_sessions"] == 2
    kept = "SELECT count(*) AS n FROM hag_edge_audit_reports WHERE audit_id = %s"
    assert db.execute(kept, (audited["audit_id"],)).fetchone()["n"] == 0
    sums = test_evidence_units.totals(db)
    assert sums["per_edge"] == test_evidence_units.grouped_reports(db)["per_edge"]
    assert sums["per_concept"] == {}  # moves make no learner of a concept's prerequisites


@pytest.mark.parametrize("kind", ["leads_to", "fallback"])
def test_moves_a_restore_held_are_resumed_by_the_nightly(db, units, dials, kind):
    """The same cull, but an operator's restore holds the audit row while learner-3 makes the
    move: the session cannot take the row (SKIP LOCKED) and the new edge starts from one
    learner; the session writes the resumption it skipped, and the next nightly resumes the
    two moves into the new edge and re-weighs it: 3 learners, 3 units, as when no restore
    ran."""
    from hag.nightly import sweeps

    ends, make, first = _two_moves_culled(db, dials, kind)
    dials(cull_max_confidence=units.cull_max_confidence)
    db.commit()
    with test_evidence_units.holding_audit_row(first) as operator:
        assert run(db, make("learner-3", "m3", 201)).reports_resumed == 0
        operator.rollback()
    again = edge_row(db, *ends, kind)
    assert edge_sequence_terms(db, again["id"], ends[0], units)["learners"] == 1
    db.commit()
    forecast = sweeps.sweep(db, as_of=T0 + timedelta(days=202), dry_run=True)
    assert forecast.reports_resumed == 2
    assert db.execute("SELECT count(*) AS n FROM hag_resume_pending").fetchone()["n"] == 1
    night = sweeps.sweep(db, as_of=T0 + timedelta(days=202))
    assert night.reports_resumed == 2
    again = edge_row(db, *ends, kind)
    terms = edge_sequence_terms(db, again["id"], ends[0], units)
    assert terms is not None and (terms["learners"], terms["units"]) == (3, pytest.approx(3.0))
    assert abs(terms["confidence"] - float(again["confidence"])) <= 1e-9
    audited = db.execute("SELECT * FROM hag_edge_audit WHERE edge_id = %s", (first,)).fetchone()
    assert (audited["resumed_edge_id"], audited["resumed_sessions"]) == (again["id"], 2)
    assert db.execute("SELECT count(*) AS n FROM hag_resume_pending").fetchone()["n"] == 0


def test_a_sequence_learned_again_under_another_grading_keeps_its_reports_in_the_audit(
    db, units, dials
):
    """The same cull, then the move made again with `edge_grading_rule = baseline` (the
    prerequisite rule still units): nothing resumes; the two reports stay beside the audit
    row for a restore, and the row records no resumption."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    db.commit()
    run(db, _leads(db, e, "learner-1", "m1", 1), _leads(db, e, "learner-2", "m2", 2))
    first = edge_row(db, e["rsa"], e["signatures"], "leads_to")["id"]
    dials(cull_max_confidence=0.99)
    sweeps.sweep(db, as_of=T0 + timedelta(days=200))
    dials(edge_grading_rule="baseline")
    assert run(db, _leads(db, e, "learner-3", "m3", 201)).reports_resumed == 0
    assert edge_row(db, e["rsa"], e["signatures"], "leads_to") is not None
    audited = db.execute("SELECT * FROM hag_edge_audit WHERE edge_id = %s", (first,)).fetchone()
    assert audited["resumed_at"] is None
    kept = "SELECT count(*) AS n FROM hag_edge_audit_reports WHERE audit_id = %s"
    assert db.execute(kept, (audited["audit_id"],)).fetchone()["n"] == 2
