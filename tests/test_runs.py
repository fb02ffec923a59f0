"""Run ids an operator can use (either id, git-style prefixes), runs left behind marked
abandoned, the big-night guard's rule, and restore's dry run, without Prefect."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import psycopg
import pytest
from click.testing import CliRunner

from hag.errors import NotFoundError, ValidationError
from hag.nightly import audit, sweeps
from hag.storage import runs
from tests import factories as f

AS_OF = f.NOW
DAY = timedelta(days=1)


def _weak_edges(db, n: int) -> list[uuid.UUID]:
    """`n` old, weak, untraversed learned edges (all cullable), between `n + 1` entries."""
    ids = f.cullable_chain(db, n, AS_OF)
    db.commit()
    return ids


def _run_row(db, run_id: uuid.UUID, flow_run_id: uuid.UUID | None = None) -> None:
    db.execute(
        "INSERT INTO hag_runs (run_id, kind, flow_run_id, status) VALUES (%s, 'nightly', %s, 'done')",
        (run_id, flow_run_id),
    )
    db.commit()


def test_resolve_takes_either_id_and_unique_prefixes_of_both(db):
    """A run id, its flow-run id, and unique prefixes of each (dashes or not) name the same run."""
    run, flow_run = uuid.uuid4(), uuid.uuid4()
    _run_row(db, run, flow_run)
    for typed in (
        str(run),
        str(flow_run),
        str(run)[:8],
        str(flow_run)[:6].upper(),
        str(run).replace("-", "")[:12],
        str(flow_run)[:13],
    ):
        assert runs.resolve(typed, conn=db) == run, typed


def test_a_retried_flow_runs_first_run_is_named_by_its_own_id(db):
    """A flow run Prefect retried made two runs: the first has the flow run's id as its own,
    the retry a new id under the same flow run. The flow run's id, whole or by the ending
    listings print, names the first; the retry's own id names the retry."""
    flow_run, retry = uuid.uuid4(), uuid.uuid4()
    _run_row(db, flow_run, flow_run)
    _run_row(db, retry, flow_run)
    for typed in (str(flow_run), runs.short(flow_run), str(flow_run)[:13]):
        assert runs.resolve(typed, conn=db) == flow_run, typed
    assert runs.resolve(runs.short(retry), conn=db) == retry
    # another flow run sharing the digits typed is no retry of the first: still ambiguous
    other_flow = uuid.UUID(str(flow_run)[:9] + "ffff-4fff-8fff-ffffffffffff")
    _run_row(db, uuid.uuid4(), other_flow)
    with pytest.raises(ValidationError, match="ambiguous"):
        runs.resolve(str(flow_run)[:8], conn=db)


def test_resolve_refuses_unknown_ambiguous_short_and_malformed_ids(db):
    """Unknown is NotFoundError; ambiguous names the candidates by their endings; < 4 digits
    or non-hex is refused."""
    a = uuid.UUID("abcd1111-0000-4000-8000-0000000000a1")
    b = uuid.UUID("abcd2222-0000-4000-8000-0000000000b2")
    _run_row(db, a)
    _run_row(db, b)
    with pytest.raises(NotFoundError, match="no run 'ffff0000'"):
        runs.resolve("ffff0000", conn=db)
    with pytest.raises(
        ValidationError, match=r"ambiguous: it matches 000000a1 \(nightly, .*000000b2"
    ):
        runs.resolve("abcd", conn=db)
    assert runs.resolve("abcd2", conn=db) == b
    with pytest.raises(ValidationError, match="too short"):
        runs.resolve("abc", conn=db)
    with pytest.raises(ValidationError, match="not a run id"):
        runs.resolve("nightly-0230", conn=db)


def test_time_ordered_ids_sharing_their_start_are_told_apart_by_their_endings(db):
    """Scheduled runs' ids share their first 8 digits: that prefix is refused as ambiguous in
    one line naming each run's ending; the ending listings print, or a longer prefix, finds one."""
    batch = [uuid.UUID(f"01a233a7-{n:04x}-7000-8000-{n:012x}") for n in (0x1B2C, 0x1B2D)]
    for run in batch:
        _run_row(db, run)
    with pytest.raises(ValidationError) as refused:
        runs.resolve("01a233a7", conn=db)
    message = str(refused.value)
    assert "\n" not in message and all(runs.short(r) in message for r in batch), message
    assert [runs.short(r) for r in batch] == ["00001b2c", "00001b2d"]
    for run in batch:
        assert runs.resolve(runs.short(run), conn=db) == run
        assert runs.resolve(str(run)[:13], conn=db) == run


def test_a_flow_runs_run_takes_its_id_and_a_retry_makes_its_own(db):
    """A run under a flow run has the flow run's id; the same flow run again gets a new id."""
    _weak_edges(db, 1)
    flow_run = uuid.uuid4()
    first = sweeps.sweep(db, as_of=AS_OF, flow_run_id=flow_run)
    again = sweeps.sweep(db, as_of=AS_OF, flow_run_id=flow_run)
    assert first.run_id == flow_run and again.run_id not in (None, flow_run)
    assert "flow run" not in sweeps.render_markdown(first)
    assert f"retry of Prefect flow run `{flow_run}`" in sweeps.render_markdown(again)
    outside = sweeps.sweep(db, as_of=AS_OF)
    assert outside.run_id is not None and outside.flow_run_id is None


def test_hag_runs_lists_kind_status_id_and_counts(db, dials):
    """`hag runs` lists the newest runs (its dial, or --limit) with the short ids and counts;
    --json gives every column; a restore writes a run row of its own."""
    from hag.cli import cli

    _weak_edges(db, 2)
    night = sweeps.sweep(db, as_of=AS_OF)
    restored = uuid.uuid4()
    audit.restore(run_id=str(night.run_id), flow_run_id=restored, conn=db)
    runner = CliRunner()
    listing = runner.invoke(cli, ["runs"])
    assert listing.exit_code == 0, listing.output
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["kind", "status", "id", "started", "ended", "counts"]
    assert lines[1].split()[:3] == ["restore", "done", runs.short(restored)]
    assert "restored 2" in lines[1]
    assert lines[2].split()[:3] == ["nightly", "done", runs.short(night.run_id)]
    assert "culled 2" in lines[2]
    dials(runs_default_limit=1)
    assert len(runner.invoke(cli, ["runs"]).stdout.splitlines()) == 2
    as_json = json.loads(runner.invoke(cli, ["runs", "--json", "--limit", "5"]).stdout)
    assert [(r["kind"], r["run_id"]) for r in as_json] == [
        ("restore", str(restored)),
        ("nightly", str(night.run_id)),
    ]
    assert (
        json.loads(runner.invoke(cli, ["runs", "--json", "--kind", "nightly"]).stdout)[0][
            "summary"
        ]["culled"]
        == 2
    )
    history = db.execute(
        "SELECT DISTINCT run_id FROM hag_confidence_history WHERE reason LIKE 'restored%%'"
    ).fetchall()
    db.rollback()
    assert [r["run_id"] for r in history] == [restored]  # the restore names its run


def test_short_run_ids_printed_by_audit_culled_are_accepted_back_by_restore(db):
    """The 8-digit run id `hag audit culled` prints restores that run; an unknown run is rc 1."""
    from hag.cli import cli

    ids = _weak_edges(db, 2)
    before = {r["id"]: dict(r) for r in db.execute("SELECT * FROM hag_edges").fetchall()}
    run = sweeps.sweep(db, as_of=AS_OF)
    cli_runner = CliRunner()
    listing = cli_runner.invoke(cli, ["audit", "culled"])
    assert listing.exit_code == 0, listing.output
    printed = {line.split()[2] for line in listing.stdout.splitlines()[1:]}
    assert printed == {runs.short(run.run_id)}
    unknown = cli_runner.invoke(cli, ["audit", "culled", "--run", "ffffffff"])
    assert isinstance(unknown.exception, NotFoundError)  # `hag` prints it on one line, rc 1
    assert "no run 'ffffffff'" in str(unknown.exception)
    dry = cli_runner.invoke(
        cli, ["audit", "restore", "--run", printed.pop(), "--dry-run", "--json"]
    )
    assert dry.exit_code == 0, dry.output
    assert sorted(json.loads(dry.stdout)["restored"]) == sorted(map(str, ids))
    assert db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"] == 0
    db.rollback()
    back = cli_runner.invoke(cli, ["audit", "restore", "--run", runs.short(run.run_id)])
    assert back.exit_code == 0, back.output
    assert {r["id"]: dict(r) for r in db.execute("SELECT * FROM hag_edges").fetchall()} == before


def test_restore_takes_short_edge_ids_and_refuses_unknown_ones(db):
    """An edge's printed ending restores it alone; an id that was never culled is NotFoundError."""
    ids = _weak_edges(db, 2)
    sweeps.sweep(db, as_of=AS_OF)
    result = audit.restore(edge_id=[runs.short(ids[1])], conn=db)
    assert result.restored == [ids[1]]
    assert [r["id"] for r in db.execute("SELECT id FROM hag_edges").fetchall()] == [ids[1]]
    with pytest.raises(NotFoundError, match="no culled edge has this id"):
        audit.restore(edge_id=str(uuid.uuid4()), conn=db)


def test_a_dry_run_records_nothing_and_shows_no_run_id(db):
    """A nightly dry run writes no run row, its summary has no run id, its report shows none."""
    _weak_edges(db, 2)
    summary = sweeps.sweep(db, as_of=AS_OF, dry_run=True)
    assert summary.run_id is None and summary.culled == 2
    assert "Run id" not in sweeps.render_markdown(summary)
    assert db.execute("SELECT count(*) AS n FROM hag_runs").fetchone()["n"] == 0


def test_a_run_left_running_by_a_dead_process_is_marked_abandoned(db, database_url):
    """A `running` row nobody holds is marked abandoned with when and why; a held one is left alone."""
    dead, alive = uuid.uuid4(), uuid.uuid4()
    for run_id in (dead, alive):
        db.execute("INSERT INTO hag_runs (run_id, kind) VALUES (%s, 'session_end')", (run_id,))
    db.commit()
    with psycopg.connect(database_url) as holder:
        runs.hold(holder, alive)  # a live run's process, its liveness lock in an open transaction
        summary = sweeps.sweep(db, as_of=AS_OF)
        rows = {
            r["run_id"]: r
            for r in db.execute("SELECT run_id, status, finished_at, status_note FROM hag_runs")
        }
        db.rollback()
    assert rows[dead]["status"] == "abandoned"
    assert rows[dead]["finished_at"] is not None
    assert "process is gone" in rows[dead]["status_note"]
    assert (rows[alive]["status"], rows[alive]["finished_at"]) == ("running", None)
    assert rows[summary.run_id]["status"] == "done"


def test_a_killed_nightly_run_is_marked_abandoned_by_the_next_run(db, database_url):
    """SIGKILL mid-cull leaves the row running; the next nightly run marks it abandoned."""
    import os
    import signal

    from tests import test_sweeps_kill as kill

    kill._big_batch(db, 2000)
    with psycopg.connect(database_url) as blocker:
        blocker.execute("SELECT id FROM hag_edges ORDER BY ctid OFFSET 1000 LIMIT 1 FOR UPDATE")
        proc = kill._start(database_url)
        try:
            kill._wait_for(db, kill.CULL_WAITING_ON_LOCK)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        blocker.rollback()
    kill._wait_for(db, kill.BACKEND_GONE)
    [killed] = db.execute("SELECT run_id, status FROM hag_runs").fetchall()
    db.rollback()
    assert killed["status"] == "running"
    later = sweeps.sweep(db, as_of=AS_OF)
    rows = {r["run_id"]: r for r in db.execute("SELECT run_id, status, status_note FROM hag_runs")}
    db.rollback()
    assert rows[killed["run_id"]]["status"] == "abandoned"
    assert rows[later.run_id]["status"] == "done" and later.culled == 2000


@pytest.mark.parametrize(
    ("forecast", "total", "dials", "trips"),
    [
        (1001, 1_000_000, {}, True),  # past the count (default 1000)
        (1000, 1_000_000, {}, False),
        (50, 400, {}, True),  # 12.5% of all edges, at least 50 culled
        (49, 100, {}, False),  # a large share, but a handful: no big night
        (10, 20, {"cull_guard_min_edges": 5}, True),
        (5000, 10_000, {"cull_guard_max_edges": 0, "cull_guard_max_share": 1.0}, False),
    ],
)
def test_guard_reason_trips_on_count_or_share(forecast, total, dials, trips):
    """The guard trips past the count dial, or past the share dial from cull_guard_min_edges on."""
    from hag import settings

    values = settings.defaults().with_overrides(**dials)
    assert (sweeps.guard_reason(forecast, total, values) is not None) == trips


def _big_night(db, dials):
    """Three cullable edges and a promotable candidate; the guard set to trip past 2 edges."""
    ids = _weak_edges(db, 3)
    candidate = f.entry(
        db, concept_slug="primes", maturity="candidate", confidence=0.6, created_at=AS_OF - 20 * DAY
    )
    db.commit()
    dials(cull_guard_max_edges=2)
    return ids, candidate


@pytest.mark.parametrize("approved", [True, False])
def test_a_big_night_asks_first_and_culls_exactly_the_forecast_or_nothing(db, dials, approved):
    """Over the guard: promotion commits before the question; approval culls the forecast, refusal none."""
    ids, candidate = _big_night(db, dials)
    seen = {}

    def decide(summary):
        with psycopg.connect(db.info.dsn) as other:  # what another session sees meanwhile
            seen["maturity"] = other.execute(
                "SELECT maturity FROM hag_entries WHERE id = %s", (candidate,)
            ).fetchone()[0]
            seen["edges"] = other.execute("SELECT count(*) FROM hag_edges").fetchone()[0]
            row = other.execute("SELECT status, summary FROM hag_runs").fetchone()
            seen["row"] = (row[0], row[1]["promoted_to_pattern"], row[1]["culled"])
            seen["asked"] = row[1]["guard"]["forecast"]  # what a reaper would keep meanwhile
        seen["forecast"] = {e.edge_id for e in summary.culled_edges}
        return sweeps.Decision(approved, "approved" if approved else "rejected", "checked")

    summary = sweeps.sweep(db, as_of=AS_OF, decide=decide)
    assert seen == {
        "maturity": "pattern",
        "edges": 3,
        "forecast": set(ids),
        "row": ("running", 1, 0),  # the promotion committed, none of the forecast
        "asked": 3,
    }
    left = {r["id"] for r in db.execute("SELECT id FROM hag_edges").fetchall()}
    run = db.execute("SELECT status, summary FROM hag_runs").fetchone()
    db.rollback()
    assert summary.promoted_to_pattern == 1
    assert summary.guard["decision"] == ("approved" if approved else "rejected")
    assert run["status"] == "done" and run["summary"]["guard"]["forecast"] == 3
    if approved:
        assert (summary.culled, left) == (3, set())
    else:
        assert (summary.culled, left) == (0, set(ids))
        assert "were not culled" in sweeps.render_markdown(summary)


def test_a_big_night_whose_cull_fails_keeps_the_promotions_it_committed(db, dials, monkeypatch):
    """Over the guard, promotion commits before the question; a cull that then fails marks
    the run failed, its summary the promotion that stands and the guard beside the error,
    no edge culled."""
    ids, candidate = _big_night(db, dials)
    real_cull = sweeps._cull

    def cull_fails(conn, *args):
        real_cull(conn, *args)
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(sweeps, "_cull", cull_fails)
    with pytest.raises(RuntimeError, match="disk on fire"):
        sweeps.sweep(db, as_of=AS_OF, decide=lambda s: sweeps.Decision(True, "approved", "ok"))
    run = db.execute("SELECT status, summary FROM hag_runs").fetchone()
    maturity = db.execute("SELECT maturity FROM hag_entries WHERE id = %s", (candidate,)).fetchone()
    left = {r["id"] for r in db.execute("SELECT id FROM hag_edges").fetchall()}
    db.rollback()
    assert (run["status"], maturity["maturity"], left) == ("failed", "pattern", set(ids))
    assert run["summary"]["promoted_to_pattern"] == 1 and run["summary"]["culled"] == 0
    assert run["summary"]["guard"]["decision"] == "approved"
    assert "disk on fire" in run["summary"]["error"]


def test_without_a_decider_or_under_the_guard_nothing_pauses(db, dials):
    """The command line (no decider) culls as before; a decider is not asked under the limit."""
    ids, _ = _big_night(db, dials)
    dials(cull_guard_max_edges=3)
    summary = sweeps.sweep(db, as_of=AS_OF, decide=lambda s: pytest.fail("asked"))
    assert (summary.culled, summary.guard) == (3, None)
    assert len(ids) == 3


def test_a_run_s_liveness_lives_in_a_transaction_that_holds_back_no_vacuum(db):
    """A live run's lock is transaction-scoped, on a connection idle in a transaction with no snapshot or xid."""
    run_id = uuid.uuid4()
    with runs.alive(run_id):
        holder = db.execute(
            "SELECT a.state, a.backend_xmin, a.backend_xid, l.pid FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
            "AND l.classid = %s::bigint::oid AND l.objid::bigint = hashtext(%s) & 4294967295",
            (runs.RUN_LOCK_CLASS, str(run_id)),
        ).fetchone()
        db.rollback()
    assert holder is not None and holder["state"] == "idle in transaction"
    assert (holder["backend_xmin"], holder["backend_xid"]) == (None, None)
    free = db.execute(
        "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s)) AS free",
        (runs.RUN_LOCK_CLASS, str(run_id)),
    ).fetchone()
    db.rollback()
    assert free["free"]


def test_hag_runs_reads_a_deployments_spelling_of_a_kind(db):
    """`--kind session-end` (the deployment's name) lists the session_end runs, as
    `--kind session_end` does; before, it listed none and said so."""
    from hag.cli import cli

    run_id = uuid.uuid4()
    db.execute(
        "INSERT INTO hag_runs (run_id, kind, params, summary, status, finished_at) "
        "VALUES (%s, 'session_end', '{}', '{}', 'done', clock_timestamp())",
        (run_id,),
    )
    db.commit()
    for kind in ("session-end", "session_end"):
        listed = json.loads(CliRunner().invoke(cli, ["runs", "--json", "--kind", kind]).stdout)
        assert [r["run_id"] for r in listed] == [str(run_id)], kind


def test_hag_runs_refuses_a_kind_no_run_is_written_with(db):
    """A misspelt kind is a usage error naming the kinds, not "no runs of kind ..." and exit 0
    (a script would read that as no nightly runs)."""
    from hag.cli import cli
    from hag.session.process import RUN_KIND

    answer = CliRunner().invoke(cli, ["runs", "--kind", "nighlty"])
    assert answer.exit_code != 0 and "'nighlty' is not a kind of run" in answer.output
    assert "nightly, session_end, enrichment, restore" in answer.output
    assert RUN_KIND in runs.KINDS


def test_a_nightly_run_refuses_while_another_is_live_and_goes_once_it_is_gone(db, database_url):
    """A live nightly run (its row running, its liveness lock held: mid-sweep, or paused for
    an operator) stops a real run before it changes anything, naming it; a dry run still
    looks; once the other's process is gone (its lock free) the next run reaps it and goes."""
    from tests.fix_db import live_run

    ids = _weak_edges(db, 2)
    with live_run(db, database_url, "nightly") as other:
        with pytest.raises(sweeps.AnotherNightly, match=f"nightly run {runs.short(other)} "):
            sweeps.sweep(db, as_of=AS_OF)
        assert sweeps.sweep(db, as_of=AS_OF, dry_run=True).culled == 2
        kept = db.execute("SELECT count(*) AS n FROM hag_edges WHERE id = ANY(%s)", (ids,))
        assert kept.fetchone()["n"] == 2
        assert db.execute("SELECT count(*) AS n FROM hag_runs").fetchone()["n"] == 1
        db.rollback()
    assert sweeps.sweep(db, as_of=AS_OF).culled == 2
    status = db.execute("SELECT status FROM hag_runs WHERE run_id = %s", (other,)).fetchone()
    assert status["status"] == "abandoned"
