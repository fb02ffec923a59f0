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
