"""Does the memory learn? A fixed, seeded simulation and its recovery and calibration figures.

The demo corpus's Cryptography topic with its hidden prerequisite graph, 900 sessions by 30
learners over 30 simulated days, extractor noise p_miss 0.1 / p_false 0.1 (per failed turn), seed 11, on a
private embedded database emptied first (so the figures depend on the code alone). Printed
beside baselines measured in the same run:

- recovery: trusting every struggle the extractor reported (no memory, no reinforcement);
- calibration: the constant predictor at the observed success rate.

A change that makes the memory learn worse shows up as a lower precision or recall, or a
log-loss closer to (or above) its baseline.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

SEED = 11
LEARNERS = 30
SESSIONS = 900
DAYS = 30


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}x"


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def main() -> None:
    """Run the seeded simulation on a throwaway database and print its figures."""
    from hag.operations.corpus import DEMO_CORPUS
    from hag_lab.simulate.experiment import Experiment, run_experiment
    from hag_lab.simulate.run import SimulationConfig
    from hag_lab.simulate.sandbox import private_database
    from hag_lab.simulate.world import cryptography_world

    corpus = json.loads(DEMO_CORPUS.read_text())
    world = cryptography_world(corpus)
    config = SimulationConfig(
        learners=LEARNERS,
        sessions=SESSIONS,
        days=DAYS,
        p_miss=0.1,
        p_false=0.1,
        seed=SEED,
        enrich_every_days=0,
    )
    with tempfile.TemporaryDirectory(prefix="hag-bench-learning-") as tmp:
        started = time.perf_counter()
        with private_database(Path(tmp) / "db"):
            outcome = run_experiment(
                Experiment(
                    world, config, out_dir=Path(tmp) / "report", corpus=corpus, progress=False
                )
            )
        seconds = time.perf_counter() - started
    report = outcome.report
    assert report is not None
    h, run, base = report["headline"], report["run"], report["extractor_baseline"]
    print(
        f"simulation: {run['sessions']} sessions, {run['turns']} turns, seed {SEED}, "
        f"{seconds:.1f} s ({run['turns'] / max(seconds, 1e-9):.0f} turns/s end to end)"
    )
    print(
        f"struggles: {run['true_struggles']} true, {run['reported_true']} reported, "
        f"{run['reported_false']} invented"
    )
    print(
        "\nrecovery of the hidden prerequisite graph     memory   baseline (trust every report)  ratio"
    )
    p06, r06 = h["learned_prereq_precision_at_0.6"], h["learned_prereq_recall_at_0.6"]
    p03, r03 = h["learned_prereq_precision_at_0.3"], h["learned_prereq_recall_at_0.3"]
    bp, br = base["reported_1x"]["precision"], base["reported_1x"]["recall"]
    print(
        f"  learned precision at >= 0.6                  {_f(p06)}    {_f(bp)}                          {_ratio(p06, bp)}"
    )
    print(
        f"  learned precision at >= 0.3                  {_f(p03)}    {_f(bp)}                          {_ratio(p03, bp)}"
    )
    ph = h["learned_prereq_precision_hits_ge_3"]
    bp3 = base["reported_3x"]["precision"]
    print(
        f"  learned precision, seen in >= 3 sessions     {_f(ph)}    {_f(bp3)} (reported >= 3 times)       "
        f"{_ratio(ph, bp3)}"
    )
    print(f"  learned recall at >= 0.6 (missing pairs)     {_f(r06)}")
    print(f"  learned recall at >= 0.3 (missing pairs)     {_f(r03)}")
    print(
        f"  recall of pairs reported at least once      {_f(h['struggled_prereq_recall_at_0.3'])}    "
        f"{_f(br)} (of the whole truth)"
    )
    print(
        f"  direction accuracy at >= 0.3                 {_f(h['learned_prereq_direction_accuracy_at_0.3'])}"
    )
    print(
        f"  whole memory precision / recall at >= 0.6    {_f(h['memory_prereq_precision_at_0.6'])} / "
        f"{_f(h['memory_prereq_recall_at_0.6'])}"
    )
    print(
        "\ncalibration (confidence at use vs outcome)    log-loss  baseline (base rate)  ratio   binned RMSE"
    )
    for kind in ("decision", "entry", "edge"):
        c = report["calibration"][kind]
        print(
            f"  {kind:<43} {_f(c['log_loss'])}     {_f(c['baseline_log_loss'])}                 "
            f"{_ratio(c['log_loss'], c['baseline_log_loss'])}   {_f(c['binned_rmse'])}  (n={c['n']})"
        )


if __name__ == "__main__":
    main()
