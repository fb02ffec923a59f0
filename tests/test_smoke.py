"""Smoke: the test database is migrated and the factories write real rows."""

from tests import factories as f


def test_factories_write_entries_and_edges(db):
    """An entry pair and an edge between them land in the real database."""
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    f.edge(db, a, b)
    assert db.execute("SELECT count(*) AS n FROM hag_edges").fetchone()["n"] == 1
