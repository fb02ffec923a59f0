"""The simulator's count of the learners who named a pair before they had shown its missing
concept (the reports the units rule keeps), and the recall bound read from it."""

from __future__ import annotations

from types import SimpleNamespace

from hag_lab.report.build import recall_bound
from hag_lab.simulate.run import SimulationRun


def turn(outcome, concepts, struggles=()):
    return {
        "outcome": outcome,
        "concept_slugs": list(concepts),
        "struggles": [
            {"concept_slug": c, "missing_slug": m, "evidence": "…"} for c, m in struggles
        ],
    }


def test_a_learner_counts_for_a_pair_only_before_showing_its_missing_concept():
    """A names c → m before succeeding on m; B succeeds on m first (in the session, then in
    an earlier session) and names it after; C names c → x. Only A counts for c → m, C for
    c → x, each once however often they name it."""
    run = SimulationRun(config=None, world=None, learners=[], before=None)  # type: ignore[arg-type]
    run.note_reports(
        "A",
        {"turns": [turn("failure", ["c"], [("c", "m")]), turn("success", ["m"]),
                   turn("failure", ["c"], [("c", "m")])]},
    )  # fmt: skip
    run.note_reports("A", {"turns": [turn("failure", ["c"], [("c", "m")])]})
    run.note_reports("B", {"turns": [turn("success", ["m"]), turn("failure", ["c"], [("c", "m")])]})
    run.note_reports("B", {"turns": [turn("failure", ["c"], [("c", "m")])]})
    run.note_reports("C", {"turns": [turn("failure", ["c"], [("c", "x"), ("c", "x")])]})
    assert run.unshown_namers == {("c", "m"): {"A"}, ("c", "x"): {"C"}}
    assert run.shown == {"A": {"m"}, "B": {"m"}, "C": set()}


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
