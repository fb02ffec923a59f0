"""The read path's database side: the passes' SQL over the read pool, the ANN index catalog.

Each pass is one query on its own connection of the read pool (`db.read_pool`), so the four
passes of a turn run at the same time (threads over the sync pool: psycopg releases the GIL
while it waits on the server; bench/bench_retrieval.py measures them against the same passes
on one connection). The edge walk takes a fifth connection while the tutor and student
passes finish. The pool's connections are autocommit and `default_transaction_read_only`:
the server itself refuses any write from the read path (db.configure_reader; behind a
transaction-mode pooler each read is one read-only transaction instead, db.reading).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np

from hag.retrieval.model import PassReport
from hag.retrieval.ranking import (
    Row,
    products,
    relative_contrast,
    rerank_candidates,
    rerank_compact,
)
from hag.retrieval.resident import filter_key, residents
from hag.settings import Settings
from hag.storage import db
from hag.storage.db import Conn
from hag.storage.sqlfiles import dial_values, placeholders, query, with_dials
from hag.storage.visibility import Reader

_PASSES = db.READ_CONNECTIONS  # one per concurrent pass, and the edge walk

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_ef_search: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


@contextmanager
def reader(conn: Conn | None = None) -> Iterator[Conn]:
    """The caller's connection when given, else a read-pool connection for the block."""
    if conn is not None:
        yield conn
        return
    with db.reading() as pooled:
        yield pooled


def executor() -> ThreadPoolExecutor:
    global _executor
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=2 * _PASSES, thread_name_prefix="hag-pass")
        return _executor


def use_ef_search(conn: Conn, ef_search: int, *, shared: bool = True) -> None:
    """Set hnsw.ef_search on this connection when the dial changed since it was last set.

    For the session only on a read-pool connection (`shared`) in autocommit outside a
    transaction-mode pooler; a caller's connection, or any in a transaction or behind such a
    pooler, gets it for its transaction only (a caller's autocommit connection runs its
    passes in one: `hag.retrieval._start`), so its own later queries keep their settings."""
    if _ef_search.get(conn) == ef_search:
        return
    local = not shared or not conn.autocommit or db.transaction_pooling()
    conn.execute(
        "SELECT set_config('hnsw.ef_search', %s, %s), "
        "set_config('hnsw.iterative_scan', 'relaxed_order', %s)",
        (str(ef_search), local, local),
    )
    if not local:
        _ef_search[conn] = ef_search


def filters(dials: Settings) -> dict[str, Any]:
    """The seed's filter and boost parameters, from the dials: the per-tier floors and boosts
    and the confidence floor, exactly the dials the search copy's exact pass names
    (sql/queries/retrieval.sql: compact_candidates). They key the resident sets too."""
    return dial_values(placeholders(query("retrieval", "compact_candidates")), dials)


def semantic_pass(
    conn: Conn,
    name: str,
    vector: np.ndarray,
    topic_id: str | None,
    scopes: Sequence[str],
    count: int,
    dials: Settings,
    approximate: bool,
    shared: bool = True,
) -> tuple[list[Row], PassReport]:
    """The seed's semantic pass: top `count` by boosted similarity, as the seed orders.

    With an ANN index for this eligible set, the nearest `ann_candidates` rows are fetched
    through it and re-ranked. The exact answer (`exact_answer`) is given instead when the
    query stands near nothing (relative contrast below `ann_min_contrast`: an approximate
    walk loses rows there), or when the re-rank over the candidates cannot be proven to hold
    against every row outside them (see ranking.rerank_candidates) even after one wider try,
    and always without an ANN index. The exact answer comes from the set held in memory when
    there is one (hag.retrieval.resident: the same proof as the copy's, checked against the
    set's stamp in the same snapshot), else through the copy, and such a read counts toward
    holding its set. A held set no larger than `resident_before_index_max_mb` answers before
    the index is tried at all (100k x 1,536, the tutor scope's 15 MB: 1.3 ms against 4.6
    through the index), and only a set known to be that small counts the reads the index
    answers; a larger one loses to the walk (1M x 1,536: 144 MB, 7 ms against 4). The
    report's path
    says which: 'resident', 'candidates', or the reason for the exact answer and how it was
    obtained ('exact-low-contrast, compact', 'exact-low-contrast-sampled, resident'). `shared`: `conn` is a
    read-pool connection, whose reads may fill the process-wide catalog and resident sets
    (not so for a caller's connection, which may see rows it never commits).
    """
    started = time.perf_counter()
    params = {**filters(dials), "query": vector, "topic_id": topic_id, "scopes": list(scopes)}
    search_set = compact_set(topic_id, scopes)
    key = filter_key(search_set, topic_id, scopes, params) if shared and search_set else None
    reason = ""
    held_tried = False  # a held set that proved nothing is not asked twice in one pass
    if approximate and key is not None and residents.before_index(key, dials):
        held_tried = True
        answered = residents.answer(conn, key, vector, count, dials)
        if answered is not None:
            return answered[0], _report(name, answered[1], answered[0], started)
    if approximate:
        use_ef_search(conn, dials.hnsw_ef_search, shared=shared)
        mean = catalog.mean_vector(conn, topic_id, scopes, dials.ann_mean_ttl_seconds, store=shared)
        norm = float(np.linalg.norm(vector))
        mean_similarity = float(vector @ mean) / norm if mean is not None and norm else 0.0
        requested = max(dials.ann_candidates, count)
        reason = "exact-fallback"
        sample = catalog.contrast_sample(
            conn,
            topic_id,
            scopes,
            dials.ann_contrast_sample_rows,
            dials.ann_mean_ttl_seconds,
            store=shared,
        )
        if sample is not None and norm:
            # the sample's nearest row is no nearer than the set's: a low contrast here is
            # low for the walk too, which would only be turned away after its cost
            nearest = [{"similarity": float(np.max(products(sample, vector))) / norm}]
            if relative_contrast(nearest, 1, mean_similarity) < dials.ann_min_contrast:
                requested = 0
                reason = "exact-low-contrast-sampled"
        for attempt in range(2 if requested else 0):
            rows = conn.execute(
                query("retrieval", "semantic_candidates"), {**params, "candidates": requested}
            ).fetchall()
            # Nearest first, exactly: an iterative scan in relaxed order may hand rows back
            # slightly out of distance order, and both checks below read positions.
            rows.sort(key=lambda r: (-float(r["similarity"]), r["id"]))
            if relative_contrast(rows, 1, mean_similarity) < dials.ann_min_contrast:
                reason = "exact-low-contrast"
                break
            reranked = rerank_candidates(rows, count, requested, dials)
            if reranked.proven:
                path = "candidates" if attempt == 0 else "candidates-widened"
                if key is not None:
                    residents.note_read(key, dials, executor(), indexed=True)
                return reranked.rows, _report(name, path, reranked.rows, started)
            if len(rows) < requested:
                break  # the scan ran dry: the eligible set is small, or the scan stopped
            requested *= dials.ann_widen_factor
    if key is not None:
        answered = None if held_tried else residents.answer(conn, key, vector, count, dials)
        if answered is not None:
            rows, method = answered
            return rows, _report(name, f"{reason}, {method}" if reason else method, rows, started)
        residents.note_read(key, dials, executor())
    rows, method = exact_answer(conn, params, count, dials, search_set)
    return rows, _report(name, f"{reason}, {method}" if reason else method, rows, started)


def compact_set(topic_id: str | None, scopes: Sequence[str]) -> str | None:
    """The partition of the search copy (migration 080) holding a pass's rows, or None.

    'tutor' for the tutor pass, 'topic' for one topic over topic scopes only; any other
    set (a learner's scope, a mix) is not copied and is read from hag_entries.
    """
    if topic_id is None:
        return "tutor" if list(scopes) == ["tutor"] else None
    topical = all(s not in ("tutor", "visual") and not s.startswith("student") for s in scopes)
    return "topic" if scopes and topical else None


def exact_answer(
    conn: Conn,
    params: Mapping[str, Any],
    count: int,
    dials: Settings,
    search_set: str | None,
) -> tuple[list[Row], str]:
    """The seed's exact answer for a pass, and how it was obtained.

    Through the half-precision search copy when the pass's rows are in it: the best
    `compact_candidates` rows by half-precision score, re-ranked exactly and proven
    (ranking.rerank_compact), with one wider try ('compact', 'compact-widened'). Otherwise,
    or when even the wider try proves nothing, the seed's query itself ('exact').
    """
    if search_set is not None:
        requested = max(dials.compact_candidates, count)
        for attempt in range(2):
            rows = conn.execute(
                query("retrieval", "compact_candidates"),
                {**params, "search_set": search_set, "candidates": requested},
            ).fetchall()
            reranked = rerank_compact(rows, count, requested, dials)
            if reranked.proven:
                return reranked.rows, "compact" if attempt == 0 else "compact-widened"
            requested *= dials.ann_widen_factor
    return seed_exact(conn, params, count), "exact"


def seed_exact(conn: Conn, params: Mapping[str, Any], count: int) -> list[Row]:
    """The seed's semantic query (match_hag_entries, every dial bound) over hag_entries."""
    return conn.execute(
        query("retrieval", "semantic_exact"), {**params, "match_count": count}
    ).fetchall()


def concept_pass(
    conn: Conn,
    slugs: Sequence[str],
    topic_id: str,
    scopes: Sequence[str],
    dials: Settings,
) -> tuple[list[Row], PassReport]:
    """The seed's by-concept pass over the topic scopes."""
    started = time.perf_counter()
    sql = query("retrieval", "concept_pass")
    rows = conn.execute(
        sql, with_dials(sql, dials, slugs=list(slugs), topic_id=topic_id, scopes=list(scopes))
    ).fetchall()
    return rows, _report("topic-concept", "exact", rows, started)


def catalogue_pass(
    conn: Conn,
    vector: np.ndarray,
    slugs: Sequence[str],
    topic_id: str,
    scopes: Sequence[str],
    dials: Settings,
) -> tuple[list[Row], PassReport]:
    """The relevance ranking's concept pass: the catalogue concepts nearest the query and the
    recent slugs, each with its similarity and its eligible entries (sql: catalogue_pass)."""
    started = time.perf_counter()
    concepts = dials.relevance_catalogue_concepts + len(slugs)
    rows = conn.execute(
        query("retrieval", "catalogue_pass"),
        {
            **filters(dials),
            "query": vector,
            "slugs": list(slugs),
            "topic_id": topic_id,
            "scopes": list(scopes),
            "concept_count": dials.relevance_catalogue_concepts,
            # each concept gives one row per eligible entry, at most one per topic scope
            # (the identity index), or one row without an entry
            "row_limit": concepts * max(1, len(scopes)),
        },
    ).fetchall()
    return rows, _report("topic-catalogue", "exact", rows, started)


def edge_walk(
    conn: Conn,
    entry_ids: Sequence[Any],
    dials: Settings,
    reader: Reader,
) -> list[Row]:
    """Outgoing edges of each entry in order, walk-filtered, at most the per-entry dial each.

    Only edges into entries the reader may read (hag_entry_readable) are walked.
    """
    sql = query("retrieval", "edge_walk")
    return conn.execute(
        sql, with_dials(sql, dials, entry_ids=list(entry_ids), **reader.params())
    ).fetchall()


def _report(name: str, path: str, rows: Sequence[Row], started: float) -> PassReport:
    return PassReport(name, path, len(rows), round((time.perf_counter() - started) * 1000, 3))


Connect = Callable[[], AbstractContextManager[Any]]  # opens a connection for a block


class Catalog:
    """Topic titles, the ANN indexes present and the searched sets' mean vectors, with TTLs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._titles: dict[str, tuple[float, str | None]] = {}
        self._ann: tuple[float, dict[str, float]] | None = None
        self._means: dict[tuple[Any, ...], tuple[float, np.ndarray | None]] = {}
        self._refreshing: set[tuple[Any, ...]] = set()

    def clear(self) -> None:
        with self._lock:
            self._titles.clear()
            self._ann = None
            self._means.clear()

    def title(
        self, connect: Connect, topic_id: str, ttl: float, *, store: bool = True
    ) -> str | None:
        """The topic's title, or None when there is no such topic (not kept: a load may create
        it at any time).

        `connect()` opens a connection only when the title is not at hand. With `store`
        False (a caller's connection, which may see rows it never commits) the title is read
        fresh and not kept.
        """
        now = time.monotonic()
        with self._lock:
            hit = self._titles.get(topic_id) if store else None
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
        with connect() as conn:
            row = conn.execute(query("retrieval", "topic_title"), {"topic_id": topic_id}).fetchone()
        title = row["title"] if row else None
        if store and title is not None:  # a topic not there yet is asked again next time:
            with self._lock:  # a corpus load may create it a moment later
                if len(self._titles) > 10_000:
                    self._titles.clear()
                self._titles[topic_id] = (now, title)
        return title

    def mean_vector(
        self,
        conn: Conn,
        topic_id: str | None,
        scopes: Sequence[str],
        ttl: float,
        *,
        store: bool = True,
    ) -> np.ndarray | None:
        """The mean of the unit vectors a pass searches (not archived), re-read every `ttl` s.

        The reference for the relative contrast (ranking.relative_contrast): one scan of the
        pass's rows (about 60 ms for 50,000 rows at 384 dimensions), then served from memory.
        While one thread re-reads an expired mean, the others keep using the old one. With
        `store` False (a caller's connection) a fresh read is used but not kept. None when
        the set is empty.
        """

        def read() -> np.ndarray | None:
            row = conn.execute(
                query("retrieval", "mean_vector"), {"topic_id": topic_id, "scopes": list(scopes)}
            ).fetchone()
            value = None if row is None else row["mean"]
            return None if value is None else np.asarray(value.to_numpy(), np.float32)

        return self._kept(("mean", topic_id, tuple(scopes)), ttl, store, read)

    def contrast_sample(
        self,
        conn: Conn,
        topic_id: str | None,
        scopes: Sequence[str],
        rows: int,
        ttl: float,
        *,
        store: bool = True,
    ) -> np.ndarray | None:
        """Up to `rows` random unit vectors of the set a pass searches, re-read every `ttl` s.

        The query's best cosine with them is at most its best cosine with the whole set, so
        the relative contrast computed from the sample never overstates the true one: a
        query the sample finds near nothing skips the approximate walk that would have been
        turned away anyway (store.semantic_pass). None when `rows` is 0 or the set is empty.
        Kept and refreshed like the mean vector.
        """
        if rows <= 0:
            return None

        def read() -> np.ndarray | None:
            # binary: pgvector's text loader parses each float in Python, which at 1,536
            # dimensions held the GIL for seconds under eight clients (issue 26, bench mixed)
            with conn.cursor(binary=True) as cursor:
                found = cursor.execute(
                    query("retrieval", "contrast_sample"),
                    {"topic_id": topic_id, "scopes": list(scopes), "rows": rows},
                ).fetchall()
            if not found:
                return None
            return np.vstack([r["vector"].to_numpy() for r in found]).astype(np.float32)

        return self._kept(("sample", topic_id, tuple(scopes), rows), ttl, store, read)

    def _kept(
        self,
        key: tuple[Any, ...],
        ttl: float,
        store: bool,
        read: Callable[[], np.ndarray | None],
    ) -> np.ndarray | None:
        """`read()` once per `ttl` per key, read-only; while one thread re-reads an expired
        value the others keep the old one; with `store` False a fresh read is not kept."""
        now = time.monotonic()
        with self._lock:
            hit = self._means.get(key)
            if hit is not None and (now - hit[0] < ttl or key in self._refreshing):
                return hit[1]
            if store:
                self._refreshing.add(key)
        try:
            value = read()
            if value is not None:
                value.setflags(write=False)
            if store:
                with self._lock:
                    if len(self._means) > 10_000:
                        self._means.clear()
                    self._means[key] = (now, value)
            return value
        finally:
            if store:
                with self._lock:
                    self._refreshing.discard(key)

    def ann_labels(
        self, connect: Connect, ttl: float, dials: Settings, *, store: bool = True
    ) -> frozenset[str]:
        """Labels ('topic:<id>', 'scope:tutor') of the valid ANN indexes worth using.

        An index over no more rows than its dial (`topic_exact_scan_max_rows` for a topic,
        `exact_scan_max_rows` for the tutor scope) is left alone: an exact scan of that many
        rows is exact and, measured, about as fast or faster. `connect` and `store` as in
        `title`.
        """
        now = time.monotonic()
        with self._lock:
            fresh = store and self._ann is not None and now - self._ann[0] < ttl
            sizes = self._ann[1] if fresh and self._ann is not None else None
        if sizes is None:
            with connect() as conn:
                rows = conn.execute(query("retrieval", "ann_indexes")).fetchall()
            sizes = {r["label"].removeprefix("hag-ann "): float(r["rows"]) for r in rows}
            if store:
                with self._lock:
                    self._ann = (now, sizes)
        topic_max = dials.topic_exact_scan_max_rows
        scope_max = dials.exact_scan_max_rows
        return frozenset(
            label
            for label, n in sizes.items()
            if n > (topic_max if label.startswith("topic:") else scope_max)
        )


catalog = Catalog()
db.on_read_pool_closed(catalog.clear)  # titles, indexes and means of the database left
