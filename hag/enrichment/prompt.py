"""The prompt for one orphan: its concept, and a bounded list of candidate concepts.

The candidates are the orphan's nearest neighbours in the same topic and scope by
embedding similarity (sql/queries/enrichment.sql: candidates), cut to the
`enrichment_candidate_count` dial; every text in the prompt is cut to a dial too. So the
size of a prompt has a fixed ceiling however large the topic grows (docs/enrichment.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from hag.settings import Settings

# What each type means, in the words the model reads. `prerequisite` follows SPEC §2: the
# target is what must be understood before the source.
TYPE_MEANINGS = {
    "prerequisite": "source -> target means the target must be understood before the source",
    "related": "the two concepts are worth teaching side by side; no order between them",
    "leads_to": "source -> target means the target is a natural next step after the source",
    "fallback": "source -> target means the target is what to try when the source fails",
    "supersedes": "source -> target means the source replaces the target",
}

SYSTEM_TEXT = (
    "You maintain the concept graph of an AI tutor. One concept of the topic is an orphan: "
    "no edge connects it to the others. Propose typed, directed edges between the orphan and "
    "the candidate concepts listed, each with a one-sentence reason. Every edge must have the "
    "orphan at one end and a listed candidate at the other, named by slug exactly as written. "
    "Propose only edges a teacher would agree with; an empty list is a valid answer."
)


@dataclass(frozen=True)
class Orphan:
    entry_id: UUID
    topic_id: str
    topic_title: str
    concept_slug: str
    visibility_scope: str
    title: str
    description: str
    instruction: str


@dataclass(frozen=True)
class Candidate:
    entry_id: UUID
    slug: str
    title: str
    description: str
    similarity: float
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prompt:
    """Everything a proposer gets: the texts for a model, and the structure behind them."""

    orphan: Orphan
    orphan_text: str
    candidates: tuple[Candidate, ...]
    allowed_types: tuple[str, ...]
    max_proposals: int
    messages: tuple[Mapping[str, str], ...]
    response_format: Mapping[str, Any]

    @property
    def chars(self) -> int:
        """Characters sent to the model (message texts and the response schema)."""
        return sum(len(m["content"]) for m in self.messages) + len(json.dumps(self.response_format))


def clip(text: str, limit: int) -> str:
    """`text` on one line, cut to `limit` characters (an ellipsis marks a cut)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def response_schema(
    orphan_slug: str, candidate_slugs: Sequence[str], allowed_types: Sequence[str]
) -> dict[str, Any]:
    """The JSON-schema response format: edges over the offered slugs and allowed types only.

    Servers that honour strict schemas cannot name anything else; the validation after the
    reply still checks everything, because not every server does.
    """
    slugs = sorted({orphan_slug, *candidate_slugs})
    edge = {
        "type": "object",
        "properties": {
            "source": {"type": "string", "enum": slugs},
            "target": {"type": "string", "enum": slugs},
            "edge_type": {"type": "string", "enum": list(allowed_types)},
            "reason": {"type": "string"},
        },
        "required": ["source", "target", "edge_type", "reason"],
        "additionalProperties": False,
    }
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "edge_proposals",
            "strict": True,
            "schema": {
                "type": "object",
                # No maxItems: length limits are outside the subset every strict server takes;
                # the prompt states the bound and validation enforces it.
                "properties": {"edges": {"type": "array", "items": edge}},
                "required": ["edges"],
                "additionalProperties": False,
            },
        },
    }


def candidate_line(c: Candidate, limit: int) -> str:
    return f"- {c.slug}: " + clip(f"{c.title}. {c.description}", limit)


def build_prompt(orphan: Orphan, candidates: Sequence[Candidate], dials: Settings) -> Prompt:
    """The chat messages and response format for one orphan, every part cut to its dial."""
    allowed = dials.enrichment_allowed_types
    max_proposals = dials.enrichment_max_proposals_per_orphan
    orphan_limit = dials.enrichment_max_description_chars
    line_limit = dials.enrichment_candidate_chars
    offered = tuple(candidates[: dials.enrichment_candidate_count])

    orphan_text = clip(f"{orphan.title}. {orphan.description}", orphan_limit)
    types = "\n".join(f"- {t}: {TYPE_MEANINGS[t]}" for t in allowed)
    system = (
        f"{SYSTEM_TEXT}\nAllowed edge types:\n{types}\n"
        f"Propose at most {max_proposals} edges. Reply with JSON only: "
        '{"edges": [{"source": slug, "target": slug, "edge_type": type, "reason": text}]}'
    )
    listing = "\n".join(candidate_line(c, line_limit) for c in offered) or "(none)"
    user = (
        f"Topic: {clip(orphan.topic_title, line_limit)}\n"
        f"Orphan concept: {orphan.concept_slug}\n"
        f"Description: {orphan_text}\n"
        f"Tutor instruction: {clip(orphan.instruction, orphan_limit)}\n\n"
        f"Candidate concepts of the same topic, most similar first:\n{listing}"
    )
    return Prompt(
        orphan=orphan,
        orphan_text=orphan_text,
        candidates=offered,
        allowed_types=allowed,
        max_proposals=max_proposals,
        messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
        response_format=response_schema(orphan.concept_slug, [c.slug for c in offered], allowed),
    )
