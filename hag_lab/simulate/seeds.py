"""Several seeds, and several rule profiles on the same seeds: mean and spread of every figure.

One seed's figures move by about 0.1 between seeds, so a headline figure is the mean over
several seeds with its spread beside it. Each (profile, seed) run is a whole experiment on
its own private embedded database (emptied first), with its own report in
`OUT/<profile>/seed-<seed>/`; the aggregate keeps the single report's `headline` keys (as
means) and adds `spread` (mean, sample sd, min, max per key) and the per-seed values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from hag_lab.report.build import CULL_NOTE, write_json
from hag_lab.report.markdown import fmt
from hag_lab.report.metrics import spread
from hag_lab.simulate.experiment import Experiment, run_experiment
from hag_lab.simulate.run import SimulationConfig
from hag_lab.simulate.world import World


def run_seeds(
    world: World,
    config: SimulationConfig,
    seeds: Sequence[int],
    out: Path,
    *,
    corpus: Mapping[str, Any] | None,
    note: Callable[[str], None] = lambda message: None,
    progress: bool = True,
) -> dict[str, Any]:
    """One profile over `seeds`; writes `OUT/report.json` with the aggregate and returns it."""
    from hag_lab.simulate.sandbox import private_database

    reports = []
    for seed in seeds:
        folder = out / f"seed-{seed}"
        note(f"profile {config.profile or 'as configured'}, seed {seed}: {folder}")
        exp = Experiment(
            world,
            replace(config, seed=seed),
            out_dir=folder,
            name=folder.name,
            corpus=corpus,
            note=note,
            progress=progress,
        )
        with private_database(folder / "db"):
            outcome = run_experiment(exp)
        assert outcome.report is not None
        reports.append(outcome.report)
    aggregate = aggregate_reports(reports, profile=config.profile, seeds=seeds)
    write_json(out / "report.json", aggregate)
    return aggregate


def aggregate_reports(
    reports: Sequence[Mapping[str, Any]], *, profile: str | None, seeds: Sequence[int]
) -> dict[str, Any]:
    """The mean of every numeric headline figure as `headline`, with its spread and values."""
    keys = list(reports[0]["headline"]) if reports else []
    values = {k: [r["headline"].get(k) for r in reports] for k in keys}
    spreads = {k: spread(v) for k, v in values.items()}
    return {
        "profile": profile,
        "seeds": list(seeds),
        "config": {k: v for k, v in reports[0]["config"].items() if k != "seed"} if reports else {},
        "headline": {k: s["mean"] for k, s in spreads.items()},
        "spread": spreads,
        "per_seed": values,
        "notes": {"culls": CULL_NOTE},
    }


def run_compare(
    world: World,
    config: SimulationConfig,
    profiles: Sequence[str],
    seeds: Sequence[int],
    out: Path,
    *,
    corpus: Mapping[str, Any] | None,
    note: Callable[[str], None] = lambda message: None,
    progress: bool = True,
) -> dict[str, Any]:
    """Every profile on the same seeds; writes `OUT/compare.json` and `OUT/compare.md`."""
    results = {
        name: run_seeds(
            world,
            replace(config, profile=name),
            seeds,
            out / name,
            corpus=corpus,
            note=note,
            progress=progress,
        )
        for name in profiles
    }
    comparison = {"profiles": list(profiles), "seeds": list(seeds), "results": results}
    write_json(out / "compare.json", comparison)
    (out / "compare.md").write_text("\n".join(compare_table(comparison)) + "\n")
    return comparison


# The figures the comparison table shows, in order, with their labels.
TABLE_ROWS: tuple[tuple[str, str], ...] = (
    ("learned_prereq_precision_at_0.6", "learned prerequisites ≥ 0.6: precision"),
    ("learned_prereq_recall_at_0.6", "learned prerequisites ≥ 0.6: recall"),
    ("learned_prereq_truth_brier", "learned prerequisites: Brier against the hidden graph"),
    ("learned_prereq_truth_auc", "learned prerequisites: AUC against the hidden graph"),
    ("memory_prereq_precision_at_0.6", "all prerequisites ≥ 0.6: precision"),
    ("memory_prereq_recall_at_0.6", "all prerequisites ≥ 0.6: recall"),
    ("memory_prereq_truth_brier", "all prerequisites: Brier against the hidden graph"),
    ("authored_prereq_false_below_0.5", "wrong authored prerequisites below 0.5"),
    ("authored_prereq_true_below_0.5", "true authored prerequisites below 0.5"),
    ("fallback_precision_at_0.6", "fallback ≥ 0.6: precision"),
    ("leads_to_precision_at_0.6", "leads_to ≥ 0.6: precision"),
    ("decision_log_loss", "decision entries: log-loss against the turn's outcome"),
    ("edge_log_loss", "rendered edges: log-loss against the turn's outcome"),
    ("culls", "edges culled (rendered edges are never culled: not comparable)"),
)


def compare_table(comparison: Mapping[str, Any]) -> list[str]:
    """One markdown table: a row per figure, a column per profile, mean ± sd over the seeds."""
    profiles = comparison["profiles"]
    results = comparison["results"]
    seeds = ", ".join(str(s) for s in comparison["seeds"])
    lines = [
        f"| figure (mean ± sd over seeds {seeds}) | " + " | ".join(profiles) + " |",
        "| --- |" + " ---: |" * len(profiles),
    ]
    for key, label in TABLE_ROWS:
        cells = []
        for name in profiles:
            s = results[name]["spread"].get(key, {})
            cells.append(
                "–" if s.get("mean") is None else f"{fmt(s['mean'], 2)} ± {fmt(s['sd'], 2)}"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines
