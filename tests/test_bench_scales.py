"""The retrieval benchmark's scales: the named ones as they were, others by their row count."""

from __future__ import annotations

import pytest

from bench.bench_retrieval import Scale, scales

pytestmark = pytest.mark.fast


def test_the_named_scales_keep_their_rows_dimensions_and_load(monkeypatch):
    monkeypatch.delenv("HAG_BENCH_SCALES", raising=False)
    monkeypatch.delenv("HAG_BENCH_DIM_1M", raising=False)
    assert scales([]) == [
        Scale("100k", 100_000, 1536),
        Scale("1m", 1_000_000, 384),
        Scale("1m", 1_000_000, 1536),
    ]
    assert not any(s.indexes_after for s in scales(["100k", "1m", "1m1536", "10k"]))


def test_a_scale_named_by_its_row_count_loads_its_indexes_after_the_copy(monkeypatch):
    monkeypatch.delenv("HAG_BENCH_DIM_BIG", raising=False)
    assert scales(["10m", "2.5M", "500k"]) == [
        Scale("10m", 10_000_000, 384, True),
        Scale("2.5m", 2_500_000, 384, True),
        Scale("500k", 500_000, 384, True),
    ]
    monkeypatch.setenv("HAG_BENCH_DIM_BIG", "1536")
    assert scales(["3m"]) == [Scale("3m", 3_000_000, 1536, True)]


def test_a_word_that_names_no_scale_is_ignored(monkeypatch):
    monkeypatch.setenv("HAG_BENCH_SCALES", "100k")
    assert scales(["2x", "m", "1.m", "3g"]) == [Scale("100k", 100_000, 1536)]
    assert scales(["2x", "3m"]) == [Scale("3m", 3_000_000, 384, True)]
