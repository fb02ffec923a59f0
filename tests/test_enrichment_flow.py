"""Enrichment of the shipped demo corpus, and the Prefect flow with its artifacts."""

from __future__ import annotations

import pytest

from hag import config
from hag.enrichment import enrich
from hag.operations import corpus

DRIFT_RESIDUE = ("buffer-overflow", "rsa", "steganography", "hashing-for-integrity", "cryptography")


def edges_of(db, slug):
    return db.execute(
        "SELECT count(*) AS n FROM hag_edges g JOIN hag_entries e "
        "ON e.id IN (g.source_entry_id, g.target_entry_id) "
        "WHERE e.topic_id = 'cryptography' AND e.visibility_scope = 'public' "
        "AND e.concept_slug = %s",
        (slug,),
    ).fetchone()["n"]


@pytest.fixture
def demo(db):
    """The shipped demo corpus, loaded with the offline embedder (no API key)."""
    config.reset_config()
    corpus.load_file(corpus.DEMO_CORPUS)
    db.commit()
    return db


def test_the_demo_orphans_are_connected_offline_and_the_suites_still_pass(demo):
    """The five drift-residue orphans get edges; `_unanchored_` stays isolated; suites pass."""
    from hag import quality

    assert [edges_of(demo, s) for s in DRIFT_RESIDUE] == [0] * 5
    summary = enrich(topic="cryptography", conn=demo)
    assert summary.offline
    assert sorted(o.concept_slug for o in summary.orphans) == sorted(DRIFT_RESIDUE)
    assert all(edges_of(demo, s) > 0 for s in DRIFT_RESIDUE)
    assert edges_of(demo, "_unanchored_") == 0
    assert enrich(topic="cryptography", conn=demo).orphans == []  # nothing left, nothing paid
    result = quality.run_all(demo)
    assert result.success, result.report()


def test_the_same_demo_run_twice_from_scratch_proposes_the_same_edges(demo):
    """The offline proposer is deterministic: two dry runs give identical proposals."""
    first = enrich(topic="cryptography", dry_run=True, conn=demo)
    second = enrich(topic="cryptography", dry_run=True, conn=demo)
    assert [o.accepted for o in first.orphans] == [o.accepted for o in second.orphans]
    assert first.accepted >= len(DRIFT_RESIDUE)


def test_the_flow_enriches_and_publishes_the_cost_ledger_and_the_proposals(demo, prefect_harness):
    """The flow returns the summary and leaves three artifacts: cost ledger, proposals, suites."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    from flows.enrichment import enrichment_flow

    state = enrichment_flow(topic="cryptography", limit=2, return_state=True)
    assert state.is_completed(), state.message
    result = state.result()
    assert result["totals"]["orphans"] == 2 and result["offline"] is True
    assert result["cost"]["calls"] == 2
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])
            )
        )
    by_key = {a.key: a for a in artifacts}
    # data-quality: the shared suites task every flow ends with (tasks/checks.py)
    assert set(by_key) == {"enrichment-cost-ledger", "enrichment-proposals", "data-quality"}
    assert by_key["enrichment-cost-ledger"].type == "table"
    assert "TOTAL" in str(by_key["enrichment-cost-ledger"].data)
    assert "accepted" in str(by_key["enrichment-proposals"].data)
