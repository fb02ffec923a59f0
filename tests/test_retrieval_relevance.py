"""The relevance ranking (`retrieval_ranking` = relevance): its rules on worked numbers and
on the database, one setting away from the seed's ranking (which stays the default)."""

from __future__ import annotations

import math
from typing import Any
from uuid import UUID

import pytest

from hag import retrieval, settings
from hag.retrieval import lexical, relevance, store
from hag.settings import defaults
from tests import factories as f

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

RELEVANT = defaults().with_overrides(retrieval_ranking="relevance")


@pytest.fixture(autouse=True)
def fresh_caches():
    """Every test starts with empty result, embedding and catalogue caches."""
    retrieval.clear_caches()
    yield
    retrieval.clear_caches()


def row(
    n: int,
    similarity: float,
    slug: str,
    confidence: float = 0.8,
    maturity: str = "pattern",
    concept_similarity: float | None = None,
    near: bool = True,
) -> dict[str, Any]:
    return {
        "id": UUID(int=n),
        "similarity": similarity,
        "concept_slug": slug,
        "confidence": confidence,
        "maturity": maturity,
        "concept_similarity": concept_similarity,
        "near": near,
    }


def test_the_seed_ranking_is_the_default():
    """Out of the box the seed's ranking runs; the relevance ranking is one setting away."""
    assert defaults().retrieval_ranking == "seed"


def test_relevance_context_is_the_message_alone():
    """Under relevance the turn embeds the student's message (cut to 500), no prefix."""
    text = relevance.query_context("Cryptography", "beginner", "RSA", "b" * 600, RELEVANT)
    assert text == "b" * 500


def test_relevance_blends_entry_and_concept_similarity():
    """0.5 x 0.40 (entry) + 0.5 x 0.80 (its concept) = 0.60; the weight is a dial."""
    similar = {"dh": 0.80}
    entry = row(1, 0.40, "dh")
    assert relevance.relevance(entry, similar, 0.3, RELEVANT) == pytest.approx(0.60)
    own_only = RELEVANT.with_overrides(relevance_concept_weight=0.0)
    assert relevance.relevance(entry, similar, 0.3, own_only) == pytest.approx(0.40)


def test_a_concept_beyond_the_nearest_counts_at_their_lowest():
    """A concept the catalogue pass did not return counts the entry's own similarity capped
    at the nearest concepts' lowest; an unanchored entry (or no catalogue) counts its own."""
    catalogue = [
        row(1, 0.5, "a", concept_similarity=0.7),
        row(2, 0.5, "b", concept_similarity=0.6),
        row(3, 0.5, "recent", concept_similarity=0.1, near=False),
    ]
    similar, floor = relevance.concept_similarities(catalogue, ["recent"])
    assert floor == pytest.approx(0.6)
    assert similar["recent"] == 1.0  # a recent turn's concept: 1.0 by fiat, as the seed's pass
    far = row(9, 0.40, "elsewhere")
    assert relevance.relevance(far, similar, floor, RELEVANT) == pytest.approx(0.40)
    near_by_text = row(10, 0.90, "elsewhere")
    assert relevance.relevance(near_by_text, similar, floor, RELEVANT) == pytest.approx(0.75)
    loose = row(8, 0.40, "_unanchored_")
    assert relevance.relevance(loose, similar, floor, RELEVANT) == pytest.approx(0.40)
    assert relevance.relevance(far, {}, None, RELEVANT) == pytest.approx(0.40)


def test_confidence_is_a_bounded_tie_break():
    """Confidence x maturity boost x 0.02 is all a confident entry gains: 1.0 x 1.1 x 0.02 =
    0.022 against 0.7 x 1.0 x 0.02 = 0.014 overturns a relevance gap of 0.005, not one of
    0.01 (the seed multiplies, and puts the confident entry first at any such gap)."""
    confident = row(1, 0.50, "caesar", confidence=1.0, maturity="proven")
    for gap, winner in ((0.005, 1), (0.01, 2)):
        relevant = row(2, 0.50 + gap, "dh", confidence=0.7, maturity="candidate")
        ranked = relevance.merge_topic([confident, relevant], [], [], [], RELEVANT)
        assert ranked[0].row["id"] == UUID(int=winner), gap
    stronger = RELEVANT.with_overrides(relevance_confidence_weight=0.2)
    relevant = row(2, 0.56, "dh", confidence=0.7, maturity="candidate")
    ranked = relevance.merge_topic([confident, relevant], [], [], [], stronger)
    assert ranked[0].row["id"] == UUID(int=1)


def test_relevance_merge_dedupes_keeps_top_k_and_applies_the_bonus():
    """Semantic wins a collision; the catalogue adds what the semantic pass missed; concept
    a, not returned, counts its 0.5 capped at the nearest's lowest (0.2): 0.35 < b's 0.475 <
    c's 0.60; an
    expected concept's relevance is multiplied by the seed's 1.30; top_k rows survive."""
    semantic = [row(1, 0.50, "a"), row(2, 0.45, "b")]
    catalogue = [
        row(2, 0.45, "b", concept_similarity=0.5),
        row(3, 0.30, "c", concept_similarity=0.9),
        {**row(0, 0.0, "d", concept_similarity=0.2), "id": None},  # a concept with no entry
    ]
    ranked = relevance.merge_topic(semantic, catalogue, [], [], RELEVANT)
    assert [(r.row["id"].int, r.source) for r in ranked] == [
        (3, "catalogue"),
        (2, "semantic"),
        (1, "semantic"),
    ]
    bonus = relevance.merge_topic(semantic, catalogue, [], ["b"], RELEVANT)
    assert bonus[0].row["id"] == UUID(int=2)
    assert bonus[0].score == pytest.approx(0.475 * 1.3 + 0.02 * 0.8 * 1.05)
    one = RELEVANT.with_overrides(topic_top_k=1)
    assert len(relevance.merge_topic(semantic, catalogue, [], [], one)) == 1


def _confident_and_relevant(db: Any) -> tuple[UUID, UUID]:
    """A proven, confident entry whose concept is far from the query, and a pattern entry a
    little further by its instruction whose concept is near it."""
    f.concept(db, "cryptography", "caesar-cipher", embedding=f.vec(0.10, axis=20))
    f.concept(db, "cryptography", "diffie-hellman", embedding=f.vec(0.80, axis=21))
    confident = f.entry(
        db,
        concept_slug="caesar-cipher",
        maturity="proven",
        confidence=0.91,
        embedding=f.vec(0.50, axis=10),
    )
    relevant = f.entry(
        db,
        concept_slug="diffie-hellman",
        maturity="pattern",
        confidence=0.60,
        embedding=f.vec(0.45, axis=11),
    )
    db.commit()
    return confident, relevant


def test_relevance_ranking_on_the_database_puts_the_concept_that_matches_first(db, dials):
    """Seed: 0.50 x 0.91 x 1.1 puts the confident entry first; relevance: 0.5 x 0.45 +
    0.5 x 0.80 + 0.02 x 0.60 x 1.05 = 0.6376 puts the matching concept's entry first."""
    confident, relevant = _confident_and_relevant(db)
    seed = retrieval.retrieve_with_vector("cryptography", "ada", f.QUERY)
    assert [a.entry_id for a in seed.topic_advisories] == [confident, relevant]
    assert seed.topic_advisories[0].rank_score == pytest.approx(0.5005, abs=1e-5)
    dials(retrieval_ranking="relevance")
    result = retrieval.retrieve_with_vector("cryptography", "ada", f.QUERY)
    assert [a.entry_id for a in result.topic_advisories] == [relevant, confident]
    assert result.topic_advisories[0].rank_score == pytest.approx(0.6376, abs=1e-5)
    assert {p.name for p in result.passes} >= {"topic-semantic", "topic-catalogue"}
    assert "topic-concept" not in {p.name for p in result.passes}


def test_the_catalogue_pass_brings_an_entry_the_semantic_pass_missed(db, dials):
    """With one semantic row, the matching concept's entry still arrives, through the
    catalogue pass, with its own cosine (0.45), not 1.0 by fiat."""
    confident, relevant = _confident_and_relevant(db)
    dials(retrieval_ranking="relevance", match_count=1)
    top = retrieval.retrieve_with_vector("cryptography", "ada", f.QUERY).topic_advisories
    assert [(a.entry_id, a.source) for a in top] == [
        (relevant, "catalogue"),
        (confident, "semantic"),
    ]
    assert top[0].similarity == pytest.approx(0.45, abs=1e-5)
    # only the nearest concept: caesar-cipher's is not read, and counts its entry's 0.50
    dials(relevance_catalogue_concepts=1)
    top = retrieval.retrieve_with_vector("cryptography", "ada", f.QUERY).topic_advisories
    assert top[0].entry_id == relevant


def test_a_recent_concept_counts_as_similar_by_fiat_under_relevance(db, dials):
    """The recent turns' concept is read by the catalogue pass at concept similarity 1.0:
    0.5 x 0.50 + 0.5 x 1.0 + 0.02 x 0.91 x 1.1 = 0.770 puts the lesson's entry first."""
    confident, relevant = _confident_and_relevant(db)
    dials(retrieval_ranking="relevance", match_count=1, relevance_catalogue_concepts=1)
    top = retrieval.retrieve_with_vector(
        "cryptography", "ada", f.QUERY, recent_concepts=["caesar-cipher"]
    ).topic_advisories
    assert [a.entry_id for a in top] == [confident, relevant]
    assert top[0].rank_score == pytest.approx(0.77002, abs=1e-5)


def test_a_recent_concept_without_a_catalogue_vector_is_still_read(db, dials):
    """A recent slug the catalogue holds no vector for (or no row at all) still brings its
    entries, at concept similarity 1.0 by fiat: 0.5 x 0.30 + 0.5 x 1.0 + 0.02 x 0.8 x 1.05."""
    _confident_and_relevant(db)
    lesson = f.entry(db, concept_slug="uncatalogued", embedding=f.vec(0.30, axis=12))
    db.commit()
    dials(retrieval_ranking="relevance", relevance_catalogue_concepts=1, match_count=1)
    top = retrieval.retrieve_with_vector(
        "cryptography", "ada", f.QUERY, recent_concepts=["uncatalogued", "_unanchored_"]
    ).topic_advisories
    assert (top[0].entry_id, top[0].source) == (lesson, "catalogue")
    assert top[0].rank_score == pytest.approx(0.6668, abs=1e-5)


def test_retrieve_under_relevance_embeds_the_message_alone(db, dials):
    """The context a relevance turn embeds (and reports) is the message, not the seed's
    prefixed string; the seed's ranking keeps its string."""
    f.topic(db, "cryptography", "Cryptography")
    db.commit()
    seed = retrieval.retrieve("cryptography", "ada", "what is a nonce", level="beginner")
    assert seed.context == "topic:Cryptography level:beginner focus:none student:what is a nonce"
    dials(retrieval_ranking="relevance")
    result = retrieval.retrieve("cryptography", "ada", "what is a nonce", level="beginner")
    assert result.context == "what is a nonce"


def test_lexical_terms_drop_function_words_and_strip_suffixes():
    """Lower case, hyphens split, stopwords and one-letter words out, the same crude suffix
    strip on every text: 'Ciphers' and 'cipher' meet, 'why'/'the'/'a' say nothing."""
    assert lexical.terms("Why do the Ciphers shift a letter?") == ("cipher", "shift", "letter")
    assert lexical.terms("advanced-encryption-standard") == ("advanc", "encryption", "standard")
    assert lexical.stem("queries") == "query" and lexical.stem("letters") == "letter"
    assert lexical.stem("keys") == "keys"  # a short word keeps its ending


def test_bm25_on_worked_numbers():
    """Two documents, 'prime' only in the first (2 of its 4 words), lengths 4 and 2 (average
    3): idf = ln(1 + 1.5 / 1.5) = ln 2; tf part = 2 x 2.2 / (2 + 1.2 x (0.25 + 0.75 x 4/3))
    = 4.4 / 3.5; a word in both documents weighs ln(1 + 0.5 / 2.5), far less."""
    docs = {
        "rsa": lexical.document(["prime prime modulus exponent"]),
        "dh": lexical.document(["modulus generator"]),
    }
    scores = lexical.bm25("which prime", docs, k1=1.2, b=0.75)
    assert scores["rsa"] == pytest.approx(math.log(2) * 4.4 / 3.5)
    assert scores["dh"] == 0.0
    shared = lexical.bm25("modulus", docs, k1=1.2, b=0.75)
    assert max(shared.values()) < 0.25 < scores["rsa"]
    assert lexical.bm25("the and of", docs, k1=1.2, b=0.75) == {"rsa": 0.0, "dh": 0.0}


def _neighbours() -> list[dict[str, Any]]:
    """Two neighbouring concepts the vector puts level (0.50 each, concept 0.60 each), one
    whose description has the message's words."""
    texts = {
        "caesar": ("Caesar cipher", "Shifting every letter by a fixed number of places."),
        "frequency": (
            "Frequency analysis",
            "Counting how often each letter appears, letter by letter",
        ),
    }
    return [
        {
            **row(n, 0.50, slug, concept_similarity=0.60),
            "concept_title": title,
            "concept_description": description,
            "concept_aliases": [],
            "instruction": "Work one example on the board.",
        }
        for n, (slug, (title, description)) in enumerate(texts.items(), start=1)
    ]


def test_the_lexical_signal_tells_level_neighbours_apart_and_its_weight_is_a_dial():
    """Level by vector, the concept whose document has the message's words ('counting',
    'often', 'appear') comes first, by BM25 x 0.03; at weight 0 the tie stays with the
    lower id, and without the message no lexical signal is added."""
    catalogue = _neighbours()
    message = "counting how often letters appear"
    ranked = relevance.merge_topic([], catalogue, [], [], RELEVANT, message=message)
    words = relevance.lexical_scores(message, catalogue, RELEVANT)
    assert words["caesar"] > 0 and words["frequency"] > words["caesar"]
    assert ranked[0].row["concept_slug"] == "frequency"
    base = ranked[1].score
    assert ranked[0].score - base == pytest.approx(0.03 * (words["frequency"] - words["caesar"]))
    off = RELEVANT.with_overrides(relevance_lexical_weight=0.0)
    level = relevance.merge_topic([], catalogue, [], [], off, message=message)
    assert [r.row["concept_slug"] for r in level] == ["caesar", "frequency"]
    unsaid = relevance.merge_topic([], catalogue, [], [], RELEVANT)
    assert [r.row["concept_slug"] for r in unsaid] == ["caesar", "frequency"]


def test_the_bm25_constants_are_dials():
    """k1 and b are read from the dials: a larger k1 lets a repeated word weigh more, b = 0
    stops discounting the longer document."""
    catalogue = _neighbours()
    message = "letter letter counting"
    scores = relevance.lexical_scores(message, catalogue, RELEVANT)
    k1 = relevance.lexical_scores(
        message, catalogue, RELEVANT.with_overrides(relevance_lexical_k1=3.0)
    )
    flat = relevance.lexical_scores(
        message, catalogue, RELEVANT.with_overrides(relevance_lexical_b=0.0)
    )
    assert k1 != scores and flat != scores


def test_the_catalogue_pass_brings_each_concepts_words(db, dials):
    """The catalogue pass returns each concept's title, description and aliases beside its
    entries; with the message's words in Diffie-Hellman's description its entry gains the
    lexical signal (and without a context it does not)."""
    confident, relevant = _confident_and_relevant(db)
    db.execute(
        "UPDATE hag_concepts SET description = 'Two parties agree on a shared secret key', "
        "aliases = ARRAY['key-exchange'] WHERE slug = 'diffie-hellman'"
    )
    db.commit()
    dials(retrieval_ranking="relevance")
    plain = retrieval.retrieve_with_vector("cryptography", "ada", f.QUERY)
    said = retrieval.retrieve_with_vector(
        "cryptography", "ada", f.QUERY, context="how do two parties agree on a key"
    )
    assert [a.entry_id for a in said.topic_advisories] == [relevant, confident]
    gain = said.topic_advisories[0].rank_score - plain.topic_advisories[0].rank_score
    assert gain > 0.01
    rows, _ = store.catalogue_pass(db, f.QUERY, (), "cryptography", ("public",), settings.load(db))
    dh = next(r for r in rows if r["concept_slug"] == "diffie-hellman")
    assert (
        dh["concept_aliases"] == ["key-exchange"] and "shared secret" in dh["concept_description"]
    )


def test_the_labelled_set_splits_into_fixed_halves_by_the_message_text():
    """The bench's development half is fixed by a hash of each message's text (137 of the
    263 messages), so a rule chosen on it is judged on the same held-out half every run."""
    from bench import bench_relevance as bench

    asked = bench.messages()
    halves = [bench.development(m) for m in asked]
    assert sum(halves) == 137 and len(asked) == 263
    same_text = bench.Message("other-topic", asked[0].message, ("x",), "x", "none")
    assert bench.development(same_text) == halves[0]


def test_a_students_message_is_not_kept_by_the_lexical_caches():
    """The memory's texts are cached by their terms; the message a turn scores them against
    is split afresh and kept nowhere (docs/privacy.md names what a tutor's process keeps)."""
    documents = {"rsa": lexical.document(["RSA multiplies two primes"])}
    caches = [f for f in vars(lexical).values() if hasattr(f, "cache_info")]
    held = [c.cache_info().currsize for c in caches]
    scores = lexical.bm25("my secret question about primes", documents, 1.2, 0.75)
    assert scores["rsa"] > 0 and caches  # every cache of the module, none grown
    assert [c.cache_info().currsize for c in caches] == held
