"""Pytest plugin (``-p tests.fix_enrichment``): the model stub as the enrichment provider
(`llm`), a reply naming edges, and the Cryptography graph the enrichment tests start from."""

from __future__ import annotations

import json

import pytest

from hag import config
from hag.vectors import embeddings
from tests import factories as f

MODEL = "gpt-test-mini"


@pytest.fixture
def llm(openai_env, dials):
    """The stub server configured as the model provider (no pause between attempts)."""
    config.reset_config()
    embeddings.reset_embedder()
    dials(enrichment_retry_backoff_seconds=0)
    yield openai_env
    config.reset_config()
    embeddings.reset_embedder()


def reply(*edges):
    return json.dumps(
        {
            "edges": [
                {"source": s, "target": t, "edge_type": k, "reason": f"{s} {k} {t}"}
                for s, t, k in edges
            ]
        }
    )


def crypto_graph(db):
    """rsa is the one orphan; pkc -prerequisite-> modular-arithmetic is stored; linux is wired."""
    ids = {}
    for axis, (slug, cos) in enumerate(
        [
            ("rsa", 1.0),
            ("modular-arithmetic", 0.8),
            ("public-key-cryptography", 0.7),
            ("prime-numbers", 0.6),
        ],
        1,
    ):
        f.concept(
            db,
            "cryptography",
            slug,
            slug.replace("-", " ").title(),
            f"Description of {slug}.",
            embedding=f.vec(cos, axis),
        )
        ids[slug] = f.entry(
            db,
            concept_slug=slug,
            embedding=f.vec(cos, axis),
            instruction=f"Teach {slug} with an example.",
        )
    f.edge(db, ids["public-key-cryptography"], ids["modular-arithmetic"])
    f.edge(db, ids["prime-numbers"], ids["modular-arithmetic"], "related")
    linux = [
        f.entry(db, topic_id="linux-basics", concept_slug=s) for s in ("file-permissions", "users")
    ]
    f.concept(db, "linux-basics", "file-permissions", "File permissions")
    f.edge(db, linux[0], linux[1])
    db.commit()
    return ids
