"""Step 4c (`edge_grading_rule = units`): learned `leads_to` and `fallback` from the moves
the tutor's rendered lines do not explain (the model: `hag.evidence.sequences`).

Read the concepts of the lines each turn rendered (sql/queries/sequences.sql), tell each
discovered move prompted or not, record the session's unprompted moves with its learner and
share (hag_edge_learner_reports, beside the prerequisites' rows), and re-weigh every learned
sequence edge out of the moves' sources or into their targets, and each move's reverse edge.
The rows were locked by `write.lock_rows` in the session's one sorted pass
(`sequence_sources`, `sequence_targets`, and the reverses among the identities).
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from hag.evidence import sequences
from hag.evidence.reweigh import reweigh_sequence_edges
from hag.evidence.sequences import Move, SequenceEnds
from hag.session import facts, rules
from hag.session.contract import SessionPayload, Turn
from hag.session.facts import Connection
from hag.session.summary import SessionCounts
from hag.settings import Settings
from hag.storage.edges import EdgeObservation
from hag.storage.sqlfiles import query


def lock_ends(observed: Sequence[EdgeObservation], dials: Settings) -> SequenceEnds:
    """Under the units rule, the sources and targets whose sequence edges the session
    re-weighs (so `write.lock_rows` locks them): the moves' ends, and the concepts it reports
    struggles on (they judge the authored `fallback` out of and `leads_to` into them), and
    the identities of the moves' reverse edges; otherwise none."""
    if not sequences.units_selected(dials):
        return sequences.NO_SEQUENCE_ENDS
    sources, targets = sequences.moves_ends(observed)
    reported = {o.source_entry_id for o in observed if o.edge_type == "prerequisite"}
    return SequenceEnds(
        sorted(reported.union(sources), key=str),
        sorted(reported.union(targets), key=str),
        sequences.moves_reversed(observed),
    )


def session_moves(conn: Connection, turns: Sequence[Turn]) -> list[Move]:
    """The session's discovered moves (`rules.discover`, pair by pair), each marked prompted
    when the turn it left, or one before it, rendered a line joining its two concepts (the
    tutor knew of the pair from the memory: a return to where a line sent it from counts
    as the line's too)."""
    decisions = rules.decision_entries(turns)
    if len(decisions) < 2:
        return []
    slugs = facts.entry_slugs(conn, decisions)
    rendered = sorted({e for t in turns for e in t.rendered_edge_ids}, key=str)
    ends: dict[UUID, tuple[str, str]] = {}
    if rendered:
        rows = conn.execute(
            query("sequences", "rendered_edge_concepts"), {"ids": rendered}
        ).fetchall()
        ends = {r["id"]: (r["source_slug"], r["target_slug"]) for r in rows}
    moves = []
    lines: list[tuple[str, str]] = []  # every line rendered so far in the session
    for turn, following in zip(turns, turns[1:], strict=False):
        lines += sequences.rendered_lines(turn.rendered_edge_ids, ends)
        for o in rules.discover([turn, following], slugs):
            pair = (slugs[o.source_entry_id], slugs[o.target_entry_id])
            moves.append(Move(o, sequences.is_prompted(pair, lines)))
    return moves


def weigh_sequence_evidence(
    conn: Connection,
    session: SessionPayload,
    turns: Sequence[Turn],
    ends: SequenceEnds,
    dials: Settings,
    counts: SessionCounts,
    run_id: UUID | None,
) -> None:
    """Record the session's unprompted moves and re-weigh the sequence edges around them:
    `ends`, the ones `lock_ends` named and `write.lock_rows` locked."""
    if not ends.sources:
        return
    units = sequences.session_units(session_moves(conn, turns))
    if units:
        keys = sorted(units, key=sequences.pair_order)
        sources, targets, types = sequences.pair_columns(keys)
        conn.execute(
            query("sequences", "record_sequence_reports"),
            {
                "session_id": session.session_id,
                "learner_id": session.learner_id,
                "at": session.ended_at,
                "sources": sources,
                "targets": targets,
                "types": types,
                "turns": [units[k][0] for k in keys],
                "shares": [units[k][1] for k in keys],
            },
        )
    counts.edges_reweighed += reweigh_sequence_edges(
        conn,
        ends.sources,
        ends.targets,
        dials,
        reverses=ends.reverses,
        at=session.ended_at,
        reason="sequence evidence (units)",
        session_id=session.session_id,
        run_id=run_id,
    )
