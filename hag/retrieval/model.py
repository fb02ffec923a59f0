"""What a retrieval returns: advisories, rendered edges and the prompt text (frozen values)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from uuid import UUID


@dataclass(frozen=True)
class Advisory:
    """One entry as it reaches the prompt, with the numbers the orchestrator reads."""

    entry_id: UUID
    concept_slug: str
    visibility_scope: str
    maturity: str
    similarity: float  # cosine to the turn's query; 1.0 by fiat for concept-anchored rows
    confidence: float
    routing_score: float  # seed: plain confidence x similarity, what routing decisions read
    band: str  # high | medium | low: a label on the line, never a filter
    instruction: str  # clipped to advisory_max_chars at a sentence boundary
    topic_id: str = ""
    source: str = "semantic"  # semantic | concept | catalogue: which pass supplied it
    rank_score: float = 0.0  # the merge's composite score (topic advisories only)


@dataclass(frozen=True)
class RenderedEdge:
    """One edge line of a decision tree, and the edge it came from."""

    edge_id: UUID
    source_entry_id: UUID
    target_entry_id: UUID
    edge_type: str
    confidence: float
    condition: str | None
    line: str


@dataclass(frozen=True)
class Visual:
    """The curated drawing of a concept (the visual bucket's own read)."""

    entry_id: UUID
    concept_slug: str
    maturity: str
    confidence: float
    instruction: str


@dataclass(frozen=True)
class PassReport:
    """How one pass ran: its path (exact / approximate / fallback) and its rows."""

    name: str
    path: str
    rows: int
    milliseconds: float


@dataclass(frozen=True)
class RetrievalResult:
    """Everything one turn's retrieval produced; `text` is what goes into the prompt."""

    topic_id: str
    learner_id: str
    context: str  # the one string embedded for this turn
    topic_advisories: tuple[Advisory, ...]
    tutor_advisories: tuple[Advisory, ...]
    student_advisories: tuple[Advisory, ...]
    edges: tuple[RenderedEdge, ...]
    text: str
    passes: tuple[PassReport, ...] = field(default=(), compare=False)
    cached: bool = field(default=False, compare=False)
    # Why the semantic passes did not run ("embedder unavailable: ..."); "" when they did.
    degraded: str = field(default="", compare=False)

    @property
    def rendered_edge_ids(self) -> list[UUID]:
        """Ids of the edges whose lines are in `text`, in render order."""
        return [e.edge_id for e in self.edges]

    @property
    def used_entry_ids(self) -> list[UUID]:
        """Ids of every entry whose advisory is in `text`: topic, then tutor, then student."""
        return [a.entry_id for a in self.advisories]

    @property
    def advisories(self) -> tuple[Advisory, ...]:
        return self.topic_advisories + self.tutor_advisories + self.student_advisories

    def as_dict(self) -> dict[str, Any]:
        """The whole result as JSON-ready values (uuids as strings)."""

        def plain(value: Any) -> Any:
            if isinstance(value, UUID):
                return str(value)
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [plain(v) for v in value]
            return value

        data: dict[str, Any] = plain(
            {
                "topic_id": self.topic_id,
                "learner_id": self.learner_id,
                "context": self.context,
                "topic_advisories": [asdict(a) for a in self.topic_advisories],
                "tutor_advisories": [asdict(a) for a in self.tutor_advisories],
                "student_advisories": [asdict(a) for a in self.student_advisories],
                "edges": [asdict(e) for e in self.edges],
                "rendered_edge_ids": self.rendered_edge_ids,
                "used_entry_ids": self.used_entry_ids,
                "text": self.text,
                "passes": [asdict(p) for p in self.passes],
                "cached": self.cached,
                "degraded": self.degraded,
            }
        )
        return data
