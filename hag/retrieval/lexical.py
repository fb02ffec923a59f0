"""The relevance ranking's lexical signal: BM25 of the message over the catalogue's concepts.

A small embedder puts a short message near several neighbouring concepts at once (a
substitution cipher, Caesar and frequency analysis; stacks and queues); the words the
student uses often tell them apart where the vector does not. Each concept the catalogue
pass returned is one document: its title, aliases, description and its returned entries'
instructions, the text the corpus already holds (nothing is learnt from the messages). The
message is scored against those documents with Okapi BM25 (Robertson and Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009), its inverse document frequency
counted over the same documents: a word every returned concept uses tells none apart.

No database and no index: the documents are the few the catalogue pass returned for this
turn (`relevance_catalogue_concepts` nearest plus the recent turns' concepts), and each
document's words are counted once per process (an LRU cache), so a turn adds the
message's words and a sum over a few short documents (about 0.1 ms).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9]+")
# English function words and the question words students open with: they say nothing about
# which concept a message is about.
STOPWORDS = frozenset(
    "a about all an and any are as at be but by can could did do does each every for from "  # noqa: SIM905
    "get got how i if in into is it its just me my no not of on one or so than that the "
    "their them then there they this to two use used using vs was we what when which who "
    "why with would should you your".split()
)
_SUFFIXES = (("ing", ""), ("ies", "y"), ("es", ""), ("ed", ""), ("ly", ""), ("s", ""))


def stem(word: str) -> str:
    """A crude suffix strip (ciphers -> cipher, queues -> queu; a word of four letters or
    fewer keeps its ending, keys stays keys): the same rule
    on the message and the documents, so only agreement matters, not English."""
    for suffix, replacement in _SUFFIXES:
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)] + replacement
    return word


def terms(text: str) -> tuple[str, ...]:
    """The text's stemmed words, lower case, stopwords and one-letter words left out
    (hyphens split words: an alias `advanced-encryption-standard` gives three)."""
    words = _WORD.findall(text.lower())
    return tuple(stem(w) for w in words if len(w) > 1 and w not in STOPWORDS)


# The memory's own texts (instructions, aliases) recur turn after turn: their terms are
# cached. A student's message is not kept: it is split afresh by `bm25` each turn.
_document_terms = lru_cache(maxsize=8192)(terms)


def document(texts: Iterable[str]) -> Counter[str]:
    """One document's term counts from its texts (shared through a cache: not to be
    changed by the caller)."""
    return _document(tuple(texts))


@lru_cache(maxsize=4096)
def _document(texts: tuple[str, ...]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(_document_terms(text))
    return counts


def bm25(
    query: str, documents: Mapping[str, Counter[str]], k1: float, b: float
) -> dict[str, float]:
    """Each document's Okapi BM25 score for the query's distinct terms, the inverse document
    frequency log(1 + (N - n + 0.5) / (n + 0.5)) counted over these documents; 0.0 for a
    document sharing no term (and for every one when there are none)."""
    wanted = set(terms(query))
    count = len(documents)
    if not wanted or not count:
        return dict.fromkeys(documents, 0.0)
    lengths = {key: sum(doc.values()) for key, doc in documents.items()}
    average = sum(lengths.values()) / count or 1.0
    frequency = Counter(t for doc in documents.values() for t in wanted & doc.keys())
    weight = {t: math.log(1 + (count - n + 0.5) / (n + 0.5)) for t, n in frequency.items()}
    scores: dict[str, float] = {}
    for key, doc in documents.items():
        norm = k1 * (1 - b + b * lengths[key] / average)
        scores[key] = sum(
            weight[t] * doc[t] * (k1 + 1) / (doc[t] + norm) for t in wanted if t in doc
        )
    return scores
