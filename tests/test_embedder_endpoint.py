"""A team's own OpenAI-compatible servers: what they refuse and what they send back.

A real local server (tests/openai_stub.py) plays the endpoint; the real `openai` client
talks to it. Each test sets up what such servers do (refuse `dimensions`, refuse a text
longer than their model takes, answer 200 with something that is not a list of vectors,
leave token counts out) and checks the memory's answer: one line naming the cause, the
session kept, nothing written from a bad reply.
"""

from __future__ import annotations

import json
import math
import time

import pytest

from hag.enrichment.proposers import OpenAIProposer, ProposerError, choose_proposer
from hag.enrichment.validate import ReplyError, parse_reply
from hag.errors import ConfigError, EmbedderMismatch, EmbedderRefused, EmbedderUnavailable
from hag.session.outcome import Outcome, classify
from hag.vectors import embeddings
from tests.fix_embedder import forget_process_state, hag
from tests.openai_stub import OpenAIStub
from tests.session_builders import payload, turn


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch):
    """The stub as the one endpoint, no dimension set, nothing else configured."""
    with OpenAIStub() as s:
        for name in (
            "HAG_EMBEDDING_DIM",
            "HAG_EMBEDDING_MODEL",
            "HAG_EMBEDDING_PROVIDER",
            "HAG_EMBEDDING_SEND_DIMENSIONS",
            "HAG_EMBEDDING_BASE_URL",
            "HAG_EMBEDDING_API_KEY",
            "HAG_LLM_BASE_URL",
            "HAG_LLM_API_KEY",
            "HAG_LLM_PROVIDER",
            "HAG_OPENAI_API_KEY",
            "HAG_OPENAI_BASE_URL",
        ):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        forget_process_state()
        yield s
        forget_process_state()


def _embedder():
    forget_process_state()
    return embeddings.get_embedder()


def _sent_dimensions(stub: OpenAIStub) -> list[object]:
    return [body.get("dimensions") for _, body, _ in stub.requests_to("/v1/embeddings")]


# --- `dimensions` -------------------------------------------------------------------------


def test_a_model_of_its_own_size_is_asked_without_dimensions(stub, monkeypatch):
    """vLLM and ada-002 refuse `dimensions`: a model the memory does not know, given its size
    by HAG_EMBEDDING_DIM, is asked without it, and the size is checked on the reply."""
    stub.refuse_dimensions = True
    stub.dim = 1024
    monkeypatch.setenv("HAG_EMBEDDING_MODEL", "bge-m3")
    monkeypatch.setenv("HAG_EMBEDDING_DIM", "1024")
    assert _embedder().embed(["a text"]).shape == (1, 1024)
    monkeypatch.setenv("HAG_EMBEDDING_MODEL", "text-embedding-ada-002")
    monkeypatch.setenv("HAG_EMBEDDING_DIM", "1536")
    stub.dim = 1536
    assert _embedder().embed(["a text"]).shape == (1, 1536)
    assert _sent_dimensions(stub) == [None, None]


def test_a_known_model_shortened_is_asked_with_dimensions(stub, monkeypatch):
    monkeypatch.setenv("HAG_EMBEDDING_DIM", "512")  # text-embedding-3-small, native 1536
    assert _embedder().embed(["a text"]).shape == (1, 512)
    monkeypatch.setenv("HAG_EMBEDDING_SEND_DIMENSIONS", "true")
    monkeypatch.setenv("HAG_EMBEDDING_MODEL", "my-matryoshka")
    monkeypatch.setenv("HAG_EMBEDDING_DIM", "256")
    assert _embedder().embed(["a text"]).shape == (1, 256)
    assert _sent_dimensions(stub) == [512, 256]


def test_a_server_refusing_dimensions_it_was_told_to_send_is_one_line_naming_the_switch(
    stub, monkeypatch
):
    stub.refuse_dimensions = True
    monkeypatch.setenv("HAG_EMBEDDING_DIM", "512")
    with pytest.raises(EmbedderUnavailable) as caught:
        _embedder().embed(["a text", "another"])
    message = str(caught.value)
    assert "refuses every request" in message and "matryoshka" in message
    assert "HAG_EMBEDDING_SEND_DIMENSIONS=false" in message


# --- a text the model refuses ---------------------------------------------------------------


def test_a_text_too_long_for_the_model_is_named_with_the_dial_that_cuts_it(own_memory, stub):
    """The endpoint refuses one text of three: that text is named by its field, not the
    endpoint called unavailable (which would hold every later session back)."""
    stub.max_input_chars = 40
    forget_process_state()
    texts = ["short one", "x" * 60, "short two"]
    with pytest.raises(EmbedderRefused) as caught:
        embeddings.embed_texts(texts, labels=["a", "turn 3: observations[0].text", "c"])
    message = str(caught.value)
    assert message.startswith("turn 3: observations[0].text: the embedding endpoint refused")
    assert "maximum context length is 40" in message and "embed_max_chars" in message
    assert caught.value.index == 1
    # the batch of 3, its halves (1 passes; 2 refused, split again), the text alone, a probe
    sizes = [len(body["input"]) for _, body, _ in stub.requests_to("/v1/embeddings")]
    assert sizes == [3, 1, 2, 1, 1]


def _topic(text: str) -> dict[str, str]:
    return {"graph": "topic", "concept": "keys", "text": text}


def test_a_refused_text_fails_its_session_and_the_queue_goes_on(
    demo_memory, private_db, monkeypatch, tmp_path
):
    """The session with the long observation is kept failed (retryable once the dial is
    lowered), and the session after it is processed: the queue is not held."""
    long_text = "A long observation. " * 20
    sessions = [
        payload("s-long", [turn(0, observations=[_topic(long_text)])], day=0),
        payload("s-next", [turn(0, observations=[_topic("Keys pair.")])], day=1),
    ]
    (tmp_path / "s.json").write_text(json.dumps(sessions))
    assert hag("ingest", str(tmp_path / "s.json")).returncode == 0
    with OpenAIStub() as s:
        s.max_input_chars = 200
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        forget_process_state()
        monkeypatch.setenv("HAG_EMBEDDING_PROVIDER", "openai")
        shown = hag("process-sessions")
    status = {
        r["session_id"]: r["status"]
        for r in private_db.execute(
            "SELECT session_id, status FROM hag_sessions WHERE session_id IN ('s-long', 's-next')"
        ).fetchall()
    }
    assert status == {"s-long": "failed", "s-next": "processed"}, shown.stderr
    assert "retry-failed" in shown.stderr


def test_a_refused_text_is_a_kept_failure_not_a_rejection():
    assert classify(EmbedderRefused("too long", 0)) is Outcome.FAILED


def test_a_server_taking_fewer_texts_a_request_gets_them_in_smaller_batches(stub):
    """TEI answers 413 above its batch size: the batch is split until its parts pass, and
    the rows are the texts' own, in order (not "unavailable", which would hold the queue)."""
    texts = [f"text number {i}" for i in range(7)]
    alone = _embedder().embed(texts)
    stub.reset()
    stub.max_batch = 2
    split = _embedder().embed(texts)
    assert (split == alone).all()
    sizes = [len(body["input"]) for _, body, _ in stub.requests_to("/v1/embeddings")]
    assert sizes[0] == 7 and max(sizes[1:]) <= 4 and sum(s for s in sizes if s <= 2) == 7


# --- a 200 that is not a list of vectors ----------------------------------------------------


def _replace_data(change):
    def apply(reply):
        reply["data"] = change(reply["data"])
        return reply

    return apply


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_replace_data(lambda d: d[:1]), "1 embeddings for 2 texts"),
        (_replace_data(lambda d: d + d[:1]), "3 embeddings for 2 texts"),
        (_replace_data(lambda d: [dict(x, index=0) for x in d]), "numbered [0, 0]"),
        (
            _replace_data(lambda d: [dict(x, embedding=[0.5] * (3 + i)) for i, x in enumerate(d)]),
            "not lists of numbers of one size",
        ),
        (lambda reply: "<html><body>gateway</body></html>", "not a list of embeddings"),
    ],
)
def test_a_bad_reply_is_the_servers_fault_named_in_one_line(stub, change, said):
    stub.embedding_filter = change
    with pytest.raises(EmbedderUnavailable) as caught:
        _embedder().embed(["one text", "two text"])
    assert said in str(caught.value) and "the server's fault" in str(caught.value)


def test_a_nan_or_zero_row_from_a_server_names_the_text_and_keeps_it(own_memory, stub, monkeypatch):
    """Not the text's fault (the offline embedder's zero row for an empty text is): the
    server's, so the session is kept failed instead of rejected."""
    stub.embedding_filter = _replace_data(
        lambda d: [dict(d[0], embedding=[math.nan] * 1536), dict(d[1], embedding=[0.0] * 1536)]
    )
    forget_process_state()
    monkeypatch.setenv("HAG_EMBEDDING_PROVIDER", "openai")
    with pytest.raises(EmbedderRefused) as caught:
        embeddings.embed_texts(["one text", "two text"], ["entries[0].instruction", "b"])
    assert str(caught.value).startswith(
        "entries[0].instruction: the embedding endpoint ("
    ) and "returned a vector that is not finite for 'one text': the server's fault" in str(
        caught.value
    )
    # the same text gives the same row again: kept failed, and the queue goes on
    assert classify(caught.value) is Outcome.FAILED


def test_replies_without_index_keep_their_order_and_a_wrong_size_is_another_embedder(stub):
    plain = _embedder().embed(["one text", "two text"])
    stub.embedding_filter = _replace_data(lambda d: [{"embedding": x["embedding"]} for x in d])
    unnumbered = _embedder().embed(["one text", "two text"])
    assert (plain == unnumbered).all()
    stub.embedding_filter = _replace_data(lambda d: [dict(x, embedding=[0.5] * 8) for x in d])
    with pytest.raises(EmbedderMismatch, match="returned 8 dimensions, expected 1536"):
        _embedder().embed(["one text"])


# --- refusals that will not pass ------------------------------------------------------------


def test_a_refused_key_is_tried_once_even_under_a_deadline_with_retries(stub):
    embedder = _embedder()
    stub.queue_embedding_error(401)
    stub.queue_embedding_error(401)
    with pytest.raises(EmbedderUnavailable, match="check the API key"):
        embedder.embed(["a"], deadline=time.monotonic() + 10, retries=2)
    assert len(stub.requests_to("/v1/embeddings")) == 1
    stub.reset()
    stub.queue_embedding_error(503)
    assert embedder.embed(["a"], deadline=time.monotonic() + 10, retries=2).shape == (1, 1536)


def test_a_base_url_without_v1_gets_the_hint(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url.removesuffix("/v1"))
    with pytest.raises(EmbedderUnavailable, match="does the base URL end in /v1"):
        _embedder().embed(["a"])


# --- configuration --------------------------------------------------------------------------


def test_a_blank_key_is_no_key(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert isinstance(_embedder(), embeddings.OfflineEmbedder)
    monkeypatch.setenv("HAG_OPENAI_API_KEY", "")  # a blank alias does not hide the other
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("HAG_EMBEDDING_SEND_DIMENSIONS", "")
    assert isinstance(_embedder(), embeddings.OpenAIEmbedder)
    monkeypatch.delenv("HAG_OPENAI_API_KEY")
    monkeypatch.delenv("HAG_EMBEDDING_SEND_DIMENSIONS")
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert "offline default: no API key set" in embeddings.describe(_embedder())
    monkeypatch.setenv("HAG_EMBEDDING_PROVIDER", "offline")
    monkeypatch.setenv("OPENAI_API_KEY", "a-key")
    assert "chosen by HAG_EMBEDDING_PROVIDER=offline" in embeddings.describe(_embedder())


def test_the_embedder_and_the_model_each_reach_their_own_server(stub, monkeypatch):
    from hag import settings

    with OpenAIStub() as chat:
        monkeypatch.setenv("HAG_LLM_BASE_URL", chat.base_url)
        monkeypatch.setenv("HAG_LLM_API_KEY", "chat-key")
        monkeypatch.setenv("HAG_EMBEDDING_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # the shared: unused
        forget_process_state()
        # the shared key (OpenAI's, say) is never sent to another server: its own is needed
        with pytest.raises(ConfigError, match="HAG_EMBEDDING_API_KEY too"):
            embeddings.get_embedder()
        monkeypatch.setenv("HAG_EMBEDDING_API_KEY", "embedding-key")
        forget_process_state()
        embeddings.get_embedder().embed(["a"])
        [(_, _, headers)] = stub.requests_to("/v1/embeddings")
        assert headers["authorization"] == "Bearer embedding-key"
        proposer = choose_proposer(settings.defaults())
        assert isinstance(proposer, OpenAIProposer)
        chat.queue_chat('{"edges": []}')
        proposer._client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}]
        )
        assert len(stub.requests_to("/v1/embeddings")) == 1
        assert len(chat.requests_to("/v1/chat/completions")) == 1
        assert (
            chat.requests_to("/v1/chat/completions")[0].headers["authorization"]
            == "Bearer chat-key"
        )


def test_credentials_in_a_base_url_are_never_printed(stub, monkeypatch):
    from hag import settings

    secret_url = stub.base_url.replace("http://", "http://user:s3cret@") + "?api-key=s3cret"
    monkeypatch.setenv("OPENAI_BASE_URL", secret_url)
    stub.queue_embedding_error(404)
    with pytest.raises(EmbedderUnavailable) as caught:
        _embedder().embed(["a"])
    proposer = choose_proposer(settings.defaults())
    shown = [embeddings.describe(_embedder()), str(caught.value), proposer.describe()]
    assert not any("s3cret" in line for line in shown), shown
    assert all(stub.base_url.removeprefix("http://") in line for line in shown), shown


# --- the model's replies --------------------------------------------------------------------


def _proposer(stub: OpenAIStub) -> OpenAIProposer:
    return OpenAIProposer("m", api_key="k", base_url=stub.base_url, timeout=5, temperature=0)


class _Prompt:
    messages = ({"role": "user", "content": "propose"},)
    response_format = {"type": "json_object"}


def test_token_counts_left_out_count_nothing_and_a_bad_200_may_be_tried_again(stub):
    proposer = _proposer(stub)
    stub.queue_chat('{"edges": []}', usage=None)
    stub.queue_chat('{"edges": []}', usage={"total_tokens": 5})
    assert [proposer.complete(_Prompt()).prompt_tokens for _ in range(2)] == [0, 0]  # type: ignore[arg-type]
    stub.chat_responder = lambda body: "x"
    stub.queue_error(200, "<html>gateway</html>")
    with pytest.raises(ProposerError) as caught:
        proposer.complete(_Prompt())  # type: ignore[arg-type]
    assert caught.value.retryable


def test_a_reply_in_a_code_fence_is_read_and_anything_else_is_still_refused():
    assert parse_reply('```json\n{"edges": [{"a": 1}]}\n```') == [{"a": 1}]
    assert parse_reply('```\n{"edges": []}```') == []
    with pytest.raises(ReplyError):
        parse_reply('Here it is: ```json\n{"edges": []}\n```')
