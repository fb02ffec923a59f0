"""`hag load-corpus FILE`: topics, concepts, entries and edges from one JSON file.

The keys are the tables' column names (SPEC §9). The whole file is checked before anything
is written, then written in one transaction: a bad item refuses the file whole, with a
message naming the item, and the database is left as it was. Loading the same file twice
changes nothing: rows that already exist (same id, same concept, same edge identity) are
kept as they are. Entries without an id get one derived from their identity, so that
loading twice finds them again; missing embeddings are computed, missing `created_at` is now.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hag import DEMO_CORPUS as DEMO_CORPUS  # one resource lookup (hag/__init__); read here too
from hag import settings
from hag.errors import CorpusError, NotFoundError
from hag.settings import Settings
from hag.storage.db import Conn, one
from hag.storage.schema import EDGE_TYPES
from hag.storage.sqlfiles import query
from hag.support import bounds
from hag.support.jsonkeys import DuplicateKeyError, unique_keys

_ID_NAMESPACE = uuid.UUID("7d0a5a52-3c51-4b8e-9a44-8f1d2f6b1f00")
UNANCHORED = "_unanchored_"


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Topic(_Item):
    topic_id: str
    title: str


class Concept(_Item):
    topic_id: str
    slug: str
    title: str
    description: str = ""
    aliases: list[str] = Field(default_factory=list)
    origin: str = "catalogue"
    embedding: list[float] | None = None
    created_at: datetime | None = None


class Entry(_Item):
    id: uuid.UUID | None = None
    topic_id: str
    concept_slug: str
    visibility_scope: str
    maturity: str = "candidate"
    confidence: float
    concept_match_quality: float = 1.0
    instruction: str
    embedding: list[float] | None = None
    success_count: int = 0
    failure_count: int = 0
    last_matched_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class Edge(_Item):
    id: uuid.UUID | None = None
    source_entry_id: uuid.UUID
    target_entry_id: uuid.UUID
    edge_type: str
    confidence: float
    source_type: str
    condition: str | None = None
    hit_count: int = 0
    source_session_id: str | None = None
    traversal_count: int = 0
    last_traversed_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @field_validator("edge_type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in EDGE_TYPES:
            raise ValueError(f"unknown edge_type {value!r} (known: {', '.join(EDGE_TYPES)})")
        return value


class Corpus(_Item):
    topics: list[Topic] = Field(default_factory=list)
    concepts: list[Concept] = Field(default_factory=list)
    entries: list[Entry] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)


@dataclass
class LoadReport:
    topics: int = 0
    concepts: int = 0
    entries: int = 0
    edges: int = 0
    embedded: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def entry_identity(e: Entry) -> tuple[str, ...]:
    """The graph identity the unique indexes enforce (SPEC §2), or the row's own text."""
    if e.visibility_scope == "visual":
        return ("visual", e.concept_slug)
    if e.concept_slug == UNANCHORED:
        return ("unanchored", e.topic_id, e.visibility_scope, e.instruction)
    if e.visibility_scope.startswith("student:"):
        return ("student", e.visibility_scope, e.concept_slug)
    return ("topic", e.topic_id, e.concept_slug, e.visibility_scope)


def derived_entry_id(e: Entry) -> uuid.UUID:
    return uuid.uuid5(_ID_NAMESPACE, json.dumps(entry_identity(e)))


def parse(data: Any, source: str = "corpus") -> Corpus:
    if not isinstance(data, dict):
        raise CorpusError(
            f"{source}: a corpus is a JSON object with topics, concepts, entries, edges"
        )
    try:
        return Corpus.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise CorpusError(f"{source}: {where}: {err['msg']}") from None


def read(path: Path) -> Corpus:
    try:
        data = json.loads(Path(path).read_text(), object_pairs_hook=unique_keys)
    except FileNotFoundError:
        raise CorpusError(f"{path}: no such file") from None
    except DuplicateKeyError as exc:
        raise CorpusError(f"{path}: not valid JSON ({exc})") from None
    except json.JSONDecodeError as exc:
        raise CorpusError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError:
        raise CorpusError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:  # a directory, no permission, ...
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc})") from None
    return parse(data, str(path))


def _check(corpus: Corpus, dim: int) -> None:
    """Refuse what the file alone shows to be wrong, naming the item."""
    first_topic: dict[str, int] = {}
    for i, t in enumerate(corpus.topics):
        if t.topic_id in first_topic:
            raise CorpusError(
                f"topics[{i}] ({t.topic_id}): duplicate of topics[{first_topic[t.topic_id]}]"
            )
        first_topic[t.topic_id] = i
    first_concept: dict[tuple[str, str], int] = {}
    for i, c in enumerate(corpus.concepts):
        concept_key = (c.topic_id, c.slug)
        if concept_key in first_concept:
            raise CorpusError(
                f"concepts[{i}] ({c.topic_id}/{c.slug}): duplicate of "
                f"concepts[{first_concept[concept_key]}]"
            )
        first_concept[concept_key] = i
    seen_identity: dict[tuple[str, ...], int] = {}
    seen_ids: set[uuid.UUID] = set()
    for i, e in enumerate(corpus.entries):
        label = f"entries[{i}] ({e.topic_id}/{e.concept_slug}, {e.visibility_scope})"
        if e.embedding is not None and len(e.embedding) != dim:
            raise CorpusError(
                f"{label}: embedding has {len(e.embedding)} dimensions, the database takes {dim}"
            )
        if e.embedding is not None and not _searchable(e.embedding):
            raise CorpusError(f"{label}: embedding is all zeros or not finite")
        ident = entry_identity(e)
        if ident in seen_identity:
            raise CorpusError(f"{label}: duplicate identity of entries[{seen_identity[ident]}]")
        seen_identity[ident] = i
        if e.id is None:
            e.id = derived_entry_id(e)
        if e.id in seen_ids:
            raise CorpusError(f"{label}: id {e.id} is used twice")
        seen_ids.add(e.id)
    for i, c in enumerate(corpus.concepts):
        if c.embedding is not None and len(c.embedding) != dim:
            raise CorpusError(
                f"concepts[{i}] ({c.topic_id}/{c.slug}): embedding has {len(c.embedding)} dimensions, the database takes {dim}"
            )
        if c.embedding is not None and not _searchable(c.embedding):
            raise CorpusError(
                f"concepts[{i}] ({c.topic_id}/{c.slug}): embedding is all zeros or not finite"
            )
    seen_edges: set[tuple[uuid.UUID, uuid.UUID, str]] = set()
    for i, edge in enumerate(corpus.edges):
        label = f"edges[{i}] ({edge.edge_type} {edge.source_entry_id} -> {edge.target_entry_id})"
        if edge.source_entry_id == edge.target_entry_id:
            raise CorpusError(f"{label}: an edge may not point at its own source")
        key = (edge.source_entry_id, edge.target_entry_id, edge.edge_type)
        if key in seen_edges:
            raise CorpusError(f"{label}: duplicate edge")
        seen_edges.add(key)


_TIMES = ("created_at", "updated_at", "last_matched_at", "last_traversed_at")


def _check_bounds(corpus: Corpus, dials: Settings) -> None:
    """Refuse timestamps far from now and slugs, names or texts over their dials (the same
    bounds as session ingest, docs/bounds.md), naming the item and the field."""
    items: list[tuple[str, BaseModel, list[tuple[str, str]]]] = []
    for i, t in enumerate(corpus.topics):
        items.append((f"topics[{i}]", t, [("topic_id", bounds.SLUG), ("title", bounds.NAME)]))
    for i, c in enumerate(corpus.concepts):
        fields = [("topic_id", bounds.SLUG), ("slug", bounds.SLUG), ("title", bounds.NAME)]
        items.append((f"concepts[{i}]", c, [*fields, ("description", bounds.TEXT)]))
    for i, e in enumerate(corpus.entries):
        fields = [("topic_id", bounds.SLUG), ("concept_slug", bounds.SLUG)]
        items.append((f"entries[{i}]", e, [*fields, ("instruction", bounds.TEXT)]))
    for i, edge in enumerate(corpus.edges):
        items.append((f"edges[{i}]", edge, [("condition", bounds.TEXT)]))
    for label, item, lengths in items:
        for name, dial in lengths:
            value = getattr(item, name)
            problem = value is not None and bounds.length_problem(value, dial, dials)
            if problem:
                raise CorpusError(f"{label}.{name}: {problem}")
        for j, alias in enumerate(getattr(item, "aliases", ())):
            problem = bounds.length_problem(alias, bounds.NAME, dials)
            if problem:
                raise CorpusError(f"{label}.aliases[{j}]: {problem}")
        for name in _TIMES:
            moment = getattr(item, name, None)
            problem = moment is not None and bounds.timestamp_problem(moment, dials)
            if problem:
                raise CorpusError(f"{label}.{name}: {problem}")


def _fill_embeddings(corpus: Corpus, report: LoadReport) -> None:
    from hag.vectors.embedder_identity import checked_embedder
    from hag.vectors.embeddings import embed_texts

    checked_embedder()  # a corpus that brings every vector is held to the memory's embedder too

    missing = [e for e in corpus.entries if e.embedding is None]
    if missing:
        where = {id(e): i for i, e in enumerate(corpus.entries)}
        vectors = embed_texts(
            [e.instruction for e in missing],
            [f"entries[{where[id(e)]}].instruction" for e in missing],
        )
        for e, v in zip(missing, vectors, strict=True):
            e.embedding = v.tolist()
        report.embedded += len(missing)
    missing_c = [c for c in corpus.concepts if c.embedding is None]
    if missing_c:
        at = {id(c): i for i, c in enumerate(corpus.concepts)}
        vectors = embed_texts(
            [f"{c.title}: {c.description}" for c in missing_c],
            [f"concepts[{at[id(c)]}].title and description" for c in missing_c],
        )
        for c, v in zip(missing_c, vectors, strict=True):
            c.embedding = v.tolist()
        report.embedded += len(missing_c)


def _searchable(embedding: list[float]) -> bool:
    """Not all zeros and all finite: a vector whose cosine to a query is a number."""
    return all(math.isfinite(v) for v in embedding) and any(v != 0 for v in embedding)


def _filled(embedding: list[float] | None) -> list[float]:
    assert embedding is not None, "embeddings are filled before any write"
    return embedding


def _db_error(label: str, exc: psycopg.Error) -> CorpusError:
    diag = exc.diag
    detail = diag.message_primary or str(exc).splitlines()[0]
    if diag.constraint_name:
        detail += f" [{diag.constraint_name}]"
    return CorpusError(f"{label}: {detail}")


def load(conn: Conn, corpus: Corpus, dim: int) -> LoadReport:
    """Write the corpus in one transaction (nothing on failure); return what was new."""
    _check(corpus, dim)
    _check_bounds(corpus, settings.current())
    report = LoadReport()
    _fill_embeddings(corpus, report)
    now = datetime.now(UTC)
    from pgvector import Vector

    with conn.transaction():
        for i, t in enumerate(corpus.topics):
            try:
                cur = conn.execute(
                    "INSERT INTO hag_topics (topic_id, title) VALUES (%s, %s) ON CONFLICT (topic_id) DO NOTHING",
                    (t.topic_id, t.title),
                )
            except psycopg.Error as exc:
                raise _db_error(f"topics[{i}] ({t.topic_id})", exc) from None
            report.topics += cur.rowcount
        for i, c in enumerate(corpus.concepts):
            try:
                cur = conn.execute(
                    "INSERT INTO hag_concepts (topic_id, slug, title, description, aliases, origin, embedding, created_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (topic_id, slug) DO NOTHING",
                    (
                        c.topic_id,
                        c.slug,
                        c.title,
                        c.description,
                        c.aliases,
                        c.origin,
                        Vector(_filled(c.embedding)),
                        c.created_at or now,
                    ),
                )
            except psycopg.Error as exc:
                raise _db_error(f"concepts[{i}] ({c.topic_id}/{c.slug})", exc) from None
            report.concepts += cur.rowcount
        for i, e in enumerate(corpus.entries):
            try:
                cur = conn.execute(
                    "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, confidence, "
                    "concept_match_quality, instruction, embedding, success_count, failure_count, "
                    "last_matched_at, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (id) DO NOTHING",
                    (
                        e.id,
                        e.topic_id,
                        e.concept_slug,
                        e.visibility_scope,
                        e.maturity,
                        e.confidence,
                        e.concept_match_quality,
                        e.instruction,
                        Vector(_filled(e.embedding)),
                        e.success_count,
                        e.failure_count,
                        e.last_matched_at,
                        e.created_at or now,
                        e.updated_at or e.created_at or now,
                    ),
                )
            except psycopg.Error as exc:
                raise _db_error(
                    f"entries[{i}] ({e.topic_id}/{e.concept_slug}, {e.visibility_scope})", exc
                ) from None
            report.entries += cur.rowcount
        for i, edge in enumerate(corpus.edges):
            label = (
                f"edges[{i}] ({edge.edge_type} {edge.source_entry_id} -> {edge.target_entry_id})"
            )
            try:
                cur = conn.execute(
                    "INSERT INTO hag_edges (id, source_entry_id, target_entry_id, edge_type, condition, confidence, "
                    "hit_count, source_type, source_session_id, traversal_count, last_traversed_at, "
                    "created_at, updated_at) "
                    "VALUES (COALESCE(%s, gen_random_uuid()), %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT ON CONSTRAINT hag_edges_identity DO NOTHING",
                    (
                        edge.id,
                        edge.source_entry_id,
                        edge.target_entry_id,
                        edge.edge_type,
                        edge.condition,
                        edge.confidence,
                        edge.hit_count,
                        edge.source_type,
                        edge.source_session_id,
                        edge.traversal_count,
                        edge.last_traversed_at,
                        edge.created_at or now,
                        edge.updated_at or edge.created_at or now,
                    ),
                )
            except psycopg.errors.ForeignKeyViolation:
                raise CorpusError(
                    f"{label}: dangling edge: an endpoint names no entry in the file or the database"
                ) from None
            except psycopg.Error as exc:
                raise _db_error(label, exc) from None
            report.edges += cur.rowcount
        # the memory's embedder again, after the writes (they wait for a `hag reembed` switch
        # in progress): a switch committed since `_fill_embeddings` checked refuses the load
        # whole, as session-end refuses a session, and no old vector lands in the moved memory
        from hag.vectors.embedder_identity import recheck

        recheck(conn)
    return report


def load_file(path: Path) -> LoadReport:
    """`hag load-corpus FILE`, on the configured database."""
    from hag.storage import db
    from hag.storage.migrate import ensure_migrated
    from hag.vectors.embeddings import get_embedder

    corpus = read(path)
    ensure_migrated()
    with db.connect() as conn:
        return load(conn, corpus, get_embedder().dim)


def export_rows(
    conn: Conn, what: str, topic_id: str | None = None, *, with_embeddings: bool = False
) -> list[dict[str, Any]]:
    """The `entries` or `edges` table as `hag export` prints it (one topic, or all), rows as
    dicts; an entry's embedding only when asked for. An unknown topic is refused."""
    return list(iter_export_rows(conn, what, topic_id, with_embeddings=with_embeddings))


# The named query of each export, written whole so that grep finds where each is used.
_EXPORT_QUERIES = {"entries": "export_entries", "edges": "export_edges"}


def iter_export_rows(
    conn: Conn, what: str, topic_id: str | None = None, *, with_embeddings: bool = False
) -> Iterator[dict[str, Any]]:
    """The rows of `export_rows` one at a time, through a server-side cursor that fetches
    `export_batch_rows` per round trip: memory stays flat however large the table. An unknown
    topic is refused before the first row."""
    if topic_id is not None:
        found = one(
            conn.execute(query("corpus", "topic_exists"), {"topic_id": topic_id}).fetchone()
        )
        if not found["found"]:
            raise NotFoundError(f"unknown topic {topic_id!r}")
    batch = settings.current().export_batch_rows
    with conn.cursor(name=f"hag_export_{what}") as cur:
        cur.itersize = batch
        cur.execute(
            query("corpus", _EXPORT_QUERIES[what]),
            {"topic_id": topic_id, "with_embeddings": with_embeddings},
        )
        for row in cur:
            if not with_embeddings:
                row.pop("embedding", None)
            yield dict(row)
