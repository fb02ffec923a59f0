"""The re-weigh: prerequisites take the confidence their evidence earns now.

Session-end calls `reweigh_prerequisites` for the concepts a session reported on (and
`reweigh_sequence_edges` around its moves), the nightly cull for the concepts whose
prerequisites it deleted, and `move_to_profile` (`hag settings profile`, the simulator's
`--profile`) `reweigh_every_edge` when it changes the rules. Each reads the facts around the
concepts (`store.prerequisite_evidence`), decides with the model (`model.evidence_state`)
and writes (`store.set_edge_confidences`), inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from hag import settings
from hag.evidence import model, sequences, store
from hag.settings import Settings
from hag.storage.db import Conn

# A re-weigh reads other prerequisites' confidences: against two thresholds (a walked x -> m
# supports c -> m at `edge_min_confidence`, an x -> c at `prerequisite_lift_noise_held_min`
# makes c's reports naming x reversals) and, for an authored or enriched reverse edge, its
# value. Some of those were raised by the session's reinforcement a moment before or are
# replaced by the same pass. When a pass moves an edge across a threshold, or moves an
# authored or enriched one, every edge is weighed again; this many passes at most. Two edges
# that decide each other, weighed side by side, may swap sides together pass after pass;
# such edges move one at a time (`_held_back`), so they settle where each agrees with the
# other, when such a place exists.
SETTLE_PASSES = 4


def reweigh_prerequisites(
    conn: Conn,
    sources: Sequence[UUID],
    dials: Settings,
    *,
    at: datetime,
    reason: str,
    session_id: str | None = None,
    run_id: UUID | None = None,
    before: Mapping[UUID, float] | None = None,
    removed: tuple[Iterable[UUID], Iterable[UUID]] = ((), ()),
) -> int:
    """Every prerequisite out of or into `sources` takes the confidence its evidence earns
    (`model.evidence_state`; under the units rule `model.unit_terms`, whose terms the history
    row of each move carries); how many confidences differ from the values the first pass
    read.

    A pass that moves an edge another edge's terms read (across a threshold, or an authored
    or enriched one) is followed by another over the same sources (SETTLE_PASSES), so what
    is stored is what its terms give with the values stored beside it, not with a value a
    pass replaced (`hag explain` equals it). Each pass's moves write their history rows.
    Concepts outside `sources` whose edges read a move across a threshold are flagged for
    the nightly (`store.flag_pending`): their rows are not the caller's to lock. A move is
    from `before` (the confidences before the caller's own writes, such as a session's
    reinforcement; an edge missing from it is new, at 0) to the last pass's value; without
    `before`, from the first pass's read. `removed` (held targets, walked sources) are the
    caller's deletes of edges at a threshold. An edge undoing the previous pass's move (back
    across a threshold; an authored or enriched one, back to its value) waits while an
    undoing edge it reads, of a lower id, moves back (`_held_back`), so two edges deciding
    each other settle rather than swap sides on every pass. Edges still moving after the
    last pass flag their own concepts.

    The caller holds the row locks, taken in the one sorted pass (`lock_rows` for a
    session, `lock_cull` for the nightly cull, `store.lock_every_edge_of`), so writers
    sharing rows queue; every pass reads and writes the same rows.
    """
    if not sources:
        return 0
    reads: dict[UUID, list[float]] = {}  # each edge's confidence as each pass read it
    last: dict[UUID, float] = {}
    edges: dict[UUID, Any] = {}
    moving: list[Any] = []
    settled = False
    for _ in range(SETTLE_PASSES):
        evidence = store.prerequisite_evidence(conn, sources, dials)
        # under the units rule the terms go with the history row of each move
        terms = (
            {e.edge_id: model.unit_terms(e, dials) for e in evidence}
            if model.units_selected(dials)
            else {}
        )
        states = (
            {i: (t.confidence, t.unlearned_from) for i, t in terms.items()}
            if terms
            else {e.edge_id: model.evidence_state(e, dials) for e in evidence}
        )
        for e in evidence:
            reads.setdefault(e.edge_id, []).append(e.confidence)
        for e in _held_back(evidence, states, reads, dials):
            states[e.edge_id] = (e.confidence, e.unlearned_from)
        store.set_edge_confidences(
            conn,
            states,
            at=at,
            reason=reason,
            session_id=session_id,
            run_id=run_id,
            terms={i: _shallow(terms[i]) for i in _moving(states, evidence)} if terms else None,
        )
        for e in evidence:
            last[e.edge_id] = states[e.edge_id][0]
            edges[e.edge_id] = e
        moving = [e for e in evidence if _read_elsewhere(e, states[e.edge_id][0], dials)]
        if not moving:
            settled = True
            break
    held_targets, walk_sources = set(removed[0]), set(removed[1])
    for i, e in edges.items():
        start = reads[i][0] if before is None else before.get(i, 0.0)
        if _crosses(start, last[i], dials.prerequisite_lift_noise_held_min):
            held_targets.add(e.target_entry_id)
        if _crosses(start, last[i], dials.edge_min_confidence):
            walk_sources.add(e.source_entry_id)
    store.flag_pending(
        conn,
        concepts=(i for i in held_targets if i is not None),
        walk_sources=(i for i in walk_sources if i is not None),
        sources=sources,
        at=at,
    )
    if not settled:  # two edges deciding each other: the nightly weighs them again
        store.flag_pending(
            conn,
            concepts=(i for e in moving for i in (e.source_entry_id, e.target_entry_id) if i),
            walk_sources=(),
            sources=[],
            at=at,
        )
    return sum(1 for i, value in last.items() if value != reads[i][0])


def _held_back(
    evidence: Sequence[Any],
    states: Mapping[UUID, tuple[float, float | None]],
    reads: Mapping[UUID, Sequence[float]],
    dials: Settings,
) -> list[Any]:
    """The edges that keep their value this pass: of those undoing the move the pass before
    made (`_undoes`), each that reads one moving ahead of it, lowest id first. Two edges
    that decide each other (a -> b and b -> a, each read by the other's reversals; c -> m
    and the walked x -> m supporting it), weighed side by side, can swap sides together on
    every pass and never settle; moved one at a time, the second is weighed against the
    first's new value. An edge reads only edges into its own two concepts (its reverse
    edge; an x -> c into its source, for reversals and for the walked x -> c that voids
    support; a walked x -> m into its target, for support), so one that reads none of those
    moving undoes its move as any edge moves."""
    moving: list[Any] = []
    held = []
    for e in sorted(evidence, key=lambda x: str(x.edge_id)):
        if not _undoes(e, states[e.edge_id][0], reads[e.edge_id], dials):
            continue
        ends = (e.source_entry_id, e.target_entry_id)
        if any(m.target_entry_id in ends for m in moving):
            held.append(e)
        else:
            moving.append(e)
    return held


def _undoes(e: Any, after: float, seen: Sequence[float], dials: Settings) -> bool:
    """Whether an edge's move this pass undoes the one the pass before made: back across a
    threshold it crossed (`seen`: its value as each pass read it, this pass's last), or for
    an authored or enriched edge (read by value) back to where it was."""
    if len(seen) < 2 or after == seen[-1]:
        return False
    before, now = seen[-2], seen[-1]
    if e.source_type != "learned":
        return after == before
    return any(_crosses(before, now, t) and _crosses(now, after, t) for t in _read_at(dials))


def _crosses(before: float, after: float, threshold: float) -> bool:
    return (before >= threshold) != (after >= threshold)


def _read_elsewhere(e: Any, after: float, dials: Settings) -> bool:
    """Whether an edge's move changes another edge's terms: an authored or enriched edge's
    value (read as a reverse edge's), or a move across a threshold other edges read it at."""
    if after == e.confidence:
        return False
    return e.source_type != "learned" or any(
        _crosses(e.confidence, after, t) for t in _read_at(dials)
    )


def _read_at(dials: Settings) -> tuple[float, float]:
    """The thresholds other edges read a learned prerequisite's confidence against: the walk
    floor (support) and `prerequisite_lift_noise_held_min` (reversals)."""
    return dials.edge_min_confidence, dials.prerequisite_lift_noise_held_min


def reweigh_sequence_edges(
    conn: Conn,
    sources: Sequence[UUID],
    targets: Sequence[UUID],
    dials: Settings,
    *,
    at: datetime,
    reason: str,
    session_id: str | None = None,
    run_id: UUID | None = None,
    reverses: Sequence[sequences.Pair] = (),
) -> int:
    """Every `leads_to` and `fallback` out of `sources` or into `targets`, and each one
    `reverses` names by identity, takes the confidence the units rule gives it
    (`sequences.sequence_state`), each history row of a move carrying its terms
    (`sequences.edge_terms`); how many confidences changed. The caller holds the row locks,
    as for `reweigh_prerequisites`."""
    if not sources and not targets and not reverses:
        return 0
    evidence = store.sequence_evidence(conn, sources, targets, dials, reverses)
    states = sequences.sequence_states(evidence, dials)
    moving = _moving(states, evidence)
    return store.set_edge_confidences(
        conn,
        states,
        at=at,
        reason=reason,
        session_id=session_id,
        run_id=run_id,
        terms={
            e.edge_id: _shallow(sequences.edge_terms(e, dials))
            for e in evidence
            if e.edge_id in moving
        },
    )


def _shallow(terms: Any) -> dict[str, Any]:
    """A terms dataclass as a dict of its fields, a nested one (an enriched edge's terms read
    as a learned edge's) as a dict too: `asdict` deep-copies every value, which cost more
    than the re-weigh's arithmetic on a nightly's thousands of moves."""
    out = dict(vars(terms))
    for key, value in out.items():
        if hasattr(value, "__dataclass_fields__"):
            out[key] = _shallow(value)
    return out


def _moving(
    states: Mapping[UUID, tuple[float, float | None]], evidence: Iterable[Any]
) -> set[UUID]:
    """The edges whose new confidence differs from the one read under the row lock: the
    only ones `store.set_edge_confidences` can report as moved, so the only ones whose terms
    a history row carries (a re-weigh reads a hundred edges or more and moves a few)."""
    return {e.edge_id for e in evidence if states[e.edge_id][0] != e.confidence}


def reweigh_every_edge(
    conn: Conn,
    dials: Settings,
    *,
    at: datetime,
    reason: str = "profile: re-weighed",
    locked: bool = False,
) -> tuple[int, int]:
    """Every edge whose rule the evidence model owns re-weighed under the rules `dials`
    select, in the caller's transaction, their rows locked in one sorted pass first: every
    prerequisite under the lift or units rule, every `leads_to` and `fallback` under
    `edge_grading_rule = units`. What `hag settings profile` runs after it changed the rules,
    so a memory moves to them at once rather than concept by concept as sessions report on
    them. How many confidences changed: (prerequisites, sequence edges)."""
    settings.reweigh_paid(conn)  # whatever a dial move left owed is paid here
    prerequisites = model.lift_selected(dials)
    moves = sequences.units_selected(dials)
    types = owned_types(dials)
    if not types:
        return 0, 0
    if not locked:  # (a dial write locked them with the edges it clamps: `lock_for_move`)
        store.lock_every_edge_of(conn, types)
    return (
        reweigh_prerequisites(conn, store.prerequisite_sources(conn), dials, at=at, reason=reason)
        if prerequisites
        else 0,
        reweigh_sequence_edges(conn, store.sequence_sources(conn), [], dials, at=at, reason=reason)
        if moves
        else 0,
    )


@dataclass(frozen=True)
class ProfileMove:
    """What moving a memory to a rule profile did: each dial it changed (key, old, new), and
    how many confidences the re-weigh under the new rules changed."""

    changed: list[tuple[str, Any, Any]]
    reweighed: int = 0
    reweighed_sequences: int = 0
    clamped: int = 0  # edges the profile's bounds left outside them (`clamp_every_edge`)


def move_to_profile(conn: Conn, name: str, *, by: str, at: datetime) -> ProfileMove:
    """Set a rule profile's dials and move the memory to its rules at once, in the caller's
    transaction: every edge the evidence model owns re-weighed under the dials just set (read
    back from this transaction), its history rows at `at`. Nothing is re-weighed when no dial
    changed. `hag settings profile` and the simulator's `--profile` both run this, so a
    simulated memory starts where an operator's would."""
    changed = settings.apply_profile(conn, name, by=by)
    if not changed:
        return ProfileMove(changed)
    dials = settings.load(conn)
    lock_for_move(conn, dials)
    counts = reweigh_every_edge(conn, dials, at=at, locked=True)
    reason = f"profile {name}: clamped to the edge bounds"
    return ProfileMove(changed, *counts, clamp_every_edge(conn, dials, at=at, reason=reason))


# The dials the model's formulas read when they re-weigh (their registry consumer is
# hag/evidence, and the edge bounds, walk floor and sequence rule they clamp, hold and select
# by): a change to one moves stored confidences, so it re-weighs every edge the model owns.
MODEL_DIALS = frozenset(
    {k for k, d in settings.REGISTRY.items() if d.consumer == "hag/evidence"}
    | {"edge_grading_rule", "edge_confidence_floor", "edge_confidence_ceiling",
       "edge_min_confidence"}
)  # fmt: skip


@dataclass(frozen=True)
class DialMove:
    """What setting one dial did: the value stored, and how many confidences the re-weigh
    under it changed (a dial the model reads, `MODEL_DIALS`, whose value moved; else 0)."""

    stored: Any
    reweighed: int = 0
    reweighed_sequences: int = 0
    # why nothing was re-weighed though the model reads the dial: another dial's stored value
    # is invalid (`settings.invalid_message`: the line naming it and its repair)
    not_reweighed: str | None = None
    # the model dial an earlier write moved while a dial was invalid, re-weighed by this one
    owed_for: str | None = None
    # edges a bound's move left outside the bounds, moved to the nearer one (no rule
    # re-weighs them: `clamp_every_edge`)
    clamped: int = 0


def move_dial(
    conn: Conn, key: str, value: Any, *, by: str, at: datetime, reset: bool = False
) -> DialMove:
    """Set one dial (or `reset` it to its default) and, when the model reads it and its value
    moved, re-weigh every edge the model owns under the dials now stored, in the caller's
    transaction, as `move_to_profile` does for a profile: `hag explain`'s result stays the
    stored confidence whichever way a dial is changed. While another dial's stored value is
    invalid the re-weigh is owed (`settings.owe_reweigh`), and the first write that leaves
    every dial valid (its repair, whatever the dial) makes it."""
    settings.lock_dials(conn)  # the value read here is the one the write replaces
    values, invalid = settings.stored(conn)
    before = invalid[key][0] if key in invalid else values[key]
    stored = (
        settings.reset_value(conn, key, by) if reset else settings.set_value(conn, key, value, by)
    )
    moved = key in MODEL_DIALS and stored != before
    owed = settings.reweigh_owed(conn)
    if not moved and owed is None:
        return DialMove(stored)
    values, invalid = settings.stored(conn)
    if invalid:  # the value is set (a repair of one dial never waits on another's)
        if moved:  # owed until a write leaves every dial valid
            settings.owe_reweigh(conn, key)
        first = min(invalid)
        return DialMove(stored, not_reweighed=settings.invalid_message(first, *invalid[first]))
    why = f"dial {key}" if moved else f"dial {owed}, owed until every dial was valid"
    dials = settings.snapshot(values)
    lock_for_move(conn, dials)
    counts = reweigh_every_edge(conn, dials, at=at, reason=f"{why}: re-weighed", locked=True)
    clamped = clamp_every_edge(conn, dials, at=at, reason=f"{why}: clamped to the edge bounds")
    return DialMove(stored, *counts, owed_for=None if moved else owed, clamped=clamped)


def lock_for_move(conn: Conn, dials: Settings) -> None:
    """The rows a dial write re-weighs (the types the model owns under `dials`) and those it
    clamps (outside the edge bounds), locked in one sorted pass before either: two passes,
    one a set, would take locks out of id order and could deadlock with a session."""
    store.lock_edges_of_or_outside(
        conn, owned_types(dials), dials.edge_confidence_floor, dials.edge_confidence_ceiling
    )


def owned_types(dials: Settings) -> list[str]:
    """The edge types whose confidence the evidence model computes under `dials`."""
    return [
        *(["prerequisite"] if model.lift_selected(dials) else []),
        *(sequences.SEQUENCE_TYPES if sequences.units_selected(dials) else ()),
    ]


def clamp_every_edge(conn: Conn, dials: Settings, *, at: datetime, reason: str) -> int:
    """Every edge outside [`edge_confidence_floor`, `edge_confidence_ceiling`] moved to the
    nearer bound, in the caller's transaction, with its history row: what a write of a bound
    does after its re-weigh, for the edges no rule re-weighs (every edge under the seed
    rules, `related` and `supersedes` under any), so the bounds hold for every stored edge
    the moment they change, as the edges suite checks. How many it moved."""
    floor, ceiling = dials.edge_confidence_floor, dials.edge_confidence_ceiling
    states = {
        edge_id: (min(ceiling, max(floor, confidence)), unlearned_from)
        for edge_id, confidence, unlearned_from in store.edges_outside(conn, floor, ceiling)
    }
    return store.set_edge_confidences(conn, states, at=at, reason=reason)
