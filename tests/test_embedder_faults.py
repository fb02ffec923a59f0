"""An embedder that is down, slow or gives unusable vectors, and a misconfigured one: the
library raises its own errors, a turn still gets its concept advisories, the command line
prints one line, and no zero or non-finite vector is stored or printed as NaN."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pytest

from hag import settings
from hag.cli import main
from hag.errors import ConfigError, CorpusError, EmbedderError, EmbedderUnavailable
from hag.operations import corpus
from hag.retrieval import clear_caches, retrieve
from hag.vectors import embeddings
from tests import factories
from tests.fix_cli import leaf_commands
from tests.fix_embedder import (
    DEMO,
    error_lines,
    hag,
    hag_retrieve,
    one_entry_corpus,
    use_stub,
)
from tests.openai_stub import OpenAIStub
from tests.session_builders import payload, run, turn


def _set(conn, **values):
    for key, value in values.items():
        settings.set_value(conn, key, value, by="test")
    conn.commit()
    settings.invalidate()


def _turn(slugs):
    clear_caches()
    return retrieve("cryptography", "ada", "how does rsa work", recent_concepts=[slugs[:3]])


def test_a_hung_endpoint_costs_one_bounded_try_and_the_turn_keeps_its_concept_advisories(
    demo_memory, private_db, openai_stub, monkeypatch
):
    """Never answering: one request given up after embedding_timeout_seconds (not the
    client's 30 s x 3), then the concept pass and the edge walk answer, and it says so."""
    offline = _turn(demo_memory)
    by_concept = [a.entry_id for a in offline.topic_advisories if a.source == "concept"]
    assert by_concept
    _set(private_db, embedding_timeout_seconds=0.5, embedding_retries=3)
    openai_stub.embedding_delay = 60.0
    use_stub(monkeypatch, openai_stub.base_url)
    result = _turn(demo_memory)
    assert result.degraded.startswith("embedder unavailable: the embedding endpoint")
    assert "timed out" in result.degraded.lower()
    assert len(openai_stub.requests_to("/embeddings")) == 1  # the deadline left no retry
    assert {a.entry_id for a in result.topic_advisories} >= set(by_concept)
    assert all(a.source == "concept" for a in result.topic_advisories)
    assert [p.name for p in result.passes] == ["topic-concept", "edge-walk"]
    assert result.as_dict()["degraded"] == result.degraded


def test_a_refusing_endpoint_is_tried_embedding_retries_more_times(
    demo_memory, private_db, openai_stub, monkeypatch
):
    """A 503 each time: 1 + embedding_retries requests, then the degraded answer."""
    _set(private_db, embedding_timeout_seconds=30, embedding_retries=2)
    for _ in range(5):
        openai_stub.queue_embedding_error(503)
    use_stub(monkeypatch, openai_stub.base_url)
    result = _turn(demo_memory)
    assert len(openai_stub.requests_to("/embeddings")) == 3
    assert "503" in result.degraded
    assert result.topic_advisories


def test_a_degraded_answer_is_not_cached(demo_memory, private_db, openai_stub, monkeypatch):
    """The next turn tries the endpoint again, and gets the full answer once it is back."""
    _set(private_db, embedding_retries=0)
    openai_stub.queue_embedding_error(503)
    use_stub(monkeypatch, openai_stub.base_url)
    assert retrieve("cryptography", "ada", "rsa keys", recent_concepts=[demo_memory[:3]]).degraded
    again = retrieve("cryptography", "ada", "rsa keys", recent_concepts=[demo_memory[:3]])
    assert (again.degraded, again.cached) == ("", False)


def _down() -> str:
    """The URL of an endpoint that refuses connections (a stub started, then stopped)."""
    with OpenAIStub() as stub:
        url = stub.base_url
    return url


def test_retrieve_and_load_corpus_with_the_endpoint_down_print_one_line(
    demo_memory, monkeypatch, tmp_path
):
    """`hag retrieve` answers from the concept pass with one stderr line; `hag load-corpus`
    exits 1 with one line; neither prints a traceback."""
    use_stub(monkeypatch, _down())
    recent = ",".join(demo_memory[:3])
    shown = hag_retrieve(
        "rsa",
        "--recent",
        recent,
    )
    assert shown.returncode == 0, shown.stderr
    said = [line for line in shown.stderr.splitlines() if line.startswith("hag: ")]
    assert len(said) == 1 and said[0].startswith("hag: embedder unavailable: "), shown.stderr
    assert "answered from the concept pass" in said[0]
    assert "Traceback" not in shown.stderr and shown.stdout.strip()
    small = tmp_path / "one.json"
    small.write_text(json.dumps(one_entry_corpus("Say hello.")))
    loaded = hag("load-corpus", str(small))
    assert loaded.returncode == 1
    assert error_lines(loaded.stderr) == [
        f"hag: the embedding endpoint ({_base(monkeypatch)}) failed: Connection error."
    ], loaded.stderr


def _base(monkeypatch) -> str:
    import os

    return os.environ["OPENAI_BASE_URL"]


def test_the_library_raises_its_own_error_never_openais(own_memory, monkeypatch):
    """embed_texts with the endpoint down raises EmbedderUnavailable (a HagError)."""
    use_stub(monkeypatch, _down())
    with pytest.raises(EmbedderUnavailable, match="failed: Connection error") as caught:
        embeddings.embed_texts(["hello"])
    assert type(caught.value).__module__ == "hag.errors"
    assert caught.value.__cause__ is None


# --- zero and non-finite vectors ---------------------------------------------------------

# blake2b-128 of the offline vectors (1536 dims) of every demo entry's and concept's text,
# computed with the embedder as it was before texts without [a-z0-9] got a vector: the
# fallback must leave every one of these bit for bit.
DEMO_VECTORS_DIGEST = "ee1bd89cece0c07193ec8db9809a2e7d"


def test_text_with_no_ascii_word_gets_a_vector_and_every_other_stays_bit_identical():
    """'!!! ???' and Cyrillic get a non-zero unit vector; the demo's vectors do not move."""
    e = embeddings.OfflineEmbedder(1536)
    punct, cyrillic, other = e.embed(["!!! ???", "Всегда отвечай так. 🔐", "Всегда так"])
    for v in (punct, cyrillic):
        assert math.isclose(float(np.linalg.norm(v)), 1.0, rel_tol=1e-6)
    assert float(cyrillic @ other) > 0.3 > abs(float(punct @ cyrillic))
    data = json.loads(Path(DEMO).read_text())
    texts = [x["instruction"] for x in data["entries"]] + [
        f"{c['title']}: {c.get('description', '')}" for c in data["concepts"]
    ]
    texts += ["modular arithmetic for RSA", "Всегда отвечай так. 🔐 but rsa", "x"]
    digest = hashlib.blake2b(e.embed(texts).tobytes(), digest_size=16).hexdigest()
    assert digest == DEMO_VECTORS_DIGEST


def test_a_zero_or_non_finite_vector_is_refused_naming_the_field(
    own_memory, openai_stub, monkeypatch
):
    """Whatever the embedder: a zero row, or one with NaN, is an EmbedderError naming it."""
    use_stub(monkeypatch, openai_stub.base_url)
    openai_stub.set_embedding("nothing here", [0.0] * 1536)
    openai_stub.set_embedding("broken", [float("nan")] * 1536)
    with pytest.raises(EmbedderError, match=r"entries\[1\]\.instruction: .*a zero vector"):
        embeddings.embed_texts(
            ["fine", "nothing here"], ["entries[0].instruction", "entries[1].instruction"]
        )
    with pytest.raises(EmbedderError, match=r"text 1 of 1: .*not finite"):
        embeddings.embed_texts(["broken"])


def test_load_corpus_refuses_a_text_the_embedder_gives_a_zero_vector(
    own_memory, openai_stub, monkeypatch, tmp_path
):
    """One line naming the entry's field; nothing written. From an endpoint the row is the
    server's fault, said so."""
    use_stub(monkeypatch, openai_stub.base_url)
    openai_stub.set_embedding("Say nothing.", [0.0] * 1536)
    small = tmp_path / "zero.json"
    small.write_text(json.dumps(one_entry_corpus("Say nothing.")))
    loaded = hag("load-corpus", str(small))
    assert loaded.returncode == 1
    assert error_lines(loaded.stderr) == [
        f"hag: entries[0].instruction: the embedding endpoint ({openai_stub.base_url}) "
        "returned a zero vector for 'Say nothing.': the server's fault, so nothing was "
        "written from it"
    ]


def test_a_corpus_vector_of_zeros_is_refused(db):
    """A corpus that carries its own all-zero embedding is refused, naming the entry."""
    data = one_entry_corpus("Hi.", embedding=[0.0] * 1536)
    with pytest.raises(CorpusError, match=r"entries\[0\].*all zeros or not finite"):
        corpus.load(db, corpus.parse(data, "test"), 1536)


def test_a_corpus_concept_vector_of_zeros_is_refused(db):
    """A concept's own all-zero embedding is refused as an entry's is, naming the concept."""
    data = one_entry_corpus("Hi.")
    data["concepts"] = [{"topic_id": "t1", "slug": "c", "title": "C", "embedding": [0.0] * 1536}]
    with pytest.raises(CorpusError, match=r"concepts\[0\] \(t1/c\): embedding is all zeros"):
        corpus.load(db, corpus.parse(data, "test"), 1536)


def test_a_session_observation_cannot_plant_a_zero_vector(db):
    """An observation of punctuation only becomes an entry with a unit vector (offline)."""
    factories.topic(db)
    obs = {"graph": "topic", "concept": "punctuation", "text": "!!! ???"}
    summary = run(db, payload("s-zero", [turn(0, observations=[obs])]))
    assert summary.rejects == 0
    row = db.execute("SELECT embedding FROM hag_entries WHERE instruction = '!!! ???'").fetchone()
    vector = np.asarray(
        row["embedding"].to_list() if hasattr(row["embedding"], "to_list") else row["embedding"]
    )
    assert math.isclose(float(np.linalg.norm(vector)), 1.0, rel_tol=1e-5)


def test_an_embedder_zero_row_rejects_the_session_naming_the_observation(db, monkeypatch):
    """A zero row from the embedder: the session is rejected with the observation's field."""
    factories.topic(db)
    monkeypatch.setattr(  # an embedder that checks nothing itself
        embeddings, "embed_texts", lambda texts: np.zeros((len(texts), 1536), dtype=np.float32)
    )
    obs = {"graph": "topic", "concept": "keys", "text": "Keys come in pairs."}
    summary = run(db, payload("s-zero-row", [turn(0, observations=[obs])]))
    assert summary.rejects == 1
    assert (
        "turn 0: observations[0].text: the embedder gave a zero vector"
        in (summary.rejected[0]["reason"])
    )


def test_retrieve_json_never_prints_nan(db, database_url):
    """A zero vector stored before they were refused: its similarity prints as 0, not NaN."""
    factories.entry(db, concept_slug="rsa", embedding=np.zeros(1536), instruction="Old row.")
    db.commit()
    shown = hag_retrieve(
        "old row",
        "--recent",
        "rsa",
        "--json",
        env={"DATABASE_URL": database_url},
    )
    assert shown.returncode == 0, shown.stderr

    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    data = json.loads(shown.stdout, parse_constant=refuse)
    assert "Old row." in [a["instruction"] for a in data["topic_advisories"]]


# --- configuration errors ----------------------------------------------------------------

BAD_ENVIRONMENT = [
    ("HAG_EMBEDDING_DIM", "abc", "an integer from 2 to 16000"),
    ("HAG_EMBEDDING_DIM", "-1", "an integer from 2 to 16000"),
    ("HAG_EMBEDDING_DIM", "0", "an integer from 2 to 16000"),
    ("HAG_EMBEDDING_DIM", "99999999", "an integer from 2 to 16000"),
    ("HAG_EMBEDDING_PROVIDER", "bogus", "one of auto, openai, offline, local"),
    ("HAG_LLM_PROVIDER", "bogus", "one of auto, openai, offline"),
]


@pytest.mark.parametrize(("variable", "value", "allowed"), BAD_ENVIRONMENT)
def test_an_invalid_environment_value_is_one_line_for_every_command(
    variable, value, allowed, monkeypatch, capsys
):
    """Every command: exit 1, one line naming the variable, its value and what is allowed."""
    from hag import config

    monkeypatch.setenv(variable, value)
    config.reset_config()
    try:
        for path in leaf_commands():
            capsys.readouterr()
            with pytest.raises(SystemExit) as stopped:
                main(path.split())
            err = capsys.readouterr().err
            assert stopped.value.code == 1, (path, err)
            assert err.splitlines() == [
                f"hag: {variable}={value!r} is not valid: use {allowed}"
                + (" (or unset: the model's own)" if variable == "HAG_EMBEDDING_DIM" else "")
            ], (path, err)
        with pytest.raises(ConfigError):
            config.get_config()
    finally:
        monkeypatch.undo()
        config.reset_config()


def test_an_invalid_environment_value_is_one_line_through_a_real_process():
    """The same from a shell: one line, no traceback."""
    shown = hag(
        "retrieve",
        "--topic",
        "t",
        "--learner",
        "a",
        "--message",
        "m",
        env={"HAG_EMBEDDING_PROVIDER": "bogus"},
    )
    assert shown.returncode == 1
    assert shown.stderr.splitlines() == [
        "hag: HAG_EMBEDDING_PROVIDER='bogus' is not valid: use one of auto, openai, offline, local"
    ]


def test_process_sessions_with_the_endpoint_down_is_one_line_and_keeps_the_session(
    demo_memory, private_db, monkeypatch, tmp_path
):
    """`hag process-sessions`: exit 1, one line, the session still pending for the next run."""
    session = payload(
        "s-endpoint-down",
        [turn(0, observations=[{"graph": "topic", "concept": "keys", "text": "Keys pair."}])],
    )
    (tmp_path / "s.json").write_text(json.dumps(session))
    assert hag("ingest", str(tmp_path / "s.json")).returncode == 0
    use_stub(monkeypatch, _down())
    shown = hag("process-sessions")
    assert shown.returncode == 1
    lines = error_lines(shown.stderr)
    assert len(lines) == 1 and lines[0].startswith("hag: the embedding endpoint ("), shown.stderr
    status = private_db.execute(
        "SELECT status FROM hag_sessions WHERE session_id = 's-endpoint-down'"
    ).fetchone()
    assert status["status"] == "pending"
