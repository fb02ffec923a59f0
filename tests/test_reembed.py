"""`hag reembed`: a memory moved to another embedder in batches, resumable after a kill,
read throughout from its old vectors until the one-transaction switch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

from hag import PROJECT_ROOT, settings
from hag.errors import EmbedderMismatch
from hag.operations import corpus
from hag.operations.reembed import reembed
from hag.retrieval import ann, ranking, retrieve
from hag.storage import db, migrate
from hag.vectors import embedder_identity, embeddings
from tests import factories
from tests.fix_embedder import error_lines, hag_retrieve, own_memory, use_offline, use_stub

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

__all__ = ["own_memory"]

DEMO = "hag/data/demo_corpus.json"


def _vector(value) -> np.ndarray:
    return np.asarray(value.to_list() if hasattr(value, "to_list") else value, dtype=np.float64)


def _cos(a, b) -> float:
    a, b = _vector(a), _vector(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _held(conn):
    return embedder_identity.held(conn)[0]


@pytest.fixture
def demo_memory(own_memory, private_db, monkeypatch):
    """The demo corpus, embedded offline, its embedder recorded as `hag migrate` does."""
    use_offline(monkeypatch)
    corpus.load(private_db, corpus.read(DEMO), 1536)
    settings.set_value(private_db, "retrieval_cache_ttl_seconds", 0, by="test")
    private_db.commit()
    settings.invalidate()
    with db.connect() as conn:
        migrate.record_embedder(conn, embeddings.get_embedder())
    return private_db


def _probes(conn) -> list[tuple[object, str]]:
    """Entries that answer first for their own text in the offline memory."""
    rows = conn.execute(
        "SELECT id, instruction FROM hag_entries WHERE topic_id = 'cryptography' "
        "AND visibility_scope = 'public' ORDER BY id"
    ).fetchall()
    found = []
    for r in rows:
        top = retrieve("cryptography", "ada", r["instruction"]).topic_advisories
        if top and top[0].entry_id == r["id"]:
            found.append((r["id"], r["instruction"]))
    return found[:6]


class Reader(threading.Thread):
    """Retrieves in a loop (this process keeps the offline embedder it checked) and records,
    for each answer, whether its probe came first and which embedder the memory held after."""

    def __init__(self, url: str, probes: list[tuple[object, str]]):
        super().__init__(daemon=True)
        self.url, self.probes = url, probes
        self.stop = threading.Event()
        self.answers: list[tuple[bool, str]] = []
        self.errors: list[str] = []

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as meta:
            while not self.stop.is_set():
                for entry_id, text in self.probes:
                    try:
                        top = retrieve("cryptography", "ada", text).topic_advisories
                    except Exception as exc:  # any error at all fails the test
                        self.errors.append(repr(exc))
                        continue
                    held = meta.execute(
                        "SELECT value FROM hag_meta WHERE key = 'embedder'"
                    ).fetchone()[0]
                    first = bool(top) and top[0].entry_id == entry_id
                    self.answers.append((first, json.loads(held)["provider"]))


def test_a_killed_reembed_resumes_and_retrieval_answers_throughout(
    demo_memory, own_memory, openai_stub, monkeypatch
):
    """Demo memory, offline -> the OpenAI-protocol stub: killed after three batches, resumed;
    a reader sees no error and its probes first until the switch; then the memory is the
    stub's and an offline process is refused in one line."""
    conn = demo_memory
    total = conn.execute("SELECT count(*) AS n FROM hag_entries").fetchone()["n"]
    copy_rows = conn.execute("SELECT count(*) AS n FROM hag_entry_search").fetchone()["n"]
    probes = _probes(conn)
    assert len(probes) >= 3
    reader = Reader(own_memory, probes)
    reader.start()
    stub_env = {
        **os.environ,
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": openai_stub.base_url,
    }

    killed = subprocess.Popen(
        [sys.executable, "-m", "hag.cli", "reembed", "--batch-size", "8"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=stub_env,
        cwd=PROJECT_ROOT,
    )
    assert killed.stderr is not None
    batches = 0
    for line in killed.stderr:
        batches += "staged" in line
        if batches == 3:
            killed.send_signal(signal.SIGKILL)
            break
    killed.wait(60)
    killed.stderr.close()
    assert killed.returncode == -signal.SIGKILL
    staged = conn.execute("SELECT count(*) AS n FROM hag_reembed_entries").fetchone()["n"]
    conn.commit()
    assert 24 <= staged < total
    assert _held(conn).provider == "offline"  # nothing switched

    resumed = subprocess.run(
        [sys.executable, "-m", "hag.cli", "reembed", "--batch-size", "8"],
        capture_output=True,
        text=True,
        env=stub_env,
        cwd=PROJECT_ROOT,
        timeout=300,
    )
    reader.stop.set()
    reader.join(60)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{staged} texts already staged" in resumed.stderr
    assert "reembed: switched to openai/text-embedding-3-small (1536 dims)" in resumed.stderr

    assert reader.errors == []
    before = [first for first, provider in reader.answers if provider == "offline"]
    assert len(before) >= len(probes) and all(before)

    conn.commit()
    assert _held(conn).label == "openai/text-embedding-3-small (1536 dims)"
    for r in conn.execute("SELECT instruction, embedding FROM hag_entries LIMIT 5"):
        assert _cos(r["embedding"], openai_stub.embedding_for(r["instruction"])) > 0.999
    assert conn.execute("SELECT count(*) AS n FROM hag_entry_search").fetchone()["n"] == copy_rows
    assert conn.execute("SELECT count(*) AS n FROM hag_reembed_entries").fetchone()["n"] == 0

    offline = hag_retrieve("rsa")
    assert offline.returncode == 1
    assert error_lines(offline.stderr) == [
        "hag: this memory was embedded with openai/text-embedding-3-small (1536 dims); the "
        "configured embedder is offline/hash-v1 (1536 dims): set HAG_EMBEDDING_PROVIDER=openai "
        "HAG_EMBEDDING_MODEL=text-embedding-3-small HAG_EMBEDDING_DIM=1536, or run `hag "
        "reembed` to move the memory to the configured one"
    ]
    # The stub knows no meaning: it is told that the turn's context means the probe's text.
    title = conn.execute("SELECT title FROM hag_topics WHERE topic_id = 'cryptography'")
    context = ranking.query_context(
        title.fetchone()["title"], None, None, probes[0][1], settings.load(conn)
    )
    openai_stub.set_embedding(context, openai_stub.embedding_for(probes[0][1]))
    served = hag_retrieve(
        probes[0][1],
        env={"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": openai_stub.base_url},
    )
    assert served.returncode == 0, served.stderr
    assert probes[0][1][:40] in served.stdout


def test_a_change_of_dimension_switches_columns_indexes_and_reads_in_one_step(
    demo_memory, openai_stub, monkeypatch
):
    """1,536 -> 384 dimensions: the columns, the search copy, the tutor's and a topic's HNSW
    index follow; a text written during the move is embedded before the switch; the batch
    size is the reembed_batch_size dial."""
    conn = demo_memory
    ann.build_topic_indexes(concurrently=False, topics=["cryptography"])
    settings.set_value(conn, "reembed_batch_size", 50, by="test")
    conn.commit()
    settings.invalidate()
    use_stub(monkeypatch, openai_stub.base_url, dim=384)
    concepts = conn.execute("SELECT count(*) AS n FROM hag_concepts").fetchone()["n"]
    conn.commit()
    lines: list[str] = []
    late: list[object] = []

    def progress(line: str) -> None:
        lines.append(line)
        if f"{concepts}/{concepts} concepts staged" in line and not late:  # before the switch
            with db.connect() as writer:
                late.append(
                    factories.entry(
                        writer,
                        concept_slug="late-entry",
                        embedding=embeddings.OfflineEmbedder(1536).embed(["Written late."])[0],
                        instruction="Written late.",
                    )
                )

    report = reembed(progress=progress)
    assert report.dimension_changed
    # 65 entries in 2 batches of 50, the 48 concepts in 1, then the late entry in the switch
    assert sum("staged" in line for line in lines) == 4

    def column(table: str) -> str:
        return conn.execute(
            "SELECT format_type(atttypid, atttypmod) AS t FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding'",
            (table,),
        ).fetchone()["t"]

    conn.commit()
    assert [column(t) for t in ("hag_entries", "hag_concepts", "hag_entry_search")] == [
        "vector(384)",
        "vector(384)",
        "halfvec(384)",
    ]
    labels = {
        r["label"]
        for r in conn.execute(
            "SELECT obj_description(indexrelid, 'pg_class') AS label FROM pg_index "
            "WHERE indrelid = 'hag_entries'::regclass"
        )
    }
    assert {"hag-ann scope:tutor", "hag-ann topic:cryptography"} <= labels
    meta = conn.execute("SELECT value FROM hag_meta WHERE key = 'embedding_dim'").fetchone()
    assert meta["value"] == "384"
    row = conn.execute("SELECT embedding FROM hag_entries WHERE id = %s", (late[0],)).fetchone()
    assert _cos(row["embedding"], openai_stub.embedding_for("Written late.", 384)) > 0.999
    assert migrate.stored_dimension(conn) == 384

    result = retrieve("cryptography", "ada", "how does rsa work")
    assert result.topic_advisories and not result.degraded
    use_offline(monkeypatch)
    with pytest.raises(EmbedderMismatch, match=r"openai/text-embedding-3-small \(384 dims\)"):
        retrieve("cryptography", "ada", "how does rsa work")


def test_a_corpus_load_across_a_reembed_switch_is_refused_whole(
    demo_memory, openai_stub, monkeypatch, tmp_path
):
    """A load embeds its texts with the offline embedder the memory holds, then a `hag
    reembed` to another embedder of the same dimension switches the memory before the load
    writes: the load is refused naming both embedders, and writes nothing (its vector would
    have been the old embedder's in the moved memory)."""
    conn = demo_memory
    text = "Ask the student what a padding oracle lets an attacker learn."
    path = tmp_path / "extra.json"
    extra = {
        "concepts": [
            {
                "topic_id": "cryptography",
                "slug": "padding-oracle",
                "title": "Padding oracles",
                "description": "Attacks on CBC padding checks",
            }
        ],
        "entries": [
            {
                "topic_id": "cryptography",
                "concept_slug": "padding-oracle",
                "visibility_scope": "public",
                "confidence": 0.7,
                "instruction": text,
            }
        ],
    }
    path.write_text(json.dumps(extra))
    fill = corpus._fill_embeddings

    def fill_then_switch(c, report) -> None:
        fill(c, report)  # embedded and checked by this process's offline embedder
        use_stub(monkeypatch, openai_stub.base_url)
        reembed()
        use_offline(monkeypatch)

    monkeypatch.setattr(corpus, "_fill_embeddings", fill_then_switch)
    with pytest.raises(EmbedderMismatch):
        corpus.load_file(path)
    assert _held(conn).label.startswith("openai")
    for table, where in (("hag_entries", "instruction"), ("hag_concepts", "title")):
        found = conn.execute(
            f"SELECT count(*) AS n FROM {table} WHERE {where} = %s",
            (text if table == "hag_entries" else "Padding oracles",),
        ).fetchone()["n"]
        assert found == 0, table
    conn.commit()
