"""Pytest plugin (``-p tests.fix_embedder``): a memory of the test's own that the whole process (and
its `hag` subprocesses) uses, and switching the configured embedder."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from hag import PROJECT_ROOT


def forget_process_state() -> None:
    """Drop every per-process cache that depends on the database or the embedder."""
    from hag import config, settings
    from hag.retrieval import clear_caches, resident
    from hag.storage import db
    from hag.vectors import embedder_identity, embeddings

    resident.residents.wait()
    db.close_all()
    config.reset_config()
    embeddings.reset_embedder()
    embedder_identity.forget_checks()
    settings.invalidate()
    clear_caches()


@pytest.fixture
def own_memory(
    private_db: Any, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """The URL of a migrated private database that DATABASE_URL points at for this test
    (its embedder not yet recorded); the process state is reset before and after."""
    from psycopg.conninfo import make_conninfo

    url = make_conninfo(database_url, dbname=private_db.info.dbname)
    monkeypatch.setenv("DATABASE_URL", url)
    forget_process_state()
    yield url
    forget_process_state()
    monkeypatch.setenv("DATABASE_URL", database_url)  # undone by monkeypatch after, too
    forget_process_state()


def use_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "HAG_EMBEDDING_PROVIDER",
        "HAG_EMBEDDING_DIM",
    ):
        monkeypatch.delenv(name, raising=False)
    forget_process_state()


def use_stub(monkeypatch: pytest.MonkeyPatch, base_url: str, dim: int | None = None) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    if dim is None:
        monkeypatch.delenv("HAG_EMBEDDING_DIM", raising=False)
    else:
        monkeypatch.setenv("HAG_EMBEDDING_DIM", str(dim))
    forget_process_state()


def hag(
    *args: str, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """`hag ARGS` in a subprocess with this process's environment (plus `env`)."""
    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=PROJECT_ROOT,
        timeout=300,
        **kw,
    )


def error_lines(stderr: str) -> list[str]:
    """stderr without the provider line every embedding command prints first."""
    return [line for line in stderr.splitlines() if not line.startswith("embedder: ")]


def hag_retrieve(
    message: str, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`hag retrieve` for learner ada in the cryptography topic, in a subprocess."""
    args = ("retrieve", "--topic", "cryptography", "--learner", "ada", "--message", message)
    return hag(*args, *extra, env=env)


def one_entry_corpus(instruction: str, **extra: object) -> dict[str, object]:
    """A corpus of one topic (t1) and one public entry with this instruction."""
    entry = {
        "topic_id": "t1",
        "concept_slug": "c",
        "visibility_scope": "public",
        "confidence": 0.8,
        "instruction": instruction,
        **extra,
    }
    return {"topics": [{"topic_id": "t1", "title": "T"}], "entries": [entry]}


DEMO = "hag/data/demo_corpus.json"


@pytest.fixture
def demo_memory(own_memory, private_db, monkeypatch):
    """The demo corpus in a memory of the test's own (loaded offline, no embedder recorded),
    and the concept slugs of its cryptography topic."""
    from hag.operations import corpus

    use_offline(monkeypatch)
    corpus.load(private_db, corpus.read(DEMO), 1536)
    private_db.commit()
    slugs = [
        r["slug"]
        for r in private_db.execute(
            "SELECT slug FROM hag_concepts WHERE topic_id = 'cryptography' ORDER BY slug"
        )
    ]
    return slugs
