"""The report folder: its numbers recomputed independently from the files it exports."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from hag_lab.report import build
from hag_lab.simulate.experiment import load_starting_memory
from hag_lab.simulate.run import SimulationConfig, simulate
from hag_lab.simulate.world import random_world

WORLD = random_world(np.random.default_rng(33), 10, edge_probability=0.35)


@pytest.fixture(scope="module")
def folder(database_url, tmp_path_factory):
    """A small noisy simulation's report folder (one per module: the tests only read it)."""
    from hag.storage import db as hdb
    from tests.fix_db import reset_database

    with hdb.connect() as conn:
        reset_database(conn)
    load_starting_memory(WORLD, None)
    run = simulate(
        WORLD,
        SimulationConfig(learners=8, sessions=60, days=4, p_miss=0.2, p_false=0.2, seed=9),
        progress=False,
    )
    out = tmp_path_factory.mktemp("report")
    build.write_report(run, out, name="check")
    return out


def recompute(folder, edge_type, learned_only, struggled_only=False):
    """(claims, precision, recall, direction accuracy) per threshold from edges.json +
    entries.json + truth.json alone; `struggled_only`: recall of the pairs reported true."""
    edges = json.loads((folder / "edges.json").read_text())
    entries = json.loads((folder / "entries.json").read_text())
    truth = json.loads((folder / "truth.json").read_text())
    before = json.loads((folder / "edges_before.json").read_text())
    concepts = {c["slug"] for c in truth["concepts"]}
    true_pairs = {tuple(p) for p in truth[edge_type]}
    slug = {e["id"]: e["concept_slug"] for e in entries if e["visibility_scope"] == "public"}
    denominator = true_pairs
    if learned_only:
        held = {
            (b["source_slug"], b["target_slug"])
            for b in before
            if b["edge_type"] == edge_type and b["source_type"] != "learned"
        }
        denominator = true_pairs - held
    if struggled_only:
        reported = {(r["concept"], r["missing"]) for r in truth["struggles"] if r["reported_true"]}
        denominator = true_pairs & reported
    out = {}
    for t in (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
        claims = set()
        for g in edges:
            s, d = slug.get(g["source_entry_id"]), slug.get(g["target_entry_id"])
            if (
                g["edge_type"] == edge_type
                and g["confidence"] >= t
                and s in concepts
                and d in concepts
                and (not learned_only or g["source_type"] == "learned")
            ):
                claims.add((s, d))
        hits = len(claims & true_pairs)
        related = [c for c in claims if c in true_pairs or (c[1], c[0]) in true_pairs]
        right = [c for c in related if c in true_pairs]
        out[t] = (
            len(claims),
            hits / len(claims) if claims else None,
            len(claims & denominator) / len(denominator) if denominator else None,
            len(right) / len(related) if related else None,
        )
    return out


@pytest.mark.parametrize("edge_type", ["prerequisite", "leads_to", "fallback"])
@pytest.mark.parametrize("scope", ["memory", "learned"])
def test_recovery_figures_match_an_independent_recount(folder, edge_type, scope):
    """Every threshold's claims, precision and recall in report.json equal a recount from the files."""
    report = json.loads((folder / "report.json").read_text())
    expected = recompute(folder, edge_type, learned_only=scope == "learned")
    got = {
        row["threshold"]: (
            row["claimed"],
            row["precision"],
            row["recall"],
            row["direction_accuracy"],
        )
        for row in report["recovery"][edge_type][scope]
    }
    assert set(got) == set(expected)
    for t, (claimed, precision, recall, direction) in expected.items():
        assert got[t][0] == claimed
        assert got[t][1] == pytest.approx(precision) if precision is not None else got[t][1] is None
        assert got[t][2] == pytest.approx(recall)
        assert got[t][3] == pytest.approx(direction) if direction is not None else got[t][3] is None
    assert any(c for c, *_ in expected.values())  # something was claimed: the check has teeth


def test_headline_figures_match_an_independent_recount(folder):
    """The headline's recovery figures equal the recount at 0.6 and 0.3 (right scope and row)."""
    h = json.loads((folder / "report.json").read_text())["headline"]
    learned = recompute(folder, "prerequisite", learned_only=True)
    memory = recompute(folder, "prerequisite", learned_only=False)
    struggled = recompute(folder, "prerequisite", learned_only=False, struggled_only=True)
    leads_to = recompute(folder, "leads_to", learned_only=False)
    fallback = recompute(folder, "fallback", learned_only=False)
    expected = {
        "learned_prereq_precision_at_0.6": learned[0.6][1],
        "learned_prereq_recall_at_0.6": learned[0.6][2],
        "learned_prereq_precision_at_0.3": learned[0.3][1],
        "learned_prereq_recall_at_0.3": learned[0.3][2],
        "learned_prereq_direction_accuracy_at_0.3": learned[0.3][3],
        "struggled_prereq_recall_at_0.3": struggled[0.3][2],
        "memory_prereq_precision_at_0.6": memory[0.6][1],
        "memory_prereq_recall_at_0.6": memory[0.6][2],
        "leads_to_precision_at_0.6": leads_to[0.6][1],
        "fallback_precision_at_0.6": fallback[0.6][1],
    }
    assert learned[0.3][0] > 0  # the learned scope claimed something: the check has teeth
    for key, value in expected.items():
        assert (h[key] is None) if value is None else h[key] == pytest.approx(value), key


def test_calibration_figures_match_an_independent_recount(folder):
    """Log-loss and binned RMSE of decision entries and edges recomputed from uses.csv."""
    report = json.loads((folder / "report.json").read_text())
    with (folder / "uses.csv").open() as fh:
        uses = list(csv.DictReader(fh))
    for kind in ("decision", "edge"):
        rows = [(float(u["confidence"]), int(u["success"])) for u in uses if u["kind"] == kind]
        assert rows
        loss = -sum(
            math.log(min(1 - 1e-6, max(1e-6, p)))
            if y
            else math.log(1 - min(1 - 1e-6, max(1e-6, p)))
            for p, y in rows
        ) / len(rows)
        bins: dict[int, list[tuple[float, int]]] = {}
        for p, y in rows:
            bins.setdefault(min(9, int(p * 10)), []).append((p, y))
        rmse = math.sqrt(
            sum(
                len(b) * (sum(p for p, _ in b) / len(b) - sum(y for _, y in b) / len(b)) ** 2
                for b in bins.values()
            )
            / len(rows)
        )
        cal = report["calibration"][kind]
        assert cal["n"] == len(rows)
        assert cal["log_loss"] == pytest.approx(loss, abs=1e-5)
        assert cal["binned_rmse"] == pytest.approx(rmse, abs=1e-5)


def test_truth_file_counts_every_struggle(folder):
    """truth.json's struggle table adds up to the run's reported and invented struggles."""
    report = json.loads((folder / "report.json").read_text())
    truth = json.loads((folder / "truth.json").read_text())
    true_pairs = {tuple(p) for p in truth["prerequisite"]}
    assert sum(s["reported_true"] for s in truth["struggles"]) == report["run"]["reported_true"]
    assert (
        sum(s["reported_false"] for s in truth["struggles"]) == report["run"]["reported_false"] > 0
    )
    assert all((s["concept"], s["missing"]) in true_pairs for s in truth["struggles"] if s["true"])


def test_folder_has_the_markdown_and_the_plots(folder):
    """report.md shows the headline figures and links every PNG, which exist."""
    text = (folder / "report.md").read_text()
    report = json.loads((folder / "report.json").read_text())
    for png in ("recovery.png", "reliability.png", "lifecycle.png", "graph.png"):
        assert f"]({png})" in text
        assert (folder / png).read_bytes()[:4] == b"\x89PNG"
    p = report["headline"]["learned_prereq_precision_at_0.3"]
    assert f"| learned_prereq_precision_at_0.3 | {p:.3f} |" in text


def test_terminal_summary_names_the_headline(folder):
    """The terminal summary carries precision, recall and log-loss figures from report.json."""
    report = json.loads((folder / "report.json").read_text())
    text = "\n".join(build.summary_lines(report, folder))
    assert f"{report['headline']['learned_prereq_recall_at_0.6']:.3f}" in text
    assert f"{report['headline']['decision_log_loss']:.3f}" in text
    assert str(folder / "report.md") in text


def test_struggle_table_counts_learners_as_the_stored_sessions_recount(folder):
    """truth.json's `unshown_learners` per pair equals a recount from the sessions the memory
    stored: each learner's sessions in time order, turns by index, the learners who named the
    pair (with quoted evidence) before a successful turn on its missing concept."""
    from hag.storage import db as hdb

    truth = json.loads((folder / "truth.json").read_text())
    with hdb.connect() as conn:
        rows = conn.execute(
            "SELECT learner_id, payload FROM hag_sessions ORDER BY ended_at, session_id"
        ).fetchall()
    seen: dict[str, set[str]] = {}
    namers: dict[tuple[str, str], set[str]] = {}
    for row in rows:
        learner, payload = row["learner_id"], row["payload"]
        shown = seen.setdefault(learner, set())
        for t in sorted(payload["turns"], key=lambda t: t["turn_index"]):
            for s in t.get("struggles") or []:
                if s.get("evidence") and s["missing_slug"] not in shown:
                    namers.setdefault((s["concept_slug"], s["missing_slug"]), set()).add(learner)
            if t["outcome"] == "success":
                shown.update(t["concept_slugs"])
    got = {(s["concept"], s["missing"]): s["unshown_learners"] for s in truth["struggles"]}
    assert got == {pair: len(namers.get(pair, ())) for pair in got}
    assert sum(got.values()) > 0 and set(namers) <= set(got)


def test_no_recall_bound_under_rules_that_keep_every_report(folder):
    """The fixture runs the seed rules (they keep reports from learners who had shown the
    target, and one learner's): the report gives no bound rather than a wrong one."""
    report = json.loads((folder / "report.json").read_text())
    assert report["config"]["profile"] is None  # the registry defaults: the seed rules
    assert report["recall_bound"] is None
    assert report["headline"]["learned_prereq_recall_bound"] is None
