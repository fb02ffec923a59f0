"""The half-precision search copy (migration 080): kept in step, carried over, exact answers."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector import Vector

from hag import retrieval, settings
from hag.retrieval import store
from hag.storage import db as hdb
from hag.storage import migrate
from tests import factories as f
from tests.fix_db import migrate_up_to
from tests.fix_retrieval import clustered_memory, tutor_rows_near_and_far

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

COPIED = (
    "SELECT search_set, id, topic_id, visibility_scope, maturity, confidence FROM hag_entry_search"
)


def copy_of(conn: Any) -> set[tuple[Any, ...]]:
    return {tuple(r.values()) for r in conn.execute(COPIED).fetchall()}


def expected(rows: dict[Any, tuple[str, str, str, float]]) -> set[tuple[Any, ...]]:
    """What the copy must hold, by the rule written out here independently of the SQL."""
    out = set()
    for entry_id, (topic, scope, maturity, confidence) in rows.items():
        if maturity == "archived" or scope == "visual" or scope.startswith("student:"):
            continue
        out.add(
            ("tutor" if scope == "tutor" else "topic", entry_id, topic, scope, maturity, confidence)
        )
    return out


def _passes_equal_the_seed(db, q32, current) -> list[str]:
    """The topic and tutor passes for `q32` return the seed's exact top rows (asserted);
    the paths the passes took."""
    paths = []
    for topic, scopes, count in (("cryptography", ["public"], 5), (None, ["tutor"], 3)):
        rows, report = store.semantic_pass(
            db, "pass", q32, topic, scopes, count, current, False, shared=False
        )
        seed = db.execute(
            "SELECT id FROM match_hag_entries(%s, %s, %s, p_match_count => %s)",
            (Vector(q32), topic, scopes, count),
        ).fetchall()
        assert [r["id"] for r in rows] == [r["id"] for r in seed]
        paths.append(report.path)
    return paths


def test_the_copy_follows_every_write_to_hag_entries(db):
    """Inserts, searched-column updates, moves, deletes, bulk-loader writes and TRUNCATE."""
    rows: dict[Any, tuple[str, str, str, float]] = {}
    for topic, scope, maturity in [
        ("cryptography", "public", "pattern"),
        ("cryptography", "tutor", "proven"),
        ("linux-basics", "public", "candidate"),
        ("linux-basics", "student:ada", "pattern"),
        ("cryptography", "visual", "pattern"),
        ("cryptography", "public", "archived"),
    ]:
        entry_id = f.entry(db, topic_id=topic, scope=scope, maturity=maturity, confidence=0.8)
        rows[entry_id] = (topic, scope, maturity, 0.8)
    db.commit()
    assert copy_of(db) == expected(rows) and len(expected(rows)) == 3
    public, tutor, linux, student, visual, archived = list(rows)

    db.execute("UPDATE hag_entries SET confidence = 0.55 WHERE id = %s", (public,))
    rows[public] = (*rows[public][:3], 0.55)
    db.execute("UPDATE hag_entries SET visibility_scope = 'public' WHERE id = %s", (tutor,))
    rows[tutor] = (rows[tutor][0], "public", *rows[tutor][2:])
    db.execute("UPDATE hag_entries SET maturity = 'pattern' WHERE id = %s", (archived,))
    rows[archived] = (*rows[archived][:2], "pattern", rows[archived][3])
    db.execute("UPDATE hag_entries SET maturity = 'archived' WHERE id = %s", (linux,))
    rows[linux] = (*rows[linux][:2], "archived", rows[linux][3])
    db.execute("UPDATE hag_entries SET visibility_scope = 'tutor' WHERE id = %s", (student,))
    rows[student] = (rows[student][0], "tutor", *rows[student][2:])
    db.commit()
    assert copy_of(db) == expected(rows)

    # a new vector is copied, normalised, in half precision
    db.execute(
        "UPDATE hag_entries SET embedding = %s WHERE id = %s", (Vector(f.vec(0.6, 3) * 5), public)
    )
    half = db.execute(
        "SELECT embedding::text AS v FROM hag_entry_search WHERE id = %s", (public,)
    ).fetchone()["v"]
    copied = np.array([float(x) for x in half.strip("[]").split(",")])
    assert np.allclose(copied, f.vec(0.6, 3), atol=1e-3)

    # counters and texts leave the copy's rows untouched (no rewrite)
    before = db.execute("SELECT ctid::text AS t FROM hag_entry_search").fetchall()
    db.execute("UPDATE hag_entries SET success_count = success_count + 1, last_matched_at = now()")
    assert db.execute("SELECT ctid::text AS t FROM hag_entry_search").fetchall() == before

    db.execute("DELETE FROM hag_entries WHERE id = %s", (visual,))
    db.execute("DELETE FROM hag_entries WHERE id = %s", (tutor,))
    del rows[visual], rows[tutor]
    db.commit()
    assert copy_of(db) == expected(rows)

    # bulk loaders switch ordinary triggers off; these fire ALWAYS
    db.execute("SET LOCAL session_replication_role = replica")
    extra = f.entry(db, scope="tutor", maturity="proven", confidence=0.9)
    rows[extra] = ("cryptography", "tutor", "proven", 0.9)
    db.commit()
    assert copy_of(db) == expected(rows)

    db.execute("TRUNCATE hag_entries CASCADE")
    db.commit()
    assert copy_of(db) == set()


def test_half_precision_cosine_stays_within_the_dial(db):
    """|cosine through the copy - the seed's cosine| <= compact_similarity_error, any vectors.

    Unit vectors of every kind the bound must cover: isotropic, one dominant component,
    sparse, near-identical and near-opposite pairs, and vectors far from unit length.
    """
    rng = np.random.default_rng(15)
    dim = f.DIM
    base = rng.standard_normal((60, dim))
    spiky = rng.standard_normal((20, dim)) * 1e-3
    spiky[:, 0] = 1.0
    sparse = np.zeros((20, dim))
    sparse[np.arange(20), rng.integers(0, dim, 20)] = 1.0
    sparse[:, 5] += 0.3
    near = base[:20] + rng.standard_normal((20, dim)) * 1e-3
    vectors = np.vstack([base, spiky, sparse, near, -base[:20], base[:20] * 1e4, base[:20] * 1e-4])
    pairs = [
        (vectors[i], vectors[j])
        for i in range(len(vectors))
        for j in (i + 1, i + 20)
        if j < len(vectors)
    ]
    worst = 0.0
    for a, b in pairs:
        row = db.execute(
            "SELECT -(l2_normalize(%(a)s)::halfvec <#> l2_normalize(%(b)s)::halfvec) AS approx, "
            "1 - (%(a)s <=> %(b)s) AS exact",
            {"a": Vector(a.astype(np.float32)), "b": Vector(b.astype(np.float32))},
        ).fetchone()
        worst = max(worst, abs(row["approx"] - row["exact"]))
    assert worst <= settings.defaults()["compact_similarity_error"], worst


def test_passes_through_the_copy_equal_the_seeds_query(db, dials):
    """Topic and tutor passes: the same rows in the same order as match_hag_entries.

    Queries near a centre (hundreds of near-equal rows) and in random directions; with the
    error dial at its maximum nothing can be proven and the seed's query answers ('exact'),
    with 5 candidates the proof often needs the wider try; the rows never change.
    """
    rng = np.random.default_rng(80)
    centres = clustered_memory(db, rng)
    queries = [centres[i % 6] + rng.standard_normal(f.DIM) * 0.5 for i in range(12)]
    queries += [rng.standard_normal(f.DIM) for _ in range(6)]
    # the last set puts the minimum above two floors and a floor above it: each tier's range
    # starts where GREATEST says, as in the seed's filter
    raised = {"retrieval_min_confidence": 0.55, "floor_candidate": 0.8, "floor_proven": 0.35}
    dial_sets = [{}, {"compact_candidates": 5}, {"compact_similarity_error": 2.0}, raised]
    paths: dict[str, set[str]] = {}
    for overrides in dial_sets:
        dials(**{"compact_candidates": 20, "compact_similarity_error": 0.003, **overrides})
        current = settings.load(db)
        for q in queries:
            q32 = (q / np.linalg.norm(q)).astype(np.float32)
            paths.setdefault(str(overrides), set()).update(_passes_equal_the_seed(db, q32, current))
    assert paths["{}"] <= {"compact", "compact-widened"} and "compact" in paths["{}"]
    assert "compact-widened" in paths[str({"compact_candidates": 5})]
    assert paths[str({"compact_similarity_error": 2.0})] == {"exact"}
    assert "compact" in paths[str(raised)]


def test_a_learners_pass_is_read_from_hag_entries(db):
    """Student scopes are not copied: that pass runs the seed's query itself."""
    f.entry(db, scope="student:ada", embedding=f.vec(0.9, 3))
    db.commit()
    assert store.compact_set(None, ["student:ada"]) is None
    assert store.compact_set("cryptography", ["public", "tutor"]) is None
    rows, report = store.semantic_pass(
        db, "student", f.QUERY, None, ["student:ada"], 3, settings.load(db), False, shared=False
    )
    assert report.path == "exact" and len(rows) == 1


def test_migration_080_carries_an_existing_memory_over(scratch_db, tmp_path):
    """A memory populated before 080 is copied by it, and retrieval reads it right after."""
    migrate_up_to(scratch_db, tmp_path, 80)
    scratch_db.commit()
    hdb.configure_connection(scratch_db)  # the vector type exists now
    scratch_db.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('t', 'T')")
    rows: dict[Any, tuple[str, str, str, float]] = {}
    rng = np.random.default_rng(8)
    for i, (scope, maturity) in enumerate(
        [
            ("public", "pattern"),
            ("tutor", "proven"),
            ("student:ada", "pattern"),
            ("visual", "pattern"),
            ("public", "archived"),
            ("public", "candidate"),
        ]
        * 5
    ):
        v = rng.standard_normal(8) * 3
        entry_id = scratch_db.execute(
            "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, "
            "confidence, instruction, embedding) VALUES ('t', %s, %s, %s, 0.9, 'Advice.', %s) "
            "RETURNING id",
            (f"c{i}", scope, maturity, Vector(v.astype(np.float32))),
        ).fetchone()["id"]
        rows[entry_id] = ("t", scope, maturity, 0.9)
    scratch_db.commit()
    assert scratch_db.execute("SELECT to_regclass('hag_entry_search') AS t").fetchone()["t"] is None

    applied = migrate.migrate(scratch_db, 8)
    assert applied[0].startswith("080_")
    assert copy_of(scratch_db) == expected(rows) and len(expected(rows)) == 15
    pairs = scratch_db.execute(
        "SELECT c.embedding::text AS half, e.embedding::text AS full_ "
        "FROM hag_entry_search c JOIN hag_entries e USING (id)"
    ).fetchall()
    for p in pairs:
        half, full = (
            np.array([float(x) for x in p[k].strip("[]").split(",")]) for k in ("half", "full_")
        )
        assert np.allclose(half, full / np.linalg.norm(full), atol=1e-3)
    scratch_db.rollback()


def test_retrieve_reports_the_copy_path(db, dials):
    """A whole retrieve over the copy renders the same topic block as the seed's order."""
    f.entry(db, embedding=f.vec(0.9, 3), instruction="Primes come first.")
    f.entry(db, embedding=f.vec(0.2, 4), instruction="Then the modulus.")
    db.commit()
    dials(retrieval_cache_ttl_seconds=0)
    result = retrieval.retrieve_with_vector("cryptography", "ada", f.QUERY)
    assert [a.instruction for a in result.topic_advisories] == [
        "Primes come first.",
        "Then the modulus.",
    ]
    assert next(p.path for p in result.passes if p.name == "topic-semantic") == "compact"


def test_a_query_the_sample_finds_near_nothing_skips_the_walk(db, dials):
    """With the contrast sample on, a query near nothing goes straight to the exact answer.

    Same rows either way; with the sample off (0) the walk runs first and is turned away by
    its own contrast test, as before the sample existed.
    """
    flat = tutor_rows_near_and_far(db)
    seen = {}
    for rows in (2000, 0):
        dials(exact_scan_max_rows=0, retrieval_cache_ttl_seconds=0, ann_contrast_sample_rows=rows)
        for name, vector in (("near", f.QUERY), ("nothing", flat)):
            retrieval.clear_caches()
            result = retrieval.retrieve_with_vector("cryptography", "ada", vector)
            path = next(p.path for p in result.passes if p.name == "tutor")
            seen[(rows, name)] = (path, [a.entry_id for a in result.tutor_advisories])
    assert seen[(2000, "near")][0] == seen[(0, "near")][0] == "candidates"
    assert seen[(2000, "nothing")][0].split(", ")[0] == "exact-low-contrast-sampled"
    assert seen[(0, "nothing")][0].split(", ")[0] == "exact-low-contrast"
    for name in ("near", "nothing"):
        assert seen[(2000, name)][1] == seen[(0, name)][1]
        exact = db.execute(
            "SELECT id FROM match_hag_entries(%s, NULL, ARRAY['tutor'])",
            (Vector(f.QUERY if name == "near" else flat),),
        ).fetchall()
        assert seen[(0, name)][1] == [r["id"] for r in exact]


KEY = "topic_id, visibility_scope, maturity, confidence"


def partitions_with_rows(db: Any) -> list[str]:
    return [
        r["p"]
        for r in db.execute(
            "SELECT DISTINCT tableoid::regclass::text AS p FROM hag_entry_search ORDER BY 1"
        ).fetchall()
    ]


def test_clustering_the_copy_orders_each_partition_and_changes_no_answer(db, dials):
    """The nightly CLUSTER: rows unchanged, each partition in its read order, answers the seed's.

    Rows are written topic by topic alternately, so both topics and every maturity are
    interleaved on the pages before; after, reading a partition in page order gives its rows
    sorted by the index key (a topic's eligible rows on consecutive pages; the tutor
    partition by maturity and confidence), and every pass still equals match_hag_entries.
    """
    from hag.retrieval import ann

    rng = np.random.default_rng(91)
    centres = clustered_memory(db, rng)
    before = db.execute("SELECT *, embedding::text AS v FROM hag_entry_search").fetchall()
    written = db.execute("SELECT maturity, confidence FROM hag_entry_search_tutor ORDER BY ctid")
    unsorted = [tuple(r.values()) for r in written.fetchall()]
    assert unsorted != sorted(unsorted)  # interleaved as written: the check below can fail
    assert ann.cluster_search_copy() == []  # every partition under the default minimum
    dials(search_copy_cluster_min_rows=0)
    db.execute("ANALYZE hag_entry_search")  # row counts as the nightly finds them
    db.commit()
    clustered = ann.cluster_search_copy()
    assert sorted(clustered) == sorted(p.rsplit(".", 1)[-1] for p in partitions_with_rows(db))
    assert "hag_entry_search_tutor" in clustered and len(clustered) >= 2
    after = db.execute("SELECT *, embedding::text AS v FROM hag_entry_search").fetchall()
    as_set = lambda rows: {tuple(str(v) for v in r.values()) for r in rows}  # noqa: E731
    assert as_set(after) == as_set(before) and len(after) == 375  # 500 minus archived

    for part in clustered:
        key = "maturity, confidence" if part == "hag_entry_search_tutor" else KEY
        in_pages = db.execute(f"SELECT {key} FROM {part} ORDER BY ctid").fetchall()
        got = [tuple(r.values()) for r in in_pages]
        assert got == sorted(got), part

    current = settings.load(db)
    for i in range(10):
        q = centres[i % 6] + rng.standard_normal(f.DIM) * (0.5 if i < 6 else 5.0)
        q32 = (q / np.linalg.norm(q)).astype(np.float32)
        assert all(path.startswith("compact") for path in _passes_equal_the_seed(db, q32, current))


def test_clustering_skips_a_partition_a_reader_holds(db, dials, database_url):
    """A partition locked past the timeout is left for the next night (nightly) or refused."""
    from hag.retrieval import ann

    clustered_memory(db, np.random.default_rng(92))
    dials(search_copy_cluster_min_rows=0, search_copy_cluster_lock_timeout_seconds=1)
    db.execute("ANALYZE hag_entry_search")
    db.commit()
    with psycopg.connect(database_url) as reader:
        reader.execute("SELECT count(*) FROM hag_entry_search_tutor").fetchone()  # holds a lock
        done = ann.cluster_search_copy(strict=False)
        assert "hag_entry_search_tutor" not in done and len(done) >= 1
        with pytest.raises(psycopg.errors.LockNotAvailable):
            ann.cluster_search_copy(strict=True)
        reader.rollback()
    assert "hag_entry_search_tutor" in ann.cluster_search_copy(strict=True)


def test_the_nightly_upkeep_clusters_the_copy_after_the_indexes(db, dials):
    """nightly_upkeep (the flow's task, `hag nightly`): topic indexes, then the CLUSTER."""
    from hag.retrieval import ann

    clustered_memory(db, np.random.default_rng(93))
    dials(search_copy_cluster_min_rows=0, topic_exact_scan_max_rows=1_000_000)
    db.execute("ANALYZE hag_entry_search")
    db.commit()
    assert ann.nightly_upkeep() == []  # no topic past the dial: no index
    in_pages = db.execute("SELECT maturity, confidence FROM hag_entry_search_tutor ORDER BY ctid")
    got = [tuple(r.values()) for r in in_pages.fetchall()]
    assert got == sorted(got) and len(got) == 150
