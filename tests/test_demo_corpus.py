"""The demo corpus (hag/data/demo_corpus.json) keeps the shape it was designed with.

The JSON file is the reviewed source: edit it, and these tests say whether it still has the
seed's shape (29 public Cryptography entries, 97 edges of every type and provenance,
orphans, one `_unanchored_` entry, three topics) and whether, at the demo "now", the sweeps'
own rules (asked in SQL, not restated here) cull and promote exactly the rows it was built
around, with neighbours on both sides of each rule.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from hag import DEMO_CORPUS
from hag.nightly import sweeps
from hag.settings import defaults

DIALS = defaults()  # the rules the corpus is built to exercise, as the registry states them
DEMO_NOW = datetime(2026, 11, 30, tzinfo=UTC)
UNANCHORED = "_unanchored_"
SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
Q_CATALOGUE = float(DIALS["ladder_quality_exact"])
Q_MINTED = float(DIALS["ladder_quality_minted"])
Q_UNANCHORED = float(DIALS["ladder_quality_unanchored"])

# The edges the nightly cull removes at the demo "now" (source, target, type).
CULLABLE = {
    ("modes-of-operation", "caesar-cipher", "fallback"),
    ("caesar-cipher", "xor", "leads_to"),
    ("prime-numbers", "frequency-analysis", "related"),
    ("certificates-and-pki", "modular-arithmetic", "prerequisite"),
}
# Candidates the daily promotion lifts to pattern at the demo "now": (scope, topic, slug).
PROMOTABLE = {
    ("public", "cryptography", "password-hashing"),
    ("public", "cryptography", "elliptic-curves"),
    ("public", "cryptography", "buffer-overflow"),
    ("public", "linux-basics", "shell-scripting"),
    ("public", "linux-basics", "package-management"),
    ("public", "data-structures", "heaps"),
    ("tutor", "cryptography", "surface-misconceptions"),
    ("tutor", "data-structures", "teach-back-check"),
    ("student:ada", "data-structures", "needs-early-win"),
}


@pytest.fixture(scope="module")
def corpus() -> dict:
    return json.loads(DEMO_CORPUS.read_text())


def parse_ts(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def _sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text))


def _acyclic(nodes: set[str], arcs: list[tuple[str, str]]) -> bool:
    out = defaultdict(list)
    indeg = dict.fromkeys(nodes, 0)
    for a, b in arcs:
        out[a].append(b)
        indeg[b] += 1
    todo = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while todo:
        n = todo.pop()
        seen += 1
        for m in out[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                todo.append(m)
    return seen == len(nodes)


def _check_shape(corpus: dict) -> None:
    residue = {c["slug"] for c in corpus["concepts"] if c.get("origin") == "minted"}
    topics = {t["topic_id"] for t in corpus["topics"]}
    concepts = {(c["topic_id"], c["slug"]) for c in corpus["concepts"]}
    entries = corpus["entries"]
    edges = corpus["edges"]
    by_id = {e["id"]: e for e in entries}
    assert len(by_id) == len(entries), "entry ids are unique"
    assert len({e["id"] for e in edges}) == len(edges), "edge ids are unique"
    assert len(concepts) == len(corpus["concepts"]), "concepts are unique per topic"
    assert {"cryptography", "linux-basics", "data-structures"} <= topics
    assert all(c["topic_id"] in topics and SLUG_RE.match(c["slug"]) for c in corpus["concepts"])

    # Entries: shapes, identity, slugs, confidence, qualities, instructions.
    identities: set[tuple[str, ...]] = set()
    for e in entries:
        assert e["topic_id"] in topics
        assert "embedding" not in e
        assert e["maturity"] in ("candidate", "pattern", "proven")
        assert 0 < e["confidence"] < 1
        assert e["concept_slug"] == UNANCHORED or SLUG_RE.match(e["concept_slug"]), e[
            "concept_slug"
        ]
        scope = e["visibility_scope"]
        ident: tuple[str, ...]
        if scope == "visual":
            ident = ("visual", e["concept_slug"])
        elif e["concept_slug"] == UNANCHORED:
            ident = ("unanchored", e["id"])
        elif scope.startswith("student:"):
            ident = ("student", scope, e["concept_slug"])
        else:
            ident = ("topic", e["topic_id"], e["concept_slug"], scope)
        assert ident not in identities, f"duplicate identity {ident}"
        identities.add(ident)
        if scope in ("public", "visual") and e["concept_slug"] != UNANCHORED:
            assert (e["topic_id"], e["concept_slug"]) in concepts, (
                f"no concept row for {e['concept_slug']}"
            )
        text = e["instruction"]
        assert _sentences(text) >= 1 and len(text) <= 700, e["concept_slug"]
        assert parse_ts(e["created_at"]) < DEMO_NOW
        assert parse_ts(e["created_at"]) >= datetime(2026, 1, 1, tzinfo=UTC)
    long_texts = [e for e in entries if len(e["instruction"]) > 400]
    assert len(long_texts) == 3 and all(_sentences(e["instruction"]) >= 4 for e in long_texts)
    assert all(_sentences(e["instruction"]) <= 3 for e in entries if len(e["instruction"]) <= 400)

    crypto_public = [
        e for e in entries if e["topic_id"] == "cryptography" and e["visibility_scope"] == "public"
    ]
    assert len(crypto_public) == 29
    unanchored = [e for e in entries if e["concept_slug"] == UNANCHORED]
    assert len(unanchored) == 1 and unanchored[0]["concept_match_quality"] == Q_UNANCHORED
    assert not any(c[1] == UNANCHORED for c in concepts)
    for e in crypto_public:
        want = (
            Q_MINTED
            if e["concept_slug"] in residue
            else Q_UNANCHORED
            if e["concept_slug"] == UNANCHORED
            else Q_CATALOGUE
        )
        assert e["concept_match_quality"] == want, e["concept_slug"]

    scopes = Counter(e["visibility_scope"] for e in entries)
    assert scopes["tutor"] == 6
    assert scopes["student:ada"] == 3 and scopes["student:grace"] == 3
    assert scopes["visual"] == 4
    for topic in ("linux-basics", "data-structures"):
        n = sum(1 for e in entries if e["topic_id"] == topic and e["visibility_scope"] == "public")
        assert 8 <= n <= 12, topic

    # Visibility floors: some candidates start below their floor.
    floors = {m: DIALS[f"floor_{m}"] for m in ("proven", "pattern", "candidate")}
    global_floor = DIALS["retrieval_min_confidence"]
    invisible = [e for e in entries if e["confidence"] < max(global_floor, floors[e["maturity"]])]
    assert sum(1 for e in invisible if e["maturity"] == "candidate") >= 2

    # Edges: general invariants.
    triples = set()
    for g in edges:
        s, t = g["source_entry_id"], g["target_entry_id"]
        assert s in by_id and t in by_id and s != t
        assert by_id[s]["topic_id"] == by_id[t]["topic_id"]
        assert by_id[s]["visibility_scope"] == by_id[t]["visibility_scope"] == "public"
        key = (s, t, g["edge_type"])
        assert key not in triples, key
        triples.add(key)
        if g["edge_type"] in ("fallback", "leads_to"):
            assert g["condition"] and len(g["condition"]) < 120
        else:
            assert g["condition"] is None
        assert parse_ts(g["created_at"]) >= max(
            parse_ts(by_id[s]["created_at"]), parse_ts(by_id[t]["created_at"])
        )
        assert parse_ts(g["created_at"]) < DEMO_NOW
        assert 0.05 <= g["confidence"] <= 1
        st = g["source_type"]
        if st == "seed":
            assert (
                0.70 <= g["confidence"] <= 0.95
                and g["hit_count"] == 0
                and g["source_session_id"] is None
            )
        elif st == "learned":
            assert 0.05 <= g["confidence"] <= 0.75 and 1 <= g["hit_count"] <= 6
            assert re.fullmatch(r"demo-session-\d{4}", g["source_session_id"])
            assert g["edge_type"] in ("prerequisite", "fallback", "leads_to")
        else:
            assert st == "enriched" and 0.05 <= g["confidence"] <= 0.50
            assert g["hit_count"] == 0 and g["source_session_id"] is None
    assert len({g["source_session_id"] for g in edges if g["source_session_id"]}) == sum(
        1 for g in edges if g["source_type"] == "learned"
    )

    # Prerequisite edges form a DAG, per topic (edges never cross topics).
    prereq = [
        (g["source_entry_id"], g["target_entry_id"])
        for g in edges
        if g["edge_type"] == "prerequisite"
    ]
    assert _acyclic({n for arc in prereq for n in arc}, prereq), "prerequisite edges have a cycle"

    # Cryptography graph.
    crypto_ids = {e["id"] for e in crypto_public}
    crypto_edges = [g for g in edges if g["source_entry_id"] in crypto_ids]
    assert len(crypto_edges) == 97
    types = Counter(g["edge_type"] for g in crypto_edges)
    assert set(types) == {"prerequisite", "fallback", "leads_to", "related", "supersedes"}
    prov = Counter(g["source_type"] for g in crypto_edges)
    assert prov == {"seed": 60, "learned": 25, "enriched": 12}, prov
    touched = {g["source_entry_id"] for g in crypto_edges} | {
        g["target_entry_id"] for g in crypto_edges
    }
    orphans = {
        e["id"]
        for e in crypto_public
        if e["concept_slug"] in residue or e["concept_slug"] == UNANCHORED
    }
    assert len(orphans) == 6 and not (touched & orphans), "orphans and _unanchored_ have no edges"
    assert touched == crypto_ids - orphans and len(touched) == 23, (
        "every canonical entry is connected"
    )

    # Other topics: 10-20 seed/learned edges of mixed types.
    for topic in ("linux-basics", "data-structures"):
        ids = {
            e["id"] for e in entries if e["topic_id"] == topic and e["visibility_scope"] == "public"
        }
        tedges = [g for g in edges if g["source_entry_id"] in ids]
        assert 10 <= len(tedges) <= 20, topic
        assert {g["source_type"] for g in tedges} == {"seed", "learned"}
        assert len({g["edge_type"] for g in tedges}) >= 4


def test_the_demo_corpus_keeps_its_designed_shape(corpus):
    """Identities, slugs, texts, dates, qualities, scopes, edge provenance bounds, an acyclic
    prerequisite graph, the Cryptography graph's counts and its orphans, the other topics."""
    _check_shape(corpus)


def test_rules_near_the_lines_have_neighbours_on_both_sides(corpus):
    """Low non-seed edges too young to cull, and an old edge exactly at the cull threshold."""
    edges = corpus["edges"]
    cutoff = DEMO_NOW - timedelta(days=DIALS["cull_min_age_days"])
    max_conf = DIALS["cull_max_confidence"]
    young = [
        g
        for g in edges
        if g["source_type"] != "seed"
        and g["confidence"] < max_conf
        and parse_ts(g["created_at"]) > cutoff
    ]
    assert len(young) >= 3
    assert any(g["confidence"] == max_conf and parse_ts(g["created_at"]) <= cutoff for g in edges)


def test_at_the_demo_now_the_sweep_rules_cull_and_promote_what_the_corpus_was_built_for(db):
    """Loaded, the corpus gives the SQL rules (sql/functions/060) exactly CULLABLE to cull and
    PROMOTABLE to promote as of 2026-11-30."""
    from hag.operations.corpus import load, read
    from hag.vectors.embeddings import get_embedder

    load(db, read(DEMO_CORPUS), get_embedder().dim)
    params = sweeps.sweep_parameters(sweeps.settings.load(db), DEMO_NOW, uuid.uuid4())
    ids = [r["id"] for r in db.execute(sweeps.query("sweeps", "cull_candidate_ids"), params)]
    culled = db.execute(
        "SELECT s.concept_slug AS s, t.concept_slug AS t, e.edge_type FROM hag_edges e "
        "JOIN hag_entries s ON s.id = e.source_entry_id "
        "JOIN hag_entries t ON t.id = e.target_entry_id WHERE e.id = ANY (%s)",
        (ids,),
    ).fetchall()
    assert {(r["s"], r["t"], r["edge_type"]) for r in culled} == CULLABLE
    promoted = db.execute(
        "SELECT visibility_scope, topic_id, concept_slug FROM hag_entries e "
        "WHERE maturity = 'candidate' AND hag_entry_promotes_to_pattern(e, %(as_of)s, "
        "%(promotion_min_age_days)s, %(promotion_min_confidence)s, %(promotion_max_failures)s)",
        params,
    ).fetchall()
    assert {tuple(r.values()) for r in promoted} == PROMOTABLE
