"""The simulated tutor: one session of turns, each one read from the memory through `retrieve`.

Every turn the tutor calls the project's own `hag.retrieval.retrieve` (a read; it writes
nothing) with the concept it means to teach as focus and expected concept, acts on the
best-ranked topic advisory for that concept (normally the top one, which the concept bonus
puts first; its id is the turn's `decision_entry_id`; with none, it teaches without memory
and reports no decision), and walks the edges the memory rendered: after a failure it
retreats along the decision entry's first rendered `prerequisite` or `fallback` edge, after
a finished goal it follows a rendered `leads_to`. The learner model decides the outcome, the
noisy extractor decides which struggles get reported, and the whole turn is written down in
the ingest contract (SPEC §2). The tutor also keeps, for the report, the confidence of every
entry and edge it was shown next to the outcome that followed (calibration at time of use).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from hag import settings
from hag_lab.simulate.learners import Learner, OutcomeModel
from hag_lab.simulate.world import World

Retrieve = Callable[..., Any]

MESSAGES = (
    "How does {title} work?",
    "I'm working on {title} and I'm not sure I get it.",
    "Can you explain {title} again, slowly?",
    "What is the point of {title}?",
    "Could we do an exercise on {title}?",
)
TRUE_EVIDENCE = (
    "I don't really know what {missing} is, so I'm lost here.",
    "Wait, this needs {missing}? I never understood {missing}.",
    "I can't follow the {concept} step because I don't get {missing}.",
)
FALSE_EVIDENCE = (
    "Is this like {missing}? I'm not sure about {missing}.",
    "Hmm, {missing} always confused me too.",
)
# A learner's persistent misconception, in their words (every failed turn on its concept).
MISCONCEPTION_EVIDENCE = (
    "This only works if you get {missing} first, and I never did.",
    "I'm stuck on {concept} again, it's the {missing} part I don't get.",
)
# Things learners bring up that the catalogue does not have: drift for the ladder to mint,
# and orphans for enrichment to wire in (crypto only; other worlds have none).
CRYPTO_DRIFT = (
    (
        "quantum key distribution",
        "Learner asked whether quantum key distribution makes the "
        "one-time pad practical; photons carry the key and eavesdropping disturbs them.",
    ),
    (
        "side-channel attacks",
        "Learner asked how timing and power measurements can leak a key "
        "even when the cipher itself is sound.",
    ),
    (
        "zero-knowledge proofs",
        "Learner wanted to know how you can prove you know a password "
        "without revealing anything about it.",
    ),
    ("HMAC", "Learner noticed HMAC hashes the key twice and asked why a single hash is unsafe."),
)
TUTOR_MOVES = (
    (
        "predict-then-check",
        "Asking the learner to predict the output before computing it "
        "surfaced the misconception immediately.",
    ),
    (
        "toy-numbers-first",
        "Working the scheme with tiny numbers first made the general rule "
        "easy to accept afterwards.",
    ),
)


NOISE_KINDS = ("uniform", "structured")


@dataclass(frozen=True)
class Extractor:
    """The session-end extractor's errors: true struggles dropped, false ones invented.

    `kind` says where an invented report points. `uniform`: any concept that is not a direct
    prerequisite of the taught one (easy to subtract: it spreads thin). `structured`: the
    mistakes a real extractor makes, concentrated on a few concepts near the taught one in
    the hidden graph (`Extractor.confusable`): the reversed direction (a concept that builds
    on it), a transitive prerequisite (one further down), or a sibling (a concept sharing a
    prerequisite with it); uniform only when it has none of those.
    """

    p_miss: float = 0.0  # a true struggle goes unreported
    # per failed turn: the failure is (also) blamed on a concept that is not a prerequisite
    p_false: float = 0.0
    kind: str = "uniform"
    # per session: the extractor misreads one pair at the session's first failed turn and
    # reports it again on every later failed turn of that session (`run_session`)
    p_repeat_session: float = 0.0

    def wrong_candidates(self, world: World, taught: str) -> list[str]:
        """The concepts an invented report on `taught` may name, sorted (a stable stream)."""
        direct = set(world.prerequisites_of(taught))
        if self.kind == "structured":
            near = confusable(world, taught) - direct - {taught}
            if near:
                return sorted(near)
        return [s for s in world.slugs if s != taught and s not in direct]


def confusable(world: World, slug: str) -> set[str]:
    """Reversed, transitive and sibling concepts of `slug` in the hidden graph."""
    direct = set(world.prerequisites_of(slug))
    reversed_ = {s for s, t in world.prerequisites if t == slug}
    transitive: set[str] = set()
    frontier = set(direct)
    while frontier:
        below = {p for f in frontier for p in world.prerequisites_of(f)} - transitive
        transitive |= below
        frontier = below
    siblings = {s for s, t in world.prerequisites if t in direct and s != slug}
    return reversed_ | (transitive - direct) | siblings


def give_misconceptions(
    learners: Sequence[Learner],
    world: World,
    share: float,
    extractor: Extractor,
    rng: np.random.Generator,
    *,
    shared: bool = False,
) -> list[Learner]:
    """`round(share * len(learners))` learners, drawn with `rng`, each given one persistent
    misconception: a concept they have not mastered and that rests on something (so they
    can fail there), paired with a concept the extractor could wrongly name for it
    (`Extractor.wrong_candidates`). Nothing is drawn when no learner gets one. `shared`: one
    such pair drawn for the world, held by every chosen learner who has not mastered its
    concept (a misconception a class shares, named by as many learners as a true gap)."""
    count = round(share * len(learners))
    if count == 0:
        return []
    chosen = sorted(int(i) for i in rng.choice(len(learners), size=count, replace=False))
    # concepts one can fail at (they rest on something) and the extractor could misname
    misconceivable = [
        c for c in world.slugs if world.prerequisites_of(c) and extractor.wrong_candidates(world, c)
    ]

    def drawn(open_: list[str]) -> tuple[str, str]:
        concept = _pick(rng, open_)
        return concept, _pick(rng, extractor.wrong_candidates(world, concept))

    common = drawn(misconceivable) if shared and misconceivable else None
    if shared and common is None:
        return []
    given = []
    for i in chosen:
        learner = learners[i]
        open_ = [c for c in misconceivable if c not in learner.mastered]
        if common is not None and common[0] not in learner.mastered:
            learner.misconception = common
        elif common is None and open_:
            learner.misconception = drawn(open_)
        else:
            continue
        given.append(learner)
    return given


@dataclass(frozen=True)
class TutorPolicy:
    min_turns: int = 4
    max_turns: int = 8
    p_notice_struggle: float = 0.5  # with no edge to walk, the tutor spots the missing concept
    # What the tutor's noticing reads: `learner`, the concept the learner lacks (the hidden
    # truth, as a tutor that reads the learner without fault would); `extractor`, a concept the
    # turn's extractor reported missing for the taught concept (so the tutor errs where the
    # extractor errs, and a retreat is no better evidence than the report behind it).
    notices: str = "learner"
    p_student_observation: float = 0.3  # per session
    p_topic_observation: float = 0.05  # per session (only worlds with drift)
    p_tutor_observation: float = 0.03  # per session


@dataclass(frozen=True)
class Use:
    """One thing the tutor was shown in a turn, its confidence then, and the turn's outcome."""

    day: int
    session_id: str
    turn_index: int
    kind: str  # decision | entry | edge
    id: str
    edge_type: str | None
    source_type: str | None
    confidence: float
    success: bool


@dataclass
class SessionRecord:
    payload: dict[str, Any]
    uses: list[Use] = field(default_factory=list)
    true_struggles: list[tuple[str, str]] = field(default_factory=list)  # before the extractor
    # (turn, c, m) for every true prerequisite m a failed turn's learner lacked on c, whichever
    # of its gaps the struggle names (or none): what could have told the memory that c needs m
    lacking: list[tuple[int, str, str]] = field(default_factory=list)
    reported_struggles: list[tuple[str, str, bool]] = field(default_factory=list)  # (c, m, true?)
    # the false reports of the two persistent error kinds: (c, m, "repeated" | "misconception")
    error_reports: list[tuple[str, str, str]] = field(default_factory=list)
    # drawn for this session: its extractor misreads one pair at the first failed turn and
    # repeats it (a session with no failed turn has none to misread)
    repeating: bool = False
    misread: tuple[str, str] | None = None  # the pair it misread, once it has
    turns: int = 0
    successes: int = 0


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _pick(rng: np.random.Generator, items: Sequence[Any]) -> Any:
    return items[int(rng.integers(len(items)))]


def run_session(
    *,
    retrieve: Retrieve,
    world: World,
    learner: Learner,
    model: OutcomeModel,
    extractor: Extractor,
    policy: TutorPolicy,
    rng: np.random.Generator,
    session_id: str,
    ended_at: datetime,
    day: int,
    entry_concepts: Mapping[str, str],
    edge_info: Callable[[Sequence[str]], Mapping[str, tuple[float, str]]],
    drift: Sequence[tuple[str, str]] = (),
    error_rng: np.random.Generator | None = None,
) -> SessionRecord:
    """Play one session and return its ingest payload and what the report needs from it.

    `entry_concepts` maps entry ids of the topic to concept slugs (to follow an edge);
    `edge_info` gives (confidence, source_type) of edge ids the retrieval result did not
    describe fully (a read). `error_rng` draws the repeated misreading (default: `rng`);
    nothing is drawn from it when `extractor.p_repeat_session` is 0, so the main stream of
    a run without that error is the same as before it existed.
    """
    error_rng = rng if error_rng is None else error_rng
    n_turns = int(rng.integers(policy.min_turns, policy.max_turns + 1))
    student_turn = int(rng.integers(n_turns)) if rng.random() < policy.p_student_observation else -1
    topic_turn = (
        int(rng.integers(n_turns)) if drift and rng.random() < policy.p_topic_observation else -1
    )
    tutor_turn = int(rng.integers(n_turns)) if rng.random() < policy.p_tutor_observation else -1

    record = SessionRecord(payload={})
    record.repeating = bool(
        extractor.p_repeat_session > 0 and error_rng.random() < extractor.p_repeat_session
    )
    misread: tuple[str, str] | None = None
    plan = [learner.pick_goal(world, rng, model.p_overreach)]
    recent: list[list[str]] = []
    turns: list[dict[str, Any]] = []
    for t in range(n_turns):
        focus = plan[-1]
        title = world.concepts[focus].title
        message = _pick(rng, MESSAGES).format(title=title)
        earlier = recent[-settings.current().recent_concept_turns :]
        recent_slugs = list(dict.fromkeys([focus] + [s for turn in earlier for s in turn]))
        result = retrieve(
            world.topic_id,
            learner.learner_id,
            message,
            level=learner.level(world),
            focus=focus,
            recent_concepts=tuple(recent_slugs),
            expected_concepts=(focus,),
        )
        # act on the best-ranked advisory for the concept being taught (normally the top one:
        # it is the expected concept); with none, teach from scratch (no decision entry)
        taught = focus
        top = next(
            (
                a
                for a in _get(result, "topic_advisories", ()) or ()
                if _get(a, "concept_slug") == focus
            ),
            None,
        )
        decision = str(_get(top, "entry_id")) if top is not None else None

        student_adv = list(_get(result, "student_advisories", ()) or ())
        trait_in_prompt = any(_get(a, "concept_slug") == learner.trait.slug for a in student_adv)
        shown = {
            entry_concepts.get(str(_get(e, "target_entry_id")), "")
            for e in _get(result, "edges", ()) or ()
            if decision is not None
            and str(_get(e, "source_entry_id")) == decision
            and _get(e, "edge_type") in ("prerequisite", "fallback")
        }
        p = model.success_probability(learner, taught, world, trait_in_prompt, shown - {""})
        success = bool(rng.random() < p)

        # the extractor: one visible struggle per failed, unready turn; plus invented ones
        struggles: list[dict[str, str]] = []
        missing = learner.missing_prerequisites(taught, world)
        struggled_on: str | None = None
        if not success and missing:
            record.lacking.extend((t, taught, m) for m in missing)
            struggled_on = _pick(rng, missing)
            record.true_struggles.append((taught, struggled_on))
            if rng.random() >= extractor.p_miss:
                evidence = _pick(rng, TRUE_EVIDENCE).format(
                    missing=world.concepts[struggled_on].title, concept=world.concepts[taught].title
                )
                struggles.append(
                    {"concept_slug": taught, "missing_slug": struggled_on, "evidence": evidence}
                )
                record.reported_struggles.append((taught, struggled_on, True))
        if rng.random() < extractor.p_false and not success:
            wrong = extractor.wrong_candidates(world, taught)
            if wrong:
                named = _pick(rng, wrong)
                evidence = _pick(rng, FALSE_EVIDENCE).format(missing=world.concepts[named].title)
                struggles.append(
                    {"concept_slug": taught, "missing_slug": named, "evidence": evidence}
                )
                record.reported_struggles.append((taught, named, False))
        if not success:
            if record.repeating and misread is None:
                wrong = extractor.wrong_candidates(world, taught)
                misread = (taught, _pick(error_rng, wrong)) if wrong else None
                record.misread = misread
            persistent = [("repeated", misread)]
            if learner.misconception is not None and learner.misconception[0] == taught:
                persistent.append(("misconception", learner.misconception))
            for kind, pair in persistent:
                if pair is None or any(
                    (s["concept_slug"], s["missing_slug"]) == pair for s in struggles
                ):
                    continue
                phrasings = FALSE_EVIDENCE if kind == "repeated" else MISCONCEPTION_EVIDENCE
                evidence = phrasings[(t + len(struggles)) % len(phrasings)].format(
                    missing=world.concepts[pair[1]].title, concept=world.concepts[pair[0]].title
                )
                struggles.append(
                    {"concept_slug": pair[0], "missing_slug": pair[1], "evidence": evidence}
                )
                record.reported_struggles.append((pair[0], pair[1], False))
                record.error_reports.append((pair[0], pair[1], kind))

        if policy.notices == "extractor":
            named = [s["missing_slug"] for s in struggles if s["concept_slug"] == taught]
            # a choice that draws nothing, so both modes keep the same random streams
            struggled_on = named[t % len(named)] if named else None

        observations: list[dict[str, str]] = []
        if t == student_turn:
            observations.append(
                {
                    "graph": "student",
                    "concept": learner.trait.name,
                    "text": _pick(rng, learner.trait.phrasings),
                }
            )
        if t == topic_turn:
            name, text = _pick(rng, drift)
            observations.append({"graph": "topic", "concept": name, "text": text})
        if t == tutor_turn:
            name, text = _pick(rng, TUTOR_MOVES)
            observations.append({"graph": "tutor", "concept": name, "text": text})

        used = [str(u) for u in (_get(result, "used_entry_ids", ()) or ())]
        rendered = [str(e) for e in (_get(result, "rendered_edge_ids", ()) or ())]
        turns.append(
            {
                "turn_index": t,
                "student_message": message,
                "concept_slugs": [taught],
                "decision_entry_id": decision,
                "used_entry_ids": used,
                "rendered_edge_ids": rendered,
                "outcome": "success" if success else "failure",
                "outcome_strength": 1.0,
                "struggles": struggles,
                "observations": observations,
            }
        )
        recent.append([taught])
        _record_uses(
            record, result, decision, used, rendered, edge_info, day, session_id, t, success
        )
        record.turns += 1
        record.successes += int(success)

        # learning, then where the tutor goes next
        if success and rng.random() < model.p_learn:
            learner.mastered.add(taught)
        plan = _next_plan(
            plan,
            taught,
            success,
            decision,
            result,
            entry_concepts,
            world,
            struggled_on,
            policy,
            rng,
            learner,
            model,
        )

    record.payload = {
        "session_id": session_id,
        "learner_id": learner.learner_id,
        "topic_id": world.topic_id,
        "ended_at": ended_at.isoformat().replace("+00:00", "Z"),
        "turns": turns,
    }
    return record


def _next_plan(
    plan: list[str],
    taught: str,
    success: bool,
    decision: str | None,
    result: Any,
    entry_concepts: Mapping[str, str],
    world: World,
    struggled_on: str | None,
    policy: TutorPolicy,
    rng: np.random.Generator,
    learner: Learner,
    model: OutcomeModel,
) -> list[str]:
    """The tutor's stack of concepts: retreat on failure, return to the goal on success."""
    walked = [
        e
        for e in (_get(result, "edges", ()) or ())
        if decision is not None and str(_get(e, "source_entry_id")) == decision
    ]

    def target_of(kinds: tuple[str, ...]) -> str | None:
        for e in walked:
            if _get(e, "edge_type") in kinds:
                slug = entry_concepts.get(str(_get(e, "target_entry_id")))
                if slug in world.concepts and slug not in plan:
                    return slug
        return None

    noticed = rng.random() < policy.p_notice_struggle  # drawn every turn: a stable stream
    plan = list(plan)
    if success:
        if taught in plan:
            plan.remove(taught)
        if not plan:
            nxt = target_of(("leads_to",))
            plan = [nxt if nxt is not None else learner.pick_goal(world, rng, model.p_overreach)]
        return plan
    retreat = target_of(("prerequisite", "fallback"))
    if retreat is None and noticed and struggled_on is not None and struggled_on not in plan:
        retreat = struggled_on
    if retreat is not None and len(plan) < 6:
        plan.append(retreat)
    return plan


def _record_uses(
    record: SessionRecord,
    result: Any,
    decision: str | None,
    used: list[str],
    rendered: list[str],
    edge_info: Callable[[Sequence[str]], Mapping[str, tuple[float, str]]],
    day: int,
    session_id: str,
    turn: int,
    success: bool,
) -> None:
    advisories = {}
    for group in ("topic_advisories", "tutor_advisories", "student_advisories"):
        for a in _get(result, group, ()) or ():
            advisories[str(_get(a, "entry_id"))] = a
    for entry_id in used:
        a = advisories.get(entry_id)
        if a is None:
            continue
        conf = float(_get(a, "confidence"))
        record.uses.append(Use(day, session_id, turn, "entry", entry_id, None, None, conf, success))
        if entry_id == decision:
            record.uses.append(
                Use(day, session_id, turn, "decision", entry_id, None, None, conf, success)
            )
    described = {str(_get(e, "edge_id")): e for e in _get(result, "edges", ()) or ()}
    unknown = [
        i
        for i in rendered
        if _get(described.get(i), "confidence") is None
        or _get(described.get(i), "source_type") is None
    ]
    looked_up = edge_info(unknown) if unknown else {}
    for edge_id in rendered:
        e = described.get(edge_id)
        if edge_id in looked_up:
            conf, source_type = looked_up[edge_id]
        else:
            conf, source_type = float(_get(e, "confidence")), str(_get(e, "source_type"))
        record.uses.append(
            Use(
                day,
                session_id,
                turn,
                "edge",
                edge_id,
                _get(e, "edge_type"),
                source_type,
                float(conf),
                success,
            )
        )
