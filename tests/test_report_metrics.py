"""The report's figures on worked examples: recovery, direction, calibration, plots."""

from __future__ import annotations

import math

import pytest

from hag_lab.report import metrics as m
from hag_lab.report.metrics import EdgeFact

TRUTH = frozenset({("b", "a"), ("c", "b"), ("d", "b")})
CONCEPTS = ("a", "b", "c", "d", "e")


def fact(s, t, conf, kind="prerequisite", source_type="learned"):
    return EdgeFact(s, t, kind, source_type, conf)


FACTS = [
    fact("b", "a", 0.9),  # true
    fact("c", "b", 0.6),  # true
    fact("a", "b", 0.6),  # reversed true pair
    fact("e", "a", 0.3),  # unrelated
    fact("d", "b", 0.7, source_type="seed"),  # true, authored
    fact("x", "a", 0.9),  # concept the truth does not know
    fact("c", "a", 0.9, kind="leads_to"),  # another type
]


def test_recovery_at_a_threshold_counts_claims_by_hand():
    """At 0.6: claims b->a, c->b, a->b, d->b; 3 true of 4; recall 3/3; one reversed pair."""
    r = m.recovery_at(FACTS, TRUTH, CONCEPTS, "prerequisite", 0.6)
    assert (r["claimed"], r["true_positive"], r["false_positive"]) == (4, 3, 1)
    assert r["precision"] == pytest.approx(0.75) and r["recall"] == pytest.approx(1.0)
    assert r["f1"] == pytest.approx(2 * 0.75 / 1.75)
    assert r["direction_accuracy"] == pytest.approx(3 / 4)
    assert r["outside_truth"] == 1


def test_recovery_by_provenance_and_denominator():
    """Learned-only claims at 0.3 and recall against a chosen set of true pairs."""
    r = m.recovery_at(
        FACTS,
        TRUTH,
        CONCEPTS,
        "prerequisite",
        0.3,
        provenance=("learned",),
        denominator={("b", "a"), ("d", "b")},
    )
    assert (r["claimed"], r["true_positive"]) == (4, 2)  # b->a, c->b, a->b, e->a
    assert r["precision"] == pytest.approx(0.5)
    assert (r["truth"], r["recalled"], r["recall"]) == (2, 1, 0.5)
    assert r["direction_accuracy"] == pytest.approx(2 / 3)


def test_recovery_with_no_claims_has_no_precision():
    """Above every confidence nothing is claimed: precision is undefined (None), recall 0."""
    r = m.recovery_at(FACTS, TRUTH, CONCEPTS, "prerequisite", 0.95)
    assert r["claimed"] == 0 and r["precision"] is None and r["recall"] == 0.0


def test_curve_precision_is_monotone_in_this_example():
    """Raising the threshold here drops the false claims first, so precision never falls."""
    curve = m.recovery_curve(FACTS, TRUTH, CONCEPTS, "prerequisite")
    assert [r["threshold"] for r in curve] == list(m.THRESHOLDS)
    claimed = [r["claimed"] for r in curve]
    assert claimed == sorted(claimed, reverse=True)


def test_edge_facts_keep_only_edges_between_topic_entries():
    """Exported rows resolve through exported entries; tutor and other-topic ends are dropped."""
    entries = [
        {"id": "1", "topic_id": "t", "concept_slug": "a", "visibility_scope": "public"},
        {"id": "2", "topic_id": "t", "concept_slug": "b", "visibility_scope": "public"},
        {"id": "3", "topic_id": "t", "concept_slug": "move", "visibility_scope": "tutor"},
        {"id": "4", "topic_id": "u", "concept_slug": "c", "visibility_scope": "public"},
    ]
    edges = [
        {
            "source_entry_id": "2",
            "target_entry_id": "1",
            "edge_type": "prerequisite",
            "source_type": "learned",
            "confidence": 0.6,
        },
        {
            "source_entry_id": "2",
            "target_entry_id": "3",
            "edge_type": "leads_to",
            "source_type": "learned",
            "confidence": 0.6,
        },
        {
            "source_entry_id": "4",
            "target_entry_id": "1",
            "edge_type": "related",
            "source_type": "seed",
            "confidence": 0.6,
        },
    ]
    assert m.edge_facts(edges, entries, "t") == [EdgeFact("b", "a", "prerequisite", "learned", 0.6)]


def test_log_loss_and_baseline_by_hand():
    """Two uses, 0.8 right and 0.2 right: log-loss -ln 0.8; the base-rate baseline is ln 2."""
    cal = m.calibration([0.8, 0.2], [True, False])
    assert cal["log_loss"] == pytest.approx(-math.log(0.8))
    assert cal["baseline_log_loss"] == pytest.approx(math.log(2))
    assert cal["observed_rate"] == 0.5 and cal["mean_predicted"] == pytest.approx(0.5)


def test_binned_rmse_by_hand():
    """Bin [0.7,0.8): 0.75 twice, one success -> gap 0.25; bin [0.1,0.2): 0.1, failure -> gap 0.1."""
    predicted, observed = [0.75, 0.75, 0.1], [1, 0, 0]
    bins = m.reliability_bins(predicted, observed)
    assert [(b["lo"], b["n"]) for b in bins] == [(pytest.approx(0.1), 1), (pytest.approx(0.7), 2)]
    expected = math.sqrt((2 * 0.25**2 + 1 * 0.1**2) / 3)
    assert m.binned_rmse(predicted, observed) == pytest.approx(expected)


def test_a_confidence_of_one_lands_in_the_last_bin_and_log_loss_stays_finite():
    """p = 1.0 with a failure: last bin, and the clipped log-loss is large but finite."""
    assert m.reliability_bins([1.0], [0])[0]["lo"] == pytest.approx(0.9)
    loss = m.log_loss([1.0], [0])
    assert loss is not None and 10 < loss < 20


def test_calibration_of_nothing_is_empty():
    """No uses: every figure is None, no bins."""
    cal = m.calibration([], [])
    assert cal["n"] == 0 and cal["log_loss"] is None and cal["bins"] == []


def test_plots_are_written(tmp_path):
    """The four plots render to non-empty PNG files from small inputs (Agg backend)."""
    from hag_lab.report import plots
    from hag_lab.simulate.world import Concept, World

    world = World("t", {s: Concept(s, s) for s in CONCEPTS}, TRUTH)
    curve = m.recovery_curve(FACTS, TRUTH, CONCEPTS, "prerequisite")
    files = [
        plots.recovery_plot(
            {"prerequisite": {"learned": curve, "memory": curve}}, tmp_path / "r.png"
        ),
        plots.reliability_plot(
            {"edge": m.calibration([0.8, 0.2, 0.5], [1, 0, 1])}, tmp_path / "c.png"
        ),
        plots.lifecycle_plot(
            [
                {
                    "day": 0,
                    "edges_by_provenance": {"seed": 3},
                    "promotions": 1,
                    "culls": 0,
                    "enrichment_accepted": 2,
                    "learned_prereq_true_06": 1,
                    "learned_prereq_false_06": 0,
                    "learned_prereq_true_03": 2,
                    "learned_prereq_false_03": 1,
                }
            ],
            tmp_path / "l.png",
        ),
        plots.graph_plot(world, FACTS[:3], FACTS, tmp_path / "g.png"),
    ]
    for f in files:
        assert f.read_bytes()[:4] == b"\x89PNG" and f.stat().st_size > 5000


def test_uses_csv_keeps_each_confidence_exactly(tmp_path):
    """uses.csv round-trips confidences bit for bit, so a recount bins them as the report did."""
    import csv

    from hag_lab.report.build import write_uses
    from hag_lab.simulate.tutor import Use

    near_edge = 0.3 - 1e-16 * 3  # just below a bin edge: rounding would move it to [0.3, 0.4)
    assert int(near_edge * 10) == 2
    uses = [Use(0, "s", 0, "edge", "e1", "prerequisite", "learned", near_edge, True)]
    with write_uses(tmp_path / "uses.csv", uses).open() as fh:
        (row,) = list(csv.DictReader(fh))
    assert float(row["confidence"]) == near_edge
