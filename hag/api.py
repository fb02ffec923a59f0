"""The public API: a tutor's per-turn read and hand-over, and an operator script's jobs.

`Memory` opens the memory (a URL, or the environment as the command line reads it) and
offers each operation with a typed result; every failure is one of hag.errors' types.
psycopg's and openai's exceptions never cross this boundary: a database failure is a
`DatabaseError` (`DatabaseUnavailable` when the server cannot be reached), a model-client
failure an `EmbedderError` (`EmbedderUnavailable` when the endpoint cannot be reached); the
original stays in `__cause__`. docs/api.md lists the names and shows the per-turn loop.

The pools are process-wide (hag.storage.db), so a process holds one memory at a time: opening a
`Memory` with a URL points the process at it (its `DATABASE_URL`), closing it closes the
pools. Nothing here imports Prefect, Great Expectations, pandas or matplotlib: the default
install (no extras) runs all of it, `nightly` included.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any
from uuid import UUID

from hag.errors import (
    ConfigError,
    DatabaseError,
    DatabaseUnavailable,
    EmbedderError,
    EmbedderMismatch,
    EmbedderUnavailable,
    HagError,
    MissingExtra,
    NotFoundError,
    ValidationError,
)
from hag.nightly.sweeps import NightlyResult, NightlySummary
from hag.retrieval.model import Advisory, RenderedEdge, RetrievalResult
from hag.session.ingest import IngestResult
from hag.session.summary import ProcessSummary

__all__ = [
    "Memory",
    "RetrievalResult",
    "Advisory",
    "RenderedEdge",
    "IngestResult",
    "ProcessSummary",
    "EdgeExplanation",
    "HistoryEvent",
    "NightlyResult",
    "NightlySummary",
    "HagError",
    "ConfigError",
    "ValidationError",
    "NotFoundError",
    "DatabaseError",
    "DatabaseUnavailable",
    "EmbedderError",
    "EmbedderUnavailable",
    "EmbedderMismatch",
    "MissingExtra",
]


@dataclass(frozen=True)
class HistoryEvent:
    """One change of an edge's confidence (or its cull or restore), in the memory's time."""

    at: datetime
    old_value: float | None  # None: the edge was created
    new_value: float | None  # None: the edge was culled
    reason: str
    session_id: str | None  # the session that made it, or
    run_id: UUID | None  # the run (a nightly sweep, an enrichment, a restore)


@dataclass(frozen=True)
class EdgeExplanation:
    """Why an edge has its confidence: where it stands now, and its newest events."""

    edge_id: UUID
    exists: bool  # False: culled (the events end with the cull)
    edge_type: str | None
    confidence: float | None
    source_type: str | None  # provenance: seed, learned, enriched
    topic_id: str | None
    source_concept: str | None
    target_concept: str | None
    events: tuple[HistoryEvent, ...]  # oldest first
    total_events: int  # every event recorded; `events` holds the newest `limit`
    # under the units rule, a live prerequisite's formula terms now (`hag.evidence.model.EvidenceTerms`:
    # units, learners, chance, reverse, prior, ... and `confidence`, what the re-weigh stores),
    # or a leads_to's or fallback's (`hag.evidence.sequences.SequenceTerms` for a learned one,
    # `AuthoredSequenceTerms` for an authored or enriched one: its prior and the judgement)
    terms: Mapping[str, Any] | None = None
    # a live prerequisite whose concept waits for the nightly's re-weigh (migration 224): its
    # stored confidence may differ from its terms' result until then
    reweigh_pending: bool = False


class Memory:
    """The memory of one tutor deployment, opened on a database.

    `url`: a libpq URL of a PostgreSQL with pgvector; None reads the environment as the
    command line does (`DATABASE_URL`; unset, the embedded server of the `embedded`
    extra). Nothing connects until the first operation. Use it as a context manager, or
    call `close()`, to close the pools.
    """

    def __init__(self, url: str | None = None) -> None:
        from hag import config, settings
        from hag.retrieval import clear_caches
        from hag.storage import db

        if url is not None and url != config.get_config().database_url:
            db.close_all()
            os.environ["DATABASE_URL"] = url
            config.reset_config()
            settings.invalidate()  # what was read from the other database
            clear_caches()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the process's connection pools (the next operation opens them again)."""
        from hag.storage import db

        with _boundary():
            db.close_all()

    @property
    def url(self) -> str:
        """The libpq URL of the database this memory is on (starts the embedded one if so)."""
        from hag.storage import db

        with _boundary():
            return db.database_url()

    def migrate(self) -> None:
        """Bring the schema up to this version and record the embedder (what `hag migrate`
        does); a no-op when it is up to date. For operator scripts: a tutor never migrates."""
        from hag.storage.migrate import ensure_migrated

        with _boundary():
            ensure_migrated()

    def retrieve(
        self,
        topic_id: str,
        learner_id: str,
        student_message: str,
        *,
        level: str | None = None,
        focus: str | None = None,
        recent_concepts: Iterable[str | Sequence[str]] = (),
        expected_concepts: Iterable[str] = (),
    ) -> RetrievalResult:
        """The memory for one turn: ranked advisories, edge trees and the prompt block.

        `recent_concepts`: the recent turns' concept slugs (flat, or one list per turn,
        oldest first). With the embedding endpoint down the answer comes from the passes
        that need no vector and says so in `degraded`. Raises ValidationError (a malformed
        id, an empty message), NotFoundError (an unknown topic), EmbedderMismatch (the
        configured embedder is not the memory's) or DatabaseError.
        """
        from hag.retrieval import retrieve

        with _boundary():
            return retrieve(
                topic_id,
                learner_id,
                student_message,
                level,
                focus,
                recent_concepts,
                expected_concepts,
            )

    @staticmethod
    def render(result: RetrievalResult) -> str:
        """The prompt block of a retrieval: the labelled advisory blocks and the decision
        trees, as the tutor puts them into its prompt (`result.text`)."""
        return result.text

    def submit_session(
        self, payload: Mapping[str, Any] | str | bytes, *, source: str = "api"
    ) -> IngestResult:
        """Hand over one ended session (docs/sessions.md's contract; a dict, JSON text or
        bytes), committed before this returns.

        The result says what happened: `accepted` (queued, or received before), or
        `quarantined` with the reason, the field and the turn (nothing of it is applied).
        Queued sessions are applied by `process_pending()` (or the session-end job).
        """
        from hag.session.ingest import ingest_payload
        from hag.storage import db

        with _boundary(), db.connect() as conn:
            result = ingest_payload(conn, payload, source=source)
            conn.commit()
            return result

    def process_pending(
        self,
        *,
        batch_size: int | None = None,
        limit: int | None = None,
        workers: int = 1,
        retry_failed: bool = False,
    ) -> ProcessSummary:
        """Apply the queued sessions (the session-end job, without Prefect), in batches of
        `batch_size` (default: the session_batch_size dial) until none is left or `limit`
        were taken; recorded as a run. A session that cannot be applied is rejected and
        quarantined, one that fails for another reason is kept as failed (both counted in
        the summary); `retry_failed` puts the failed ones back first."""
        from hag.session.process import process_pending

        with _boundary():
            return process_pending(batch_size, limit, workers=workers, retry_failed=retry_failed)

    def explain_edge(self, edge_id: str | UUID, *, limit: int | None = None) -> EdgeExplanation:
        """Why an edge has its confidence: the edge now (or culled), and its newest `limit`
        events (default: the history_default_limit dial), oldest first.

        `edge_id`: the id whole, a unique prefix, or the ending listings print. Raises
        NotFoundError when no edge or entry has that id.
        """
        from hag import settings
        from hag.evidence.explain import edge_terms, reweigh_pending
        from hag.storage import db
        from hag.storage.history import explain_edge

        with _boundary(), db.connect() as conn:
            dials = settings.load(conn)
            shown = limit or dials.history_default_limit
            key, edge, rows = explain_edge(conn, str(edge_id), shown)
            terms = edge_terms(conn, key, edge, dials)
            pending = reweigh_pending(conn, edge, terms)
        now = {} if edge["culled"] else edge
        return EdgeExplanation(
            edge_id=key,
            exists=bool(now),
            edge_type=now.get("edge_type"),
            confidence=now.get("confidence"),
            source_type=now.get("source_type"),
            topic_id=now.get("topic_id"),
            source_concept=now.get("source_concept"),
            target_concept=now.get("target_concept"),
            events=tuple(
                HistoryEvent(
                    r["at"],
                    r["old_value"],
                    r["new_value"],
                    r["reason"],
                    r["session_id"],
                    r["run_id"],
                )
                for r in rows
            ),
            total_events=int(rows[0]["total"]) if rows else 0,
            terms=terms,
            reweigh_pending=pending,
        )

    def nightly(self, *, as_of: datetime | None = None, dry_run: bool = False) -> NightlyResult:
        """The nightly sweeps as of `as_of` (default: now): promotion, archiving and the
        audited cull in one transaction, then the read path's upkeep; a dry run changes
        nothing. Never pauses for an operator (as `hag nightly`). The data-quality suites
        are not run here (`hag check`, the jobs extra)."""
        from hag.nightly import sweeps

        with _boundary():
            return sweeps.nightly(as_of, dry_run)


@contextmanager
def _boundary() -> Iterator[None]:
    """Translate the drivers' exceptions into hag.errors' types (the original as cause)."""
    try:
        yield
    except ConfigError as exc:
        psycopg = sys.modules.get("psycopg")
        if psycopg is not None and isinstance(exc.__cause__, psycopg.OperationalError):
            raise DatabaseUnavailable(str(exc)) from exc
        raise
    except HagError:
        raise
    except Exception as exc:
        translated = _translated(exc)
        if translated is exc:
            raise
        raise translated from exc


def _translated(exc: Exception) -> Exception:
    """The hag error for a driver's exception; any other exception as it is."""
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and _unreachable(exc, psycopg):
        return DatabaseUnavailable(f"the database is unavailable: {reason}")
    if psycopg is not None and isinstance(exc, psycopg.Error):
        return DatabaseError(f"database error: {reason}")
    openai = sys.modules.get("openai")
    if openai is not None and isinstance(exc, openai.APIConnectionError):  # timeouts too
        return EmbedderUnavailable(f"the embedding endpoint is unavailable: {reason}")
    if openai is not None and isinstance(exc, openai.OpenAIError):
        return EmbedderError(f"the model client failed: {reason}")
    return exc


def _unreachable(exc: Exception, psycopg: Any) -> bool:
    """A failure to reach the server, not a refusal of a statement: no connection (no
    SQLSTATE: libpq's own, or the pool's timeout), a connection exception (class 08) or a
    server shutting down (57P01-57P03). A lock or statement timeout is an OperationalError
    too, but the server answered it."""
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = getattr(exc, "sqlstate", None)
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")
