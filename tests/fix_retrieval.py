"""Helpers of the retrieval tests: rows at an exact cosine from a turn's query vector, one
retrieve with the tests' defaults, and memories built for the search-copy and resident tests."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hag import retrieval
from tests import factories as f


def put(db: Any, cos: float, axis: int, **kw: Any):
    return f.entry(db, embedding=at(cos, axis), **kw)


def run(**kw: Any) -> retrieval.RetrievalResult:
    args = {"topic_id": "cryptography", "learner_id": "ada", "student_message": MESSAGE, **kw}
    return retrieval.retrieve(**args)


def clustered_memory(db: Any, rng: np.random.Generator) -> np.ndarray:
    """300 topic rows and 200 tutor rows around 6 centres: many near-equal similarities."""
    centres = rng.standard_normal((6, f.DIM))
    maturities = ["candidate", "pattern", "proven", "archived"]
    for scope, count in (("public", 300), ("tutor", 200)):
        for i in range(count):
            v = centres[i % 6] + rng.standard_normal(f.DIM) * 0.8
            f.entry(
                db,
                topic_id="cryptography" if i % 3 else "linux-basics",
                scope=scope,
                maturity=maturities[i % 4],
                confidence=float(rng.uniform(0.3, 1.0)),
                embedding=(v / np.linalg.norm(v)).astype(np.float32),
            )
    db.commit()
    return centres


def tutor_rows_near_and_far(db: Any) -> np.ndarray:
    """8 tutor rows near f.QUERY and 32 near nothing, analysed; a unit vector near no row."""
    for i in range(8):
        f.entry(db, scope="tutor", embedding=f.vec(0.9 - 0.01 * i, 10 + i), confidence=0.8)
    for i in range(32):
        f.entry(db, scope="tutor", embedding=f.vec(0.05, 30 + i))
    db.commit()
    db.execute("ANALYZE hag_entries")
    db.commit()
    flat = np.zeros(f.DIM, dtype=np.float32)
    flat[200:600] = 1.0
    return flat / np.linalg.norm(flat)


MESSAGE = "how does RSA use prime numbers"


def at(cos: float, axis: int, q: np.ndarray | None = None) -> np.ndarray:
    """A unit vector whose cosine with the turn's query vector is exactly `cos`."""
    q = query_vector() if q is None else q
    u = np.zeros_like(q)
    u[axis] = 1.0
    u -= u.dot(q) * q
    u /= np.linalg.norm(u)
    return (cos * q + math.sqrt(1 - cos * cos) * u).astype(np.float32)


CONTEXT = f"topic:Cryptography level:none focus:none student:{MESSAGE}"


def query_vector(context: str = CONTEXT) -> np.ndarray:
    from hag.vectors.embeddings import get_embedder

    return get_embedder().embed([context])[0].astype(np.float64)
