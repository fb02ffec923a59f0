"""`hag simulate --compare` and `--seeds` (issue 14): the same seeds under each profile, one
table, the headline keys kept as means with their per-seed spread and the truth scores added."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from hag import PROJECT_ROOT
from hag_lab.simulate.seeds import TABLE_ROWS, aggregate_reports, compare_table

OLD_HEADLINE_KEYS = {
    "learned_prereq_precision_at_0.6",
    "learned_prereq_recall_at_0.6",
    "learned_prereq_precision_at_0.3",
    "learned_prereq_recall_at_0.3",
    "learned_prereq_direction_accuracy_at_0.3",
    "struggled_prereq_recall_at_0.3",
    "learned_prereq_precision_hits_ge_3",
    "memory_prereq_precision_at_0.6",
    "memory_prereq_recall_at_0.6",
    "extractor_precision_reported_1x",
    "leads_to_precision_at_0.6",
    "fallback_precision_at_0.6",
    "decision_log_loss",
    "decision_baseline_log_loss",
    "decision_binned_rmse",
    "edge_log_loss",
    "edge_baseline_log_loss",
    "edge_binned_rmse",
    "promotions",
    "archived",
    "culls",
    "enrichment_accepted",
}


def test_aggregate_keeps_the_headline_keys_as_means_with_their_spread():
    """Two seeds' headlines: the mean per key, sample sd, min/max and the per-seed values."""
    reports = [
        {"config": {"seed": 1, "p_miss": 0.1}, "headline": {"a": 0.5, "b": None}},
        {"config": {"seed": 2, "p_miss": 0.1}, "headline": {"a": 0.7, "b": 2}},
    ]
    got = aggregate_reports(reports, profile="evidence", seeds=[1, 2])
    assert got["headline"] == {"a": pytest.approx(0.6), "b": 2.0}
    assert got["spread"]["a"]["sd"] == pytest.approx(0.1414213562)
    assert got["per_seed"]["a"] == [0.5, 0.7]
    assert got["config"] == {"p_miss": 0.1} and got["seeds"] == [1, 2]


def test_compare_table_has_a_column_per_profile():
    """One row per figure, mean ± sd per profile, and the cull row says it is not comparable."""
    spread = {"n": 2, "mean": 0.5, "sd": 0.1, "min": 0.4, "max": 0.6}
    comparison = {
        "profiles": ["seed", "evidence"],
        "seeds": [7, 11],
        "results": {
            "seed": {"spread": {TABLE_ROWS[0][0]: spread}},
            "evidence": {"spread": {}},
        },
    }
    lines = compare_table(comparison)
    assert lines[0] == "| figure (mean ± sd over seeds 7, 11) | seed | evidence |"
    assert lines[2] == f"| {TABLE_ROWS[0][1]} | 0.50 ± 0.10 | – |"
    assert any("never culled" in line for line in lines)


def test_simulate_compare_runs_each_profile_on_the_same_seeds(tmp_path):
    """A tiny random world under seed and evidence, seeds 3 and 4: one table, per-seed reports
    whose config says the profile and seed, aggregates with the old and new keys, and each
    run's database kept beside its report (no --drop-databases)."""
    out = tmp_path / "cmp"
    args = [sys.executable, "-m", "hag.cli", "simulate", "--world", "random", "--concepts", "6"]
    args += ["--learners", "3", "--sessions", "10", "--days", "2", "--enrich-every", "0"]
    args += ["--seeds", "3,4", "--compare", "seed,evidence", "--out", str(out)]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=900, cwd=PROJECT_ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "| figure (mean ± sd over seeds 3, 4) | seed | evidence |" in result.stdout
    for profile in ("seed", "evidence"):
        for seed in (3, 4):
            report = json.loads((out / profile / f"seed-{seed}" / "report.json").read_text())
            assert (report["profile"], report["config"]["seed"]) == (profile, seed)
            assert report["config"]["noise_kind"] == "structured"
            assert set(report["headline"]) >= OLD_HEADLINE_KEYS
            assert "learned_prereq_truth_brier" in report["headline"]
            assert (out / profile / f"seed-{seed}" / "db" / "pgdata" / "PG_VERSION").is_file()
        aggregate = json.loads((out / profile / "report.json").read_text())
        assert set(aggregate["headline"]) >= OLD_HEADLINE_KEYS and aggregate["seeds"] == [3, 4]
        assert aggregate["spread"]["decision_log_loss"]["n"] == 2
    assert (out / "compare.md").read_text().startswith("| figure")


def test_simulate_refuses_a_bad_profile_list(tmp_path):
    """--compare with an unknown profile is refused with a one-line reason."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hag.cli",
            "simulate",
            "--compare",
            "seed,fast",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT_ROOT,
        check=False,
    )
    assert result.returncode != 0 and "--compare" in result.stderr


def test_simulate_error_kinds_runs_each_kind_on_each_world_and_prints_one_table(tmp_path):
    """--error-kinds on the random topic, two seeds, two jobs: one table row per kind, each
    seed's report run with the kind's options, the repeated misreading in every session at
    share 1, and with --drop-databases no run's database left behind its report."""
    out = tmp_path / "kinds"
    args = [sys.executable, "-m", "hag.cli", "simulate", "--world", "random:30"]
    args += ["--learners", "3", "--sessions", "6", "--days", "2", "--enrich-every", "0"]
    args += ["--error-kinds", "independent:0.3,repeated:1", "--profile", "evidence"]
    args += ["--seeds", "3,4", "--jobs", "2", "--drop-databases", "--out", str(out)]
    result = subprocess.run(
        args, capture_output=True, text=True, timeout=900, cwd=PROJECT_ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("| random:30 |")]
    assert [r.split("|")[2].strip() for r in rows] == ["independent:0.3", "repeated:1"]
    kinds = json.loads((out / "kinds.json").read_text())
    assert kinds["seeds"] == [3, 4] and len(kinds["rows"]) == 2
    for seed in (3, 4):
        folder = out / "random-30" / "repeated-1" / "evidence" / f"seed-{seed}"
        report = json.loads((folder / "report.json").read_text())
        assert report["config"]["p_repeat_session"] == 1.0 and report["config"]["p_false"] == 0.1
        # every session drawn at share 1; those with a failed turn misread a pair (a
        # session without one has nothing to misread, and is not counted)
        repeating = report["run"]["repeating_sessions"]
        assert 1 <= repeating <= 6 and report["run"]["reported_repeated"] >= repeating
        noisy = out / "random-30" / "independent-0.3" / "evidence" / f"seed-{seed}"
        config = json.loads((noisy / "report.json").read_text())["config"]
        assert (config["p_miss"], config["p_repeat_session"]) == (0.3, 0.0)
    assert (out / "kinds.md").read_text().startswith("seeds 3, 4;")
    reports = sorted(p.parent.name for p in out.rglob("seed-*/report.json"))
    assert reports == ["seed-3", "seed-3", "seed-4", "seed-4"]
    assert not [p for p in out.rglob("db") if p.is_dir()]


def test_a_figure_some_seeds_lack_says_how_many_had_it_and_one_seed_has_no_sd():
    """A precision with no claim at 0.6 in one seed of two is the other's, marked (n=1), with
    no sd (one figure has none); the same figure in both seeds is mean ± sd, unmarked."""
    from hag_lab.simulate.seeds import spread_cell

    reports = [
        {"config": {"seed": 1}, "headline": {"p": None, "r": 0.5}},
        {"config": {"seed": 2}, "headline": {"p": 0.9, "r": 0.7}},
    ]
    spread = aggregate_reports(reports, profile="evidence", seeds=[1, 2])["spread"]
    assert spread["p"]["sd"] is None
    assert spread_cell(spread["p"], 2, 2) == "0.90 (n=1)"
    assert spread_cell(spread["r"], 2, 2) == "0.60 ± 0.14"
