"""The relevance ranking (`retrieval_ranking` = relevance): pure rules, no database.

The seed's ranking multiplies similarity by confidence and maturity, embeds every turn with
the same `topic:… level:… focus:…` prefix and fills its by-concept pass only from the recent
turns. Measured on the labelled messages of bench/data/relevance.jsonl (docs/retrieval.md,
"Relevance"), that puts the most confident entry of a topic first whatever was asked: with
a real embedder the prefix dominates a short message's vector and the similarities of a
topic's entries sit in a narrow band, which the multipliers then outweigh.

Under the relevance ranking a turn's advisories are ranked by what the message is about:

- the query embeds the student's message alone (still one vector per turn, reused by every
  pass); the focus enters as the expected concept, as the seed's bonus has it;
- the topic's catalogue concepts nearest the message feed a catalogue pass
  (store.catalogue_pass), beside the recent turns' slugs, with every entry's own cosine; a
  recent turn's concept counts as similar 1.0 by fiat, as the seed's by-concept pass
  counts its entries;
- an entry's relevance blends its own similarity with its concept's
  (`relevance_concept_weight`): the concept's title and description say what the advice is
  about, the instruction says how to teach it;
- the words of the message add a lexical signal (hag.retrieval.lexical): BM25 over the
  catalogue pass's concepts (title, aliases, description and entries' instructions) times
  `relevance_lexical_weight`, which tells apart neighbours the vector puts side by side;
- confidence and maturity enter as a bounded tie-break (`relevance_confidence_weight` x
  confidence x maturity boost), so no confident entry heads every block.

The semantic pass itself is the seed's (its fast paths and their proofs unchanged): its rows
and the catalogue pass's are merged here, semantic winning a collision as in the seed's merge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hag.retrieval import lexical
from hag.retrieval.ranking import Ranked, Row
from hag.retrieval.tiers import maturity_boost
from hag.settings import Settings

UNANCHORED = "_unanchored_"


def query_context(
    topic_title: str, level: str | None, focus: str | None, message: str, dials: Settings
) -> str:
    """The relevance ranking's one string per turn: the student's message alone.

    The topic, level and focus are left out of the vector: the topic is a filter of the
    passes, the focus the expected concept of the merge.
    """
    return message[: dials.query_message_max_chars]


def concept_similarities(
    catalogue: Sequence[Row], recent: Iterable[str]
) -> tuple[dict[str, float], float | None]:
    """Each concept's similarity to the query from the catalogue pass (1.0 by fiat for the
    recent turns' concepts), and the lowest among the nearest concepts (None when the
    catalogue gave none): a concept beyond the nearest is at most that similar."""
    known = [r for r in catalogue if r["concept_similarity"] is not None]
    similar = {r["concept_slug"]: _number(r["concept_similarity"]) for r in known}
    near = [_number(r["concept_similarity"]) for r in known if r["near"]]
    similar.update(dict.fromkeys(recent, 1.0))
    return similar, (min(near) if near else None)


def relevance(
    row: Row, similar: Mapping[str, float], floor: float | None, dials: Settings
) -> float:
    """An entry's relevance: its similarity blended with its concept's.

    A concept the catalogue pass did not return is at most as similar as the nearest
    concepts' lowest (`floor`): it counts the entry's own similarity, capped there. An entry
    with no concept (`_unanchored_`), or a turn whose topic has no concept embeddings,
    counts its own similarity for both.
    """
    own = _number(row["similarity"])
    slug = row["concept_slug"]
    concept = similar.get(slug)
    if concept is None:
        concept = own if slug == UNANCHORED or floor is None else min(own, floor)
    weight = dials.relevance_concept_weight
    return (1.0 - weight) * own + weight * concept


def lexical_scores(message: str, catalogue: Sequence[Row], dials: Settings) -> dict[str, float]:
    """Each catalogue concept's BM25 score for the message (hag.retrieval.lexical): its
    document is its title, aliases, description and the instructions of its entries the
    pass returned."""
    texts: dict[str, list[str]] = {}
    for r in catalogue:
        slug = r["concept_slug"]
        if slug not in texts:
            aliases = r.get("concept_aliases") or []
            named = [r.get("concept_title"), *aliases, r.get("concept_description")]
            texts[slug] = [t for t in named if t]
        if r["id"] is not None and r.get("instruction"):
            texts[slug].append(r["instruction"])
    documents = {slug: lexical.document(t) for slug, t in texts.items()}
    return lexical.bm25(message, documents, dials.relevance_lexical_k1, dials.relevance_lexical_b)


def score(
    row: Row,
    similar: Mapping[str, float],
    floor: float | None,
    expected: Iterable[str] | set[str],
    dials: Settings,
    words: Mapping[str, float] | None = None,
) -> float:
    """Relevance (times the seed's bonus for an expected concept), plus the lexical signal
    of its concept (`words`: BM25 per slug, 0 for a concept not among them) times
    `relevance_lexical_weight`, plus the bounded tie-break of confidence times the
    maturity boost."""
    bonus = dials.concept_match_bonus if row["concept_slug"] in expected else 1.0
    lexical_part = dials.relevance_lexical_weight * (words or {}).get(row["concept_slug"], 0.0)
    tie_break = (
        dials.relevance_confidence_weight
        * _number(row["confidence"])
        * maturity_boost(row["maturity"], dials)
    )
    return relevance(row, similar, floor, dials) * bonus + lexical_part + tie_break


def merge_topic(
    semantic: Sequence[Row],
    catalogue: Sequence[Row],
    recent: Iterable[str],
    expected: Iterable[str],
    dials: Settings,
    message: str = "",
) -> list[Ranked]:
    """The relevance ranking's merge of the semantic and catalogue passes: dedupe (semantic
    wins), score, keep the top `topic_top_k`. `recent`: the recent turns' slugs; `message`:
    the student's message, whose words the lexical signal reads (none: no lexical signal)."""
    expected_slugs = set(expected)
    similar, floor = concept_similarities(catalogue, recent)
    words = lexical_scores(message, catalogue, dials) if message else {}
    entries = [r for r in catalogue if r["id"] is not None]
    merged: dict[Any, Ranked] = {}
    for source, rows in (("semantic", semantic), ("catalogue", entries)):
        for row in rows:
            if row["id"] not in merged:
                merged[row["id"]] = Ranked(
                    row, source, score(row, similar, floor, expected_slugs, dials, words)
                )
    ranked = sorted(merged.values(), key=lambda r: (-r.score, r.source != "semantic", r.row["id"]))
    return ranked[: dials.topic_top_k]


def _number(value: Any) -> float:
    """A similarity as a float; a zero vector's (NaN) counts 0, as Advisory reports it."""
    number = float(value)
    return number if math.isfinite(number) else 0.0
