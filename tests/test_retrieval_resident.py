"""Resident sets (hag.retrieval.resident, migration 095): searched sets held in memory.

Every answer is compared with the seed's own query (match_hag_entries) over the database as
it stands when the pass runs, never with what the read path computed before.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector import Vector

from hag import settings
from hag.retrieval import ann, store
from hag.retrieval.resident import Residents, filter_key, residents
from hag.storage import db as hdb
from tests import factories as f
from tests.fix_retrieval import clustered_memory, tutor_rows_near_and_far

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

TOPIC = ("cryptography", ("public",), 5)
TUTOR = (None, ("tutor",), 3)


@pytest.fixture
def held(db: Any) -> Iterator[Residents]:
    """The process's resident sets, empty before and after the test."""
    residents.clear()
    yield residents
    residents.wait()
    residents.clear()


def seed_ids(db: Any, q: np.ndarray, topic: str | None, scopes: tuple[str, ...], n: int) -> list:
    db.rollback()  # a fresh snapshot: what the database holds now
    return [
        r["id"]
        for r in db.execute(
            "SELECT id FROM match_hag_entries(%s, %s, %s, p_match_count => %s)",
            (Vector(q), topic, list(scopes), n),
        ).fetchall()
    ]


def read(db: Any, q: np.ndarray, which: tuple[Any, ...] = TOPIC) -> str:
    """One pass on a read-pool connection, checked against the seed's query; its path."""
    topic, scopes, count = which
    current = settings.load(db)
    with store.reader() as conn:
        rows, report = store.semantic_pass(conn, "pass", q, topic, scopes, count, current, False)
    assert [r["id"] for r in rows] == seed_ids(db, q, topic, scopes, count)
    return report.path


def key_of(db: Any, which: tuple[Any, ...] = TOPIC) -> tuple[Any, ...]:
    topic, scopes, _ = which
    search_set = store.compact_set(topic, scopes)
    assert search_set is not None
    return filter_key(search_set, topic, scopes, store.filters(settings.load(db)))


def warm(db: Any, q: np.ndarray, which: tuple[Any, ...] = TOPIC) -> None:
    """Read until the set is resident (its load runs in the background)."""
    for _ in range(64):
        if residents.holds(key_of(db, which)):
            return
        read(db, q, which)
        residents.wait()
    raise AssertionError("the set never became resident")


def stamp(db: Any, key: str = "topic:cryptography", *, fresh: bool = True) -> int:
    """A set's stamp, summed here from the recorded changes (migration 095); `fresh`: in a
    new snapshot, else inside the transaction `db` has open."""
    if fresh:
        db.rollback()
    row = db.execute(
        "SELECT coalesce(sum(changes), 0) AS s FROM hag_entry_search_changes "
        "WHERE set_key IN (%s, '*')",
        (key,),
    ).fetchone()
    return int(row["s"])


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_resident_passes_equal_the_seeds_query(db, dials, held):
    """Topic and tutor sets, queries near a centre and in random directions, two dial sets;
    with 5 candidates the proof needs the wider try, with the error dial at its maximum the
    resident set proves nothing and the copy's path answers; the rows never change."""
    rng = np.random.default_rng(95)
    centres = clustered_memory(db, rng)
    queries = [unit(centres[i % 6] + rng.standard_normal(f.DIM) * 0.5) for i in range(12)]
    queries += [unit(rng.standard_normal(f.DIM)) for _ in range(6)]
    paths: dict[str, set[str]] = {}
    for name, overrides in (
        ("default", {}),
        ("five", {"compact_candidates": 5}),
        ("unprovable", {"compact_similarity_error": 2.0}),
    ):
        dials(**overrides)
        for which in (TOPIC, TUTOR):
            warm(db, queries[0], which)
            for q in queries:
                paths.setdefault(name, set()).add(read(db, q, which))
    assert paths["default"] == {"resident"}
    assert "resident-widened" in paths["five"]
    assert paths["unprovable"] == {"exact"}


@pytest.mark.parametrize("follow", [True, False], ids=["following", "follow-off"])
def test_a_write_to_the_set_is_seen_by_the_very_next_read(db, dials, held, caplog, follow):
    """Inserts, confidence and maturity changes, moves, new vectors and deletes in the
    resident set's topic: the next read is the seed's answer over the new rows, from the held
    set with the changed rows applied (it stays held), or, with resident_follow_max_rows 0,
    through the copy (the set dropped)."""
    if not follow:
        dials(resident_follow_max_rows=0)
    rng = np.random.default_rng(7)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    near = unit(q + rng.standard_normal(f.DIM) * 0.05)

    def write_then_read(sql: str, *args: Any) -> None:
        warm(db, q)
        assert read(db, q) == "resident"
        before = stamp(db)
        db.execute(sql, args)
        db.commit()
        assert stamp(db) != before  # the trigger recorded the change ...
        path = read(db, q)  # ... the read saw it, and (inside) the new answer
        assert path == "resident-followed" if follow else "resident" not in path
        assert residents.holds(key_of(db)) == follow
        assert "disagrees" not in caplog.text  # dropped by the stamp, not by the re-check

    new = f.entry(db, confidence=0.95, maturity="proven", embedding=near)
    db.commit()
    write_then_read("DELETE FROM hag_entries WHERE id = %s", new)
    write_then_read(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, "
        "confidence, instruction, embedding) VALUES ('cryptography', 'x', 'public', 'proven', "
        "0.95, 'Use it.', %s)",
        Vector(near),
    )
    top = seed_ids(db, q, *TOPIC)[0]
    write_then_read("UPDATE hag_entries SET confidence = 0.05 WHERE id = %s", top)
    second = seed_ids(db, q, *TOPIC)[0]
    write_then_read("UPDATE hag_entries SET maturity = 'archived' WHERE id = %s", second)
    third = seed_ids(db, q, *TOPIC)[0]
    write_then_read("UPDATE hag_entries SET topic_id = 'linux-basics' WHERE id = %s", third)
    fourth = seed_ids(db, q, *TOPIC)[0]
    write_then_read("UPDATE hag_entries SET embedding = %s WHERE id = %s", Vector(-q), fourth)


def test_writes_outside_the_set_leave_it_resident(db, dials, held):
    """Another topic's rows, a learner's rows, and counters of the set's own rows."""
    rng = np.random.default_rng(8)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    warm(db, q)
    f.entry(db, topic_id="linux-basics", embedding=q)
    f.entry(db, scope="student:ada", embedding=q)
    top = seed_ids(db, q, *TOPIC)[0]
    db.execute(
        "UPDATE hag_entries SET success_count = success_count + 1, last_matched_at = now() "
        "WHERE id = %s",
        (top,),
    )
    db.commit()
    assert read(db, q) == "resident"


def test_truncate_and_the_bulk_backfill_move_every_stamp(db, dials, held):
    """TRUNCATE of hag_entries and the bulk loader's backfill record set '*'."""
    rng = np.random.default_rng(9)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    warm(db, q)
    tutor, before = stamp(db, "tutor"), stamp(db)
    db.execute("ALTER TABLE hag_entries DISABLE TRIGGER hag_entries_search_insert")
    # as a bulk loader starts: the copy emptied (a write to the copy records nothing) ...
    db.execute("DELETE FROM hag_entry_search")
    f.entry(db, confidence=0.95, maturity="proven", embedding=q)  # ... a row loaded unseen
    db.execute("ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_search_insert")
    assert (stamp(db, "tutor", fresh=False), stamp(db, fresh=False)) == (tutor, before)
    db.execute(store.query("retrieval", "search_copy_backfill"))  # ... then the backfill
    db.commit()
    assert stamp(db, "tutor") != tutor and stamp(db) != before  # '*': every set's stamp
    assert read(db, q) != "resident"
    warm(db, q)
    before = stamp(db)
    db.execute("TRUNCATE hag_entries CASCADE")
    db.commit()
    assert stamp(db) != before
    assert read(db, q) != "resident"


def test_a_candidate_that_left_the_set_unrecorded_drops_it(db, dials, held, caplog):
    """A change the stamp missed (here: the copy's triggers switched off, as no write path
    of this project does) is caught by the re-check of each candidate against the set's
    filter: the set is dropped, with a warning, and answers nothing."""
    rng = np.random.default_rng(16)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    warm(db, q)
    top = seed_ids(db, q, *TOPIC)[0]
    db.execute("ALTER TABLE hag_entries DISABLE TRIGGER hag_entries_search_update")
    db.execute("UPDATE hag_entries SET confidence = 0.05 WHERE id = %s", (top,))
    db.execute("ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_search_update")
    db.commit()
    with store.reader() as conn:
        answered = residents.answer(conn, key_of(db), q, 5, settings.load(db))
    assert answered is None and not residents.holds(key_of(db))
    assert "disagrees with its stamp" in caplog.text


def test_the_nightly_fold_keeps_every_stamp(db, dials, held):
    """Folding the recorded changes leaves one row per set and the resident set valid."""
    rng = np.random.default_rng(10)
    clustered_memory(db, rng)
    for _ in range(3):
        db.execute("UPDATE hag_entries SET confidence = confidence * 0.99")
        db.commit()
    q = unit(rng.standard_normal(f.DIM))
    warm(db, q)
    sums = "SELECT set_key, sum(changes) AS n FROM hag_entry_search_changes GROUP BY set_key"
    before = {r["set_key"]: r["n"] for r in db.execute(sums).fetchall()}
    assert before["topic:cryptography"] >= 4 and ann.fold_search_changes() > 0
    db.rollback()
    after = {r["set_key"]: r["n"] for r in db.execute(sums).fetchall()}
    rows = db.execute("SELECT count(*) AS n FROM hag_entry_search_changes").fetchone()["n"]
    assert after == before and rows == len(before)
    assert read(db, q) == "resident"


def test_a_set_follows_random_writes_between_reads_exactly(db, dials, held):
    """Sixty rounds of random writes to the held topic (new rows, confidences across the
    floors, maturities, scopes, moves to and from another topic, new vectors, deletes), one
    read after each: every answer is the seed's query's, from the held set, for the topic
    and the tutor scope, and with the set rebuilt in memory at every change as well as
    never; the held rows are then those the set holds in the database."""
    rng = np.random.default_rng(185)
    centres = clustered_memory(db, rng)
    for share in (10.0, 0.0):
        dials(resident_follow_compact_share=share)
        residents.clear()
        queries = [unit(centres[i % 6] + rng.standard_normal(f.DIM) * 0.5) for i in range(6)]
        for which in (TOPIC, TUTOR):
            warm(db, queries[0], which)
        paths = []
        for round_ in range(30):
            random_writes(db, rng, centres, round_)
            for which in (TOPIC, TUTOR):
                paths.append(read(db, queries[round_ % 6], which))
        assert sum("resident" in p for p in paths) >= 55, paths
        for which in (TOPIC, TUTOR):
            assert_held_rows_are_the_sets(db, which)


def random_writes(db: Any, rng: np.random.Generator, centres: np.ndarray, round_: int) -> None:
    """One session's worth of writes to the topic and tutor rows, committed."""
    ids = [
        r["id"]
        for r in db.execute(
            "SELECT id FROM hag_entries WHERE visibility_scope IN ('public', 'tutor') ORDER BY id"
        ).fetchall()
    ]
    pick = [ids[int(i)] for i in rng.choice(len(ids), 6, replace=False)]
    near = unit(centres[round_ % 6] + rng.standard_normal(f.DIM) * 0.3)
    statements = [
        (
            "UPDATE hag_entries SET confidence = %s WHERE id = %s",
            (float(rng.uniform(0.2, 1)), pick[0]),
        ),
        (
            "UPDATE hag_entries SET maturity = %s WHERE id = %s",
            (["candidate", "pattern", "proven", "archived"][round_ % 4], pick[1]),
        ),
        (
            "UPDATE hag_entries SET topic_id = CASE topic_id WHEN 'cryptography' THEN "
            "'linux-basics' ELSE 'cryptography' END WHERE id = %s",
            (pick[2],),
        ),
        ("UPDATE hag_entries SET embedding = %s WHERE id = %s", (Vector(near), pick[3])),
        (
            "UPDATE hag_entries SET visibility_scope = CASE visibility_scope WHEN 'public' THEN "
            "'student:ada' ELSE visibility_scope END WHERE id = %s",
            (pick[4],),
        ),
        ("UPDATE hag_entries SET success_count = success_count + 1 WHERE id = %s", (pick[5],)),
    ]
    for sql, args in statements[: 2 + round_ % 5]:
        db.execute(sql, args)
    if round_ % 3 == 0:
        db.execute("DELETE FROM hag_entries WHERE id = %s", (pick[5],))
    f.entry(
        db,
        scope="tutor" if round_ % 2 else "public",
        maturity="proven",
        confidence=float(rng.uniform(0.2, 1)),
        embedding=near,
    )
    db.commit()


def assert_held_rows_are_the_sets(db: Any, which: tuple[Any, ...]) -> None:
    """The ids, tiers and vectors the held set answers from are the set's rows now."""
    topic, scopes, _ = which
    key = key_of(db, which)
    with residents._lock:
        kept = residents._sets[key]
    live = np.ones(len(kept.tiers), bool)
    live[kept.left] = False
    mine = {
        kept.ids[i].tobytes(): (int(kept.tiers[i]), kept.row(i).tobytes())
        for i in np.flatnonzero(live)
    }
    db.rollback()
    theirs = {
        r["id"]: (r["tier"], residents_row(r["vector"]))
        for r in db.execute(
            store.query("retrieval", "resident_rows"), key.params(), binary=True
        ).fetchall()
        if r["id"] is not None
    }
    assert mine == theirs


def residents_row(vector: bytes) -> bytes:
    dim = (len(vector) - 4) // 2
    return np.frombuffer(vector, ">f2", dim, 4).astype(np.float32).tobytes()


def test_a_writer_running_when_the_set_was_read_is_followed_when_it_commits(
    db, dials, held, database_url
):
    """A transaction that had written the topic but not committed when the set was read is
    not in the set's rows; once it commits the next read applies its rows (the snapshot's
    in-progress writers are changes since it), and answers as the seed's query does."""
    rng = np.random.default_rng(186)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    with psycopg.connect(database_url) as writer:
        hdb.configure_connection(writer)
        writer.execute(
            "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, "
            "confidence, instruction, embedding) VALUES ('cryptography', 'x', 'public', "
            "'proven', 0.95, 'Use it.', %s)",
            (Vector(q),),
        )
        warm(db, q)
        assert read(db, q) == "resident"
        writer.commit()
    assert read(db, q) == "resident-followed"  # and (inside) the new row is first


def test_a_fold_since_the_set_was_read_sends_it_back_to_a_full_read(db, dials, held):
    """The nightly fold's row names no rows: a set read before it is read again at its next
    change (the changes since it do not say which rows), and follows again after that."""
    rng = np.random.default_rng(187)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    warm(db, q)
    assert ann.fold_search_changes() > 0
    assert read(db, q) == "resident"  # the fold keeps the stamp
    top = seed_ids(db, q, *TOPIC)[0]
    db.execute("UPDATE hag_entries SET confidence = 0.05 WHERE id = %s", (top,))
    db.commit()
    assert "resident" not in read(db, q) and not residents.holds(key_of(db))
    warm(db, q)
    db.execute("UPDATE hag_entries SET confidence = 0.99 WHERE id = %s", (top,))
    db.commit()
    assert read(db, q) == "resident-followed"


def test_follow_max_rows_is_the_most_changed_rows_a_set_applies(db, dials, held):
    """A statement changing 80 rows of the topic is followed under a dial of 80, and sends
    the set back to a full read under 79."""
    rng = np.random.default_rng(188)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    eighty = (
        "UPDATE hag_entries SET confidence = confidence * 0.99 WHERE id IN (SELECT id "
        "FROM hag_entry_search WHERE search_set = 'topic' AND topic_id = 'cryptography' "
        "ORDER BY id LIMIT 80)"
    )
    for limit, followed in ((80, True), (79, False)):
        dials(resident_follow_max_rows=limit)
        warm(db, q)
        db.execute(eighty)
        db.commit()
        assert (read(db, q) == "resident-followed") == followed
        assert residents.holds(key_of(db)) == followed


def test_follow_compact_share_is_when_a_followed_set_is_rebuilt(db, dials, held):
    """Rows added or left since the load stay beside the loaded matrix until they pass
    resident_follow_compact_share of the set; then the set is one matrix again."""
    rng = np.random.default_rng(189)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))

    def after_a_new_row() -> tuple[int, int]:
        warm(db, q)
        f.entry(db, maturity="proven", confidence=0.9, embedding=q)
        db.commit()
        assert read(db, q) == "resident-followed"
        with residents._lock:
            kept = residents._sets[key_of(db)]
        return len(kept.vectors), len(kept.tiers)

    dials(resident_follow_compact_share=1.0)
    base, rows = after_a_new_row()
    assert rows == base + 1  # the new row beside the loaded ones
    dials(resident_follow_compact_share=0.0)
    base, rows = after_a_new_row()
    assert rows == base  # rebuilt: one matrix


def test_each_change_row_names_the_rows_it_changed(db):
    """The copy's trigger lists, per set and statement, the ids it deleted or added there."""
    a = f.entry(db, confidence=0.8)
    b = f.entry(db, scope="tutor", confidence=0.8)
    db.commit()
    db.execute("UPDATE hag_entries SET confidence = 0.7 WHERE id IN (%s, %s)", (a, b))
    rows = db.execute(
        "SELECT set_key, ids FROM hag_entry_search_changes "
        "WHERE xid = pg_current_xact_id() ORDER BY set_key"
    ).fetchall()
    assert [(r["set_key"], sorted(set(r["ids"]))) for r in rows] == [
        ("topic:cryptography", [a]),
        ("tutor", [b]),
    ]
    db.execute("DELETE FROM hag_entries WHERE id = %s", (a,))
    last = db.execute(
        "SELECT ids FROM hag_entry_search_changes WHERE set_key = 'topic:cryptography' "
        "AND xid = pg_current_xact_id() ORDER BY ctid DESC LIMIT 1"
    ).fetchone()
    assert last["ids"] == [a]
    db.rollback()


def test_writers_of_one_topic_do_not_wait_for_each_other(db, database_url):
    """Recording a change appends a row and locks nothing: a second writer of the same
    topic's copy goes ahead while the first has not committed."""
    first_id = f.entry(db, confidence=0.8)
    second_id = f.entry(db, confidence=0.8)
    db.commit()
    recorded = (
        "SELECT count(*) AS n FROM hag_entry_search_changes WHERE set_key = 'topic:cryptography'"
    )
    before = db.execute(recorded).fetchone()["n"]
    db.rollback()
    with (
        psycopg.connect(database_url) as first,
        psycopg.connect(database_url) as second,
    ):
        first.execute("UPDATE hag_entries SET confidence = 0.7 WHERE id = %s", (first_id,))
        second.execute("SET lock_timeout = '2s'")
        second.execute("UPDATE hag_entries SET confidence = 0.6 WHERE id = %s", (second_id,))
        second.commit()
        first.commit()
    total = db.execute(recorded).fetchone()["n"] - before
    assert total == 2  # one row per statement


def test_resident_max_mb_zero_keeps_nothing_in_memory(db, dials, held):
    """At 0 no set is read into memory, and sets held before are let go at the next read."""
    rng = np.random.default_rng(11)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    warm(db, q)
    warm(db, q, TUTOR)
    dials(resident_max_mb=0)
    for _ in range(5):
        assert read(db, q) != "resident"
    residents.wait()
    assert not residents.holds(key_of(db)) and residents.nbytes() == 0
    assert not residents.holds(key_of(db, TUTOR))


def test_a_set_over_the_memory_dial_stays_with_the_copy(db, dials, held):
    """200 rows at 1,536 dimensions take 1.2 MB in memory: refused at 1 MB, held at 2."""
    rng = np.random.default_rng(12)
    for _ in range(200):
        f.entry(db, maturity="proven", confidence=0.9, embedding=unit(rng.standard_normal(f.DIM)))
    db.commit()
    q = unit(rng.standard_normal(f.DIM))
    dials(resident_max_mb=1)
    for _ in range(6):
        read(db, q)
        residents.wait()
    assert not residents.holds(key_of(db)) and residents.nbytes() == 0
    dials(resident_max_mb=2)
    warm(db, q)
    assert residents.nbytes() > 1 << 20


def test_load_after_reads_is_the_dial_and_doubles_after_a_set_changes_unused(db, dials, held):
    """A set is read after resident_load_after_reads reads; one dropped before it served as
    many (here: more rows changed than it follows) waits twice as many the next time."""
    dials(resident_load_after_reads=3, resident_follow_max_rows=50)
    rng = np.random.default_rng(13)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))

    def held_after(reads: int) -> bool:
        for _ in range(reads):
            read(db, q)
        residents.wait()
        return residents.holds(key_of(db))

    assert not held_after(2) and held_after(1)
    db.execute(
        "UPDATE hag_entries SET confidence = confidence * 0.99 WHERE topic_id = 'cryptography'"
    )
    db.commit()
    # the next read finds the set changed before it served a read: dropped, 6 reads needed
    assert not held_after(5) and held_after(1)


def test_the_set_read_more_per_byte_takes_the_memory(db, dials, held, monkeypatch):
    """Two topics of 1.2 MB each under a 2 MB dial: the second takes the memory only once it
    has been read resident_claim_margin times as often as the first, and an old claim fades
    with resident_half_life_seconds."""
    now = [1000.0]
    monkeypatch.setattr(residents, "_clock", lambda: now[0])
    rng = np.random.default_rng(14)
    for topic in ("cryptography", "linux-basics"):
        for _ in range(200):
            v = unit(rng.standard_normal(f.DIM))
            f.entry(db, topic_id=topic, maturity="proven", confidence=0.9, embedding=v)
    db.commit()
    q = unit(rng.standard_normal(f.DIM))
    linux = ("linux-basics", ("public",), 5)
    dials(resident_max_mb=2, resident_half_life_seconds=600)

    def read_linux(times: int) -> None:
        for _ in range(times):
            read(db, q, linux)
            residents.wait()

    warm(db, q)  # two reads through the copy
    for _ in range(10):
        assert read(db, q) == "resident"  # cryptography: 12 reads
    read_linux(20)  # 20 < 12 x 2
    assert residents.holds(key_of(db)) and not residents.holds(key_of(db, linux))
    dials(resident_claim_margin=1.0)
    read_linux(2)  # 22 > 12 x 1
    assert residents.holds(key_of(db, linux)) and not residents.holds(key_of(db))

    residents.clear()
    dials(resident_claim_margin=2.0)
    warm(db, q)
    for _ in range(10):
        read(db, q)
    now[0] += 5 * 600  # cryptography's 12 reads now count as 0.375
    read_linux(2)  # 2 > 0.375 x 2
    assert residents.holds(key_of(db, linux)) and not residents.holds(key_of(db))


def test_a_callers_connection_never_uses_or_fills_resident_sets(db, held):
    rng = np.random.default_rng(15)
    clustered_memory(db, rng)
    q = unit(rng.standard_normal(f.DIM))
    current = settings.load(db)
    for _ in range(4):
        _, report = store.semantic_pass(db, "pass", q, *TOPIC[:2], 5, current, False, shared=False)
        assert report.path != "resident"
    residents.wait()
    assert residents.nbytes() == 0
    hdb.close_read_pool()


def test_index_answers_count_only_for_a_set_small_enough_to_answer_before_the_index(
    db, dials, held
):
    """Over resident_before_index_max_mb, tutor passes the HNSW index answers ('candidates')
    never load the set, while queries near nothing (exact) do and are then answered from
    memory after the contrast sample sent them to the exact answer. Within it, once a read
    has shown the set's size, the index's answers count too and the held set answers
    before the index is tried."""
    from hag import retrieval

    flat = tutor_rows_near_and_far(db)
    # 40 rows x 1,536 float32 = 0.25 MB: over a 0 MB dial, within the default 16
    dials(exact_scan_max_rows=0, retrieval_cache_ttl_seconds=0, resident_before_index_max_mb=0)

    def tutor(vector: np.ndarray) -> str:
        result = retrieval.retrieve_with_vector("cryptography", "ada", vector)
        residents.wait()
        got = [a.entry_id for a in result.tutor_advisories]
        assert got == seed_ids(db, vector, None, ("tutor",), settings.load(db).tutor_match_count)
        return next(p.path for p in result.passes if p.name == "tutor")

    assert {tutor(f.QUERY) for _ in range(4)} == {"candidates"}
    assert not residents.holds(key_of(db, TUTOR))
    paths = [tutor(flat) for _ in range(4)]  # the topic's set may take the loader first
    assert paths[0].startswith("exact-low-contrast-sampled, compact")  # -widened: ties
    assert paths[-1].startswith("exact-low-contrast-sampled, resident")
    assert tutor(f.QUERY) == "candidates"  # held, but over the dial: the index first

    dials(resident_before_index_max_mb=16)
    assert tutor(f.QUERY) == "resident" and tutor(flat).startswith("resident")  # no walk
    dials(resident_follow_max_rows=0)  # a change drops the set
    db.execute("UPDATE hag_entries SET confidence = 0.81 WHERE visibility_scope = 'tutor'")
    db.commit()
    paths = [tutor(f.QUERY) for _ in range(8)]  # dropped; the index's answers count now
    assert paths[0] == "candidates" and paths[-1] == "resident"


def test_an_empty_set_is_held_and_its_first_row_is_seen(db, dials, held):
    """A topic with no eligible row answers nothing from memory, until a row arrives."""
    f.entry(db, confidence=0.1)  # the topic exists; its only row is below every floor
    db.commit()
    warm(db, f.QUERY)
    assert read(db, f.QUERY) == "resident" and residents.nbytes() == 0
    f.entry(db, confidence=0.9, embedding=f.vec(0.8))
    db.commit()
    # and, checked inside, the new row is the answer
    assert read(db, f.QUERY) == "resident-followed" and residents.nbytes() > 0


def test_migration_095_carries_a_populated_memory_over(scratch_db, tmp_path):
    """A memory (with its search copy) populated before 095 keeps its copy; after 095 a set
    read into memory answers as the seed's query does, and the next write to it is seen."""
    from hag.storage import migrate
    from tests.fix_db import migrate_up_to

    migrate_up_to(scratch_db, tmp_path, 95)
    scratch_db.commit()
    hdb.configure_connection(scratch_db)
    scratch_db.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('t', 'T')")
    rng = np.random.default_rng(95)
    for i in range(30):
        scratch_db.execute(
            "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, "
            "confidence, instruction, embedding) VALUES ('t', %s, 'public', 'proven', 0.9, "
            "'Advice.', %s)",
            (f"c{i}", Vector(rng.standard_normal(8).astype(np.float32))),
        )
    scratch_db.commit()
    assert scratch_db.execute("SELECT count(*) AS n FROM hag_entry_search").fetchone()["n"] == 30

    assert migrate.migrate(scratch_db, 8)[0].startswith("095_")
    scratch_db.commit()
    own = Residents()
    current = settings.load(scratch_db)
    params = store.filters(current)
    key = filter_key("topic", "t", ("public",), params)
    assert own.load(scratch_db, key, current)
    q = unit(rng.standard_normal(8))

    def top(conn: Any) -> list:
        return [
            r["id"]
            for r in conn.execute(
                "SELECT id FROM match_hag_entries(%s, 't', ARRAY['public'], p_match_count => 5)",
                (Vector(q),),
            ).fetchall()
        ]

    rows, path = own.answer(scratch_db, key, q, 5, current) or ([], "")
    assert path == "resident" and [r["id"] for r in rows] == top(scratch_db)
    scratch_db.execute(
        "UPDATE hag_entries SET embedding = %s WHERE concept_slug = 'c7'", (Vector(q),)
    )
    scratch_db.commit()
    rows, path = own.answer(scratch_db, key, q, 5, current) or ([], "")
    assert path == "resident-followed" and [r["id"] for r in rows] == top(scratch_db)
    scratch_db.rollback()


def test_a_read_begun_before_a_database_change_keeps_the_sets_loaded_since():
    """Two reads meet another database: the first drops every set (they were the old one's)
    and sets are loaded again; the second, holding a set from before, finds its key now
    holds another and drops nothing: the new sets are the new database's."""
    from types import SimpleNamespace

    sets = Residents()
    key = ("topic", "cryptography")
    stale, fresh = SimpleNamespace(identity="old"), SimpleNamespace(identity="new")
    sets._sets[key] = fresh
    sets._forget_database("new", key, stale)
    assert sets._sets == {key: fresh}
    sets._forget_database("newer", key, fresh)
    assert sets._sets == {}
