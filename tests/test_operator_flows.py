"""The flows as an operator meets them in the Prefect UI, against a real (temporary) Prefect
server: run names, dry-run tags and artifact keys, the run-id link, the run logger's lines,
parameter bounds refused at run creation, the big-night pause (approve, reject, time out),
the restore flow, and an idle session-end run that costs nothing."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import pytest

from hag.nightly import audit
from tests import factories as f
from tests.fix_prefect import flow_run_artifacts, prefect_client, read_flow_run, run_logs

AS_OF = f.NOW
DAY = timedelta(days=1)


def _latest(key: str):
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with prefect_client() as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    return found[0] if found else None


def _weak_edges(db, n: int) -> list[uuid.UUID]:
    """`n` old, weak, untraversed learned edges (all cullable), and a promotable candidate."""
    ids = f.cullable_chain(db, n, AS_OF)
    f.entry(
        db, concept_slug="primes", maturity="candidate", confidence=0.6, created_at=AS_OF - 20 * DAY
    )
    db.commit()
    return ids


def _edges_digest(db) -> list[str]:
    rows = sorted(map(repr, db.execute("SELECT * FROM hag_edges ORDER BY id").fetchall()))
    db.rollback()
    return rows


def test_nightly_runs_are_named_linked_tagged_logged_and_keyed_apart(db, prefect_harness):
    """Names from parameters, dry-run tag and keys, the flow-run id on hag_runs, domain log lines."""
    from flows.nightly import nightly_flow

    _weak_edges(db, 2)
    dry = nightly_flow(as_of=AS_OF, dry_run=True, return_state=True)
    assert dry.is_completed(), dry.message
    real = nightly_flow(as_of=AS_OF, return_state=True)
    assert real.is_completed(), real.message
    dry_id, real_id = dry.state_details.flow_run_id, real.state_details.flow_run_id

    dry_run, real_run = read_flow_run(dry_id), read_flow_run(real_id)
    assert dry_run.name == "nightly dry-run 2026-11-30"
    assert real_run.name == "nightly 2026-11-30"
    assert "dry-run" in dry_run.tags and "dry-run" not in real_run.tags

    assert {
        "nightly-dry-run-counts",
        "nightly-dry-run-culled-edges",
        "nightly-dry-run-summary",
    } <= set(flow_run_artifacts(dry_id))
    real_keys = set(flow_run_artifacts(real_id))
    assert {"nightly-counts", "nightly-culled-edges", "nightly-summary"} <= real_keys
    assert not any(k.startswith("nightly-dry-run") for k in real_keys)
    # A dry run after the real one does not become the latest under a real key.
    assert nightly_flow(as_of=AS_OF, dry_run=True, return_state=True).is_completed()
    assert _latest("nightly-culled-edges").flow_run_id == real_id

    row = db.execute("SELECT run_id, flow_run_id FROM hag_runs WHERE kind = 'nightly'").fetchone()
    db.rollback()
    assert row["flow_run_id"] == real_id == row["run_id"]  # one id: the one the UI shows
    assert len(audit.culled(run_id=str(real_id))) == 2
    assert len(audit.culled(run_id=str(real_id)[:8])) == 2

    table = flow_run_artifacts(real_id)["nightly-culled-edges"].data
    for column in ("source", "target", "type", "provenance", "confidence", "age (days)", "restore"):
        assert f'"{column}"' in table
    assert "hag audit restore " in table and "edge_id" not in table

    lines = run_logs(real_id, "culled c-")
    assert any(line.startswith("cull: 2 edges culled (learned 2)") for line in lines), lines
    assert any(line.startswith("promotion: 1 candidate → pattern") for line in lines), lines
    assert sum(line.startswith("culled c-") for line in lines) == 2, lines
    assert any(line.startswith("promoted cryptography/primes to pattern, entry ") for line in lines)
    summary = flow_run_artifacts(real_id)["nightly-summary"].data
    assert f"Run id: `{real_id}`" in summary and "flow run" not in summary


def test_promotions_are_named_in_the_log_up_to_the_dial(db, dials, prefect_harness):
    """nightly_log_max_promotions names the first N promoted entries, then 'and K more'."""
    from flows.nightly import nightly_flow

    for n in range(3):
        f.entry(
            db,
            concept_slug=f"p-{n}",
            maturity="candidate",
            confidence=0.6,
            created_at=AS_OF - 20 * DAY,
        )
    db.commit()
    dials(nightly_log_max_promotions=2)
    state = nightly_flow(as_of=AS_OF, check=False, return_state=True)
    assert state.is_completed(), state.message
    lines = run_logs(state.state_details.flow_run_id, "more promotion")
    assert sum(line.startswith("promoted cryptography/p-") for line in lines) == 2, lines
    assert any(line.startswith("… and 1 more promotion(s)") for line in lines), lines


def test_parameter_bounds_refuse_a_bad_value_before_a_run_exists(prefect_harness):
    """A deployment with the flows' schemas refuses limit=-3 (and workers=0) at run creation."""
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.utilities.callables import parameter_schema_from_entrypoint

    from hag import PROJECT_ROOT

    with prefect_client() as client:
        for flow_name, entrypoint, bad, good in (
            ("enrichment", "flows/enrichment.py:enrichment_flow", {"limit": -3}, {"limit": 3}),
            (
                "session-end",
                "flows/session_end.py:session_end_flow",
                {"workers": 0},
                {"workers": 2},
            ),
            (  # the writers' pool holds 8 connections and keeps two free
                "session-end",
                "flows/session_end.py:session_end_flow",
                {"workers": 7},
                {"workers": 6},
            ),
            ("restore", "flows/restore.py:restore_flow", {"run": "no!"}, {"run": "abcd1234"}),
            (
                "nightly",
                "flows/nightly.py:nightly_flow",
                {"as_of": "yesterday-ish"},
                {"as_of": "2026-03-01T02:30:00+01:00"},
            ),
            (
                "enrichment",
                "flows/enrichment.py:enrichment_flow",
                {"as_of": "yesterday-ish"},
                {"as_of": "2026-03-01T02:30:00Z"},
            ),
        ):
            schema = parameter_schema_from_entrypoint(str(PROJECT_ROOT / entrypoint))
            props = schema.model_dump_for_openapi()["properties"]
            assert all(p.get("description") for p in props.values()), (flow_name, props)
            flow_id = client.create_flow_from_name(flow_name)
            deployment_id = client.create_deployment(
                flow_id=flow_id,
                name=f"bounds-{uuid.uuid4().hex[:6]}",
                entrypoint=entrypoint,
                parameter_openapi_schema=schema.model_dump_for_openapi(),
                enforce_parameter_schema=True,
            )
            before = len(client.read_flow_runs())
            with pytest.raises(PrefectHTTPStatusError, match="409|422"):
                client.create_flow_run_from_deployment(deployment_id, parameters=bad)
            assert len(client.read_flow_runs()) == before, f"{flow_name}: a run exists"
            made = client.create_flow_run_from_deployment(deployment_id, parameters=good)
            client.delete_flow_run(made.id)


def _paused_nightly(db, dials):
    """A nightly run over the guard, started in a thread; returns (thread, box, flow run, ids)."""
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType

    from flows.nightly import nightly_flow

    ids = _weak_edges(db, 3)
    dials(cull_guard_max_edges=2, cull_guard_timeout_seconds=600)
    box: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("state", nightly_flow(as_of=AS_OF, return_state=True))
    )
    thread.start()
    paused = FlowRunFilter(
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.PAUSED]))
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "state" not in box:
        with prefect_client() as client:
            found = [
                r
                for r in client.read_flow_runs(flow_run_filter=paused)
                if r.name.startswith("nightly")
            ]
        if found:
            return thread, box, found[0], ids
        time.sleep(0.5)
    thread.join(timeout=600)
    pytest.fail(f"the nightly run never paused: {box}")


def _finished(thread, box):
    thread.join(timeout=600)
    state = box["state"]
    assert state.is_completed(), state.message
    return state.result()


@pytest.mark.parametrize("approve", [True, False])
def test_a_big_night_pauses_with_its_forecast_and_obeys_the_answer(
    db, dials, prefect_harness, approve
):
    """Paused with the forecast beside it, promotion already done; approve culls it all, reject none."""
    from prefect.flow_runs import resume_flow_run

    thread, box, run, ids = _paused_nightly(db, dials)
    forecast = flow_run_artifacts(run.id)["nightly-cull-forecast"]
    assert forecast.data.count('"source"') == 3 and "restore" not in forecast.data
    assert forecast.description.startswith("Awaiting an operator")
    promoted = db.execute(
        "SELECT count(*) AS n FROM hag_entries WHERE maturity = 'pattern' AND concept_slug = 'primes'"
    ).fetchone()["n"]
    edges = db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"]
    db.rollback()
    assert (promoted, edges) == (1, 3)  # promotion is not held back; nothing culled yet
    resume_flow_run(run.id, run_input={"approve": approve, "note": "checked the forecast"})
    result = _finished(thread, box)
    left = {r["id"] for r in db.execute("SELECT id FROM hag_edges").fetchall()}
    audited = {r["edge_id"] for r in db.execute("SELECT edge_id FROM hag_edge_audit").fetchall()}
    db.rollback()
    assert result["guard"]["decision"] == ("approved" if approve else "rejected")
    assert result["guard"]["note"] == "checked the forecast"
    decided = _latest("nightly-cull-forecast")  # a new version under the key: the decision
    assert decided.flow_run_id == run.id and "Awaiting" not in decided.description
    assert decided.description.startswith("Approved" if approve else "Rejected")
    if approve:
        assert (result["culled"], left, audited) == (3, set(), set(ids))
    else:
        assert (result["culled"], left, audited) == (0, set(ids), set())
        assert "were not culled" in flow_run_artifacts(run.id)["nightly-summary"].data


def test_a_big_night_left_unanswered_culls_nothing_and_says_so(db, dials, prefect_harness):
    """No answer within cull_guard_timeout_seconds: the run completes, nothing culled, reported.

    Run in the foreground and read from its own final state: a pause of a few seconds can
    begin and end between two polls for paused runs, so it is not caught while paused."""
    from prefect.client.schemas.objects import StateType

    from flows.nightly import nightly_flow

    ids = _weak_edges(db, 3)
    dials(cull_guard_max_edges=2, cull_guard_timeout_seconds=3)
    state = nightly_flow(as_of=AS_OF, return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    run_id = state.state_details.flow_run_id
    with prefect_client() as client:
        states = [s.type for s in client.read_flow_run_states(run_id)]
    assert StateType.PAUSED in states, states
    assert result["culled"] == 0 and result["guard"]["decision"] == "timed out"
    assert {r["id"] for r in db.execute("SELECT id FROM hag_edges").fetchall()} == set(ids)
    db.rollback()
    assert "Decision: timed out" in flow_run_artifacts(run_id)["nightly-summary"].data
    assert _latest("nightly-cull-forecast").description.startswith("Timed out: none of these 3")
    assert any("culling nothing tonight" in line for line in run_logs(run_id, "culling nothing"))


def test_the_restore_flow_dry_runs_then_restores_exactly(db, prefect_harness):
    """By the nightly's flow-run id: a dry run changes nothing and lists the edges; then exact."""
    from flows.nightly import nightly_flow
    from flows.restore import restore_flow

    _weak_edges(db, 2)
    before = _edges_digest(db)
    night = nightly_flow(as_of=AS_OF, return_state=True)
    assert night.is_completed(), night.message
    after_cull = _edges_digest(db)
    assert len(after_cull) == len(before) - 2
    night_id = str(night.state_details.flow_run_id)

    dry = restore_flow(run=night_id[:8], return_state=True)
    assert dry.is_completed(), dry.message
    assert len(dry.result()["restored"]) == 2 and _edges_digest(db) == after_cull
    dry_run = read_flow_run(dry.state_details.flow_run_id)
    assert dry_run.name == f"restore dry-run run {night_id[:8]}" and "dry-run" in dry_run.tags
    assert (
        flow_run_artifacts(dry.state_details.flow_run_id)["restore-dry-run"].data.count(
            "would come back"
        )
        == 2
    )

    real = restore_flow(run=night_id, dry_run=False, return_state=True)
    assert real.is_completed(), real.message
    assert _edges_digest(db) == before
    restore_id = real.state_details.flow_run_id
    assert "restore" in flow_run_artifacts(restore_id)
    row = db.execute("SELECT run_id, kind, status FROM hag_runs WHERE kind = 'restore'").fetchone()
    db.rollback()
    assert (row["run_id"], row["status"]) == (restore_id, "done")  # its flow run's id


def test_the_restore_flow_refuses_an_ambiguous_prefix_in_one_log_line(db, prefect_harness):
    """Two runs sharing their first 8 digits (a scheduled batch): the prefix fails the flow
    run with one error line naming both endings, and no traceback in its log."""
    from flows.restore import restore_flow
    from hag.storage import runs

    batch = [uuid.UUID(f"01a233a7-{n:04x}-7000-8000-{n:012x}") for n in (0x1B2C, 0x1B2D)]
    for run_id in batch:
        db.execute(
            "INSERT INTO hag_runs (run_id, kind, status) VALUES (%s, 'nightly', 'done')", (run_id,)
        )
    db.commit()
    state = restore_flow(run="01a233a7", return_state=True)
    assert state.is_failed() and "ambiguous" in state.message
    lines = run_logs(state.state_details.flow_run_id, "restore refused")
    refused = [line for line in lines if line.startswith("restore refused")]
    assert len(refused) == 1 and all(runs.short(r) in refused[0] for r in batch), lines
    assert not any("Traceback" in line for line in lines), lines


def test_a_restore_run_with_a_refused_edge_ends_failed_in_one_line(db, prefect_harness):
    """An edge whose endpoint is gone: the restore run publishes its report and ends Failed
    with one line, as `hag audit restore` exits 1; both targets at once is refused alike."""
    from flows.nightly import nightly_flow
    from flows.restore import restore_flow

    ids = _weak_edges(db, 1)
    night = nightly_flow(as_of=AS_OF, return_state=True)
    assert night.is_completed(), night.message
    target = db.execute(
        "SELECT target_entry_id FROM hag_edge_audit WHERE edge_id = %s", (ids[0],)
    ).fetchone()["target_entry_id"]
    db.execute("DELETE FROM hag_entries WHERE id = %s", (target,))
    db.commit()
    state = restore_flow(edge_ids=[str(ids[0])], dry_run=False, return_state=True)
    assert state.is_failed() and state.message.startswith("1 edge(s) refused, 0 restored")
    flow_run_id = state.state_details.flow_run_id
    assert "restore" in flow_run_artifacts(flow_run_id)
    lines = run_logs(flow_run_id, "refused")
    assert lines and not any("Traceback" in line for line in lines), lines
    both = restore_flow(run="abcd", edge_ids=["abcd"], return_state=True)
    assert both.is_failed() and "give exactly one of run or edge_ids" in both.message


def test_a_nightly_run_while_another_is_live_ends_cancelled_in_one_line(
    db, database_url, prefect_harness
):
    """What the deployment's concurrency limit did before (it ended paused runs: see
    hag/nightly/sweeps.py, other_nightly): a run finding another nightly run live ends
    Cancelled naming it, having changed nothing and run no task."""
    from click.testing import CliRunner
    from prefect.settings import PREFECT_API_URL

    from flows.nightly import nightly_flow
    from hag.cli import cli
    from hag.nightly.sweeps import AnotherNightly
    from hag.storage import runs
    from tests.fix_db import live_run

    ids = _weak_edges(db, 2)
    with live_run(db, database_url, "nightly") as other:
        state = nightly_flow(as_of=AS_OF, return_state=True)
        through = CliRunner().invoke(  # `hag nightly` through the server: the same one line
            cli,
            ["nightly", "--no-check", "--as-of", AS_OF.isoformat()],
            env={"PREFECT_API_URL": PREFECT_API_URL.value()},
        )
    assert isinstance(through.exception, AnotherNightly), through.output
    assert f"nightly run {runs.short(other)} " in str(through.exception)
    assert state.is_cancelled() and f"nightly run {runs.short(other)} " in state.message
    assert (
        db.execute("SELECT count(*) AS n FROM hag_edges WHERE id = ANY(%s)", (ids,)).fetchone()["n"]
        == 2
    )
    db.rollback()
    lines = run_logs(state.state_details.flow_run_id, "changed nothing")
    said = [line for line in lines if line.startswith("nightly run ")]
    assert len(said) == 1 and not any("Traceback" in line for line in lines), lines


def test_a_slip_in_a_runs_parameters_fails_it_in_one_line_before_any_task(
    db, prefect_harness, monkeypatch
):
    """An as_of outside timestamp_window_years, an unknown topic, and (in a deployment's
    run) an as_of in the future: the run ends Failed with one line, no task run, nothing
    changed; the same moment in process (the simulator's clock) is taken."""
    from datetime import UTC, datetime

    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.enrichment import enrichment_flow
    from flows.nightly import nightly_flow
    from tasks import runtime

    ids = _weak_edges(db, 1)
    far = datetime(1900, 1, 1, tzinfo=UTC)
    night = nightly_flow(as_of=far, return_state=True)
    assert night.is_failed() and night.message.startswith("nightly refused: as_of 1900-01-01")
    enrich = enrichment_flow(topic="nowhere", return_state=True)
    assert enrich.is_failed() and enrich.message == "enrichment refused: unknown topic 'nowhere'"
    for state in (night, enrich):
        lines = run_logs(state.state_details.flow_run_id, "refused")
        assert not any("Traceback" in line for line in lines), lines
        with prefect_client() as client:
            assert (
                client.read_task_runs(
                    flow_run_filter=FlowRunFilter(
                        id=FlowRunFilterId(any_=[state.state_details.flow_run_id])
                    )
                )
                == []
            )
    assert (
        db.execute("SELECT count(*) AS n FROM hag_edges WHERE id = ANY(%s)", (ids,)).fetchone()["n"]
        == 1
    )
    db.rollback()
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    assert runtime.start_refusal(tomorrow) is None  # in process: the caller's clock
    monkeypatch.setattr(runtime.deployment, "get_id", lambda: "a-deployment")
    refusal = runtime.start_refusal(tomorrow)
    assert refusal is not None and "is in the future" in refusal
    assert runtime.start_refusal(tomorrow - timedelta(days=2)) is None


def test_the_command_line_nightly_through_prefect_never_pauses(db, dials, prefect_harness):
    """`hag nightly` with a Prefect server runs the flow without the operator's pause (a big
    night culls as the rule says) and, with --no-check, runs no suite."""
    from click.testing import CliRunner
    from prefect.settings import PREFECT_API_URL

    from hag.cli import cli

    ids = _weak_edges(db, 3)
    dials(cull_guard_max_edges=2, cull_guard_timeout_seconds=600)
    result = CliRunner().invoke(
        cli,
        ["nightly", "--no-check", "--json", "--as-of", AS_OF.isoformat()],
        env={"PREFECT_API_URL": PREFECT_API_URL.value()},
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["culled"], summary["guard"]) == (3, None)
    assert not db.execute("SELECT 1 FROM hag_edges WHERE id = ANY(%s)", (ids,)).fetchall()
    db.rollback()
    lines = run_logs(uuid.UUID(summary["run_id"]), "cull:")
    assert not any("expectations over" in line for line in lines), lines


def test_an_idle_session_end_run_is_quick_and_publishes_nothing(db, prefect_harness):
    """0 pending sessions: done in a few seconds, no artifact, no task run, no run row."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.session_end import session_end_flow

    session_end_flow(return_state=True)  # warm: the first flow call of a process imports more
    started = time.perf_counter()
    state = session_end_flow(return_state=True)
    seconds = time.perf_counter() - started
    assert state.is_completed(), state.message
    assert seconds < 10, (
        f"an idle run took {seconds:.1f} s"
    )  # about 1 s; generous on a busy machine
    flow_run_id = state.state_details.flow_run_id
    assert flow_run_artifacts(flow_run_id) == {}
    with prefect_client() as client:
        tasks = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
        )
    assert tasks == []
    assert db.execute("SELECT count(*) AS n FROM hag_runs").fetchone()["n"] == 0
    db.rollback()
    assert read_flow_run(flow_run_id).name.startswith("session-end ")
    assert "0 session(s) pending" in run_logs(flow_run_id, "pending")


def _enriched_edges(db) -> list[dict[str, Any]]:
    rows = db.execute(
        "SELECT g.id, s.concept_slug AS source, t.concept_slug AS target, g.edge_type "
        "FROM hag_edges g JOIN hag_entries s ON s.id = g.source_entry_id "
        "JOIN hag_entries t ON t.id = g.target_entry_id WHERE g.source_type = 'enriched'"
    ).fetchall()
    db.rollback()
    return rows


def test_the_enrichment_flow_logs_what_it_proposed_and_accepted(db, prefect_harness):
    """The enrichment run's log on the server names each orphan with its counts, each accepted
    edge, the run's totals, and a line per suite, all matching what the database now holds."""
    import re

    from flows.enrichment import enrichment_flow
    from hag import config
    from hag.operations import corpus

    config.reset_config()
    corpus.load_file(corpus.DEMO_CORPUS)  # offline proposer: no API key in tests
    before = _enriched_edges(db)  # the corpus ships enriched edges of its own
    state = enrichment_flow(topic="cryptography", limit=3, return_state=True)
    assert state.is_completed(), state.message
    # the API handler ships lines in batches: wait for the last suite's line, not the first's
    lines = run_logs(state.state_details.flow_run_id, "culled_edges", also="expectations over")

    after = _enriched_edges(db)
    edges = [e for e in after if e not in before]  # what this run added
    assert edges  # the offline proposer wires the demo's orphans
    for e in edges:
        wanted = f"proposed source {e['source']}, target {e['target']}, edge_type {e['edge_type']}"
        assert any(wanted in line for line in lines), (wanted, lines)
    per_orphan = {}
    for line in lines:
        m = re.match(r"orphan cryptography/([a-z0-9-]+): \w+, (\d+) accepted, (\d+) rejected", line)
        if m:
            per_orphan[m[1]] = int(m[2])
    assert len(per_orphan) == 3  # the limit
    assert sum(per_orphan.values()) == len(edges)
    for slug, accepted in per_orphan.items():  # an edge between two orphans counts once
        assert accepted <= sum(slug in (e["source"], e["target"]) for e in edges)
    assert any(line.startswith(f"{len(edges)} accepted, ") for line in lines), lines
    assert any(line.startswith("enrichment run ") for line in lines), lines
    suites = [line.split()[1] for line in lines if "expectations over" in line]
    assert suites == ["entries", "edges", "cull_runs", "culled_edges"]
