"""Who proposes edges for an orphan: a model behind an OpenAI-compatible API, or an offline rule.

Both implement `Proposer.complete(prompt) -> Completion`: raw reply text plus the token
usage the server reported. The reply is parsed and validated by the caller, the same way
for both, so an offline proposal gets no shortcut past the checks.

- `OpenAIProposer`: chat completions with a JSON-schema response format through the
  official `openai` client, so OpenAI, Azure OpenAI, vLLM, Ollama or llama.cpp servers all
  work (`HAG_OPENAI_BASE_URL`, `HAG_LLM_MODEL` or `--model`). The client's own retries are
  off: each attempt is one call in the cost ledger, and the attempt budget is a dial.
- `OfflineProposer`: the default when no API key is set. Deterministic, no network: it
  reads the candidate list the prompt already holds (nearest first by embedding
  similarity) and applies two rules (see its docstring).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hag.config import get_config
from hag.enrichment.prompt import Candidate, Prompt
from hag.settings import Settings

OFFLINE_NAME = "offline-similarity-v1"


@dataclass(frozen=True)
class Completion:
    content: str | None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ProposerError(Exception):
    """A call that produced no reply: `retryable` says whether another attempt may help."""

    def __init__(self, message: str, *, retryable: bool):
        super().__init__(message)
        self.retryable = retryable


class Proposer(Protocol):
    name: str  # the model as the ledgers record it
    offline: bool

    def complete(self, prompt: Prompt) -> Completion:
        """One attempt at proposals for the prompt's orphan (raises ProposerError)."""
        ...

    def describe(self) -> str:
        """The line the CLI and the flow print about who proposes."""
        ...


class OpenAIProposer:
    """Chat completions with a JSON-schema response format, through the `openai` client."""

    offline = False

    def __init__(
        self, model: str, *, api_key: str, base_url: str | None, timeout: float, temperature: float
    ):
        from openai import OpenAI  # only when a model is actually used

        self.name = model
        self.base_url = base_url
        self.timeout = timeout
        self.temperature = temperature
        self._client = OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def describe(self) -> str:
        from hag.config import shown_url

        where = shown_url(self.base_url) or "api.openai.com"
        return f"proposer: {self.name} via {where} (OpenAI-compatible chat completions)"

    def complete(self, prompt: Prompt) -> Completion:
        import openai

        try:
            # The messages and schema are plain dicts of the documented shapes.
            response = self._client.chat.completions.create(  # type: ignore[call-overload]
                model=self.name,
                messages=[dict(m) for m in prompt.messages],
                response_format=dict(prompt.response_format),
                temperature=self.temperature,
            )
            choices = response.choices
            content = choices[0].message.content if choices else None
        except openai.APITimeoutError:
            raise ProposerError(f"timed out after {self.timeout:g} s", retryable=True) from None
        except openai.APIConnectionError as exc:
            raise ProposerError(f"connection failed: {exc}", retryable=True) from None
        except openai.APIStatusError as exc:
            # Server trouble and rate limits pass; a refused key or an unknown model does not.
            retryable = exc.status_code >= 500 or exc.status_code in (408, 409, 429)
            raise ProposerError(
                f"HTTP {exc.status_code}: {_error_message(exc)}", retryable=retryable
            ) from None
        except (AttributeError, IndexError, TypeError, ValueError, KeyError):  # a 200, no reply
            raise ProposerError("a reply that is not a chat completion", retryable=True) from None
        if content is not None and not isinstance(content, str):
            raise ProposerError("a reply whose content is not text", retryable=True)
        usage = getattr(response, "usage", None)  # servers leave it out, or parts of it
        return Completion(
            content, _tokens(usage, "prompt_tokens"), _tokens(usage, "completion_tokens")
        )


def _tokens(usage: Any, name: str) -> int:
    """A count from the reply's usage, 0 where the server left it out or sent no number."""
    value = getattr(usage, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])[:200]
    return str(exc).splitlines()[0][:200]


_WORD = re.compile(r"[a-z0-9]+")
# English function words never name a concept ("exclusive-or" is not named by "or").
_FUNCTION_WORDS = frozenset(
    {
        "a",
        "an",
        "and",
        "as",
        "at",
        "by",
        "for",
        "from",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "the",
        "to",
        "with",
        "without",
    }
)


def _words(text: str) -> set[str]:
    """Lower-case content words with a plural `s` dropped, so 'primes' meets 'prime'."""
    return {
        w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w
        for w in _WORD.findall(text.lower())
        if w not in _FUNCTION_WORDS
    }


def _names(c: Candidate) -> list[set[str]]:
    """The word sets that name a candidate: its slug, its title, each alias."""
    return [w for w in (_words(n.replace("-", " ")) for n in (c.slug, c.title, *c.aliases)) if w]


class OfflineProposer:
    """Deterministic proposals from embedding similarity plus one naming rule (no network).

    - Named: the orphan's description holds at least half the words of the candidate's
      slug, title or an alias, one of them naming no other offered candidate ('key' names
      many concepts, so it names none; 'or' is no word at all). A concept defined in terms
      of another needs that one first.
    - Which candidates: the nearest one always (an orphan is better wired in weakly, at the
      enrichment confidence, and graded by outcomes after), then the named ones and those
      at or above `enrichment_offline_min_similarity`, up to the per-orphan bound; named
      first, then by similarity.
    - Which type: `prerequisite` (orphan -> candidate) when the candidate is named AND
      close in meaning (at or above the same dial): both signals must agree before an
      order is claimed. Otherwise `related`.
    It knows no synonyms (neither does the offline embedder); a real model does better.
    """

    offline = True
    name = OFFLINE_NAME

    def __init__(
        self, min_similarity: float, requested_model: str | None = None, *, chosen: bool = False
    ):
        self.min_similarity = min_similarity
        self.requested_model = requested_model
        self.chosen = chosen  # HAG_LLM_PROVIDER=offline, not the lack of a key

    def describe(self) -> str:
        ignored = f"; --model {self.requested_model} ignored" if self.requested_model else ""
        why = (
            "chosen by HAG_LLM_PROVIDER=offline"
            if self.chosen
            else "offline default: no API key set"
        )
        return (
            f"proposer: {self.name} ({why}; deterministic, no "
            f"network, embedding similarity plus a naming rule{ignored})"
        )

    def named(self, prompt: Prompt) -> list[bool]:
        """For each offered candidate, whether the orphan's description names it."""
        names = [_names(c) for c in prompt.candidates]
        owners: dict[str, set[int]] = {}
        for i, sets in enumerate(names):
            for w in set().union(*sets):
                owners.setdefault(w, set()).add(i)
        said = _words(prompt.orphan_text)
        return [
            any(
                2 * len(n & said) >= len(n) and any(owners[w] == {i} for w in n & said)
                for n in sets
            )
            for i, sets in enumerate(names)
        ]

    def complete(self, prompt: Prompt) -> Completion:
        named = self.named(prompt)
        order = sorted(range(len(prompt.candidates)), key=lambda i: (not named[i], i))
        chosen = [
            i
            for i in order
            if i == 0 or named[i] or prompt.candidates[i].similarity >= self.min_similarity
        ]
        edges = []
        for i in chosen[: prompt.max_proposals]:
            c = prompt.candidates[i]
            if (
                named[i]
                and c.similarity >= self.min_similarity
                and "prerequisite" in prompt.allowed_types
            ):
                kind = "prerequisite"
                why = f"{prompt.orphan.concept_slug} is described in its terms (cosine {c.similarity:.2f})"
            elif "related" in prompt.allowed_types:
                kind, why = "related", f"close in meaning (cosine {c.similarity:.2f})"
            else:
                continue
            edges.append(
                {
                    "source": prompt.orphan.concept_slug,
                    "target": c.slug,
                    "edge_type": kind,
                    "reason": why,
                }
            )
        return Completion(json.dumps({"edges": edges}))


def choose_proposer(dials: Settings, model: str | None = None) -> Proposer:
    """The configured proposer: a model when an API key is set (or forced), offline otherwise."""
    from hag.errors import ConfigError

    cfg = get_config()
    provider = cfg.llm_provider
    api_key, base_url = cfg.llm_endpoint()
    if provider == "auto":
        provider = "openai" if api_key is not None else "offline"
    if provider == "offline":
        return OfflineProposer(
            dials.enrichment_offline_min_similarity, model, chosen=cfg.llm_provider == "offline"
        )
    if api_key is None:
        raise ConfigError(
            "HAG_LLM_PROVIDER=openai needs an API key: HAG_LLM_API_KEY, else OPENAI_API_KEY "
            "(or HAG_OPENAI_API_KEY); a server that takes none still needs one set to any text"
        )
    return OpenAIProposer(
        model or cfg.llm_model,
        api_key=api_key.get_secret_value(),
        base_url=base_url,
        timeout=dials.enrichment_timeout_seconds,
        temperature=dials.enrichment_temperature,
    )
