"""The embedders: the offline default, the cut at 2,000 characters, and the OpenAI client."""

from __future__ import annotations

import numpy as np

from hag import config
from hag.vectors import embeddings


def test_offline_embedder_is_deterministic_unit_length_and_lexical():
    """Same text, same vector; rows are unit length; shared words mean higher cosine."""
    e = embeddings.OfflineEmbedder(1536)
    a, b, c, a2 = e.embed(
        [
            "modular arithmetic for RSA",
            "RSA needs modular arithmetic",
            "linked lists and pointers",
            "modular arithmetic for RSA",
        ]
    )
    assert np.array_equal(a, a2)
    assert np.allclose(np.linalg.norm(np.stack([a, b, c]), axis=1), 1.0, atol=1e-6)
    assert float(a @ b) > 0.5 > float(a @ c)


def test_texts_are_cut_at_the_embed_max_chars_dial(db, dials):
    """Two texts that differ only after the cut embed identically; the dial sets the cut."""
    long_a = "x" * 2000 + " apples"
    long_b = "x" * 2000 + " oranges"
    va, vb = embeddings.embed_texts([long_a, long_b])
    assert np.array_equal(va, vb)
    dials(embed_max_chars=2005)
    va, vb = embeddings.embed_texts([long_a, long_b])
    assert not np.array_equal(va, vb)


def test_with_no_key_the_offline_default_is_chosen_and_says_so(monkeypatch):
    """No API key: offline provider, and the provider line says it is offline."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("HAG_OPENAI_API_KEY", raising=False)
    config.reset_config()
    embeddings.reset_embedder()
    try:
        chosen = embeddings.get_embedder()
        assert isinstance(chosen, embeddings.OfflineEmbedder)
        assert "offline default: no API key set" in embeddings.describe(chosen)
    finally:
        config.reset_config()
        embeddings.reset_embedder()


def test_openai_provider_runs_the_real_client_against_a_server(openai_env):
    """With a key and base URL, embeddings come from the server through the openai client."""
    openai_env.set_embedding("hello", [0.0, 3.0, 4.0] + [0.0] * 1533)
    config.reset_config()
    embeddings.reset_embedder()
    try:
        chosen = embeddings.get_embedder()
        assert isinstance(chosen, embeddings.OpenAIEmbedder)
        (v,) = chosen.embed(["hello"])
        assert v.shape == (1536,)
        assert np.allclose(v[:3], [0.0, 0.6, 0.8])
        body = openai_env.requests_to("/embeddings")[0].json_body
        assert (body["model"], body["input"]) == ("text-embedding-3-small", ["hello"])
    finally:
        config.reset_config()
        embeddings.reset_embedder()
