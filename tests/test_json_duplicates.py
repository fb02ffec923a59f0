"""Duplicate JSON keys (issue 24): a session payload or a corpus file naming one key twice
in an object is refused with the key named, never read last-wins."""

from __future__ import annotations

import pytest

from hag.errors import CorpusError
from hag.operations import corpus
from hag.operations.corpus import DEMO_CORPUS
from hag.session.ingest import ingest_payload
from hag.support.jsonkeys import DuplicateKeyError, unique_keys


@pytest.mark.parametrize(
    "raw",
    [
        '{"session_id": "s-1", "learner_id": "ada", "learner_id": "bob", "turns": []}',
        '{"session_id": "s-1", "turns": [{"student_message": "a", "student_message": "b"}]}',
    ],
)
def test_a_session_payload_with_a_key_twice_is_refused_naming_it(db, raw):
    """The payload is quarantined as malformed JSON naming the key, at any depth."""
    result = ingest_payload(db, raw, source="test")
    db.commit()
    assert result.quarantined and not result.accepted
    assert "malformed JSON: duplicate key" in result.reason
    assert ("'learner_id'" in result.reason) or ("'student_message'" in result.reason)


def test_a_corpus_entry_with_a_key_twice_is_refused_naming_it(tmp_path):
    """An entry carrying visibility_scope twice (public, then student:ada) is refused whole,
    where it used to load as student:ada."""
    text = DEMO_CORPUS.read_text()
    doubled = text.replace(
        '"visibility_scope": "public",',
        '"visibility_scope": "public", "visibility_scope": "student:ada",',
        1,
    )
    assert doubled != text
    path = tmp_path / "corpus.json"
    path.write_text(doubled)
    with pytest.raises(CorpusError, match=r"duplicate key 'visibility_scope'"):
        corpus.read(path)


def test_unique_keys_keeps_order_and_refuses_the_first_repeat():
    """An object without repeats is the dict of its pairs; a repeat names its key."""
    assert unique_keys([("a", 1), ("b", 2)]) == {"a": 1, "b": 2}
    with pytest.raises(DuplicateKeyError, match="duplicate key 'a'"):
        unique_keys([("a", 1), ("b", 2), ("a", 3)])
