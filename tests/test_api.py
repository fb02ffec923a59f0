"""The public API (hag.api, re-exported by hag): the names the docs list, a tutor's turn and
an operator's jobs through `Memory`, and only hag's own exceptions crossing it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import openai
import psycopg
import pytest

import hag
from hag import PROJECT_ROOT, api, config
from hag.errors import DatabaseError, DatabaseUnavailable, EmbedderError, EmbedderUnavailable
from hag.operations import corpus
from hag.storage import db as hdb
from tests.fix_embedder import use_offline, use_stub

TOPIC, LEARNER = "cryptography", "api-learner"


def documented_names() -> list[str]:
    """The names docs/api.md lists under "## The public names" (`- `Name`: ...`)."""
    page = (PROJECT_ROOT / "docs" / "api.md").read_text()
    section = page.split("## The public names", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- `(\w+)`", section, flags=re.MULTILINE)


@pytest.fixture
def demo(db) -> None:
    """The demo corpus in the test database (offline embedder)."""
    corpus.load(db, corpus.read(hag.DEMO_CORPUS), 1536)
    db.commit()


@pytest.fixture
def elsewhere(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Lets a test open a Memory on another URL; the test database is configured again after."""
    monkeypatch.setenv("DATABASE_URL", database_url)
    yield
    monkeypatch.undo()
    hdb.close_all()
    config.reset_config()


def test_the_public_names_are_the_ones_the_docs_list():
    """hag.__all__, hag.api.__all__ and docs/api.md's list are the same names, each one
    reachable from `hag`."""
    assert hag.__all__ == api.__all__ == documented_names()
    for name in hag.__all__:
        assert getattr(hag, name) is getattr(api, name)


def test_import_hag_stays_light():
    """`import hag` loads neither the database driver nor the API until a name is used."""
    probe = "import sys, hag; print(sorted({'psycopg', 'hag.api', 'numpy'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_turn_and_the_jobs_through_memory(demo, database_url):
    """retrieve, render, submit_session, process_pending, explain_edge and nightly, typed."""
    with hag.Memory(database_url) as memory:
        result = memory.retrieve(TOPIC, LEARNER, "how does a caesar cipher work")
        assert isinstance(result, hag.RetrievalResult) and result.edges
        assert memory.render(result) == result.text and result.text.startswith("## TOPIC")
        edge = result.edges[0]
        handed = memory.submit_session(
            {
                "session_id": "api-1",
                "learner_id": LEARNER,
                "topic_id": TOPIC,
                "ended_at": "2026-03-01T12:00:00+00:00",
                "turns": [
                    {
                        "turn_index": 0,
                        "student_message": "how does a caesar cipher work",
                        "used_entry_ids": [str(edge.source_entry_id)],
                        "rendered_edge_ids": [str(edge.edge_id)],
                        "outcome": "success",
                    }
                ],
            }
        )
        assert isinstance(handed, hag.IngestResult) and handed.status == "accepted"
        again = memory.submit_session({"session_id": "api-2"})  # refused whole, not raised
        assert again.status == "quarantined" and again.reason
        summary = memory.process_pending()
        assert isinstance(summary, hag.ProcessSummary) and summary.sessions == 1
        why = memory.explain_edge(str(edge.edge_id)[-8:])  # the ending listings print
        assert isinstance(why, hag.EdgeExplanation) and why.edge_id == edge.edge_id
        assert why.exists and all(isinstance(e, hag.HistoryEvent) for e in why.events)
        (moved,) = [e for e in why.events if e.session_id == "api-1"]  # the session's change
        assert moved.new_value == pytest.approx(why.confidence) != moved.old_value
        night = memory.nightly(dry_run=True)
        assert isinstance(night, hag.NightlyResult) and night.summary.dry_run


def test_an_unreachable_database_is_database_unavailable(elsewhere, tmp_path):
    """A memory on a server that is not there: DatabaseUnavailable, never psycopg's error."""
    memory = hag.Memory(f"postgresql://postgres:@/postgres?host={tmp_path}&connect_timeout=2")
    with memory, pytest.raises(DatabaseUnavailable, match="connect") as caught:
        memory.submit_session({"session_id": "x"})
    assert not isinstance(caught.value, psycopg.Error)


def test_a_refused_statement_is_database_error(demo, database_url, elsewhere):
    """A statement the server refuses (a read-only session writing): DatabaseError, with
    psycopg's error only as its cause."""
    read_only = f"{database_url}&options={quote('-c default_transaction_read_only=on')}"
    memory = hag.Memory(read_only)
    with memory, pytest.raises(DatabaseError, match="read-only transaction") as caught:
        memory.process_pending()
    assert not isinstance(caught.value, DatabaseUnavailable | psycopg.Error)
    assert isinstance(caught.value.__cause__, psycopg.Error)


def test_an_embedder_error_is_hags_own(demo, database_url, openai_env, monkeypatch):
    """The model endpoint configured on an offline memory: retrieve raises an EmbedderError
    (EmbedderMismatch) before any request; an openai exception inside an operation comes
    out as EmbedderUnavailable."""
    use_stub(monkeypatch, openai_env.base_url)
    try:
        with hag.Memory() as memory, pytest.raises(EmbedderError, match="offline/hash-v1"):
            memory.retrieve(TOPIC, LEARNER, "what is rsa")
    finally:
        use_offline(monkeypatch)
    lost = openai.APIConnectionError(request=httpx.Request("POST", openai_env.base_url))
    with pytest.raises(EmbedderUnavailable) as caught, api._boundary():
        raise lost
    assert caught.value.__cause__ is lost and not isinstance(caught.value, openai.OpenAIError)
