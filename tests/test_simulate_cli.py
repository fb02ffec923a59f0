"""`hag simulate` on the command line, and the simulation through the Prefect flows."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np

from hag import PROJECT_ROOT
from hag_lab.simulate.experiment import load_starting_memory
from hag_lab.simulate.run import SimulationConfig, simulate
from hag_lab.simulate.world import random_world


def test_simulate_command_writes_a_report_and_prints_the_headline(database_url, db, tmp_path):
    """A tiny random-world run on the configured database: exit 0, JSON headline, report folder."""
    out = tmp_path / "sim"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "hag.cli",
            "simulate",
            "--world",
            "random",
            "--concepts",
            "6",
            "--learners",
            "3",
            "--sessions",
            "12",
            "--days",
            "2",
            "--noise",
            "0.1",
            "--seed",
            "4",
            "--enrich-every",
            "0",
            "--database",
            "configured",
            "--out",
            str(out),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DATABASE_URL": database_url},
    )
    assert result.returncode == 0, result.stderr
    headline = json.loads(result.stdout)
    assert "learned_prereq_precision_at_0.6" in headline and "decision_log_loss" in headline
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["sessions"] == 12 and report["config"]["p_miss"] == 0.1
    assert (out / "report.md").exists() and (out / "graph.png").exists()
    sessions = db.execute(
        "SELECT count(*) AS n FROM hag_sessions WHERE status = 'processed'"
    ).fetchone()
    assert sessions["n"] == 12


def test_simulate_command_refuses_a_bad_noise(tmp_path):
    """--noise outside [0, 1] is refused with a one-line reason and a non-zero exit."""
    result = subprocess.run(
        [sys.executable, "-m", "hag.cli", "simulate", "--noise", "1.5", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=PROJECT_ROOT,
    )
    assert result.returncode != 0 and "--noise" in result.stderr


def test_simulation_through_the_flows_matches_the_direct_calls(db, prefect_harness):
    """The same seeded day through the Prefect flows leaves the same learned graph as direct calls."""
    from tests.fix_db import reset_database

    world = random_world(np.random.default_rng(2), 6)
    graphs = []
    for use_flows in (False, True):
        reset_database(db)
        load_starting_memory(world, None)
        run = simulate(
            world,
            SimulationConfig(
                learners=3, sessions=8, days=1, seed=2, p_false=0.2, use_flows=use_flows
            ),
            progress=False,
        )
        graphs.append(
            sorted(
                (
                    e["source_slug"],
                    e["target_slug"],
                    e["edge_type"],
                    e["hit_count"],
                    round(e["confidence"], 6),
                )
                for e in run.end.edges
            )
        )
        assert run.days[0].process  # the flow's summary came back
    assert graphs[0] == graphs[1] and graphs[0]


def test_demo_json_prints_one_json_document(db, database_url, tmp_path, monkeypatch):
    """`hag demo --json` prints only the JSON summary on stdout (the human lines stay off it)."""
    from contextlib import contextmanager
    from functools import partial

    from click.testing import CliRunner

    import hag_lab.demo
    from hag_lab.cli.demo_cmd import demo
    from hag_lab.simulate import sandbox

    @contextmanager
    def configured_database(folder, *, keep_running=False):
        yield database_url  # the test database instead of a second embedded server

    monkeypatch.setattr(sandbox, "private_database", configured_database)
    small = partial(
        hag_lab.demo.run_demo,
        learners=2,
        sessions=4,
        days=1,
        checks=False,
        progress=False,
        out=tmp_path / "demo",
        folder=tmp_path / "db",
    )
    monkeypatch.setattr(hag_lab.demo, "run_demo", small)
    result = CliRunner().invoke(demo, ["--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (
        summary["run"]["sessions"] == 4 and "learned_prereq_precision_at_0.6" in summary["headline"]
    )
