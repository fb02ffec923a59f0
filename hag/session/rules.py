"""The rules of session-end processing, as plain functions (SPEC §4, seed): the decide step.

Session-end reads facts with named SQL (`hag.session.facts`), decides here, and writes
through `hag.session.write`; nothing in this module opens a connection, so every rule is
tested without a database (tests/test_session_rules.py, docs/rules.md). In the seed's order:
observations -> entries (the student-pattern dedup), discovery, prerequisite proposals,
reinforcement (the floor), outcome grading of edges and entries.

The SQL in `sql/queries/session.sql` applies the grading set-based. Within one session an
edge or entry may be graded by several turns, in turn order, and the clamped edge step and
the saturating entry step do not commute; instead of one statement per turn, the turn-by-turn
steps of each row are composed here into one function of the same shape (a clamped shift for
edges, an affine map for entries) and applied in one statement. The tests check that the
composition equals the turn-by-turn application.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple, Protocol, TypeVar
from uuid import UUID

import numpy as np
import numpy.typing as npt

from hag.evidence.model import lift_selected
from hag.operations.corpus import UNANCHORED
from hag.session.contract import Observation, Turn
from hag.session.ladder import Catalogue, Resolution, candidate_slug
from hag.settings import Settings
from hag.storage.edges import EdgeObservation

SUCCESS, FAILURE = "success", "failure"

Embedding = npt.NDArray[np.float32]  # one text's embedding (float32)


# --- edges: outcome grading (seed) --------------------------------------------------------


@dataclass(frozen=True)
class ClampedShift:
    """x -> min(hi, max(lo, x + delta)); None is an open side. Closed under composition."""

    delta: float = 0.0
    lo: float | None = None
    hi: float | None = None

    def __call__(self, x: float) -> float:
        y = x + self.delta
        if self.lo is not None:
            y = max(self.lo, y)
        if self.hi is not None:
            y = min(self.hi, y)
        return y

    def then(self, after: ClampedShift) -> ClampedShift:
        """The function `after(self(x))`, in the same shape."""
        # after(clamp(x + d1, lo1, hi1)) = clamp(clamp(x + d1 + d2, lo1 + d2, hi1 + d2), lo2, hi2),
        # and clamping twice is one clamp between the outer clamp of the inner bounds.
        lo = -math.inf if self.lo is None else self.lo + after.delta
        hi = math.inf if self.hi is None else self.hi + after.delta
        bounded = ClampedShift(0.0, after.lo, after.hi)
        new_lo, new_hi = bounded(lo), bounded(hi)
        return ClampedShift(
            self.delta + after.delta,
            None if math.isinf(new_lo) else new_lo,
            None if math.isinf(new_hi) else new_hi,
        )


IDENTITY_SHIFT = ClampedShift()


def edge_step(outcome: str | None, dials: Settings) -> ClampedShift:
    """One turn's grading of an edge whose line reached the prompt.

    success: min(1.0, c + 0.05); failure: max(0.05, c - 0.05); no outcome: unchanged.
    """
    if outcome == SUCCESS:
        return ClampedShift(dials.edge_grade_step_success, None, dials.edge_confidence_ceiling)
    if outcome == FAILURE:
        return ClampedShift(-dials.edge_grade_step_failure, dials.edge_confidence_floor, None)
    return IDENTITY_SHIFT


def grade_edge(confidence: float, outcome: str | None, dials: Settings) -> float:
    """An edge's confidence after one turn's outcome."""
    return edge_step(outcome, dials)(confidence)


def edge_grading(outcomes: Iterable[str | None], dials: Settings) -> ClampedShift:
    """The turn-by-turn grading of one edge in one session, as one function."""
    composed = IDENTITY_SHIFT
    for outcome in outcomes:
        composed = composed.then(edge_step(outcome, dials))
    return composed


# --- entries: outcome grading (seed) ------------------------------------------------------


@dataclass(frozen=True)
class Affine:
    """x -> scale * x + shift. Closed under composition."""

    scale: float = 1.0
    shift: float = 0.0

    def __call__(self, x: float) -> float:
        return self.scale * x + self.shift

    def then(self, after: Affine) -> Affine:
        return Affine(after.scale * self.scale, after.scale * self.shift + after.shift)


def learning_rate(maturity: str, dials: Settings) -> float:
    """0.10 for proven entries (they move at half speed), 0.20 otherwise."""
    if maturity == "proven":
        return dials.entry_learning_rate_proven
    return dials.entry_learning_rate_default


def entry_step(outcome: str | None, strength: float, lr: float) -> Affine:
    """One turn's update of an entry whose advisory reached the prompt.

    success: c + lr (1 - c) s = (1 - lr s) c + lr s; failure: c - lr c s = (1 - lr s) c.
    """
    if outcome == SUCCESS:
        return Affine(1.0 - lr * strength, lr * strength)
    if outcome == FAILURE:
        return Affine(1.0 - lr * strength, 0.0)
    return Affine()


def grade_entry(
    confidence: float, outcome: str | None, strength: float, maturity: str, dials: Settings
) -> float:
    """An entry's confidence after one turn's outcome (the asymmetric saturating rule)."""
    lr = learning_rate(maturity, dials)
    if outcome == SUCCESS:
        return confidence + lr * (1.0 - confidence) * strength
    if outcome == FAILURE:
        return confidence - lr * confidence * strength
    return confidence


def entry_grading(steps: Iterable[tuple[str | None, float]], lr: float) -> Affine:
    """The turn-by-turn grading of one entry in one session, as one affine map."""
    composed = Affine()
    for outcome, strength in steps:
        composed = composed.then(entry_step(outcome, strength, lr))
    return composed


# --- new entries ---------------------------------------------------------------------------


def initial_entry_confidence(quality: float, dials: Settings) -> float:
    """A new entry's confidence: the base, scaled by its ladder step's quality."""
    return dials.observation_base_confidence * quality


def graph_scope(graph: str, learner_id: str, dials: Settings) -> str:
    """The visibility scope an observation for a graph is written (and looked up) with."""
    if graph == "topic":
        return dials.session_topic_scope
    if graph == "student":
        return f"student:{learner_id}"
    return graph  # tutor | visual


# --- step 1: observations -> entries, the student-pattern dedup (seed: 0.72) ----------------


@dataclass(frozen=True)
class Pattern:
    """One of a learner's student patterns, as the cosine dedup compares it."""

    slug: str
    vector: Embedding  # unit length for stored patterns; as embedded for this session's own


@dataclass(frozen=True)
class ResolvedObservation:
    """An observation with the concept the ladder resolved its name to."""

    turn_index: int
    observation: Observation
    resolution: Resolution


@dataclass(frozen=True)
class NewEntry:
    """A candidate entry an observation creates (unless its identity exists: then a merge)."""

    slug: str
    scope: str
    quality: float
    confidence: float
    instruction: str
    vector: Embedding


@dataclass(frozen=True)
class MintedConcept:
    """Drift residue: a concept the ladder minted, with the first words said about it."""

    slug: str
    title: str
    description: str
    vector: Embedding


@dataclass(frozen=True)
class EntryDecision:
    """What step 1 writes, and the observations it merged or dropped without a write."""

    new: tuple[NewEntry, ...]
    minted: tuple[MintedConcept, ...]
    merged: int
    dropped: int


def unit(vector: Embedding) -> Embedding:
    """The vector scaled to unit length (a zero vector stays zero)."""
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


def is_twin_pattern(
    slug: str, vector: Embedding, patterns: Sequence[Pattern], dials: Settings
) -> bool:
    """Seed: a student pattern with the same concept, or within cosine
    `student_pattern_dedup_threshold` (0.72) of one of the learner's patterns, reinforces
    that one instead of creating a twin."""
    if not patterns:
        return False
    if any(p.slug == slug for p in patterns):
        return True
    threshold = dials.student_pattern_dedup_threshold
    return max(float(p.vector @ vector) for p in patterns) >= threshold


def decide_entries(
    observations: Sequence[ResolvedObservation],
    vectors: Sequence[Embedding],
    patterns: Sequence[Pattern],
    learner_id: str,
    dials: Settings,
) -> EntryDecision:
    """Step 1: each observation lands on its graph's entry, or becomes a new candidate.

    Topic, tutor and visual observations merge by identity (concept, scope); student
    observations merge by identity or as a twin (`is_twin_pattern`), including patterns
    created earlier in this session. Merging adds no row and moves no confidence (seed:
    confidence moves only when an outcome fires). `_unanchored_` rows never merge; an
    unanchored visual observation is dropped (a drawing is found by its concept, and without
    one it could never be served). A new entry starts at `initial_entry_confidence`.
    """
    known = list(patterns)
    new: list[NewEntry] = []
    minted: dict[str, MintedConcept] = {}
    seen: set[tuple[str, str]] = set()
    merged = dropped = 0
    for item, vector in zip(observations, vectors, strict=True):
        obs, res = item.observation, item.resolution
        scope = graph_scope(obs.graph, learner_id, dials)
        if obs.graph == "visual" and not res.anchored:
            dropped += 1
            continue
        if obs.graph == "student":
            # An `_unanchored_` trait has no identity: it neither merges nor is merged into.
            if res.anchored:
                if is_twin_pattern(res.slug, vector, known, dials):
                    merged += 1
                    continue
                known.append(Pattern(res.slug, vector))
        elif res.anchored:
            if (res.slug, scope) in seen:
                merged += 1
                continue
            seen.add((res.slug, scope))
        new.append(
            NewEntry(
                res.slug,
                scope,
                res.quality,
                initial_entry_confidence(res.quality, dials),
                obs.text,
                vector,
            )
        )
        if obs.graph == "topic" and res.step == "minted" and res.slug not in minted:
            minted[res.slug] = MintedConcept(res.slug, obs.concept, obs.text, vector)
    return EntryDecision(tuple(new), tuple(minted.values()), merged, dropped)


# --- step 2: discovery (seed) -----------------------------------------------------------------


def decision_entries(turns: Iterable[Turn]) -> set[UUID]:
    """The entries the turns acted on (discovery reads their concepts)."""
    return {t.decision_entry_id for t in turns if t.decision_entry_id is not None}


def discover(turns: Sequence[Turn], slugs: Mapping[UUID, str]) -> list[EdgeObservation]:
    """Step 2: sequence and recovery edges from consecutive turns' decision entries.

    Sequence: turn t succeeded acting on A, turn t+1 acted on B != A -> `leads_to` A -> B.
    Recovery: turn t failed acting on A, turn t+1 succeeded acting on B != A -> `fallback`
    A -> B, with a condition naming what failed. A turn without a decision entry breaks the
    chain; `_unanchored_` entries take part in nothing. `slugs` is each decision entry's concept.
    """
    observed: list[EdgeObservation] = []
    for turn, following in zip(turns, turns[1:], strict=False):
        a, b = turn.decision_entry_id, following.decision_entry_id
        if a is None or b is None or a == b or UNANCHORED in (slugs.get(a), slugs.get(b)):
            continue
        if turn.outcome == SUCCESS:
            observed.append(EdgeObservation(a, b, "leads_to"))
        elif turn.outcome == FAILURE and following.outcome == SUCCESS:
            observed.append(EdgeObservation(a, b, "fallback", fallback_condition(turn, slugs[a])))
    return observed


def fallback_condition(turn: Turn, failed_slug: str) -> str:
    """The condition of a recovery edge: what failed, and what the student was missing."""
    missing = sorted({s.missing_slug for s in turn.struggles if s.has_evidence})
    said = f" (missing {', '.join(missing)})" if missing else ""
    return f"the student did not get {failed_slug}{said}"


# --- step 3: prerequisite proposals (seed) ----------------------------------------------------


@dataclass(frozen=True)
class StrugglePair:
    """A struggle with evidence, as the two topic concepts it names."""

    concept_slug: str
    missing_slug: str


@dataclass(frozen=True)
class Proposals:
    """Step 3's outcome: the prerequisite edges observed, and the struggles that named no pair
    of distinct topic entries."""

    observed: tuple[EdgeObservation, ...]
    unresolved: int


def struggle_pairs(turns: Iterable[Turn], catalogue: Catalogue) -> list[StrugglePair]:
    """The struggles that may propose a prerequisite: only those with the extractor's explicit
    evidence (never co-occurrence), each name read through the catalogue without embedding it
    (`ladder.candidate_slug`: struggles name concepts but never create them)."""
    return [
        StrugglePair(
            candidate_slug(s.concept_slug, catalogue), candidate_slug(s.missing_slug, catalogue)
        )
        for t in turns
        for s in t.struggles
        if s.has_evidence
    ]


def struggles_with_evidence(turns: Iterable[Turn]) -> int:
    """Struggles the extractor reported with quoted words: those `struggle_pairs` reads."""
    return sum(1 for t in turns for s in t.struggles if s.has_evidence)


def struggles_without_evidence(turns: Iterable[Turn]) -> int:
    """Struggles the extractor reported without quoted words: they propose nothing."""
    return sum(1 for t in turns for s in t.struggles if not s.has_evidence)


def proposal_slugs(pairs: Iterable[StrugglePair]) -> list[str]:
    """The concepts whose topic entries step 3 looks up, sorted."""
    return sorted({slug for p in pairs for slug in (p.concept_slug, p.missing_slug)})


def propose_prerequisites(
    pairs: Iterable[StrugglePair], topic_entries: Mapping[str, UUID]
) -> Proposals:
    """Step 3: a `prerequisite` edge per struggle with evidence, struggled -> missing concept.

    Both ends are the topic entries (`topic_entries`: concept -> entry in the session's topic
    and topic scope); a struggle naming a concept with no entry there, or the same entry
    twice, proposes nothing and is counted as unresolved.
    """
    observed: list[EdgeObservation] = []
    unresolved = 0
    for pair in pairs:
        ends = entry_pair(pair, topic_entries)
        if ends is None:
            unresolved += 1
            continue
        observed.append(EdgeObservation(ends[0], ends[1], "prerequisite"))
    return Proposals(tuple(observed), unresolved)


def entry_pair(pair: StrugglePair, topic_entries: Mapping[str, UUID]) -> tuple[UUID, UUID] | None:
    """The (struggled, missing) topic entries a struggle names, or None when either concept
    has no entry in the topic or both name the same entry (it proposes nothing)."""
    source, target = topic_entries.get(pair.concept_slug), topic_entries.get(pair.missing_slug)
    if source is None or target is None or source == target:
        return None
    return source, target


# --- step 4: reinforcement (seed) -------------------------------------------------------------


def reinforcement_floor(hit_count: int, dials: Settings) -> float:
    """The confidence a re-observed edge is raised to, by its hit count after the increment:
    0.6 from `edge_reinforce_min_hits` (3) observations on, 0.3 below."""
    if hit_count >= dials.edge_reinforce_min_hits:
        return dials.edge_reinforce_confidence_high
    return dials.edge_reinforce_confidence_low


def reinforced_confidence(confidence: float, hit_count: int, dials: Settings) -> float:
    """A re-observed edge's confidence: raised to its floor, never lowered (seed).

    The set-based statement that applies it is sql/queries/edges.sql `upsert_edges`
    (through `hag.storage.edges.upsert_edges`, the one edge write); the database tests pin it to
    the same worked numbers.
    """
    return max(confidence, reinforcement_floor(hit_count, dials))


class TurnStruggles(NamedTuple):
    """`turn_struggles`'s answer: each turn's kept struggle pairs, how many struggles the
    learner's record contradicts, each turn's pairs a later session contradicts, and how many
    struggles were left out as named at a turn about another concept (`on_turn_pairs`)."""

    per_turn: list[list[StrugglePair]]
    contradicted: int
    withheld: list[list[StrugglePair]]
    off_turn: int = 0

    @property
    def forward(self) -> frozenset[StrugglePair]:
        """The pairs contradicted forward in time that no turn of the session kept."""
        kept = {p for pairs in self.per_turn for p in pairs}
        return frozenset(p for pairs in self.withheld for p in pairs if p not in kept)


def turn_struggles(
    turns: Iterable[Turn],
    catalogue: Catalogue,
    shown: Collection[str] | None = None,
    later: Sequence[Success] | None = None,
    supplied: Sequence[Collection[str]] | None = None,
    *,
    on_turn: bool = False,
) -> TurnStruggles:
    """Each turn's struggle pairs (`struggle_pairs`), how many the learner's own record
    contradicts (left out), and the pairs contradicted forward in time that no turn kept.

    With `shown`, or with `on_turn` (the units rule), a struggle on c at a turn about other
    concepts is left out when a turn about c names one (`on_turn_pairs`), counted as
    `off_turn`. With `shown` (the concepts the learner succeeded on in earlier sessions of
    the topic; None: not asked, every struggle kept), a struggle naming as missing a concept
    in `shown` or in a successful turn earlier in this session is left out: a learner who has
    shown m is not missing it, so the report is the extractor's (or the learner's) mistake,
    not evidence (`prerequisite_drop_shown`). With `later` too (the learner's later sessions
    with a successful turn, in order), a struggle c -> m whose learner next succeeds on c
    before showing m is left out as well (`succeeded_first`): in the session's later turns
    (each with the concepts its prompt's lines `supplied`), else in the later sessions. Those a
    later session contradicts are `withheld`, turn by turn, as the recorded report a later
    session withdraws would have named them: they take their part of the session's unit
    (`session_shares`), and the pairs no turn kept (`forward`) count as a recorded report
    withdrawn does (`hag_pair_withdrawn`, with that share), so what stays does not
    depend on the order the sessions arrive in. Those a later turn of their own session
    contradicts count nothing (as before the session is recorded, so in either order).
    """
    turns = list(turns)
    if shown is None:
        if not on_turn:
            return TurnStruggles([struggle_pairs([t], catalogue) for t in turns], 0, [])
        kept_on = on_turn_pairs(turns, [turn_concepts(t, catalogue) for t in turns], catalogue)
        left = struggles_with_evidence(turns) - sum(len(pairs) for pairs in kept_on)
        return TurnStruggles(kept_on, 0, [], left)
    own = turn_successes(turns, catalogue, supplied)
    per_turn: list[list[StrugglePair]] = []
    withheld: list[list[StrugglePair]] = []
    contradicted = walked = 0
    for i, step in enumerate(shown_walk(turns, catalogue, shown)):
        walked += len(step.pairs)
        kept, later_first = [], []
        for p in step.pairs:
            if p.missing_slug in step.had:
                continue
            if later is not None:
                first = succeeded_first(p, [s for s in own[i + 1 :] if s is not None])
                if first:  # its own session succeeded on c after it: that session is no
                    continue  # failure on c at all, and counts nothing
                if first is None and succeeded_first(p, later):
                    later_first.append(p)
                    continue
            kept.append(p)
        contradicted += len(step.pairs) - len(kept)
        per_turn.append(kept)
        withheld.append(later_first)
    return TurnStruggles(per_turn, contradicted, withheld, struggles_with_evidence(turns) - walked)


@dataclass(frozen=True)
class Success:
    """A successful turn, or a session's successful turns together, as the forward
    contradiction reads them: the concepts succeeded on, and the (c, m) of a success on c
    whose prompt had a prerequisite or fallback line to m (the tutor supplied m there)."""

    concepts: frozenset[str]
    bridged: frozenset[tuple[str, str]] = frozenset()


def read_success(
    slugs: Iterable[str], bridged: Iterable[Sequence[str]], catalogue: Catalogue
) -> Success:
    """A session's successes as ingest kept them, each concept read through the catalogue."""
    return Success(
        frozenset(candidate_slug(s, catalogue) for s in slugs),
        frozenset((candidate_slug(c, catalogue), candidate_slug(m, catalogue)) for c, m in bridged),
    )


def turn_successes(
    turns: Sequence[Turn], catalogue: Catalogue, supplied: Sequence[Collection[str]] | None
) -> list[Success | None]:
    """Each turn as a `Success` (None for a turn that did not succeed), with the concepts its
    prompt's lines supplied (`supplied`, one collection per turn; None: none)."""
    out: list[Success | None] = []
    for i, t in enumerate(turns):
        if t.outcome != "success":
            out.append(None)
            continue
        concepts = frozenset(turn_concepts(t, catalogue))
        lines = {candidate_slug(m, catalogue) for m in (supplied[i] if supplied else ())}
        out.append(Success(concepts, frozenset((c, m) for c in concepts for m in lines)))
    return out


def succeeded_first(pair: StrugglePair, successes: Iterable[Success]) -> bool | None:
    """Whether a report c -> m is contradicted forward in time: True when its learner's next
    success on c (`successes`, in order) comes before any success on m, False when a success
    on m comes first, None when neither comes.

    The report says the learner failed c for want of m. Had c needed m and the learner lacked
    it, no success on c could come before the learner showed m; one that does says the
    learner did not lack m there, or c does not need it. A success on c whose prompt had a
    line to m says nothing either way (the tutor supplied m in the turn: whether the report
    was true or not, the learner could succeed) and is passed over. A success that holds
    both c and m (a session read as a whole) counts m first: the report stands."""
    c, m = pair.concept_slug, pair.missing_slug
    for s in successes:
        if m in s.concepts:
            return False
        if c in s.concepts and (c, m) not in s.bridged:
            return True
    return None


class Reported(Protocol):
    """A recorded report as `withdrawn_reports` reads it (`hag.evidence.store.LearnerReport`)."""

    @property
    def source_slug(self) -> str: ...
    @property
    def target_slug(self) -> str: ...
    @property
    def reported_at(self) -> datetime: ...


R = TypeVar("R", bound=Reported)


def withdrawn_reports(
    reports: Iterable[R], here: Success, between: Sequence[tuple[datetime, Success]]
) -> list[R]:
    """The recorded reports c -> m this session contradicts forward in time: it succeeded on c
    with no line to m and did not succeed on m (`here`, the session read as a whole, as
    `turn_struggles` reads a later session), and no session of the learner since the report
    (`between`: each one's end and successes, the report's own session included) succeeded
    on m. A session between that succeeded on c with no line to m would have withdrawn it
    already."""
    out = []
    for r in reports:
        pair = StrugglePair(r.source_slug, r.target_slug)
        if succeeded_first(pair, [here]) and not any(
            at >= r.reported_at and r.target_slug in s.concepts for at, s in between
        ):
            out.append(r)
    return out


@dataclass(frozen=True)
class ShownStep:
    """One turn as the learner's record reads it: its struggle pairs, its concepts (through
    the catalogue), and the concepts its learner had shown before it (`had`: the walk's own
    set, read before the next step)."""

    turn: Turn
    pairs: list[StrugglePair]
    concepts: list[str]
    had: Collection[str]


def turn_concepts(t: Turn, catalogue: Catalogue) -> list[str]:
    """A turn's concepts, each read through the catalogue (`ladder.candidate_slug`)."""
    return [candidate_slug(slug, catalogue) for slug in t.concept_slugs]


def shown_walk(
    turns: Iterable[Turn], catalogue: Catalogue, shown: Collection[str]
) -> Iterator[ShownStep]:
    """A session's turns in order, each with what its learner had shown before it: the
    concepts in `shown` (succeeded on in earlier sessions of the topic) and those of the
    session's successful turns so far, all read through the catalogue, and its struggle pairs
    less those named at a turn about another concept (`on_turn_pairs`). The one definition of
    "shown" that the contradiction rule (`turn_struggles`) and the invented term's counts
    (`shown_exposures`) both read."""
    succeeded = {candidate_slug(slug, catalogue) for slug in shown}
    turns = list(turns)
    concepts = [turn_concepts(t, catalogue) for t in turns]
    for t, about, pairs in zip(
        turns, concepts, on_turn_pairs(turns, concepts, catalogue), strict=True
    ):
        yield ShownStep(t, pairs, about, succeeded)
        if t.outcome == "success":
            succeeded.update(about)


def on_turn_pairs(
    turns: Sequence[Turn], concepts: Sequence[Collection[str]], catalogue: Catalogue
) -> list[list[StrugglePair]]:
    """Each turn's struggle pairs (`struggle_pairs`: those with quoted evidence), less those on
    a concept c at a turn listed with other concepts only (`concepts`, each turn's, through
    the catalogue) when a turn of the session listed with c names a struggle on c: the turns
    about c carry the session's evidence on c.

    A session is one unit of evidence about c, split over the turns naming pairs out of c
    (hag.evidence.model.session_shares). An extractor that misreads one pair and repeats it
    through the session carries it onto turns about other concepts, where nothing failed on
    c; counted there, it would take the unit from the struggle the turns about c name. A
    struggle on c at a turn listed with no concept, or named only at turns about other
    concepts, still counts (the tutor need not list every concept a turn touches). Which
    turns are about c is read from the session alone, before the learner's record judges any
    struggle (`turn_struggles`), so it does not depend on the order sessions arrive in."""
    per_turn = [struggle_pairs([t], catalogue) for t in turns]
    about = {
        p.concept_slug
        for pairs, on in zip(per_turn, concepts, strict=True)
        for p in pairs
        if p.concept_slug in on
    }
    return [
        [p for p in pairs if not on or p.concept_slug in on or p.concept_slug not in about]
        for pairs, on in zip(per_turn, concepts, strict=True)
    ]


def reported_turns(
    per_turn: Iterable[Sequence[StrugglePair]], topic_entries: Mapping[str, UUID]
) -> dict[tuple[UUID, UUID], int]:
    """How many of the session's turns (`turn_struggles`) reported each prerequisite (source,
    target entries): a turn counts once per pair, whatever number of its struggles name it.
    Pairs that name no two distinct topic entries are left out, as `propose_prerequisites`
    leaves them."""
    counted: dict[tuple[UUID, UUID], int] = {}
    for pairs in per_turn:
        seen = {ends for ends in (entry_pair(p, topic_entries) for p in pairs) if ends}
        for key in seen:
            counted[key] = counted.get(key, 0) + 1
    return counted


@dataclass(frozen=True)
class ShownExposures:
    """What a session adds to the counts the `invented` term reads (migration 215): the
    concepts it failed a turn on, and per failed concept c and concept m its learner had shown
    by its first failed turn on c, whether its struggles named c -> m."""

    failed: tuple[str, ...]
    named: Mapping[tuple[str, str], bool]

    def slugs(self) -> list[str]:
        """Every concept named, sorted (their topic entries are looked up)."""
        return sorted(set(self.failed) | {m for _, m in self.named})


def failed_concepts(concepts: Iterable[str], pairs: Iterable[StrugglePair]) -> set[str]:
    """What a failed turn failed on: its concepts and those its struggles name as struggled
    (a struggle on c is a failure on c, whether or not the tutor listed c with the turn; under
    the units rule only the struggles `on_turn_pairs` keeps)."""
    return set(concepts) | {p.concept_slug for p in pairs}


def failed_slugs(turns: Iterable[Turn], catalogue: Catalogue) -> list[str]:
    """The concepts of a session's failed turns (`failed_concepts` over every struggle, those
    `on_turn_pairs` leaves out too), read through the catalogue, sorted: the concepts whose
    rows session-end locks, a superset of those the invented term's counts add a failure to."""
    return sorted(
        {slug for t in turns if t.outcome == "failure"
         for slug in failed_concepts(turn_concepts(t, catalogue), struggle_pairs([t], catalogue))}
    )  # fmt: skip


def shown_exposures(
    turns: Iterable[Turn], catalogue: Catalogue, shown: Collection[str]
) -> ShownExposures:
    """A session's failed concepts and, for each, the concepts its learner had shown when it
    first failed there: those in `shown` (succeeded on in earlier sessions of the topic, read
    through the catalogue) or in a successful turn earlier in the session, itself excepted.
    A pair counts as named when a struggle of the session with evidence named it after its
    learner had shown the missing concept: a report `turn_struggles` finds contradicted, never
    one kept as evidence. The rate at which learners who had shown m are named as missing it
    is the extractor's own, the `invented` term's (hag.evidence.model.invented_reports)."""
    first: dict[str, frozenset[str]] = {}
    contradicted: set[tuple[str, str]] = set()
    for step in shown_walk(turns, catalogue, shown):
        contradicted.update(
            (p.concept_slug, p.missing_slug) for p in step.pairs if p.missing_slug in step.had
        )
        if step.turn.outcome == "failure":
            for c in sorted(failed_concepts(step.concepts, step.pairs)):
                first.setdefault(c, frozenset(step.had) - {c})
    return ShownExposures(
        tuple(sorted(first)),
        {(c, m): (c, m) in contradicted for c, had in sorted(first.items()) for m in sorted(had)},
    )


# --- step 5: what a session grades (seed) ------------------------------------------------------


def graded_entries(turn: Turn) -> list[UUID]:
    """The entries a turn grades: every advisory that reached the prompt, and the decision."""
    ids = list(turn.used_entry_ids)
    if turn.decision_entry_id is not None:
        ids.append(turn.decision_entry_id)
    return list(dict.fromkeys(ids))


@dataclass(frozen=True)
class GradingPlan:
    """Each rendered edge's outcomes and each graded entry's (outcome, strength) steps, in
    turn order."""

    edge_outcomes: Mapping[UUID, Sequence[str | None]]
    entry_steps: Mapping[UUID, Sequence[tuple[str | None, float]]]


def grading_plan(turns: Iterable[Turn], dials: Settings) -> GradingPlan:
    """Step 5's inputs: what reached the prompt in each turn, by its turn's outcome.

    An edge counts once per turn that rendered it; a turn without a strength uses
    `outcome_strength_default`. Turns without an outcome grade nothing but still count.
    """
    edge_outcomes: dict[UUID, list[str | None]] = {}
    entry_steps: dict[UUID, list[tuple[str | None, float]]] = {}
    default_strength = dials.outcome_strength_default
    for turn in turns:
        for edge_id in dict.fromkeys(turn.rendered_edge_ids):
            edge_outcomes.setdefault(edge_id, []).append(turn.outcome)
        strength = default_strength if turn.outcome_strength is None else turn.outcome_strength
        for entry_id in graded_entries(turn):
            entry_steps.setdefault(entry_id, []).append((turn.outcome, strength))
    return GradingPlan(edge_outcomes, entry_steps)


@dataclass(frozen=True)
class EdgeGradingState:
    """What the evidence rules' grading reads of a rendered edge before this session."""

    edge_type: str
    traversal_count: int
    success_count: int
    failure_count: int


def needs_edge_state(dials: Settings) -> bool:
    """Whether edge grading reads each edge's state (the seed's rules need only outcomes)."""
    return dials.edge_grading_rule != "seed" or lift_selected(dials)


def edge_shifts(
    edge_outcomes: Mapping[UUID, Sequence[str | None]],
    state: Mapping[UUID, EdgeGradingState],
    dials: Settings,
) -> dict[UUID, ClampedShift]:
    """Each rendered edge's grading over the session, as one clamped shift.

    Seed: `edge_grading` of its outcomes. Under the evidence rules, prerequisites under the
    lift rule are not outcome-graded, and the baseline rule grades against the source
    concept's smoothed success rate (`state`, read before this session's counters move). An
    edge missing from `state` (culled since) takes the seed's rule: its update finds nothing.
    """
    shifts: dict[UUID, ClampedShift] = {}
    for edge_id, outcomes in edge_outcomes.items():
        row = state.get(edge_id)
        if row is not None and not outcome_graded(row.edge_type, dials):
            shifts[edge_id] = IDENTITY_SHIFT
        elif row is not None and dials.edge_grading_rule in ("baseline", "units"):
            baseline = smoothed_success_rate(row.success_count, row.failure_count, dials)
            shifts[edge_id] = baseline_edge_grading(outcomes, baseline, row.traversal_count, dials)
        else:
            shifts[edge_id] = edge_grading(outcomes, dials)
    return shifts


@dataclass(frozen=True)
class EntryGrading:
    """One entry's grading over a session, for either maturity (the row knows which it is),
    and its outcome counters."""

    proven: Affine
    default: Affine
    successes: int
    failures: int


def entry_gradings(
    entry_steps: Mapping[UUID, Sequence[tuple[str | None, float]]], dials: Settings
) -> dict[UUID, EntryGrading]:
    """Each graded entry's composed update at both learning rates, and its counters."""
    lr_proven = learning_rate("proven", dials)
    lr_default = learning_rate("candidate", dials)
    return {
        entry_id: EntryGrading(
            entry_grading(steps, lr_proven),
            entry_grading(steps, lr_default),
            sum(1 for o, _ in steps if o == SUCCESS),
            sum(1 for o, _ in steps if o == FAILURE),
        )
        for entry_id, steps in entry_steps.items()
    }


# --- the evidence profile's outcome grading (issue 14; prerequisites: hag.evidence.model) ----


def smoothed_success_rate(successes: int, failures: int, dials: Settings) -> float:
    """A concept's success rate with `edge_grade_baseline_prior_weight` pseudo-turns at the prior."""
    w = dials.edge_grade_baseline_prior_weight
    p0 = dials.edge_grade_baseline_prior
    n = successes + failures + w
    return (successes + w * p0) / n if n > 0 else p0


def baseline_edge_step(
    outcome: str | None, baseline: float, renderings: int, dials: Settings
) -> ClampedShift:
    """One turn's baseline grading: 2 step (outcome - baseline) n0/(n0 + renderings).

    The outcome counts 1 for success and 0 for failure; the edge moves only by how much
    better or worse the turn went than its concept usually goes, and less the more often it
    has already been graded (without the shrinking step it is a random walk).
    """
    if outcome not in (SUCCESS, FAILURE):
        return IDENTITY_SHIFT
    n0 = dials.edge_grade_baseline_n0
    shrink = n0 / (n0 + max(0, renderings))
    if outcome == SUCCESS:
        delta = 2 * dials.edge_grade_step_success * (1.0 - baseline) * shrink
        return ClampedShift(delta, None, dials.edge_confidence_ceiling)
    delta = -2 * dials.edge_grade_step_failure * baseline * shrink
    return ClampedShift(delta, dials.edge_confidence_floor, None)


def baseline_edge_grading(
    outcomes: Iterable[str | None], baseline: float, renderings: int, dials: Settings
) -> ClampedShift:
    """The baseline grading of one edge over a session's turns, as one clamped shift; every
    turn that rendered it counts as a rendering for the turns after it."""
    composed = IDENTITY_SHIFT
    for i, outcome in enumerate(outcomes):
        composed = composed.then(baseline_edge_step(outcome, baseline, renderings + i, dials))
    return composed


def outcome_graded(edge_type: str, dials: Settings) -> bool:
    """Under the lift rule prerequisites are set by struggle evidence, never by outcomes; under
    `edge_grading_rule = units` `leads_to` and `fallback` by sequence evidence
    (`hag.evidence.sequences`: learned ones from unprompted moves, authored and enriched ones
    judged by the struggles on the concept their step says needs the other)."""
    if edge_type in ("leads_to", "fallback") and dials.edge_grading_rule == "units":
        return False
    return not (edge_type == "prerequisite" and lift_selected(dials))
