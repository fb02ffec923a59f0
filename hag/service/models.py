"""What the HTTP service (hag/service) takes and returns, shared with its client (hag/service/client.py).

Plain pydantic models in the core: the client validates the server's answers with the very
models the server's OpenAPI schema is made from, and neither side imports the other's stack
(the client needs no FastAPI, the server no urllib).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

API_PREFIX = "/v1"


class _Request(BaseModel):
    """A request body: unknown fields are refused by name, never ignored."""

    model_config = ConfigDict(extra="forbid")


class _Response(BaseModel):
    """A response body: a newer server may add fields; an older client ignores them."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class RetrieveRequest(_Request):
    """One turn, as `hag retrieve` takes it (hag.retrieval.retrieve)."""

    topic_id: str = Field(description="The topic's id (slug), e.g. cryptography.")
    learner_id: str = Field(description="Whose patterns the student pass reads.")
    message: str = Field(description="The student's message this turn (not empty).")
    level: str | None = Field(default=None, description="Proficiency level for the context.")
    focus: str | None = Field(default=None, description="Current focus for the context.")
    recent_concepts: list[list[str]] = Field(
        default_factory=list,
        description="Concept slugs of the recent turns, one list per turn, oldest first.",
    )
    expected_concepts: list[str] = Field(
        default_factory=list, description="Slugs that earn the concept-match bonus."
    )


class Advisory(_Response):
    """One entry as it reaches the prompt (hag.retrieval.Advisory)."""

    entry_id: UUID
    concept_slug: str
    visibility_scope: str
    maturity: str
    similarity: float
    confidence: float
    routing_score: float
    band: str
    instruction: str
    topic_id: str = ""
    source: str = "semantic"
    rank_score: float = 0.0


class RenderedEdge(_Response):
    """One edge line of a decision tree (hag.retrieval.RenderedEdge)."""

    edge_id: UUID
    source_entry_id: UUID
    target_entry_id: UUID
    edge_type: str
    confidence: float
    condition: str | None
    line: str


class PassReport(_Response):
    """How one pass ran: its path (exact / approximate / fallback), rows and time."""

    name: str
    path: str
    rows: int
    milliseconds: float


class RetrieveResult(_Response):
    """One turn's memory (hag.retrieval.RetrievalResult.as_dict); `text` goes into the prompt.

    `degraded` says why the semantic passes did not run ("" when they did); report
    `used_entry_ids` and `rendered_edge_ids` back in the session payload.
    """

    topic_id: str
    learner_id: str
    context: str
    topic_advisories: list[Advisory]
    tutor_advisories: list[Advisory]
    student_advisories: list[Advisory]
    edges: list[RenderedEdge]
    rendered_edge_ids: list[UUID]
    used_entry_ids: list[UUID]
    text: str
    passes: list[PassReport] = Field(default_factory=list)
    cached: bool = False
    degraded: str = ""


class SessionState(_Response):
    """Where a submitted session stands: queued now (`accepted`) or already received."""

    status: Literal["accepted", "duplicate"]
    session_id: str
    state: str = Field(description="pending, applied, failed or quarantined")


class HistoryEvent(_Response):
    """One confidence change, cull or restore of an edge (hag.storage.history), in memory time."""

    at: datetime
    old_value: float | None
    new_value: float | None
    reason: str
    session_id: str | None = None
    run_id: UUID | None = None


class EdgeExplanation(_Response):
    """An edge's confidence now (None once culled) and its newest events, oldest first."""

    edge_id: UUID
    edge_type: str | None
    source_entry_id: UUID | None
    target_entry_id: UUID | None
    confidence: float | None
    culled: bool
    total_events: int
    events: list[HistoryEvent]
    terms: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Under the units rule, a live prerequisite's, leads_to's or fallback's formula"
            " terms now (units, learners, chance, reverse, prior, hold, ... and `confidence`,"
            " what the re-weigh stores; an authored leads_to or fallback: its prior and the"
            " struggles that judge it); null for another edge, a culled edge or another rule."
        ),
    )
    reweigh_pending: bool = Field(
        default=False,
        description=(
            "A live prerequisite whose concept waits for the nightly's re-weigh: its stored"
            " confidence may differ from its terms' result until then."
        ),
    )


class Health(_Response):
    """Whether this process can serve: the database answers, is migrated, and holds
    vectors of the configured embedder."""

    ok: bool
    database: bool
    migrated: bool
    embedder: bool
    detail: str = ""


class ErrorBody(_Response):
    """Every refusal: one line, and the field (dotted path) and turn when there is one."""

    detail: str
    field: str | None = None
    turn_index: int | None = None
