"""The pure rules of the read path: query context, re-rank, merge, bands and clipping.

No database here: every function takes rows (dicts as the SQL returns them) and a snapshot
of the dials, so each rule is tested on worked numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hag.retrieval.tiers import maturity_boost, tier_boosts
from hag.settings import Settings

Row = dict[str, Any]  # a result row as the pools return it (hag.storage.db.Row)


def query_context(
    topic_title: str, level: str | None, focus: str | None, message: str, dials: Settings
) -> str:
    """The seed's one context string per turn, embedded once and reused by every pass."""
    limit = dials.query_message_max_chars
    return (
        f"topic:{topic_title} level:{level or 'none'} focus:{focus or 'none'} "
        f"student:{message[:limit]}"
    )


def recent_slugs(recent: Iterable[str | Sequence[str]], dials: Settings) -> list[str]:
    """The concept slugs of the last `recent_concept_turns` turns, newest first, once each.

    `recent` is either one slug per item (already the recent turns' slugs) or one sequence
    of slugs per turn, oldest turn first; only the last `recent_concept_turns` turns count.
    """
    given = list(recent)
    slugs: list[str] = [i for i in given if isinstance(i, str)]
    if len(slugs) < len(given):
        turns = [[i] if isinstance(i, str) else list(i) for i in given]
        turns = turns[-dials.recent_concept_turns :]
        slugs = [slug for turn in reversed(turns) for slug in turn if isinstance(slug, str)]
    return list(dict.fromkeys(s.strip() for s in slugs if s and s.strip()))


def boosted_similarity(row: Row, dials: Settings) -> float:
    """The seed's semantic ORDER BY key: similarity times the maturity boost."""
    return float(row["similarity"]) * maturity_boost(row["maturity"], dials)


@dataclass(frozen=True)
class Reranked:
    rows: list[Row]
    proven: bool  # True when these rows are certainly the exact query's top rows


def rerank_candidates(
    candidates: Sequence[Row], k: int, requested: int, dials: Settings
) -> Reranked:
    """Top `k` of nearest-first candidates by the seed's boosted order, and whether that is exact.

    The candidates are the `requested` rows nearest the query (cosine), nearest first. If
    they are the true nearest rows, a row outside them has similarity at most the last
    candidate's, so its boosted score is at most that times the largest boost (the smallest,
    when the similarity is negative). When the k-th re-ranked score beats that bound, no
    outside row can enter the top k: the answer equals the seed's ORDER BY over the whole
    eligible set, as far as the candidates are the true nearest (HNSW makes that likely, not
    certain: its recall is measured, docs/retrieval.md). Fewer rows than requested prove
    nothing here (an approximate scan may stop early): the caller asks the exact query.
    """
    ranked = sorted(candidates, key=lambda r: (-boosted_similarity(r, dials), r["id"]))[:k]
    if len(candidates) < requested or len(ranked) < k:
        return Reranked(ranked, False)
    last = float(candidates[-1]["similarity"])
    boosts = tier_boosts(dials)
    bound = last * (max(boosts) if last >= 0 else min(boosts))
    return Reranked(ranked, boosted_similarity(ranked[-1], dials) > bound)


def rerank_compact(candidates: Sequence[Row], k: int, requested: int, dials: Settings) -> Reranked:
    """Top `k` of the compact copy's candidates by the seed's order, and whether that is exact.

    The candidates are the `requested` rows with the best boosted similarity in half
    precision (`approximate`), each carrying its exact `similarity` too. Half precision moves
    a unit vector's cosine by at most `compact_similarity_error` (e), so a row outside the
    candidates has an exact boosted score of at most the lowest approximate score among them
    plus e times the largest boost. When the k-th exactly re-ranked candidate beats that
    bound, the answer is the seed's ORDER BY over the whole eligible set: a proof, not an
    estimate (the copy is read in the same snapshot as the rows). Fewer rows than requested
    means the copy held no others: exact as well.
    """
    ranked = sorted(candidates, key=lambda r: (-boosted_similarity(r, dials), r["id"]))[:k]
    if len(candidates) < requested:
        return Reranked(ranked, True)
    if len(ranked) < k:
        return Reranked(ranked, False)
    floor = min(float(r["approximate"]) for r in candidates)
    boosts = tier_boosts(dials)
    bound = floor + dials.compact_similarity_error * max(boosts)
    return Reranked(ranked, boosted_similarity(ranked[-1], dials) > bound)


@dataclass(frozen=True)
class Ranked:
    row: Row
    source: str  # semantic | concept | catalogue (the relevance ranking's concept pass)
    score: float  # seed: similarity x confidence x maturity weight x concept bonus


def merge_topic(
    semantic: Sequence[Row],
    by_concept: Sequence[Row],
    expected: Iterable[str],
    dials: Settings,
) -> list[Ranked]:
    """The seed's merge of the two topic passes: dedupe (semantic wins), re-rank, keep top k."""
    expected_slugs = set(expected)
    bonus = dials.concept_match_bonus
    merged: dict[Any, Ranked] = {}
    for source, rows in (("semantic", semantic), ("concept", by_concept)):
        for row in rows:
            if row["id"] in merged:
                continue  # semantic wins a collision: only it carries the geometry
            score = (
                float(row["similarity"])
                * float(row["confidence"])
                * maturity_boost(row["maturity"], dials)
                * (bonus if row["concept_slug"] in expected_slugs else 1.0)
            )
            merged[row["id"]] = Ranked(row, source, score)
    ranked = sorted(merged.values(), key=lambda r: (-r.score, r.source != "semantic", r.row["id"]))
    return ranked[: dials.topic_top_k]


def relative_contrast(candidates: Sequence[Row], k: int, mean_similarity: float) -> float:
    """How far the query's k-th nearest row stands out from the whole set: D_mean / D_k.

    The relative contrast of a query (He, Kumar and Chang, ICML 2012; k = 1 is their
    definition, and the read path's): the mean cosine distance from the query to every row,
    over its distance to its k-th nearest row. A query near a cluster has contrast 1.7-2.2
    on the benchmark's data; a query near nothing sees its nearest row barely nearer than
    the average row (1.08-1.32), and there an HNSW walk misses true neighbours it never
    reached (recall 0.34-0.75). The mean distance is 1 - the query's cosine with the mean of
    the set's unit vectors (store.Catalog keeps that mean). Candidates come nearest first;
    fewer than k give 0.0; a k-th row identical to the query gives infinity.
    """
    if len(candidates) < k or k < 1:
        return 0.0
    kth = 1.0 - float(candidates[k - 1]["similarity"])
    mean = 1.0 - mean_similarity
    return mean / kth if kth > 0 else float("inf")


def routing_score(row: Row) -> float:
    """Seed: the score the orchestrator routes on is plain confidence x similarity."""
    return float(row["confidence"]) * float(row["similarity"])


def band(confidence: float, dials: Settings) -> str:
    """The confidence band label of an advisory: high, medium or low (never a filter)."""
    if confidence >= dials.band_high_min:
        return "high"
    if confidence >= dials.band_medium_min:
        return "medium"
    return "low"


_SENTENCE_END = re.compile(r"[.!?][\"')\]]*(?=\s|$)")


def one_line(text: str) -> str:
    """The text with every run of whitespace (newlines too) made one space."""
    return " ".join(text.split())


def clip_advisory(text: str, limit: int) -> str:
    """The text cut to at most `limit` characters at the last sentence end that fits.

    With no sentence end inside the limit, it is cut at the last word that fits and marked
    with an ellipsis (the mark counts towards the limit).
    """
    text = one_line(text)
    if len(text) <= limit:
        return text
    end = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > limit:
            break
        end = match.end()
    if end:
        return text[:end]
    head = text[: limit - 1]
    cut = head.rfind(" ")
    return (head[:cut] if cut > 0 else head).rstrip() + "…"


def products(matrix: np.ndarray, vector: np.ndarray) -> np.ndarray:
    """`matrix @ vector` on this thread alone.

    numpy's `@` hands a product this size to its BLAS, whose threads then spin on every
    other core for a while after returning, waiting for more work: on a small machine they
    take the cores the pass's own queries run on (measured at 1M x 1,536 on 2 cores: p50 of
    a turn 16.9 -> 10.9 ms, of a query near nothing 31.3 -> 26.6 ms, when the BLAS was held
    to one thread; docs/retrieval.md). einsum computes it in numpy's own loop: about 0.3 ms
    for the 2,000-row sample at 1,536 dimensions, against 0.06 ms threaded.
    """
    found: np.ndarray = np.einsum("ij,j->i", matrix, vector.astype(matrix.dtype, copy=False))
    return found
