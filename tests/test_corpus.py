"""`hag load-corpus`: the demo corpus's shape, idempotence, and all-or-nothing refusals."""

from __future__ import annotations

import copy
import hashlib
import json
import uuid

import pytest

from hag.errors import CorpusError
from hag.operations import corpus
from hag.operations.corpus import DEMO_CORPUS

DIM = 1536


def _demo() -> dict:
    return json.loads(DEMO_CORPUS.read_text())


def fingerprint(db) -> str:
    """A digest of every memory table's full content, to prove 'unchanged' byte for byte."""
    parts = []
    for table, order in [
        ("hag_topics", "topic_id"),
        ("hag_concepts", "topic_id, slug"),
        ("hag_entries", "id"),
        ("hag_edges", "id"),
        ("hag_edge_audit", "audit_id"),
    ]:
        rows = db.execute(
            f"SELECT to_jsonb(t)::text AS j FROM {table} t ORDER BY {order}"
        ).fetchall()
        parts.append(table + ":" + "\n".join(r["j"] for r in rows))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _load(db, data) -> corpus.LoadReport:
    return corpus.load(db, corpus.parse(copy.deepcopy(data)), DIM)


def test_demo_corpus_has_the_seeds_shape():
    """Cryptography: 29 public entries, 97 edges, every type and provenance; orphans; 3+ topics."""
    data = _demo()
    crypto = {
        e["id"]: e
        for e in data["entries"]
        if e["topic_id"] == "cryptography" and e["visibility_scope"] == "public"
    }
    assert len(crypto) == 29
    edges = [e for e in data["edges"] if e["source_entry_id"] in crypto]
    assert len(edges) == 97
    assert {e["edge_type"] for e in edges} == {
        "prerequisite",
        "fallback",
        "leads_to",
        "related",
        "supersedes",
    }
    assert {e["source_type"] for e in edges} == {"seed", "learned", "enriched"}
    wired = {e["source_entry_id"] for e in data["edges"]} | {
        e["target_entry_id"] for e in data["edges"]
    }
    orphans = sorted(e["concept_slug"] for i, e in crypto.items() if i not in wired)
    assert orphans == [
        "_unanchored_",
        "buffer-overflow",
        "cryptography",
        "hashing-for-integrity",
        "rsa",
        "steganography",
    ]
    scopes = {e["visibility_scope"] for e in data["entries"]}
    assert {"tutor", "visual"} <= scopes and any(s.startswith("student:") for s in scopes)
    assert len(data["topics"]) >= 3


def test_demo_corpus_loads_and_loading_twice_changes_nothing(db):
    """Every row arrives; a second load of the same file leaves the tables byte-identical."""
    data = _demo()
    report = _load(db, data)
    assert (report.topics, report.concepts, report.entries, report.edges) == (
        len(data["topics"]),
        len(data["concepts"]),
        len(data["entries"]),
        len(data["edges"]),
    )
    before = fingerprint(db)
    again = _load(db, data)
    assert (again.topics, again.concepts, again.entries, again.edges) == (0, 0, 0, 0)
    assert fingerprint(db) == before


def test_entries_without_ids_get_stable_ids():
    """An id derived from the graph identity makes a second load find the same row."""
    e = corpus.Entry(
        topic_id="t", concept_slug="rsa", visibility_scope="public", confidence=0.5, instruction="x"
    )
    assert corpus.derived_entry_id(e) == corpus.derived_entry_id(e.model_copy())
    other = e.model_copy(update={"topic_id": "u"})
    assert corpus.derived_entry_id(other) != corpus.derived_entry_id(e)


def _small() -> dict:
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    return {
        "topics": [{"topic_id": "t", "title": "T"}],
        "concepts": [{"topic_id": "t", "slug": "a", "title": "A"}],
        "entries": [
            {
                "id": a,
                "topic_id": "t",
                "concept_slug": "a",
                "visibility_scope": "public",
                "confidence": 0.6,
                "instruction": "Say A.",
            },
            {
                "id": b,
                "topic_id": "t",
                "concept_slug": "b",
                "visibility_scope": "public",
                "confidence": 0.6,
                "instruction": "Say B.",
            },
        ],
        "edges": [
            {
                "source_entry_id": a,
                "target_entry_id": b,
                "edge_type": "prerequisite",
                "confidence": 0.9,
                "source_type": "seed",
            }
        ],
    }


def _bad_edge_type(d):
    d["edges"][0]["edge_type"] = "causes"
    return "edges.0.edge_type"


def _dangling(d):
    d["edges"][0]["target_entry_id"] = str(uuid.uuid4())
    return "edges[0]"


def _wrong_dim(d):
    d["entries"][1]["embedding"] = [0.1, 0.2, 0.3]
    return "entries[1] (t/b, public): embedding has 3 dimensions, the database takes 1536"


def _duplicate_identity(d):
    d["entries"].append({**d["entries"][1], "id": str(uuid.uuid4())})
    return "entries[2] (t/b, public): duplicate identity of entries[1]"


def _bad_maturity(d):
    d["entries"][1]["maturity"] = "retired"
    return "entries[1] (t/b, public)"


def _duplicate_topic(d):
    d["topics"].append({"topic_id": "t", "title": "T again"})
    return "topics[1] (t): duplicate of topics[0]"


def _duplicate_concept(d):
    d["concepts"].append({"topic_id": "t", "slug": "a", "title": "A again"})
    return "concepts[1] (t/a): duplicate of concepts[0]"


@pytest.mark.parametrize(
    "breaker",
    [
        _bad_edge_type,
        _dangling,
        _wrong_dim,
        _duplicate_identity,
        _bad_maturity,
        _duplicate_topic,
        _duplicate_concept,
    ],
)
def test_a_bad_corpus_is_refused_whole_naming_the_item(db, breaker):
    """Unknown edge type, dangling edge, wrong dimension, duplicate identity: nothing written."""
    _load(db, _demo())
    db.commit()
    before = fingerprint(db)
    data = _small()
    named = breaker(data)
    with pytest.raises(CorpusError) as info:
        _load(db, data)
    # No rollback here: load() itself must leave nothing behind on this very connection.
    assert named in str(info.value)
    assert fingerprint(db) == before


def test_an_identity_already_in_the_database_is_refused(db):
    """Same (topic, concept, scope) under a new id: refused with the item named, nothing written."""
    data = _small()
    _load(db, data)
    db.commit()
    before = fingerprint(db)
    clash = _small()
    clash["edges"] = []
    with pytest.raises(
        CorpusError, match=r"entries\[0\] \(t/a, public\).*hag_entries_topic_concept_slug_uniq"
    ):
        _load(db, clash)
    assert fingerprint(db) == before  # no rollback: load() undid its own writes


def test_unreadable_files_are_refused_with_the_reason(tmp_path):
    """Missing file and broken JSON each get a one-line reason."""
    with pytest.raises(CorpusError, match="no such file"):
        corpus.read(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CorpusError, match="not valid JSON"):
        corpus.read(bad)


def test_a_directory_or_binary_file_is_refused_with_the_reason(tmp_path):
    """A directory and a non-UTF-8 file get a CorpusError (one line), not an OSError."""
    with pytest.raises(CorpusError, match="cannot read"):
        corpus.read(tmp_path)
    binary = tmp_path / "corpus.json"
    binary.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(CorpusError, match="not a UTF-8 text file"):
        corpus.read(binary)
