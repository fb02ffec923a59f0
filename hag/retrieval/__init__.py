"""The tutor's online read: four passes, the merge, the edge walk and the prompt blocks.

`retrieve(topic, learner, message, ...)` is what the tutor calls on every turn (SPEC §3):

1. one context string per turn (the seed's f-string), embedded once (an LRU of embeddings
   by context string saves the call when a turn repeats);
2. on a result-cache miss, four passes at once, each on its own pooled read-only
   connection: topic-semantic and topic-concept over the topic scopes of this topic, tutor
   (every topic) and student (this learner only, every topic);
3. the two topic passes merged (semantic wins a collision) and re-ranked by the seed's
   composite score, top `topic_top_k` kept; tutor and student rows appended, never
   competing for those places;
4. the edge walk from the top `edge_walk_top_k` topic advisories, in one query;
5. the three labelled blocks and the decision-tree lines (hag.retrieval.render).

That is the seed's ranking (`retrieval_ranking` = seed, the default). The relevance ranking,
one setting away (hag.retrieval.relevance), embeds the message alone, reads a catalogue pass
(the topic's concepts nearest the message, and the recent turns') in place of the by-concept
pass, and ranks by entry and concept similarity plus the message's words (BM25 over the
returned concepts, hag.retrieval.lexical), with confidence as a bounded tie-break.

With the embedding endpoint down or slower than `embedding_timeout_seconds` (retries
included), the turn is answered from the passes that need no query vector, the by-concept
pass and the edge walk, and the result says so (`degraded`); such a result is not cached.

Nothing here writes: `last_matched_at` and traversal counts move at session end, from what
the tutor reports back (`used_entry_ids`, `rendered_edge_ids`). No Prefect, no Great
Expectations: this module stays cheap to import.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from hag import settings
from hag.errors import EmbedderError, NotFoundError, ValidationError
from hag.retrieval import ranking, relevance, render, resident, store
from hag.retrieval.cache import TTLCache
from hag.retrieval.model import Advisory, PassReport, RenderedEdge, RetrievalResult, Visual
from hag.settings import Settings
from hag.storage import db, visibility
from hag.storage.db import Conn
from hag.storage.sqlfiles import query
from hag.storage.visibility import topic_scopes

if TYPE_CHECKING:  # imported lazily at run time: keeps the model client off import
    from hag.vectors.embeddings import Embedder

__all__ = [
    "Advisory",
    "RenderedEdge",
    "RetrievalResult",
    "Visual",
    "clear_caches",
    "retrieve",
    "retrieve_with_vector",
    "topic_scopes",
    "visual_for",
]

# The shapes the schema admits (migration 001's CHECKs): anything else cannot exist, so it is
# refused before any query, with the rule in the message.
# Matched whole (`fullmatch`): `$` would also accept a trailing newline.
_TOPIC_ID = re.compile(r"[a-z0-9][a-z0-9_-]*")
_LEARNER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
_SLUG = re.compile(r"_unanchored_|[a-z0-9][a-z0-9-]*")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

_results = TTLCache()
_embeddings = TTLCache()
_fingerprints: dict[int, tuple[Settings, str]] = {}
db.on_read_pool_closed(_results.clear)  # answers read from the database left


def clear_caches() -> None:
    """Forget cached results, embeddings, topic titles, the ANN index catalogue and the
    resident sets."""
    _results.clear()
    _embeddings.clear()
    store.catalog.clear()
    resident.residents.clear()


def retrieve(
    topic_id: str,
    learner_id: str,
    student_message: str,
    level: str | None = None,
    focus: str | None = None,
    recent_concepts: Iterable[str | Sequence[str]] = (),
    expected_concepts: Iterable[str] = (),
    *,
    conn: Conn | None = None,
) -> RetrievalResult:
    """The memory for one turn: ranked advisories, the edge trees and the rendered blocks.

    `recent_concepts`: the recent turns' concept slugs, either flat or one list per turn
    (oldest first; only the last `recent_concept_turns` count). `expected_concepts`: slugs
    that earn the concept-match bonus in the merge. With `conn`, every query runs on that
    connection one after another (inside the caller's transaction, or each pass in one of
    its own on an autocommit connection, bypassing the result cache; the search settings a
    pass makes end with that transaction); without it, the passes run concurrently on the
    read pool.
    """
    since = _results.generation  # a clear from here on (the read pool closed): not stored
    if not isinstance(student_message, str) or not student_message.strip():
        raise ValidationError("the student message is empty: there is nothing to retrieve for")
    _check_unicode(("student message", student_message), ("level", level), ("focus", focus))
    dials, slugs, expected, title, ann = _prepare(
        topic_id, learner_id, recent_concepts, expected_concepts, conn
    )

    from hag.vectors.embedder_identity import checked_embedder
    from hag.vectors.embeddings import cut  # keeps the model clients off import

    # The memory's embedder, checked once per process and again once the check is as old
    # as the dials' cache (a `hag reembed` switch meanwhile): one row read, nothing embedded.
    embedder = checked_embedder(
        lambda: store.reader(conn),
        db.database_url() if conn else db.read_database_url(),
        max_age=dials.settings_cache_ttl_seconds,
    )
    contexts = relevance if dials.retrieval_ranking == "relevance" else ranking
    context = cut(
        contexts.query_context(title, level, focus, student_message, dials),
        dials.embed_max_chars,
    )
    # Everything that changes the answer: the embedded text (topic title, level, focus,
    # message), the topic, the learner (whose patterns the student pass reads), the slugs,
    # the expected set, the embedder and every dial.
    key = (
        context,
        topic_id,
        learner_id,
        tuple(sorted(slugs)),
        tuple(expected),
        embedder.name,
        _fingerprint(dials),
    )
    # On a caller's connection the answer is what that transaction sees (perhaps rows it
    # never commits): such a result is neither served from the shared cache nor put in it.
    ttl = dials.retrieval_cache_ttl_seconds if conn is None else 0.0
    cached: RetrievalResult | None = _results.get(key, ttl) if ttl > 0 else None
    if cached is not None:
        return dataclasses.replace(cached, cached=True)

    try:
        vector: np.ndarray | None = _embed(embedder, context, dials)
        degraded = ""
    except EmbedderError as exc:
        vector, degraded = None, f"embedder unavailable: {exc}"
    result = _retrieve_uncached(
        topic_id, learner_id, context, vector, slugs, expected, ann, dials, conn
    )
    if degraded:  # the next turn tries the endpoint again
        return dataclasses.replace(result, degraded=degraded)
    if ttl > 0:
        _results.put(key, result, dials.retrieval_cache_size, since=since)
    return result


def retrieve_with_vector(
    topic_id: str,
    learner_id: str,
    vector: np.ndarray,
    recent_concepts: Iterable[str | Sequence[str]] = (),
    expected_concepts: Iterable[str] = (),
    *,
    conn: Conn | None = None,
    context: str = "",
) -> RetrievalResult:
    """The passes, merge, walk and render for a query vector already embedded (no caches).

    For callers that embed the context themselves, and for the benchmark (whose figures
    exclude the embedding call).
    """
    dials, slugs, expected, _title, ann = _prepare(
        topic_id, learner_id, recent_concepts, expected_concepts, conn
    )
    return _retrieve_uncached(
        topic_id, learner_id, context, vector, slugs, expected, ann, dials, conn
    )


def _prepare(
    topic_id: str,
    learner_id: str,
    recent_concepts: Iterable[str | Sequence[str]],
    expected_concepts: Iterable[str],
    conn: Conn | None,
) -> tuple[Settings, list[str], list[str], str, Any]:
    """Check the ids, read the dials, the slugs, the topic's title and its ANN index.

    Refuses ids the schema could never hold, and a topic that does not exist.
    """
    _check_text("topic id", topic_id, _TOPIC_ID, "lower-case letters, digits, '-' or '_'")
    _check_text(
        "learner id",
        learner_id,
        _LEARNER_ID,
        "letters, digits, '.', '_', '@' or '-', at most 128 characters",
    )
    dials = settings.current() if conn is None else settings.load(conn)
    slugs = [s for s in ranking.recent_slugs(recent_concepts, dials) if _SLUG.fullmatch(s)]
    expected = sorted({s for s in expected_concepts if isinstance(s, str)})
    title, ann = _catalog(conn, topic_id, dials)
    if title is None:
        raise NotFoundError(f"unknown topic {topic_id!r}")
    return dials, slugs, expected, title, ann


def visual_for(concept_slug: str, *, conn: Conn | None = None) -> Visual | None:
    """The curated drawing for a concept (the visual bucket's own read), or None."""
    if not isinstance(concept_slug, str) or not _SLUG.fullmatch(concept_slug):
        return None
    with store.reader(conn) as reader:
        row = reader.execute(
            query("retrieval", "visual_for"), {"concept_slug": concept_slug}
        ).fetchone()
    if row is None:
        return None
    return Visual(
        row["id"],
        row["concept_slug"],
        row["maturity"],
        float(row["confidence"]),
        row["instruction"],
    )


def _check_unicode(*texts: tuple[str, str | None]) -> None:
    """Refuse a text holding a lone UTF-16 surrogate (JSON's `\\ud800` escape, which Python
    decodes): it is no Unicode text, so no embedder can send it and no answer quoting it can
    be written as UTF-8."""
    for what, text in texts:
        found = _LONE_SURROGATE.search(text) if isinstance(text, str) else None
        if found is not None:
            raise ValidationError(
                f"the {what} holds a lone UTF-16 surrogate at character {found.start()}: "
                "send valid Unicode text"
            )


def _check_text(what: str, value: Any, shape: re.Pattern[str], rule: str) -> None:
    if not isinstance(value, str) or not shape.fullmatch(value):
        shown = repr(value)[:60] + ("…" if len(repr(value)) > 60 else "")
        raise ValidationError(f"{what} {shown} is not valid: use {rule}")


def _catalog(
    conn: Conn | None, topic_id: str, dials: Settings
) -> tuple[str | None, frozenset[str]]:
    """The topic's title and the usable ANN indexes: from memory when at hand (no connection
    is taken then); a caller's connection reads them fresh and leaves the shared catalogue be.
    """
    ttl = dials.settings_cache_ttl_seconds
    shared = conn is None
    return (
        store.catalog.title(lambda: store.reader(conn), topic_id, ttl, store=shared),
        store.catalog.ann_labels(lambda: store.reader(conn), ttl, dials, store=shared),
    )


def _fingerprint(dials: Settings) -> str:
    """A short digest of every dial's value, computed once per settings snapshot."""
    hit = _fingerprints.get(id(dials))
    if hit is not None and hit[0] is dials:
        return hit[1]
    digest = hashlib.blake2b(
        json.dumps(sorted(dials.items()), default=str).encode(), digest_size=12
    ).hexdigest()
    _fingerprints.clear()
    _fingerprints[id(dials)] = (dials, digest)
    return digest


def _embed(embedder: Embedder, context: str, dials: Settings) -> np.ndarray:
    """The turn's query vector: within `embedding_timeout_seconds`, at most
    `embedding_retries` further tries (EmbedderUnavailable after), never a zero row."""
    from hag.vectors.embeddings import require_fit

    key = (embedder.name, context)
    vector = _embeddings.get(key, None)
    if vector is None:
        deadline = time.monotonic() + dials.embedding_timeout_seconds
        rows = embedder.embed([context], deadline=deadline, retries=dials.embedding_retries)
        vector = np.asarray(
            require_fit(rows, [context], ["the query context"], embedder)[0], np.float32
        )
        vector.setflags(write=False)
        _embeddings.put(key, vector, dials.embedding_cache_size)
    return vector


def _retrieve_uncached(
    topic_id: str,
    learner_id: str,
    context: str,
    vector: np.ndarray | None,
    slugs: list[str],
    expected: list[str],
    ann: frozenset[str],
    dials: Settings,
    conn: Conn | None,
) -> RetrievalResult:
    """The passes, the merge, the walk and the render; with no `vector` (the embedder is
    unavailable) only the by-concept pass and the edge walk from its rows."""
    scopes = tuple(topic_scopes(dials))

    def semantic(
        name: str, topic: str | None, where: tuple[str, ...], count: int, ann_label: str
    ) -> SemanticPass:
        assert vector is not None
        return SemanticPass(
            name, vector, topic, where, count, dials, ann_label in ann, shared=conn is None
        )

    # The relevance ranking (hag.retrieval.relevance) reads the catalogue pass in place of the
    # by-concept pass; with no query vector both rankings have only the by-concept pass.
    relevant = dials.retrieval_ranking == "relevance" and vector is not None
    jobs: dict[str, Pass] = {}
    if vector is not None:
        jobs["topic-semantic"] = semantic(
            "topic-semantic", topic_id, scopes, dials.match_count, f"topic:{topic_id}"
        )
    if relevant:
        assert vector is not None
        jobs["topic-catalogue"] = CataloguePass(vector, tuple(slugs), topic_id, scopes, dials)
    elif slugs:
        jobs["topic-concept"] = ConceptPass(tuple(slugs), topic_id, scopes, dials)
    if vector is not None and dials.tutor_match_count > 0:
        jobs["tutor"] = semantic("tutor", None, ("tutor",), dials.tutor_match_count, "scope:tutor")
    if vector is not None and dials.student_match_count > 0:
        # a learner's rows are few: always exact (no ANN label names a student scope)
        jobs["student"] = semantic(
            "student", None, (f"student:{learner_id}",), dials.student_match_count, ""
        )
    # The passes start together; the edge walk needs only the topic passes, so it starts as
    # soon as they are merged and runs while the tutor and student passes may still run.
    running = {name: _start(conn, job.run) for name, job in jobs.items()}
    semantic_rows = running["topic-semantic"].result()[0] if "topic-semantic" in running else []
    if relevant:
        catalogue_rows = running["topic-catalogue"].result()[0]
        # under relevance the context is the message alone (relevance.query_context)
        ranked = relevance.merge_topic(
            semantic_rows, catalogue_rows, slugs, expected, dials, message=context
        )
    else:
        concept_rows = running["topic-concept"].result()[0] if "topic-concept" in running else []
        ranked = ranking.merge_topic(semantic_rows, concept_rows, expected, dials)
    topic = tuple(_advisory(r.row, dials, r.source, r.score) for r in ranked)
    walked = [a.entry_id for a in topic[: dials.edge_walk_top_k]]
    # Only targets this learner may read in this topic are walked (hag_entry_readable, the
    # rule sessions are held to as well): never another learner's pattern or a drawing.
    who = visibility.reader(learner_id, topic_id, dials)
    walk = _start(conn, lambda c: _edge_walk(c, walked, dials, who)) if walked else None

    outputs = {name: future.result() for name, future in running.items()}
    reports = [out[1] for out in outputs.values()]
    tutor = tuple(_advisory(r, dials) for r in outputs.get("tutor", ([], None))[0])
    student = tuple(_advisory(r, dials) for r in outputs.get("student", ([], None))[0])

    edges: list[RenderedEdge] = []
    trees: list[list[str]] = []
    if walk is not None:
        edge_rows, walk_report = walk.result()
        reports.append(walk_report)
        trees = [[] for _ in walked]
        for e in edge_rows:
            line = render.edge_line(
                e["edge_type"],
                e["target_instruction"],
                e["condition"],
                dials.edge_target_max_chars,
            )
            trees[int(e["rank"]) - 1].append(line)
            edges.append(
                RenderedEdge(
                    e["edge_id"],
                    e["source_entry_id"],
                    e["target_entry_id"],
                    e["edge_type"],
                    float(e["confidence"]),
                    e["condition"],
                    line,
                )
            )
    text = render.render(topic, tutor, student, trees)
    return RetrievalResult(
        topic_id, learner_id, context, topic, tutor, student, tuple(edges), text, tuple(reports)
    )


PassResult = tuple[list[ranking.Row], PassReport]


@dataclass(frozen=True, eq=False)
class SemanticPass:
    """A semantic pass of a turn (store.semantic_pass), ready to run on a connection."""

    name: str
    vector: np.ndarray
    topic_id: str | None  # None: every topic (the tutor and student passes)
    scopes: tuple[str, ...]
    count: int
    dials: Settings
    approximate: bool  # an ANN index serves this set (store.semantic_pass decides the path)
    shared: bool  # on a read-pool connection: its reads may fill the shared catalog

    def run(self, conn: Conn) -> PassResult:
        return store.semantic_pass(
            conn,
            self.name,
            self.vector,
            self.topic_id,
            self.scopes,
            self.count,
            self.dials,
            self.approximate,
            self.shared,
        )


@dataclass(frozen=True)
class ConceptPass:
    """The by-concept pass of a turn (store.concept_pass), ready to run on a connection."""

    slugs: tuple[str, ...]
    topic_id: str
    scopes: tuple[str, ...]
    dials: Settings

    def run(self, conn: Conn) -> PassResult:
        return store.concept_pass(conn, self.slugs, self.topic_id, self.scopes, self.dials)


@dataclass(frozen=True, eq=False)
class CataloguePass:
    """The relevance ranking's catalogue pass (store.catalogue_pass), ready to run."""

    vector: np.ndarray
    slugs: tuple[str, ...]
    topic_id: str
    scopes: tuple[str, ...]
    dials: Settings

    def run(self, conn: Conn) -> PassResult:
        return store.catalogue_pass(
            conn, self.vector, self.slugs, self.topic_id, self.scopes, self.dials
        )


Pass = SemanticPass | ConceptPass | CataloguePass
T = TypeVar("T")


def _start(conn: Conn | None, work: Callable[[Conn], T]) -> Future[T]:
    """Run `work(connection)`: on the caller's connection now, or on the read pool.

    On the caller's connection the work happens here, in order (one connection cannot run
    two queries at once), in a transaction of its own when the connection is in autocommit
    (what a pass sets for its search then ends with it); otherwise on a pooled connection
    in the pass executor.
    """
    if conn is not None:
        done: Future[T] = Future()
        with conn.transaction() if conn.autocommit else contextlib.nullcontext():
            done.set_result(work(conn))
        return done

    def run() -> T:
        with store.reader() as pooled:
            return work(pooled)

    return store.executor().submit(run)


def _edge_walk(
    conn: Conn, walked: list[Any], dials: Settings, who: visibility.Reader
) -> tuple[list[Any], PassReport]:
    started = time.perf_counter()
    rows = store.edge_walk(conn, walked, dials, who)
    took = round((time.perf_counter() - started) * 1000, 3)
    return rows, PassReport("edge-walk", "exact", len(rows), took)


def _advisory(
    row: ranking.Row, dials: Settings, source: str = "semantic", score: float = 0.0
) -> Advisory:
    confidence = float(row["confidence"])
    return Advisory(
        entry_id=row["id"],
        concept_slug=row["concept_slug"],
        visibility_scope=row["visibility_scope"],
        maturity=row["maturity"],
        similarity=_finite(float(row["similarity"])),
        confidence=confidence,
        routing_score=_finite(ranking.routing_score(row)),
        band=ranking.band(confidence, dials),
        instruction=ranking.clip_advisory(row["instruction"], dials.advisory_max_chars),
        topic_id=row["topic_id"],
        source=source,
        rank_score=_finite(score),
    )


def _finite(value: float) -> float:
    """A zero vector stored before they were refused has no cosine (NaN): it counts 0."""
    return value if math.isfinite(value) else 0.0
