"""The simulation driver: days pass, learners hold sessions, the memory's own jobs run.

Each simulated day: every session of the day is played against the memory as it stood that
morning (the tutor only reads), its payload is ingested; then session-end processing runs
(directly, or through the Prefect flow once per day), then the nightly sweeps with
`as_of` = the end of that day, and enrichment every few days. A read-only snapshot of the
topic graph and the lifecycle counts is taken after each day for the report.

Nothing here writes to the memory except `ingest_payload` and those jobs. Everything random
comes from one `numpy.random.Generator` seeded from `SimulationConfig.seed`, drawn in a fixed
order, so a seed reproduces the sessions (and, on the same starting memory, the figures).
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from hag.session.contract import SessionPayload
from hag.session.facts import shown_concepts
from hag.session.ladder import Catalogue, candidate_slug
from hag.session.rules import shown_walk, turn_struggles
from hag.storage.db import Conn, one
from hag.storage.sqlfiles import query
from hag.support.orchestration import flow
from hag_lab.simulate.learners import Learner, OutcomeModel, make_learners
from hag_lab.simulate.tutor import (
    CRYPTO_DRIFT,
    Extractor,
    TutorPolicy,
    Use,
    give_misconceptions,
    run_session,
)
from hag_lab.simulate.world import CRYPTOGRAPHY, World

DEFAULT_START = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SimulationConfig:
    learners: int = 40
    sessions: int = 2000
    days: int = 42
    p_miss: float = 0.1
    p_false: float = 0.05
    noise_kind: str = "uniform"  # where invented reports point (tutor.py's Extractor)
    # the persistent error kinds (issue 29), drawn from their own stream (`error_stream`):
    p_repeat_session: float = 0.0  # sessions whose extractor repeats one misread pair
    misconception_share: float = 0.0  # learners who name one wrong prerequisite every failure
    misconception_shared: bool = False  # those learners all hold one pair (give_misconceptions)
    profile: str | None = None  # rule profile set on the memory before the run (None: as is)
    seed: int = 7
    start: datetime = DEFAULT_START
    model: OutcomeModel = field(default_factory=OutcomeModel)
    policy: TutorPolicy = field(default_factory=TutorPolicy)
    nightly: bool = True
    enrich_every_days: int = 0  # 0: never
    use_flows: bool = False

    def describe(self) -> dict[str, Any]:
        d = asdict(self)
        d["start"] = self.start.isoformat()
        return d


@dataclass
class DaySnapshot:
    day: int
    at: datetime
    sessions: int
    edges: list[dict[str, Any]]
    maturity: dict[str, dict[str, int]]
    audit: list[dict[str, Any]]
    enrichment: dict[str, int]
    turns: int = 0
    successes: int = 0
    decisions: int = 0  # turns whose taught concept had an advisory to act on
    visible_entries: int = 0
    topic_entries: int = 0
    process: dict[str, Any] = field(default_factory=dict)
    nightly: dict[str, Any] = field(default_factory=dict)
    enrich: dict[str, Any] = field(default_factory=dict)


@dataclass
class SimulationRun:
    config: SimulationConfig
    world: World
    learners: list[Learner]
    before: DaySnapshot
    days: list[DaySnapshot] = field(default_factory=list)
    uses: list[Use] = field(default_factory=list)
    struggles: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (c, m, kind)
    # the persistent error kinds: reports per kind, sessions that repeated a misreading
    error_reports: Counter[str] = field(default_factory=Counter)
    repeating_sessions: int = 0
    # per reported pair: the learners who named it before they had shown its missing concept
    # (the reports the units rule keeps as evidence)
    unshown_namers: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    # per true pair (c, m): the learners who failed a turn on c while lacking m and before the
    # memory had seen them succeed on m (who could have had a report of c -> m kept)
    lacking_unshown: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    sessions: int = 0
    turns: int = 0
    successes: int = 0
    quarantined: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def end(self) -> DaySnapshot:
        return self.days[-1] if self.days else self.before

    def note_reports(
        self,
        conn: Conn,
        payload: Mapping[str, Any],
        catalogue: Catalogue,
        lacking: Sequence[tuple[int, str, str]] = (),
    ) -> None:
        """One session the memory accepted, read as the units rule reads it whatever the run's
        profile: its learner's earlier successes (`facts.shown_concepts`, the rows ingest
        wrote) and `rules.turn_struggles` over its turns (the struggles at turns about their
        concept, `rules.on_turn_pairs`); each struggle the rule keeps adds its learner to
        the pair's `unshown_namers`. Each (turn, c, m) of `lacking` (its learner lacked m on a
        failed turn on c) adds the learner to the pair's `lacking_unshown`, unless it had
        shown m by that turn (`rules.shown_walk`, the rule's own "shown"): a report of c -> m
        from such a learner is dropped (`prerequisite_drop_shown`), so only the others could
        have defended c -> m."""
        session = SessionPayload.model_validate_json(json.dumps(payload))  # as ingest reads it
        shown = shown_concepts(conn, session)
        turns = session.ordered_turns()
        for pairs in turn_struggles(turns, catalogue, shown).per_turn:
            for pair in pairs:
                key = (pair.concept_slug, pair.missing_slug)
                self.unshown_namers.setdefault(key, set()).add(session.learner_id)
        if not lacking:
            return
        had = {step.turn.turn_index: set(step.had) for step in shown_walk(turns, catalogue, shown)}
        for turn, c, m in lacking:
            if candidate_slug(m, catalogue) not in had[turn]:
                self.lacking_unshown.setdefault((c, m), set()).add(session.learner_id)

    def lacking_counts(self) -> dict[tuple[str, str], int]:
        """Per true pair (c, m): the learners in its `lacking_unshown`."""
        return {pair: len(who) for pair, who in self.lacking_unshown.items()}

    def struggle_table(self) -> list[dict[str, Any]]:
        """Per (concept, missing): true struggles, reported true ones, invented ones, and the
        learners who named it before they had shown the missing concept."""
        pairs = sorted({(c, m) for c, m, _ in self.struggles})
        return [
            {
                "concept": c,
                "missing": m,
                "true": self.struggles[(c, m, "true")],
                "reported_true": self.struggles[(c, m, "reported_true")],
                "reported_false": self.struggles[(c, m, "reported_false")],
                "unshown_learners": len(self.unshown_namers.get((c, m), ())),
            }
            for c, m in pairs
        ]


class Progress:
    """Progress on stderr (no dependency); silent when `enabled` is false.

    On a terminal: one bar redrawn in place. Off a terminal (a log file, a pipe): plain
    lines, one per tenth of the work, never a carriage return.
    """

    PLAIN_LINES = 10  # lines a whole run writes off a terminal (presentation, not behaviour)

    def __init__(self, label: str, total: int, enabled: bool = True):
        self.label, self.total, self.enabled = label, max(1, total), enabled
        self.started = time.monotonic()
        self.last = 0.0
        self.tty = sys.stderr.isatty()
        self.plain_step = 0

    def update(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not self.tty:
            step = done * self.PLAIN_LINES // self.total
            if step > self.plain_step:
                self.plain_step = step
                sys.stderr.write(
                    f"{self.label}: {done}/{self.total} {note} {now - self.started:.0f}s\n"
                )
                sys.stderr.flush()
            return
        if now - self.last < 0.2 and done < self.total:
            return
        self.last = now
        width = 28
        filled = int(width * done / self.total)
        sys.stderr.write(
            f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] "
            f"{done}/{self.total} {note} {now - self.started:5.0f}s "
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _plain(value: Any) -> dict[str, Any]:
    """A job's summary object as a plain dict (dataclass, pydantic, as_dict or mapping)."""
    if value is None:
        return {}
    for attr in ("as_dict", "model_dump"):
        fn = getattr(value, attr, None)
        if callable(fn):
            out = fn()
            if isinstance(out, Mapping):
                return dict(out)
    if isinstance(value, Mapping):
        return dict(value)
    try:
        return asdict(value)
    except TypeError:
        return {"value": repr(value)}


def snapshot(conn: Conn, world: World, day: int, at: datetime, sessions: int) -> DaySnapshot:
    """A read of the topic graph and the lifecycle counts as they stand."""
    edges = [
        dict(r)
        for r in conn.execute(query("simulate", "topic_edges"), {"topic_id": world.topic_id})
    ]
    maturity: dict[str, dict[str, int]] = {}
    for r in conn.execute(query("simulate", "maturity_counts")):
        maturity.setdefault(r["graph"], {})[r["maturity"]] = int(r["n"])
    audit = [dict(r) for r in conn.execute(query("simulate", "audit_counts"))]
    enrichment = {
        k: int(v)
        for k, v in one(conn.execute(query("simulate", "enrichment_totals")).fetchone()).items()
    }
    visible = one(
        conn.execute(
            query("simulate", "visible_topic_entries"), {"topic_id": world.topic_id}
        ).fetchone()
    )
    conn.rollback()
    return DaySnapshot(
        day,
        at,
        sessions,
        edges,
        maturity,
        audit,
        enrichment,
        visible_entries=int(visible["visible"]),
        topic_entries=int(visible["entries"]),
    )


def _schedule(
    config: SimulationConfig, rng: np.random.Generator
) -> list[list[tuple[int, datetime]]]:
    """Per day: (learner index, ended_at) of each session, in time order, times unique."""
    per_day = [
        config.sessions // config.days + (1 if d < config.sessions % config.days else 0)
        for d in range(config.days)
    ]
    out = []
    for d, n in enumerate(per_day):
        day_start = config.start + timedelta(days=d, hours=8)
        who = rng.integers(config.learners, size=n)
        # spread over 14 hours, one second apart at least, so ended_at orders them exactly
        offsets = np.sort(rng.choice(14 * 3600, size=n, replace=False))
        out.append(
            [
                (int(w), day_start + timedelta(seconds=int(s)))
                for w, s in zip(who, offsets, strict=True)
            ]
        )
    return out


class _Memory:
    """The memory's entry points the simulator may use, imported lazily (other modules)."""

    def __init__(self, use_flows: bool):
        from hag.retrieval import retrieve
        from hag.session.ingest import ingest_payload

        self.retrieve = retrieve
        self.ingest_payload = ingest_payload
        self.use_flows = use_flows

    def process(self) -> Any:
        if self.use_flows:
            # the suites run once at the end of an experiment, not after every simulated day
            return flow("session-end")(check=False)
        from hag.session.outcome import SessionsFailed
        from hag.session.process import process_pending

        summary = process_pending()
        if summary.failures:  # as the flow does: a simulation never goes on past a lost session
            raise SessionsFailed(summary.failures)
        return summary

    def nightly(self, as_of: datetime) -> Any:
        if self.use_flows:
            # a simulation never pauses; the suites run once at the end, as for session-end
            return flow("nightly")(as_of=as_of, ask_operator=False, check=False)
        from hag.nightly.sweeps import nightly

        return nightly(as_of)  # the flow's steps, upkeep included

    def enrich(self, topic: str, as_of: datetime) -> Any:
        if self.use_flows:
            return flow("enrichment")(topic=topic, as_of=as_of)
        from hag.enrichment import enrich

        return enrich(topic=topic, as_of=as_of)

    def forget_cached_reads(self) -> None:
        """The memory changed overnight: yesterday's cached retrieval answers are stale."""
        from hag.retrieval import clear_caches

        clear_caches()


def error_stream(seed: int) -> np.random.Generator:
    """The persistent error kinds' own random stream: turning them on leaves the learners,
    the schedule and every other draw of the main stream as they were."""
    return np.random.default_rng([seed, 29])


def simulate(
    world: World,
    config: SimulationConfig,
    *,
    progress: bool = True,
) -> SimulationRun:
    """Run the whole simulation against the configured database and return what happened."""
    from hag.storage import db

    rng = np.random.default_rng(config.seed)
    learners = make_learners(world, config.learners, rng, config.model)
    schedule = _schedule(config, rng)
    memory = _Memory(config.use_flows)
    extractor = Extractor(config.p_miss, config.p_false, config.noise_kind, config.p_repeat_session)
    errors = error_stream(config.seed)
    give_misconceptions(
        learners,
        world,
        config.misconception_share,
        extractor,
        errors,
        shared=config.misconception_shared,
    )
    drift = CRYPTO_DRIFT if world.topic_id == CRYPTOGRAPHY else ()

    with db.connect() as conn:
        before = snapshot(conn, world, -1, config.start, 0)
        run = SimulationRun(config, world, learners, before)

        # Edges as the day's sessions see them: the last snapshot (taken after the night's
        # jobs; nothing writes an edge before the day's processing). Only edges outside the
        # topic graph it holds are read from the database.
        known: dict[str, tuple[float, str]] = {}

        def edge_info(ids: Sequence[str]) -> dict[str, tuple[float, str]]:
            found = {i: known[i] for i in ids if i in known}
            missing = [i for i in ids if i not in known]
            if missing:
                rows = conn.execute(query("simulate", "edge_info"), {"ids": missing}).fetchall()
                conn.rollback()
                found.update(
                    {str(r["id"]): (float(r["confidence"]), r["source_type"]) for r in rows}
                )
            return found

        bar = Progress("simulating", config.sessions, progress)
        for day, sessions in enumerate(schedule):
            t0 = time.monotonic()
            memory.forget_cached_reads()
            known.clear()
            known.update(
                (str(e["id"]), (float(e["confidence"]), e["source_type"])) for e in run.end.edges
            )
            entry_concepts = {
                str(r["id"]): r["concept_slug"]
                for r in conn.execute(
                    query("simulate", "topic_entry_concepts"), {"topic_id": world.topic_id}
                )
            }
            catalogue = Catalogue.load(conn, world.topic_id)  # names as session-end reads them
            conn.rollback()
            day_turns = day_successes = day_decisions = 0
            for k, (who, ended_at) in enumerate(sessions):
                record = run_session(
                    retrieve=memory.retrieve,
                    world=world,
                    learner=learners[who],
                    model=config.model,
                    extractor=extractor,
                    policy=config.policy,
                    rng=rng,
                    session_id=f"sim{config.seed}-d{day:03d}-s{k:03d}",
                    ended_at=ended_at,
                    day=day,
                    entry_concepts=entry_concepts,
                    edge_info=edge_info,
                    drift=drift,
                    error_rng=errors,
                )
                result = memory.ingest_payload(conn, record.payload, source="simulator")
                if (
                    getattr(result, "quarantined", False)
                    or getattr(result, "accepted", True) is False
                ):
                    run.quarantined += 1
                else:  # what the memory holds: its successes and reports
                    run.note_reports(conn, record.payload, catalogue, record.lacking)
                conn.commit()
                run.uses.extend(record.uses)
                for c, m in record.true_struggles:
                    run.struggles[(c, m, "true")] += 1
                for c, m, is_true in record.reported_struggles:
                    run.struggles[(c, m, "reported_true" if is_true else "reported_false")] += 1
                for _, _, kind in record.error_reports:
                    run.error_reports[kind] += 1
                run.repeating_sessions += int(record.misread is not None)
                run.sessions += 1
                run.turns += record.turns
                run.successes += record.successes
                day_turns += record.turns
                day_successes += record.successes
                day_decisions += sum(1 for t in record.payload["turns"] if t["decision_entry_id"])
                bar.update(run.sessions, f"day {day + 1}/{config.days}")
            t1 = time.monotonic()
            processed = memory.process()
            t2 = time.monotonic()
            day_end = config.start + timedelta(days=day + 1)
            nightly = memory.nightly(day_end) if config.nightly else None
            t3 = time.monotonic()
            enriched = None
            if config.enrich_every_days and (day + 1) % config.enrich_every_days == 0:
                enriched = memory.enrich(world.topic_id, day_end)
            t4 = time.monotonic()
            snap = snapshot(conn, world, day, day_end, len(sessions))
            snap.process, snap.nightly, snap.enrich = (
                _plain(processed),
                _plain(nightly),
                _plain(enriched),
            )
            snap.turns, snap.successes, snap.decisions = day_turns, day_successes, day_decisions
            run.days.append(snap)
            for key, seconds in (
                ("sessions", t1 - t0),
                ("processing", t2 - t1),
                ("nightly", t3 - t2),
                ("enrichment", t4 - t3),
            ):
                run.seconds[key] = run.seconds.get(key, 0.0) + seconds
        bar.close()
    return run
