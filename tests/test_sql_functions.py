"""The RPCs of SPEC §3, exactly as the seed writes them, on the real database.

Each case is built so that a wrong floor, a missing boost or a wrong order gives a different
answer from the one expected here.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from pgvector import Vector

from tests import factories as f

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

MATCH = "SELECT * FROM match_hag_entries(%(q)s, %(topic)s, %(scopes)s, p_min_confidence => %(min)s)"


def _match(db, topic="cryptography", scopes=("public",), min_conf=None):
    rows = db.execute(
        MATCH, {"q": Vector(f.QUERY), "topic": topic, "scopes": list(scopes), "min": min_conf}
    ).fetchall()
    return [r["concept_slug"] for r in rows]


@pytest.fixture
def tiers(db):
    """One entry just above and one just below each maturity floor."""
    specs = [
        ("proven-32", "proven", 0.32),
        ("proven-28", "proven", 0.28),
        ("pattern-42", "pattern", 0.42),
        ("pattern-38", "pattern", 0.38),
        ("candidate-71", "candidate", 0.71),
        ("candidate-69", "candidate", 0.69),
        ("archived-99", "archived", 0.99),
    ]
    for i, (slug, maturity, conf) in enumerate(specs):
        f.entry(
            db,
            concept_slug=slug,
            maturity=maturity,
            confidence=conf,
            embedding=f.vec(0.9 - i * 0.01, axis=i + 1),
        )
    db.commit()


def test_floors_per_maturity_with_no_global_floor(db, tiers):
    """proven ≥ 0.30, pattern ≥ 0.40, candidate ≥ 0.70, archived never (seed floors)."""
    assert sorted(_match(db, min_conf=0.0)) == ["candidate-71", "pattern-42", "proven-32"]


def test_global_floor_from_the_dial_applies_through_greatest(db, tiers):
    """With p_min_confidence NULL the 0.4 dial lifts the proven floor: proven 0.32 drops out."""
    assert sorted(_match(db)) == ["candidate-71", "pattern-42"]


def test_floor_dials_are_read_when_parameters_are_null(db, tiers, dials):
    """Changing floor_candidate in hag_settings changes what the RPC returns."""
    dials(floor_candidate=0.65)
    assert sorted(_match(db)) == ["candidate-69", "candidate-71", "pattern-42"]


def test_the_filter_with_its_ranges_agrees_with_the_seeds_expression(db):
    """hag_entry_visible (seed's filter plus the index-friendly ranges) equals the seed's text.

    Every maturity the schema admits, confidences around each floor, floors above, below and
    equal to the global one, and NULL floors (a NULL must stay NULL, as in the seed's): the
    seed's expression is written out here, not called.
    """
    disagreements = db.execute(
        """
        WITH cases AS (
            SELECT m, c::double precision AS c, g::double precision AS g,
                   fp::double precision AS fp, fa::double precision AS fa,
                   fc::double precision AS fc
            FROM unnest(ARRAY['proven', 'pattern', 'candidate', 'archived']) m,
                 unnest(ARRAY[0, 0.05, 0.29, 0.3, 0.31, 0.39, 0.4, 0.41, 0.69, 0.7, 0.71, 1]) c,
                 unnest(ARRAY[0, 0.3, 0.4, 0.7, NULL]) g,
                 unnest(ARRAY[0.3, 0.5, NULL]) fp, unnest(ARRAY[0.4, 0.2]) fa,
                 unnest(ARRAY[0.7, 0.0]) fc
        )
        SELECT count(*) AS n,
               count(*) FILTER (
                   WHERE hag_entry_visible(m, c, g, fp, fa, fc)
                         IS DISTINCT FROM (m <> 'archived' AND c >= GREATEST(g,
                             CASE m WHEN 'proven' THEN fp WHEN 'pattern' THEN fa
                                    WHEN 'candidate' THEN fc ELSE 1.0 END))
               ) AS differ
        FROM cases
        """
    ).fetchone()
    assert disagreements == {"n": 4 * 12 * 5 * 3 * 2 * 2, "differ": 0}


def test_topic_and_scope_filters(db):
    """Only the given topic (NULL = all) and only the given scopes come back."""
    f.entry(db, topic_id="cryptography", concept_slug="a", embedding=f.vec(0.9, 1))
    f.entry(db, topic_id="linux", concept_slug="b", embedding=f.vec(0.9, 2))
    f.entry(db, topic_id="cryptography", concept_slug="c", scope="tutor", embedding=f.vec(0.9, 3))
    f.entry(
        db, topic_id="cryptography", concept_slug="d", scope="student:ada", embedding=f.vec(0.9, 4)
    )
    db.commit()
    assert _match(db) == ["a"]
    assert _match(db, topic=None, scopes=("tutor",)) == ["c"]
    assert _match(db, topic=None, scopes=("student:ada",)) == ["d"]
    assert _match(db, topic=None, scopes=("student:grace",)) == []
    assert sorted(_match(db, topic=None)) == ["a", "b"]


def test_maturity_boost_orders_the_results(db):
    """proven 0.80×1.1 > candidate 0.85×1.0 > pattern 0.80×1.05 > pattern 0.79×1.05."""
    f.entry(
        db, concept_slug="pattern-80", maturity="pattern", confidence=0.9, embedding=f.vec(0.80, 1)
    )
    f.entry(
        db,
        concept_slug="candidate-85",
        maturity="candidate",
        confidence=0.9,
        embedding=f.vec(0.85, 2),
    )
    f.entry(
        db, concept_slug="proven-80", maturity="proven", confidence=0.9, embedding=f.vec(0.80, 3)
    )
    f.entry(
        db, concept_slug="pattern-79", maturity="pattern", confidence=0.9, embedding=f.vec(0.79, 4)
    )
    db.commit()
    assert _match(db) == ["proven-80", "candidate-85", "pattern-80", "pattern-79"]


def test_similarity_is_cosine_and_limit_is_the_dial(db, dials):
    """similarity = 1 - cosine distance; match_count caps the rows."""
    for i in range(7):
        f.entry(db, concept_slug=f"e{i}", embedding=f.vec(0.9 - 0.1 * i, axis=i + 1))
    db.commit()
    rows = db.execute(
        "SELECT * FROM match_hag_entries(%s, 'cryptography', ARRAY['public'])", (Vector(f.QUERY),)
    ).fetchall()
    assert [r["concept_slug"] for r in rows] == ["e0", "e1", "e2", "e3", "e4"]
    assert [round(r["similarity"], 5) for r in rows] == [0.9, 0.8, 0.7, 0.6, 0.5]
    dials(match_count=2)
    rows = db.execute(
        "SELECT * FROM match_hag_entries(%s, 'cryptography', ARRAY['public'])", (Vector(f.QUERY),)
    ).fetchall()
    assert len(rows) == 2


def test_by_concept_pass_has_similarity_one_and_the_seed_order(db):
    """Similarity 1.0 by fiat; boost × confidence, then last_matched_at DESC NULLS LAST."""
    t = f.NOW
    f.entry(db, concept_slug="rsa", maturity="pattern", confidence=0.80)  # 0.84
    f.entry(db, concept_slug="rsa", maturity="proven", confidence=0.77, scope="tutor")  # 0.847
    f.entry(
        db,
        concept_slug="aes",
        maturity="candidate",
        confidence=0.75,
        last_matched_at=None,
        scope="public",
    )
    f.entry(
        db,
        concept_slug="aes",
        maturity="candidate",
        confidence=0.75,
        scope="tutor",
        last_matched_at=t - timedelta(days=1),
        topic_id="cryptography",
    )
    f.entry(
        db,
        concept_slug="aes",
        maturity="candidate",
        confidence=0.75,
        scope="student:ada",
        last_matched_at=t,
    )
    f.entry(db, concept_slug="xor", maturity="proven", confidence=0.99)  # not asked for
    db.commit()
    rows = db.execute(
        "SELECT * FROM match_hag_entries_by_concept(%s, NULL, %s)",
        (["rsa", "aes"], ["public", "tutor", "student:ada"]),
    ).fetchall()
    assert {r["similarity"] for r in rows} == {1.0}
    assert [(r["concept_slug"], r["visibility_scope"]) for r in rows] == [
        ("rsa", "tutor"),
        ("rsa", "public"),
        ("aes", "student:ada"),
        ("aes", "tutor"),
        ("aes", "public"),
    ]


def test_by_concept_pass_applies_the_same_floors(db):
    """A candidate below 0.70 and an archived row are not returned by name either."""
    f.entry(db, concept_slug="rsa", maturity="candidate", confidence=0.69)
    f.entry(db, concept_slug="rsa", maturity="archived", confidence=0.9, scope="tutor")
    db.commit()
    rows = db.execute(
        "SELECT * FROM match_hag_entries_by_concept(ARRAY['rsa'], NULL, ARRAY['public','tutor'])"
    ).fetchall()
    assert rows == []


@pytest.fixture
def walk(db):
    """An entry with one outgoing edge of every type, plus edges the walk must skip."""
    src = f.entry(db, concept_slug="src")
    t = {
        name: f.entry(db, concept_slug=name, maturity=m)
        for name, m in [
            ("pre", "pattern"),
            ("fb", "proven"),
            ("next", "pattern"),
            ("rel", "pattern"),
            ("sup", "proven"),
            ("pre2", "pattern"),
            ("cand", "candidate"),
            ("arch", "archived"),
            ("weak", "pattern"),
        ]
    }
    f.edge(db, src, t["sup"], "supersedes", confidence=0.99)
    f.edge(db, src, t["rel"], "related", confidence=0.9)
    f.edge(db, src, t["next"], "leads_to", confidence=0.8, condition="after a correct answer")
    f.edge(db, src, t["fb"], "fallback", confidence=0.7, condition="student is stuck")
    f.edge(db, src, t["pre"], "prerequisite", confidence=0.5)
    f.edge(db, src, t["pre2"], "prerequisite", confidence=0.6)
    f.edge(db, src, t["cand"], "leads_to", confidence=0.95)
    f.edge(db, src, t["arch"], "prerequisite", confidence=0.9)
    f.edge(db, src, t["weak"], "prerequisite", confidence=0.29)
    db.commit()
    return src


def _walk(db, src, include=None):
    rows = db.execute(
        "SELECT * FROM traverse_hag_edges(%s, p_include_candidates => %s)", (src, include)
    ).fetchall()
    return [r["target_concept_slug"] for r in rows]


def test_traversal_orders_by_type_then_confidence(db, walk):
    """prerequisite, fallback, leads_to, related, supersedes; confidence desc within a type."""
    assert _walk(db, walk) == ["pre2", "pre", "fb", "cand", "next", "rel", "sup"]


def test_traversal_respects_include_candidates(db, walk, dials):
    """p_include_candidates false drops candidate targets; NULL follows the dial."""
    assert "cand" not in _walk(db, walk, include=False)
    dials(edge_include_candidate_targets=False)
    assert "cand" not in _walk(db, walk)
    dials(edge_include_candidate_targets=True)
    assert "cand" in _walk(db, walk)


@pytest.mark.parametrize("maturity", ["proven", "pattern", "candidate", "archived", "other"])
def test_python_reads_the_tiers_as_sql_defines_them(db, maturity):
    """hag_maturity_tier numbers a maturity as hag.retrieval.tiers.TIERS orders it, and
    hag_maturity_boost gives the boost tiers.maturity_boost gives (three distinct boosts)."""
    from hag import settings
    from hag.retrieval import tiers

    dials = settings.defaults().with_overrides(
        boost_proven=2.5, boost_pattern=1.5, boost_candidate=0.75
    )
    row = db.execute(
        "SELECT hag_maturity_tier(%s) AS tier, hag_maturity_boost(%s, %s, %s, %s) AS boost",
        (maturity, maturity, *tiers.tier_boosts(dials)),
    ).fetchone()
    assert row["boost"] == tiers.maturity_boost(maturity, dials)
    assert row["tier"] == (tiers.TIERS.index(maturity) if maturity in tiers.TIERS else None)
    if row["tier"] is not None:  # what a resident set multiplies its rows of this tier by
        assert tiers.tier_boosts(dials)[row["tier"]] == row["boost"]


def test_traversal_breaks_ties_by_target_concept_not_by_edge_id(db):
    """Edges equal in type and confidence come in their targets' concept order, whatever
    their (random) ids: a replay on a fresh database renders the same lines."""
    src = f.entry(db, concept_slug="src")
    slugs = ["f", "c", "a", "e", "b", "d"]
    for slug in slugs:
        f.edge(db, src, f.entry(db, concept_slug=slug), "related", confidence=0.5)
    db.commit()
    assert _walk(db, src) == sorted(slugs)


def test_the_read_paths_edge_walk_is_traverse_hag_edges(db, walk):
    """retrieval's edge_walk returns the function's edges in the function's order (every
    target here is readable), cut to edge_walk_max_edges_per_entry."""
    from hag import settings
    from hag.retrieval import store
    from hag.storage.visibility import reader

    dials = settings.load(db).with_overrides(edge_walk_max_edges_per_entry=50)
    who = reader("nobody", "cryptography", dials)
    function = [r["edge_id"] for r in db.execute("SELECT * FROM traverse_hag_edges(%s)", (walk,))]
    assert [r["edge_id"] for r in store.edge_walk(db, [walk], dials, who)] == function
    cut = dials.with_overrides(edge_walk_max_edges_per_entry=2)
    assert [r["edge_id"] for r in store.edge_walk(db, [walk], cut, who)] == function[:2]


def test_visual_read_returns_the_drawing(db):
    """get_hag_visual gives the curated drawing for a concept; archived drawings are gone."""
    f.entry(db, concept_slug="aes", scope="visual", instruction="Draw the AES round as four boxes.")
    f.entry(db, concept_slug="rsa", scope="visual", maturity="archived")
    db.commit()
    rows = db.execute("SELECT * FROM get_hag_visual('aes')").fetchall()
    assert [r["instruction"] for r in rows] == ["Draw the AES round as four boxes."]
    assert db.execute("SELECT * FROM get_hag_visual('rsa')").fetchall() == []


def test_a_memory_with_the_old_boost_parameter_name_is_carried_over(private_db):
    """migrate replaces a match function still taking p_boost_other by one taking p_boost_candidate."""
    from hag import SQL_DIR
    from hag.storage import migrate
    from hag.vectors import embeddings

    names = "SELECT proargnames FROM pg_proc WHERE proname = %s"
    for fn, path in (
        ("match_hag_entries", "020_match_hag_entries.sql"),
        ("match_hag_entries_by_concept", "030_match_hag_entries_by_concept.sql"),
    ):
        text = (SQL_DIR / "functions" / path).read_text()
        signature = private_db.execute(
            "SELECT oid::regprocedure::text AS s FROM pg_proc WHERE proname = %s", (fn,)
        ).fetchone()["s"]
        private_db.execute(f"DROP FUNCTION {signature}")
        old = text[text.index("CREATE OR REPLACE FUNCTION") :].replace(
            "p_boost_candidate", "p_boost_other"
        )
        private_db.execute(old)
        assert "p_boost_other" in private_db.execute(names, (fn,)).fetchone()["proargnames"]
    private_db.commit()

    migrate.migrate(private_db, embeddings.get_embedder().dim)

    for fn in ("match_hag_entries", "match_hag_entries_by_concept"):
        found = [r["proargnames"] for r in private_db.execute(names, (fn,)).fetchall()]
        assert len(found) == 1 and "p_boost_candidate" in found[0], found
        assert "p_boost_other" not in found[0]
    row = private_db.execute(
        "SELECT count(*) AS n FROM match_hag_entries_by_concept("
        "ARRAY['x'], 't', ARRAY['public'], p_boost_candidate => 2.0)"
    ).fetchone()
    assert row["n"] == 0


def test_a_memory_with_the_old_floor_parameter_name_is_carried_over(private_db):
    """migrate replaces the tier floor and filter functions still taking p_min_confidence by
    ones taking their dial's name, p_retrieval_min_confidence, and the filter still works."""
    from hag.storage import migrate
    from hag.vectors import embeddings

    names = "SELECT proargnames FROM pg_proc WHERE proname = %s"
    for fn, returns, args in (
        ("hag_entry_retrieval_floor", "double precision", "p_maturity text"),
        ("hag_entry_visible", "boolean", "p_maturity text, p_confidence double precision"),
    ):
        signature = private_db.execute(
            "SELECT oid::regprocedure::text AS s FROM pg_proc WHERE proname = %s", (fn,)
        ).fetchone()["s"]
        private_db.execute(f"DROP FUNCTION {signature}")
        floors = ", ".join(
            f"{p} double precision"
            for p in ("p_min_confidence", "p_floor_proven", "p_floor_pattern", "p_floor_candidate")
        )
        private_db.execute(
            f"CREATE FUNCTION {fn}({args}, {floors}) RETURNS {returns} "
            f"LANGUAGE sql IMMUTABLE AS $$ SELECT NULL::{returns} $$"
        )
        assert "p_min_confidence" in private_db.execute(names, (fn,)).fetchone()["proargnames"]
    private_db.commit()

    migrate.migrate(private_db, embeddings.get_embedder().dim)

    for fn in ("hag_entry_retrieval_floor", "hag_entry_visible"):
        found = [r["proargnames"] for r in private_db.execute(names, (fn,)).fetchall()]
        assert len(found) == 1 and "p_retrieval_min_confidence" in found[0], found
    row = private_db.execute(
        "SELECT hag_entry_visible('proven', 0.45, p_retrieval_min_confidence => 0.5,"
        " p_floor_proven => 0.3, p_floor_pattern => 0.5, p_floor_candidate => 0.6) AS below,"
        " hag_entry_visible('proven', 0.55, 0.5, 0.3, 0.5, 0.6) AS above"
    ).fetchone()
    assert (row["below"], row["above"]) == (False, True)


def test_a_memory_with_the_old_sweep_rule_parameter_names_is_carried_over(private_db):
    """migrate replaces a sweep rule still taking generic parameter names (p_max_confidence,
    p_min_failures) by the one taking its dials' names, callable by those names."""
    from hag.storage import migrate
    from hag.vectors import embeddings

    names = "SELECT proargnames FROM pg_proc WHERE proname = 'hag_entry_sinks_to_archive'"
    signature = private_db.execute(
        "SELECT oid::regprocedure::text AS s FROM pg_proc "
        "WHERE proname = 'hag_entry_sinks_to_archive'"
    ).fetchone()["s"]
    private_db.execute(f"DROP FUNCTION {signature}")
    private_db.execute(
        "CREATE FUNCTION hag_entry_sinks_to_archive(e hag_entries, p_max_confidence double "
        "precision, p_min_failures integer) RETURNS boolean LANGUAGE sql IMMUTABLE AS "
        "$$ SELECT NULL::boolean $$"
    )
    private_db.commit()

    migrate.migrate(private_db, embeddings.get_embedder().dim)

    found = [r["proargnames"] for r in private_db.execute(names).fetchall()]
    assert found == [["e", "p_archive_max_confidence", "p_archive_min_failures"]]
    row = private_db.execute(
        "SELECT hag_entry_sinks_to_archive(e, p_archive_max_confidence => 0.5,"
        " p_archive_min_failures => 2) AS sinks"
        " FROM (SELECT (NULL::hag_entries).*) x, LATERAL (SELECT x::hag_entries AS e) y"
    ).fetchone()
    assert row["sinks"] is None  # a row of NULLs decides nothing; the named call resolves
