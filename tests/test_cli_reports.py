"""What the operator reads: the enrichment cost column, one orphan rule, the demo's output,
the report's plots and tables, and where the embedded databases are."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from hag import PROJECT_ROOT
from hag.cli import cli
from hag.enrichment import enrich
from hag.enrichment.report import cost_table
from hag.operations import corpus
from hag.storage import db as hdb
from tests import factories as f
from tests.fix_enrichment import MODEL, crypto_graph, reply

PRICED = f"{MODEL}:2.5:10"  # USD per million prompt / completion tokens


def test_the_cost_ledger_prices_each_call_at_its_models_dial_price(db, dials, llm):
    """cost_usd = prompt x prompt price + completion x completion price, per call and in total;
    latencies are whole milliseconds; an unpriced model's cost is unknown, not zero."""
    crypto_graph(db)
    dials(enrichment_prices_usd_per_million_tokens=[PRICED])
    llm.queue_chat(
        reply(("rsa", "modular-arithmetic", "prerequisite")),
        prompt_tokens=400_000,
        completion_tokens=20_000,
    )
    summary = enrich(model=MODEL, conn=db)
    rows = cost_table(summary)
    assert [r["cost_usd"] for r in rows] == [pytest.approx(1.2), pytest.approx(1.2)]
    assert all(isinstance(r["latency_ms"], int) for r in rows)
    assert summary.cost()["cost_usd"] == pytest.approx(1.2)
    dials(enrichment_prices_usd_per_million_tokens=["some-other-model:1:1"])
    llm.queue_chat(reply(("rsa", "prime-numbers", "related")))
    f.entry(db, concept_slug="steganography", embedding=f.vec(0.5, axis=5))
    db.commit()
    unpriced = enrich(model=MODEL, conn=db)
    assert unpriced.cost()["cost_usd"] is None and cost_table(unpriced)[0]["cost_usd"] is None


def test_a_malformed_price_is_refused_by_name(db):
    """A price entry that is not model:prompt:completion is a one-line refusal (exit 1)."""
    result = CliRunner().invoke(
        cli, ["settings", "set", "enrichment_prices_usd_per_million_tokens", "gpt-4o-mini:cheap"]
    )
    assert result.exit_code == 1
    assert "enrichment_prices_usd_per_million_tokens" in str(result.exception)


def test_the_demo_summary_and_enrich_count_orphans_alike(db):
    """`_unanchored_` is no orphan in the demo's topic summary, as in `hag enrich --dry-run`."""
    from hag_lab.demo import graph_summary

    corpus.load_file(corpus.DEMO_CORPUS)
    db.commit()
    dry = CliRunner().invoke(cli, ["enrich", "--topic", "cryptography", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    sent = json.loads(dry.stdout)["orphans"]
    [crypto] = [t for t in graph_summary()["topics"] if t["topic_id"] == "cryptography"]
    assert crypto["orphans"] == len(sent) > 0
    assert "_unanchored_" not in {o["concept_slug"] for o in sent}
    unanchored = db.execute(
        "SELECT count(*) AS n FROM hag_entries e WHERE e.concept_slug = '_unanchored_' "
        "AND e.topic_id = 'cryptography' AND NOT EXISTS (SELECT 1 FROM hag_edges g "
        "WHERE g.source_entry_id = e.id OR g.target_entry_id = e.id)"
    ).fetchone()["n"]
    assert unanchored == 1  # the corpus has one, edgeless: the old count included it


def test_progress_off_a_terminal_is_plain_lines(capsys):
    """Off a terminal the progress is a few whole lines, never a carriage return."""
    from hag_lab.simulate.run import Progress

    bar = Progress("simulating", 700)
    for done in range(1, 701):
        bar.update(done, f"day {done // 7}")
    bar.close()
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) == Progress.PLAIN_LINES
    assert lines[-1].startswith("simulating: 700/700 day 100")


def test_the_reports_extra_table_prints_seconds_as_words_not_json():
    """report.md's "seconds" row reads `load 1.5, simulate 20.0`, not a JSON object."""
    from hag_lab.report.markdown import _cell

    cell = _cell({"load": 1.54, "simulate": 20.0})
    assert cell == "load 1.5, simulate 20.0"
    assert "{" not in cell and '"' not in cell


def test_graph_labels_never_overlap():
    """Every node label of the three graph panels has a box that meets no other label's."""
    from hag_lab.report.metrics import EdgeFact
    from hag_lab.report.plots import graph_figure
    from hag_lab.simulate.world import cryptography_world

    world = cryptography_world(json.loads(corpus.DEMO_CORPUS.read_text()))
    facts = [EdgeFact(s, t, "prerequisite", "seed", 0.9) for s, t in sorted(world.prerequisites)]
    drift = [
        EdgeFact(world.slugs[0], x, "related", "learned", 0.5)
        for x in ("buffer-overflow-attacks", "_unanchored_", "sql-injection")
    ]
    fig = graph_figure(world, facts, facts + drift)
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:3]:
        boxes = [t.get_window_extent(renderer) for t in ax.texts if hasattr(t, "xyann")]
        assert len(boxes) == len(world.slugs) + 3
        clashes = [
            (i, j) for i in range(len(boxes)) for j in range(i) if boxes[i].overlaps(boxes[j])
        ]
        assert clashes == []


def test_keep_running_prints_a_runnable_command_and_how_to_stop(tmp_path):
    """The printed command runs from any shell (no bare `hag`) and names `hag db stop`."""
    from hag_lab.demo import keep_running_lines

    url = f"postgresql://postgres:@/postgres?host={tmp_path}"
    lines = keep_running_lines(url, tmp_path)
    query = next(line for line in lines if " retrieve " in line).strip()
    stop = next(line for line in lines if " db stop" in line).strip()
    words = shlex.split(query)
    assert words[0] == f"DATABASE_URL={url}"
    assert Path(words[1]).is_absolute() and os.access(words[1], os.X_OK)
    assert shlex.split(stop)[:3] == [f"DATABASE_URL={url}", words[1], "db"]
    help_run = subprocess.run([words[1], "retrieve", "--help"], capture_output=True, timeout=60)
    assert help_run.returncode == 0


def _hag(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=PROJECT_ROOT,
        timeout=180,
    )


def test_db_stop_reaches_the_server_database_url_names_and_all_stops_every_one(tmp_path):
    """`DATABASE_URL=<embedded url> hag db stop` stops that server; `--all` stops each one
    under HAG_DATA_DIR; starting the default one is said on stderr."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "HAG_DATABASE_URL")}
    env["HAG_DATA_DIR"] = str(tmp_path / "hagdata")
    demo_pgdata = tmp_path / "hagdata" / "demo" / "pgdata"
    try:
        started = _hag(env, "db", "start")
        assert started.returncode == 0, started.stderr
        default_pgdata = tmp_path / "hagdata" / "pgdata"
        assert (
            f"hag: DATABASE_URL is unset: starting the embedded database in {default_pgdata}"
            in started.stderr
        )
        assert "starting" not in _hag(env, "db", "url").stderr  # running: nothing to say
        demo_env = {**env, "HAG_DATA_DIR": str(demo_pgdata.parent)}  # as the demo's sandbox
        demo_started = _hag(demo_env, "db", "start")
        assert demo_started.returncode == 0, demo_started.stderr
        demo_url = demo_started.stdout.strip()
        assert hdb.embedded_pgdata(demo_url) == demo_pgdata
        stopped = _hag({**env, "DATABASE_URL": demo_url}, "db", "stop")
        assert stopped.stdout.strip() == f"stopped {demo_pgdata}", stopped.stderr
        assert hdb.running_postmaster(demo_pgdata) is None
        assert hdb.running_postmaster(default_pgdata) is not None
        assert _hag(demo_env, "db", "start").returncode == 0
        every = _hag(env, "db", "stop", "--all")
        assert sorted(every.stdout.split()) == sorted(
            ["stopped", str(demo_pgdata), "stopped", str(default_pgdata)]
        )
        assert hdb.running_postmaster(demo_pgdata) is None
        assert hdb.running_postmaster(default_pgdata) is None
    finally:
        _hag(env, "db", "stop", "--all")


def test_db_stop_leaves_a_server_it_did_not_start_alone(database_url):
    """A DATABASE_URL naming an ordinary server (host and port) is not stopped."""
    env = {**os.environ, "DATABASE_URL": "postgresql://someone@db.example:5432/memory"}
    result = _hag(env, "db", "stop")
    assert result.returncode == 0
    assert "DATABASE_URL names a server hag did not start: nothing to stop" in result.stderr


def test_settings_list_shows_bounds_and_readers_without_json(db):
    """The plain listing has each dial's bounds and reader, as the registry states them, and
    ends with the profile the dials match."""
    from hag.settings import REGISTRY

    result = CliRunner().invoke(cli, ["settings", "list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["key", "value", "bounds", "reader", "description"]
    assert lines[-1] == "profile: seed"  # every rule dial at the seed's value
    rows = {line.split()[0]: line.split() for line in lines[1:-1]}
    assert set(rows) == set(REGISTRY)
    cull = rows["cull_max_confidence"]
    assert cull[1:5] == ["0.35", "[0,", "1]", REGISTRY["cull_max_confidence"].consumer]
    limit = rows["history_default_limit"]
    assert limit[1:5] == ["50", "[1,", "100000]", "hag/cli/history_cmd.py"]
