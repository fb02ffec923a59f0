"""Simulated learners: who knows what, how a turn turns out, and what each one is like.

A learner's state is the set of concepts they have mastered. A turn that teaches concept c
succeeds with probability `p_ready` when every true prerequisite of c is mastered and
`p_unready` otherwise; an unready turn does better (`bridge_bonus`) when the prompt's
decision tree named one of the missing prerequisites (the tutor bridges the gap), and any
turn a little better when the prompt carried the learner's real trait. A success masters c
with probability `p_learn`. Nothing here knows about the
memory: the tutor loop hands these functions concepts and gets outcomes back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from hag_lab.simulate.world import World


@dataclass(frozen=True)
class Trait:
    """A hidden way a learner learns, which the extractor may report as a student pattern."""

    slug: str
    name: str  # as the extractor says it
    phrasings: tuple[str, ...]


TRAITS: tuple[Trait, ...] = (
    Trait(
        "prefers-diagrams",
        "prefers diagrams",
        (
            "Understands faster from a diagram of who holds which key than from prose; sketch it first.",
            "Asked twice for a picture; once the boxes-and-arrows sketch appeared the idea landed.",
        ),
    ),
    Trait(
        "needs-worked-examples",
        "needs worked examples",
        (
            "Needs one fully worked example with small numbers before any general rule makes sense.",
            "Stalled on the definition, then got it immediately from a worked example with tiny numbers.",
        ),
    ),
    Trait(
        "rushes-ahead",
        "rushes ahead",
        (
            "Skips to the next idea before the current one is solid; slow down and check each step.",
            "Jumped ahead twice before finishing the exercise; ask for a recap before moving on.",
        ),
    ),
    Trait(
        "wants-real-world-uses",
        "wants real-world uses",
        (
            "Engages once shown where the idea is used in practice, such as HTTPS or password storage.",
            "Perked up when the example was a real website; open with a real use before theory.",
        ),
    ),
    Trait(
        "anxious-about-math",
        "anxious about math",
        (
            "Freezes at formulas; introduce the idea in words and pictures before any notation.",
            "Said 'I'm bad at maths' at the first exponent; words before symbols works better.",
        ),
    ),
    Trait(
        "learns-by-breaking",
        "learns by breaking things",
        (
            "Learns best by attacking a weak scheme first; give something to break before the fix.",
            "Most engaged while trying to crack a toy cipher; lead with an attack, then the defence.",
        ),
    ),
)


@dataclass(frozen=True)
class OutcomeModel:
    """The world's physics: how likely a turn succeeds and how likely success teaches."""

    p_ready: float = 0.85
    p_unready: float = 0.15
    p_learn: float = 0.7
    trait_bonus: float = 0.05
    bridge_bonus: float = 0.25  # unready, but the prompt's edge lines name a missing prerequisite
    p_root_mastered: float = 0.4  # a new learner already knows a concept with no prerequisites
    p_inner_mastered: float = 0.1  # ...or one whose prerequisites they know
    p_overreach: float = (
        0.3  # a session's goal ignores readiness (else: a concept they are ready for)
    )

    def success_probability(
        self,
        learner: Learner,
        concept: str,
        world: World,
        trait_in_prompt: bool = False,
        shown: Iterable[str] = (),
    ) -> float:
        """`shown`: concepts the prompt's prerequisite/fallback lines (from the entry acted on)
        point at; a line naming a missing prerequisite lets the tutor bridge the gap in-turn."""
        missing = learner.missing_prerequisites(concept, world)
        p = self.p_ready if not missing else self.p_unready
        if missing and set(missing) & set(shown):
            p += self.bridge_bonus
        if trait_in_prompt:
            p += self.trait_bonus
        return min(1.0, p)


@dataclass
class Learner:
    learner_id: str
    trait: Trait
    mastered: set[str] = field(default_factory=set)
    # (concept, wrong concept): named as missing on every failed turn on that concept
    misconception: tuple[str, str] | None = None

    def missing_prerequisites(self, concept: str, world: World) -> tuple[str, ...]:
        """True prerequisites of `concept` this learner has not mastered (sorted)."""
        return tuple(p for p in world.prerequisites_of(concept) if p not in self.mastered)

    def level(self, world: World) -> str:
        share = len(self.mastered) / max(1, len(world.concepts))
        return "beginner" if share < 0.34 else "intermediate" if share < 0.67 else "advanced"

    def pick_goal(self, world: World, rng: np.random.Generator, p_overreach: float = 0.3) -> str:
        """A concept to work on: usually one the learner is ready for (every prerequisite
        mastered); with probability `p_overreach`, any unmastered one; all mastered: any."""
        open_ = [s for s in world.slugs if s not in self.mastered] or list(world.slugs)
        ready = [s for s in open_ if not self.missing_prerequisites(s, world)]
        overreach = rng.random() < p_overreach  # drawn every time: a stable stream
        pool = open_ if overreach or not ready else ready
        return pool[int(rng.integers(len(pool)))]


def make_learners(
    world: World, n: int, rng: np.random.Generator, model: OutcomeModel, prefix: str = "sim"
) -> list[Learner]:
    """`n` learners with a trait each and an initial mastery drawn prerequisites-first."""
    depth = world.depth()
    order = sorted(world.slugs, key=lambda s: (depth[s], s))
    learners = []
    for i in range(n):
        trait = TRAITS[int(rng.integers(len(TRAITS)))]
        mastered: set[str] = set()
        for slug in order:
            prereqs = world.prerequisites_of(slug)
            if not prereqs:
                p = model.p_root_mastered
            elif all(q in mastered for q in prereqs):
                p = model.p_inner_mastered
            else:
                p = 0.0
            # draw for every concept, even at p = 0, so the stream does not depend on history
            if rng.random() < p:
                mastered.add(slug)
        learners.append(Learner(f"{prefix}-{i:04d}", trait, mastered))
    return learners
