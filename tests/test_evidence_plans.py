"""The evidence functions inline into the queries that call them.

`hag_edge_evidence` and `hag_concept_learner_count` are read once per edge and once per
concept by every re-weigh. Written as one SQL SELECT, STABLE and not STRICT, the planner
inlines them where they are called in FROM; as PL/pgSQL each was a call per row (the read
of 20,000 concepts at 200k took 1.59–1.71 s where it takes 1.15 s inlined). A change that stops
the inlining (another language, STRICT, VOLATILE, a SET clause) fails here.
"""

from __future__ import annotations

import json

import pytest

from hag import settings
from hag.evidence import store
from tests import factories as f

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


def _nodes(plan: dict) -> list[dict]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += _nodes(child)
    return found


def _function_scans(db, sql: str, params: dict) -> list[str]:
    [row] = db.execute("EXPLAIN (FORMAT JSON) " + sql, params).fetchall()
    plan = row["QUERY PLAN"]
    plan = json.loads(plan) if isinstance(plan, str) else plan
    return [n.get("Function Name", "") for n in _nodes(plan[0]["Plan"])
            if n["Node Type"] == "Function Scan"]  # fmt: skip


@pytest.fixture
def pair(db):
    a = f.entry(db, concept_slug="aes")
    b = f.entry(db, concept_slug="rsa")
    edge = f.edge(db, a, b, source_type="learned", hit_count=2)
    db.commit()
    return a, edge


def test_edge_evidence_inlines(db, pair):
    _, edge = pair
    sql = (
        "SELECT u.units, u.learners FROM hag_edges e "
        "CROSS JOIN LATERAL hag_edge_evidence(e.id, e.hit_count, 1.0) u WHERE e.id = %(id)s"
    )
    assert _function_scans(db, sql, {"id": edge}) == []
    # and the answer is the function's: two unattributed sessions, one learner
    assert db.execute(sql, {"id": edge}).fetchone() == {"units": 2.0, "learners": 1}


def test_concept_learner_count_inlines(db, pair):
    source, _ = pair
    sql = "SELECT x.learners FROM hag_concept_learner_count(%(id)s) x"
    assert _function_scans(db, sql, {"id": source}) == []
    assert db.execute(sql, {"id": source}).fetchone() == {"learners": 1}


def _plan_text(db, sql: str, params: dict) -> str:
    """The verbose plan: an inlined function's name appears nowhere in it, a call left in a
    select list or a filter does (`Output: hag_concept_learner_count(...)`)."""
    return "\n".join(r["QUERY PLAN"] for r in db.execute("EXPLAIN (VERBOSE) " + sql, params))


@pytest.mark.parametrize(
    ("name", "sources"),
    [
        ("prerequisite_evidence", {"sources"}),
        ("sequence_evidence", {"sources", "targets", "named_sources", "named_targets"}),
    ],
)
def test_the_reweighs_reads_call_neither_function(db, pair, name, sources):
    """The re-weigh's reads themselves, prerequisites' and sequence edges' (every branch that
    names the edges it reads: out of, into, by identity): neither function is called
    anywhere in their plans."""
    source, _ = pair
    sql = store.query("evidence" if name == "prerequisite_evidence" else "sequences", name)
    named = {k: [source] for k in sources}
    if "named_sources" in sources:
        named["named_types"] = ["leads_to"]
    params = store.with_dials(sql, settings.current(), **named)
    text = _plan_text(db, sql, params)
    assert "hag_edge_evidence" not in text
    assert "hag_concept_learner_count" not in text
