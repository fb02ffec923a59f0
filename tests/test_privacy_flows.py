"""The learner-export and learner-erase flows as an operator runs them from the Prefect UI,
against a real (temporary) Prefect server: run names, artifacts, one-line refusals."""

from __future__ import annotations

import json

from tests.fix_prefect import flow_run_artifacts, prefect_client, read_flow_run
from tests.session_builders import payload, run, turn


def test_export_then_erase_run_as_flow_runs(db, prefect_harness, tmp_path):
    """Export writes the file and a counts artifact; a dry-run erase changes nothing; the real
    one erases and records the flow run as who; no run name or artifact holds the id."""
    from flows.learner_erase import learner_erase_flow
    from flows.learner_export import learner_export_flow
    from tests import factories as f

    f.entry(db, concept_slug="rsa")
    db.commit()
    run(db, payload("grace-s1", [turn(0, message="what is a modulus?")], learner="grace.h"))

    out = tmp_path / "grace.jsonl"
    state = learner_export_flow(learner_id="grace.h", out=str(out), return_state=True)
    assert state.is_completed(), state.message
    lines = out.read_text().splitlines()
    assert json.loads(lines[-1])["manifest"]["counts"]["hag_sessions"] == 1
    export_run = state.state_details.flow_run_id
    assert read_flow_run(export_run).name == "learner-export gr…"
    assert "grace" not in str(flow_run_artifacts(export_run)["learner-export"].data)

    dry = learner_erase_flow(learner_id="grace.h", return_state=True)
    assert dry.is_completed(), dry.message
    dry_run = read_flow_run(dry.state_details.flow_run_id)
    assert dry_run.name == "learner-erase dry-run gr…" and "dry-run" in dry_run.tags
    assert "learner-erasure-dry-run" in flow_run_artifacts(dry.state_details.flow_run_id)
    assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == 1
    db.rollback()

    real = learner_erase_flow(
        learner_id="grace.h", dry_run=False, operator="dpo", return_state=True
    )
    assert real.is_completed(), real.message
    assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == 0
    record = db.execute("SELECT erased_by FROM hag_erasures").fetchone()
    assert record["erased_by"] == f"prefect flow run {real.state_details.flow_run_id} for dpo"
    report = flow_run_artifacts(real.state_details.flow_run_id)["learner-erasure"]
    assert "hag_sessions" in str(report.data) and "grace" not in str(report.data)


def test_both_flows_refuse_an_unknown_learner_in_one_line(db, prefect_harness, tmp_path):
    """A learner nothing is held about fails each run with one line naming them."""
    from flows.learner_erase import learner_erase_flow
    from flows.learner_export import learner_export_flow

    for state in (
        learner_export_flow(learner_id="nobody", out=str(tmp_path / "x.jsonl"), return_state=True),
        learner_erase_flow(learner_id="nobody", dry_run=False, return_state=True),
    ):
        assert state.is_failed()
        assert "unknown learner 'nobody'" in state.message and "\n" not in state.message
    assert list(tmp_path.iterdir()) == []


def test_a_bad_learner_id_is_refused_before_a_run_exists(prefect_harness):
    """Deployments with the two flows' schemas refuse an id no learner can have at run
    creation, and every parameter has a description for the run form."""
    import uuid

    import pytest
    from prefect.exceptions import PrefectHTTPStatusError
    from prefect.utilities.callables import parameter_schema_from_entrypoint

    from hag import PROJECT_ROOT

    with prefect_client() as client:
        for flow_name, entrypoint in (
            ("learner-export", "flows/learner_export.py:learner_export_flow"),
            ("learner-erase", "flows/learner_erase.py:learner_erase_flow"),
        ):
            schema = parameter_schema_from_entrypoint(str(PROJECT_ROOT / entrypoint))
            props = schema.model_dump_for_openapi()["properties"]
            assert all(p.get("description") for p in props.values()), (flow_name, props)
            deployment_id = client.create_deployment(
                flow_id=client.create_flow_from_name(flow_name),
                name=f"bounds-{uuid.uuid4().hex[:6]}",
                entrypoint=entrypoint,
                parameter_openapi_schema=schema.model_dump_for_openapi(),
                enforce_parameter_schema=True,
            )
            with pytest.raises(PrefectHTTPStatusError, match="409|422"):
                client.create_flow_run_from_deployment(
                    deployment_id, parameters={"learner_id": "no body"}
                )
            made = client.create_flow_run_from_deployment(
                deployment_id, parameters={"learner_id": "ada"}
            )
            client.delete_flow_run(made.id)


def test_a_deployment_runs_export_goes_where_it_outlives_the_run(monkeypatch, tmp_path):
    """In a deployment's run (a clone in a temporary folder), a relative `out` and the data
    folder's default inside the clone are refused by name; an absolute `out`, or the data
    folder the worker's environment names, is taken. `hag serve` names it for its worker."""
    import pytest

    from hag import config
    from hag.cli import serve_cmd
    from hag.errors import ValidationError
    from tasks import privacy

    monkeypatch.delenv("HAG_DATA_DIR", raising=False)
    config.reset_config()
    monkeypatch.setattr(privacy.deployment, "get_id", lambda: "a-deployment")
    try:
        with pytest.raises(ValidationError, match="'export.jsonl' is relative"):
            privacy.export_path("export.jsonl")
        with pytest.raises(ValidationError, match="an absolute HAG_DATA_DIR for the worker"):
            privacy.export_path(None)
        assert privacy.export_path(str(tmp_path / "a.jsonl")) == tmp_path / "a.jsonl"
        monkeypatch.setenv("HAG_DATA_DIR", ".hag")  # relative: inside the run's clone
        config.reset_config()
        with pytest.raises(ValidationError, match="an absolute HAG_DATA_DIR for the worker"):
            privacy.export_path(None)
        monkeypatch.setenv("HAG_DATA_DIR", str(tmp_path / "data"))
        config.reset_config()
        assert privacy.export_path(None).parent == tmp_path / "data" / "exports"
    finally:
        monkeypatch.undo()
        config.reset_config()
    monkeypatch.setenv("HAG_DATA_DIR", str(tmp_path / "served"))  # `hag serve`'s own
    config.reset_config()
    try:
        env = serve_cmd.prefect_env(tmp_path / "home", 4200, base={})
        assert env["HAG_DATA_DIR"] == str(tmp_path / "served")
        given = serve_cmd.prefect_env(tmp_path / "home", 4200, base={"HAG_DATA_DIR": "/srv/hag"})
        assert given["HAG_DATA_DIR"] == "/srv/hag"
        monkeypatch.chdir(tmp_path)
        relative = serve_cmd.prefect_env(tmp_path / "home", 4200, base={"HAG_DATA_DIR": "d"})
        assert relative["HAG_DATA_DIR"] == str(tmp_path / "d")  # where `hag serve` runs
    finally:
        monkeypatch.undo()
        config.reset_config()


def test_an_erasure_run_ends_with_the_suites_and_fails_when_they_fail(db, prefect_harness):
    """A flow that changed the memory ends with the data-quality suites: here a nightly run
    recorded with culls its audit lacks (broken by hand) fails the erasure's run, naming the
    expectation, after the erasure committed."""
    from flows.learner_erase import learner_erase_flow
    from tests import factories as f

    f.entry(db, concept_slug="rsa")
    db.commit()
    run(db, payload("grace-s1", [turn(0, message="what is a modulus?")], learner="grace.h"))
    db.execute(
        "INSERT INTO hag_runs (kind, status, finished_at, summary) "
        "VALUES ('nightly', 'done', now(), '{\"culled\": 3}')"
    )
    db.commit()
    real = learner_erase_flow(learner_id="grace.h", dry_run=False, return_state=True)
    assert real.is_failed(), real.message
    assert "cull_runs" in real.message and "culled, audited" in real.message, real.message
    assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == 0
    db.rollback()
