"""Pytest plugin (``-p tests.fix_openai``): a real local OpenAI-protocol server per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.openai_stub import OpenAIStub


@pytest.fixture
def openai_stub() -> Iterator[OpenAIStub]:
    """A started :class:`OpenAIStub` (1536-d embeddings), stopped after the test."""
    with OpenAIStub() as stub:
        yield stub


@pytest.fixture
def openai_env(openai_stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIStub]:
    """The stub, with OPENAI_API_KEY=test-key and OPENAI_BASE_URL pointing at it."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_stub.base_url)
    yield openai_stub
