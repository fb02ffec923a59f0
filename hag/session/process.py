"""Session-end processing: apply pending sessions to the memory, each in one transaction.

For each session, in the seed's order (SPEC §4):
1. observations -> entries (the concept ladder; student-pattern dedup at cosine 0.72);
2. discovery (sequence -> `leads_to`, recovery -> `fallback` with a condition);
3. prerequisite proposals (only from struggles with evidence);
4. reinforcement: every edge observed by 2 and 3 goes through `hag.edges.upsert_edges`,
   once per session, before anything is graded;
5. outcome grading of the edges and entries that reached the prompt, with the counters.
The ledger row turns `processed` in the same transaction, so a session is applied exactly
once; every write is timed at the session's `ended_at`.

Concurrency (ours): several workers may apply different sessions at once and must end in
the state of a serial order (their commit order). Writes are single statements that read
and write the row they change under its lock; the reads that decide a write are guarded by
transaction-scoped advisory locks (a learner's patterns for the cosine dedup; each topic
entry identity that observations may create and struggles look up); the rows a session
grades or reinforces are locked in one sorted pass first, so sessions sharing rows queue
rather than deadlock. A deadlock or serialization failure that still happens is retried.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from uuid import UUID

import numpy as np
from pgvector import Vector
from psycopg import errors as pg_errors

from hag import bounds
from hag.edges import EdgeObservation, say_why, upsert_edges
from hag.errors import HagError
from hag.session import rules
from hag.session.contract import SessionPayload, Turn
from hag.session.ladder import UNANCHORED, Catalogue, as_array, candidate_slug, resolve_all
from hag.sqlfiles import query
from hag.timing import timed

RUN_KIND = "session_end"
STEPS = ("observations", "discovery", "proposals", "reinforcement", "grading")
_RETRYABLE = (pg_errors.DeadlockDetected, pg_errors.SerializationFailure)


@dataclass
class SessionCounts:
    """What applying sessions changed; one per session, summed per batch and per run."""

    sessions: int = 0
    entries_created: int = 0
    entries_merged: int = 0
    observations_dropped: int = 0
    edges_created: int = 0
    edges_reinforced: int = 0
    edges_reweighed: int = 0
    edges_graded_up: int = 0
    edges_graded_down: int = 0
    edges_traversed: int = 0
    edges_missing: int = 0
    entries_graded: int = 0
    struggles_proposed: int = 0
    struggles_unresolved: int = 0
    struggles_without_evidence: int = 0

    def add(self, other: SessionCounts) -> None:
        for f in fields(SessionCounts):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(SessionCounts)}


@dataclass
class ProcessSummary(SessionCounts):
    """A run's (or a batch's) totals, with rejects, retries and time per step."""

    run_id: UUID | None = None
    rejects: int = 0
    retries: int = 0
    seconds: float = 0.0
    step_seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STEPS, 0.0))
    rejected: list[dict[str, str]] = field(default_factory=list)

    def merge(self, other: ProcessSummary) -> None:
        self.add(other)
        self.rejects += other.rejects
        self.retries += other.retries
        self.rejected.extend(other.rejected)
        for step, seconds in other.step_seconds.items():
            self.step_seconds[step] = self.step_seconds.get(step, 0.0) + seconds

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": str(self.run_id) if self.run_id else None}
        out.update(super().as_dict())
        out.update(
            rejects=self.rejects,
            retries=self.retries,
            seconds=round(self.seconds, 3),
            step_seconds={k: round(v, 3) for k, v in self.step_seconds.items()},
            rejected=self.rejected,
        )
        return out


class Caches:
    """Per-call read caches: topic catalogues (sessions never change what they hold)."""

    def __init__(self) -> None:
        self._catalogues: dict[str, Catalogue] = {}
        self._lock = threading.Lock()

    def catalogue(self, conn: Any, topic_id: str) -> Catalogue:
        with self._lock:
            found = self._catalogues.get(topic_id)
        if found is None:
            found = Catalogue.load(conn, topic_id)
            with self._lock:
                self._catalogues[topic_id] = found
        return found


def _embed(texts: list[str]) -> np.ndarray:
    from hag.embeddings import embed_texts

    return embed_texts(texts)


# --- one session ---------------------------------------------------------------------------


@dataclass
class _Plan:
    """What a session will write, decided from the payload and static reads (no locks yet)."""

    observations: list[tuple[int, Any, Any]]  # (turn_index, Observation, Resolution)
    vectors: np.ndarray
    struggle_slugs: list[tuple[Any, str, str]]  # (Struggle, concept slug, missing slug)
    lock_keys: list[str]


def graph_scope(graph: str, learner_id: str, dials: Mapping[str, Any]) -> str:
    """The visibility scope an observation for a graph is written with."""
    if graph == "topic":
        return str(dials["session_topic_scope"])
    if graph == "student":
        return f"student:{learner_id}"
    return graph  # tutor | visual


def _plan(
    session: SessionPayload,
    turns: list[Turn],
    catalogue: Catalogue,
    dials: Mapping[str, Any],
    embed: Callable[[list[str]], np.ndarray],
) -> _Plan:
    items = [(t.turn_index, o) for t in turns for o in t.observations]
    resolutions = resolve_all([o.concept for _, o in items], catalogue, dials, embed)
    vectors = embed([o.text for _, o in items]) if items else np.zeros((0, 0), dtype=np.float32)
    topic_scope = graph_scope("topic", session.learner_id, dials)
    struggles = [
        (s, candidate_slug(s.concept_slug, catalogue), candidate_slug(s.missing_slug, catalogue))
        for t in turns
        for s in t.struggles
        if s.has_evidence
    ]
    keys = {
        f"entry:{session.topic_id}:{topic_scope}:{r.slug}"
        for (_, o), r in zip(items, resolutions, strict=True)
        if o.graph == "topic" and r.anchored
    }
    keys.update(
        f"entry:{session.topic_id}:{topic_scope}:{slug}" for _, a, b in struggles for slug in (a, b)
    )
    if any(o.graph == "student" for _, o in items):
        keys.add(f"learner:{session.learner_id}")
    observations = [(ti, o, r) for (ti, o), r in zip(items, resolutions, strict=True)]
    return _Plan(observations, vectors, struggles, sorted(keys))


def apply_session(
    conn: Any,
    session: SessionPayload,
    dials: Mapping[str, Any],
    *,
    run_id: UUID | None = None,
    caches: Caches | None = None,
    step_seconds: dict[str, float] | None = None,
    embed: Callable[[list[str]], np.ndarray] = _embed,
) -> SessionCounts:
    """Apply one session's five steps inside the caller's transaction; returns what changed."""
    caches = caches or Caches()
    timings = step_seconds if step_seconds is not None else {}
    counts = SessionCounts(sessions=1)
    turns = session.ordered_turns()

    with timed(timings, "observations"):
        plan = _plan(session, turns, caches.catalogue(conn, session.topic_id), dials, embed)
        if plan.lock_keys:
            conn.execute(query("session", "lock_identities"), {"keys": plan.lock_keys})
        observations_to_entries(conn, session, plan, dials, counts, run_id)
    with timed(timings, "discovery"):
        observed = discover(conn, turns)
    with timed(timings, "proposals"):
        observed += propose_prerequisites(conn, session, plan, dials, counts)
    with timed(timings, "reinforcement"):
        evidence_sources = _evidence_sources(observed, dials)
        _lock_rows(conn, turns, observed, evidence_sources)
        reinforce(conn, session, observed, dials, counts, run_id)
        weigh_prerequisite_evidence(conn, session, evidence_sources, dials, counts, run_id)
    with timed(timings, "grading"):
        grade_outcomes(conn, session, turns, dials, counts, run_id)
    return counts


def observations_to_entries(
    conn: Any,
    session: SessionPayload,
    plan: _Plan,
    dials: Mapping[str, Any],
    counts: SessionCounts,
    run_id: UUID | None,
) -> None:
    """Step 1: each observation lands on its graph's entry, or becomes a new candidate.

    Topic, tutor and visual observations merge by identity; student observations merge by
    identity or, failing that, with the learner's pattern within `student_pattern_dedup_threshold`
    cosine (seed: 0.72), including patterns created earlier in this session. Merging adds
    no row and moves no confidence (seed: confidence moves only when an outcome fires).
    `_unanchored_` rows never merge; an unanchored visual observation is dropped (a drawing
    is found by its concept, and without one it could never be served).
    """
    if not plan.observations:
        return
    threshold = float(dials["student_pattern_dedup_threshold"])
    patterns: list[tuple[str, np.ndarray]] = []  # (slug, unit vector) of this learner's patterns
    if any(o.graph == "student" for _, o, _ in plan.observations):
        scope = graph_scope("student", session.learner_id, dials)
        for row in conn.execute(query("session", "learner_patterns"), {"scope": scope}).fetchall():
            vector = as_array(row["embedding"])
            norm = float(np.linalg.norm(vector))
            patterns.append((row["concept_slug"], vector / norm if norm else vector))

    new_rows: list[dict[str, Any]] = []
    seen_identities: set[tuple[str, str]] = set()
    minted: dict[str, dict[str, Any]] = {}
    for (_, obs, res), vector in zip(plan.observations, plan.vectors, strict=True):
        scope = graph_scope(obs.graph, session.learner_id, dials)
        if obs.graph == "visual" and not res.anchored:
            counts.observations_dropped += 1
            continue
        if obs.graph == "student":
            # An `_unanchored_` trait has no identity: it neither merges nor is merged into.
            if res.anchored:
                same_slug = any(slug == res.slug for slug, _ in patterns)
                near = bool(patterns) and max(float(v @ vector) for _, v in patterns) >= threshold
                if same_slug or near:
                    counts.entries_merged += 1
                    continue
                patterns.append((res.slug, vector))
        elif res.anchored:
            if (res.slug, scope) in seen_identities:
                counts.entries_merged += 1
                continue
            seen_identities.add((res.slug, scope))
        new_rows.append(
            {
                "id": uuid.uuid4(),
                "slug": res.slug,
                "scope": scope,
                "quality": res.quality,
                "confidence": rules.initial_entry_confidence(res.quality, dials),
                "instruction": obs.text,
                "embedding": Vector(vector),
            }
        )
        if obs.graph == "topic" and res.step == "minted":
            minted.setdefault(
                res.slug,
                {"title": obs.concept, "description": obs.text, "embedding": Vector(vector)},
            )
    if minted:
        conn.execute(
            query("session", "mint_concepts"),
            {
                "topic_id": session.topic_id,
                "at": session.ended_at,
                "slugs": list(minted),
                "titles": [m["title"] for m in minted.values()],
                "descriptions": [m["description"] for m in minted.values()],
                "embeddings": [m["embedding"] for m in minted.values()],
            },
        )
    if not new_rows:
        return
    say_why(
        conn,
        "new entry from a session observation",
        session_id=session.session_id,
        run_id=run_id,
        at=session.ended_at,
    )
    inserted = conn.execute(
        query("session", "insert_entries"),
        {
            "topic_id": session.topic_id,
            "at": session.ended_at,
            "ids": [r["id"] for r in new_rows],
            "slugs": [r["slug"] for r in new_rows],
            "scopes": [r["scope"] for r in new_rows],
            "confidences": [r["confidence"] for r in new_rows],
            "qualities": [r["quality"] for r in new_rows],
            "instructions": [r["instruction"] for r in new_rows],
            "embeddings": [r["embedding"] for r in new_rows],
        },
    ).fetchall()
    # A row that inserted nothing met an existing identity: the observation merged there.
    counts.entries_created += len(inserted)
    counts.entries_merged += len(new_rows) - len(inserted)


def discover(conn: Any, turns: list[Turn]) -> list[EdgeObservation]:
    """Step 2: sequence and recovery edges from consecutive turns' decision entries.

    Sequence: turn t succeeded acting on A, turn t+1 acted on B != A -> `leads_to` A -> B.
    Recovery: turn t failed acting on A, turn t+1 succeeded acting on B != A -> `fallback`
    A -> B, with a condition naming what failed. A turn without a decision entry breaks the
    chain; `_unanchored_` entries take part in nothing.
    """
    decisions = {t.decision_entry_id for t in turns if t.decision_entry_id is not None}
    if len(decisions) < 2:
        return []
    slugs = {
        r["id"]: r["concept_slug"]
        for r in conn.execute(query("session", "entry_slugs"), {"ids": list(decisions)}).fetchall()
    }
    observed: list[EdgeObservation] = []
    for turn, following in zip(turns, turns[1:], strict=False):
        a, b = turn.decision_entry_id, following.decision_entry_id
        if a is None or b is None or a == b or UNANCHORED in (slugs.get(a), slugs.get(b)):
            continue
        if turn.outcome == rules.SUCCESS:
            observed.append(EdgeObservation(a, b, "leads_to"))
        elif turn.outcome == rules.FAILURE and following.outcome == rules.SUCCESS:
            observed.append(EdgeObservation(a, b, "fallback", fallback_condition(turn, slugs[a])))
    return observed


def fallback_condition(turn: Turn, failed_slug: str) -> str:
    """The condition of a recovery edge: what failed, and what the student was missing."""
    missing = sorted({s.missing_slug for s in turn.struggles if s.has_evidence})
    said = f" (missing {', '.join(missing)})" if missing else ""
    return f"the student did not get {failed_slug}{said}"


def propose_prerequisites(
    conn: Any, session: SessionPayload, plan: _Plan, dials: Mapping[str, Any], counts: SessionCounts
) -> list[EdgeObservation]:
    """Step 3: a `prerequisite` edge per struggle with evidence, struggled -> missing concept.

    Never from co-occurrence: only the extractor's explicit evidence counts. Both ends are
    the topic entries of the session's topic; a struggle naming a concept with no entry
    there (or the same entry twice) proposes nothing and is counted as unresolved.
    """
    counts.struggles_without_evidence += sum(
        1 for t in session.turns for s in t.struggles if not s.has_evidence
    )
    if not plan.struggle_slugs:
        return []
    wanted = sorted({slug for _, a, b in plan.struggle_slugs for slug in (a, b)})
    found = {
        r["concept_slug"]: r["id"]
        for r in conn.execute(
            query("session", "topic_entries_by_slug"),
            {
                "topic_id": session.topic_id,
                "scope": graph_scope("topic", session.learner_id, dials),
                "slugs": wanted,
            },
        ).fetchall()
    }
    observed = []
    for _, concept, missing in plan.struggle_slugs:
        source, target = found.get(concept), found.get(missing)
        if source is None or target is None or source == target:
            counts.struggles_unresolved += 1
            continue
        counts.struggles_proposed += 1
        observed.append(EdgeObservation(source, target, "prerequisite"))
    return observed


def _evidence_sources(observed: list[EdgeObservation], dials: Mapping[str, Any]) -> list[UUID]:
    """Under the lift rule, the concepts (entries) this session reports struggles on: every
    prerequisite out of them (their chance changed) or into them is re-weighed."""
    if dials["prerequisite_confidence_rule"] != "lift":
        return []
    return sorted({o.source_entry_id for o in observed if o.edge_type == "prerequisite"}, key=str)


def _lock_rows(
    conn: Any, turns: list[Turn], observed: list[EdgeObservation], sibling_sources: list[UUID]
) -> None:
    """Lock the existing entries and edges this session will write, in one sorted pass each
    (edges: graded, reinforced, and the sibling prerequisites the lift rule re-weighs)."""
    entry_ids = sorted({i for t in turns for i in _graded_entries(t)}, key=str)
    if entry_ids:
        conn.execute(query("session", "lock_entries"), {"ids": entry_ids}).fetchall()
    edge_ids = sorted({i for t in turns for i in t.rendered_edge_ids}, key=str)
    if edge_ids or observed:
        conn.execute(
            query("session", "lock_edges"),
            {
                "ids": edge_ids,
                "sources": [o.source_entry_id for o in observed],
                "targets": [o.target_entry_id for o in observed],
                "types": [o.edge_type for o in observed],
                "sibling_sources": sibling_sources,
            },
        ).fetchall()


def reinforce(
    conn: Any,
    session: SessionPayload,
    observed: list[EdgeObservation],
    dials: Mapping[str, Any],
    counts: SessionCounts,
    run_id: UUID | None,
) -> None:
    """Step 4: every observed edge through the one upsert: new at 0.3, or hit_count + 1 and
    raised to its floor. One observation per edge per session (the upsert dedups)."""
    if not observed:
        return
    results = upsert_edges(
        conn,
        observed,
        dials,
        source_type="learned",
        at=session.ended_at,
        session_id=session.session_id,
        run_id=run_id,
        reason="session reinforcement (discovery, prerequisite proposals)",
    )
    counts.edges_created += sum(1 for r in results if r.inserted)
    counts.edges_reinforced += sum(1 for r in results if not r.inserted)


def weigh_prerequisite_evidence(
    conn: Any,
    session: SessionPayload,
    sources: list[UUID],
    dials: Mapping[str, Any],
    counts: SessionCounts,
    run_id: UUID | None,
) -> None:
    """Step 4b (lift rule only): re-weigh the prerequisites around the concepts reported on.

    Every prerequisite out of a concept this session reported a struggle on (its chance
    changed) and into it (its reverse evidence changed) takes the confidence its reports
    earn: `rules.lift_confidence` for learned edges, `rules.unlearned_confidence` (negative
    evidence) for authored and enriched ones. The rows were locked by `_lock_rows` in the
    one sorted pass, the topic entry identities behind them by `lock_identities`, so
    sessions reporting on the same concept apply one after the other.
    """
    if not sources:
        return
    rows = conn.execute(
        query("session", "prerequisite_evidence"),
        {"sources": sources, "walk_min": dials["edge_min_confidence"]},
    ).fetchall()
    ids, confidences = [], []
    for r in rows:
        hits, reports, n = int(r["hit_count"]), int(r["concept_reports"]), int(r["n_concepts"])
        if r["source_type"] == "learned":
            against = rules.reverse_evidence(
                r["reverse_hits"], r["reverse_source_type"], r["reverse_confidence"], dials
            )
            paths = [(int(a), int(b), int(c)) for a, b, c in r["transitive_paths"] or ()]
            value = rules.lift_confidence(
                hits, reports, n, dials, against, rules.transitive_chance(paths)
            )
        else:
            value = rules.unlearned_confidence(
                float(r["confidence"]), hits, reports, n, dials, int(r["support_hits"])
            )
        ids.append(r["id"])
        confidences.append(value)
    say_why(
        conn,
        "prerequisite evidence (lift)",
        session_id=session.session_id,
        run_id=run_id,
        at=session.ended_at,
    )
    changed = conn.execute(
        query("session", "set_edge_confidences"),
        {"at": session.ended_at, "ids": ids, "confidences": confidences},
    ).fetchall()
    counts.edges_reweighed += len(changed)


def _graded_entries(turn: Turn) -> list[UUID]:
    """The entries a turn grades: every advisory that reached the prompt, and the decision."""
    ids = list(turn.used_entry_ids)
    if turn.decision_entry_id is not None:
        ids.append(turn.decision_entry_id)
    return list(dict.fromkeys(ids))


def grade_outcomes(
    conn: Any,
    session: SessionPayload,
    turns: list[Turn],
    dials: Mapping[str, Any],
    counts: SessionCounts,
    run_id: UUID | None,
) -> None:
    """Step 5: grade what reached the prompt by its turn's outcome, in turn order.

    Edges: +-0.05 within [0.05, 1], and one traversal per turn that rendered them. Entries:
    the asymmetric saturating rule (lr by maturity, the turn's strength), the success and
    failure counters, and `last_matched_at`. Turns without an outcome grade nothing but
    still count traversals and matches.
    """
    edge_outcomes: dict[UUID, list[str | None]] = defaultdict(list)
    entry_steps: dict[UUID, list[tuple[str | None, float]]] = defaultdict(list)
    default_strength = float(dials["outcome_strength_default"])
    for turn in turns:
        for edge_id in dict.fromkeys(turn.rendered_edge_ids):
            edge_outcomes[edge_id].append(turn.outcome)
        strength = default_strength if turn.outcome_strength is None else turn.outcome_strength
        for entry_id in _graded_entries(turn):
            entry_steps[entry_id].append((turn.outcome, strength))

    if edge_outcomes or entry_steps:  # one reason for every grading write of this session
        say_why(
            conn,
            "outcome grading",
            session_id=session.session_id,
            run_id=run_id,
            at=session.ended_at,
        )
    if edge_outcomes:
        shifts = _edge_shifts(conn, edge_outcomes, dials)
        ids = list(shifts)
        rows = conn.execute(
            query("session", "grade_edges"),
            {
                "at": session.ended_at,
                "ids": ids,
                "deltas": [shifts[i].delta for i in ids],
                "los": [shifts[i].lo for i in ids],
                "his": [shifts[i].hi for i in ids],
                "traversals": [len(edge_outcomes[i]) for i in ids],
            },
        ).fetchall()
        counts.edges_traversed += len(rows)
        counts.edges_missing += len(ids) - len(rows)  # culled since the tutor rendered them
        counts.edges_graded_up += sum(1 for r in rows if r["new_confidence"] > r["old_confidence"])
        counts.edges_graded_down += sum(
            1 for r in rows if r["new_confidence"] < r["old_confidence"]
        )

    if entry_steps:
        lr_proven = rules.learning_rate("proven", dials)
        lr_default = rules.learning_rate("candidate", dials)
        ids = list(entry_steps)
        proven = [rules.entry_grading(entry_steps[i], lr_proven) for i in ids]
        default = [rules.entry_grading(entry_steps[i], lr_default) for i in ids]
        rows = conn.execute(
            query("session", "grade_entries"),
            {
                "at": session.ended_at,
                "ids": ids,
                "scales_proven": [m.scale for m in proven],
                "shifts_proven": [m.shift for m in proven],
                "scales_default": [m.scale for m in default],
                "shifts_default": [m.shift for m in default],
                "successes": [sum(1 for o, _ in entry_steps[i] if o == rules.SUCCESS) for i in ids],
                "failures": [sum(1 for o, _ in entry_steps[i] if o == rules.FAILURE) for i in ids],
            },
        ).fetchall()
        counts.entries_graded += sum(1 for r in rows if r["new_confidence"] != r["old_confidence"])


def _edge_shifts(
    conn: Any, edge_outcomes: Mapping[UUID, list[str | None]], dials: Mapping[str, Any]
) -> dict[UUID, rules.ClampedShift]:
    """Each rendered edge's grading over the session, as one clamped shift.

    The seed's rules need nothing but the outcomes. The evidence rules read each edge's type,
    renderings and source concept's counters (the edges are locked by `_lock_rows`, their
    source entries are the turns' used entries, locked with them; read before this session's
    own counters move): prerequisites under the lift rule are not outcome-graded, and the
    baseline rule grades against the concept's smoothed success rate.
    """
    if dials["edge_grading_rule"] == "seed" and dials["prerequisite_confidence_rule"] == "seed":
        return {i: rules.edge_grading(o, dials) for i, o in edge_outcomes.items()}
    state = {
        r["id"]: r
        for r in conn.execute(
            query("session", "edge_grading_state"), {"ids": list(edge_outcomes)}
        ).fetchall()
    }
    shifts: dict[UUID, rules.ClampedShift] = {}
    for edge_id, outcomes in edge_outcomes.items():
        row = state.get(edge_id)
        if row is not None and not rules.outcome_graded(row["edge_type"], dials):
            shifts[edge_id] = rules.IDENTITY_SHIFT
        elif row is not None and dials["edge_grading_rule"] == "baseline":
            baseline = rules.smoothed_success_rate(
                int(row["success_count"]), int(row["failure_count"]), dials
            )
            shifts[edge_id] = rules.baseline_edge_grading(
                outcomes, baseline, int(row["traversal_count"]), dials
            )
        else:  # the seed's rule (or an edge culled since: the update finds nothing)
            shifts[edge_id] = rules.edge_grading(outcomes, dials)
    return shifts


# --- the queue -------------------------------------------------------------------------------


def apply_pending_session(
    conn: Any,
    dials: Mapping[str, Any],
    *,
    run_id: UUID | None,
    caches: Caches,
    summary: ProcessSummary,
    session_id: str | None = None,
) -> str | None:
    """Claim, apply and commit one pending session (the oldest, or the named one).

    Returns the session id applied (or rejected), None when nothing was pending. Retries a
    deadlock or serialization failure. Any other failure once a session is claimed (reading
    its payload, a database error in any step, a bug) rolls it back and rejects that session
    with the reason, so the sessions behind it are still applied; only a lost connection,
    which can record nothing, is raised.
    """
    attempts = 0
    while True:
        claimed: str | None = None
        try:
            if session_id is None:
                row = conn.execute(query("session", "claim_next_session")).fetchone()
            else:
                row = conn.execute(
                    query("session", "claim_session"), {"session_id": session_id}
                ).fetchone()
            if row is None:
                conn.rollback()
                return None
            claimed = row["session_id"]
            text = conn.execute(
                query("session", "claimed_payload"), {"session_id": claimed}
            ).fetchone()["payload_text"]
            session = SessionPayload.model_validate_json(text)
            check_session(conn, session, dials)
            counts = apply_session(
                conn,
                session,
                dials,
                run_id=run_id,
                caches=caches,
                step_seconds=summary.step_seconds,
            )
            conn.execute(
                query("session", "mark_processed"),
                {"session_id": claimed, "run_id": run_id, "summary": json.dumps(counts.as_dict())},
            )
            conn.commit()
            summary.add(counts)
            return claimed
        except _RETRYABLE:
            conn.rollback()
            attempts += 1
            summary.retries += 1
            if attempts > dials["session_max_retries"]:
                raise
            time.sleep(random.uniform(0, 0.005 * attempts))  # de-synchronise the retriers
        except Exception as exc:
            if claimed is None or getattr(conn, "broken", False) or getattr(conn, "closed", False):
                raise
            conn.rollback()
            reason = f"cannot be applied: {_one_line(exc)}"
            # The claim's lock ended with the rollback: another worker may have rejected it.
            if reject_session(conn, claimed, reason, run_id, dials):
                summary.rejects += 1
                summary.rejected.append({"session_id": claimed, "reason": reason})
            conn.commit()
            return claimed


class SessionRefused(HagError):
    """A queued session breaks a rule that ingest also enforces (checked again when applied)."""


def check_session(conn: Any, session: SessionPayload, dials: Mapping[str, Any]) -> None:
    """Hold a queued session to the ingest rules that depend on the memory or the dials, which
    may have changed since it was queued: every entry it names (an edge's ends included) is
    readable by its learner in its topic, and its time is within bounds."""
    from hag.session.ingest import named_ids, unreadable

    problem = bounds.timestamp_problem(session.ended_at, dials)
    if problem:
        raise SessionRefused(f"ended_at: {problem}")
    entries, edges = named_ids(session)
    if edges:
        for row in conn.execute(
            query("session", "known_edge_ids"), {"ids": list(edges)}
        ).fetchall():
            field, turn_index = edges[row["id"]]
            for end in ("source_entry_id", "target_entry_id"):
                entries.setdefault(row[end], (field, turn_index))
    denied = unreadable(conn, session, entries, dials)
    if denied:
        raise SessionRefused(denied[0])


def reject_session(
    conn: Any, session_id: str, reason: str, run_id: UUID | None, dials: Mapping[str, Any]
) -> bool:
    """Mark a pending session `rejected` with the reason and quarantine its payload; False
    when it is no longer pending (another worker finished it first)."""
    from hag.session.ingest import Refusal, quarantine

    row = conn.execute(
        query("session", "reject_session"),
        {"session_id": session_id, "run_id": run_id, "reason": reason},
    ).fetchone()
    if row is None:
        return False
    quarantine(conn, row["payload_text"], Refusal(reason), "process-sessions", session_id, dials)
    return True


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def process_batch(
    size: int,
    *,
    run_id: UUID | None = None,
    workers: int = 1,
    dials: Mapping[str, Any] | None = None,
    caches: Caches | None = None,
) -> ProcessSummary:
    """Apply up to `size` pending sessions, each in its own transaction, with N workers."""
    from hag import db, settings

    dials = dials or settings.current()
    caches = caches or Caches()
    budget = _Budget(size)
    summaries = [ProcessSummary(run_id=run_id) for _ in range(max(1, workers))]
    start = time.perf_counter()

    def work(summary: ProcessSummary) -> None:
        with db.pool().connection() as conn:
            while budget.take():
                if (
                    apply_pending_session(
                        conn, dials, run_id=run_id, caches=caches, summary=summary
                    )
                    is None
                ):
                    budget.close()

    if len(summaries) == 1:
        work(summaries[0])
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(summaries)) as pool:
            for future in [pool.submit(work, s) for s in summaries]:
                future.result()
    total = ProcessSummary(run_id=run_id)
    for s in summaries:
        total.merge(s)
    total.seconds = time.perf_counter() - start
    return total


class _Budget:
    """How many more sessions this batch may claim (shared by its workers)."""

    def __init__(self, size: int):
        self._left = size
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return True

    def close(self) -> None:
        with self._lock:
            self._left = 0


def process_pending(
    batch_size: int | None = None,
    limit: int | None = None,
    *,
    workers: int = 1,
    run_id: UUID | None = None,
    on_batch: Callable[[ProcessSummary], None] | None = None,
    run_batch: Callable[[UUID, int], ProcessSummary] | None = None,
    flow_run_id: UUID | str | None = None,
) -> ProcessSummary:
    """Apply pending sessions in batches until none is left (or `limit` were taken).

    Records a `hag_runs` row of kind 'session_end' (done or failed) unless the caller passes
    its own run id. A single worker applies sessions in `ended_at` order. `run_batch(run_id,
    size)` applies one batch (the flow passes its Prefect task); by default `process_batch`.
    A run of its own holds its liveness lock while it works, and marks runs left `running`
    by a dead process `abandoned` first (hag/runs.py); `flow_run_id` is recorded on its row.
    """
    from hag import runs, settings

    dials = settings.current()
    size = int(batch_size or dials["session_batch_size"])
    if run_id is not None:
        return _process_pending(run_id, False, size, limit, workers, dials, on_batch, run_batch)
    run = uuid.uuid4()
    with runs.alive(run):  # held before the row exists: no reaper ever sees it unheld
        open_run({"batch_size": size, "limit": limit, "workers": workers}, run, flow_run_id)
        return _process_pending(run, True, size, limit, workers, dials, on_batch, run_batch)


def _process_pending(
    run: UUID,
    own_run: bool,
    size: int,
    limit: int | None,
    workers: int,
    dials: Any,
    on_batch: Callable[[ProcessSummary], None] | None,
    run_batch: Callable[[UUID, int], ProcessSummary] | None,
) -> ProcessSummary:
    total = ProcessSummary(run_id=run)
    caches = Caches()

    def apply(want: int) -> ProcessSummary:
        if run_batch is not None:
            return run_batch(run, want)
        return process_batch(want, run_id=run, workers=workers, dials=dials, caches=caches)

    start = time.perf_counter()
    status = "failed"
    try:
        drain(apply, size, limit, total, on_batch)
        status = "done"
    finally:
        total.seconds = time.perf_counter() - start
        if own_run:
            close_run(run, total, status)
    return total


def drain(
    run_batch: Callable[[int], ProcessSummary],
    size: int,
    limit: int | None,
    total: ProcessSummary,
    on_batch: Callable[[ProcessSummary], None] | None = None,
) -> ProcessSummary:
    """Run batches of `size` until a batch comes back short (the queue is empty) or `limit`."""
    while limit is None or total.sessions + total.rejects < limit:
        want = size if limit is None else min(size, limit - total.sessions - total.rejects)
        batch = run_batch(want)
        total.merge(batch)
        if on_batch is not None:
            on_batch(batch)
        if batch.sessions + batch.rejects < want:
            break
    return total


def open_run(
    params: Mapping[str, Any], run_id: UUID | None = None, flow_run_id: UUID | str | None = None
) -> UUID:
    """A new `hag_runs` row of kind 'session_end' (after marking dead runs abandoned)."""
    from hag import db, runs

    with db.pool().connection() as conn:
        runs.reap(conn, keep=(run_id,) if run_id else ())
        row = conn.execute(
            query("session", "open_run"),
            {
                "run_id": run_id or uuid.uuid4(),
                "kind": RUN_KIND,
                "params": json.dumps(dict(params), default=str),
                "flow_run_id": str(flow_run_id) if flow_run_id else None,
            },
        ).fetchone()
    return row["run_id"]  # type: ignore[no-any-return]


def close_run(run_id: UUID | None, summary: ProcessSummary, status: str = "done") -> None:
    """Record a run's summary and end."""
    from hag import db

    if run_id is None:
        return
    with db.pool().connection() as conn:
        conn.execute(
            query("session", "close_run"),
            {"run_id": run_id, "status": status, "summary": json.dumps(summary.as_dict())},
        )


def pending_count(conn: Any) -> int:
    return int(conn.execute(query("session", "count_pending")).fetchone()["pending"])


def render_markdown(summary: ProcessSummary) -> str:
    """The run summary an operator reads in the Prefect UI (no links)."""
    rate = summary.sessions / summary.seconds * 60 if summary.seconds else 0.0
    lines = [
        f"# Session-end run {summary.run_id}",
        "",
        f"{summary.sessions} session(s) applied, {summary.rejects} rejected, "
        f"{summary.retries} retried, in {summary.seconds:.1f} s ({rate:,.0f} sessions/min).",
        "",
        "| what | count |",
        "| --- | ---: |",
        *(
            f"| {name.replace('_', ' ')} | {value} |"
            for name, value in SessionCounts.as_dict(summary).items()
        ),
        "",
        "| step | seconds |",
        "| --- | ---: |",
        *(f"| {step} | {seconds:.2f} |" for step, seconds in summary.step_seconds.items()),
    ]
    if summary.rejected:
        lines += [
            "",
            "## Rejected sessions",
            "",
            *(f"- `{r['session_id']}`: {r['reason']}" for r in summary.rejected),
        ]
    return "\n".join(lines) + "\n"


def summary_table(summary: ProcessSummary) -> list[dict[str, Any]]:
    """The counts as table rows (a Prefect table artifact)."""
    rows = [{"what": k, "count": v} for k, v in SessionCounts.as_dict(summary).items()]
    return rows + [
        {"what": "rejects", "count": summary.rejects},
        {"what": "retries", "count": summary.retries},
    ]
