"""`hag nightly`, `hag audit culled|restore` and `hag check` as an operator runs them."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from datetime import timedelta

from hag import PROJECT_ROOT
from tests import factories as f

AS_OF = f.NOW
DAY = timedelta(days=1)


def _hag(database_url, *args):
    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        timeout=120,
    )


def _weak_edges(db):
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    ids = [
        f.edge(db, a, b, t, confidence=0.2, source_type="learned", created_at=AS_OF - 95 * DAY)
        for t in ("prerequisite", "related")
    ]
    db.commit()
    return ids


def test_nightly_dry_run_then_run_then_audit_then_restore(db, database_url):
    """The operator's loop: forecast, run, review the culled table, restore the run."""
    ids = _weak_edges(db)
    dry = _hag(database_url, "nightly", "--dry-run", "--as-of", "2026-11-30T12:00:00Z", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["culled"] == 2
    assert db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"] == 2
    db.rollback()

    run = _hag(database_url, "nightly", "--as-of", "2026-11-30T12:00:00Z", "--json")
    assert run.returncode == 0, run.stderr
    run_id = json.loads(run.stdout)["run_id"]

    table = _hag(database_url, "audit", "culled", "--run", run_id)
    assert table.returncode == 0 and "rsa -> modular-arithmetic" in table.stdout
    as_csv = _hag(database_url, "audit", "culled", "--since", "2026-11-30", "--csv")
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert sorted(r["edge_id"] for r in rows) == sorted(map(str, ids))
    none = _hag(database_url, "audit", "culled", "--since", "2099-01-01", "--csv")
    assert none.stdout.splitlines() == [as_csv.stdout.splitlines()[0]]  # the same header
    as_json = json.loads(_hag(database_url, "audit", "culled", "--json").stdout)
    assert {r["run_id"] for r in as_json} == {run_id}

    back = _hag(database_url, "audit", "restore", "--run", run_id, "--json")
    assert back.returncode == 0, back.stderr
    assert sorted(json.loads(back.stdout)["restored"]) == sorted(map(str, ids))


def test_restore_refusal_exits_one_with_the_reason(db, database_url):
    """Restoring an edge whose entry is gone exits 1 and names the reason."""
    ids = _weak_edges(db)
    assert _hag(database_url, "nightly", "--as-of", "2026-11-30T12:00:00Z").returncode == 0
    db.execute("DELETE FROM hag_entries WHERE concept_slug = 'rsa'")
    db.commit()
    result = _hag(database_url, "audit", "restore", str(ids[0]))
    assert result.returncode == 1
    assert "its source entry" in result.stdout and "no longer exists" in result.stdout


def test_restore_needs_exactly_one_target(db, database_url):
    """`hag audit restore` with neither an edge id nor --run is a usage error."""
    result = _hag(database_url, "audit", "restore")
    assert result.returncode != 0 and "exactly one" in result.stderr


def test_bad_as_of_is_refused_in_one_line(db, database_url):
    """An --as-of that is not a timestamp is refused before anything runs."""
    result = _hag(database_url, "nightly", "--as-of", "yesterday-ish")
    assert result.returncode != 0 and "ISO-8601" in result.stderr


def test_check_exits_zero_on_a_sound_memory_and_one_on_a_broken_one(db, database_url):
    """`hag check` passes a sound memory and exits 1 naming the expectation that failed."""
    _weak_edges(db)
    ok = _hag(database_url, "check", "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["success"] is True
    db.execute("UPDATE hag_edges SET source_type = 'imported'")
    db.commit()
    broken = _hag(database_url, "check")
    assert broken.returncode == 1
    assert "edges: expect_column_values_to_be_in_set on source_type" in broken.stdout


def test_nightly_runs_the_suites_after_the_sweep_and_fails_on_a_broken_memory(db, database_url):
    """`hag nightly` sweeps, then checks: an edge of unknown provenance makes it exit 1."""
    _weak_edges(db)
    db.execute("UPDATE hag_edges SET source_type = 'imported' WHERE edge_type = 'related'")
    db.commit()
    result = _hag(database_url, "nightly", "--as-of", "2026-11-30T12:00:00Z", "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["culled"] == 1  # the sweep ran and committed first
    assert "on source_type" in result.stderr
    skipped = _hag(database_url, "nightly", "--no-check", "--as-of", "2026-11-30T12:00:00Z")
    assert skipped.returncode == 0, skipped.stderr


def test_the_command_line_nightly_does_the_flows_upkeep_and_its_dry_run_says_the_guard(db, dials):
    """`hag nightly` folds the search copy's change rows (the flow's upkeep, one code path);
    `--dry-run` prints the guard's verdict without --json, over the limit and under it."""
    from click.testing import CliRunner

    from hag.cli import cli

    _weak_edges(db)
    for step in range(3):  # each write of an entry adds change rows to its sets
        db.execute("UPDATE hag_entries SET confidence = %s", (0.5 + step / 10,))
        db.commit()
    count = "SELECT count(*) AS n FROM hag_entry_search_changes"
    sets = "SELECT count(DISTINCT set_key) AS n FROM hag_entry_search_changes"
    before, kinds = db.execute(count).fetchone()["n"], db.execute(sets).fetchone()["n"]
    db.rollback()
    assert before > kinds  # several rows per set, waiting to be folded
    runner = CliRunner()
    dials(cull_guard_max_edges=1)
    dry = runner.invoke(cli, ["nightly", "--dry-run", "--as-of", AS_OF.isoformat()])
    assert dry.exit_code == 0, dry.output
    assert "big-night guard       the cull would delete 2 edges" in dry.stdout
    assert "a scheduled run would pause" in dry.stdout
    dials(cull_guard_max_edges=1000)
    dry = runner.invoke(cli, ["nightly", "--dry-run", "--as-of", AS_OF.isoformat()])
    assert "big-night guard       under its limits" in dry.stdout
    assert db.execute(count).fetchone()["n"] == before  # a dry run folds nothing
    db.rollback()
    run = runner.invoke(cli, ["nightly", "--no-check", "--as-of", AS_OF.isoformat()])
    assert run.exit_code == 0, run.output
    after = db.execute(count).fetchone()["n"]
    db.rollback()
    assert after == db.execute(sets).fetchone()["n"] < before  # one row per set
    db.rollback()
