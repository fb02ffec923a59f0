"""The confidence rules of session-end processing, as plain functions (SPEC §4, seed).

These are the rules; the SQL in `sql/queries/session.sql` applies them set-based. Within
one session an edge or entry may be graded by several turns, in turn order, and the clamped
edge step and the saturating entry step do not commute; instead of one statement per turn,
the turn-by-turn steps of each row are composed here into one function of the same shape
(a clamped shift for edges, an affine map for entries) and applied in one statement. The
tests check that the composition equals the turn-by-turn application.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SUCCESS, FAILURE = "success", "failure"


# Edge reinforcement (seed) is set-based SQL: sql/queries/edges.sql `upsert_edges`, bound in
# hag/edges.py. It is not copied here, so there is one rule to keep right.


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


def edge_step(outcome: str | None, dials: Mapping[str, Any]) -> ClampedShift:
    """One turn's grading of an edge whose line reached the prompt.

    success: min(1.0, c + 0.05); failure: max(0.05, c - 0.05); no outcome: unchanged.
    """
    if outcome == SUCCESS:
        return ClampedShift(
            float(dials["edge_grade_step_success"]), None, float(dials["edge_confidence_ceiling"])
        )
    if outcome == FAILURE:
        return ClampedShift(
            -float(dials["edge_grade_step_failure"]), float(dials["edge_confidence_floor"]), None
        )
    return IDENTITY_SHIFT


def grade_edge(confidence: float, outcome: str | None, dials: Mapping[str, Any]) -> float:
    """An edge's confidence after one turn's outcome."""
    return edge_step(outcome, dials)(confidence)


def edge_grading(outcomes: Iterable[str | None], dials: Mapping[str, Any]) -> ClampedShift:
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


def learning_rate(maturity: str, dials: Mapping[str, Any]) -> float:
    """0.10 for proven entries (they move at half speed), 0.20 otherwise."""
    key = "entry_learning_rate_proven" if maturity == "proven" else "entry_learning_rate_default"
    return float(dials[key])


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
    confidence: float, outcome: str | None, strength: float, maturity: str, dials: Mapping[str, Any]
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


def initial_entry_confidence(quality: float, dials: Mapping[str, Any]) -> float:
    """A new entry's confidence: the base, scaled by its ladder step's quality."""
    return float(dials["observation_base_confidence"]) * quality


# --- the evidence rules (issue 14; selected by dials, the seed's rules stay the default) --------


def chance_reports(hits: int, concept_reports: int, n_concepts: int, spread: float = 0.0) -> float:
    """Reports of an edge c -> m expected by chance: c's other struggle reports spread evenly
    over the concepts they could have named (the topic's concepts other than c and m, unless
    `spread` gives that number)."""
    others = max(0, concept_reports - hits)
    over = spread if spread > 0 else max(1, n_concepts - 2)
    return others / over


def lift_confidence(
    hits: int,
    concept_reports: int,
    n_concepts: int,
    dials: Mapping[str, Any],
    reverse_evidence: float = 0.0,
    transitive_reports: float = 0.0,
) -> float:
    """A learned prerequisite's confidence from evidence: h'/(h' + k), h' = hits net of chance.

    Uncontested (every report on c names m, nothing says m needs c) it is the seed's ladder:
    1/3, 1/2, 3/5 at 1, 2, 3 reports with k = 2. With `prerequisite_lift_reverse` on, the
    evidence for the reverse direction m -> c also counts against it: prerequisites form a
    DAG, so at most one direction is true (`reverse_evidence`, see `reverse_evidence`). With
    `prerequisite_lift_transitive` on, so do the reports a walked path through another
    prerequisite explains (`transitive_reports`, see `transitive_chance`).
    Kept within the edge floor and ceiling.
    """
    chance = chance_reports(
        hits, concept_reports, n_concepts, float(dials["prerequisite_lift_chance_spread"])
    )
    against = reverse_evidence if dials["prerequisite_lift_reverse"] else 0.0
    if dials["prerequisite_lift_transitive"]:
        against += transitive_reports
    net = max(0.0, hits - chance - against)
    k = float(dials["prerequisite_lift_k"])
    return _edge_bounds(net / (net + k), dials)


def transitive_chance(paths: Iterable[tuple[int, int, int]]) -> float:
    """Reports of c -> x that a path c -> m -> x explains, the largest over the paths.

    Each path is (reports of c -> m, reports of m -> x, all reports on m). A learner missing
    x mostly misses m, which rests on it, as well; a struggle on c is then about m, and an
    extractor that names x instead names a concept further down the learner's gap. So of
    c -> m's reports, the share of m's own reports that name x is expected on c -> x without
    x being a direct prerequisite of c: h(c -> m) h(m -> x) / R(m). A true direct
    prerequisite that is also reachable through m keeps the reports beyond that.
    """
    return max(
        (float(via) * float(onward) / float(reports) for via, onward, reports in paths if reports),
        default=0.0,
    )


def reverse_evidence(
    hits: int | None, source_type: str | None, confidence: float | None, dials: Mapping[str, Any]
) -> float:
    """The evidence for the reverse edge m -> c, in reports: its own reports, or for an
    authored or enriched edge the reports its confidence stands for on the lift ladder
    (c = h/(h + k) gives h = k c/(1 - c)), whichever is larger. No reverse edge: 0."""
    if hits is None:
        return 0.0
    if source_type == "learned" or confidence is None:
        return float(hits)
    k = float(dials["prerequisite_lift_k"])
    stands_for = k * confidence / (1.0 - confidence) if confidence < 1.0 else math.inf
    return max(float(hits), stands_for)


def unlearned_confidence(
    confidence: float,
    hits: int,
    concept_reports: int,
    n_concepts: int,
    dials: Mapping[str, Any],
    support: int = 0,
) -> float:
    """Negative evidence on an authored (or enriched) prerequisite c -> m.

    A learner missing m mostly misses what builds on m too, and the extractor names one of
    them: so the reports on c that *support* c -> m are those naming m (`hits`) or naming a
    concept x with a walked prerequisite x -> m (`support`). Once c has at least
    `prerequisite_unlearn_min_reports` struggle reports and at most
    `prerequisite_unlearn_max_share` of them support m, the edge falls to what its own
    reports would have earned a learned edge (never raised by this rule). Otherwise unchanged.
    """
    min_reports = int(dials["prerequisite_unlearn_min_reports"])
    if min_reports <= 0 or concept_reports < min_reports:
        return confidence
    if hits + support > float(dials["prerequisite_unlearn_max_share"]) * concept_reports:
        return confidence
    earned = lift_confidence(hits, concept_reports, n_concepts, {**dials, **_NO_REVERSE})
    return min(confidence, earned)


_NO_REVERSE = {"prerequisite_lift_reverse": False}


def smoothed_success_rate(successes: int, failures: int, dials: Mapping[str, Any]) -> float:
    """A concept's success rate with `edge_grade_baseline_prior_weight` pseudo-turns at the prior."""
    w = float(dials["edge_grade_baseline_prior_weight"])
    p0 = float(dials["edge_grade_baseline_prior"])
    n = successes + failures + w
    return (successes + w * p0) / n if n > 0 else p0


def baseline_edge_step(
    outcome: str | None, baseline: float, renderings: int, dials: Mapping[str, Any]
) -> ClampedShift:
    """One turn's baseline grading: 2 step (outcome - baseline) n0/(n0 + renderings).

    The outcome counts 1 for success and 0 for failure; the edge moves only by how much
    better or worse the turn went than its concept usually goes, and less the more often it
    has already been graded (without the shrinking step it is a random walk).
    """
    if outcome not in (SUCCESS, FAILURE):
        return IDENTITY_SHIFT
    n0 = float(dials["edge_grade_baseline_n0"])
    shrink = n0 / (n0 + max(0, renderings))
    if outcome == SUCCESS:
        delta = 2 * float(dials["edge_grade_step_success"]) * (1.0 - baseline) * shrink
        return ClampedShift(delta, None, float(dials["edge_confidence_ceiling"]))
    delta = -2 * float(dials["edge_grade_step_failure"]) * baseline * shrink
    return ClampedShift(delta, float(dials["edge_confidence_floor"]), None)


def baseline_edge_grading(
    outcomes: Iterable[str | None], baseline: float, renderings: int, dials: Mapping[str, Any]
) -> ClampedShift:
    """The baseline grading of one edge over a session's turns, as one clamped shift; every
    turn that rendered it counts as a rendering for the turns after it."""
    composed = IDENTITY_SHIFT
    for i, outcome in enumerate(outcomes):
        composed = composed.then(baseline_edge_step(outcome, baseline, renderings + i, dials))
    return composed


def outcome_graded(edge_type: str, dials: Mapping[str, Any]) -> bool:
    """Under the lift rule prerequisites are set by struggle evidence, never by outcomes."""
    return not (edge_type == "prerequisite" and dials["prerequisite_confidence_rule"] == "lift")


def _edge_bounds(x: float, dials: Mapping[str, Any]) -> float:
    return min(
        float(dials["edge_confidence_ceiling"]), max(float(dials["edge_confidence_floor"]), x)
    )
