"""One session's five steps, in the seed's order (SPEC §4), each read -> decide -> write.

1. observations -> entries (the concept ladder; student-pattern dedup at cosine 0.72);
2. discovery (sequence -> `leads_to`, recovery -> `fallback` with a condition);
3. prerequisite proposals (only from struggles with evidence);
4. reinforcement: every edge observed by 2 and 3 goes through `hag.storage.edges.upsert_edges`,
   once per session, before anything is graded;
5. outcome grading of the edges and entries that reached the prompt, with the counters.

Each step reads its facts (`hag.session.facts`), decides with the pure rules
(`hag.session.rules`) and writes (`hag.session.write`), inside the caller's transaction;
every write is timed at the session's `ended_at`. The queue (`hag.session.queue`) claims a
session, runs these steps and commits.

Concurrency (ours): several workers may apply different sessions at once and must end in
the state of a serial order (their commit order). Writes are single statements that read
and write the row they change under its lock; the reads that decide a write are guarded by
transaction-scoped advisory locks (a learner's patterns for the cosine dedup; each topic
entry identity that observations may create and struggles look up); the rows a session
grades or reinforces are locked in one sorted pass first, so sessions sharing rows queue
rather than deadlock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np

from hag.evidence import model, reweigh, store
from hag.session import facts, rules, sequence_step, write
from hag.session.contract import SessionPayload, Turn
from hag.session.facts import Connection
from hag.session.ladder import Catalogue, candidate_slug, resolve_all
from hag.session.rules import Embedding, ResolvedObservation, StrugglePair, graph_scope
from hag.session.summary import SessionCounts
from hag.settings import Settings
from hag.storage.edges import EdgeObservation
from hag.support.timing import timed

Embed = Callable[[list[str]], np.ndarray]

__all__ = ["Caches", "Plan", "apply_session", "graph_scope", "plan_session"]


class Caches:
    """Per-call read caches: topic catalogues (sessions never change what they hold)."""

    def __init__(self) -> None:
        self._catalogues: dict[str, Catalogue] = {}
        self._lock = threading.Lock()

    def catalogue(self, conn: Connection, topic_id: str) -> Catalogue:
        with self._lock:
            found = self._catalogues.get(topic_id)
        if found is None:
            found = Catalogue.load(conn, topic_id)
            with self._lock:
                self._catalogues[topic_id] = found
        return found


def _embed(texts: list[str]) -> np.ndarray:
    from hag.vectors.embeddings import embed_texts

    return embed_texts(texts)


def _observation_fields(turns: Sequence[Turn]) -> list[str]:
    return [
        f"turn {t.turn_index}: observations[{j}].text"
        for t in turns
        for j in range(len(t.observations))
    ]


@dataclass(frozen=True)
class Plan:
    """What a session will write, decided from the payload and static reads (no locks yet)."""

    observations: tuple[ResolvedObservation, ...]
    vectors: Sequence[Embedding]  # one per observation, its text embedded
    struggles: tuple[StrugglePair, ...]
    lock_keys: tuple[str, ...]


def plan_session(
    session: SessionPayload,
    turns: Sequence[Turn],
    catalogue: Catalogue,
    dials: Settings,
    embed: Embed,
) -> Plan:
    """Resolve the observations' concepts, embed their texts, name the struggles' concepts,
    and the identities to lock before anything is read for a write."""
    items = [(t.turn_index, o) for t in turns for o in t.observations]
    resolutions = resolve_all([o.concept for _, o in items], catalogue, dials, embed)
    vectors = embed([o.text for _, o in items]) if items else np.zeros((0, 0), dtype=np.float32)
    if items:  # a zero or non-finite row would be a NaN in every similarity: refused
        from hag.vectors.embeddings import require_fit

        require_fit(vectors, [o.text for _, o in items], _observation_fields(turns))
    pairs = rules.struggle_pairs(turns, catalogue)
    topic_scope = graph_scope("topic", session.learner_id, dials)
    keys = {
        f"entry:{session.topic_id}:{topic_scope}:{r.slug}"
        for (_, o), r in zip(items, resolutions, strict=True)
        if o.graph == "topic" and r.anchored
    }
    keys.update(f"entry:{session.topic_id}:{topic_scope}:{s}" for s in rules.proposal_slugs(pairs))
    if model.units_selected(dials):  # its failed concepts are re-weighed (`Proposed.exposures`)
        keys.update(
            f"entry:{session.topic_id}:{topic_scope}:{s}"
            for s in rules.failed_slugs(turns, catalogue)
        )
    if model.drops_shown(dials):  # its successes may withdraw reports (`contradicted_reports`)
        keys.update(
            f"entry:{session.topic_id}:{topic_scope}:{s}"
            for t in turns if t.outcome == "success"
            for s in rules.turn_concepts(t, catalogue)
        )  # fmt: skip
    if any(o.graph == "student" for _, o in items):
        keys.add(f"learner:{session.learner_id}")
    observations = tuple(
        ResolvedObservation(ti, o, r) for (ti, o), r in zip(items, resolutions, strict=True)
    )
    return Plan(observations, list(vectors), tuple(pairs), tuple(sorted(keys)))


def apply_session(
    conn: Connection,
    session: SessionPayload,
    dials: Settings,
    *,
    run_id: UUID | None = None,
    caches: Caches | None = None,
    step_seconds: dict[str, float] | None = None,
    embed: Embed = _embed,
) -> SessionCounts:
    """Apply one session's five steps inside the caller's transaction; returns what changed."""
    caches = caches or Caches()
    timings = step_seconds if step_seconds is not None else {}
    counts = SessionCounts(sessions=1)
    turns = session.ordered_turns()

    with timed(timings, "observations"):
        catalogue = caches.catalogue(conn, session.topic_id)
        plan = plan_session(session, turns, catalogue, dials, embed)
        write.lock_identities(conn, plan.lock_keys, dials)
        observations_to_entries(conn, session, plan, dials, counts, run_id)
    with timed(timings, "discovery"):
        observed = discover(conn, turns)
    with timed(timings, "proposals"):
        proposed = propose_prerequisites(conn, session, plan, turns, catalogue, dials, counts)
        observed += proposed.observed
    with timed(timings, "reinforcement"):
        withdrawn = contradicted_reports(conn, session, turns, catalogue, dials, proposed.shown)
        # the concepts reported on, those failed on (their `invented` term moved), and those
        # whose reports this session withdraws
        sources = model.lift_sources(
            observed,
            dials,
            [
                *(proposed.exposures.failed if proposed.exposures else ()),
                *(r.source_entry_id for r in withdrawn),
                *(source for source, _ in proposed.contradicted),
            ],
        )
        moves = sequence_step.lock_ends(observed, dials)  # locked here, re-weighed below
        before = write.lock_rows(
            conn,
            list({i for t in turns for i in rules.graded_entries(t)}),
            list({i for t in turns for i in t.rendered_edge_ids}),
            observed,
            sources,
            moves,
        )
        reinforce(
            conn, session, observed, dials, counts, run_id,
            proposed.turns_by_pair, proposed.withheld_turns,
        )  # fmt: skip
        if withdrawn:  # read again under the locks and after this session's own writes: a
            # cull, a restore or the session's own resumption may have moved them since
            locked = set(sources)
            withdrawn = [
                r
                for r in contradicted_reports(
                    conn, session, turns, catalogue, dials, proposed.shown
                )
                if r.source_entry_id in locked
            ]
        store.record_exposures(conn, proposed.exposures)
        counts.reports_withdrawn += store.withdraw_reports(conn, withdrawn)
        store.count_contradicted(conn, session.learner_id, proposed.contradicted_shares())
        weigh_prerequisite_evidence(conn, session, sources, dials, counts, run_id, before)
        sequence_step.weigh_sequence_evidence(conn, session, turns, moves, dials, counts, run_id)
    with timed(timings, "grading"):
        grade_outcomes(conn, session, turns, dials, counts, run_id)
    return counts


def observations_to_entries(
    conn: Connection,
    session: SessionPayload,
    plan: Plan,
    dials: Settings,
    counts: SessionCounts,
    run_id: UUID | None,
) -> None:
    """Step 1: each observation lands on its graph's entry, or becomes a new candidate
    (`rules.decide_entries`; the student-pattern dedup reads the learner's patterns)."""
    if not plan.observations:
        return
    patterns: list[rules.Pattern] = []
    if any(o.observation.graph == "student" for o in plan.observations):
        patterns = facts.learner_patterns(conn, graph_scope("student", session.learner_id, dials))
    decision = rules.decide_entries(
        plan.observations, plan.vectors, patterns, session.learner_id, dials
    )
    counts.observations_dropped += decision.dropped
    counts.entries_merged += decision.merged
    inserted = write.write_entries(conn, session, decision, run_id)
    # A row that inserted nothing met an existing identity: the observation merged there.
    counts.entries_created += inserted
    counts.entries_merged += len(decision.new) - inserted


def discover(conn: Connection, turns: Sequence[Turn]) -> list[EdgeObservation]:
    """Step 2: sequence and recovery edges from consecutive turns' decision entries
    (`rules.discover`, with the decision entries' concepts read first)."""
    decisions = rules.decision_entries(turns)
    if len(decisions) < 2:
        return []
    return rules.discover(turns, facts.entry_slugs(conn, decisions))


def contradicted_reports(
    conn: Connection,
    session: SessionPayload,
    turns: Sequence[Turn],
    catalogue: Catalogue,
    dials: Settings,
    shown: Collection[str] | None = None,
) -> list[store.LearnerReport]:
    """The learner's recorded reports this session contradicts forward in time (under the
    units rule with `prerequisite_drop_shown`): a report c -> m from an earlier session whose
    learner succeeds on c here without showing m, and showed m in no session since it
    (`rules.withdrawn_reports`). A report a session already ingested contradicts never
    reaches the record (`rules.turn_struggles` with `later`), so the order sessions are
    applied in does not change what stays. What it reads: the learner's reports out of the
    concepts succeeded on, and for those this session contradicts, whether their target was
    shown since (an index probe each), never the learner's sessions in between."""
    if not model.drops_shown(dials):
        return []
    succeeded = {
        c for t in turns if t.outcome == "success" for c in rules.turn_concepts(t, catalogue)
    }
    if not succeeded:
        return []
    found = facts.topic_entries(
        conn, session.topic_id, graph_scope("topic", session.learner_id, dials), sorted(succeeded)
    )
    reports = store.learner_reports_out_of(
        conn, session.learner_id, sorted(set(found.values()), key=str), session.ended_at
    )
    if not reports:  # the common case: nothing of the learner's to answer, no more reads
        return []
    # the session read as a whole, as ingest kept it (and as a later report reads it)
    mine = [r for r in facts.successes_since(conn, session, session.ended_at, inclusive=True)
            if r[0] == session.session_id]  # fmt: skip
    here = (
        rules.read_success(mine[0][2], mine[0][3], catalogue)
        if mine
        else rules.Success(frozenset())
    )
    reports = rules.withdrawn_reports(reports, here, [])
    if not reports:
        return []
    # whether each report's target was shown since it: the slugs the learner succeeded on
    # before this session that read as the target, each probed from the report's time on
    # (one index probe each, not the learner's sessions since its oldest report)
    slugs: dict[str, list[str]] = {}
    for slug in facts.shown_concepts(conn, session) if shown is None else shown:
        slugs.setdefault(candidate_slug(slug, catalogue), []).append(slug)
    answered = facts.shown_since(
        conn,
        session,
        [
            (i, s, r.reported_at)
            for i, r in enumerate(reports)
            for s in slugs.get(r.target_slug, ())
        ],
    )
    between = [(reports[i].reported_at, rules.Success(frozenset({reports[i].target_slug})))
               for i in sorted(answered)]  # fmt: skip
    return rules.withdrawn_reports(reports, here, between)


def later_record(
    conn: Connection, session: SessionPayload, turns: Sequence[Turn], catalogue: Catalogue
) -> tuple[list[rules.Success], list[list[str]]]:
    """What may contradict the session's reports forward in time: the learner's later
    sessions' successes, as ingest kept them, and the concepts each turn's prompt supplied
    (its prerequisite and fallback lines' targets)."""
    later = [
        rules.read_success(slugs, bridged, catalogue)
        for _, _, slugs, bridged in facts.successes_since(conn, session, session.ended_at)
    ]
    targets = facts.rendered_targets(
        conn, [i for t in turns if t.outcome == "success" for i in t.rendered_edge_ids]
    )
    supplied = [[targets[i] for i in t.rendered_edge_ids if i in targets] for t in turns]
    return later, supplied


@dataclass(frozen=True)
class Proposed:
    """Step 3's result: the prerequisites proposed, how many turns reported each pair, and
    under the units rule the session's failed concepts with what its learner had shown there
    (topic entries; None under other rules)."""

    observed: list[EdgeObservation]
    turns_by_pair: dict[tuple[UUID, UUID], int]
    exposures: store.ExposureRows | None
    # the (struggled, missing) topic entries of struggles contradicted forward in time that
    # no turn kept (`rules.TurnStruggles.forward`): counted on their pair as withdrawn
    contradicted: tuple[tuple[UUID, UUID], ...] = ()
    # how many turns named each pair contradicted forward in time: their part of the unit
    withheld_turns: dict[tuple[UUID, UUID], int] = field(default_factory=dict)
    # what its learner had shown before it (`facts.shown_concepts`; None: not read)
    shown: frozenset[str] | None = None

    def contradicted_shares(self) -> dict[tuple[UUID, UUID], float]:
        """Each pair `contradicted`, with the part of the session's unit its turns held
        (`model.withheld_shares`): what the pair counts as withdrawn."""
        shares = model.withheld_shares(self.turns_by_pair, self.withheld_turns)
        return {pair: shares[pair] for pair in self.contradicted}


def propose_prerequisites(
    conn: Connection,
    session: SessionPayload,
    plan: Plan,
    turns: Sequence[Turn],
    catalogue: Catalogue,
    dials: Settings,
    counts: SessionCounts,
) -> Proposed:
    """Step 3: a `prerequisite` edge per struggle with evidence, struggled -> missing concept,
    between the topic entries of the session's topic (`rules.propose_prerequisites`), and how
    many turns reported each pair (`rules.reported_turns`, kept with the learner). Under the
    units rule a struggle on c at a turn about other concepts proposes nothing when a turn
    about c names one (`rules.on_turn_pairs`, counted as `struggles_off_turn`), nor does a
    struggle the learner's own record contradicts (`rules.turn_struggles`,
    `prerequisite_drop_shown`), and the session's failed concepts with what its learner had
    shown there are kept for the `invented` term (`rules.shown_exposures`,
    `Proposed.exposures`)."""
    counts.struggles_without_evidence += rules.struggles_without_evidence(session.turns)
    shown = facts.shown_concepts(conn, session) if model.units_selected(dials) else None
    exposures = None if shown is None else rules.shown_exposures(turns, catalogue, shown)
    slugs = set(rules.proposal_slugs(plan.struggles))
    slugs.update(exposures.slugs() if exposures is not None else ())
    if not slugs:
        return Proposed([], {}, None, shown=None if shown is None else frozenset(shown))
    found = facts.topic_entries(
        conn, session.topic_id, graph_scope("topic", session.learner_id, dials), sorted(slugs)
    )
    if model.drops_shown(dials):
        later, supplied = later_record(conn, session, turns, catalogue)
        struggles = rules.turn_struggles(turns, catalogue, shown, later, supplied)
    else:
        struggles = rules.turn_struggles(
            turns, catalogue, None, on_turn=model.units_selected(dials)
        )
    counts.struggles_contradicted += struggles.contradicted
    counts.struggles_off_turn += struggles.off_turn
    per_turn = struggles.per_turn
    proposals = rules.propose_prerequisites([p for pairs in per_turn for p in pairs], found)
    counts.struggles_unresolved += proposals.unresolved
    counts.struggles_proposed += len(proposals.observed)
    forward = {rules.entry_pair(p, found) for p in struggles.forward}
    return Proposed(
        list(proposals.observed),
        rules.reported_turns(per_turn, found),
        None if exposures is None else exposure_rows(exposures, found),
        tuple(sorted((e for e in forward if e), key=lambda e: (str(e[0]), str(e[1])))),
        rules.reported_turns(struggles.withheld, found),
        None if shown is None else frozenset(shown),
    )


def exposure_rows(
    exposures: rules.ShownExposures, topic_entries: Mapping[str, UUID]
) -> store.ExposureRows:
    """The session's failed concepts and shown pairs as topic entries, each once (named if
    any of its slugs' pairs was): a concept with no entry in the topic, or a pair naming one
    entry twice, is left out."""
    pairs: dict[tuple[UUID, UUID], bool] = {}
    for (c, m), named in exposures.named.items():
        ends = rules.entry_pair(StrugglePair(c, m), topic_entries)
        if ends is not None:
            pairs[ends] = pairs.get(ends, False) or named
    return store.ExposureRows(
        failed=sorted({topic_entries[c] for c in exposures.failed if c in topic_entries}, key=str),
        pairs=sorted(pairs.items(), key=lambda p: (str(p[0][0]), str(p[0][1]))),
    )


def reinforce(
    conn: Connection,
    session: SessionPayload,
    observed: Sequence[EdgeObservation],
    dials: Settings,
    counts: SessionCounts,
    run_id: UUID | None,
    turns_by_pair: Mapping[tuple[UUID, UUID], int],
    withheld_turns: Mapping[tuple[UUID, UUID], int] | None = None,
) -> None:
    """Step 4: every observed edge through the one upsert (`rules.reinforced_confidence`),
    and for each prerequisite the session proposed, who reported it in how many turns
    (`hag.evidence.store.record_reports`, idempotent per session), before anything is
    re-weighed; its share of the session's unit counts the turns `withheld` too. A learned
    edge created again takes back its culled predecessors' reports
    (`store.resume_culled_reports`)."""
    results = write.reinforce(conn, session, observed, dials, run_id)
    counts.edges_created += sum(1 for r in results if r.inserted)
    counts.edges_reinforced += sum(1 for r in results if not r.inserted)
    counts.reports_resumed += store.resume_culled_reports(
        conn,
        dials,
        session_id=session.session_id,
        at=session.ended_at,
        created=[(r.id, r.identity[2]) for r in results if r.inserted],
    )
    shares = model.session_shares(turns_by_pair, withheld_turns)
    store.record_reports(
        conn,
        session_id=session.session_id,
        learner_id=session.learner_id,
        at=session.ended_at,
        turns_by_edge={
            r.id: (
                turns_by_pair[(r.identity[0], r.identity[1])],
                shares[(r.identity[0], r.identity[1])],
            )
            for r in results
            if r.identity[2] == "prerequisite" and (r.identity[0], r.identity[1]) in turns_by_pair
        },
    )


def weigh_prerequisite_evidence(
    conn: Connection,
    session: SessionPayload,
    sources: Sequence[UUID],
    dials: Settings,
    counts: SessionCounts,
    run_id: UUID | None,
    before: Mapping[UUID, float] | None = None,
) -> None:
    """Step 4b (lift rule only): re-weigh the prerequisites around the concepts reported on.

    Every prerequisite out of a concept this session reported a struggle on (its chance
    changed) and into it (its reverse evidence changed) takes the confidence its reports
    earn (`hag.evidence.reweigh`). The rows were locked by `write.lock_rows` in the
    one sorted pass, the topic entry identities behind them by `lock_identities`, so
    sessions reporting on the same concept apply one after the other. `before`: the locked
    prerequisites' confidences before the session wrote them (a move across a threshold
    counts from there, the reinforcement's included).
    """
    counts.edges_reweighed += reweigh.reweigh_prerequisites(
        conn,
        sources,
        dials,
        at=session.ended_at,
        reason="prerequisite evidence (lift)",
        session_id=session.session_id,
        run_id=run_id,
        before=before,
    )


def grade_outcomes(
    conn: Connection,
    session: SessionPayload,
    turns: Sequence[Turn],
    dials: Settings,
    counts: SessionCounts,
    run_id: UUID | None,
) -> None:
    """Step 5: grade what reached the prompt by its turn's outcome, in turn order.

    Edges: +-0.05 within [0.05, 1], and one traversal per turn that rendered them. Entries:
    the asymmetric saturating rule (lr by maturity, the turn's strength), the success and
    failure counters, and `last_matched_at`. Turns without an outcome grade nothing but
    still count traversals and matches.
    """
    plan = rules.grading_plan(turns, dials)
    if plan.edge_outcomes or plan.entry_steps:
        write.say_grading(conn, session, run_id)
    if plan.edge_outcomes:
        # The evidence rules read each edge's state; the edges are locked by `lock_rows`, their
        # source entries (the turns' used entries) with them, read before this session's own
        # counters move.
        state = (
            facts.edge_grading_state(conn, plan.edge_outcomes)
            if rules.needs_edge_state(dials)
            else {}
        )
        shifts = rules.edge_shifts(plan.edge_outcomes, state, dials)
        traversals = {i: len(o) for i, o in plan.edge_outcomes.items()}
        changes = write.grade_edges(conn, session, shifts, traversals)
        counts.edges_traversed += len(changes)
        counts.edges_missing += len(shifts) - len(changes)  # culled since the tutor rendered them
        counts.edges_graded_up += sum(1 for old, new in changes if new > old)
        counts.edges_graded_down += sum(1 for old, new in changes if new < old)
    if plan.entry_steps:
        gradings = rules.entry_gradings(plan.entry_steps, dials)
        changes = write.grade_entries(conn, session, gradings)
        counts.entries_graded += sum(1 for old, new in changes if new != old)
