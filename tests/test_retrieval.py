"""The online read on the real database: passes, ranking, scopes, edges, rendering, bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hag import retrieval, settings
from hag.errors import NotFoundError, ValidationError
from hag.retrieval import ann, ranking, store
from tests import factories as f
from tests.fix_retrieval import MESSAGE, put, query_vector, run

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


@pytest.fixture(autouse=True)
def fresh_caches():
    """Every test starts with empty result, embedding and catalogue caches."""
    retrieval.clear_caches()
    yield
    retrieval.clear_caches()


def test_maturity_boost_changes_the_winner_on_the_database(db, dials):
    """Proven at cosine 0.56 outranks a candidate at 0.60; with boost 1.0 it does not."""
    cand = put(db, 0.60, 10, maturity="candidate", confidence=0.8)
    proven = put(db, 0.56, 11, maturity="proven", confidence=0.8)
    db.commit()
    assert [a.entry_id for a in run().topic_advisories] == [proven, cand]
    dials(boost_proven=1.0)
    retrieval.clear_caches()
    assert [a.entry_id for a in run().topic_advisories] == [cand, proven]


def test_concept_bonus_and_confidence_change_the_winner(db):
    """Expected slug x1.30 and a higher confidence each overturn a higher similarity."""
    near = put(db, 0.60, 10, concept_slug="aes", confidence=0.8)
    far = put(db, 0.50, 11, concept_slug="rsa", confidence=0.8)
    db.commit()
    assert run().topic_advisories[0].entry_id == near
    top = run(expected_concepts=["rsa"]).topic_advisories[0]
    assert top.entry_id == far and top.rank_score == pytest.approx(0.546, abs=1e-6)
    db.execute("UPDATE hag_entries SET confidence = 0.5 WHERE id = %s", (near,))
    db.execute("UPDATE hag_entries SET confidence = 0.9 WHERE id = %s", (far,))
    db.commit()
    retrieval.clear_caches()
    first, second = run().topic_advisories
    assert (first.entry_id, second.entry_id) == (far, near)
    assert first.routing_score == pytest.approx(0.45, abs=1e-6)
    assert second.routing_score == pytest.approx(0.30, abs=1e-6)


def test_semantic_wins_a_collision_with_the_concept_pass(db):
    """An entry found by both passes keeps its cosine, not the concept pass's 1.0."""
    both = put(db, 0.70, 10, concept_slug="rsa", maturity="pattern", confidence=0.8)
    only_name = put(db, 0.05, 11, concept_slug="modular-arithmetic", confidence=0.6)
    for i in range(5):  # keep only_name out of the semantic top five
        put(db, 0.40, 20 + i, confidence=0.8)
    db.commit()
    result = run(recent_concepts=[["rsa", "modular-arithmetic"]])
    got = {a.entry_id: a for a in result.topic_advisories}
    assert got[both].source == "semantic"
    assert got[both].similarity == pytest.approx(0.70, abs=1e-6)
    assert got[only_name].source == "concept" and got[only_name].similarity == 1.0
    # concept-anchored: 1.0 x 0.6 x 1.05 = 0.63 beats 0.70 x 0.8 x 1.05 = 0.588
    assert [a.entry_id for a in result.topic_advisories][:2] == [only_name, both]
    assert len(result.topic_advisories) == 5


def test_tutor_and_student_rows_never_displace_the_topic_five(db):
    """Five weak topic rows stay five; strong tutor and student rows are appended apart."""
    weak = [put(db, 0.10 + i / 100, 20 + i) for i in range(6)]
    tutor = put(db, 0.95, 40, scope="tutor", topic_id="linux")
    mine = put(db, 0.95, 41, scope="student:ada", topic_id="linux")
    db.commit()
    result = run()
    assert [a.entry_id for a in result.topic_advisories] == weak[::-1][:5]
    assert [a.entry_id for a in result.tutor_advisories] == [tutor]
    assert [a.entry_id for a in result.student_advisories] == [mine]
    assert result.used_entry_ids == weak[::-1][:5] + [tutor, mine]


def test_a_learner_never_sees_another_learners_patterns_even_through_the_cache(db):
    """Same message, two learners, cache on: each gets only their own patterns."""
    ada = put(db, 0.9, 10, scope="student:ada", instruction="Ada likes diagrams.")
    bob = put(db, 0.9, 11, scope="student:bob", instruction="Bob likes proofs.")
    put(db, 0.5, 12)
    db.commit()
    first = run(learner_id="ada")
    second = run(learner_id="bob")
    again = run(learner_id="ada")
    assert [a.entry_id for a in first.student_advisories] == [ada]
    assert [a.entry_id for a in second.student_advisories] == [bob]
    assert "Ada" not in second.text and "Bob" not in first.text
    assert again.cached and again.student_advisories == first.student_advisories


FIXED_TEXT = """\
## TOPIC MEMORY
- [high] Build RSA with tiny primes first. Then scale up.
- [medium] Practise modular arithmetic on a clock face.
Graph edges (decision tree from top match):
  prereq:   Practise modular arithmetic on a clock face.
  fallback: Use the padlock analogy. (when: student is lost in the maths)
  next:     Sign a message with the private key. (when: encryption works)
Graph edges (decision tree from top match):
  related:  Build RSA with tiny primes first. Then scale up.

## TUTOR MEMORY
- [low] Ask for a prediction before every command.

## STUDENT PATTERNS
(none)
"""


def fixed_corpus(db: Any) -> dict[str, Any]:
    ids: dict[str, Any] = {}
    ids["rsa"] = put(
        db,
        0.8,
        10,
        concept_slug="rsa",
        maturity="proven",
        confidence=0.9,
        instruction="Build RSA with tiny primes first. Then scale up.",
    )
    ids["mod"] = put(
        db,
        0.6,
        11,
        concept_slug="modular-arithmetic",
        confidence=0.7,
        instruction="Practise modular arithmetic on a clock face.",
    )
    ids["pad"] = put(
        db,
        0.1,
        12,
        concept_slug="padlock",
        maturity="candidate",
        confidence=0.65,
        instruction="Use the padlock analogy.",
    )
    ids["sign"] = put(
        db,
        0.05,
        13,
        concept_slug="signatures",
        maturity="candidate",
        confidence=0.5,
        instruction="Sign a message with the private key.",
    )
    ids["old"] = put(
        db,
        0.02,
        14,
        concept_slug="old-rsa",
        maturity="archived",
        confidence=0.9,
        instruction="An archived note.",
    )
    ids["tutor"] = put(
        db,
        0.3,
        15,
        scope="tutor",
        maturity="proven",
        confidence=0.45,
        instruction="Ask for a prediction before every command.",
    )
    e = ids["edges"] = {}
    e["prereq"] = f.edge(db, ids["rsa"], ids["mod"], "prerequisite", confidence=0.9)
    e["fallback"] = f.edge(
        db,
        ids["rsa"],
        ids["pad"],
        "fallback",
        confidence=0.5,
        condition="student is lost in the maths",
    )
    e["next"] = f.edge(
        db, ids["rsa"], ids["sign"], "leads_to", confidence=0.3, condition="encryption works"
    )
    e["related"] = f.edge(db, ids["rsa"], ids["mod"], "related", confidence=0.8)  # 4th: cut
    e["weak"] = f.edge(db, ids["rsa"], ids["sign"], "prerequisite", confidence=0.29)
    e["archived"] = f.edge(db, ids["rsa"], ids["old"], "prerequisite", confidence=0.9)
    e["back"] = f.edge(db, ids["mod"], ids["rsa"], "related", confidence=0.6)
    db.commit()
    return ids


def test_rendered_text_byte_for_byte_for_a_fixed_corpus(db):
    """The three blocks and both decision trees render exactly as written above."""
    fixed_corpus(db)
    result = run(learner_id="nobody")
    assert result.text == FIXED_TEXT


def test_returned_edge_ids_are_exactly_the_rendered_lines(db):
    """Edge ids come back in render order; weak, archived-target and 4th edges are absent."""
    ids = fixed_corpus(db)
    e = ids["edges"]
    result = run(learner_id="nobody")
    assert result.rendered_edge_ids == [e["prereq"], e["fallback"], e["next"], e["back"]]
    assert [line.line for line in result.edges] == [
        line for line in result.text.splitlines() if line.startswith("  ")
    ]


def test_edge_walk_skips_candidate_targets_when_the_dial_is_off(db, dials):
    """edge_include_candidate_targets off: the fallback and next lines (candidates) drop."""
    ids = fixed_corpus(db)
    dials(edge_include_candidate_targets=False)
    result = run(learner_id="nobody")
    assert result.rendered_edge_ids == [
        ids["edges"]["prereq"],
        ids["edges"]["related"],
        ids["edges"]["back"],
    ]


def test_visual_drawing_has_its_own_read_and_never_reaches_the_blocks(db):
    """visual_for returns the drawing; retrieve never renders the visual bucket."""
    drawing = put(db, 0.99, 10, scope="visual", concept_slug="rsa", instruction="DRAW: two keys.")
    put(db, 0.5, 11)
    db.commit()
    assert retrieval.visual_for("rsa").entry_id == drawing
    assert retrieval.visual_for("nothing-here") is None
    assert retrieval.visual_for("'; DROP TABLE hag_entries; --") is None
    assert "DRAW" not in run(recent_concepts=["rsa"]).text


def test_the_read_path_writes_nothing(db):
    """Rows are untouched after retrieval, and the read pool refuses writes outright."""
    fixed_corpus(db)
    entries = "SELECT md5(string_agg(t::text, ',' ORDER BY t.id)) AS h FROM hag_entries t"
    edges = "SELECT md5(string_agg(t::text, ',' ORDER BY t.id)) AS h FROM hag_edges t"
    before = (db.execute(entries).fetchone()["h"], db.execute(edges).fetchone()["h"])
    run(learner_id="nobody", recent_concepts=["rsa"])
    db.rollback()
    assert (db.execute(entries).fetchone()["h"], db.execute(edges).fetchone()["h"]) == before
    import psycopg

    from hag.storage import db as hag_db

    with (
        hag_db.read_pool().connection() as reader,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        reader.execute("DELETE FROM hag_edges")


def test_approximate_path_returns_the_exact_top_five_on_the_demo_corpus(db, dials):
    """With per-topic HNSW indexes, every demo query's top 5 equals the seed's exact query."""
    from hag.operations.corpus import DEMO_CORPUS, load, read
    from hag.vectors.embeddings import get_embedder

    load(db, read(DEMO_CORPUS), get_embedder().dim)
    db.commit()
    # The contrast test at its floor (1.0): the offline embedder's vectors are near no
    # cluster, so at the default every query would take the exact path this test means to
    # compare against.
    dials(
        topic_exact_scan_max_rows=0,
        ann_candidates=5,
        ann_min_contrast=1.0,
        retrieval_cache_ttl_seconds=0,
    )
    built = ann.build_topic_indexes(concurrently=False)
    assert {"cryptography", "linux-basics", "data-structures"} <= set(built)
    retrieval.clear_caches()
    titles = {r["topic_id"]: r["title"] for r in db.execute("SELECT * FROM hag_topics")}
    messages = [
        r["instruction"][:80] for r in db.execute("SELECT instruction FROM hag_entries ORDER BY id")
    ] + ["what is a prime", "ls -la", "?"]
    paths = set()
    try:
        for topic_id, title in titles.items():
            for message in messages:
                result = retrieval.retrieve(topic_id, "ada", message)
                semantic = next(p for p in result.passes if p.name == "topic-semantic")
                paths.add(semantic.path)
                q = query_vector(f"topic:{title} level:none focus:none student:{message}")
                exact = db.execute(
                    "SELECT * FROM match_hag_entries(%s, %s, ARRAY['public'])",
                    (q.astype(np.float32), topic_id),
                ).fetchall()
                expected = ranking.merge_topic(exact, [], [], settings.load(db))
                assert [a.entry_id for a in result.topic_advisories] == [
                    r.row["id"] for r in expected
                ]
        assert paths & {"candidates", "candidates-widened"}, paths
    finally:
        db.rollback()  # DROP INDEX waits for this connection's open snapshot otherwise
        ann.drop_topic_indexes()


def test_a_query_near_no_cluster_is_answered_exactly_and_the_contrast_dial_decides(db, dials):
    """Candidates that stand out are used; a query near nothing goes to the exact query.

    Eight rows at cosine 0.9 from basis 0 and 32 at cosine 0.05: their mean unit vector has
    cosine (8 x 0.9 + 32 x 0.05) / 40 = 0.22 with basis 0, so a query on basis 0 has
    relative contrast (1 - 0.22) / (1 - 0.9) = 7.8 and keeps the approximate answer. A
    query orthogonal to every row has contrast (1 - 0) / (1 - 0) = 1.0, below
    `ann_min_contrast` (1.5), and is answered by the exact query. With the dial at 1.0 the
    same query is not turned away by contrast: it fails the boost proof instead and falls
    back after the wider try.

    The reference is the mean, not zero: in a topic whose 40 rows all sit at cosine 0.50 to
    0.54 from basis 0, the nearest is at 0.539 and the mean near 0.52, so the contrast is
    about 1.04 (exact), where against zero it would read 1 / 0.461 = 2.2.
    """
    f.topic(db, "cryptography")
    f.topic(db, "linux-basics")
    near = [f.entry(db, embedding=f.vec(0.9, 10 + i), confidence=0.8) for i in range(8)]
    for i in range(32):
        f.entry(db, embedding=f.vec(0.05, 20 + i), confidence=0.8)
    for i in range(40):
        f.entry(db, topic_id="linux-basics", embedding=f.vec(0.5 + 0.001 * i, 100 + i))
    db.commit()
    dials(topic_exact_scan_max_rows=0, ann_candidates=20, retrieval_cache_ttl_seconds=0)
    assert ann.build_topic_indexes(concurrently=False) == ["cryptography", "linux-basics"]
    flat = np.zeros(f.DIM, dtype=np.float32)
    flat[200:600] = 1.0
    flat /= np.linalg.norm(flat)

    def semantic(vector: np.ndarray, topic: str = "cryptography") -> tuple[str, list[Any]]:
        retrieval.clear_caches()
        result = retrieval.retrieve_with_vector(topic, "ada", vector)
        path = next(p.path for p in result.passes if p.name == "topic-semantic")
        return path.split(",")[0].removesuffix("-sampled"), [
            a.entry_id for a in result.topic_advisories
        ]

    try:
        path, top = semantic(f.QUERY)
        assert path == "candidates"
        assert set(top) <= set(near)
        exact = db.execute(
            "SELECT id FROM match_hag_entries(%s, 'cryptography', ARRAY['public'])", (f.QUERY,)
        ).fetchall()
        assert top == [r["id"] for r in exact]
        path, top = semantic(flat)
        assert path == "exact-low-contrast"
        exact = db.execute(
            "SELECT id FROM match_hag_entries(%s, 'cryptography', ARRAY['public'])", (flat,)
        ).fetchall()
        assert top == [r["id"] for r in exact]
        assert semantic(f.QUERY, "linux-basics")[0] == "exact-low-contrast"
        dials(ann_min_contrast=1.0)
        assert semantic(flat)[0] == "exact-fallback"
    finally:
        db.rollback()
        ann.drop_topic_indexes()


def test_the_tutor_pass_through_its_index_equals_the_exact_query(db, dials):
    """The tutor scope (every topic) through HNSW: same rows as the seed's query, both ways.

    With `exact_scan_max_rows` 0 the tutor index (migration 010) is used: a query near the
    eight close rows keeps the approximate answer, a query near nothing goes exact; each
    equals match_hag_entries(q, NULL, ARRAY['tutor']) row for row.
    """
    f.topic(db, "cryptography")
    f.topic(db, "linux-basics")
    for i in range(8):
        f.entry(db, scope="tutor", embedding=f.vec(0.9 - 0.01 * i, 10 + i), confidence=0.8)
    for i in range(32):
        topic = "cryptography" if i % 2 else "linux-basics"
        f.entry(db, topic_id=topic, scope="tutor", embedding=f.vec(0.05, 30 + i))
    db.commit()
    db.execute("ANALYZE hag_entries")  # the index's row count, which the read path consults
    db.commit()
    dials(exact_scan_max_rows=0, retrieval_cache_ttl_seconds=0)
    flat = np.zeros(f.DIM, dtype=np.float32)
    flat[200:600] = 1.0
    flat /= np.linalg.norm(flat)
    for vector, path in ((f.QUERY, "candidates"), (flat, "exact-low-contrast")):
        retrieval.clear_caches()
        result = retrieval.retrieve_with_vector("cryptography", "ada", vector)
        taken = next(p.path for p in result.passes if p.name == "tutor")
        assert taken.split(",")[0].removesuffix("-sampled") == path
        exact = db.execute(
            "SELECT id FROM match_hag_entries(%s, NULL, ARRAY['tutor'])", (vector,)
        ).fetchall()
        assert [a.entry_id for a in result.tutor_advisories] == [r["id"] for r in exact]


def test_the_mean_vector_is_kept_for_its_ttl_and_not_kept_from_a_callers_connection(db):
    """Read once per TTL; a caller's connection (maybe uncommitted rows) never fills it."""
    f.topic(db, "cryptography")
    f.entry(db, scope="tutor", embedding=f.vec(1.0, 10))
    catalog = store.Catalog()
    fresh = catalog.mean_vector(db, None, ["tutor"], 3600, store=False)
    assert fresh is not None and fresh[0] == pytest.approx(1.0) and not fresh.flags.writeable
    f.entry(db, scope="tutor", embedding=f.vec(0.0, 11))  # the mean's cosine with q is now 0.5
    kept = catalog.mean_vector(db, None, ["tutor"], 3600)
    assert kept is not None and kept[0] == pytest.approx(0.5)  # the fresh read was not kept
    f.entry(db, scope="tutor", embedding=f.vec(0.0, 12))
    assert catalog.mean_vector(db, None, ["tutor"], 3600) is kept  # within its TTL
    again = catalog.mean_vector(db, None, ["tutor"], 0)  # expired: read again
    assert again is not None and again[0] == pytest.approx(1 / 3)


def test_the_approximate_path_sets_the_ef_search_dial_on_its_connection(db, dials):
    """hnsw.ef_search on the pass's connection is the dial's value."""
    from hag.storage import db as hag_db

    f.topic(db, "cryptography")
    f.entry(db, scope="tutor", embedding=f.vec(0.9, 10))
    db.commit()
    dials(hnsw_ef_search=123)
    with hag_db.connect(autocommit=True) as reader:
        hag_db.configure_reader(reader)
        store.semantic_pass(
            reader, "tutor", f.QUERY, None, ["tutor"], 5, settings.load(reader), True
        )
        assert reader.execute("SHOW hnsw.ef_search").fetchone() == {"hnsw.ef_search": "123"}


def test_a_callers_autocommit_connection_keeps_its_own_search_settings(db, dials, monkeypatch):
    """A caller's autocommit connection (`retrieve(conn=...)`) has the dial's hnsw.ef_search
    for its pass's search, then its own settings back: its later queries keep them."""
    from hag import retrieval as hag_retrieval
    from hag.storage import db as hag_db

    f.topic(db, "cryptography")
    f.entry(db, scope="tutor", embedding=f.vec(0.9, 10))
    db.commit()
    dials(hnsw_ef_search=123)
    own = "SELECT current_setting('hnsw.ef_search') AS ef, current_setting('hnsw.iterative_scan') AS it"
    real = store.use_ef_search
    during: list[str] = []

    def spied(conn, ef_search, **kwargs):
        real(conn, ef_search, **kwargs)
        during.append(conn.execute("SHOW hnsw.ef_search").fetchone()["hnsw.ef_search"])

    monkeypatch.setattr(store, "use_ef_search", spied)
    with hag_db.connect(autocommit=True) as caller:
        caller.execute("SELECT '[1]'::vector")  # pgvector's settings defined in this session
        before = caller.execute(own).fetchone()
        rows = hag_retrieval._start(
            caller,
            lambda c: store.semantic_pass(
                c, "tutor", f.QUERY, None, ["tutor"], 5, settings.load(c), True, shared=False
            ),
        ).result()[0]
        assert during == ["123"] and len(rows) == 1
        assert caller.execute(own).fetchone() == before == {"ef": "40", "it": "off"}


def test_unknown_topic_is_a_clear_error(db):
    """A topic that does not exist raises NotFoundError naming it."""
    f.topic(db, "cryptography")
    db.commit()
    with pytest.raises(NotFoundError, match="unknown topic 'astrology'"):
        retrieval.retrieve("astrology", "ada", "hello")
    with pytest.raises(NotFoundError, match="unknown topic 'astrology'"):
        retrieval.retrieve_with_vector("astrology", "ada", f.QUERY)
    # created a moment later (a corpus load): the next turn finds it, within the cache's life
    f.topic(db, "astrology")
    db.commit()
    assert retrieval.retrieve_with_vector("astrology", "ada", f.QUERY).topic_id == "astrology"


def test_empty_message_is_a_clear_error(db):
    """An empty or blank student message raises ValidationError."""
    with pytest.raises(ValidationError, match="empty"):
        run(student_message="   ")


def test_a_learner_id_with_sql_in_it_is_refused_and_changes_nothing(db):
    """SQL in the learner id is refused before any query; the memory is intact."""
    put(db, 0.5, 10, scope="student:ada")
    db.commit()
    with pytest.raises(ValidationError, match="learner id"):
        run(learner_id="ada' OR '1'='1")
    with pytest.raises(ValidationError, match="learner id"):
        run(learner_id="x'); DELETE FROM hag_entries; --")
    assert db.execute("SELECT count(*) AS n FROM hag_entries").fetchone()["n"] == 1


def test_a_one_megabyte_message_is_cut_and_answered(db):
    """A 1 MB message is cut to 500 characters in a context of at most 2,000."""
    put(db, 0.5, 10)
    db.commit()
    result = run(student_message="RSA " * 262_144, level="x" * 5000)
    assert len(result.context) == 2000
    assert len(result.topic_advisories) == 1


def test_cli_prints_the_blocks_and_json(db):
    """`hag retrieve` prints the blocks; --json the whole result with the edge ids."""
    import json

    from click.testing import CliRunner

    from hag.cli import cli

    ids = fixed_corpus(db)
    runner = CliRunner()
    args = ["retrieve", "--topic", "cryptography", "--learner", "nobody", "--message", MESSAGE]
    out = runner.invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert FIXED_TEXT in out.stdout
    out = runner.invoke(cli, [*args, "--json"])
    data = json.loads(out.stdout)
    assert data["rendered_edge_ids"][0] == str(ids["edges"]["prereq"])
    assert data["topic_advisories"][0]["band"] == "high"


def test_edge_walk_never_renders_another_learners_pattern_or_a_drawing(db):
    """Edges from the top match into bob's pattern or a visual entry never reach ada's prompt."""
    top = put(db, 0.9, 10, concept_slug="rsa", instruction="Start from tiny primes.")
    bobs = put(db, 0.0, 11, scope="student:bob", concept_slug="proofs", instruction="Bob: proofs.")
    drawing = put(db, 0.0, 12, scope="visual", concept_slug="rsa", instruction="DRAW: keys.")
    adas = put(db, 0.0, 13, scope="student:ada", concept_slug="maps", instruction="Ada: maps.")
    tutor = put(db, 0.0, 14, scope="tutor", concept_slug="predict", instruction="Predict first.")
    leak = f.edge(db, top, bobs, "leads_to", confidence=0.9, source_type="learned")
    f.edge(db, top, drawing, "related", confidence=0.9, source_type="learned")
    own = f.edge(db, top, adas, "fallback", confidence=0.9, source_type="learned")
    shared = f.edge(db, top, tutor, "prerequisite", confidence=0.9, source_type="learned")
    db.commit()
    result = run(learner_id="ada")
    assert "Bob" not in result.text and "DRAW" not in result.text
    assert leak not in result.rendered_edge_ids
    assert result.rendered_edge_ids == [shared, own]


def test_a_result_read_inside_a_callers_transaction_is_never_served_from_the_cache(db):
    """A retrieval on a caller's connection sees its uncommitted rows; after rollback, no one does."""
    f.topic(db, "cryptography", "Cryptography")
    db.commit()
    ghost = put(db, 0.9, 10, instruction="Uncommitted advice.")
    inside = run(conn=db)
    assert [a.entry_id for a in inside.topic_advisories] == [ghost]
    db.rollback()
    after = run()
    assert after.topic_advisories == () and "Uncommitted" not in after.text


def test_answers_are_forgotten_with_the_database_they_were_read_from(db, dials, monkeypatch):
    """Closing the read pool (the process moves to another database) empties the result
    cache, and an answer whose reads began before that close is not stored after it."""
    from hag.storage import db as hdb

    dials(retrieval_cache_ttl_seconds=30)
    put(db, 0.9, 10)
    db.commit()
    assert run().cached is False and run().cached is True
    hdb.close_read_pool()
    assert run().cached is False  # read again, from the database the pool now reaches
    real = retrieval._retrieve_uncached

    def closed_meanwhile(*args: Any) -> Any:
        answer = real(*args)
        hdb.close_read_pool()  # another thread moved the process while this turn read
        return answer

    monkeypatch.setattr(retrieval, "_retrieve_uncached", closed_meanwhile)
    retrieval.clear_caches()
    assert run().cached is False
    monkeypatch.setattr(retrieval, "_retrieve_uncached", real)
    assert run().cached is False  # the answer read across the close was not kept
