"""Each topic graph's concept count, kept at write time (migration 228).

The re-weigh's chance term reads how many live anchored concepts a prerequisite's graph
(topic, scope) holds. The count is appended as signed changes by statement triggers and
folded by the nightly; these tests hold it to a count of the entries themselves after every
kind of write, and show that two writers of one graph never wait for each other.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hag import settings
from hag.evidence import store
from hag.nightly import sweeps
from hag.storage import db as hdb
from tests import factories as f

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

AS_OF = datetime(2026, 6, 1, tzinfo=UTC)

KEPT = """
SELECT topic_id, visibility_scope, sum(concepts)::int AS n, count(*)::int AS rows
FROM hag_graph_concepts GROUP BY 1, 2 HAVING sum(concepts) <> 0
"""
COUNTED = """
SELECT topic_id, visibility_scope, count(*)::int AS n
FROM hag_entries
WHERE concept_slug <> '_unanchored_' AND maturity <> 'archived'
GROUP BY 1, 2
"""


def _kept(conn) -> dict[tuple[str, str], int]:
    return {(r["topic_id"], r["visibility_scope"]): r["n"] for r in conn.execute(KEPT)}


def _counted(conn) -> dict[tuple[str, str], int]:
    return {(r["topic_id"], r["visibility_scope"]): r["n"] for r in conn.execute(COUNTED)}


def _rows(conn) -> int:
    return int(conn.execute("SELECT count(*) AS n FROM hag_graph_concepts").fetchone()["n"])


@pytest.fixture
def memory(db):
    """Two topics, three graphs: four public concepts of cryptography, an unanchored entry,
    an archived one, two tutor rows, and one concept of another topic."""
    ids = {s: f.entry(db, concept_slug=s) for s in ("aes", "rsa", "sha", "des")}
    ids["loose"] = f.entry(db, concept_slug="_unanchored_")
    ids["old"] = f.entry(db, concept_slug="enigma", maturity="archived")
    ids["t1"] = f.entry(db, concept_slug="aes", scope="tutor")
    ids["t2"] = f.entry(db, concept_slug="rsa", scope="tutor")
    ids["gcd"] = f.entry(db, topic_id="number-theory", concept_slug="gcd")
    db.commit()
    return ids


def test_every_kind_of_write_keeps_the_count_of_the_entries(db, memory):
    """Inserts, archives, revivals, anchoring, moves between graphs, multi-row updates and
    deletes: after each, every graph's kept count is what counting its entries gives, and
    the figures are the ones the writes make by hand."""
    expected = {
        ("cryptography", "public"): 4,
        ("cryptography", "tutor"): 2,
        ("number-theory", "public"): 1,
    }
    assert _kept(db) == _counted(db) == expected

    db.execute("UPDATE hag_entries SET maturity = 'archived' WHERE id = %s", (memory["des"],))
    db.execute("UPDATE hag_entries SET maturity = 'candidate' WHERE id = %s", (memory["old"],))
    db.execute(  # anchor the loose entry, and move a concept to the other topic
        "UPDATE hag_entries SET concept_slug = 'otp' WHERE id = %s", (memory["loose"],)
    )
    db.execute("UPDATE hag_entries SET topic_id = 'number-theory' WHERE id = %s", (memory["sha"],))
    expected = {
        ("cryptography", "public"): 4,
        ("cryptography", "tutor"): 2,
        ("number-theory", "public"): 2,
    }
    assert _kept(db) == _counted(db) == expected

    # one statement over every graph: confidence only (no change), then everything archived
    # but the tutor rows, then those deleted
    db.execute("UPDATE hag_entries SET confidence = confidence / 2")
    db.execute("UPDATE hag_entries SET maturity = 'archived' WHERE visibility_scope = 'public'")
    db.execute("DELETE FROM hag_entries WHERE id = %s", (memory["t1"],))
    db.commit()
    assert _kept(db) == _counted(db) == {("cryptography", "tutor"): 1}


def test_an_update_that_moves_no_count_writes_no_row(db, memory):
    """Session-end's updates (confidence, counters, last use) append nothing."""
    before = _rows(db)
    db.execute("UPDATE hag_entries SET confidence = 0.5, success_count = success_count + 1")
    db.execute("UPDATE hag_entries SET maturity = 'proven' WHERE maturity = 'pattern'")
    assert _rows(db) == before


def test_the_fold_leaves_one_row_per_graph_with_its_count(db, memory):
    """Changes appended across statements fold into one row per graph; a graph that counts
    nothing keeps no row."""
    for slug in ("ecc", "dh", "dsa"):
        f.entry(db, concept_slug=slug)
    db.execute("DELETE FROM hag_entries WHERE topic_id = 'number-theory'")
    db.commit()
    assert _rows(db) > 3
    kept = _kept(db)
    store.fold_graph_counts(db)
    db.commit()
    rows = {(r["topic_id"], r["visibility_scope"]): (r["n"], r["rows"]) for r in db.execute(KEPT)}
    assert rows == {g: (n, 1) for g, n in kept.items()}
    assert kept == {("cryptography", "public"): 7, ("cryptography", "tutor"): 2}
    assert _rows(db) == 2


def test_the_nightly_folds_the_counts(db, memory):
    f.entry(db, concept_slug="ecc")
    db.commit()
    summary = sweeps.sweep(db, as_of=AS_OF)
    assert "graph counts" in summary.step_seconds
    assert _rows(db) == 3
    assert _kept(db) == _counted(db)


def test_two_writers_of_one_graph_never_wait_and_a_fold_between_loses_nothing(db, memory):
    """One session adds a concept and has not committed; another adds one to the same
    graph (under a lock timeout: a counter row would make it wait), and a fold runs and
    commits between them. Both counts land."""
    with hdb.connect() as a, hdb.connect() as b:
        f.entry(a, concept_slug="ecc")
        b.execute("SET lock_timeout = '2s'")
        f.entry(b, concept_slug="dh")
        store.fold_graph_counts(db)
        db.commit()
        b.commit()
        a.commit()
    assert _kept(db)[("cryptography", "public")] == 6
    assert _kept(db) == _counted(db)


def test_truncating_the_entries_empties_the_counts(db, memory):
    db.execute("TRUNCATE hag_entries CASCADE")
    db.commit()
    assert _rows(db) == 0


def test_the_evidence_read_takes_the_kept_count(db, memory):
    """The chance term's concept count is the kept one: a change appended by hand (no entry
    behind it) moves it, which a count of the entries would not."""
    pre = f.edge(db, memory["aes"], memory["rsa"])
    db.commit()
    sources = [memory["aes"]]
    [read] = [
        x for x in store.prerequisite_evidence(db, sources, settings.current()) if x.edge_id == pre
    ]
    assert read.n_concepts == 4
    db.execute("INSERT INTO hag_graph_concepts VALUES ('cryptography', 'public', 5)")
    [read] = [
        x for x in store.prerequisite_evidence(db, sources, settings.current()) if x.edge_id == pre
    ]
    assert read.n_concepts == 9


def test_a_learners_own_graph_is_not_folded_and_the_erasure_takes_it(db, memory):
    """The fold leaves `student:` graphs as they are (an erasure beside a fold could miss
    the folded row); erasing the learner removes them."""
    from hag.operations import privacy

    f.entry(db, concept_slug="likes-diagrams", scope="student:ada")
    f.entry(db, concept_slug="rushes-proofs", scope="student:ada")
    db.commit()
    store.fold_graph_counts(db)
    db.commit()
    rows = db.execute(
        "SELECT count(*) AS n, sum(concepts)::int AS s FROM hag_graph_concepts "
        "WHERE visibility_scope = 'student:ada'"
    ).fetchone()
    assert (rows["n"], rows["s"]) == (2, 2)
    assert _rows(db) == 3 + 2
    privacy.erase_learner("ada", operator="test", conn=db)
    left = db.execute(
        "SELECT count(*) AS n FROM hag_graph_concepts WHERE visibility_scope LIKE 'student:%'"
    ).fetchone()
    assert left["n"] == 0


def test_a_truncate_of_the_entries_beside_a_fold_leaves_no_count(db, memory):
    """A TRUNCATE of the entries while the nightly's fold is uncommitted waits for it (the
    fold holds the entries), then empties the folded row as well. Were it to truncate first,
    its trigger's DELETE would wait on the rows the fold deleted, skip them, and never see
    the folded row the fold committed meanwhile."""
    import threading

    f.entry(db, concept_slug="ecc")
    db.commit()
    store.fold_graph_counts(db)  # not committed yet
    errors: list[BaseException] = []

    def truncate() -> None:
        try:
            with hdb.connect() as other:
                other.execute("TRUNCATE hag_entries CASCADE")
                other.commit()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    worker = threading.Thread(target=truncate)
    worker.start()
    with hdb.connect(autocommit=True) as watch:
        for _ in range(2000):  # until the TRUNCATE waits on a lock (at most about 20 s)
            waiting = watch.execute(
                "SELECT count(*) AS n FROM pg_stat_activity "
                "WHERE query LIKE 'TRUNCATE hag_entries%%' AND wait_event_type = 'Lock'"
            ).fetchone()["n"]
            if waiting:
                break
            watch.execute("SELECT pg_sleep(0.01)")
    assert waiting, "the TRUNCATE never waited"
    db.commit()
    worker.join(timeout=30)
    assert not worker.is_alive() and not errors, errors
    assert _rows(db) == 0
