"""`python -m bench evidence` loads its history set-based with the row triggers off and
groups the sums they keep itself. Those sums must be the ones the memory's own triggers keep,
or the bench times a memory no session-end could leave; and the sequence read must see the
history's moves, the ones along authored lines too, or the bench times a read with nothing
to sum."""

from __future__ import annotations

import pytest

from bench import bench_evidence as bench
from hag.evidence import store
from tests import test_evidence_units

units = test_evidence_units.units  # the fixture: the evidence profile as it ships

KEPT = {
    "hag_edge_learner_units": "edge_id, learner_id, source_entry_id, prerequisite, "
    "round(share::numeric, 9), sessions",
    "hag_edge_units": "edge_id, source_entry_id, cap, round(units::numeric, 9), learners, sessions",
    "hag_concept_learners": "source_entry_id, learner_id, pairs",
}


def _kept(db) -> dict[str, list[tuple]]:
    return {
        table: [tuple(r.values()) for r in db.execute(f"SELECT {cols} FROM {table} ORDER BY 1, 2")]
        for table, cols in KEPT.items()
    }


def test_the_bench_history_keeps_the_sums_the_triggers_keep(db, units):
    """The history loaded, its kept sums read; then every report deleted (the triggers empty
    the sums) and inserted again with the triggers on: the sums they keep are the bench's,
    row for row, for prerequisites and sequence edges alike."""
    bench.build_topic(db, 0, 3000)
    db.commit()
    loaded = _kept(db)
    kinds = {
        r["edge_type"]: r["n"]
        for r in db.execute(
            "SELECT e.edge_type, count(*) AS n FROM hag_edges e "
            "JOIN hag_edge_units u ON u.edge_id = e.id GROUP BY e.edge_type"
        )
    }
    # every sequence edge holds moves at this size (3,000 moves over 286 edges)
    assert kinds["leads_to"] + kinds["fallback"] == len(bench.MOVES) and kinds["prerequisite"]
    db.execute("CREATE TEMPORARY TABLE replay AS SELECT * FROM hag_edge_learner_reports")
    db.execute("DELETE FROM hag_edge_learner_reports")
    assert all(not rows for rows in _kept(db).values())
    db.execute("INSERT INTO hag_edge_learner_reports SELECT * FROM replay")
    assert _kept(db) == loaded


def test_the_sequence_read_sums_the_bench_history_moves(db, units):
    """Every leads_to out of concept 0 reads its own units, the units out of concept 0 and
    the topic's total, each summed from the reports (capped per learner), with the moves
    along authored lines in the total."""
    bench.build_topic(db, 0, 3000)
    db.commit()
    cap = units.prerequisite_learner_cap
    rows = db.execute(
        "SELECT e.id, e.source_type, e.source_entry_id, sum(r.share) AS share "
        "FROM hag_edges e JOIN hag_edge_learner_reports r ON r.edge_id = e.id "
        "WHERE e.edge_type = 'leads_to' GROUP BY e.id, r.learner_id"
    ).fetchall()
    edge_units: dict = {}
    for r in rows:
        edge_units[r["id"]] = edge_units.get(r["id"], 0.0) + min(cap, r["share"])
    authored = {r["id"] for r in rows if r["source_type"] == "seed"}
    assert authored  # the history moves along authored lines too
    first = bench._entry_id(0, 0)
    out_of_first = {r["id"] for r in rows if r["source_entry_id"] == first}
    read = [e for e in store.sequence_evidence(db, [first], [], units) if e.edge_type == "leads_to"]
    assert {e.edge_id for e in read} == out_of_first
    for fact in read:
        assert fact.total_units == pytest.approx(sum(edge_units.values()))
        assert fact.out_units == pytest.approx(sum(edge_units[i] for i in out_of_first))
        assert fact.units == pytest.approx(edge_units[fact.edge_id])
