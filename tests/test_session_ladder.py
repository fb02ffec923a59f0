"""The concept ladder and the student-pattern dedup, through session processing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hag import settings
from hag.session.ladder import Catalogue, resolve_all, slugify
from tests import factories as f
from tests.session_builders import payload, run, turn

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)


@pytest.fixture(autouse=True)
def topics(db):
    """The topics the sessions below are about."""
    f.topic(db, "cryptography")
    f.topic(db, "linux")
    db.commit()


def observe(*observations, learner="learner-1", session_id="s1"):
    return payload(session_id, [turn(0, observations=list(observations))], learner=learner)


def entries(db, scope="public"):
    return {
        r["concept_slug"]: r
        for r in db.execute(
            "SELECT * FROM hag_entries WHERE visibility_scope = %s", (scope,)
        ).fetchall()
    }


def test_the_ladder_records_each_step_and_scales_the_initial_confidence(db):
    """exact 1.0 -> 0.5, near 0.8 -> 0.4, minted 0.6 -> 0.3, unanchored 0.25 -> 0.125 (base 0.5)."""
    f.concept(db, "cryptography", "rsa", title="RSA", aliases=["rivest-shamir-adleman"])
    db.commit()
    run(
        db,
        observe(
            {"graph": "topic", "concept": "rsa", "text": "Start RSA from small primes."},
            {
                "graph": "topic",
                "concept": "Rivest Shamir Adleman",
                "text": "Name the three inventors.",
            },
            {"graph": "topic", "concept": "Buffer Overflow", "text": "Show the stack frame first."},
            {"graph": "topic", "concept": "??", "text": "Something the extractor could not name."},
        ),
    )
    rows = db.execute(
        "SELECT concept_slug, concept_match_quality AS q, confidence, maturity, instruction "
        "FROM hag_entries ORDER BY confidence DESC"
    ).fetchall()
    # The alias lands on the same identity as the exact slug (merged; the near step on its
    # own is pinned below).
    assert [(r["concept_slug"], r["q"], r["confidence"]) for r in rows] == [
        ("rsa", 1.0, 0.5),
        ("buffer-overflow", 0.6, pytest.approx(0.3)),
        ("_unanchored_", 0.25, 0.125),
    ]
    assert {r["maturity"] for r in rows} == {"candidate"}
    minted = db.execute(
        "SELECT slug, title, origin FROM hag_concepts WHERE origin = 'minted'"
    ).fetchall()
    assert [(m["slug"], m["title"]) for m in minted] == [("buffer-overflow", "Buffer Overflow")]


def test_a_near_match_by_alias_scales_by_the_near_quality(db):
    """An alias of a canonical concept is step 2: quality 0.8, confidence 0.4."""
    f.concept(db, "cryptography", "rsa", title="RSA", aliases=["rivest-shamir-adleman"])
    db.commit()
    run(
        db,
        observe(
            {"graph": "topic", "concept": "Rivest Shamir Adleman", "text": "Name the inventors."}
        ),
    )
    row = entries(db)["rsa"]
    assert (row["concept_match_quality"], row["confidence"]) == (0.8, 0.4)


def test_a_near_match_by_embedding_needs_the_similarity_dial(db, dials):
    """A name whose embedding is within ladder_near_similarity of a concept's anchors there."""
    from hag.vectors.embeddings import embed_text

    f.concept(
        db,
        "cryptography",
        "hashing",
        title="Hashing",
        embedding=embed_text("one way digest functions"),
    )
    db.commit()
    run(
        db, observe({"graph": "topic", "concept": "one way digest functions", "text": "SHA first."})
    )
    assert entries(db)["hashing"]["concept_match_quality"] == 0.8
    dials(ladder_near_similarity=1.0, ladder_mint_min_chars=100)
    run(
        db,
        observe(
            {
                "graph": "topic",
                "concept": "one way digest functions for passwords",
                "text": "MD5 is broken.",
            },
            session_id="s2",
        ),
    )
    assert "_unanchored_" in entries(db)  # no near match, too long to mint: step 4


def test_minted_slugs_never_become_canonical(db):
    """The same drift name twice lands on the same minted entry, still at minted quality."""
    run(db, observe({"graph": "topic", "concept": "Steganography", "text": "Hide it in pixels."}))
    summary = run(
        db,
        observe({"graph": "topic", "concept": "steganography", "text": "Again."}, session_id="s2"),
    )
    row = entries(db)["steganography"]
    assert row["concept_match_quality"] == 0.6 and summary.entries_merged == 1


def test_short_names_are_not_minted(db):
    """A name shorter than ladder_mint_min_chars (3) is left _unanchored_."""
    run(db, observe({"graph": "topic", "concept": "xo", "text": "Two letters."}))
    assert list(entries(db)) == ["_unanchored_"]


def test_unanchored_rows_never_merge(db):
    """Two unanchored observations of one concept are two rows (no identity to merge on)."""
    run(
        db,
        observe(
            {"graph": "topic", "concept": "!", "text": "One."},
            {"graph": "topic", "concept": "!", "text": "One."},
        ),
    )
    assert db.execute("SELECT count(*) AS n FROM hag_entries").fetchone()["n"] == 2


def test_graphs_get_their_scopes(db):
    """topic -> public, tutor -> tutor, student -> student:<learner>, visual -> visual."""
    run(
        db,
        observe(
            {"graph": "topic", "concept": "rsa", "text": "a."},
            {"graph": "tutor", "concept": "worked examples", "text": "b."},
            {"graph": "student", "concept": "visual learner", "text": "c."},
            {"graph": "visual", "concept": "rsa", "text": "d."},
            {"graph": "visual", "concept": "%", "text": "dropped."},
            learner="ada",
        ),
    )
    scopes = sorted(
        (r["visibility_scope"], r["concept_slug"])
        for r in db.execute("SELECT visibility_scope, concept_slug FROM hag_entries").fetchall()
    )
    assert scopes == [
        ("public", "rsa"),
        ("student:ada", "visual-learner"),
        ("tutor", "worked-examples"),
        ("visual", "rsa"),
    ]


def _at_cosine(base: np.ndarray, cos: float) -> np.ndarray:
    """A unit vector at exactly `cos` from unit vector `base`."""
    other = np.zeros_like(base, dtype=np.float64)
    other[int(np.argmin(np.abs(base)))] = 1.0
    other -= (other @ base) * base
    other /= np.linalg.norm(other)
    return (cos * base + math.sqrt(1 - cos * cos) * other).astype(np.float32)


@pytest.mark.parametrize(("cos", "merged"), [(0.73, True), (0.71, False)])
def test_student_patterns_merge_at_cosine_073_and_not_at_071(db, cos, merged):
    """A new student pattern within 0.72 cosine of the learner's existing one reinforces it."""
    from hag.vectors.embeddings import embed_text

    text = "Builds a physical model before the abstract one."
    base = embed_text(text).astype(np.float64)
    f.entry(
        db,
        topic_id="linux",
        concept_slug="visual-learner-mapping",
        scope="student:ada",
        maturity="candidate",
        confidence=0.5,
        embedding=_at_cosine(base, cos),
    )
    db.commit()
    summary = run(
        db,
        observe(
            {"graph": "student", "concept": "visual model builder", "text": text}, learner="ada"
        ),
    )
    rows = entries(db, "student:ada")
    assert (len(rows) == 1) is merged
    assert (summary.entries_merged, summary.entries_created) == ((1, 0) if merged else (0, 1))


def test_student_dedup_is_per_learner(db):
    """Another learner's identical pattern is not a twin: each learner gets their own row."""
    obs = {"graph": "student", "concept": "visual learner", "text": "Likes diagrams."}
    run(db, observe(obs, learner="ada"), observe(obs, learner="bob", session_id="s2"))
    assert len(entries(db, "student:ada")) == 1 and len(entries(db, "student:bob")) == 1


def test_student_patterns_merge_within_one_session(db):
    """The second of two near-identical traits in one session merges into the first."""
    run(
        db,
        observe(
            {"graph": "student", "concept": "visual learner", "text": "Likes diagrams a lot."},
            {"graph": "student", "concept": "diagram person", "text": "Likes diagrams a lot!"},
            learner="ada",
        ),
    )
    assert len(entries(db, "student:ada")) == 1


def test_resolve_all_embeds_only_names_that_need_it():
    """Lexical hits are not embedded; the rest are embedded once, together."""
    cat = Catalogue.from_rows(
        "t",
        [{"slug": "rsa", "title": "RSA", "aliases": [], "embedding": np.ones(4, dtype=np.float32)}],
    )
    calls = []

    def embed(names):
        calls.append(list(names))
        return np.zeros((len(names), 4), dtype=np.float32)

    out = resolve_all(["rsa", "RSA", "new thing", "new thing"], cat, settings.defaults(), embed)
    assert [r.step for r in out] == ["exact", "near", "minted", "minted"]
    assert calls == [["new thing"]]
    assert slugify("Ünïcode  Names!") == "unicode-names"


def test_an_unanchored_student_observation_never_merges_by_cosine(db):
    """`_unanchored_` has no identity: a nameless trait identical to a pattern is its own row."""
    from hag.vectors.embeddings import embed_text

    text = "Builds a physical model before the abstract one."
    f.entry(
        db,
        topic_id="linux",
        concept_slug="visual-model-builder",
        scope="student:ada",
        maturity="candidate",
        confidence=0.5,
        embedding=embed_text(text),
    )
    db.commit()
    summary = run(db, observe({"graph": "student", "concept": "?", "text": text}, learner="ada"))
    rows = db.execute(
        "SELECT concept_slug FROM hag_entries WHERE visibility_scope = 'student:ada' "
        "ORDER BY concept_slug"
    ).fetchall()
    assert [r["concept_slug"] for r in rows] == ["_unanchored_", "visual-model-builder"]
    assert (summary.entries_merged, summary.entries_created) == (0, 1)


def test_a_named_student_observation_never_merges_into_an_unanchored_pattern(db):
    """A trait at cosine 1.0 to a learner's `_unanchored_` pattern gets its own named row."""
    from hag.vectors.embeddings import embed_text

    text = "Builds a physical model before the abstract one."
    f.entry(
        db,
        topic_id="linux",
        concept_slug="_unanchored_",
        scope="student:ada",
        maturity="candidate",
        confidence=0.5,
        embedding=embed_text(text),
    )
    db.commit()
    summary = run(
        db,
        observe(
            {"graph": "student", "concept": "visual model builder", "text": text},
            {"graph": "student", "concept": "!", "text": text},
            learner="ada",
        ),
    )
    rows = db.execute(
        "SELECT concept_slug FROM hag_entries WHERE visibility_scope = 'student:ada' "
        "ORDER BY concept_slug"
    ).fetchall()
    # the named trait is new; the second, nameless one merges with nothing (not even the first)
    assert [r["concept_slug"] for r in rows] == [
        "_unanchored_",
        "_unanchored_",
        "visual-model-builder",
    ]
    assert (summary.entries_merged, summary.entries_created) == (0, 2)


def test_a_near_match_needs_a_cosine_above_the_dial_not_at_it(dials):
    """The seed's step 2 matches by "embedding similarity above a dial": a name whose nearest
    concept is at exactly `ladder_near_similarity` is minted, just above it is near."""
    import numpy as np

    from hag import settings
    from hag.session.ladder import resolve_all

    class Catalogue:
        embedded_slugs = ("hashing",)

        def __init__(self, cosine):
            self.cosine = cosine

        def lexical(self, name):
            return None

        def nearest(self, vector):
            return "hashing", self.cosine

    dials(ladder_near_similarity=0.85)
    current = settings.current()
    embed = lambda names: np.ones((len(names), 4), dtype=np.float32)  # noqa: E731
    at = resolve_all(["one way digests"], Catalogue(0.85), current, embed)
    above = resolve_all(["one way digests"], Catalogue(0.8500001), current, embed)
    assert (at[0].slug, at[0].step) == ("one-way-digests", "minted")
    assert (above[0].slug, above[0].step) == ("hashing", "near")
