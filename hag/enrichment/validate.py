"""Reading a model's reply, and deciding which of its proposals may be written.

Pure functions: the facts they need (which slugs exist where, which edges exist, what the
prerequisite graph already reaches) are read by SQL first (`hag.enrichment.graph`), so
every rule here is tested without a database. Nothing is written unless it passes every
check, and every proposal that does not is returned with a reason code and a sentence.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from hag.enrichment.prompt import Orphan
from hag.operations.corpus import UNANCHORED

# Reject reason codes, in the order the checks run.
REJECT_REASONS = (
    "malformed",  # not an object with source, target and edge_type strings
    "disallowed_type",  # not in the enrichment_allowed_types dial
    "self_loop",  # source and target are the same concept
    "not_about_orphan",  # neither end is the orphan being enriched
    "unanchored",  # names `_unanchored_`, which has no identity to connect
    "unknown_slug",  # no live entry of that concept in the orphan's topic and scope
    "other_topic",  # the concept exists, but only in other topics
    "archived",  # the concept's entry is retired
    "duplicate",  # the edge exists (or was accepted earlier in this run or reply)
    "cycle",  # a prerequisite that would close a loop in the prerequisite graph
    "over_limit",  # valid, but the orphan already has its bound of accepted proposals
)


class ReplyError(Exception):
    """The reply as a whole is unusable (not JSON, wrong shape): the call is retried."""


@dataclass(frozen=True)
class Proposal:
    source: str
    target: str
    edge_type: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {
            "source": self.source,
            "target": self.target,
            "edge_type": self.edge_type,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Rejected:
    proposal: Mapping[str, Any]
    reason: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.proposal, "reject": self.reason, "detail": self.detail}


@dataclass(frozen=True)
class Accepted:
    proposal: Proposal
    source_entry_id: UUID
    target_entry_id: UUID

    @property
    def identity(self) -> tuple[UUID, UUID, str]:
        return (self.source_entry_id, self.target_entry_id, self.proposal.edge_type)

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.proposal.as_dict(),
            "source_entry_id": str(self.source_entry_id),
            "target_entry_id": str(self.target_entry_id),
        }


@dataclass(frozen=True)
class SlugFacts:
    """Where a named concept lives, as sql/queries/enrichment.sql: resolve_slugs reads it."""

    slug: str
    entry_id: UUID | None
    maturity: str | None
    in_catalogue: bool
    other_topics: tuple[str, ...]


@dataclass(frozen=True)
class GraphFacts:
    """What the checks need to know about the stored graph around one orphan."""

    slugs: Mapping[str, SlugFacts]
    edges: frozenset[tuple[UUID, UUID, str]] = frozenset()
    # (a, b): b is reachable from a through prerequisite edges (stored or accepted this run).
    reach: frozenset[tuple[UUID, UUID]] = field(default_factory=frozenset)


# One Markdown code fence around the whole reply (```json ... ```), as chat models write
# JSON when a server does not enforce the schema.
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


def parse_reply(content: str | None) -> list[Any]:
    """The items of the reply's `edges` list; a ReplyError when the reply is unusable."""
    if content is None or not content.strip():
        raise ReplyError("empty reply")
    fenced = _FENCE.fullmatch(content.strip())  # a server that ignored the response format
    try:
        data = json.loads(fenced.group(1) if fenced else content)
    except json.JSONDecodeError as exc:
        raise ReplyError(f"not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(data, dict) or not isinstance(data.get("edges"), list):
        raise ReplyError("not a JSON object with an 'edges' list")
    return list(data["edges"])


def _clean(value: Any) -> str | None:
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def normalise(items: Iterable[Any]) -> list[Proposal | Rejected]:
    """Each reply item as a Proposal (slugs and type trimmed, lower case) or a malformed reject."""
    out: list[Proposal | Rejected] = []
    for item in items:
        if isinstance(item, dict):
            source, target, kind = (_clean(item.get(k)) for k in ("source", "target", "edge_type"))
            reason = item.get("reason")
            if source and target and kind:
                out.append(
                    Proposal(
                        source, target, kind, reason.strip() if isinstance(reason, str) else ""
                    )
                )
                continue
            shown = {
                k: item.get(k) for k in ("source", "target", "edge_type", "reason") if k in item
            }
        else:
            shown = {"raw": json.dumps(item)[:200]}
        out.append(Rejected(shown, "malformed", "needs source, target and edge_type as strings"))
    return out


def named_slugs(orphan: Orphan, proposals: Iterable[Proposal | Rejected]) -> list[str]:
    """The slugs other than the orphan's that the proposals name (what resolve_slugs reads)."""
    names = {s for p in proposals if isinstance(p, Proposal) for s in (p.source, p.target)}
    names.discard(orphan.concept_slug)
    return sorted(names)


def _reaches(graph: Mapping[UUID, set[UUID]], start: UUID, goal: UUID) -> bool:
    seen, queue = {start}, deque([start])
    while queue:
        node = queue.popleft()
        if node == goal:
            return True
        for nxt in graph.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return False


def decide(
    orphan: Orphan,
    proposals: Sequence[Proposal | Rejected],
    facts: GraphFacts,
    allowed_types: Sequence[str],
    max_proposals: int,
) -> tuple[list[Accepted], list[Rejected]]:
    """Split one reply's proposals into those that may be written and those that may not.

    Proposals are judged in the order the model gave them; each accepted one counts for
    the checks after it (a second copy is a duplicate, a reverse prerequisite a cycle).
    """
    accepted: list[Accepted] = []
    rejected: list[Rejected] = []
    edges = set(facts.edges)
    prerequisite: dict[UUID, set[UUID]] = {}
    for a, b in facts.reach:
        prerequisite.setdefault(a, set()).add(b)

    def reject(p: Proposal, reason: str, detail: str) -> None:
        rejected.append(Rejected(p.as_dict(), reason, detail))

    for p in proposals:
        if isinstance(p, Rejected):
            rejected.append(p)
            continue
        if p.edge_type not in allowed_types:
            reject(
                p,
                "disallowed_type",
                f"{p.edge_type!r} is not an allowed type ({', '.join(allowed_types)})",
            )
            continue
        if p.source == p.target:
            reject(p, "self_loop", f"{p.source!r} cannot point at itself")
            continue
        if orphan.concept_slug not in (p.source, p.target):
            reject(p, "not_about_orphan", f"neither end is the orphan {orphan.concept_slug!r}")
            continue
        other = p.target if p.source == orphan.concept_slug else p.source
        if other == UNANCHORED:
            reject(p, "unanchored", f"{UNANCHORED} entries have no identity and stay isolated")
            continue
        known = facts.slugs.get(other)
        if known is None or known.entry_id is None:
            if known is not None and known.other_topics and not known.in_catalogue:
                reject(
                    p,
                    "other_topic",
                    f"{other!r} belongs to {', '.join(known.other_topics)}, "
                    f"not to {orphan.topic_id!r}",
                )
            else:
                reject(
                    p,
                    "unknown_slug",
                    f"no {orphan.visibility_scope} entry for {other!r} "
                    f"in topic {orphan.topic_id!r}",
                )
            continue
        if known.maturity == "archived":
            reject(p, "archived", f"the entry of {other!r} is archived")
            continue
        source_id = orphan.entry_id if p.source == orphan.concept_slug else known.entry_id
        target_id = known.entry_id if p.source == orphan.concept_slug else orphan.entry_id
        identity = (source_id, target_id, p.edge_type)
        # `related` has no direction: B related A repeats A related B.
        if identity in edges or (
            p.edge_type == "related" and (target_id, source_id, "related") in edges
        ):
            reject(p, "duplicate", f"{p.source} -{p.edge_type}-> {p.target} exists already")
            continue
        if p.edge_type == "prerequisite" and _reaches(prerequisite, target_id, source_id):
            reject(
                p,
                "cycle",
                f"{p.target!r} already depends on {p.source!r} through "
                "prerequisites; this edge would close a loop",
            )
            continue
        if len(accepted) >= max_proposals:
            reject(p, "over_limit", f"the orphan already has {max_proposals} accepted proposals")
            continue
        accepted.append(Accepted(p, source_id, target_id))
        edges.add(identity)
        if p.edge_type == "prerequisite":
            prerequisite.setdefault(source_id, set()).add(target_id)
    return accepted, rejected
