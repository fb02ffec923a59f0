"""Small simulations through the real memory: does it learn the hidden prerequisites?

Each test plays a few dozen sessions of a seeded random world through `retrieve`, ingest,
session-end processing and the nightly sweeps, on the test database, in seconds.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from hag_lab.report import build, metrics
from hag_lab.simulate.experiment import load_starting_memory
from hag_lab.simulate.run import SimulationConfig, simulate
from hag_lab.simulate.world import random_world

WORLD = random_world(np.random.default_rng(21), 10, edge_probability=0.35)


def small(**kw):
    base = dict(learners=8, sessions=70, days=5, p_miss=0.0, p_false=0.0, seed=5)
    return SimulationConfig(**{**base, **kw})


def play(db, config, world=WORLD):
    load_starting_memory(world, None)
    return simulate(world, config, progress=False)


def prerequisite_edges(db, topic):
    """(concept, missing) -> (confidence, source_type) of every prerequisite edge in the topic."""
    rows = db.execute(
        "SELECT s.concept_slug AS s, t.concept_slug AS t, g.confidence, g.source_type "
        "FROM hag_edges g JOIN hag_entries s ON s.id = g.source_entry_id "
        "JOIN hag_entries t ON t.id = g.target_entry_id "
        "WHERE g.edge_type = 'prerequisite' AND s.topic_id = %s",
        (topic,),
    ).fetchall()
    db.rollback()
    return {(r["s"], r["t"]): (r["confidence"], r["source_type"]) for r in rows}


def test_world_has_something_to_learn():
    """The test world has prerequisites at several depths (else the tests below prove nothing)."""
    assert len(WORLD.prerequisites) >= 6 and max(WORLD.depth().values()) >= 2


def test_zero_noise_learns_every_struggled_prerequisite_and_no_false_one_reaches_06(db):
    """No extractor noise: each true pair struggled on is an edge; nothing false reaches 0.6."""
    run = play(db, small())
    struggled = {(s["concept"], s["missing"]) for s in run.struggle_table() if s["reported_true"]}
    assert len(struggled) >= 5
    assert struggled <= WORLD.prerequisites
    edges = prerequisite_edges(db, WORLD.topic_id)
    assert struggled <= set(edges), f"not learned: {sorted(struggled - set(edges))}"
    false_high = {p: c for p, (c, _) in edges.items() if p not in WORLD.prerequisites and c >= 0.6}
    assert false_high == {}
    assert {st for _, st in edges.values()} == {"learned"}
    # reinforcement happened: some pair was struggled on in three sessions or more
    assert max(c for c, _ in edges.values()) >= 0.6


def test_heavy_false_struggle_noise_lowers_precision(db):
    """With half the turns carrying an invented struggle, precision of learned edges falls."""
    from tests.fix_db import reset_database

    clean = play(db, small())
    clean_rec = build.recovery(
        WORLD, [], metrics.facts_from_rows(clean.end.edges), clean.struggle_table()
    )
    reset_database(db)
    noisy = play(db, small(p_false=0.5))
    noisy_rec = build.recovery(
        WORLD, [], metrics.facts_from_rows(noisy.end.edges), noisy.struggle_table()
    )
    at = {t: i for i, t in enumerate(metrics.THRESHOLDS)}
    clean_p = clean_rec["prerequisite"]["learned"][at[0.3]]["precision"]
    noisy_p = noisy_rec["prerequisite"]["learned"][at[0.3]]["precision"]
    assert clean_p == 1.0
    assert noisy_p is not None and noisy_p < 0.8
    assert noisy_rec["prerequisite"]["learned"][at[0.3]]["false_positive"] >= 3
    assert sum(s["reported_false"] for s in noisy.struggle_table()) > 20


def test_cooccurrence_without_struggles_learns_no_prerequisite(db):
    """Concepts taught side by side (sequences, recoveries) but no struggle reported: no prerequisite."""
    run = play(db, small(p_miss=1.0))
    assert sum(s["true"] for s in run.struggle_table()) > 10  # learners did struggle, unreported
    assert prerequisite_edges(db, WORLD.topic_id) == {}
    kinds = db.execute(
        "SELECT edge_type, count(*) AS n FROM hag_edges WHERE source_type = 'learned' GROUP BY 1"
    ).fetchall()
    counts = {r["edge_type"]: r["n"] for r in kinds}
    assert counts.get("leads_to", 0) + counts.get("fallback", 0) > 0  # co-occurrence was seen


def test_the_tutor_walks_learned_prerequisites(db):
    """Once prerequisite edges exist they are rendered and followed: later sessions report them."""
    run = play(db, small(sessions=90))
    rendered_prereq = [u for u in run.uses if u.kind == "edge" and u.edge_type == "prerequisite"]
    assert rendered_prereq and {u.source_type for u in rendered_prereq} == {"learned"}
    assert min(u.day for u in rendered_prereq) >= 1  # nothing to walk before the first night


@pytest.mark.parametrize("noise", [0.0, 0.2])
def test_the_same_seed_gives_the_same_figures(db, tmp_path, noise):
    """Two runs from the same seed on the same starting memory write identical figures."""
    from tests.fix_db import reset_database

    reports = []
    for i in range(2):
        reset_database(db)
        run = play(db, small(sessions=50, days=4, p_miss=noise, p_false=noise))
        report = build.write_report(run, tmp_path / f"r{i}")
        figures = {
            k: report[k] for k in ("headline", "recovery", "calibration", "precision_by_hits")
        }
        reports.append(json.dumps({**figures, "struggles": run.struggle_table()}, sort_keys=True))
        assert (tmp_path / f"r{i}" / "report.md").exists()
    assert reports[0] == reports[1]


def test_both_persistent_errors_reach_the_memory_and_the_report(db, tmp_path):
    """A run with repeated misreadings and misconceptions ingests their reports and the
    report counts them (sessions, learners, reports), with leads_to/fallback recall."""
    run = play(db, small(p_repeat_session=0.5, misconception_share=0.5))
    report = build.write_report(run, tmp_path / "r")
    r = report["run"]
    assert r["repeating_sessions"] > 0 and r["reported_repeated"] > 0
    assert r["misconception_learners"] == 4 and r["reported_misconception"] > 0
    assert r["reported_false"] >= r["reported_repeated"] + r["reported_misconception"]
    assert report["config"]["p_repeat_session"] == 0.5
    assert {"leads_to_recall_at_0.6", "fallback_recall_at_0.6"} <= set(report["headline"])
    assert "repeated it" in (tmp_path / "r" / "report.md").read_text()
