"""One experiment end to end: a starting memory, the simulation, optional checks, the report.

Shared by `hag simulate`, `hag demo` and `bench/bench_learning.py`, so the three tell the
same story with different sizes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hag_lab.simulate.run import SimulationConfig, SimulationRun, simulate
from hag_lab.simulate.world import World, world_corpus

if TYPE_CHECKING:
    from datetime import datetime

    from hag.quality import CheckResult


@dataclass
class Experiment:
    world: World
    config: SimulationConfig
    out_dir: Path | None = None
    name: str | None = None
    corpus: Mapping[str, Any] | None = None  # None: one public entry per concept, no edges
    checks: bool = False
    progress: bool = True
    note: Callable[[str], None] = field(default=lambda message: None)


@dataclass
class Outcome:
    run: SimulationRun
    report: dict[str, Any] | None
    seconds: dict[str, float]
    checks: Any = None


def load_starting_memory(world: World, corpus: Mapping[str, Any] | None) -> dict[str, int]:
    """Write the starting corpus through the corpus loader (the only write outside ingest)."""
    from hag.operations.corpus import load, parse
    from hag.storage import db
    from hag.vectors.embeddings import get_embedder

    data = dict(corpus) if corpus is not None else world_corpus(world)
    with db.connect() as conn:
        report = load(conn, parse(data, "starting corpus"), get_embedder().dim)
    return report.as_dict()


def set_profile(name: str | None, *, at: datetime) -> list[tuple[str, Any, Any]]:
    """Set a rule profile on the configured database before a run (None: leave the dials),
    as `hag settings profile` does: every edge the profile's rules own re-weighed at once,
    its history rows at `at` (the run's start)."""
    if name is None:
        return []
    from hag.evidence.reweigh import move_to_profile
    from hag.storage import db

    with db.connect() as conn:
        move = move_to_profile(conn, name, by="simulate", at=at)
        conn.commit()
    return move.changed


def run_checks() -> CheckResult:
    """The expectation suites (Great Expectations; imported only here: it is slow to import)."""
    from hag import quality

    return quality.run_all()


def run_experiment(exp: Experiment) -> Outcome:
    """Load, simulate, check, report (on whatever database is configured now)."""
    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    loaded = load_starting_memory(exp.world, exp.corpus)
    seconds["load"] = time.monotonic() - t0
    exp.note(
        f"starting memory: {loaded['entries']} entries, {loaded['edges']} edges "
        f"({loaded['embedded']} embedded)"
    )
    changed = set_profile(exp.config.profile, at=exp.config.start)
    if exp.config.profile is not None:
        exp.note(f"profile {exp.config.profile}: {len(changed)} dial(s) changed")
    t0 = time.monotonic()
    run = simulate(exp.world, exp.config, progress=exp.progress)
    seconds["simulate"] = time.monotonic() - t0
    checks = None
    extra: dict[str, Any] = {}
    if exp.checks:
        t0 = time.monotonic()
        exp.note("running the expectation suites ...")
        checks = run_checks()
        seconds["checks"] = time.monotonic() - t0
        failures = list(getattr(checks, "failures", []) or [])
        extra["expectation suites"] = (
            "all passed"
            if getattr(checks, "success", False)
            else f"{len(failures)} failure(s): " + "; ".join(map(str, failures[:5]))
        )
    report = None
    if exp.out_dir is not None:
        from hag_lab.report.build import write_report

        t0 = time.monotonic()
        extra["seconds"] = {k: round(v, 1) for k, v in {**seconds, **run.seconds}.items()}
        report = write_report(run, exp.out_dir, name=exp.name, extra=extra)
        seconds["report"] = time.monotonic() - t0
    return Outcome(run, report, seconds, checks)
