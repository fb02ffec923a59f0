"""Builders for test data written straight into the real database.

Vectors are built so that cosine similarities are known exactly: `vec(cos)` is a unit vector
whose cosine with `QUERY` (the first basis vector) is `cos`; `vec(cos, axis=k)` tilts towards
another axis, so two rows with the same cosine to the query are still distinct.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from pgvector import Vector

DIM = 1536
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def basis(k: int, dim: int = DIM) -> np.ndarray:
    v = np.zeros(dim, dtype=np.float32)
    v[k] = 1.0
    return v


QUERY = basis(0)


def vec(cos: float, axis: int = 1, dim: int = DIM) -> np.ndarray:
    """A unit vector at cosine `cos` from QUERY, tilted towards basis vector `axis`."""
    v = np.zeros(dim, dtype=np.float64)
    v[0] = cos
    v[axis] = math.sqrt(max(0.0, 1.0 - cos * cos))
    return v.astype(np.float32)


def topic(conn: Any, topic_id: str = "cryptography", title: str | None = None) -> str:
    conn.execute(
        "INSERT INTO hag_topics (topic_id, title) VALUES (%s, %s) ON CONFLICT DO NOTHING",
        (topic_id, title or topic_id.replace("-", " ").title()),
    )
    return topic_id


def concept(
    conn: Any,
    topic_id: str,
    slug: str,
    title: str | None = None,
    description: str = "",
    aliases: list[str] | None = None,
    embedding: np.ndarray | None = None,
) -> str:
    topic(conn, topic_id)
    conn.execute(
        "INSERT INTO hag_concepts (topic_id, slug, title, description, aliases, embedding) "
        "VALUES (%s, %s, %s, %s, %s, %s)",
        (
            topic_id,
            slug,
            title or slug,
            description,
            aliases or [],
            Vector(embedding) if embedding is not None else None,
        ),
    )
    return slug


def entry(
    conn: Any,
    *,
    topic_id: str = "cryptography",
    concept_slug: str | None = None,
    scope: str = "public",
    maturity: str = "pattern",
    confidence: float = 0.8,
    embedding: np.ndarray | None = None,
    instruction: str | None = None,
    quality: float = 1.0,
    created_at: datetime = NOW,
    last_matched_at: datetime | None = None,
    success_count: int = 0,
    failure_count: int = 0,
) -> uuid.UUID:
    """Insert one entry and return its id."""
    topic(conn, topic_id)
    slug = concept_slug or f"c-{uuid.uuid4().hex[:8]}"
    row = conn.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence, "
        "concept_match_quality, instruction, embedding, created_at, updated_at, last_matched_at, "
        "success_count, failure_count) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            topic_id,
            slug,
            scope,
            maturity,
            confidence,
            quality,
            instruction or f"Advice about {slug}.",
            Vector(embedding if embedding is not None else vec(0.5, axis=7)),
            created_at,
            created_at,
            last_matched_at,
            success_count,
            failure_count,
        ),
    ).fetchone()
    return row["id"]


def edge(
    conn: Any,
    source: uuid.UUID,
    target: uuid.UUID,
    edge_type: str = "prerequisite",
    *,
    confidence: float = 0.8,
    source_type: str = "seed",
    condition: str | None = None,
    hit_count: int = 0,
    traversal_count: int = 0,
    created_at: datetime = NOW,
) -> uuid.UUID:
    row = conn.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, condition, confidence, "
        "hit_count, source_type, traversal_count, created_at, updated_at) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (
            source,
            target,
            edge_type,
            condition,
            confidence,
            hit_count,
            source_type,
            traversal_count,
            created_at,
            created_at,
        ),
    ).fetchone()
    return row["id"]


def cullable_chain(conn: Any, n: int, as_of: datetime) -> list[uuid.UUID]:
    """`n` old (100 days before `as_of`), weak, untraversed learned edges along a chain of
    `n + 1` entries: every one cullable by the seed's rule. Not committed."""
    ends = [entry(conn, concept_slug=f"c-{i}") for i in range(n + 1)]
    return [
        edge(
            conn,
            ends[i],
            ends[i + 1],
            "related",
            confidence=0.1,
            source_type="learned",
            created_at=as_of - timedelta(days=100),
        )
        for i in range(n)
    ]
