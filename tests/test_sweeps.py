"""The nightly sweeps (SPEC §5): the seed's cull and promotion lines, the audit, dry runs."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest

from hag.nightly import sweeps
from hag.storage.sqlfiles import query
from tests import factories as f
from tests.fix_db import lock_waiters, until

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

AS_OF = f.NOW
DAY = timedelta(days=1)


def _pair(db, source: str | None = None, target: str | None = None):
    return f.entry(db, concept_slug=source), f.entry(db, concept_slug=target)


def _edge(
    db,
    *,
    age_days: float = 120,
    confidence: float = 0.2,
    source_type: str = "learned",
    traversal_count: int = 0,
    edge_type: str = "prerequisite",
    pair=None,
):
    a, b = pair or _pair(db)
    return f.edge(
        db,
        a,
        b,
        edge_type,
        confidence=confidence,
        source_type=source_type,
        traversal_count=traversal_count,
        created_at=AS_OF - age_days * DAY,
    )


def _edge_ids(db) -> set:
    return {r["id"] for r in db.execute("SELECT id FROM hag_edges").fetchall()}


def _sweep(db, **kw):
    db.commit()
    return sweeps.sweep(db, as_of=AS_OF, **kw)


def test_cull_age_line_is_ninety_days(db):
    """An edge 89 days old survives; one exactly 90 days old is culled."""
    pair = _pair(db)
    young = _edge(db, age_days=89, pair=pair, edge_type="related")
    old = _edge(db, age_days=90, pair=pair, edge_type="leads_to")
    summary = _sweep(db)
    assert _edge_ids(db) == {young}
    assert summary.culled == 1 and summary.culled_edges[0].edge_id == old


def test_cull_confidence_line_is_below_point_35(db):
    """An edge at 0.35 survives; one at 0.349 is culled."""
    pair = _pair(db)
    at_line = _edge(db, confidence=0.35, pair=pair, edge_type="related")
    _edge(db, confidence=0.349, pair=pair, edge_type="leads_to")
    _sweep(db)
    assert _edge_ids(db) == {at_line}


def test_traversed_edge_survives(db):
    """An old weak learned edge that reached a prompt once is never culled."""
    kept = _edge(db, traversal_count=1)
    assert _sweep(db).culled == 0
    assert _edge_ids(db) == {kept}


def test_seed_edge_survives_even_when_the_threshold_allows_everything(db, dials):
    """A seed edge at 0.05 and 400 days old survives with cull_max_confidence at 1.0."""
    seed = _edge(db, confidence=0.05, age_days=400, source_type="seed")
    learned = _edge(db, confidence=0.99, age_days=400)
    dials(cull_max_confidence=1.0)
    summary = _sweep(db)
    assert _edge_ids(db) == {seed}
    assert summary.culled_by_source_type == {"learned": 1}
    assert learned not in _edge_ids(db)


def test_sql_protects_seed_even_if_the_allowlist_names_it(db):
    """The cull statement itself refuses seed edges, whatever list the caller binds."""
    seed = _edge(db, confidence=0.05, age_days=400, source_type="seed")
    enriched = _edge(db, confidence=0.05, age_days=400, source_type="enriched")
    params = sweeps.sweep_parameters(sweeps.settings.load(db), AS_OF, f.uuid.uuid4())
    params["cull_source_types"] = ["seed", "learned", "enriched"]
    params["cull_max_confidence"] = 1.0
    rows = db.execute(query("sweeps", "cull_edges"), params).fetchall()
    assert {r["source_type"]: r["n"] for r in rows} == {"enriched": 1}
    assert _edge_ids(db) == {seed}
    assert enriched not in _edge_ids(db)


def test_new_provenance_class_is_protected_until_allowlisted(db, dials):
    """An edge of a made-up provenance survives; adding it to the allowlist lets it go."""
    made_up = _edge(db, confidence=0.05, age_days=400, source_type="imported")
    assert _sweep(db).culled == 0
    assert _edge_ids(db) == {made_up}
    dials(cull_source_types=["learned", "enriched", "imported"])
    assert _sweep(db).culled == 1
    assert _edge_ids(db) == set()


def test_audit_rows_equal_deleted_rows_field_for_field(db):
    """Each culled edge's audit row is its full row plus the run id, reason and rules."""
    pair = _pair(db)
    ids = [
        _edge(db, confidence=0.1 + i / 100, age_days=100 + i, pair=pair, edge_type=t)
        for i, t in enumerate(("prerequisite", "fallback", "leads_to"))
    ]
    db.execute(
        "UPDATE hag_edges SET condition = 'when stuck', hit_count = 2, "
        "source_session_id = 's-1' WHERE id = %s",
        (ids[1],),
    )
    before = {r["id"]: dict(r) for r in db.execute("SELECT * FROM hag_edges").fetchall()}
    summary = _sweep(db)
    audit = db.execute("SELECT * FROM hag_edge_audit ORDER BY audit_id").fetchall()
    assert len(audit) == 3 == summary.culled
    for a in audit:
        original = before[a["edge_id"]]
        for column, value in original.items():
            assert a["edge_id" if column == "id" else column] == value, column
        assert a["run_id"] == summary.run_id
        assert a["reason"] == "cull"
        assert a["deleted_at"] == AS_OF
        assert a["rule_values"]["cull_max_confidence"] == 0.35
        assert a["rule_values"]["cull_min_age_days"] == 90
        assert a["rule_values"]["cull_source_types"] == ["learned", "enriched"]
        assert a["rule_values"]["as_of"] == AS_OF.isoformat()
        assert sorted(a["rule_values"]) == sorted(sweeps.CULL_RULE_KEYS)  # the cull's, not all


def test_a_cull_leaves_the_audit_analyzed(db):
    """The planner knows the audit's size after a cull (session-end's evidence read probes it
    by source; with the size it had before the cull it scanned every culled prerequisite):
    the statistics count the rows the cull wrote. A sweep that culls nothing analyzes
    nothing: a row deleted meanwhile is still in them."""

    def reltuples() -> float:
        row = db.execute("SELECT reltuples FROM pg_class WHERE relname = 'hag_edge_audit'")
        return float(row.fetchone()["reltuples"])

    for i in range(3):
        _edge(db, confidence=0.1 + i / 100, age_days=100 + i, pair=_pair(db), edge_type="leads_to")
    db.execute("ANALYZE hag_edge_audit")  # empty: the planner's size before the cull
    db.commit()
    assert reltuples() <= 0
    assert _sweep(db).culled == 3
    assert reltuples() == 3
    _edge(db, confidence=0.9, age_days=100, pair=_pair(db, "x", "y"))
    db.execute(
        "DELETE FROM hag_edge_audit WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )
    db.commit()
    assert _sweep(db).culled == 0
    assert reltuples() == 3


def test_run_is_recorded_with_its_counts(db):
    """A real run leaves one 'done' nightly run row whose counts match what it did."""
    _edge(db)
    summary = _sweep(db)
    run = db.execute("SELECT * FROM hag_runs").fetchone()
    assert (run["run_id"], run["kind"], run["status"], run["dry_run"]) == (
        summary.run_id,
        "nightly",
        "done",
        False,
    )
    assert run["as_of"] == AS_OF
    assert run["summary"]["culled"] == 1
    assert run["summary"]["culled_by_source_type"] == {"learned": 1}


def _promotable(db, **kw):
    base = dict(maturity="candidate", confidence=0.5, created_at=AS_OF - 14 * DAY, failure_count=0)
    base.update(kw)
    return f.entry(db, **base)


def _maturity(db, entry_id) -> str:
    return db.execute("SELECT maturity FROM hag_entries WHERE id = %s", (entry_id,)).fetchone()[
        "maturity"
    ]


def test_promotion_lines_are_the_seeds(db):
    """Candidates at 14 days, 0.50, no failures become patterns; 13 days, 0.49 or 1 failure stay."""
    promoted = _promotable(db)
    young = _promotable(db, created_at=AS_OF - 13 * DAY - timedelta(hours=23))
    weak = _promotable(db, confidence=0.49)
    failed = _promotable(db, failure_count=1)
    summary = _sweep(db)
    assert summary.promoted_to_pattern == 1
    assert _maturity(db, promoted) == "pattern"
    assert [_maturity(db, e) for e in (young, weak, failed)] == ["candidate"] * 3


def test_promotion_writes_maturity_history(db):
    """Every maturity change leaves a history row with the run, the rule and as_of."""
    entry = _promotable(db)
    summary = _sweep(db)
    rows = db.execute("SELECT * FROM hag_maturity_history").fetchall()
    assert [
        (r["entry_id"], r["old_maturity"], r["new_maturity"], r["rule"], r["run_id"], r["at"])
        for r in rows
    ] == [(entry, "candidate", "pattern", "promotion", summary.run_id, AS_OF)]


def test_pattern_becomes_proven_and_sunk_entries_are_archived(db):
    """Our further steps: a well-watched pattern becomes proven; a failing weak one is archived."""
    proven = f.entry(
        db,
        maturity="pattern",
        confidence=0.8,
        created_at=AS_OF - 30 * DAY,
        success_count=8,
        failure_count=2,
    )
    too_many_failures = f.entry(
        db,
        maturity="pattern",
        confidence=0.8,
        created_at=AS_OF - 30 * DAY,
        success_count=7,
        failure_count=2,
    )
    sunk = f.entry(db, maturity="candidate", confidence=0.149, failure_count=3)
    not_sunk = f.entry(db, maturity="candidate", confidence=0.15, failure_count=3)
    proven_weak = f.entry(db, maturity="proven", confidence=0.05, failure_count=9)
    summary = _sweep(db)
    assert (summary.promoted_to_proven, summary.archived) == (1, 1)
    assert [_maturity(db, e) for e in (proven, too_many_failures, sunk, not_sunk, proven_weak)] == [
        "proven",
        "pattern",
        "archived",
        "candidate",
        "proven",
    ]


def test_one_run_reaches_the_fixed_point(db):
    """A candidate that qualifies for both steps ends proven in one run; a second run does nothing."""
    entry = _promotable(db, confidence=0.9, created_at=AS_OF - 40 * DAY, success_count=6)
    first = _sweep(db)
    assert (first.promoted_to_pattern, first.promoted_to_proven) == (1, 1)
    assert _maturity(db, entry) == "proven"
    second = _sweep(db)
    assert second.counts() == {
        "promoted_to_pattern": 0,
        "promoted_to_proven": 0,
        "archived": 0,
        "reprieved": 0,
        "culled": 0,
        "culled_by_source_type": {},
    }


def _snapshot(db):
    tables = (
        "hag_entries",
        "hag_edges",
        "hag_edge_audit",
        "hag_runs",
        "hag_maturity_history",
        "hag_confidence_history",
    )
    return {t: sorted(map(repr, db.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}


def _mixed_memory(db):
    pair = _pair(db)
    _edge(db, pair=pair)
    _edge(db, pair=pair, edge_type="related", source_type="enriched", confidence=0.1)
    _edge(db, pair=pair, edge_type="leads_to", source_type="seed", confidence=0.05, age_days=400)
    _promotable(db)
    f.entry(db, maturity="pattern", confidence=0.9, created_at=AS_OF - 60 * DAY, success_count=9)
    f.entry(db, maturity="candidate", confidence=0.1, failure_count=4)


def test_dry_run_changes_nothing_and_forecasts_the_real_run(db):
    """A dry run writes nothing at all, and reports exactly what the real run then does."""
    _mixed_memory(db)
    db.commit()
    before = _snapshot(db)
    forecast = _sweep(db, dry_run=True)
    assert _snapshot(db) == before
    real = _sweep(db)
    assert forecast.dry_run and not real.dry_run
    assert (
        forecast.counts()
        == real.counts()
        == {
            "promoted_to_pattern": 1,
            "promoted_to_proven": 1,
            "archived": 1,
            "reprieved": 0,
            "culled": 2,
            "culled_by_source_type": {"enriched": 1, "learned": 1},
        }
    )
    assert {e.edge_id for e in forecast.culled_edges} == {e.edge_id for e in real.culled_edges}


def test_running_twice_equals_running_once(db):
    """A second run as of the same moment changes no entry, edge or audit row."""
    _mixed_memory(db)
    _sweep(db)
    once = _snapshot(db)
    second = _sweep(db)
    again = _snapshot(db)
    assert second.counts()["culled"] == 0
    once.pop("hag_runs"), again.pop("hag_runs")  # one more run row, by design
    assert again == once


def test_report_lists_weakest_culled_edges_up_to_the_dial(db, dials):
    """The report's table is bounded by sweep_report_max_rows, weakest first; counts stay exact."""
    a, b = _pair(db, "rsa", "modular-arithmetic")
    for i, t in enumerate(("prerequisite", "fallback", "leads_to")):
        f.edge(
            db,
            a,
            b,
            t,
            confidence=0.3 - i / 10,
            source_type="learned",
            created_at=AS_OF - 100 * DAY,
        )
    dials(sweep_report_max_rows=2)
    summary = _sweep(db)
    assert summary.culled == 3
    assert [round(e.confidence, 2) for e in summary.culled_edges] == [0.1, 0.2]
    assert summary.culled_edges[0].source_concept == "rsa"
    assert summary.culled_edges[0].age_days == 100
    text = sweeps.render_markdown(summary)
    assert "| edges culled | 3 |" in text and "http" not in text


def _archive_fails(monkeypatch) -> None:
    """The sweep's archive step raises, after its promotion ran in the same transaction."""
    real_count = sweeps._count

    def boom(conn, name, params):
        if name == "archive_sunk":
            raise RuntimeError("disk on fire")
        return real_count(conn, name, params)

    monkeypatch.setattr(sweeps, "_count", boom)


def test_failed_run_is_recorded_and_changes_nothing(db, monkeypatch):
    """A run that fails mid-way rolls back every change and marks its run row failed."""
    edge = _edge(db)
    candidate = _promotable(db)
    _archive_fails(monkeypatch)
    with pytest.raises(RuntimeError):
        _sweep(db)
    assert _edge_ids(db) == {edge}
    assert _maturity(db, candidate) == "candidate"
    assert db.execute("SELECT count(*) AS n FROM hag_maturity_history").fetchone()["n"] == 0
    run = db.execute("SELECT status, summary FROM hag_runs").fetchone()
    assert run["status"] == "failed" and "disk on fire" in json.dumps(run["summary"])


@pytest.mark.parametrize(
    "name",
    [
        "cull_edges",
        "promote_to_pattern",
        "promote_to_proven",
        "maturity_forecast",
    ],
)
def test_rules_are_inlined_into_plain_column_tests(db, name):
    """The planner inlines the rule functions, so a million rows cost a plain WHERE clause."""
    params = sweeps.sweep_parameters(sweeps.settings.load(db), AS_OF, f.uuid.uuid4())
    plan = "\n".join(
        r["QUERY PLAN"]
        for r in db.execute(
            "EXPLAIN (VERBOSE, COSTS OFF) " + query("sweeps", name), params
        ).fetchall()
    )
    assert "hag_edge_is_cullable" not in plan and "hag_entry_promotes" not in plan, plan
    assert "confidence <" in plan or "confidence >=" in plan, plan


@pytest.mark.parametrize(
    "name", ["cull_edges", "cull_forecast", "cull_candidate_ids", "cull_forecast_rows"]
)
def test_every_cull_query_skips_restored_edges_through_one_inlined_anti_join(db, name):
    """Each of the four cull queries asks hag_restored_edges(), and the planner turns it into
    an anti-join over the audit (no function call per edge)."""
    assert "hag_restored_edges()" in query("sweeps", name)
    params = sweeps.sweep_parameters(sweeps.settings.load(db), AS_OF, f.uuid.uuid4())
    plan = "\n".join(
        r["QUERY PLAN"]
        for r in db.execute(
            "EXPLAIN (VERBOSE, COSTS OFF) " + query("sweeps", name), {**params, "limit": 10}
        ).fetchall()
    )
    assert "hag_restored_edges" not in plan and "Anti Join" in plan, plan
    # the restored rows: a filter on the audit, or its partial index (the predicate is implied)
    restored = "restored_at IS NOT NULL" in plan or "hag_edge_audit_restored_idx" in plan
    assert "hag_edge_audit" in plan and restored, plan


def test_property_forecast_equals_run_and_second_run_changes_nothing(db):
    """For any memory and as_of: the dry run forecasts the real run, and a second run does nothing."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tests.fix_db import reset_database

    entries = st.lists(
        st.tuples(
            st.sampled_from(["candidate", "pattern", "proven", "archived"]),
            st.floats(0, 1),
            st.integers(0, 60),
            st.integers(0, 10),
            st.integers(0, 5),
        ),
        max_size=8,
    )
    edges = st.lists(
        st.tuples(
            st.sampled_from(["seed", "learned", "enriched", "imported"]),
            st.floats(0.05, 1),
            st.integers(0, 200),
            st.integers(0, 2),
        ),
        max_size=5,
    )
    edge_types = ("prerequisite", "fallback", "leads_to", "related", "supersedes")

    @settings(
        max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
    )
    @given(entries=entries, edges=edges, shift=st.integers(-100, 100))
    def check(entries, edges, shift):
        reset_database(db)
        a, b = _pair(db)
        for maturity, confidence, age, successes, failures in entries:
            f.entry(
                db,
                maturity=maturity,
                confidence=confidence,
                created_at=AS_OF - age * DAY,
                success_count=successes,
                failure_count=failures,
            )
        for edge_type, (source_type, confidence, age, traversals) in zip(
            edge_types, edges, strict=False
        ):
            f.edge(
                db,
                a,
                b,
                edge_type,
                confidence=confidence,
                source_type=source_type,
                created_at=AS_OF - age * DAY,
                traversal_count=traversals,
            )
        db.commit()
        as_of = AS_OF + shift * DAY
        forecast = sweeps.sweep(db, as_of=as_of, dry_run=True)
        real = sweeps.sweep(db, as_of=as_of)
        assert forecast.counts() == real.counts()
        protected = db.execute(
            "SELECT count(*) AS n FROM hag_edges WHERE source_type IN ('seed', 'imported')"
        ).fetchone()["n"]
        assert protected == sum(1 for e in edges if e[0] in ("seed", "imported"))
        once = _snapshot(db)
        assert sweeps.sweep(db, as_of=as_of).counts()["culled"] == 0
        again = _snapshot(db)
        once.pop("hag_runs"), again.pop("hag_runs")
        assert again == once

    check()


def _closes_a_cycle(
    db, monkeypatch, table: str, ids: list, lock: str, params: dict, ineligible: str
) -> dict:
    """A session's sorted lock pass (`lock`) over three rows Y < W < X, where X comes first in
    the table's scan and the night may change X and Y: the session takes Y and waits on W
    (held by another transaction); the night starts and waits too; W is released, and the
    session asks for X. A night locking in scan order holds X then and waits on Y: each
    waits on the other, and PostgreSQL ends the night: its one deadlock check runs 10 s
    after it starts to wait, once the cycle has long closed, and the session's at 60 s.
    The session then rolls back and the night goes on, or runs again. Returns the run's
    row."""
    import threading

    from hag.storage import db as hdb

    heap = [r["id"] for r in db.execute(f"SELECT id FROM {table} ORDER BY ctid").fetchall()]
    db.rollback()
    heap = [i for i in heap if i in set(ids)]
    at = next(n for n, c in enumerate(heap) if sum(str(i) < str(c) for i in heap[n:]) >= 2)
    x = heap[at]
    y, w = sorted((i for i in heap[at:] if str(i) < str(x)), key=str)[:2]
    db.execute(ineligible, (w,))
    db.commit()

    def waiting(pids: set[int]) -> set[int]:
        return lock_waiters(db) - pids

    box: dict = {}
    monkeypatch.setenv("PGOPTIONS", "-c deadlock_timeout=10s")  # the night's connections
    with hdb.connect() as holder, hdb.connect() as session:
        session.execute("SET deadlock_timeout = '60s'")
        session.commit()
        holder.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR NO KEY UPDATE", (w,))
        quiet = {holder.info.backend_pid}
        sessions = threading.Thread(
            target=lambda: session.execute(
                lock, {**params, "ids": sorted([y, w, x], key=str)}
            ).fetchall()
        )
        sessions.start()
        until(lambda: session.info.backend_pid in waiting(quiet))

        def night() -> None:
            try:
                box["run"] = sweeps.run_nightly(as_of=AS_OF)
            except Exception as exc:
                box["error"] = exc

        nightly = threading.Thread(target=night)
        nightly.start()
        until(lambda: waiting(quiet | {session.info.backend_pid}) or not nightly.is_alive())
        holder.commit()  # the session takes W, then asks for X
        sessions.join(30)
        assert not sessions.is_alive()
        session.rollback()
    nightly.join(60)
    assert "error" not in box, box.get("error")
    return dict(
        db.execute(
            "SELECT status, summary FROM hag_runs WHERE run_id = %s", (box["run"].run_id,)
        ).fetchone()
    )


def test_the_nights_entry_steps_ended_by_a_deadlock_with_a_session_run_again(db, monkeypatch):
    """Promotion locks entries in the order it scans them (a sorted pass first would write
    each promoted row twice): PostgreSQL ends the sweep, and it runs again."""
    old = AS_OF - timedelta(days=60)
    ids = [
        f.entry(db, concept_slug=f"k{i}", maturity="candidate", confidence=0.8, created_at=old)
        for i in range(12)
    ]
    db.commit()
    run = _closes_a_cycle(
        db,
        monkeypatch,
        "hag_entries",
        ids,
        query("session", "lock_entries"),
        {},
        "UPDATE hag_entries SET failure_count = 99, confidence = 0.9 WHERE id = %s",
    )
    assert run["status"] == "done" and run["summary"]["retries"] == 1
    # the eleven promotable went on, the one made ineligible stayed
    assert sorted(_maturity(db, i) == "candidate" for i in ids) == [False] * 11 + [True]


def test_the_seed_cull_ended_by_a_deadlock_with_a_session_runs_again(db, monkeypatch):
    """Under the seed's rule the cull deletes in scan order (locking its rows first would
    cost a write of each culled row more): PostgreSQL ends it, and the sweep runs again."""
    ends = [f.entry(db, concept_slug=f"c{i}") for i in range(13)]
    ids = [
        f.edge(
            db, ends[i], ends[i + 1], "related", confidence=0.1, source_type="learned",
            created_at=AS_OF - 100 * DAY,
        )
        for i in range(12)
    ]  # fmt: skip
    db.commit()
    params = {
        "sources": [],
        "targets": [],
        "types": [],
        "sibling_sources": [],
        "sequence_sources": [],
        "sequence_targets": [],
    }
    run = _closes_a_cycle(
        db,
        monkeypatch,
        "hag_edges",
        ids,
        query("session", "lock_edges"),
        params,
        "UPDATE hag_edges SET confidence = 0.9 WHERE id = %s",
    )
    assert run["status"] == "done" and run["summary"]["retries"] == 1
    assert len(_edge_ids(db)) == 1  # the eleven cullable edges went, the one made safe stayed


def _step_over_a_cullable_prerequisite(db, dials):
    """Under the units rules: a walked learned prerequisite b -> a, old and below the cull's
    ceiling, and a learned `leads_to` a -> b, which reads b -> a as its prior; a -> b's id."""
    dials(prerequisite_confidence_rule="units", edge_grading_rule="units")
    a, b = f.entry(db, concept_slug="a"), f.entry(db, concept_slug="b")
    f.edge(
        db, b, a, "prerequisite", confidence=0.32, source_type="learned",
        created_at=AS_OF - 100 * DAY,
    )  # fmt: skip
    return f.edge(
        db, a, b, "leads_to", confidence=0.5, source_type="learned", created_at=AS_OF - 5 * DAY
    )


def test_sequence_edges_read_the_prerequisites_the_cull_moved(db, dials):
    """Under the units rules a `leads_to` a -> b reads the prerequisite b -> a as its prior.
    The night culls b -> a (learned, old, below the cull's ceiling) after its first step
    re-weighed a -> b on it; the step runs again after the cull, so a -> b stands where its
    formula puts it without b -> a, and a second run for the same as_of moves nothing."""
    step = _step_over_a_cullable_prerequisite(db, dials)
    db.commit()
    first = sweeps.run_nightly(as_of=AS_OF)
    assert first.culled == 1  # a -> b moved before the cull, and again after it
    assert (first.sequence_reweighed, first.sequence_reweighed_after_cull) == (1, 1)
    assert first.counts()["sequence_reweighed_after_cull"] == 1
    after = db.execute("SELECT confidence FROM hag_edges WHERE id = %s", (step,)).fetchone()
    db.rollback()
    second = sweeps.run_nightly(as_of=AS_OF)
    assert (second.culled, second.sequence_reweighed) == (0, 0)
    again = db.execute("SELECT confidence FROM hag_edges WHERE id = %s", (step,)).fetchone()
    assert again == after


def _moves(db, edge, *learners: str) -> None:
    """One move along a sequence edge per learner (a session each), as session-end keeps it."""
    for n, learner in enumerate(learners):
        db.execute(
            "INSERT INTO hag_edge_learner_reports"
            " (edge_id, session_id, learner_id, turns, share, reported_at)"
            " VALUES (%s, %s, %s, 1, 1, %s)",
            (edge, f"s-{edge}-{n}", learner, AS_OF - 10 * DAY),
        )


def test_sequence_edges_read_the_sequence_edges_the_cull_deleted(db, dials, monkeypatch):
    """A learned `leads_to` made by one learner stays held below the cull's ceiling; culled,
    its move leaves the sums its siblings read (their topic's total of moves, their sources'
    and targets'), so the step runs again after such a cull too, over the survivors."""
    dials(prerequisite_confidence_rule="units", edge_grading_rule="units")
    a, b, c, d = (f.entry(db, concept_slug=s) for s in "abcd")
    kept = f.edge(
        db, a, b, "leads_to", confidence=0.5, source_type="learned", created_at=AS_OF - 5 * DAY
    )
    lone = f.edge(
        db, c, d, "leads_to", confidence=0.1, source_type="learned",
        created_at=AS_OF - 100 * DAY,
    )  # fmt: skip
    _moves(db, kept, "learner-1", "learner-2")
    _moves(db, lone, "learner-3")
    db.commit()
    passes = []
    real = sweeps.reweigh_sequence_edges

    def counted(conn, sources, *args, **kwargs):
        passes.append(set(sources))
        return real(conn, sources, *args, **kwargs)

    monkeypatch.setattr(sweeps, "reweigh_sequence_edges", counted)
    first = sweeps.run_nightly(as_of=AS_OF)
    assert first.culled == 1 and _edge_ids(db) == {kept}
    assert passes == [{a, c}, {a}]  # before the cull, and after it over the survivor
    second = sweeps.run_nightly(as_of=AS_OF)
    assert (second.culled, second.sequence_reweighed) == (0, 0)
    assert passes[2:] == [{a}]  # nothing culled: one pass


def _second_sequence_pass_fails(monkeypatch) -> None:
    """The nightly's second sequence pass (after the cull) raises; the first runs."""
    from hag.evidence import reweigh

    calls = []
    real = reweigh.reweigh_sequence_edges

    def second_fails(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("disk on fire")
        return real(*args, **kwargs)

    monkeypatch.setattr(sweeps, "reweigh_sequence_edges", second_fails)


def test_a_failure_after_the_run_was_done_leaves_it_done(db, dials, monkeypatch):
    """The sequence step's second pass fails: the run's changes are committed and audited,
    so its row stays done with its counts, the error beside them; the night's upkeep still
    runs, and then the error is raised."""
    _step_over_a_cullable_prerequisite(db, dials)
    db.commit()
    _second_sequence_pass_fails(monkeypatch)
    upkept = []
    with pytest.raises(sweeps.FailedAfterDone, match="is done, but .* disk on fire") as done:
        sweeps.nightly(as_of=AS_OF, upkeep_step=lambda: upkept.append(1) or [])
    assert upkept == [1]  # the read path's upkeep still ran
    assert done.value.summary.culled == 1  # the report its callers publish
    run = db.execute("SELECT status, summary FROM hag_runs WHERE kind = 'nightly'").fetchone()
    assert run["status"] == "done" and run["summary"]["culled"] == 1
    assert "disk on fire" in run["summary"]["error"]
    assert len(_edge_ids(db)) == 1  # the cull stands


def test_nightly_json_after_a_failure_past_the_done_run_prints_json_only(
    db, dials, monkeypatch, tmp_path
):
    """`hag nightly --json` whose second sequence pass fails: stdout is the run's summary
    as JSON and nothing else (a script parses it), the error on stderr, exit 1."""
    import json

    from click.testing import CliRunner

    from hag.cli import cli

    _step_over_a_cullable_prerequisite(db, dials)
    db.commit()
    _second_sequence_pass_fails(monkeypatch)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))  # no profile names a server: direct
    result = CliRunner().invoke(
        cli, ["nightly", "--json", "--no-check", "--as-of", AS_OF.isoformat()]
    )
    assert result.exit_code != 0
    assert json.loads(result.stdout)["culled"] == 1


def test_a_run_that_fails_keeps_the_counts_of_its_first_sequence_pass(db, dials, monkeypatch):
    """The first sequence pass commits before the sweep's transaction, its counts on the
    still-running row (what a reaper keeps of a process that died there); a sweep that then
    fails rolls back only its own work, so the failed run's summary carries the first
    pass's count beside the error: as many as the history rows it wrote for the edge, and
    `hag runs` shows both."""
    from hag.cli.runs_cmd import counts

    step = _step_over_a_cullable_prerequisite(db, dials)
    db.commit()
    _archive_fails(monkeypatch)
    while_running = []
    real_swept = sweeps._swept

    def swept(conn, *args):
        with psycopg.connect(db.info.dsn) as other:  # what a reaper would find now
            while_running.append(other.execute("SELECT status, summary FROM hag_runs").fetchone())
        return real_swept(conn, *args)

    monkeypatch.setattr(sweeps, "_swept", swept)
    with pytest.raises(RuntimeError, match="disk on fire"):
        sweeps.run_nightly(as_of=AS_OF)
    run = db.execute("SELECT run_id, status, summary FROM hag_runs").fetchone()
    moved = db.execute(
        "SELECT count(*) AS n FROM hag_confidence_history"
        " WHERE entity_kind = 'edge' AND run_id = %s AND entity_id = %s",
        (run["run_id"], step),
    ).fetchone()["n"]
    assert while_running[0][0] == "running" and while_running[0][1]["sequence_reweighed"] == 1
    assert run["status"] == "failed" and "disk on fire" in run["summary"]["error"]
    assert moved == 1 and run["summary"]["sequence_reweighed"] == moved
    assert run["summary"]["culled"] == 0 and len(_edge_ids(db)) == 2  # the sweep's undone
    assert counts(run["summary"]).endswith("; sequence reweighed 1")


def test_a_second_pass_that_fails_to_commit_reports_none_of_its_moves(db, dials, monkeypatch):
    """The second sequence pass moves a -> b, then its commit fails: the report the callers
    publish (and the run row) counts what committed, not the pass rolled back."""
    _step_over_a_cullable_prerequisite(db, dials)
    db.commit()
    finished = []
    real = sweeps._finish

    def second_fails(*args):
        finished.append(1)
        if len(finished) == 2:  # the first closes the sweep; the second, the second pass
            raise RuntimeError("disk on fire")
        return real(*args)

    monkeypatch.setattr(sweeps, "_finish", second_fails)
    with pytest.raises(sweeps.FailedAfterDone) as done:
        sweeps.run_nightly(as_of=AS_OF)
    run = db.execute("SELECT status, summary FROM hag_runs").fetchone()
    assert (done.value.summary.culled, done.value.summary.sequence_reweighed_after_cull) == (1, 0)
    assert run["status"] == "done" and "sequence_reweighed_after_cull" not in run["summary"]


def test_the_sequence_step_runs_once_under_the_seeds_grading(db, monkeypatch):
    """Under the seed's rules a cull of a prerequisite opens no second sequence pass: the
    run is finished once."""
    _edge(db)
    db.commit()
    finished = []
    real = sweeps._finish
    monkeypatch.setattr(sweeps, "_finish", lambda *a: finished.append(1) or real(*a))
    assert sweeps.run_nightly(as_of=AS_OF).culled == 1
    assert finished == [1]


def test_reports_the_cull_resumed_open_the_second_sequence_pass(db, dials, monkeypatch):
    """Reports resumed into a prerequisite move its concept's units, which sequence edges
    read, even when no confidence moves: the sequence step runs again after such a cull."""
    step = _step_over_a_cullable_prerequisite(db, dials)
    db.execute("UPDATE hag_edges SET created_at = %s WHERE id <> %s", (AS_OF, step))
    db.commit()  # nothing culled now
    real = sweeps.evidence.resume_stranded

    def one_resumed(conn, waiting, *, locked, at):  # the cull's call names its locked rows
        return real(conn, waiting, locked=locked, at=at) + (locked is not None)

    passes = []
    real_step = sweeps.reweigh_sequence_edges
    monkeypatch.setattr(sweeps.evidence, "resume_stranded", one_resumed)
    monkeypatch.setattr(
        sweeps, "reweigh_sequence_edges", lambda *a, **k: passes.append(1) or real_step(*a, **k)
    )
    run = sweeps.run_nightly(as_of=AS_OF)
    assert (run.culled, run.reports_resumed, len(passes)) == (0, 1, 2)
