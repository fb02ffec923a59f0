"""The read path's pure rules on worked numbers: context, merge, re-rank, bands, clipping."""

from __future__ import annotations

import math
from uuid import UUID

import pytest

from hag.retrieval import ranking, render
from hag.settings import defaults

DIALS = defaults()


def row(
    n: int, similarity: float, confidence: float = 0.8, maturity: str = "pattern", slug: str = "x"
) -> dict:
    return {
        "id": UUID(int=n),
        "similarity": similarity,
        "confidence": confidence,
        "maturity": maturity,
        "concept_slug": slug,
    }


def test_query_context_is_the_seeds_string_with_the_message_cut_to_500():
    """The context string follows the seed's f-string and keeps 500 message characters."""
    text = ranking.query_context("Cryptography", "beginner", None, "a" * 600, DIALS)
    assert text == "topic:Cryptography level:beginner focus:none student:" + "a" * 500


def test_recent_slugs_per_turn_keep_only_the_last_three_turns():
    """Per-turn slug lists: only the last recent_concept_turns (3) turns feed the pass."""
    turns = [["old"], ["a", "b"], ["b", "c"], ["d"]]
    assert ranking.recent_slugs(turns, DIALS) == ["d", "b", "c", "a"]
    assert ranking.recent_slugs(["rsa", "rsa", " ", "aes"], DIALS) == ["rsa", "aes"]


def test_maturity_boost_changes_the_merge_winner():
    """A proven row at 0.56 (x1.1 = 0.4928 x conf) beats a candidate at 0.60 (0.48)."""
    a, b = row(1, 0.60, maturity="candidate"), row(2, 0.56, maturity="proven")
    assert [r.row["id"] for r in ranking.merge_topic([a, b], [], [], DIALS)][0] == UUID(int=2)
    flat = DIALS.with_overrides(boost_proven=1.0)
    assert [r.row["id"] for r in ranking.merge_topic([a, b], [], [], flat)][0] == UUID(int=1)


def test_concept_bonus_changes_the_merge_winner():
    """An expected slug's x1.30 lifts 0.50 x 0.8 x 1.05 = 0.42 to 0.546, past 0.504."""
    a, b = row(1, 0.60, slug="aes"), row(2, 0.50, slug="rsa")
    ranked = ranking.merge_topic([a, b], [], ["rsa"], DIALS)
    assert [r.row["id"] for r in ranked] == [UUID(int=2), UUID(int=1)]
    assert ranked[0].score == pytest.approx(0.546)
    assert ranking.merge_topic([a, b], [], [], DIALS)[0].row["id"] == UUID(int=1)


def test_confidence_changes_the_merge_winner_and_routing_is_plain_product():
    """Confidence 0.9 at similarity 0.5 beats 0.5 at 0.6; routing score is conf x sim."""
    a, b = row(1, 0.60, confidence=0.5), row(2, 0.50, confidence=0.9)
    ranked = ranking.merge_topic([a, b], [], [], DIALS)
    assert [r.row["id"] for r in ranked] == [UUID(int=2), UUID(int=1)]
    assert ranking.routing_score(b) == pytest.approx(0.45)
    assert ranked[0].score == pytest.approx(0.4725)


def test_semantic_wins_a_collision_and_only_five_survive():
    """A row in both passes keeps its semantic similarity; the merge keeps topic_top_k rows."""
    semantic = [row(i, 0.5 - i / 100) for i in range(1, 5)]
    concept = [{**row(1, 1.0), "similarity": 1.0}] + [row(10 + i, 1.0) for i in range(3)]
    ranked = ranking.merge_topic(semantic, concept, [], DIALS)
    # concept rows: 1.0 x 0.8 x 1.05 = 0.84; the collided row keeps 0.49 -> 0.4116
    assert [r.row["id"] for r in ranked] == [UUID(int=n) for n in (10, 11, 12, 1, 2)]
    collided = ranked[3]
    assert collided.source == "semantic" and collided.row["similarity"] == pytest.approx(0.49)
    assert collided.score == pytest.approx(0.4116)


def test_rerank_proves_exactness_only_past_the_boost_bound():
    """Top-k of nearest candidates is proven exact when its k-th score beats last x 1.1."""
    wide = [row(i, 0.9 - i * 0.05, maturity="candidate") for i in range(6)]
    assert ranking.rerank_candidates(wide, 2, 6, DIALS).proven  # 0.85 > 0.65 x 1.1
    dense = [row(i, 0.80 - i * 0.001, maturity="candidate") for i in range(6)]
    assert not ranking.rerank_candidates(dense, 2, 6, DIALS).proven  # 0.799 < 0.795 x 1.1
    assert not ranking.rerank_candidates(wide[:4], 2, 6, DIALS).proven  # the scan ran dry


def test_compact_rerank_is_proven_only_past_the_half_precision_bound():
    """k-th exact score must beat the lowest half-precision score + error x largest boost."""
    e = DIALS.compact_similarity_error  # 0.003; the bound adds e x 1.1 = 0.0033

    def cand(n: int, exact: float, approximate: float) -> dict:
        return {**row(n, exact, maturity="candidate"), "approximate": approximate}

    # the half-precision order (3, 1, 2, 4) differs from the exact one: the re-rank fixes it
    wide = [cand(3, 0.80, 0.802), cand(1, 0.81, 0.801), cand(2, 0.70, 0.70), cand(4, 0.60, 0.6)]
    got = ranking.rerank_compact(wide, 2, 4, DIALS)
    assert [r["id"] for r in got.rows] == [UUID(int=1), UUID(int=3)] and got.proven
    # 2nd exact 0.6032 against 0.6 + 0.0033: not proven, an outside row might reach 0.6033
    tight = [cand(1, 0.61, 0.61), cand(2, 0.6032, 0.6032), cand(3, 0.6, 0.6)]
    assert not ranking.rerank_compact(tight, 2, 3, DIALS).proven
    tight[1] = cand(2, 0.6034, 0.6034)
    assert ranking.rerank_compact(tight, 2, 3, DIALS).proven
    # fewer rows than asked: the copy has no others, so even the tight case is exact
    assert ranking.rerank_compact(tight[:2] + [cand(3, 0.6, 0.6)], 2, 4, DIALS).proven
    assert e == pytest.approx(0.003)


def test_relative_contrast_is_the_mean_distance_over_the_kths():
    """k-th similarity 0.8 (distance 0.2), mean similarity 0.3 (distance 0.7): 3.5."""
    rows = [{"similarity": s} for s in (0.9, 0.8, 0.5)]
    assert ranking.relative_contrast(rows, 2, 0.3) == pytest.approx(3.5)
    assert ranking.relative_contrast(rows, 3, 0.5) == pytest.approx(1.0)  # k-th is average
    assert ranking.relative_contrast(rows, 4, 0.0) == 0.0  # fewer than k candidates
    assert ranking.relative_contrast([{"similarity": 1.0}], 1, 0.0) == math.inf


def test_bands_are_labels_by_confidence():
    """0.75 and above is high, 0.5 and above medium, below that low."""
    assert [ranking.band(c, DIALS) for c in (0.75, 0.74, 0.5, 0.49)] == [
        "high",
        "medium",
        "medium",
        "low",
    ]


def test_clip_cuts_at_the_last_sentence_end_within_the_limit():
    """A 400-character clip ends at the last full sentence that fits."""
    first = "A" * 200 + "."
    second = " " + "B" * 150 + "!"
    third = " " + "C" * 100 + "."
    clipped = ranking.clip_advisory(first + second + third, 400)
    assert clipped == first + second
    assert len(clipped) == 353  # 201 + 152: the third sentence would end at 455


def test_clip_without_a_sentence_end_cuts_at_a_word_and_marks_it():
    """With no sentence end inside the limit, the cut is at a word, with an ellipsis."""
    clipped = ranking.clip_advisory("word " * 100, 23)
    assert clipped == "word word word word…"
    assert len(clipped) <= 23
    assert ranking.clip_advisory("short.\nText", 400) == "short. Text"


def test_edge_lines_keep_the_seeds_columns():
    """prereq/fallback/next lines match SPEC §3; condition appended as (when: ...)."""
    assert render.edge_line("prerequisite", "x" * 150, None, 100) == "  prereq:   " + "x" * 100
    assert (
        render.edge_line("fallback", "Try it.", "stuck", 100) == "  fallback: Try it. (when: stuck)"
    )
    assert render.edge_line("leads_to", "Go on.", "ok", 100) == "  next:     Go on. (when: ok)"
    assert render.edge_line("related", "See.", "", 100) == "  related:  See."
    assert render.edge_line("supersedes", "Old.", None, 100) == "  replaces: Old."


def test_the_sample_product_keeps_the_samples_precision():
    """The contrast sample's products (computed in numpy's own loop, not its threaded BLAS:
    docs/retrieval.md) equal `@`'s, in the sample's precision even for a float64 query."""
    import numpy as np

    rng = np.random.default_rng(3)
    sample = rng.standard_normal((300, 64)).astype(np.float32)
    query = rng.standard_normal(64)  # float64, as a caller may hand it
    got = ranking.products(sample, query)
    assert got.dtype == np.float32
    assert np.allclose(got, sample.astype(np.float64) @ query, atol=1e-4)
