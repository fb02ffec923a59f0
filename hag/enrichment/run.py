"""`enrich(...)`: one enrichment run over the orphans (SPEC §6), and what it reports.

For each orphan, oldest first: build a bounded prompt → ask the proposer (within the
attempt budget) → read the facts and validate → write the accepted edges, the ledger row
and the calls in ONE transaction → report. The model is called with no transaction open,
so no lock or snapshot waits on the network. A dry run does all of it but the writes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import psycopg

from hag import settings
from hag.enrichment import graph
from hag.enrichment.prompt import Orphan, Prompt, build_prompt
from hag.enrichment.proposers import Proposer, ProposerError, choose_proposer
from hag.enrichment.validate import (
    Accepted,
    Proposal,
    Rejected,
    ReplyError,
    decide,
    named_slugs,
    normalise,
    parse_reply,
)
from hag.errors import NotFoundError, ValidationError
from hag.evidence import store as evidence
from hag.settings import Settings
from hag.storage import db, runs
from hag.storage.db import Conn
from hag.storage.edges import EdgeObservation, upsert_edges
from hag.support import bounds


@dataclass(frozen=True)
class Call:
    """One model call, as the cost ledger (hag_llm_calls) keeps it."""

    entry_id: UUID
    concept_slug: str
    attempt: int
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    ok: bool
    error: str | None
    at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "entry_id": str(self.entry_id), "at": self.at.isoformat()}

    def cost_usd(self, prices: Mapping[str, tuple[float, float]]) -> float | None:
        """What the call cost at its model's price per million tokens (None: unpriced)."""
        price = prices.get(self.model)
        if price is None:
            return None
        return (self.prompt_tokens * price[0] + self.completion_tokens * price[1]) / 1e6


def model_prices(items: list[str]) -> dict[str, tuple[float, float]]:
    """The enrichment_prices_usd_per_million_tokens dial as {model: (prompt, completion)}."""
    prices = {}
    for item in items:
        model, prompt, completion = item.rsplit(":", 2)
        prices[model] = (float(prompt), float(completion))
    return prices


@dataclass
class OrphanResult:
    """What became of one orphan: enriched, nothing_accepted, failed, or taken (by another run)."""

    entry_id: UUID
    topic_id: str
    concept_slug: str
    status: str
    candidates: int
    prompt_chars: int
    attempts: int = 0
    error: str | None = None
    accepted: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "entry_id": str(self.entry_id)}


@dataclass
class EnrichmentSummary:
    run_id: UUID
    dry_run: bool
    proposer: str
    offline: bool
    proposer_line: str
    topic: str | None
    limit: int
    already_enriched: int
    started_at: datetime
    finished_at: datetime | None = None
    orphans: list[OrphanResult] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)

    def count(self, status: str) -> int:
        return sum(1 for o in self.orphans if o.status == status)

    @property
    def accepted(self) -> int:
        return sum(len(o.accepted) for o in self.orphans)

    @property
    def rejected(self) -> int:
        return sum(len(o.rejected) for o in self.orphans)

    @property
    def failed(self) -> int:
        return self.count("failed")

    def cost(self) -> dict[str, Any]:
        """Per-run totals of the cost ledger: calls, tokens as the server reported them, their
        price (USD; None when a call's model has no price), time in whole milliseconds."""
        prompt = sum(c.prompt_tokens for c in self.calls)
        completion = sum(c.completion_tokens for c in self.calls)
        costs = [c.cost_usd(self.prices) for c in self.calls]
        priced = [c for c in costs if c is not None]
        return {
            "model": self.proposer,
            "calls": len(self.calls),
            "failed_calls": sum(1 for c in self.calls if not c.ok),
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "cost_usd": sum(priced) if len(priced) == len(costs) else None,
            "latency_ms": round(sum(c.latency_ms for c in self.calls)),
        }

    def totals(self) -> dict[str, Any]:
        return {
            "orphans": len(self.orphans),
            "enriched": self.count("enriched"),
            "nothing_accepted": self.count("nothing_accepted"),
            "failed": self.failed,
            "taken": self.count("taken"),
            "already_enriched": self.already_enriched,
            "accepted": self.accepted,
            "rejected": self.rejected,
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            # A dry run records nothing: no run id is shown that could not be looked up.
            "run_id": None if self.dry_run else str(self.run_id),
            "dry_run": self.dry_run,
            "proposer": self.proposer,
            "offline": self.offline,
            "proposer_line": self.proposer_line,
            "topic": self.topic,
            "limit": self.limit,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "totals": self.totals(),
            "cost": self.cost(),
            "orphans": [o.as_dict() for o in self.orphans],
            "calls": [c.as_dict() for c in self.calls],
        }


def _now() -> datetime:
    return datetime.now(UTC)


def ask(
    proposer: Proposer,
    prompt: Prompt,
    orphan: Orphan,
    dials: Settings,
) -> tuple[list[Proposal | Rejected] | None, list[Call], str | None]:
    """The reply's proposals within the attempt budget, every call made, and the last error.

    A call that errors, times out or answers something that is not the expected JSON is
    retried after a doubling pause, up to `enrichment_max_attempts` calls; an error that
    another attempt cannot cure (a refused key, an unknown model) stops at once.
    """
    calls: list[Call] = []
    error: str | None = None
    attempts = dials.enrichment_max_attempts
    backoff = dials.enrichment_retry_backoff_seconds
    for attempt in range(1, attempts + 1):
        at, started = _now(), time.perf_counter()
        completion, items, retry = None, None, True
        try:
            completion = proposer.complete(prompt)
        except ProposerError as exc:
            error, retry = str(exc), exc.retryable
        else:
            try:
                items, error = parse_reply(completion.content), None
            except ReplyError as exc:
                error = f"unusable reply: {exc}"
        latency = (time.perf_counter() - started) * 1000
        tokens = (completion.prompt_tokens, completion.completion_tokens) if completion else (0, 0)
        calls.append(
            Call(
                orphan.entry_id,
                orphan.concept_slug,
                attempt,
                proposer.name,
                *tokens,
                latency,
                error is None,
                error,
                at,
            )
        )
        if error is None and items is not None:
            return normalise(items), calls, None
        if not retry:
            break
        if attempt < attempts and backoff > 0:
            time.sleep(backoff * 2 ** (attempt - 1))
    return None, calls, error


def _record_calls_alone(conn: Conn, run_id: UUID, calls: list[Call]) -> None:
    """A failed orphan writes nothing but its calls: they were made, and may have cost."""
    graph.record_calls(conn, run_id, [c.__dict__ for c in calls])
    conn.commit()


def enrich_orphan(
    conn: Conn,
    orphan: Orphan,
    proposer: Proposer,
    dials: Settings,
    run_id: UUID,
    dry_run: bool,
    unstored: list[Accepted],
    as_of: datetime | None = None,
) -> tuple[OrphanResult, list[Call]]:
    """Ask for, validate and (unless a dry run) write the edges of one orphan, all or nothing."""
    candidates = graph.select_candidates(conn, orphan, dials.enrichment_candidate_count)
    prompt = build_prompt(orphan, candidates, dials)
    conn.rollback()  # end the read: nothing is held open while the model thinks
    result = OrphanResult(
        orphan.entry_id,
        orphan.topic_id,
        orphan.concept_slug,
        "failed",
        len(prompt.candidates),
        prompt.chars,
    )
    proposals, calls, error = ask(proposer, prompt, orphan, dials)
    result.attempts = len(calls)
    if proposals is None:
        result.error = f"gave up after {len(calls)} attempt(s): {error}"
        if not dry_run:
            _record_calls_alone(conn, run_id, calls)
        return result, calls

    at = as_of or _now()  # the event time of the edges (a replay or simulation passes its own)
    try:
        if not dry_run and not graph.claim_orphan(conn, orphan, proposer.name, run_id, at):
            conn.rollback()
            result.status, result.error = (
                "taken",
                "another run enriched it with this model meanwhile",
            )
            _record_calls_alone(conn, run_id, calls)
            return result, calls
        facts = graph.graph_facts(
            conn, orphan, named_slugs(orphan, proposals), unstored if dry_run else ()
        )
        accepted, rejected = decide(
            orphan,
            proposals,
            facts,
            list(dials.enrichment_allowed_types),
            dials.enrichment_max_proposals_per_orphan,
        )
        result.accepted = [a.as_dict() for a in accepted]
        result.rejected = [r.as_dict() for r in rejected]
        result.status = "enriched" if accepted else "nothing_accepted"
        if dry_run:
            conn.rollback()
            unstored.extend(accepted)
            return result, calls
        written = upsert_edges(
            conn,
            [
                EdgeObservation(a.source_entry_id, a.target_entry_id, a.proposal.edge_type)
                for a in accepted
            ],
            dials,
            source_type="enriched",
            at=at,
            run_id=run_id,
            new_confidence=dials.enrichment_confidence,
            reason=f"enriched by {proposer.name}",
        )
        evidence.flag_written_prerequisites(
            conn,
            [
                (a.source_entry_id, a.target_entry_id)
                for a in accepted
                if a.proposal.edge_type == "prerequisite"
            ],
            dials,
            at,
        )
        edge_ids = {w.identity: str(w.id) for w in written}
        for a, shown in zip(accepted, result.accepted, strict=True):
            shown["edge_id"] = edge_ids.get(a.identity)
        graph.settle_orphan(
            conn,
            orphan,
            proposer.name,
            len(accepted),
            len(rejected),
            {
                "run_id": str(run_id),
                "accepted": result.accepted,
                "rejected": result.rejected,
                "candidates": [c.slug for c in prompt.candidates],
                "prompt_chars": prompt.chars,
            },
        )
        graph.record_calls(conn, run_id, [c.__dict__ for c in calls])
        conn.commit()
    except psycopg.Error as exc:
        # e.g. an entry deleted under us: this orphan writes nothing, the run goes on.
        conn.rollback()
        result.status, result.accepted, result.rejected = "failed", [], []
        result.error = f"not written: {str(exc).strip().splitlines()[0]}"
        if not dry_run:
            _record_calls_alone(conn, run_id, calls)
    return result, calls


def enrich(
    topic: str | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    model: str | None = None,
    *,
    as_of: datetime | None = None,
    conn: Conn | None = None,
    flow_run_id: UUID | str | None = None,
) -> EnrichmentSummary:
    """Wire orphan concepts into their topic's graph; returns what was proposed, kept and paid.

    `conn` (optional) is used and committed once per orphan; by default a new connection
    is made and closed. A dry run reads, asks and validates, and writes nothing at all.
    `as_of` is the moment the accepted edges are created at (default: now), so a backfill or
    a simulation stamps them with its own time, as sessions do with their `ended_at`. It
    lies within `timestamp_window_years` of now, like every moment that enters (docs/bounds.md).
    Under a Prefect flow run (`flow_run_id`) the run takes the flow run's id (hag/storage/runs.py).
    """
    problem = as_of is not None and bounds.timestamp_problem(as_of, settings.current())
    if problem:
        raise ValidationError(f"--as-of {problem}")
    with db.connection_or_own(conn) as c:
        return _enrich(c, topic, limit, dry_run, model, as_of, flow_run_id)


def _enrich(
    conn: Conn,
    topic: str | None,
    limit: int | None,
    dry_run: bool,
    model: str | None,
    as_of: datetime | None,
    flow_run_id: UUID | str | None = None,
) -> EnrichmentSummary:
    run_started = False
    liveness = ExitStack()  # the run's liveness lock, from its row on (hag/storage/runs.py)
    try:
        dials = settings.load(conn)
        if topic is not None and not graph.topic_exists(conn, topic):
            raise NotFoundError(f"unknown topic {topic!r}")
        if limit is not None and limit < 1:
            raise ValidationError(f"--limit must be at least 1, not {limit}")
        proposer = choose_proposer(dials, model)
        limit = limit or dials.enrichment_default_limit
        summary = EnrichmentSummary(
            run_id=runs.new_id(flow_run_id, conn=conn),  # the flow run's, if any
            dry_run=dry_run,
            proposer=proposer.name,
            offline=proposer.offline,
            proposer_line=proposer.describe(),
            topic=topic,
            limit=limit,
            already_enriched=graph.count_already_enriched(conn, topic, proposer.name),
            started_at=_now(),
            prices=model_prices(list(dials.enrichment_prices_usd_per_million_tokens)),
        )
        orphans = graph.select_orphans(conn, topic, proposer.name, limit)
        if dry_run:
            conn.rollback()
        else:
            conn.commit()
            runs.reap(conn)
            liveness.enter_context(
                runs.alive(summary.run_id)
            )  # until it ends (hag/storage/runs.py)
            graph.start_run(
                conn,
                summary.run_id,
                summary.started_at,
                {"topic": topic, "limit": limit, "model": proposer.name},
            )
            runs.link_flow_run(conn, summary.run_id, flow_run_id)
            conn.commit()
            run_started = True
        unstored: list[Accepted] = []
        for orphan in orphans:
            result, calls = enrich_orphan(
                conn, orphan, proposer, dials, summary.run_id, dry_run, unstored, as_of
            )
            summary.orphans.append(result)
            summary.calls.extend(calls)
        summary.finished_at = _now()
        if run_started:
            graph.finish_run(
                conn,
                summary.run_id,
                summary.finished_at,
                {**summary.totals(), "cost": summary.cost()},
                "done",
            )
            conn.commit()
        return summary
    except BaseException:
        conn.rollback()
        if run_started:
            graph.finish_run(conn, summary.run_id, _now(), {}, "failed")
            conn.commit()
        raise
    finally:
        liveness.close()
