"""The embedder is part of the memory: which one made its vectors, recorded and checked.

`hag_meta` holds the identity (`embedder`: provider, model, dimension and a fingerprint)
and the vector of a fixed probe text (`embedder_probe`). The first `hag migrate` records
them (`record`). A memory that predates the record is adopted by the embedder that migrates
it only if that embedder reproduces the stored vectors of a few entries (half of the
sample or more within cosine `embedder_agree_min_cosine`); otherwise the migrate is refused, since nothing else
tells which model made them (configure that one, or `hag reembed` with this one).

Every process that embeds checks the configured embedder against the record once per
process and database (`checked_embedder`; the read path again every
`settings_cache_ttl_seconds`): provider, model and dimension must be the held ones, else
EmbedderMismatch names both in one line. That check reads one row and
embeds nothing. The fingerprint (the probe's vector) is compared on every `hag migrate`:
it catches an endpoint that serves another model under the recorded name.
`hag reembed` (hag.operations.reembed) is the way to move a memory to another embedder.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hag.errors import EmbedderMismatch, EmbedderUnavailable
from hag.storage.sqlfiles import query

if TYPE_CHECKING:
    from hag.settings import Settings
    from hag.vectors.embeddings import Embedder

PROBE_TEXT = "hag embedder probe: a learner confuses modular inverses with division"


@dataclass(frozen=True)
class Identity:
    """Which embedder made a memory's vectors (`fingerprint`: a digest of the probe's)."""

    provider: str
    model: str
    dim: int
    fingerprint: str = ""

    @property
    def label(self) -> str:
        return f"{self.provider}/{self.model} ({self.dim} dims)"

    def same_embedder(self, other: Identity) -> bool:
        return (self.provider, self.model, self.dim) == (other.provider, other.model, other.dim)

    def settings_hint(self) -> str:
        """The environment that configures this embedder."""
        if self.provider == "offline":
            return f"HAG_EMBEDDING_PROVIDER=offline HAG_EMBEDDING_DIM={self.dim}"
        return (
            f"HAG_EMBEDDING_PROVIDER={self.provider} HAG_EMBEDDING_MODEL={self.model} "
            f"HAG_EMBEDDING_DIM={self.dim}"
        )


def of(embedder: Embedder) -> Identity:
    """The configured embedder's identity, without embedding anything."""
    return Identity(embedder.provider, embedder.model, embedder.dim)


def fingerprint(probe: np.ndarray) -> str:
    """A short digest of the probe's vector rounded to two decimals."""
    rounded = np.rint(np.asarray(probe, dtype=np.float64) * 100).astype(np.int16)
    return hashlib.blake2b(rounded.tobytes(), digest_size=8).hexdigest()


def measure(embedder: Embedder) -> tuple[Identity, np.ndarray]:
    """The identity with its fingerprint, and the probe's vector (one embedding call)."""
    probe = np.asarray(embedder.embed([PROBE_TEXT])[0], dtype=np.float64)
    return Identity(embedder.provider, embedder.model, embedder.dim, fingerprint(probe)), probe


def held(conn: Any) -> tuple[Identity, np.ndarray | None] | None:
    """The recorded identity and probe vector; None when none is recorded (or no schema)."""
    exists = conn.execute("SELECT to_regclass('hag_meta') IS NOT NULL AS ok").fetchone()
    if not _first(exists):
        return None
    row = conn.execute(query("embedder", "held")).fetchone()
    identity = row["identity"] if isinstance(row, dict) else row[0]
    probe = row["probe"] if isinstance(row, dict) else row[1]
    if identity is None:
        return None
    vector = np.asarray(json.loads(probe), dtype=np.float64) if probe else None
    return Identity(**json.loads(identity)), vector


def _first(row: Any) -> Any:
    if row is None:
        return None
    return next(iter(row.values())) if isinstance(row, dict) else row[0]


def write(conn: Any, identity: Identity, probe: np.ndarray) -> None:
    """Record the identity and the probe vector (in the caller's transaction)."""
    conn.execute(
        query("embedder", "record"),
        {
            "identity": json.dumps(asdict(identity), sort_keys=True),
            "probe": json.dumps([round(float(v), 5) for v in probe]),
        },
    )


def mismatch(configured: Identity, memory: Identity) -> EmbedderMismatch:
    return EmbedderMismatch(
        f"this memory was embedded with {memory.label}; the configured embedder is "
        f"{configured.label}: set {memory.settings_hint()}, or run `hag reembed` to move the "
        "memory to the configured one"
    )


def check(conn: Any, embedder: Embedder) -> None:
    """Refuse an embedder that is not the memory's (nothing recorded: nothing to refuse)."""
    found = held(conn)
    if found is not None and not found[0].same_embedder(of(embedder)):
        raise mismatch(of(embedder), found[0])


def record(conn: Any, embedder: Embedder, *, verify: bool = False) -> Identity:
    """At migrate: record the embedder's identity, or verify it against the record.

    Nothing recorded: an empty memory records this embedder; one with entries only when this
    embedder reproduces their stored vectors. Recorded: the same embedder must answer the
    probe text as it did (the fingerprint), else it is another model under the same name.
    An endpoint that is down leaves a recorded identity unverified (the next migrate tries);
    with `verify` (`hag migrate` itself) that is EmbedderUnavailable, saying so.
    """
    found = held(conn)
    configured = of(embedder)
    if found is not None:
        memory, probe = found
        if not memory.same_embedder(configured):
            raise mismatch(configured, memory)
        try:
            _, now = measure(embedder)
        except EmbedderUnavailable as exc:
            if verify:
                raise EmbedderUnavailable(
                    f"{str(exc).rstrip('.')}: the schema is migrated but the memory's embedder "
                    "is not verified; run `hag migrate` again once the endpoint answers"
                ) from None
            return memory
        if probe is not None and _cosine(probe, now) < _dials().embedder_agree_min_cosine:
            raise EmbedderMismatch(
                f"the configured embedder {configured.label} answers the probe text unlike "
                f"the one this memory was embedded with (cosine {_cosine(probe, now):.2f}): "
                "its endpoint serves another model under that name; configure the one the "
                "memory was built with, or run `hag reembed`"
            )
        return memory
    _adoptable(conn, embedder)
    identity, probe_vector = measure(embedder)
    with conn.transaction():
        write(conn, identity, probe_vector)
    return identity


def _adoptable(conn: Any, embedder: Embedder) -> None:
    """Refuse to adopt a memory whose sampled vectors this embedder does not reproduce."""
    from hag.vectors.embeddings import cut, max_chars

    dials = _dials()
    rows = conn.execute(
        query("embedder", "sample_entries"), {"limit": dials.embedder_adopt_sample_entries}
    ).fetchall()
    if not rows:
        return
    limit = max_chars()
    texts = [cut(r["instruction"] if isinstance(r, dict) else r[0], limit) for r in rows]
    stored = [_array(r["embedding"] if isinstance(r, dict) else r[1]) for r in rows]
    again = embedder.embed(texts)
    agree = sum(
        _cosine(a, b) >= dials.embedder_agree_min_cosine for a, b in zip(stored, again, strict=True)
    )
    if 2 * agree < len(rows):
        raise EmbedderMismatch(
            f"this memory's vectors were not made by the configured embedder "
            f"{of(embedder).label} ({agree} of {len(rows)} sampled entries agree) and it "
            "records no embedder: configure the one it was built with, or run `hag reembed` "
            "to re-embed it with this one"
        )


def _dials() -> Settings:
    """The dials in force (the check runs after migrating, so they are there), or their
    defaults when they cannot be read."""
    from hag import settings

    try:
        return settings.current()
    except Exception:
        return settings.defaults()


def _array(value: Any) -> np.ndarray:
    """A stored vector as numpy (pgvector hands back an array or its own Vector)."""
    return np.asarray(value.to_list() if hasattr(value, "to_list") else value, dtype=np.float64)


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return 0.0
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0


def recheck(conn: Any) -> None:
    """In a writer's transaction, before it commits vectors: the record again (a `hag
    reembed` may have switched the memory since this process checked), else refused."""
    from hag.vectors.embeddings import get_embedder

    check(conn, get_embedder())


_lock = threading.Lock()
_checked: dict[tuple[str, str], float] = {}  # (database, embedder) -> when it passed


def checked_embedder(
    connect: Callable[[], AbstractContextManager[Any]] | None = None,
    url: str | None = None,
    *,
    max_age: float | None = None,
) -> Embedder:
    """The configured embedder, checked against the memory once per process and database,
    or again once the last check is `max_age` seconds old.

    `connect` gives the connection to read the record on (default: a new one to the
    primary) and `url` names that database (default: the primary's URL). The read path
    passes `settings_cache_ttl_seconds` as `max_age`: a tutor process running when `hag
    reembed` switched the memory (or reading a standby that has since replayed the switch)
    is refused within that time, instead of searching the moved vectors with the old
    embedder's. Writers read the record again inside their own transactions.
    """
    from hag.storage import db
    from hag.vectors.embeddings import get_embedder

    embedder = get_embedder()
    key = (url or db.database_url(), embedder.name)
    with _lock:
        passed = _checked.get(key)
    if passed is not None and (max_age is None or time.monotonic() - passed < max_age):
        return embedder
    reading = time.monotonic()  # the check holds from its read: a later one is not undone
    with (connect or db.connect)() as conn:
        check(conn, embedder)
    with _lock:
        _checked[key] = max(reading, _checked.get(key, reading))
    return embedder


def forget_checks() -> None:
    """Check again on the next embedding (tests; `hag reembed` after its switch)."""
    with _lock:
        _checked.clear()
