"""The prerequisite evidence model, as plain functions: how struggle reports become a
prerequisite's confidence under the lift and units rules (`prerequisite_confidence_rule`).

Nothing here opens a connection (tests/test_evidence_rules.py runs it without a database).
The facts it decides on are read by `hag.evidence.store`, its verdicts re-weighed into the
memory by `hag.evidence.reweigh` (session-end and the nightly cull both call it), and its
terms printed by `hag.evidence.explain` (`hag explain EDGE`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from uuid import UUID

from hag.settings import Settings
from hag.storage.edges import EdgeObservation


def lift_selected(dials: Settings) -> bool:
    """Whether prerequisites take their confidence from evidence (the lift rule) rather than
    the seed's reinforcement and grading (`prerequisite_confidence_rule`)."""
    return dials.prerequisite_confidence_rule in ("lift", "units")


def units_selected(dials: Settings) -> bool:
    """Whether the lift rule counts its evidence in units (`unit_terms`): sessions shared over
    the pairs they name, each learner's total capped."""
    return bool(dials.prerequisite_confidence_rule == "units")


def drops_shown(dials: Settings) -> bool:
    """Whether a struggle naming as missing a concept its learner already succeeded on is left
    out of the evidence (the units rule with `prerequisite_drop_shown`): a learner who has
    shown m is not missing it, so the report is a mistake of the extractor or the learner."""
    return units_selected(dials) and bool(dials.prerequisite_drop_shown)


def session_shares(
    turns_by_pair: Mapping[tuple[UUID, UUID], int],
    withheld: Mapping[tuple[UUID, UUID], int] | None = None,
) -> dict[tuple[UUID, UUID], float]:
    """Each reported pair's share of its session's one unit of evidence about the struggled
    concept: the turns naming the pair over the turns naming any pair out of the same concept
    (a turn naming two pairs counts for each). However many turns repeat a pair, a session
    gives it at most 1; a turn naming three concepts gives each a third. The turns of pairs
    `withheld` (contradicted forward in time, `rules.TurnStruggles.withheld`) keep their part
    of the unit, as a report withdrawn after it was recorded does."""
    totals = _turns_per_concept(turns_by_pair, withheld or {})
    return {pair: turns / totals[pair[0]] for pair, turns in turns_by_pair.items()}


def withheld_shares(
    turns_by_pair: Mapping[tuple[UUID, UUID], int],
    withheld: Mapping[tuple[UUID, UUID], int],
) -> dict[tuple[UUID, UUID], float]:
    """The part of its session's unit each pair `withheld` held (`session_shares`' other
    side): what a struggle contradicted forward in time when made counts on its pair, as a
    recorded report withdrawn later counts its own share (migration 225)."""
    totals = _turns_per_concept(turns_by_pair, withheld)
    return {pair: turns / totals[pair[0]] for pair, turns in withheld.items()}


def _turns_per_concept(
    *turns: Mapping[tuple[UUID, UUID], int],
) -> dict[UUID, int]:
    """The turns naming any pair out of each struggled concept, over the maps given."""
    totals: dict[UUID, int] = {}
    for counted in turns:
        for (source, _), n in counted.items():
            totals[source] = totals.get(source, 0) + n
    return totals


def lift_sources(
    observed: Iterable[EdgeObservation], dials: Settings, failed: Iterable[UUID] = ()
) -> list[UUID]:
    """Under the lift rule, the concepts (entries) this session reports struggles on, and under
    the units rule those it failed a turn on (`failed`: their `invented` term moved): every
    prerequisite out of them (their chance changed) or into them is re-weighed."""
    if not lift_selected(dials):
        return []
    reported = {o.source_entry_id for o in observed if o.edge_type == "prerequisite"}
    return sorted(reported | set(failed), key=str)


# Units are sums of session shares (thirds, quarters) kept by triggers in whatever order
# reports arrive, so 1 + 1/3 + 1 + 2/3 may read 2.9999999999999996: a comparison of such a
# sum with a dial takes this slack, far below any share a session can hold (numerics, not a
# threshold of the model).
SUM_SLACK = 1e-9


@dataclass(frozen=True)
class PrerequisiteEvidence:
    """What the lift rule reads of one prerequisite around a reported concept."""

    edge_id: UUID
    source_type: str
    confidence: float
    hit_count: int
    concept_reports: int
    n_concepts: int
    support_hits: int
    reverse_hits: int | None
    reverse_source_type: str | None
    reverse_confidence: float | None
    # the confidence an authored edge held before negative evidence lowered it (None: not lowered)
    unlearned_from: float | None = None
    # the source concept's reports, live and culled, and of those its reversals, in sessions
    # (the lift rule's)
    reversal_reports: tuple[int, int] = (0, 0)
    # the same evidence in units (the units rule, `unit_terms`; hag_edge_evidence): the edge's
    # units and distinct learners, its concept's units over its live prerequisites (an
    # enriched edge's sessions no learner is recorded for left out: its author's write) and
    # distinct learners, the units supporting it, the concept's units over its live and
    # culled prerequisites, and the reverse edge's units (None: no reverse edge) and distinct
    # learners
    units: float = 0.0
    learners: int = 0
    concept_units: float = 0.0
    concept_learners: int = 0
    support_units: float = 0.0
    reported_units: float = 0.0
    reverse_units: float | None = None
    reverse_learners: int | None = None
    # the source concept's units over its live, culled and withdrawn reports (`reported_units`)
    # and of those its reversals' (`reversal_share`): one learner's reversal repeated in many
    # sessions adds at most its cap
    reversal_units: tuple[float, float] = (0.0, 0.0)
    # an authored or enriched edge's prior: the confidence it was written with by its author,
    # never moved by a re-weigh (migration 211; None: learned, or written with no trigger)
    prior: float | None = None
    # the edge's sessions no learner is recorded for (its hit count beyond its reported
    # sessions: a memory from before migration 091, an edge restored from the audit); they
    # count a unit each, but they may all be one learner's, and that learner may be one of
    # those recorded: they make `learners` 1 when none is recorded and add none to those
    # recorded (hag_edge_evidence)
    unattributed: int = 0
    # the `invented` term's counts (migration 215, `invented_reports`): the sessions that
    # failed a turn on the edge's concept, of them those whose learner had shown its target,
    # and of those the ones whose struggles named the edge anyway
    failed_sessions: int = 0
    shown_sessions: int = 0
    shown_named: int = 0
    # its pair's reports withdrawn because their learner next succeeded on its concept
    # before showing its target (migration 223, whatever edge the pair has or had): out of
    # every count above; their sessions, and their units (the shares they held, within each
    # learner's cap), which an authored edge's own evidence counts
    withdrawn: int = 0
    withdrawn_units: float = 0.0
    # the edge's concepts (None where a caller built the evidence without them)
    source_entry_id: UUID | None = None
    target_entry_id: UUID | None = None

    def __post_init__(self) -> None:
        if self.reverse_units is not None and self.reverse_learners is None:
            raise ValueError("a reverse edge's units need its learners (counted_reverse)")

    @property
    def reports_with_culled(self) -> int:
        """The source concept's reports over its prerequisites, live and culled (the audit
        keeps a culled edge's reports): what negative evidence judges an authored edge by."""
        return max(self.concept_reports, self.reversal_reports[0])


def evidence_state(fact: PrerequisiteEvidence, dials: Settings) -> tuple[float, float | None]:
    """A prerequisite's confidence from the struggle evidence and the value negative evidence
    keeps beside it (`unlearned_from`): under the units rule `unit_terms`; under the lift rule
    `lift_confidence` for a learned edge (the reverse edge's evidence against it) and
    `undoable_unlearning` for an authored or enriched one, over session counts."""
    if units_selected(dials):
        terms = unit_terms(fact, dials)
        return terms.confidence, terms.unlearned_from
    if fact.source_type != "learned":
        return undoable_unlearning(
            fact.confidence,
            fact.unlearned_from,
            fact.hit_count,
            fact.reports_with_culled,
            fact.n_concepts,
            dials,
            fact.support_hits,
        )
    against = reverse_evidence(
        fact.reverse_hits, fact.reverse_source_type, fact.reverse_confidence, dials
    )
    confidence = lift_confidence(
        fact.hit_count,
        fact.concept_reports,
        fact.n_concepts,
        dials,
        against,
        reversal_share(*fact.reversal_reports, dials),
    )
    return confidence, fact.unlearned_from


# --- the lift rule (issue 14; selected by dials, the seed's rules stay the default) ------


def chance_reports(
    hits: float, concept_reports: float, n_concepts: int, spread: float = 0.0
) -> float:
    """Reports of an edge c -> m expected by chance: c's other struggle reports spread evenly
    over the concepts they could have named (the topic's concepts other than c and m, unless
    `spread` gives that number)."""
    others = max(0, concept_reports - hits)
    over = spread if spread > 0 else max(1, n_concepts - 2)
    return others / over


def scaled_chance(
    hits: float, concept_reports: float, n_concepts: int, noise_share: float, dials: Settings
) -> float:
    """`chance_reports` over `prerequisite_lift_chance_spread` concepts, scaled by 1 +
    `prerequisite_lift_noise_weight` x `noise_share` (the concept's reversal share)."""
    chance = chance_reports(
        hits, concept_reports, n_concepts, dials.prerequisite_lift_chance_spread
    )
    return chance * (1.0 + dials.prerequisite_lift_noise_weight * noise_share)


def lift_confidence(
    hits: float,
    concept_reports: float,
    n_concepts: int,
    dials: Settings,
    reverse_evidence: float = 0.0,
    noise_share: float = 0.0,
) -> float:
    """A learned prerequisite's confidence from evidence: h'/(h' + k), h' = hits net of chance.

    Uncontested (every report on c names m, nothing says m needs c) it is the seed's ladder:
    1/3, 1/2, 3/5 at 1, 2, 3 reports with k = 2. The evidence for the reverse direction m -> c
    counts against it: prerequisites form a DAG, so at most one direction is true
    (`reverse_evidence`, see `reverse_evidence`). The chance is scaled by 1 +
    `prerequisite_lift_noise_weight` x `noise_share` (c's reversal share, `reversal_share`):
    a concept whose reports visibly name the wrong way needs more of them.
    Kept within the edge floor and ceiling.
    """
    chance = scaled_chance(hits, concept_reports, n_concepts, noise_share, dials)
    net = max(0.0, hits - chance - reverse_evidence)
    k = dials.prerequisite_lift_k
    return edge_bounds(net / (net + k), dials)


def reversal_share(reports: float, reversals: float, dials: Settings) -> float:
    """The share of a concept c's struggle reports that name a concept the memory holds to
    build on c (an x with x -> c at `prerequisite_lift_noise_held_min` or more): reports no
    learner's gap explains, so a measure of how noisy the extractor is on c. Shrunk toward
    `prerequisite_lift_noise_prior` as if from `prerequisite_lift_noise_prior_reports`
    reports, so a concept with few reports is not judged by one of them."""
    prior = dials.prerequisite_lift_noise_prior
    weight = dials.prerequisite_lift_noise_prior_reports
    if reports + weight <= 0:
        return prior
    return (reversals + prior * weight) / (reports + weight)


def reverse_evidence(
    hits: float | None, source_type: str | None, confidence: float | None, dials: Settings
) -> float:
    """The evidence for the reverse edge m -> c, in reports: its own reports, or for an
    authored or enriched edge the reports its confidence stands for on the lift ladder
    (c = h/(h + k) gives h = k c/(1 - c)), whichever is larger. No reverse edge: 0."""
    if hits is None:
        return 0.0
    if source_type == "learned" or confidence is None:
        return float(hits)
    k = dials.prerequisite_lift_k
    stands_for = k * confidence / (1.0 - confidence) if confidence < 1.0 else math.inf
    return max(float(hits), stands_for)


def unlearned_confidence(
    confidence: float,
    hits: int,
    concept_reports: int,
    n_concepts: int,
    dials: Settings,
    support: int = 0,
) -> float:
    """Negative evidence on an authored (or enriched) prerequisite c -> m.

    A learner missing m mostly misses what builds on m too, and the extractor names one of
    them: so the reports on c that *support* c -> m are those naming m (`hits`) or naming a
    concept x with a walked prerequisite x -> m (`support`), unless the memory holds x to
    build on c (a walked x -> c: naming it is the extractor's reversal). Once c has at least
    `prerequisite_unlearn_min_reports` struggle reports and at most
    `prerequisite_unlearn_max_share` of them support m, the edge falls to what its own
    reports would have earned a learned edge (never raised by this rule). Otherwise unchanged.
    The reports and the support are counted over c's live and culled prerequisites
    (`PrerequisiteEvidence.reports_with_culled`; the audit keeps a culled edge's reports).
    """
    min_reports = dials.prerequisite_unlearn_min_reports
    if min_reports <= 0 or concept_reports < min_reports:
        return confidence
    if hits + support > dials.prerequisite_unlearn_max_share * concept_reports:
        return confidence
    earned = lift_confidence(hits, concept_reports, n_concepts, dials)
    return min(confidence, earned)


def undoable_unlearning(
    confidence: float,
    unlearned_from: float | None,
    hits: int,
    concept_reports: int,
    n_concepts: int,
    dials: Settings,
    support: int = 0,
) -> tuple[float, float | None]:
    """Negative evidence read afresh from the current counts: (confidence, unlearned_from).

    The edge's own value is the one it held before negative evidence lowered it
    (`unlearned_from`), or its confidence if that is higher now (the seed's reinforcement may
    have raised it since) or if it was never lowered. While `unlearned_confidence` judges the
    edge unsupported, it sits at what its reports earn and keeps its own value beside it;
    once supported again (or never judged), it gets its own value back. So a true authored
    prerequisite lowered by a run of early reports naming other gaps is restored by the
    reports that name it later, and the verdict depends on the counts, not on their order.
    """
    own = confidence if unlearned_from is None else max(confidence, unlearned_from)
    lowered = unlearned_confidence(own, hits, concept_reports, n_concepts, dials, support)
    if lowered < own:
        return lowered, own
    return own, None


def invented_reports(failed: int, shown: int, named: int, shown_dropped: bool = True) -> float:
    """The sessions expected to name c -> m by the extractor's invention alone: the failed
    sessions on c whose reports count as evidence, times the share of the sessions whose
    learner had shown m that named it anyway (0 before any such learner failed on c). The
    sessions whose learner had shown m are left out of the first count when their reports are
    (`shown_dropped`, `prerequisite_drop_shown`), and counted when they are kept.

    A learner who has shown m is not missing it, so every report of c -> m among them is
    invented; an invention does not depend on whether the learner knows m, so the same rate
    applies to the others. The term is the pair's own record, with no dial: an extractor
    that repeats one misreading, or a learner's misconception, raises it for that pair alone.
    """
    if shown <= 0:
        return 0.0
    return max(0, failed - (shown if shown_dropped else 0)) * named / shown


def edge_bounds(x: float, dials: Settings) -> float:
    """Within the edge floor and ceiling."""
    return min(dials.edge_confidence_ceiling, max(dials.edge_confidence_floor, x))


# --- the units rule (issue 29): one model, its terms printed by `hag explain` ---------------


@dataclass(frozen=True)
class EvidenceTerms:
    """The terms of one prerequisite's confidence under the units rule, as `hag explain`
    prints them; `confidence` is what the re-weigh stores.

    Learned: `lift` = net/(net + k), net = max(0, units - max(chance, invented) - reverse),
    chance = the concept's other units spread over `spread` concepts and scaled by 1 + noise
    weight x `noise_share`, invented = the reports the pair's own record says the extractor
    invents (`invented_reports`); fewer than `min_learners` distinct learners hold it at `hold` =
    edge_min_confidence x learners / min_learners; then the edge floor and ceiling.
    Authored or enriched: `prior` (the confidence its author wrote it with,
    `PrerequisiteEvidence.prior`: no stored lowering state is read); `judged` when its concept has `min_reports` units from `min_learners` learners
    and the units naming its target or a concept resting on it (`support`) are at most
    max_share of them: then it sits at min(prior, lift of its own units), else at `prior`,
    or for an enriched edge (a model's proposal) at the larger of `prior` and `raised`
    (`confirmed_terms`: its recorded learners' reports read as a learned edge's,
    `as_learned`; None, and the prior stands, below `min_learners` learners or with
    nothing net). An authored edge's units, its concept's and its support
    count the reports withdrawn as contradicted forward in time too (the shares they
    held, within each learner's cap): negative evidence asks whether the extractor ever names the target on its
    concept's failures.
    """

    source_type: str
    units: float
    learners: int
    concept_units: float
    concept_learners: int
    chance: float
    noise_share: float
    reverse: float
    support: float
    prior: float | None
    k: float
    net: float
    lift: float
    min_learners: int
    hold: float | None
    judged: bool
    confidence: float
    unlearned_from: float | None
    # the edge's sessions no learner is recorded for, one of `learners` only when none is
    # recorded (`PrerequisiteEvidence.unattributed`)
    unattributed: int = 0
    # a learned edge's reports expected from the extractor's invention (`invented_reports`),
    # from its concept's failed sessions, those by learners who had shown its target, and of
    # those the ones that named it
    invented: float = 0.0
    failed_sessions: int = 0
    shown_sessions: int = 0
    shown_named: int = 0
    # its pair's reports contradicted forward in time, withdrawn or never recorded (out of
    # a learned edge's `units`; in an authored edge's as `withdrawn_units`: the shares
    # they held, within each learner's cap)
    withdrawn: int = 0
    withdrawn_units: float = 0.0
    # an enriched edge's recorded learners' reports under the learned formula
    # (`confirmed_terms`), and the confidence they give it (None: not enriched, or none)
    as_learned: EvidenceTerms | None = None
    raised: float | None = None
    # a learned edge's reverse edge's distinct learners: its units count in `reverse` only
    # from `min_learners` of them (`counted_reverse`)
    reverse_learners: int = 0


def unit_terms(fact: PrerequisiteEvidence, dials: Settings) -> EvidenceTerms:
    """A prerequisite's confidence under the units rule, with every term of the formula.

    Evidence is counted in units: a session gives a pair its share of one unit about the
    struggled concept (`session_shares`), a learner's shares for a pair are capped at
    `prerequisite_learner_cap` (hag_edge_evidence), so neither a session repeating a pair nor
    a learner repeating it in many sessions outweighs other learners. A learned pair reported
    by fewer than `prerequisite_min_learners` (at least 2) learners stays below the walk floor,
    and negative evidence needs a concept reported on by as many learners: one learner, or
    one session, never lifts a shared prerequisite to the floor or lowers an authored one.
    """
    k = dials.prerequisite_lift_k
    min_learners = dials.prerequisite_min_learners
    noise = reversal_share(*fact.reversal_units, dials)
    if fact.source_type == "learned":
        chance = scaled_chance(fact.units, fact.concept_units, fact.n_concepts, noise, dials)
        reverse = reverse_evidence(
            None
            if fact.reverse_units is None
            else counted_reverse(fact.reverse_units, fact.reverse_learners or 0, dials),
            fact.reverse_source_type,
            fact.reverse_confidence,
            dials,
        )
        invented = invented_reports(
            fact.failed_sessions, fact.shown_sessions, fact.shown_named, drops_shown(dials)
        )
        net = max(0.0, fact.units - max(chance, invented) - reverse)
        lift = net / (net + k)
        hold = (
            dials.edge_min_confidence * fact.learners / min_learners
            if fact.learners < min_learners
            else None
        )
        confidence = edge_bounds(lift if hold is None else min(lift, hold), dials)
        return EvidenceTerms(
            fact.source_type, fact.units, fact.learners, fact.concept_units,
            fact.concept_learners, chance, noise, reverse, 0.0, None, k, net, lift,
            min_learners, hold, False, confidence, None, fact.unattributed, invented,
            fact.failed_sessions, fact.shown_sessions, fact.shown_named, fact.withdrawn,
            reverse_learners=fact.reverse_learners or 0,
        )  # fmt: skip
    prior = fact.confidence if fact.prior is None else fact.prior
    # an enriched edge's sessions no learner is recorded for are its author's own write (or
    # reports from before learners were recorded), already in its prior: no learner named
    # its target there (its concept's units leave them out as read, `confirmed_terms` alike)
    written = session_units(fact.unattributed, dials) if fact.source_type == "enriched" else 0.0
    reports = max(fact.concept_units, fact.reported_units)
    # its own reports withdrawn as contradicted still say the extractor named its target (the
    # shares they held, within each learner's cap, as `reported_units` counts them)
    own = max(0.0, fact.units - written) + fact.withdrawn_units
    chance = scaled_chance(own, reports, fact.n_concepts, noise, dials)
    net = max(0.0, own - chance)
    lift = edge_bounds(net / (net + k), dials)
    min_reports = dials.prerequisite_unlearn_min_reports
    judged = (
        min_reports > 0
        and reports + SUM_SLACK >= min_reports
        and fact.concept_learners >= min_learners
        and own + fact.support_units <= dials.prerequisite_unlearn_max_share * reports + SUM_SLACK
    )
    as_learned = confirmed_terms(fact, dials) if fact.source_type == "enriched" else None
    raised = None if as_learned is None or as_learned.net <= 0 else as_learned.confidence
    lowered = min(prior, lift) if judged else max(prior, raised or 0.0)
    return EvidenceTerms(
        fact.source_type, own, fact.learners, reports, fact.concept_learners, chance,
        noise, 0.0, fact.support_units, prior, k, net, lift, min_learners, None, judged,
        lowered, prior if lowered < prior else None, fact.unattributed,
        withdrawn=fact.withdrawn, withdrawn_units=fact.withdrawn_units,
        as_learned=as_learned, raised=raised,
    )  # fmt: skip


def counted_reverse(units: float, learners: int, dials: Settings) -> float:
    """The units of a reverse edge, reported or made by `learners` distinct learners, that
    count against a learned edge the other way (a learned prerequisite m -> c's reports
    against c -> m; the moves B -> A, along a line of any provenance, against a `leads_to`
    or `fallback` A -> B): all of them once `prerequisite_min_learners` learners stand behind
    it, none from fewer. The bound that keeps one learner from lifting a shared edge to the
    walk floor keeps one learner, by naming or making the pair the other way, from holding it
    down: an extractor's reversal repeated through one learner's sessions is the expected
    case."""
    return units if reverse_counts(learners, dials.prerequisite_min_learners) else 0.0


def reverse_counts(learners: int, min_learners: int) -> bool:
    """Whether a reverse edge's units, reported or made by `learners` distinct learners,
    count against the learned edge the other way (`counted_reverse`; `hag explain` says so
    from the terms)."""
    return learners >= min_learners


def session_units(sessions: int, dials: Settings) -> float:
    """Sessions counted a unit each, within one learner's cap: what a session no learner is
    recorded for weighs (as `hag_edge_evidence` counts it)."""
    return min(1.0, dials.prerequisite_learner_cap) * sessions


def confirmed_terms(fact: PrerequisiteEvidence, dials: Settings) -> EvidenceTerms | None:
    """An enriched prerequisite's reports from recorded learners, read as a learned edge's
    (`unit_terms`: chance, invented, reverse): what they would have built. An authored value
    is its author's statement and negative evidence alone moves it; a model's proposal is
    written below authored ones (`enrichment_confidence`) for learners to confirm. Its sessions
    no learner is recorded for are the author's own writes (an enriched edge is written with a
    hit) or reports from before learners were recorded, already in its prior: they leave its
    units here, and its concept's as read (`concept_units`). None below
    `prerequisite_min_learners` recorded learners, so one learner never lifts it, whatever its
    prior."""
    unattributed = session_units(fact.unattributed, dials)
    units = max(0.0, fact.units - unattributed)
    learners = fact.learners if units > 0 else 0
    if learners < dials.prerequisite_min_learners:
        return None
    return unit_terms(
        replace(
            fact,
            source_type="learned",
            units=units,
            learners=learners,
            concept_units=max(units, fact.concept_units),
            unattributed=0,
            prior=None,
        ),
        dials,
    )


def authored_verdict(t: Mapping[str, Any], dials: Settings) -> str:
    """Why negative evidence judged an authored prerequisite, or which condition of
    `unit_terms`'s `judged` is not met, from its terms (`EvidenceTerms` as a dict; `hag
    explain` prints it)."""
    if t["judged"]:
        return "judged unsupported"
    needed, share = dials.prerequisite_unlearn_min_reports, dials.prerequisite_unlearn_max_share
    if needed <= 0:
        return "not judged (prerequisite_unlearn_min_reports is 0: never)"
    if t["concept_units"] + SUM_SLACK < needed or t["concept_learners"] < t["min_learners"]:
        return f"not judged (its concept needs {needed} units from {t['min_learners']} learners)"
    return (
        f"not judged (its own and supporting units {t['units'] + t['support']:.4f} are above "
        f"{share:g} of its concept's)"
    )
