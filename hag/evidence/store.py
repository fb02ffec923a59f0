"""What the evidence model reads and writes (sql/queries/evidence.sql), each one statement.

The reports a session gives each prerequisite (its learner, turns and share, settled when it
is written), the facts the model decides on around a set of concepts, and the confidences
the re-weigh stores. Callers hold the row locks (`hag.session.write.lock_rows` for a session,
the nightly's `lock_cull`, `lock_every_edge_of` here for `hag settings profile`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from hag.evidence import model, sequences
from hag.evidence.model import PrerequisiteEvidence
from hag.evidence.sequences import SequenceEvidence
from hag.settings import Settings
from hag.storage.db import Conn
from hag.storage.edges import move_kept_reports, say_why
from hag.storage.sqlfiles import query, with_dials


def prerequisite_evidence(
    conn: Conn, sources: Sequence[UUID], dials: Settings
) -> list[PrerequisiteEvidence]:
    """The prerequisites out of and into the reported concepts, with their evidence: the
    query's dial placeholders (the walk floor, the held-noise minimum, the learner cap)
    bound by name."""
    sql = query("evidence", "prerequisite_evidence")
    rows = conn.execute(sql, with_dials(sql, dials, sources=list(sources))).fetchall()
    return [
        PrerequisiteEvidence(
            edge_id=r["id"],
            source_type=r["source_type"],
            confidence=float(r["confidence"]),
            hit_count=int(r["hit_count"]),
            concept_reports=int(r["concept_reports"]),
            n_concepts=int(r["n_concepts"]),
            support_hits=int(r["support_hits"]),
            reverse_hits=r["reverse_hits"],
            reverse_source_type=r["reverse_source_type"],
            reverse_confidence=r["reverse_confidence"],
            unlearned_from=r["unlearned_from"],
            prior=r["prior_confidence"],
            reversal_reports=(int(r["reversal_reports"][0]), int(r["reversal_reports"][1])),
            reversal_units=(float(r["reversal_units"][0]), float(r["reversal_units"][1])),
            units=float(r["units"]),
            learners=int(r["learners"]),
            concept_units=float(r["concept_units"]),
            concept_learners=int(r["concept_learners"]),
            support_units=float(r["support_units"]),
            reported_units=float(r["reported_units"]),
            reverse_units=None if r["reverse_units"] is None else float(r["reverse_units"]),
            reverse_learners=None if r["reverse_learners"] is None else int(r["reverse_learners"]),
            unattributed=int(r["unattributed"]),
            failed_sessions=int(r["failed_sessions"]),
            shown_sessions=int(r["shown_sessions"]),
            shown_named=int(r["shown_named"]),
            withdrawn=int(r["withdrawn"]),
            withdrawn_units=float(r["withdrawn_units"]),
            source_entry_id=r["source_entry_id"],
            target_entry_id=r["target_entry_id"],
        )
        for r in rows
    ]


def sequence_evidence(
    conn: Conn,
    sources: Sequence[UUID],
    targets: Sequence[UUID],
    dials: Settings,
    named: Sequence[sequences.Pair] = (),
) -> list[SequenceEvidence]:
    """The sequence edges out of `sources` or into `targets`, and those `named` by identity
    (source, target, type), with their evidence (sql/queries/sequences.sql;
    `hag.evidence.sequences`)."""
    sql = query("sequences", "sequence_evidence")
    named_sources, named_targets, named_types = sequences.pair_columns(named)
    params = with_dials(
        sql,
        dials,
        sources=list(sources),
        targets=list(targets),
        named_sources=named_sources,
        named_targets=named_targets,
        named_types=named_types,
    )
    return [
        SequenceEvidence(
            edge_id=r["id"],
            edge_type=r["edge_type"],
            units=float(r["units"]),
            learners=int(r["learners"]),
            out_units=float(r["out_units"]),
            in_units=float(r["in_units"]),
            total_units=float(r["total_units"]),
            reverse_units=float(r["reverse_units"]),
            reverse_learners=int(r["reverse_learners"]),
            prerequisite=None if r["prerequisite"] is None else float(r["prerequisite"]),
            source_type=r["source_type"],
            confidence=float(r["confidence"]),
            prior_confidence=r["prior_confidence"],
            needing_units=float(r["needing_units"]),
            needing_learners=int(r["needing_learners"]),
        )
        for r in conn.execute(sql, params).fetchall()
    ]


def prerequisite_sources(conn: Conn) -> list[UUID]:
    """Every concept (entry) with a prerequisite out of it, sorted."""
    return [r["source_entry_id"] for r in conn.execute(query("evidence", "prerequisite_sources"))]


def sequence_sources(conn: Conn) -> list[UUID]:
    """Every concept (entry) with a `leads_to` or `fallback` out of it, sorted."""
    return [r["source_entry_id"] for r in conn.execute(query("evidence", "sequence_sources"))]


def fold_graph_counts(conn: Conn) -> None:
    """Fold each topic graph's appended concept-count changes into one row (migration 228;
    the nightly's last step), learners' own graphs aside. Holds the entries against a
    TRUNCATE until the caller commits."""
    conn.execute(query("evidence", "lock_entries_shared"))
    conn.execute(query("evidence", "fold_graph_counts"), {})


def lock_edges_of_or_outside(
    conn: Conn, edge_types: Sequence[str], floor: float, ceiling: float
) -> None:
    """Lock every edge of `edge_types` and every edge outside [floor, ceiling], in one
    sorted pass (a dial write's re-weigh and clamp, in the order every edge writer uses)."""
    conn.execute(
        query("evidence", "lock_edges_of_or_outside"),
        {"types": list(edge_types), "floor": floor, "ceiling": ceiling},
    )


def edges_outside(
    conn: Conn, floor: float, ceiling: float
) -> list[tuple[UUID, float, float | None]]:
    """The edges below `floor` or above `ceiling`, locked in one sorted pass: (id, confidence,
    the value negative evidence keeps beside it)."""
    rows = conn.execute(
        query("evidence", "edges_outside_bounds"), {"floor": floor, "ceiling": ceiling}
    ).fetchall()
    return [(r["id"], r["confidence"], r["unlearned_from"]) for r in rows]


def lock_every_edge_of(conn: Conn, edge_types: Sequence[str]) -> None:
    """Lock every edge of these types, in one sorted pass (before a re-weigh of them all)."""
    conn.execute(query("evidence", "lock_every_edge_of"), {"types": list(edge_types)}).fetchall()


def lock_edges(conn: Conn, edge_ids: Iterable[UUID]) -> None:
    """Lock these edges, in one sorted pass."""
    ids = sorted(set(edge_ids), key=str)
    if ids:
        conn.execute(query("evidence", "lock_edges"), {"ids": ids}).fetchall()


def record_reports(
    conn: Conn,
    *,
    session_id: str,
    learner_id: str,
    at: datetime,
    turns_by_edge: Mapping[UUID, tuple[int, float]],
) -> None:
    """Who reported each prerequisite a session proposed: one row per (edge, session) with
    the learner, the turns (migration 091) and the session's share (migration 200,
    `model.session_shares`); a session applied again adds nothing."""
    if not turns_by_edge:
        return
    ids = sorted(turns_by_edge, key=str)
    conn.execute(
        query("evidence", "record_learner_reports"),
        {
            "session_id": session_id,
            "learner_id": learner_id,
            "at": at,
            "edge_ids": ids,
            "turns": [turns_by_edge[i][0] for i in ids],
            "shares": [turns_by_edge[i][1] for i in ids],
        },
    )


def resume_culled_reports(
    conn: Conn,
    dials: Settings,
    *,
    session_id: str,
    at: datetime,
    created: Iterable[tuple[UUID, str]],
) -> int:
    """Learned edges this session created (id, type) take back the reports of their pair's
    culled edges of the same type (kept beside the audit rows, migration 220), with their
    sessions in the hit count; the audit rows record the resumption. A prerequisite resumes
    under the units rule, a `leads_to` or `fallback` under the units grading (their moves
    are recorded as reports too). How many reports were resumed."""
    resuming = {"prerequisite"} if model.units_selected(dials) else set()
    resuming |= set(sequences.SEQUENCE_TYPES) if sequences.units_selected(dials) else set()
    edge_ids = sorted((i for i, kind in created if kind in resuming), key=str)
    if not edge_ids:
        return 0
    culled = conn.execute(
        query("evidence", "culled_with_reports"), {"edge_ids": edge_ids}
    ).fetchall()
    left = [c for c in culled if not c["taken"]]
    if left:  # a restore held their audit rows: the nightly resumes them (`resume_stranded`)
        conn.execute(
            query("evidence", "skipped_resumptions"),
            {
                "audit_ids": [c["audit_id"] for c in left],
                "edge_ids": [c["edge_id"] for c in left],
                "edge_types": [c["edge_type"] for c in left],
                "sources": [c["source_entry_id"] for c in left],
                "at": at,
            },
        )
    return _resume(conn, [c for c in culled if c["taken"]], session_id=session_id, at=at)


@dataclass(frozen=True)
class WaitingResumption:
    """A resumption a session could not make (migration 226): its row, the culled edge's
    audit row, the edge that learned the pair again and that edge's source concept."""

    flag: int
    audit_id: int
    edge_id: UUID
    source_entry_id: UUID


def resume_pending(conn: Conn, types: Sequence[str]) -> list[WaitingResumption]:
    """The resumptions of edges of `types` waiting for the nightly, oldest first."""
    rows = conn.execute(query("evidence", "resume_pending"), {"types": list(types)}).fetchall()
    return [
        WaitingResumption(r["flag"], r["audit_id"], r["edge_id"], r["source_entry_id"])
        for r in rows
    ]


def resume_stranded(
    conn: Conn,
    waiting: Sequence[WaitingResumption],
    *,
    locked: Iterable[UUID] | None,
    at: datetime,
) -> int:
    """The nightly's side of `resume_culled_reports`: the resumptions sessions could not make
    because a restore held the audit row (`waiting`, read by `resume_pending` before the
    caller's lock pass) are made now, each culled edge's kept reports into the edge that
    learned its pair again, as they would have been without the restore; those whose audit
    row or edge is gone, restored or resumed since are void. Only edges in `locked` (the
    caller's row locks; None: every edge of the type) are written. The caller deletes the
    rows it read (`clear_resume_pending`). How many reports were resumed."""
    if not waiting:
        return 0
    stranded = conn.execute(
        query("evidence", "stranded_with_reports"),
        {
            "audit_ids": [w.audit_id for w in waiting],
            "edge_ids": [w.edge_id for w in waiting],
            "locked": None if locked is None else list(locked),
        },
    ).fetchall()
    return _resume(conn, stranded, session_id=None, at=at)


def clear_resume_pending(conn: Conn, read: Iterable[WaitingResumption]) -> None:
    """Delete the waiting resumptions the nightly read; rows written since stay."""
    flags = sorted(w.flag for w in read)
    if flags:
        conn.execute(query("evidence", "clear_resume_pending"), {"flags": flags})


def _resume(conn: Conn, culled: Sequence[Any], *, session_id: str | None, at: datetime) -> int:
    """Move the kept reports of each (audit row, edge) into the edge, its sessions into the
    edge's hit count, and record the resumption on the audit row."""
    if not culled:
        return 0
    moved = move_kept_reports(conn, [(c["audit_id"], c["edge_id"]) for c in culled])
    conn.execute(
        query("evidence", "record_resumption"),
        {
            "audit_ids": [c["audit_id"] for c in culled],
            "edge_ids": [c["edge_id"] for c in culled],
            "sessions": [moved.get(c["audit_id"], 0) for c in culled],
            "session_id": session_id,
            "at": at,
        },
    )
    return sum(moved.values())


@dataclass(frozen=True)
class LearnerReport:
    """One recorded report of a prerequisite by the learner of a session (its edge, the
    session that made it and when that session ended, the pair's concepts)."""

    edge_id: UUID
    session_id: str
    reported_at: datetime
    source_entry_id: UUID
    source_slug: str
    target_slug: str
    audit_id: int | None = None  # kept beside a culled edge's audit row (edge_id the culled)


def learner_reports_out_of(
    conn: Conn, learner_id: str, sources: Sequence[UUID], before: datetime
) -> list[LearnerReport]:
    """The learner's recorded reports of prerequisites out of `sources`, from sessions that
    ended before `before`."""
    if not sources:
        return []
    rows = conn.execute(
        query("evidence", "learner_reports_out_of"),
        {"learner_id": learner_id, "sources": list(sources), "ended_at": before},
    ).fetchall()
    return [
        LearnerReport(
            r["edge_id"], r["session_id"], r["reported_at"], r["source_entry_id"],
            r["source_slug"], r["target_slug"], r["audit_id"],
        )
        for r in rows
    ]  # fmt: skip


def withdraw_reports(conn: Conn, reports: Sequence[LearnerReport]) -> int:
    """Withdraw reports contradicted forward in time (migration 216), in one statement: out
    of the kept units and the edges' hit counts, counted per pair and learner (migration
    223); a culled edge's kept reports the same way out of its audit row (so a pair learned
    again does not resume them and a restore does not bring their sessions back); how many
    were withdrawn. The caller
    holds the live edges' row locks."""
    kept = sorted({(r.audit_id, r.session_id) for r in reports if r.audit_id is not None})
    withdrawn = 0
    if kept:  # a culled edge's: out of its audit row's kept reports and hit count
        audits = sorted({a for a, _ in kept})
        conn.execute(query("evidence", "lock_kept_audits"), {"audit_ids": audits})
        row = conn.execute(
            query("evidence", "withdraw_kept_reports"),
            {"audit_ids": [a for a, _ in kept], "session_ids": [s for _, s in kept]},
        ).fetchone()
        withdrawn = int(row["withdrawn"]) if row else 0
    live = [r for r in reports if r.audit_id is None]
    if not live:
        return withdrawn
    keys = sorted({(r.edge_id, r.session_id) for r in live}, key=lambda k: (str(k[0]), k[1]))
    row = conn.execute(
        query("evidence", "withdraw_reports"),
        {"edge_ids": [e for e, _ in keys], "session_ids": [s for _, s in keys]},
    ).fetchone()
    return withdrawn + (int(row["withdrawn"]) if row else 0)


def count_contradicted(
    conn: Conn, learner_id: str, shares: Mapping[tuple[UUID, UUID], float]
) -> int:
    """Count a session's struggles contradicted forward in time when made (never recorded) on
    their pairs, under the session's learner (migration 223), whether or not a pair has an
    edge: the session, and the part of its unit the pair held (`shares`, migration 225), as
    a recorded report withdrawn later counts (`withdraw_reports`), so the count does not
    depend on the order sessions arrive in. How many pairs counted one. Not idempotent on
    its own (each call adds one): session-end calls it once per session, under the session
    ledger's claim in the session's transaction, as it records the session's reports."""
    if not shares:
        return 0
    pairs = sorted(shares, key=lambda p: (str(p[0]), str(p[1])))
    row = conn.execute(
        query("evidence", "count_contradicted"),
        {
            "learner_id": learner_id,
            "sources": [s for s, _ in pairs],
            "targets": [t for _, t in pairs],
            "shares": [shares[p] for p in pairs],
        },
    ).fetchone()
    return int(row["counted"]) if row else 0


@dataclass(frozen=True)
class ExposureRows:
    """What one session adds to the `invented` term's counts (migration 215), as topic
    entries: the concepts it failed a turn on, and per failed concept c and concept m its
    learner had shown there, ((c, m), whether its struggles named c -> m); each key once."""

    failed: Sequence[UUID]
    pairs: Sequence[tuple[tuple[UUID, UUID], bool]]


def record_exposures(conn: Conn, rows: ExposureRows | None) -> None:
    """Add a session's failed concepts and shown pairs to the kept counts, in key order (the
    session's ledger row makes it once per session)."""
    if rows is None or not rows.failed:
        return
    conn.execute(
        query("evidence", "record_exposures"),
        {
            "failed": list(rows.failed),
            "sources": [c for (c, _), _ in rows.pairs],
            "targets": [m for (_, m), _ in rows.pairs],
            "named": [named for _, named in rows.pairs],
        },
    )


def set_edge_confidences(
    conn: Conn,
    states: Mapping[UUID, tuple[float, float | None]],
    *,
    at: datetime,
    reason: str,
    session_id: str | None = None,
    run_id: UUID | None = None,
    terms: Mapping[UUID, dict[str, Any]] | None = None,
) -> int:
    """The re-weighed confidences, each with the value negative evidence keeps beside it
    (`model.evidence_state`), in one statement; how many confidences changed. With `terms`
    (the units rule's, `model.unit_terms`), each history row a move writes carries its
    edge's terms: they are handed to the history trigger before the UPDATE, which writes
    those of the edges it moves (`hand_history_terms`, migration 229; a non-finite term is
    stored as null)."""
    if not states:
        return 0
    say_why(conn, reason, session_id=session_id, run_id=run_id, at=at)
    if terms:
        conn.execute(
            query("evidence", "hand_history_terms"),
            {
                "terms": json.dumps(
                    {str(i): finite_terms(t) for i, t in terms.items()},
                    allow_nan=False,  # a non-finite number finite_terms missed fails here
                )
            },
        )
    changed = conn.execute(
        query("evidence", "set_edge_confidences"),
        {
            "at": at,
            "ids": list(states),
            "confidences": [confidence for confidence, _ in states.values()],
            "unlearned_from": [unlearned_from for _, unlearned_from in states.values()],
        },
    ).fetchall()
    return sum(1 for r in changed if r["old_confidence"] != r["new_confidence"])


def finite_terms(terms: dict[str, Any]) -> dict[str, Any]:
    """The terms as JSON takes them (jsonb has no infinity: a non-finite number is null, in
    nested terms too: an enriched edge's read as a learned one's). Nested terms are dicts
    (`reweigh._shallow`): checked as dicts, where a check against the abstract Mapping took
    2.2 times as long (80,000 terms of 27 fields: 0.47-0.50 against 0.22 s)."""
    return {
        k: finite_terms(v) if isinstance(v, dict)
        else None if isinstance(v, float) and not math.isfinite(v) else v
        for k, v in terms.items()
    }  # fmt: skip


def flag_pending(
    conn: Conn,
    *,
    concepts: Iterable[UUID],
    walk_sources: Iterable[UUID],
    sources: Sequence[UUID],
    at: datetime,
) -> None:
    """Flag for the nightly the concepts outside `sources` whose prerequisites read a value
    that moved where their caller could not lock them (migration 224, sql `flag_pending`):
    `concepts` themselves (the targets of edges a re-weigh moved across
    `prerequisite_lift_noise_held_min`; a restored edge's concepts), and the concepts with a
    report naming one of `walk_sources` (the sources of edges that crossed
    `edge_min_confidence`, or a restored edge's)."""
    flagged, walk = sorted(set(concepts), key=str), sorted(set(walk_sources), key=str)
    if not flagged and not walk:
        return
    conn.execute(
        query("evidence", "flag_pending"),
        {"concepts": flagged, "walk_sources": walk, "sources": list(sources), "at": at},
    )


def flag_written_prerequisites(
    conn: Conn, pairs: Iterable[tuple[UUID, UUID]], dials: Settings, at: datetime
) -> None:
    """Under the lift and units rules, the concepts of prerequisites written outside any
    re-weigh (a restore's, at the value they were culled with; enrichment's, at
    `enrichment_confidence`) wait for the nightly's (migration 224): their concept's units,
    their reverse edge's and the support they give read the new row, and those rows are not
    the writer's to lock. `pairs`: (source, target) entries."""
    written = list(pairs)
    if not written or not model.lift_selected(dials):
        return
    flag_pending(
        conn,
        concepts=[i for pair in written for i in pair],
        walk_sources=[source for source, _ in written],
        sources=[],
        at=at,
    )


def pending_sources(conn: Conn, among: Sequence[UUID] | None = None) -> dict[int, UUID]:
    """The flags waiting for a re-weigh (of `among` these concepts, if given): flag number ->
    concept."""
    rows = conn.execute(
        query("evidence", "pending_sources"), {"among": None if among is None else list(among)}
    ).fetchall()
    return {int(r["flag"]): r["source_entry_id"] for r in rows}


def reweigh_pending(conn: Conn, source_entry_id: UUID) -> bool:
    """Whether a concept waits for the nightly's re-weigh (migration 224)."""
    return bool(pending_sources(conn, [source_entry_id]))


def clear_pending(conn: Conn, handled: Iterable[int]) -> None:
    """Delete the flags a re-weigh read and handled; flags appended since stay."""
    flags = sorted(handled)
    if flags:
        conn.execute(query("evidence", "clear_pending"), {"flags": flags})
