"""The OpenAI stub server, exercised through the real ``openai`` client."""

from __future__ import annotations

import base64
import json
import math
import struct
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests import fix_openai
from tests.openai_stub import OpenAIStub, hash_embedding

# Make the plugin fixtures available even when run with ``-o addopts=""`` (no ``-p``).
openai_stub = fix_openai.openai_stub
openai_env = fix_openai.openai_env


@pytest.fixture
def client(openai_stub: OpenAIStub) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=openai_stub.base_url, api_key="k", max_retries=0) as c:
        yield c


def _norm(v: list[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def test_embeddings_default_encoding(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """Client default (base64 on the wire) decodes to 1536-d unit vectors, one per input."""
    resp = client.embeddings.create(model="text-embedding-3-small", input=["a b c", "d"])
    body = openai_stub.requests_to("/embeddings")[-1].json_body
    assert body["encoding_format"] == "base64"
    assert [d.index for d in resp.data] == [0, 1]
    assert all(len(d.embedding) == 1536 for d in resp.data)
    assert all(abs(_norm(d.embedding) - 1.0) < 1e-5 for d in resp.data)
    assert resp.data[0].embedding == hash_embedding("a b c", 1536)
    assert resp.usage.prompt_tokens == resp.usage.total_tokens == 4
    assert resp.model == "text-embedding-3-small"


def test_embeddings_float_encoding_matches_base64(client: openai.OpenAI) -> None:
    """encoding_format='float' returns the same numbers as the base64 path."""
    f = client.embeddings.create(model="m", input="hello world", encoding_format="float")
    d = client.embeddings.create(model="m", input="hello world")
    assert f.data[0].embedding == d.data[0].embedding


def test_embeddings_explicit_base64_is_little_endian_float32(client: openai.OpenAI) -> None:
    """An explicit encoding_format='base64' returns raw little-endian float32 bytes."""
    r = client.embeddings.create(model="m", input="x", dimensions=8, encoding_format="base64")
    raw = base64.b64decode(r.data[0].embedding)  # type: ignore[arg-type]
    assert list(struct.unpack("<8f", raw)) == hash_embedding("x", 8)


def test_embeddings_dimensions_honoured(client: openai.OpenAI) -> None:
    """The request's `dimensions` sets the vector length."""
    r = client.embeddings.create(model="m", input="q", dimensions=64)
    assert len(r.data[0].embedding) == 64
    assert abs(_norm(r.data[0].embedding) - 1.0) < 1e-5


def test_embeddings_deterministic(client: openai.OpenAI) -> None:
    """Same text -> same vector across calls; different text -> different vector."""
    a = client.embeddings.create(model="m", input="same text").data[0].embedding
    b = client.embeddings.create(model="m", input=["other", "same text"]).data
    assert b[1].embedding == a
    assert b[0].embedding != a


def test_set_embedding_honoured(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """A vector registered with set_embedding is returned verbatim for that text."""
    openai_stub.set_embedding("cat", [1.0, 0.0, 0.0, 0.0])
    r = client.embeddings.create(model="m", input=["cat", "dog"], dimensions=4)
    assert r.data[0].embedding == [1.0, 0.0, 0.0, 0.0]
    assert r.data[1].embedding == hash_embedding("dog", 4)


def test_embedding_error_queue(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """queue_embedding_error makes the next embeddings call fail with that status."""
    openai_stub.queue_embedding_error(429)
    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="m", input="x")
    assert client.embeddings.create(model="m", input="x").data


def test_chat_completion_with_usage(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """Scripted replies come back FIFO with their usage; usage_totals sums what was sent."""
    openai_stub.queue_chat("first answer", prompt_tokens=11, completion_tokens=7)
    openai_stub.queue_chat("second")
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    r1 = client.chat.completions.create(model="gpt-4o-mini", messages=msgs)  # type: ignore[arg-type]
    r2 = client.chat.completions.create(model="gpt-4o-mini", messages=msgs)  # type: ignore[arg-type]
    assert r1.object == "chat.completion"
    assert r1.choices[0].message.role == "assistant"
    assert r1.choices[0].message.content == "first answer"
    assert r1.choices[0].finish_reason == "stop"
    assert r1.usage is not None
    assert (r1.usage.prompt_tokens, r1.usage.completion_tokens, r1.usage.total_tokens) == (
        11,
        7,
        18,
    )
    assert r2.choices[0].message.content == "second"
    assert r2.usage is not None
    assert (r2.usage.prompt_tokens, r2.usage.completion_tokens) == (4, 1)  # word counts
    assert r1.model == "gpt-4o-mini"
    assert openai_stub.usage_totals() == {
        "prompt_tokens": 15,
        "completion_tokens": 8,
        "total_tokens": 23,
    }
    assert openai_stub.pending() == 0


def test_chat_default_responder(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """With an empty queue, chat_responder(request_json) supplies the content."""
    openai_stub.chat_responder = lambda req: "echo: " + req["messages"][-1]["content"]
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "ping"}])
    assert r.choices[0].message.content == "echo: ping"


def test_scripted_500_raises(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """queue_error(500) surfaces as openai.InternalServerError and counts no usage."""
    openai_stub.queue_error(500)
    with pytest.raises(openai.InternalServerError) as exc:
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert exc.value.status_code == 500
    assert openai_stub.usage_totals()["total_tokens"] == 0


def test_delay_beyond_timeout_raises(openai_stub: OpenAIStub) -> None:
    """A delay longer than the client timeout raises APITimeoutError; the reply is dropped."""
    openai_stub.queue_delay(5.0, "too late", prompt_tokens=3, completion_tokens=3)
    with (
        openai.OpenAI(base_url=openai_stub.base_url, api_key="k", max_retries=0, timeout=0.3) as c,
        pytest.raises(openai.APITimeoutError),
    ):
        c.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert openai_stub.wait_idle(3.0)  # the stub noticed the disconnect, well before 5 s
    assert openai_stub.dropped_replies == 1
    assert openai_stub.usage_totals()["total_tokens"] == 0


def test_short_delay_answers(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """A delay shorter than the timeout still answers with the queued content."""
    openai_stub.queue_delay(0.1, "slow but fine")
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    assert r.choices[0].message.content == "slow but fine"


def test_json_schema_request_recorded(openai_stub: OpenAIStub, client: openai.OpenAI) -> None:
    """response_format json_schema is accepted and recorded verbatim with the request."""
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    rf: Any = {
        "type": "json_schema",
        "json_schema": {"name": "N", "schema": schema, "strict": True},
    }
    openai_stub.queue_chat(json.dumps({"n": 3}))
    r = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "three"}], response_format=rf
    )
    assert json.loads(r.choices[0].message.content or "") == {"n": 3}
    path, body, headers = openai_stub.requests[-1]
    assert path == "/v1/chat/completions"
    assert body["response_format"] == rf
    assert headers["authorization"] == "Bearer k"


def test_missing_bearer_is_401_and_unknown_path_404(
    openai_stub: OpenAIStub, client: openai.OpenAI
) -> None:
    """No Authorization -> 401; unknown path -> 404 (NotFoundError in the client)."""
    req = urllib.request.Request(
        openai_stub.base_url + "/embeddings",
        data=b'{"model":"m","input":"x"}',
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=5)
    assert exc.value.code == 401
    exc.value.close()
    with pytest.raises(openai.NotFoundError):
        client.models.list()
    assert [r.path for r in openai_stub.requests] == ["/v1/embeddings", "/v1/models"]


def test_openai_env_fixture(openai_env: OpenAIStub) -> None:
    """openai_env points a default-constructed client at the stub with key test-key."""
    with openai.OpenAI(max_retries=0) as c:
        c.embeddings.create(model="m", input="env")
    assert openai_env.requests[-1].headers["authorization"] == "Bearer test-key"
