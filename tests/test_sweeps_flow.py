"""The nightly Prefect flow: idempotent, publishes its report, fails on a broken memory."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from tests import factories as f

AS_OF = f.NOW
DAY = timedelta(days=1)


def _memory(db):
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    f.entry(
        db, concept_slug="primes", maturity="candidate", confidence=0.6, created_at=AS_OF - 20 * DAY
    )
    f.edge(
        db, a, b, "prerequisite", source_type="seed", confidence=0.05, created_at=AS_OF - 400 * DAY
    )
    f.edge(db, b, a, "related", source_type="learned", confidence=0.1, created_at=AS_OF - 100 * DAY)
    f.edge(
        db, b, a, "leads_to", source_type="enriched", confidence=0.2, created_at=AS_OF - 100 * DAY
    )
    db.commit()


def _state(db):
    tables = ("hag_entries", "hag_edges", "hag_edge_audit", "hag_maturity_history")
    snap = {t: sorted(map(repr, db.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}
    db.rollback()
    return snap


async def _artifacts(flow_run_id):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    async with get_client() as client:
        found = await client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {a.key: a for a in found}


def test_nightly_flow_twice_equals_once_and_publishes_its_report(db, prefect_harness):
    """Two flow runs as of the same moment leave the memory of one; each publishes three artifacts."""
    from flows.nightly import nightly_flow

    _memory(db)
    first = nightly_flow(as_of=AS_OF, return_state=True)
    assert first.is_completed(), first.message
    once = _state(db)
    summary = first.result()
    assert (summary["promoted_to_pattern"], summary["culled"]) == (1, 2)
    second = nightly_flow(as_of=AS_OF, return_state=True)
    assert second.is_completed(), second.message
    assert second.result()["culled"] == 0
    assert _state(db) == once

    artifacts = asyncio.run(_artifacts(first.state_details.flow_run_id))
    assert {"nightly-counts", "nightly-culled-edges", "nightly-summary", "data-quality"} <= set(
        artifacts
    )
    table = artifacts["nightly-culled-edges"].data
    assert "rsa" in str(table) and "enriched" in str(table) and "learned" in str(table)
    markdown = artifacts["nightly-summary"].data
    assert "| edges culled | 2 |" in markdown and "](" not in markdown and "http" not in markdown


def test_nightly_flow_builds_the_search_index_a_grown_topic_needs(db, prefect_harness, dials):
    """A topic past topic_exact_scan_max_rows gets its HNSW index; a dry run builds none."""
    from flows.nightly import nightly_flow
    from hag.retrieval import ann

    _memory(db)
    dials(topic_exact_scan_max_rows=1_000_000)
    assert nightly_flow(as_of=AS_OF).get("topic_indexes") == []
    dials(topic_exact_scan_max_rows=0)
    db.rollback()  # CREATE INDEX CONCURRENTLY waits for open snapshots

    def labels() -> list[dict[str, str]]:
        found = db.execute(
            "SELECT obj_description(indexrelid, 'pg_class') AS label FROM pg_index "
            "WHERE indrelid = 'hag_entries'::regclass AND indisvalid"
        ).fetchall()
        db.rollback()
        return found

    try:
        assert nightly_flow(as_of=AS_OF, dry_run=True)["topic_indexes"] is None
        assert {"label": "hag-ann topic:cryptography"} not in labels()
        assert nightly_flow(as_of=AS_OF)["topic_indexes"] == ["cryptography"]
        assert {"label": "hag-ann topic:cryptography"} in labels()
    finally:
        db.rollback()
        ann.drop_topic_indexes()


def test_failed_expectation_fails_the_flow_run_naming_it(db, prefect_harness):
    """An edge below the 0.05 floor makes the nightly run fail, listing that expectation."""
    from flows.nightly import nightly_flow

    _memory(db)
    db.execute("UPDATE hag_edges SET confidence = 0.01 WHERE source_type = 'seed'")
    db.commit()
    state = nightly_flow(as_of=AS_OF, return_state=True)
    assert state.is_failed()
    with pytest.raises(Exception, match="expect_column_values_to_be_between on confidence"):
        state.result()
