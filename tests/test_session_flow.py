"""The session-end flow and the `hag ingest` / `hag process-sessions` commands."""

from __future__ import annotations

import asyncio
import json

from click.testing import CliRunner

from tests import factories as f
from tests.fix_prefect import flow_run_artifacts_async
from tests.session_builders import ingest, payload, sequence, turn


def _world(db):
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    e = f.edge(db, a, b, "prerequisite", confidence=0.5)
    db.commit()
    return a, b, e


def test_the_flow_applies_pending_sessions_in_batches_and_publishes_a_summary(db, prefect_harness):
    """Five sessions in batches of two: one run row, a markdown and a table artifact, suites pass."""
    from flows.session_end import session_end_flow

    a, b, e = _world(db)
    ingest(
        db,
        *[sequence(f"s{i}", a, b, day=i) for i in range(4)],
        payload("s4", [turn(0, rendered=[e], outcome="success")], day=9),
    )
    state = session_end_flow(batch_size=2, return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()
    assert (
        summary["sessions"],
        summary["edges_created"],
        summary["edges_reinforced"],
        summary["edges_graded_up"],
    ) == (5, 1, 3, 1)
    run = db.execute(
        "SELECT kind, status, summary FROM hag_runs WHERE run_id = %s", (summary["run_id"],)
    ).fetchone()
    assert (run["kind"], run["status"], run["summary"]["sessions"]) == ("session_end", "done", 5)
    assert (
        db.execute(
            "SELECT count(*) AS n FROM hag_sessions WHERE run_id = %s AND status = 'processed'",
            (summary["run_id"],),
        ).fetchone()["n"]
        == 5
    )
    artifacts = asyncio.run(flow_run_artifacts_async(state.state_details.flow_run_id))
    assert {"session-end-summary", "session-end-counts"} <= set(artifacts)
    assert "| edges created | 1 |" in artifacts["session-end-summary"].data
    from tests.fix_prefect import run_logs

    lines = run_logs(state.state_details.flow_run_id, "embedder: ")
    assert any(line.startswith("embedder: ") for line in lines), lines  # which, in the run


def test_hag_ingest_names_a_missing_file_before_queueing_any(db, tmp_path):
    """`hag ingest good.jsonl missing.jsonl` refuses naming the missing file and queues
    nothing (before, the first file's sessions were queued, then it failed)."""
    from hag.cli import cli

    a, b, _ = _world(db)
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(sequence("g1", a, b)) + "\n")
    result = CliRunner().invoke(cli, ["ingest", str(good), str(tmp_path / "missing.jsonl")])
    assert result.exit_code != 0 and "missing.jsonl" in result.output
    db.rollback()
    assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == 0


def test_hag_ingest_and_process_sessions_without_prefect(db, tmp_path):
    """`hag ingest` queues a JSON Lines file (exit 1 on a refusal); `--no-prefect` applies it."""
    from hag.cli import cli

    a, b, _ = _world(db)
    lines = tmp_path / "sessions.jsonl"
    lines.write_text(json.dumps(sequence("s1", a, b)) + "\n{broken\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(lines), "--json"])
    assert result.exit_code == 1
    counts = json.loads(result.stdout)["counts"]
    assert counts == {"accepted": 1, "duplicate": 0, "quarantined": 1}
    listed = runner.invoke(cli, ["ingest", "--quarantined", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout)[0]["source"] == f"{lines}:2"
    done = runner.invoke(cli, ["process-sessions", "--no-prefect", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["edges_created"] == 1
    assert runner.invoke(cli, ["ingest", "--help"]).exit_code == 0
    assert runner.invoke(cli, ["process-sessions", "--help"]).exit_code == 0


def test_a_session_that_breaks_a_database_rule_is_rejected_whole(db):
    """A session whose topic vanished after ingest is rejected, quarantined, and not half-applied."""
    from hag.session.process import process_pending

    a, b, e = _world(db)
    f.topic(db, "ghost")
    db.commit()
    bad = payload(
        "bad",
        [
            turn(
                0,
                outcome="success",
                observations=[{"graph": "topic", "concept": "rsa", "text": "Boo."}],
            )
        ],
        topic="ghost",
    )
    assert ingest(db, bad)[0].accepted
    db.execute("DELETE FROM hag_topics WHERE topic_id = 'ghost'")
    db.commit()
    summary = process_pending()
    assert (summary.sessions, summary.rejects) == (0, 1)
    row = db.execute(
        "SELECT status, reject_reason FROM hag_sessions WHERE session_id = 'bad'"
    ).fetchone()
    assert row["status"] == "rejected" and "cannot be applied" in row["reject_reason"]
    # (the session renders no edge: another topic's edge would be refused at ingest)
    assert (
        db.execute("SELECT count(*) AS n FROM hag_entries WHERE topic_id = 'ghost'").fetchone()["n"]
        == 0
    )
    assert (
        db.execute(
            "SELECT count(*) AS n FROM hag_session_quarantine WHERE source = 'process-sessions'"
        ).fetchone()["n"]
        == 1
    )
