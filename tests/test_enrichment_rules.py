"""Enrichment rules without a database: reply parsing, validation, prompt bounds, offline proposer."""

from __future__ import annotations

import json
import uuid

import pytest

from hag import settings
from hag.enrichment.prompt import Candidate, Orphan, build_prompt
from hag.enrichment.proposers import OfflineProposer
from hag.enrichment.validate import (
    GraphFacts,
    Proposal,
    ReplyError,
    SlugFacts,
    decide,
    normalise,
    parse_reply,
)

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

ORPHAN = Orphan(
    uuid.UUID(int=1),
    "cryptography",
    "Cryptography",
    "rsa",
    "public",
    "RSA",
    "Public-key encryption built on modular exponentiation.",
    "Build RSA with tiny numbers.",
)
MOD, PKC, PRIME = uuid.UUID(int=2), uuid.UUID(int=3), uuid.UUID(int=4)
ALLOWED = ["prerequisite", "related"]


def facts(edges=(), reach=()):
    slugs = {
        "modular-arithmetic": SlugFacts("modular-arithmetic", MOD, "proven", True, ()),
        "public-key-cryptography": SlugFacts("public-key-cryptography", PKC, "pattern", True, ()),
        "prime-numbers": SlugFacts("prime-numbers", PRIME, "archived", True, ()),
        "file-permissions": SlugFacts("file-permissions", None, None, False, ("linux-basics",)),
        "quantum-widgets": SlugFacts("quantum-widgets", None, None, False, ()),
    }
    return GraphFacts(slugs, frozenset(edges), frozenset(reach))


def p(source, target, kind="prerequisite"):
    return Proposal(source, target, kind, "because")


def verdicts(proposals, graph=None, max_proposals=10):
    accepted, rejected = decide(ORPHAN, proposals, graph or facts(), ALLOWED, max_proposals)
    return (
        [(a.proposal.source, a.proposal.target, a.proposal.edge_type) for a in accepted],
        [(r.proposal.get("target"), r.reason) for r in rejected],
    )


def test_a_valid_prerequisite_is_accepted_with_entry_ids_in_its_direction():
    """rsa -prerequisite-> modular-arithmetic maps to (orphan id, modular-arithmetic id)."""
    accepted, rejected = decide(ORPHAN, [p("rsa", "modular-arithmetic")], facts(), ALLOWED, 3)
    assert rejected == []
    assert accepted[0].identity == (ORPHAN.entry_id, MOD, "prerequisite")


@pytest.mark.parametrize(
    ("proposal", "reason"),
    [
        (p("rsa", "quantum-widgets"), "unknown_slug"),
        (p("rsa", "file-permissions"), "other_topic"),
        (p("rsa", "rsa"), "self_loop"),
        (p("rsa", "modular-arithmetic", "supersedes"), "disallowed_type"),
        (p("rsa", "modular-arithmetic", "leads_to"), "disallowed_type"),
        (p("modular-arithmetic", "public-key-cryptography"), "not_about_orphan"),
        (p("rsa", "_unanchored_"), "unanchored"),
        (p("rsa", "prime-numbers"), "archived"),
    ],
)
def test_each_invalid_kind_is_rejected_with_its_reason(proposal, reason):
    """Every invalid proposal kind gets its own reason code, and nothing is accepted."""
    assert verdicts([proposal]) == ([], [(proposal.target, reason)])


def test_a_stored_edge_is_a_duplicate_and_related_has_no_direction():
    """An existing identity, or `related` the other way round, is rejected as duplicate."""
    graph = facts(edges={(ORPHAN.entry_id, MOD, "prerequisite"), (PKC, ORPHAN.entry_id, "related")})
    assert verdicts(
        [p("rsa", "modular-arithmetic"), p("rsa", "public-key-cryptography", "related")], graph
    ) == ([], [("modular-arithmetic", "duplicate"), ("public-key-cryptography", "duplicate")])


def test_the_second_copy_in_one_reply_is_a_duplicate():
    """The same edge twice in a reply is written once."""
    assert verdicts([p("rsa", "modular-arithmetic")] * 2) == (
        [("rsa", "modular-arithmetic", "prerequisite")],
        [("modular-arithmetic", "duplicate")],
    )


def test_a_prerequisite_closing_a_loop_through_stored_reach_is_a_cycle():
    """Stored: public-key-cryptography reaches rsa; rsa -> public-key-cryptography would loop."""
    graph = facts(reach={(PKC, ORPHAN.entry_id)})
    assert verdicts(
        [p("rsa", "public-key-cryptography"), p("rsa", "public-key-cryptography", "related")], graph
    ) == ([("rsa", "public-key-cryptography", "related")], [("public-key-cryptography", "cycle")])


def test_a_cycle_through_a_proposal_accepted_earlier_in_the_reply_is_caught():
    """modular-arithmetic -> rsa accepted, stored pkc -> modular-arithmetic: rsa -> pkc loops."""
    graph = facts(reach={(PKC, MOD)})
    assert verdicts(
        [p("modular-arithmetic", "rsa"), p("rsa", "public-key-cryptography")], graph
    ) == ([("modular-arithmetic", "rsa", "prerequisite")], [("public-key-cryptography", "cycle")])


def test_valid_proposals_past_the_bound_are_over_limit():
    """With a bound of 1, the second valid proposal is rejected as over_limit."""
    assert verdicts(
        [p("rsa", "modular-arithmetic"), p("rsa", "public-key-cryptography")], max_proposals=1
    ) == (
        [("rsa", "modular-arithmetic", "prerequisite")],
        [("public-key-cryptography", "over_limit")],
    )


def test_malformed_items_are_rejected_and_slugs_are_normalised():
    """An item without strings is malformed; ' RSA ' and 'Prerequisite' are trimmed to lower case."""
    items = normalise(
        [
            {"source": " RSA ", "target": "Modular-Arithmetic", "edge_type": "Prerequisite"},
            {"source": "rsa", "target": 7, "edge_type": "related"},
            "junk",
        ]
    )
    assert items[0] == Proposal("rsa", "modular-arithmetic", "prerequisite", "")
    assert [getattr(i, "reason", None) for i in items[1:]] == ["malformed", "malformed"]


@pytest.mark.parametrize("content", ["not json {", "", "[1, 2]", '{"edges": "none"}', None])
def test_an_unusable_reply_raises_reply_error(content):
    """Not JSON, empty, or no `edges` list: the call counts as failed (and is retried)."""
    with pytest.raises(ReplyError):
        parse_reply(content)


def _candidates(n, slug_len=12):
    return [
        Candidate(
            uuid.UUID(int=100 + i),
            f"c{i:0{slug_len - 1}d}",
            f"Title {i}",
            "word " * 500,
            1.0 - i / (n + 1),
        )
        for i in range(n)
    ]


def test_the_prompt_is_cut_to_its_dials_whatever_the_texts():
    """K candidates, each line and the orphan's texts cut: 500-word descriptions do not grow it."""
    dials = settings.defaults().with_overrides(
        enrichment_candidate_count=5,
        enrichment_candidate_chars=60,
        enrichment_max_description_chars=100,
    )
    long_orphan = Orphan(
        ORPHAN.entry_id,
        "cryptography",
        "Cryptography",
        "rsa",
        "public",
        "RSA",
        "x " * 5000,
        "y " * 5000,
    )
    prompt = build_prompt(long_orphan, _candidates(50), dials)
    user = prompt.messages[1]["content"]
    lines = [line for line in user.splitlines() if line.startswith("- ")]
    assert len(lines) == 5 and len(prompt.candidates) == 5
    assert all(len(line) <= len("- ") + 12 + len(": ") + 60 for line in lines)
    assert len(user) < 2 * 100 + 5 * 76 + 200  # two cut orphan texts, five lines, fixed labels
    schema = prompt.response_format["json_schema"]["schema"]["properties"]["edges"]["items"]
    assert schema["properties"]["edge_type"]["enum"] == ALLOWED
    assert len(schema["properties"]["target"]["enum"]) == 6  # the orphan and five candidates


def test_offline_proposer_is_deterministic_and_names_what_the_description_names():
    """Named candidates become prerequisites, the nearest one is always proposed, same input same reply."""
    cands = [
        Candidate(
            uuid.UUID(int=10), "diffie-hellman", "Diffie-Hellman", "", 0.39, ("key-exchange",)
        ),
        Candidate(uuid.UUID(int=11), "modular-arithmetic", "Modular arithmetic", "", 0.32),
        Candidate(uuid.UUID(int=12), "key-management", "Key management", "", 0.30),
        Candidate(uuid.UUID(int=13), "caesar-cipher", "Caesar cipher", "", 0.10),
    ]
    dials = settings.defaults().with_overrides(enrichment_max_proposals_per_orphan=3)
    prompt = build_prompt(ORPHAN, cands, dials)
    proposer = OfflineProposer(min_similarity=0.3)
    first = proposer.complete(prompt).content
    assert first == proposer.complete(prompt).content
    edges = [(e["target"], e["edge_type"]) for e in json.loads(first)["edges"]]
    # 'modular' names only modular-arithmetic; 'key' names two candidates, so neither.
    assert edges == [
        ("modular-arithmetic", "prerequisite"),
        ("diffie-hellman", "related"),
        ("key-management", "related"),
    ]
