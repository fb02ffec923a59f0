"""The hidden truth the simulated learners live in: a topic's concepts and their prerequisites.

The memory never sees this. It only sees what a tutor would report (decisions, outcomes and
the extractor's noisy struggles); the report then asks how much of this truth it recovered.

For `prerequisite`, as in the schema, an edge (source, target) means *target must be
understood before source*. The simulator also defines a truth for the two edge types the
memory discovers from sequences (SPEC §4 step 2):

- `leads_to` A -> B is true when A is a direct prerequisite of B: the natural next step
  after mastering A is something that builds on it;
- `fallback` A -> B is true when B is a direct prerequisite of A: when a learner fails at A,
  the useful retreat is to something A rests on.

`related` and `supersedes` have no truth here and are not scored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hag.errors import HagError

CRYPTOGRAPHY = "cryptography"


@dataclass(frozen=True)
class Concept:
    slug: str
    title: str
    description: str = ""


# The hidden prerequisite DAG of the demo corpus's Cryptography topic: (concept, prerequisite).
# Most of the authored seed prerequisites are true; three are authored mistakes (listed below,
# absent here) and eleven true ones were never written down, so the memory has something to
# discover and something to unlearn.
CRYPTO_PREREQUISITES: tuple[tuple[str, str], ...] = (
    ("substitution-cipher", "caesar-cipher"),
    ("frequency-analysis", "substitution-cipher"),
    ("one-time-pad", "xor"),
    ("stream-ciphers", "one-time-pad"),
    ("stream-ciphers", "symmetric-encryption"),
    ("stream-ciphers", "xor"),
    ("block-ciphers", "symmetric-encryption"),
    ("aes", "block-ciphers"),
    ("aes", "xor"),
    ("modes-of-operation", "block-ciphers"),
    ("modes-of-operation", "xor"),
    ("public-key-cryptography", "symmetric-encryption"),
    ("public-key-cryptography", "modular-arithmetic"),
    ("diffie-hellman", "modular-arithmetic"),
    ("diffie-hellman", "prime-numbers"),
    ("diffie-hellman", "public-key-cryptography"),
    ("elliptic-curves", "modular-arithmetic"),
    ("message-authentication-codes", "hash-functions"),
    ("digital-signatures", "hash-functions"),
    ("digital-signatures", "public-key-cryptography"),
    ("certificates-and-pki", "digital-signatures"),
    ("tls-handshake", "certificates-and-pki"),
    ("tls-handshake", "diffie-hellman"),
    ("tls-handshake", "message-authentication-codes"),
    ("key-management", "symmetric-encryption"),
    ("password-hashing", "hash-functions"),
    ("prime-numbers", "modular-arithmetic"),
    # true, never authored (some exist in the corpus as weak learned or enriched edges)
    ("rsa", "modular-arithmetic"),
    ("rsa", "prime-numbers"),
    ("rsa", "public-key-cryptography"),
    ("hashing-for-integrity", "hash-functions"),
    ("one-time-pad", "entropy-and-randomness"),
    ("key-management", "entropy-and-randomness"),
    ("password-hashing", "entropy-and-randomness"),
    ("certificates-and-pki", "public-key-cryptography"),
    ("elliptic-curves", "prime-numbers"),
    ("elliptic-curves", "public-key-cryptography"),
    ("tls-handshake", "symmetric-encryption"),
)

# Authored seed prerequisites that the hidden truth contradicts (for the report's narrative).
CRYPTO_AUTHORED_MISTAKES: tuple[tuple[str, str], ...] = (
    ("symmetric-encryption", "caesar-cipher"),
    ("elliptic-curves", "diffie-hellman"),
    ("message-authentication-codes", "symmetric-encryption"),
)


@dataclass
class World:
    """A topic's concepts and the hidden prerequisite DAG over them."""

    topic_id: str
    concepts: dict[str, Concept]
    prerequisites: frozenset[tuple[str, str]]
    _prereqs_of: dict[str, tuple[str, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for source, target in self.prerequisites:
            for slug in (source, target):
                if slug not in self.concepts:
                    raise HagError(
                        f"truth names {slug!r}, which is not a concept of {self.topic_id}"
                    )
            if source == target:
                raise HagError(f"truth has a self-loop on {source!r}")
        self._prereqs_of = {
            c: tuple(sorted(t for s, t in self.prerequisites if s == c)) for c in self.concepts
        }
        self.depth()  # raises on a cycle

    @property
    def slugs(self) -> tuple[str, ...]:
        return tuple(sorted(self.concepts))

    def prerequisites_of(self, slug: str) -> tuple[str, ...]:
        """The direct prerequisites of a concept, sorted (stable for a seeded generator)."""
        return self._prereqs_of.get(slug, ())

    def leads_to_truth(self) -> frozenset[tuple[str, str]]:
        """`leads_to` A -> B is true when A is a direct prerequisite of B."""
        return frozenset((t, s) for s, t in self.prerequisites)

    def fallback_truth(self) -> frozenset[tuple[str, str]]:
        """`fallback` A -> B is true when B is a direct prerequisite of A."""
        return frozenset(self.prerequisites)

    def truth_for(self, edge_type: str) -> frozenset[tuple[str, str]] | None:
        return {
            "prerequisite": self.prerequisites,
            "leads_to": self.leads_to_truth(),
            "fallback": self.fallback_truth(),
        }.get(edge_type)

    def depth(self) -> dict[str, int]:
        """Longest chain of prerequisites below each concept (0 = needs nothing)."""
        depth: dict[str, int] = {}
        visiting: set[str] = set()

        def visit(slug: str) -> int:
            if slug in depth:
                return depth[slug]
            if slug in visiting:
                raise HagError(f"the truth has a prerequisite cycle through {slug!r}")
            visiting.add(slug)
            d = 1 + max((visit(p) for p in self._prereqs_of[slug]), default=-1)
            visiting.discard(slug)
            depth[slug] = d
            return d

        for slug in self.slugs:
            visit(slug)
        return depth

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic_id": self.topic_id,
            "concepts": [
                {"slug": c.slug, "title": c.title, "description": c.description}
                for c in sorted(self.concepts.values(), key=lambda c: c.slug)
            ],
            "prerequisite": sorted([list(p) for p in self.prerequisites]),
            "leads_to": sorted([list(p) for p in self.leads_to_truth()]),
            "fallback": sorted([list(p) for p in self.fallback_truth()]),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> World:
        concepts = {
            c["slug"]: Concept(c["slug"], c.get("title", c["slug"]), c.get("description", ""))
            for c in data["concepts"]
        }
        return cls(data["topic_id"], concepts, frozenset(tuple(p) for p in data["prerequisite"]))


def load_truth(path: Path) -> World:
    """The world written next to a report (`truth.json`)."""
    return World.from_dict(json.loads(Path(path).read_text()))


def concepts_from_corpus(corpus: Mapping[str, Any], topic_id: str) -> dict[str, Concept]:
    """The topic's catalogue concepts that have a public entry (the ones a tutor can teach)."""
    with_entry = {
        e["concept_slug"]
        for e in corpus.get("entries", [])
        if e.get("topic_id") == topic_id and e.get("visibility_scope") == "public"
    }
    return {
        c["slug"]: Concept(c["slug"], c.get("title", c["slug"]), c.get("description", ""))
        for c in corpus.get("concepts", [])
        if c["topic_id"] == topic_id and c["slug"] in with_entry
    }


def cryptography_world(corpus: Mapping[str, Any] | None = None) -> World:
    """The demo corpus's Cryptography topic with its hidden prerequisite DAG."""
    if corpus is None:
        from hag.operations.corpus import DEMO_CORPUS

        corpus = json.loads(DEMO_CORPUS.read_text())
    concepts = concepts_from_corpus(corpus, CRYPTOGRAPHY)
    return World(CRYPTOGRAPHY, concepts, frozenset(CRYPTO_PREREQUISITES))


def random_world(
    rng: np.random.Generator,
    n_concepts: int,
    *,
    topic_id: str = "simtopic",
    edge_probability: float = 0.3,
    max_prerequisites: int = 3,
) -> World:
    """A random layered DAG over `n_concepts` made-up concepts (for small test worlds).

    Concept i may only depend on concepts with a smaller index, so the graph is acyclic.
    """
    slugs = [f"concept-{i:02d}" for i in range(n_concepts)]
    pairs: set[tuple[str, str]] = set()
    for i in range(1, n_concepts):
        earlier = np.flatnonzero(rng.random(i) < edge_probability)
        if len(earlier) > max_prerequisites:
            earlier = np.sort(rng.choice(earlier, size=max_prerequisites, replace=False))
        pairs.update((slugs[i], slugs[int(j)]) for j in earlier)
    concepts = {
        s: Concept(s, f"Concept {i}", f"Made-up concept number {i} of a simulated topic.")
        for i, s in enumerate(slugs)
    }
    return World(topic_id, concepts, frozenset(pairs))


def world_corpus(
    world: World,
    *,
    confidence: float = 0.8,
    maturity: str = "pattern",
    edges: Iterable[tuple[str, str, str]] = (),
) -> dict[str, Any]:
    """A corpus (SPEC §9 shape) with one public entry per concept of `world` and no edges
    unless given as (source slug, target slug, edge_type); what tests and benchmarks load."""
    from hag.operations.corpus import Entry, derived_entry_id

    entries = []
    ids: dict[str, str] = {}
    for c in sorted(world.concepts.values(), key=lambda c: c.slug):
        e = {
            "topic_id": world.topic_id,
            "concept_slug": c.slug,
            "visibility_scope": "public",
            "maturity": maturity,
            "confidence": confidence,
            "instruction": f"Teach {c.title}: {c.description} Check understanding with one question.",
            "created_at": "2026-11-01T00:00:00Z",
        }
        ids[c.slug] = str(derived_entry_id(Entry.model_validate(e)))
        entries.append({"id": ids[c.slug], **e})
    return {
        "topics": [{"topic_id": world.topic_id, "title": world.topic_id.replace("-", " ").title()}],
        "concepts": [
            {
                "topic_id": world.topic_id,
                "slug": c.slug,
                "title": c.title,
                "description": c.description,
            }
            for c in sorted(world.concepts.values(), key=lambda c: c.slug)
        ],
        "entries": entries,
        "edges": [
            {
                "source_entry_id": ids[s],
                "target_entry_id": ids[t],
                "edge_type": kind,
                "confidence": confidence,
                "source_type": "seed",
            }
            for s, t, kind in edges
        ],
    }


# The sizes a random topic may have (`random_topic`): large enough that recall is measured
# on about as many true pairs as the Cryptography world's, small enough for a demo-size run.
RANDOM_TOPIC_SIZES = range(30, 61)
RANDOM_TOPIC = "randomtopic"


def random_topic(
    seed: int,
    n_concepts: int,
    *,
    authored_share: float = 0.7,
    wrong_authored: int = 3,
) -> tuple[World, dict[str, Any]]:
    """A random world shaped like the Cryptography one, and its starting corpus.

    A few roots, then each concept rests on one to three earlier ones (one plus a binomial
    draw of two at 0.25: about 1.4 per concept, Cryptography's density); the corpus authors
    `authored_share` of the true prerequisites (Cryptography: 27 of 38) and `wrong_authored`
    false ones, each naming a transitive prerequisite or a sibling (never the reverse of a
    true edge, so the authored graph has no two-edge cycle), as Cryptography's three
    mistakes do. The same seed and size give the same world and corpus.
    """
    if n_concepts not in RANDOM_TOPIC_SIZES:
        raise HagError(
            f"a random topic has {RANDOM_TOPIC_SIZES.start}-{RANDOM_TOPIC_SIZES.stop - 1} "
            f"concepts, not {n_concepts}"
        )
    rng = np.random.default_rng([seed, n_concepts])
    slugs = [f"topic-concept-{i:02d}" for i in range(n_concepts)]
    roots = 3
    pairs: set[tuple[str, str]] = set()
    for i in range(roots, n_concepts):
        k = min(i, 1 + int(rng.binomial(2, 0.25)))
        for j in rng.choice(i, size=k, replace=False):
            pairs.add((slugs[i], slugs[int(j)]))
    concepts = {
        s: Concept(s, f"Topic concept {i}", f"Made-up concept number {i} of a random topic.")
        for i, s in enumerate(slugs)
    }
    world = World(RANDOM_TOPIC, concepts, frozenset(pairs))
    truth = sorted(pairs)
    kept = np.sort(rng.permutation(len(truth))[: round(authored_share * len(truth))])
    authored = [truth[int(i)] for i in kept]
    wrong: list[tuple[str, str]] = []
    from hag_lab.simulate.tutor import confusable  # the extractor's own notion of "near"

    reversed_truth = {(t, s) for s, t in pairs}
    for source in rng.permutation(slugs):
        near = sorted(
            t
            for t in confusable(world, str(source))
            if (str(source), t) not in pairs
            and (str(source), t) not in reversed_truth
            and (t, str(source)) not in wrong
        )
        if near and len(wrong) < wrong_authored:
            wrong.append((str(source), near[int(rng.integers(len(near)))]))
    edges = [(s, t, "prerequisite") for s, t in sorted(authored + wrong)]
    return world, world_corpus(world, edges=edges)
