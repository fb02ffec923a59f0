"""`hag history`: why an edge has its confidence, and what the memory believed after a session."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from hag.cli import cli
from hag.errors import NotFoundError
from tests import factories as f
from tests import session_builders as sb


@pytest.fixture
def two_sessions(db):
    """s1 learns leads_to a→b (0.3, seed); s2 renders it in a successful turn (+0.05 → 0.35)."""
    a = f.entry(db, concept_slug="aes", maturity="proven", confidence=0.8)
    b = f.entry(db, concept_slug="modes-of-operation", maturity="proven", confidence=0.8)
    db.commit()
    sb.run(db, sb.sequence("s1", a, b, day=0))
    edge = sb.edge_row(db, a, b, "leads_to")
    db.commit()
    sb.run(db, sb.payload("s2", [sb.turn(0, rendered=[edge["id"]], outcome="success")], day=1))
    db.commit()
    return edge["id"]


def _cli(*args):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_an_edges_history_says_each_change_and_its_session(two_sessions):
    """Created at 0.3 by s1, then graded up to 0.35 by s2, in that order."""
    rows = _cli("history", str(two_sessions), "--json")
    assert [(r["old_value"], round(r["new_value"], 6), r["session_id"]) for r in rows] == [
        (None, 0.3, "s1"),
        (0.3, 0.35, "s2"),
    ]
    assert all(r["reason"] for r in rows)


def test_memory_after_a_session_is_what_it_believed_then(two_sessions):
    """After s1 the edge stood at 0.3 even though s2 has since moved it to 0.35."""
    after_s1 = {
        r["entity_id"]: r["confidence"] for r in _cli("history", "--after-session", "s1", "--json")
    }
    after_s2 = {
        r["entity_id"]: r["confidence"] for r in _cli("history", "--after-session", "s2", "--json")
    }
    edge = str(two_sessions)
    assert round(after_s1[edge], 6) == 0.3
    assert round(after_s2[edge], 6) == 0.35


def test_unknown_ids_and_sessions_are_clear_errors(db):
    """An id with no history, a malformed id and an unknown session each get a reason."""
    runner = CliRunner()
    missing = runner.invoke(cli, ["history", "00000000-0000-0000-0000-000000000001"])
    assert isinstance(missing.exception, NotFoundError)
    assert "has a confidence history" in str(missing.exception)
    assert "not an entry or edge id" in str(runner.invoke(cli, ["history", "edge-7"]).exception)
    unknown = runner.invoke(cli, ["history", "--after-session", "nope"])
    assert "no session 'nope' was ingested" in str(unknown.exception)
    both = runner.invoke(cli, ["history", "x", "--after-session", "s1"])
    assert both.exit_code == 2
