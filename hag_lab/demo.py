"""The end-to-end demo: what the README's first command runs.

The whole story on the embedded defaults: a private embedded database (`.hag/demo`, emptied
first, so the figures depend only on the seed), the demo corpus, a few thousand simulated
sessions over simulated weeks (every turn read through `retrieve`, every session through
ingest and session-end processing), the nightly sweeps after every simulated day with
`as_of` = that day, enrichment of orphans every simulated week, the expectation suites, and
the report on whether the memory learned (`reports/demo/`).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from hag import work_dir
from hag.storage import db
from hag.storage.sqlfiles import query

DEMO_SEED = 7
DEMO_LEARNERS = 60
DEMO_SESSIONS = 2500
DEMO_DAYS = 100  # past the 90-day cull age, so edges learned early can be culled late
DEMO_P_MISS = 0.1
DEMO_P_FALSE = 0.1
DEMO_ENRICH_EVERY = 7


def graph_summary() -> dict[str, Any]:
    with db.connect() as conn:
        graphs = conn.execute(query("corpus", "graph_summary")).fetchall()
        topics = conn.execute(query("corpus", "topic_summary")).fetchall()
    return {"graphs": graphs, "topics": topics}


def print_summary(summary: dict[str, Any], echo: Callable[[str], None] = click.echo) -> None:
    echo("\nThe three graphs (and the visual bucket):")
    for g in summary["graphs"]:
        echo(
            f"  {g['graph']:<8} {g['entries']:>5} entries  (proven {g['proven']}, pattern {g['pattern']}, "
            f"candidate {g['candidate']}, archived {g['archived']}) across {g['topics']} topic(s)"
        )
    echo("\nTopics:")
    for t in summary["topics"]:
        echo(
            f"  {t['topic_id']:<16} {t['entries']:>4} entries {t['edges']:>4} edges "
            f"(seed {t['seed_edges']}, learned {t['learned_edges']}, enriched {t['enriched_edges']}), "
            f"{t['orphans']} orphan(s)"
        )


def hag_command() -> str:
    """A `hag` any shell can run: the environment's own script by its path, else `uv run hag`.

    Bare `hag` is on PATH only inside `uv run` or an activated environment.
    """
    script = Path(sys.executable).parent / "hag"
    return shlex.quote(str(script)) if script.is_file() else "uv run hag"


def keep_running_lines(url: str, pgdata: Path) -> list[str]:
    """What `--keep-running` tells the operator: a runnable query, and how to stop it."""
    hag = hag_command()
    env = f"DATABASE_URL={shlex.quote(url)}"
    return [
        "",
        f"the demo's database is still running (data in {pgdata}); query it with",
        f"  {env} {hag} retrieve --topic cryptography --learner ada "
        "--message 'why does RSA need modular arithmetic?'",
        "and stop it with",
        f"  {env} {hag} db stop      (or `{hag} db stop --all`, which `make clean` runs)",
    ]


def run_demo(
    *,
    seed: int = DEMO_SEED,
    learners: int = DEMO_LEARNERS,
    sessions: int = DEMO_SESSIONS,
    days: int = DEMO_DAYS,
    out: Path | None = None,
    folder: Path | None = None,
    checks: bool = True,
    progress: bool = True,
    keep_running: bool = False,
    quiet: bool = False,
    note: Callable[[str], None],
) -> dict[str, Any]:
    """Run the whole story and return the summary (graphs before/after and the headline).

    `note`: where progress lines go (the command line's stderr). `quiet`: the human summary
    goes there too, leaving stdout to the caller (`--json`).
    """
    from hag.operations.corpus import DEMO_CORPUS
    from hag.vectors.embeddings import announce
    from hag_lab.report.build import summary_lines
    from hag_lab.simulate.experiment import Experiment, run_experiment
    from hag_lab.simulate.run import SimulationConfig
    from hag_lab.simulate.sandbox import private_database
    from hag_lab.simulate.world import cryptography_world

    say = note if quiet else click.echo

    out = out or work_dir() / "reports" / "demo"
    folder = folder or work_dir() / ".hag" / "demo"
    announce()
    corpus = json.loads(DEMO_CORPUS.read_text())
    world = cryptography_world(corpus)
    config = SimulationConfig(
        learners=learners,
        sessions=sessions,
        days=days,
        p_miss=DEMO_P_MISS,
        p_false=DEMO_P_FALSE,
        seed=seed,
        enrich_every_days=DEMO_ENRICH_EVERY,
    )
    note(f"demo database: a fresh embedded PostgreSQL in {folder}")
    with private_database(folder, keep_running=keep_running) as url:
        note(
            f"loading the demo corpus, then {sessions} sessions by {learners} simulated learners "
            f"over {days} simulated days (seed {seed})"
        )
        experiment = Experiment(
            world,
            config,
            out_dir=out,
            name="demo",
            corpus=corpus,
            checks=checks,
            progress=progress,
            note=note,
        )
        outcome = run_experiment(experiment)
        after = graph_summary()
    print_summary(after, say)
    say("")
    assert outcome.report is not None
    for line in summary_lines(outcome.report, out):
        say(line)
    if keep_running:
        for line in keep_running_lines(url, folder / "pgdata"):
            say(line)
    return {
        "headline": outcome.report["headline"],
        "run": outcome.report["run"],
        "report": str(out / "report.md"),
        **after,
    }
