"""The session payload the online tutor hands over at session end (SPEC §2 "Sessions").

The pydantic models are the contract; `docs/session-contract.schema.json` is generated
from them (`python -m hag.session.contract > docs/session-contract.schema.json`) and a test
keeps the published file up to date. Validation is strict: JSON numbers are not strings,
strings are not numbers, unknown fields are refused (the field names are the contract, so a
typo must not pass silently), and `ended_at` must carry a time zone.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

GRAPHS = ("topic", "tutor", "student", "visual")

# The same shapes the schema enforces on the rows these values end up in (migration 001).
LearnerId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")]
TopicId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=200)]
NonBlank = Annotated[str, StringConstraints(min_length=1, pattern=r"\S")]
# A concept slug as the schema stores it (migration 001) and retrieval reads it, or the
# placeholder of entries no concept anchors.
ConceptSlug = Annotated[str, StringConstraints(pattern=r"^(_unanchored_|[a-z0-9][a-z0-9-]*)$")]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Struggle(_Part):
    """The extractor's explicit evidence that a concept failed for want of another."""

    concept_slug: NonBlank
    missing_slug: NonBlank
    evidence: str = Field("", description="The student's quoted words; empty means no evidence.")

    @property
    def has_evidence(self) -> bool:
        """Seed: a prerequisite is only ever proposed from explicit evidence (quoted words)."""
        return bool(self.evidence.strip())


class Observation(_Part):
    """Something worth remembering, for one of the four graphs."""

    graph: Literal["topic", "tutor", "student", "visual"]
    concept: NonBlank = Field(description="The concept's name as the extractor said it.")
    text: NonBlank = Field(description="The advisory text; becomes the entry's instruction.")


class Turn(_Part):
    turn_index: int = Field(ge=0)
    student_message: str
    concept_slugs: list[ConceptSlug] = Field(default_factory=list)
    decision_entry_id: UUID | None = None
    used_entry_ids: list[UUID] = Field(default_factory=list)
    rendered_edge_ids: list[UUID] = Field(default_factory=list)
    outcome: Literal["success", "failure"] | None = None
    outcome_strength: float | None = Field(None, ge=0.0, le=1.0)
    struggles: list[Struggle] = Field(default_factory=list)
    observations: list[Observation] = Field(default_factory=list)


class SessionPayload(_Part):
    """One finished tutoring session."""

    session_id: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    learner_id: LearnerId
    topic_id: TopicId
    ended_at: AwareDatetime
    turns: list[Turn] = Field(min_length=1)

    def ordered_turns(self) -> list[Turn]:
        """The turns by turn_index (ingest guarantees the indexes are 0..n-1, once each)."""
        return sorted(self.turns, key=lambda t: t.turn_index)


def json_schema() -> dict[str, Any]:
    """The published JSON Schema of the payload."""
    schema = SessionPayload.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://hag-memory.invalid/session-contract.schema.json"
    schema["description"] = (
        "One finished tutoring session, as the online tutor hands it to `hag ingest`. "
        "Beyond this schema, ingest also refuses: duplicate or missing turn indexes "
        "(they must be 0..n-1), unknown topic, entry or edge ids, entries the learner may "
        "not read in the topic, NUL characters, invalid UTF-8, nesting deeper than "
        "session_max_depth, more turns than session_max_turns, more observations, struggles "
        "or distinct successful concept slugs than session_max_observations, "
        "session_max_struggles (session_max_struggles_per_turn in one turn) and "
        "session_max_success_slugs, payloads over session_max_payload_bytes, an ended_at outside timestamp_window_years of now, and "
        "slugs, concept names and texts over slug_max_chars, concept_name_max_chars and "
        "text_max_chars (docs/bounds.md)."
    )
    return schema


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    sys.stdout.write(schema_text())
