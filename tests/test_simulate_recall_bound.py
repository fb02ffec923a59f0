"""The simulator's count of the learners who named a pair before they had shown its missing
concept (the reports the units rule keeps), checked against the memory's own kept reports,
and the recall bound read from it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from hag_lab.report import build
from hag_lab.report.build import recall_bound
from hag_lab.simulate.experiment import load_starting_memory, set_profile
from hag_lab.simulate.run import SimulationConfig, simulate
from hag_lab.simulate.world import random_world

WORLD = random_world(np.random.default_rng(33), 10, edge_probability=0.35)


@pytest.fixture(scope="module")
def evidence_run(database_url, tmp_path_factory):
    """A small, noisy simulation under the evidence profile (the units rule and its drop
    rule): its report folder, and the memory it leaves in the test database."""
    from hag.storage import db as hdb
    from tests.fix_db import reset_database

    with hdb.connect() as conn:
        reset_database(conn)
    load_starting_memory(WORLD, None)
    config = SimulationConfig(
        learners=8, sessions=80, days=2, p_miss=0.2, p_false=0.4, seed=5, profile="evidence"
    )
    set_profile("evidence", at=config.start)
    run = simulate(WORLD, config, progress=False)
    out = tmp_path_factory.mktemp("bound")
    build.write_report(run, out, name="bound")
    return out


def test_unshown_learners_are_the_learners_whose_reports_the_memory_kept(evidence_run):
    """For every learned prerequisite in the memory none of whose reports was withdrawn, the
    distinct learners of the reports it kept as evidence (the drop rule applied) equal the
    simulator's `unshown_learners` for the pair, and for the others they are fewer (a
    report contradicted forward in time leaves; the bound counts it); and some pair was named
    by more learners than that (the rule dropped some)."""
    from hag.storage import db as hdb

    truth = json.loads((evidence_run / "truth.json").read_text())
    counted = {(s["concept"], s["missing"]): s["unshown_learners"] for s in truth["struggles"]}
    with hdb.connect() as conn:
        rows = conn.execute(
            """
            SELECT s.concept_slug AS source, t.concept_slug AS target,
                   count(DISTINCT r.learner_id) AS learners, w.sessions AS withdrawn
            FROM hag_edge_learner_reports r
            JOIN hag_edges e ON e.id = r.edge_id
            JOIN hag_entries s ON s.id = e.source_entry_id
            JOIN hag_entries t ON t.id = e.target_entry_id
            LEFT JOIN (SELECT source_entry_id, target_entry_id, sum(sessions) AS sessions
                       FROM hag_pair_withdrawn GROUP BY 1, 2) w
              ON (w.source_entry_id, w.target_entry_id) = (e.source_entry_id, e.target_entry_id)
            WHERE e.edge_type = 'prerequisite'
            GROUP BY 1, 2, w.sessions
            """
        ).fetchall()
        kept = {(r["source"], r["target"]): r["learners"] for r in rows if not r["withdrawn"]}
        fewer = {(r["source"], r["target"]): r["learners"] for r in rows if r["withdrawn"]}
        contradicted = conn.execute(
            "SELECT sum((summary ->> 'struggles_contradicted')::int) AS n FROM hag_sessions"
        ).fetchone()
    assert len(kept) >= 3  # something to compare: the check has teeth
    assert {pair: counted.get(pair, 0) for pair in kept} == kept
    assert all(n <= counted.get(pair, 0) for pair, n in fewer.items()), fewer
    assert contradicted["n"] and contradicted["n"] > 0


def test_the_bound_reads_the_runs_learner_hold(evidence_run):
    """Under the evidence profile the report's bound is taken at the run's
    `prerequisite_min_learners` and matches a recount from the exported files."""
    report = json.loads((evidence_run / "report.json").read_text())
    truth = json.loads((evidence_run / "truth.json").read_text())
    before = json.loads((evidence_run / "edges_before.json").read_text())
    held = {
        (b["source_slug"], b["target_slug"])
        for b in before
        if b["edge_type"] == "prerequisite" and b["source_type"] != "learned"
    }
    lacked = {tuple(p) for p in truth["prerequisite"]} - held
    named = {(s["concept"], s["missing"]) for s in truth["struggles"] if s["unshown_learners"] >= 2}
    assert lacked
    assert report["recall_bound"] == {
        "min_learners": 2,
        "pairs": len(lacked),
        "named": len(named & lacked),
        "recall_bound": len(named & lacked) / len(lacked),
    }
    assert (
        report["headline"]["learned_prereq_recall_bound"] == report["recall_bound"]["recall_bound"]
    )


def test_the_bound_counts_lacked_true_pairs_named_by_enough_learners():
    """Of the true pairs not held at the start (a → b, c → d; b → e was authored), those
    named by at least `min_learners` such learners; a false pair never counts."""
    world = SimpleNamespace(truth_for=lambda kind: frozenset({("a", "b"), ("c", "d"), ("b", "e")}))
    before = [SimpleNamespace(source="b", target="e", edge_type="prerequisite", source_type="seed")]
    struggles = [
        {"concept": "a", "missing": "b", "unshown_learners": 3},
        {"concept": "c", "missing": "d", "unshown_learners": 1},
        {"concept": "b", "missing": "e", "unshown_learners": 5},
        {"concept": "a", "missing": "z", "unshown_learners": 9},
    ]
    two = recall_bound(world, before, struggles, 2)  # type: ignore[arg-type]
    assert (two["pairs"], two["named"], two["recall_bound"]) == (2, 1, 0.5)
    one = recall_bound(world, before, struggles, 1)  # type: ignore[arg-type]
    assert one["recall_bound"] == 1.0
    assert recall_bound(world, before, struggles, 4)["recall_bound"] == 0.0  # type: ignore[arg-type]


def test_a_true_authored_prerequisite_no_learner_lacked_unshown_is_unseen(monkeypatch):
    """Each authored prerequisite carries its `lacking_learners`; a true one with none is
    unseen, a wrong one never is, and the headline counts the unseen ones and those of them
    below 0.5 (e -> f is unseen but stands at 0.8); without the counts, both are None."""
    world = SimpleNamespace(
        slugs=("a", "b", "c", "d", "e", "f"),
        concepts=dict.fromkeys("abcdef", 1),
        prerequisites=frozenset({("a", "b"), ("c", "d"), ("e", "f")}),
        truth_for=lambda kind: frozenset(),
    )

    def fact(s: str, t: str, conf: float) -> SimpleNamespace:
        return SimpleNamespace(
            source=s, target=t, edge_type="prerequisite", source_type="seed", confidence=conf
        )

    pairs = [("a", "b", 0.05), ("b", "d", 0.05), ("c", "d", 0.05), ("e", "f", 0.8)]
    before = [fact(s, t, 0.8) for s, t, _ in pairs]
    after = [fact(s, t, c) for s, t, c in pairs]
    # the edge scores are not what this test reads
    monkeypatch.setattr(build.metrics, "truth_scores", lambda *a, **k: {})
    lacking = {("a", "b"): 0, ("c", "d"): 1}
    truth = build.truth_scores(world, before, after, lacking=lacking)  # type: ignore[arg-type]
    rows = {(r["source"], r["target"]): r for r in truth["authored_prerequisites"]}
    assert {p: (r["lacking_learners"], r["unseen"]) for p, r in rows.items()} == {
        ("a", "b"): (0, True),
        ("b", "d"): (0, False),
        ("c", "d"): (1, False),
        ("e", "f"): (0, True),
    }
    scores = {
        "learned_prerequisite": {"brier": 0, "auc": 0},
        "prerequisite": {"brier": 0, "auc": 0},
        "leads_to": {"auc": 0},
        "fallback": {"auc": 0},
    }
    head = build._truth_headline(
        scores | {"authored_prerequisites": truth["authored_prerequisites"]}
    )
    assert head["authored_prereq_true_below_0.5"] == 2
    assert head["authored_prereq_true_unseen"] == 2
    assert head["authored_prereq_true_unseen_below_0.5"] == 1
    uncounted = build.truth_scores(world, before, after)  # type: ignore[arg-type]
    head = build._truth_headline(
        scores | {"authored_prerequisites": uncounted["authored_prerequisites"]}
    )
    assert head["authored_prereq_true_unseen"] is None
    assert head["authored_prereq_true_unseen_below_0.5"] is None


def test_the_fixed_set_brier_scores_pairs_with_no_edge_and_leaves_out_given_ones():
    """Over every lacked true pair and every reported pair (not the edges that happen to
    exist): a true pair with no edge scores 0 (costs 1), a false reported pair with no edge
    costs nothing, an authored pair is left out; one-learner edges cannot dilute it."""
    world = SimpleNamespace(
        slugs=("a", "b", "c", "d", "e"),
        prerequisites=frozenset({("a", "b"), ("c", "d"), ("b", "e")}),
    )
    before = [SimpleNamespace(source="b", target="e", edge_type="prerequisite", source_type="seed")]
    after = [
        SimpleNamespace(
            source="a", target="b", edge_type="prerequisite", source_type="learned", confidence=0.8
        ),
        SimpleNamespace(
            source="a", target="c", edge_type="prerequisite", source_type="learned", confidence=0.2
        ),
    ]
    struggles = [
        {"concept": "a", "missing": "c", "reported_true": 0, "reported_false": 2},
        {"concept": "a", "missing": "d", "reported_true": 0, "reported_false": 1},
        {"concept": "b", "missing": "e", "reported_true": 4, "reported_false": 0},
    ]
    got = build.fixed_set_brier(world, before, after, struggles)  # type: ignore[arg-type]
    # a->b (0.8, true): 0.04; c->d (no edge, true): 1; a->c (0.2, false): 0.04; a->d: 0
    assert (got["n"], got["true"]) == (4, 2)
    assert got["brier"] == pytest.approx((0.04 + 1 + 0.04 + 0) / 4)
