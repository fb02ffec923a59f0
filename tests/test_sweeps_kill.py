"""A nightly run killed in the middle of its cull leaves all of the batch culled and audited, or none."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import psycopg
import pytest

from hag import PROJECT_ROOT
from tests import factories as f

AS_OF = f.NOW
APP = "hag-kill-test"
RUN = (
    "from datetime import datetime; from hag.nightly.sweeps import run_nightly; "
    f"run_nightly(as_of=datetime.fromisoformat('{AS_OF.isoformat()}'))"
)


def _big_batch(db, n_edges: int) -> None:
    """`n_edges` weak, old, untraversed learned edges among 500 entries (bulk, no history)."""
    f.entry(db, concept_slug="c-0")
    db.execute("SET LOCAL session_replication_role = replica")  # bulk load: skip history rows
    db.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence, "
        "instruction, embedding) SELECT 'cryptography', 'c-' || i, 'public', 'pattern', 0.8, "
        "'advice ' || i, (SELECT embedding FROM hag_entries LIMIT 1) FROM generate_series(1, 499) i"
    )
    db.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, source_type, "
        "created_at, updated_at) "
        "SELECT s.id, t.id, 'related', 0.1, 'learned', %(old)s, %(old)s "
        "FROM hag_entries s JOIN hag_entries t ON s.id <> t.id LIMIT %(n)s",
        {"old": AS_OF - timedelta(days=100), "n": n_edges},
    )
    db.commit()


def _start(database_url):
    env = {**os.environ, "DATABASE_URL": database_url, "PGAPPNAME": APP}
    return subprocess.Popen([sys.executable, "-c", RUN], env=env, cwd=PROJECT_ROOT)


def _wait_for(db, sql: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = db.execute(sql, {"app": APP}).fetchone()
        db.rollback()
        if found:
            return
        time.sleep(0.01)
    pytest.fail(f"gave up after {timeout} s waiting for: {sql}")


# the run waiting on a lock: only the blocker's row lock can hold it (the cull meets it;
# the statement is not matched by its text, which pg_stat_activity keeps 1 kB of)
CULL_WAITING_ON_LOCK = (
    "SELECT pid FROM pg_stat_activity WHERE application_name = %(app)s AND state = 'active' "
    "AND wait_event_type = 'Lock'"
)
DELETE_RUNNING = (
    "SELECT pid FROM pg_stat_activity WHERE application_name = %(app)s AND state = 'active' "
    "AND query LIKE '%%DELETE FROM hag_edges%%'"
)
BACKEND_GONE = (
    "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = %(app)s)"
)


def _outcome(db, n_edges: int) -> str:
    edges = db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"]
    audit = db.execute("SELECT count(*) AS n FROM hag_edge_audit").fetchone()["n"]
    runs = db.execute("SELECT status, summary FROM hag_runs").fetchall()
    db.rollback()
    if (edges, audit) == (n_edges, 0):
        assert all(r["status"] == "running" for r in runs)  # the crash is visible, nothing else
        return "none"
    assert (edges, audit) == (0, n_edges), f"half a cull: {edges} edges left, {audit} audit rows"
    assert [(r["status"], r["summary"]["culled"]) for r in runs] == [("done", n_edges)]
    return "all"


def test_kill_while_the_cull_is_half_done_culls_nothing(db, database_url):
    """SIGKILL while the cull waits on a row half-way through its rows: no edge culled, no
    audit row."""
    n = 60_000
    _big_batch(db, n)
    with psycopg.connect(database_url) as blocker:
        # Lock an edge in the middle of the heap: the cull has deleted the rows it met before
        # it (in its transaction) and waits there, mid-statement, when the client is killed.
        blocker.execute(
            "SELECT id FROM hag_edges ORDER BY ctid OFFSET %s LIMIT 1 FOR UPDATE", (n // 2,)
        )
        proc = _start(database_url)
        try:
            _wait_for(db, CULL_WAITING_ON_LOCK)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        blocker.rollback()
    _wait_for(db, BACKEND_GONE)
    assert _outcome(db, n) == "none"


def test_kill_at_any_moment_of_a_running_cull_is_all_or_nothing(db, database_url):
    """SIGKILL as soon as the cull's DELETE is seen running: afterwards all culled and audited, or none."""
    n = 200_000
    _big_batch(db, n)
    proc = _start(database_url)
    try:
        _wait_for(db, DELETE_RUNNING)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    _wait_for(db, BACKEND_GONE)
    assert _outcome(db, n) in ("none", "all")
