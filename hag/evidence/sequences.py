"""`leads_to` and `fallback` from independent evidence, in units (issue 29).

Discovery records what the tutor did next: a success on A followed by a turn on B is a
sequence (`leads_to` A -> B), a failure on A followed by a success on B a recovery
(`fallback` A -> B). Counted as they come, these edges echo the tutor's own habits: a tutor
that follows a rendered `next:` or `fallback:` line makes the move the line names, and the
move then "confirms" the line. Under `edge_grading_rule = units` a learned sequence edge
takes its confidence from evidence the tutor's choices do not explain, with the bounds of the
prerequisites' units rule:

- **A prompted move is not evidence.** A move A -> B is prompted when a line joining A's and
  B's concepts (either direction, any edge type) was rendered in the session up to the turn
  it left: the memory told the tutor about that pair, so the move says nothing new
  (`is_prompted`; a return to where a line sent the tutor from is the line's too).
- **A session is one unit about a concept's next step.** Each unprompted pair gets the
  session's moves of that type out of A naming it over all of them (`session_units`), so
  1,000 turns repeating A -> B give it 1.
- **A learner's total is capped** at `prerequisite_learner_cap`, and the moves of fewer than
  `prerequisite_min_learners` distinct learners add nothing of their own: they hold the edge
  at the confidence of the walked prerequisite meaning the same step (what its prior alone
  gives), or without one at `edge_min_confidence` x learners / min, below the walk floor
  (`hag_edge_evidence`, the prerequisites' function).
- **Chance**: how often A's moves would land on B if they went where everyone else's moves
  go: U(A) x (I(B) - u) / (T - U(A)), U(A) the units out of A, I(B) the units into B, T the
  units of the type in the topic (B's share of the moves that do not start at A).
- **Reverse**: the units of the same type for B -> A count against A -> B once
  `prerequisite_min_learners` learners made B -> A, none from fewer (`model.counted_reverse`,
  as for prerequisites): one learner's moves can no more hold a step down than lift it.
- **Every move counts where it went**: the chance sums and the reverse read the unprompted
  moves recorded on any sequence edge of the topic, authored and enriched ones included (a
  move along a line nobody rendered is the learner's as much as one along a learned line).
  An authored B -> A's prior counts nothing against a learned A -> B: the reverse nets out
  learners' moves, never an author's claim (two prerequisites the other way round
  contradict each other, so there an authored reverse's prior counts).
- **Prior**: a walked prerequisite that means the same step supports it as the evidence its
  confidence stands for, k p / (1 - p): `leads_to` A -> B by the prerequisite B -> A (B
  needs A, so A comes first), `fallback` A -> B by A -> B (A needs B, so B is where to go
  back). Struggle reports are the extractor's, not the tutor's moves: independent evidence,
  already bound by the prerequisites' own learner hold. So a sequence edge whose step a
  walked prerequisite states stands at that prerequisite's confidence with no move of its
  own counted (the moves that discovered it may all be prompted), and unprompted moves from
  enough learners lift it above.

confidence = net / (net + k), net = max(0, units + prior - chance - reverse), k =
`prerequisite_lift_k`; then the learner hold, the edge floor and ceiling. Without a walked
prerequisite meaning the same step the moves hold the edge below the walk floor, at
`edge_min_confidence` x lift: moves alone are the tutor's habits, and a line it renders
would feed them back. Authored and enriched sequence edges are judged by struggles instead,
from their prior and the current counts (`authored_terms`). No sequence edge is outcome-graded under this rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

from hag.evidence.model import SUM_SLACK, counted_reverse
from hag.settings import Settings
from hag.storage.edges import EdgeObservation

SEQUENCE_TYPES = ("leads_to", "fallback")

Pair = tuple[UUID, UUID, str]  # (source entry, target entry, edge type)


def units_selected(dials: Settings) -> bool:
    """Whether learned `leads_to` and `fallback` edges take their confidence from sequence
    evidence in units (`edge_grading_rule = units`) rather than from turn outcomes."""
    return bool(dials.edge_grading_rule == "units")


@dataclass(frozen=True)
class SequenceEnds:
    """What a session re-weighs of the sequence edges: every one out of `sources` or into
    `targets`, and those named by `reverses` (identities); its rows are locked first."""

    sources: Sequence[UUID] = ()
    targets: Sequence[UUID] = ()
    reverses: Sequence[Pair] = ()


NO_SEQUENCE_ENDS = SequenceEnds()  # what a rule other than units re-weighs: nothing


@dataclass(frozen=True)
class Move:
    """One move discovery observed, and whether a line rendered in the turn it left named
    its pair (then the tutor may have made it because the memory said so)."""

    observation: EdgeObservation
    prompted: bool


def is_prompted(pair: tuple[str, str], rendered: Iterable[tuple[str, str]]) -> bool:
    """Whether a move between two concepts was prompted: a rendered line (source, target
    concepts) joins the same two concepts, in either direction."""
    wanted = frozenset(pair)
    return any(frozenset(line) == wanted for line in rendered)


def session_units(moves: Sequence[Move]) -> dict[Pair, tuple[int, float]]:
    """Each unprompted pair's moves in the session and its share of the session's one unit
    about its source's next step: its unprompted moves over all the session's moves of the
    same type out of the same source (prompted ones included, so a prompted move is never
    turned into evidence for another pair's share). Prompted pairs get nothing."""
    totals: dict[tuple[UUID, str], int] = {}
    counted: dict[Pair, int] = {}
    for move in moves:
        o = move.observation
        totals[(o.source_entry_id, o.edge_type)] = (
            totals.get((o.source_entry_id, o.edge_type), 0) + 1
        )
        if not move.prompted:
            key = (o.source_entry_id, o.target_entry_id, o.edge_type)
            counted[key] = counted.get(key, 0) + 1
    return {key: (n, n / totals[(key[0], key[2])]) for key, n in counted.items()}


@dataclass(frozen=True)
class SequenceEvidence:
    """What the rule reads of one learned sequence edge A -> B (sql/queries/sequences.sql):
    its units and distinct learners (hag_edge_evidence over unprompted sessions only), the
    units of its type out of A, into B and in the topic, the reverse edge's units and
    distinct learners, and the confidence of the prerequisite meaning the same step (None:
    there is none)."""

    edge_id: UUID
    edge_type: str
    units: float
    learners: int
    out_units: float
    in_units: float
    total_units: float
    reverse_units: float = 0.0
    reverse_learners: int = 0
    prerequisite: float | None = None
    # an authored or enriched edge: its confidence, the value its author wrote it with
    # (`hag_edges.prior_confidence`, migration 211; never moved by a re-weigh), and the
    # struggle evidence on the concept its step says needs the other (units, learners)
    source_type: str = "learned"
    confidence: float = 0.0
    prior_confidence: float | None = None
    needing_units: float = 0.0
    needing_learners: int = 0


@dataclass(frozen=True)
class SequenceTerms:
    """The terms of one sequence edge's confidence; `confidence` is what the re-weigh stores."""

    units: float
    learners: int
    chance: float
    reverse: float
    prior: float
    k: float
    net: float
    lift: float
    min_learners: int
    hold: float | None
    unsupported: float | None
    confidence: float
    source_type: str = "learned"
    # the reverse edge's distinct learners: its units count in `reverse` only from
    # `min_learners` of them (`counted_reverse`)
    reverse_learners: int = 0


@dataclass(frozen=True)
class AuthoredSequenceTerms:
    """The terms of an authored or enriched sequence edge's confidence: its prior, the
    struggle evidence on the concept its step says needs the other and the bounds that judge
    it, the prerequisite meaning the same step, and the result the re-weigh stores."""

    source_type: str
    prior: float
    needing_units: float
    needing_learners: int
    min_reports: int
    min_learners: int
    judged: bool
    prerequisite: float | None
    supported: float | None  # what the judged edge may hold: the prerequisite, or the floor
    confidence: float


def chance_units(units: float, out_units: float, in_units: float, total_units: float) -> float:
    """Units of A -> B expected if A's moves went where the moves not starting at A go:
    U(A) x (I(B) - u) / (T - U(A)); 0 when no other moves are known."""
    others = total_units - out_units
    if others <= 0:
        return 0.0
    return out_units * max(0.0, in_units - units) / others


def prior_units(prerequisite: float | None, dials: Settings) -> float:
    """The evidence a walked prerequisite meaning the same step stands for, k p / (1 - p)
    (as `lift` would give p); none below `edge_min_confidence`."""
    if prerequisite is None or prerequisite < dials.edge_min_confidence:
        return 0.0
    if prerequisite >= 1.0:
        return math.inf
    return dials.prerequisite_lift_k * prerequisite / (1.0 - prerequisite)


def sequence_terms(fact: SequenceEvidence, dials: Settings) -> SequenceTerms:
    """A learned sequence edge's confidence under the units rule, with every term."""
    k = dials.prerequisite_lift_k
    min_learners = dials.prerequisite_min_learners
    chance = chance_units(fact.units, fact.out_units, fact.in_units, fact.total_units)
    prior = prior_units(fact.prerequisite, dials)
    reverse = counted_reverse(fact.reverse_units, fact.reverse_learners, dials)
    net = max(0.0, fact.units + prior - chance - reverse)
    lift = 1.0 if math.isinf(net) else net / (net + k)
    # Fewer learners than the bound add nothing of their own: their moves hold the edge at
    # what the walked prerequisite meaning the same step gives alone (its confidence p, as
    # k p / (1 - p) units give), or below the walk floor without one.
    hold = None
    if fact.learners < min_learners:
        hold = (
            fact.prerequisite
            if prior > 0.0 and fact.prerequisite is not None
            else dials.edge_min_confidence * fact.learners / min_learners
        )
    # Moves are the tutor's: without a walked prerequisite meaning the same step they confirm
    # nothing, and hold the edge below the walk floor (ranked by their lift).
    unsupported = dials.edge_min_confidence * lift if prior == 0.0 else None
    value = min(v for v in (lift, hold, unsupported) if v is not None)
    confidence = min(dials.edge_confidence_ceiling, max(dials.edge_confidence_floor, value))
    return SequenceTerms(
        fact.units, fact.learners, chance, reverse, prior, k, net, lift,
        min_learners, hold, unsupported, confidence, reverse_learners=fact.reverse_learners,
    )  # fmt: skip


def authored_terms(fact: SequenceEvidence, dials: Settings) -> AuthoredSequenceTerms:
    """An authored or enriched sequence edge, judged by struggles rather than moves.

    Its prior (the value its author wrote it with) stands until the concept its step says
    needs the other has struggle evidence from `prerequisite_unlearn_min_reports` units and
    `prerequisite_min_learners` learners (moves after a rendered line are the line's, so the
    struggles judge it, not the moves); then it sits at no more than the confidence of the
    prerequisite meaning the same step (the edge floor without one). A function of the prior
    and the current counts alone, so support that arrives later gives the prior back.
    """
    prior = fact.confidence if fact.prior_confidence is None else fact.prior_confidence
    min_reports = dials.prerequisite_unlearn_min_reports
    min_learners = dials.prerequisite_min_learners
    judged = (
        min_reports > 0
        and fact.needing_units + SUM_SLACK >= min_reports
        and fact.needing_learners >= min_learners
    )
    supported = max(dials.edge_confidence_floor, fact.prerequisite or 0.0) if judged else None
    confidence = prior if supported is None else min(prior, supported)
    return AuthoredSequenceTerms(
        fact.source_type, prior, fact.needing_units, fact.needing_learners, min_reports,
        min_learners, judged, fact.prerequisite, supported, confidence,
    )  # fmt: skip


def authored_state(fact: SequenceEvidence, dials: Settings) -> tuple[float, float | None]:
    """An authored or enriched sequence edge: (confidence, its prior while it is lowered:
    kept beside it for reading, `hag_edges.unlearned_from`)."""
    terms = authored_terms(fact, dials)
    return terms.confidence, (terms.prior if terms.confidence < terms.prior else None)


def edge_terms(fact: SequenceEvidence, dials: Settings) -> SequenceTerms | AuthoredSequenceTerms:
    """A sequence edge's terms under the units rule: a learned one's formula
    (`sequence_terms`), an authored or enriched one's judgement (`authored_terms`)."""
    if fact.source_type != "learned":
        return authored_terms(fact, dials)
    return sequence_terms(fact, dials)


def sequence_state(fact: SequenceEvidence, dials: Settings) -> tuple[float, float | None]:
    """A sequence edge's confidence under the units rule and the value kept beside it."""
    if fact.source_type != "learned":
        return authored_state(fact, dials)
    return sequence_terms(fact, dials).confidence, None


def sequence_states(
    evidence: Iterable[SequenceEvidence], dials: Settings
) -> dict[UUID, tuple[float, float | None]]:
    """Each sequence edge's (confidence, value kept beside it) under the units rule."""
    return {e.edge_id: sequence_state(e, dials) for e in evidence}


def moves_ends(observed: Iterable[EdgeObservation]) -> tuple[list[UUID], list[UUID]]:
    """The sources and targets of a session's discovered moves: every sequence edge out of
    a source or into a target is re-weighed (its chance changed), so its row is locked."""
    moves = [o for o in observed if o.edge_type in SEQUENCE_TYPES]
    sources = sorted({o.source_entry_id for o in moves}, key=str)
    targets = sorted({o.target_entry_id for o in moves}, key=str)
    return sources, targets


def pair_order(pair: Pair) -> tuple[str, str, str]:
    """A sort key for pairs: the same order on every call (UUIDs as text)."""
    return str(pair[0]), str(pair[1]), pair[2]


def pair_columns(pairs: Sequence[Pair]) -> tuple[list[UUID], list[UUID], list[str]]:
    """Pairs as three parallel lists (sources, targets, types), the shape the queries unnest."""
    return [p[0] for p in pairs], [p[1] for p in pairs], [p[2] for p in pairs]


def moves_reversed(observed: Iterable[EdgeObservation]) -> list[Pair]:
    """Each discovered move A -> B as the identity of the edge it is the reverse of (B -> A,
    the same type): that edge's reverse term changed, though it is neither out of A nor into
    B, so it is locked and re-weighed too. Of what a session's moves change, only the
    topic's total T (every sequence edge of the topic moves by a share in T) is left to the
    nightly, beside the priors that prerequisites moved elsewhere."""
    return sorted(
        {
            (o.target_entry_id, o.source_entry_id, o.edge_type)
            for o in observed
            if o.edge_type in SEQUENCE_TYPES
        },
        key=pair_order,
    )


def rendered_lines(
    turn_edges: Sequence[UUID], ends: Mapping[UUID, tuple[str, str]]
) -> list[tuple[str, str]]:
    """The (source, target) concepts of the lines a turn rendered (`ends`: every rendered
    id the memory holds or held)."""
    return [ends[e] for e in turn_edges if e in ends]
