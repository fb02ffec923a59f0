"""The units rule (issue 29) on the real database: a session is one unit of evidence however
many of its turns repeat a pair, one learner's total is capped and alone never lifts a shared
prerequisite to the walk floor, one session never lowers an authored prerequisite, and
`hag explain` prints terms equal to the stored confidence."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest

from hag import settings
from hag.evidence import model
from hag.evidence.explain import evidence_terms
from tests import factories as f
from tests.session_builders import T0, edge_history, edge_row, payload, run, turn
from tests.test_evidence_session import reports, struggle, topic_entries

pytestmark = pytest.mark.pg_versions


@pytest.fixture
def units(db):
    """The evidence profile as it ships (the units rule), the cache dropped."""
    settings.apply_profile(db, "evidence", by="test")
    db.commit()
    settings.invalidate()
    dials = settings.current()
    assert dials.prerequisite_confidence_rule == "units"
    return dials


def explain_text(database_url: str, edge) -> str:
    """What `hag explain EDGE` prints against the test database (it must succeed)."""
    said = subprocess.run(
        [sys.executable, "-m", "hag.cli", "explain", str(edge)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "DATABASE_URL": database_url},
    )  # fmt: skip
    assert said.returncode == 0, said.stderr
    return said.stdout


def confidence(db, source, target) -> float:
    row = edge_row(db, source, target, "prerequisite")
    assert row is not None
    return float(row["confidence"])


def named_once(db, concept: str, missing: str, learners, prefix: str = "f") -> None:
    """learner-N names `concept` -> `missing` in one failed session each (`{prefix}N`, day N)."""
    for n in learners:
        run(db, payload(f"{prefix}{n}", [turn(0, outcome="failure", struggles=[struggle(concept, missing)])],
                        learner=f"learner-{n}", day=n))  # fmt: skip


def test_one_learner_in_100_sessions_stays_below_the_walk_floor(db, units):
    """learner-1 reports the false rsa -> primes in 100 sessions: its units are capped at
    `prerequisite_learner_cap` and one learner is fewer than `prerequisite_min_learners`, so
    the edge is held at edge_min_confidence x 1/2, below the walk floor; a second learner's one
    session lifts it to 2/(2 + k)."""
    e = topic_entries(db)
    db.commit()
    run(db, *(reports(f"s{d}", [("rsa", "primes")], day=d % 20) for d in range(100)))
    floor = units.edge_min_confidence
    alone = confidence(db, e["rsa"], e["primes"])
    assert alone < floor
    assert alone == pytest.approx(floor / units.prerequisite_min_learners)
    run(db, payload("other", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                    learner="learner-2", day=30))  # fmt: skip
    k = units.prerequisite_lift_k
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))


def test_one_learner_naming_a_pair_the_other_way_does_not_hold_it_down(db, units, database_url):
    """learner-1 and learner-2 each report rsa -> primes once: 2/(2 + k). learner-3 reports
    primes -> rsa in 100 sessions (an extractor's reversal repeated through one learner):
    the reverse edge has fewer than `prerequisite_min_learners` learners, so its units count
    nothing against rsa -> primes, which stays at 2/(2 + k). learner-4's one session makes
    the reverse two learners' and 2 units: they net rsa -> primes to nothing, the edge
    floor. `hag explain` says how many learners the reverse has."""
    k = units.prerequisite_lift_k
    e = topic_entries(db)
    db.commit()
    named_once(db, "rsa", "primes", (1, 2))
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))
    run(db, *(
        payload(f"r{d}", [turn(0, outcome="failure", struggles=[struggle("primes", "rsa")])],
                learner="learner-3", day=3 + d % 20)
        for d in range(100)
    ))  # fmt: skip
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    assert "reported by 1 learner(s): its units count against this one from 2 (not counted)" in (
        explain_text(database_url, edge)
    )
    run(db, payload("r-other", [turn(0, outcome="failure", struggles=[struggle("primes", "rsa")])],
                    learner="learner-4", day=30))  # fmt: skip
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(units.edge_confidence_floor)
    assert "reported by 2 learner(s): its units count against this one from 2 (counted)" in (
        explain_text(database_url, edge)
    )


def test_the_min_learners_dial_is_read(db, units, dials):
    """Three learners are needed: two learners' reports stay held, at floor x 2/3."""
    dials(prerequisite_min_learners=3)
    e = topic_entries(db)
    db.commit()
    for n in range(2):
        run(db, payload(f"m{n}", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                        learner=f"learner-{n}", day=n))  # fmt: skip
    held = settings.current().edge_min_confidence * 2 / 3
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)


def test_the_learner_cap_dial_bounds_a_learners_total(db, units, dials):
    """learner-1 reports rsa -> primes in 3 sessions, learner-2 in 1: with the cap at 1 the
    pair has 2 units (2/(2 + k)), with the cap at 2 it has 3 (3/(3 + k))."""
    k = units.prerequisite_lift_k
    e = topic_entries(db)
    db.commit()
    run(db, *(reports(f"a{d}", [("rsa", "primes")], day=d) for d in range(3)))
    run(db, payload("b", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                    learner="learner-2", day=5))  # fmt: skip
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))
    dials(prerequisite_learner_cap=2.0)
    run(
        db,
        payload(
            "c",
            [turn(0, outcome="failure", struggles=[struggle("rsa", "hashing")])],
            learner="learner-3",
            day=6,
        ),
    )  # fmt: skip  (re-weighs rsa's prerequisites)
    # rsa's units: primes 3, hashing 1; chance of primes = 1 / spread, scaled by the noise
    fact = next(
        x
        for x in _facts(db, e["rsa"])
        if x.edge_id == edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    )
    assert fact.units == pytest.approx(3.0)
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(
        model.unit_terms(fact, settings.current()).confidence
    )
    assert confidence(db, e["rsa"], e["primes"]) > 2 / (2 + k)


def _facts(db, source):
    from hag.evidence import store

    return store.prerequisite_evidence(db, [source], settings.current())


def test_a_session_of_1000_turns_is_one_unit(db, units):
    """One session whose 1,000 failed turns all report rsa -> primes records a share of 1:
    with a second learner's one-turn session the pair stands at 2/(2 + k), as two one-turn
    sessions put it; alone it is held below the walk floor, and it lowers no authored
    prerequisite of rsa (rsa -> hashing keeps 0.92)."""
    e = topic_entries(db)
    f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    turns = [turn(i, outcome="failure", struggles=[struggle("rsa", "primes")]) for i in range(1000)]
    run(db, payload("long", turns))
    share = db.execute(
        "SELECT turns, share FROM hag_edge_learner_reports WHERE session_id = 'long'"
    ).fetchone()
    assert (share["turns"], share["share"]) == (1000, pytest.approx(1.0))
    assert confidence(db, e["rsa"], e["primes"]) < units.edge_min_confidence
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)
    run(db, payload("short", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                    learner="learner-2", day=1))  # fmt: skip
    k = units.prerequisite_lift_k
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)


def test_a_turn_with_54_struggles_lowers_no_authored_prerequisite(db, units, dials):
    """A topic of 20 concepts with 18 authored prerequisites c_i -> c_i+1 at 0.92; one turn
    whose 54 struggles name three unrelated concepts under each of c_0..c_17 (none naming
    c_i+1 or anything resting on it). Each concept gets a third of the session's unit per
    pair, one learner: no authored prerequisite moves below 0.5 (they keep 0.92)."""
    dials(session_max_struggles_per_turn=100)
    slugs = [f"c{i:02d}" for i in range(20)]
    e = {
        s: f.entry(db, concept_slug=s, confidence=0.8, created_at=T0 - timedelta(days=30))
        for s in slugs
    }
    authored = [f.edge(db, e[slugs[i]], e[slugs[i + 1]], confidence=0.92) for i in range(18)]
    db.commit()
    named = [
        struggle(slugs[i], slugs[(i + j) % 20]) for i in range(18) for j in (2, 3, 4)
    ]  # fmt: skip
    assert len(named) == 54
    run(db, payload("wide", [turn(0, outcome="failure", struggles=named)]))
    rows = db.execute("SELECT confidence FROM hag_edges WHERE id = ANY(%s)", (authored,)).fetchall()
    assert min(float(r["confidence"]) for r in rows) >= 0.5
    shares = db.execute(
        "SELECT DISTINCT round(share::numeric, 6) AS s FROM hag_edge_learner_reports"
    ).fetchall()
    assert [float(r["s"]) for r in shares] == [pytest.approx(1 / 3)]


def _shares(db, session_id):
    """A session's recorded reports: (source slug, target slug) -> (turns, share)."""
    rows = db.execute(
        "SELECT s.concept_slug AS c, t.concept_slug AS m, r.turns, r.share"
        " FROM hag_edge_learner_reports r JOIN hag_edges e ON e.id = r.edge_id"
        " JOIN hag_entries s ON s.id = e.source_entry_id"
        " JOIN hag_entries t ON t.id = e.target_entry_id WHERE r.session_id = %s",
        (session_id,),
    ).fetchall()
    return {(r["c"], r["m"]): (r["turns"], float(r["share"])) for r in rows}


def carried_misreading():
    """A session whose turn about rsa fails naming rsa -> primes and rsa -> hashing, whose
    next two turns, about signatures and key-exchange, fail naming rsa -> hashing again (a
    misreading carried through the session), and whose second of those also names
    modular-arithmetic -> primes, a struggle on a concept no turn of the session was about."""
    return payload("carried", [
        turn(0, outcome="failure", concepts=["rsa"],
             struggles=[struggle("rsa", "primes"), struggle("rsa", "hashing")]),
        turn(1, outcome="failure", concepts=["signatures"],
             struggles=[struggle("rsa", "hashing")]),
        turn(2, outcome="failure", concepts=["key-exchange"],
             struggles=[struggle("rsa", "hashing"), struggle("modular-arithmetic", "primes")]),
    ])  # fmt: skip


@pytest.mark.parametrize("drop_shown", [True, False])
def test_a_struggle_carried_onto_turns_about_other_concepts_takes_no_part_of_the_unit(
    db, units, dials, drop_shown
):
    """Under the units rule the session's unit about rsa is split over the one turn about
    rsa: rsa -> primes and rsa -> hashing hold half each, where counting the two turns about
    other concepts gave hashing three quarters. modular-arithmetic -> primes, named only at
    a turn about another concept, keeps its whole unit. So with or without
    `prerequisite_drop_shown` (the learner's record read or not)."""
    dials(prerequisite_drop_shown=drop_shown)
    topic_entries(db)
    db.commit()
    assert run(db, carried_misreading()).struggles_off_turn == 2
    assert _shares(db, "carried") == {
        ("rsa", "primes"): (1, pytest.approx(0.5)),
        ("rsa", "hashing"): (1, pytest.approx(0.5)),
        ("modular-arithmetic", "primes"): (1, pytest.approx(1.0)),
    }


def test_the_seed_rules_count_every_turn_naming_a_pair(db):
    """Under the seed's rules the same session reports rsa -> hashing in three turns."""
    topic_entries(db)
    db.commit()
    assert run(db, carried_misreading()).struggles_off_turn == 0
    assert {pair: turns for pair, (turns, _) in _shares(db, "carried").items()} == {
        ("rsa", "primes"): 1,
        ("rsa", "hashing"): 3,
        ("modular-arithmetic", "primes"): 1,
    }


def test_negative_evidence_needs_several_learners(db, units):
    """rsa -> hashing (authored 0.92) is unsupported by 5 sessions of one learner naming
    primes: one learner is too few to judge it. Two more learners' sessions naming primes
    make three learners and 3 units on rsa: it falls to what its own units earn (the floor),
    with 0.92 kept beside it, and gets 0.92 back once a learner names hashing."""
    e = topic_entries(db)
    wrong = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    run(db, *(reports(f"n{d}", [("rsa", "primes")], day=d) for d in range(5)))
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)
    for n in (2, 3):
        run(db, payload(f"o{n}", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                        learner=f"learner-{n}", day=10 + n))  # fmt: skip
    row = db.execute("SELECT confidence, unlearned_from FROM hag_edges WHERE id = %s", (wrong,))
    got = row.fetchone()
    assert (got["confidence"], got["unlearned_from"]) == (
        pytest.approx(units.edge_confidence_floor),
        pytest.approx(0.92),
    )
    run(db, payload("back", [turn(0, outcome="failure", struggles=[struggle("rsa", "hashing")])],
                    learner="learner-4", day=20))  # fmt: skip
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)


def test_an_authored_prior_comes_from_its_provenance_not_from_stored_state(db, units):
    """rsa -> hashing is written at 0.92 (its prior, migration 211); three learners naming only
    primes lower it. With the value kept beside it wiped (a stale or lost `unlearned_from`),
    a learner naming hashing still gives 0.92 back: the prior is the author's value and the
    verdict is the current counts'."""
    e = topic_entries(db)
    wrong = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    assert db.execute("SELECT prior_confidence FROM hag_edges WHERE id = %s", (wrong,)).fetchone()[
        "prior_confidence"
    ] == pytest.approx(0.92)
    for n in range(3):
        run(db, payload(f"p{n}", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                        learner=f"learner-{n}", day=n))  # fmt: skip
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(units.edge_confidence_floor)
    db.execute("UPDATE hag_edges SET unlearned_from = NULL WHERE id = %s", (wrong,))
    db.commit()
    run(db, payload("back", [turn(0, outcome="failure", struggles=[struggle("rsa", "hashing")])],
                    learner="learner-4", day=20))  # fmt: skip
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)


def test_learners_confirm_an_enriched_prerequisite_past_its_prior(db, units, database_url):
    """rsa -> primes is enriched at 0.45, written as enrichment writes it (one session, no
    learner recorded). learner-1 names it in 100 sessions: one learner never lifts it, it
    stays at its prior. Two more learners' one session each: its recorded learners' reports
    read as a learned edge's give (cap + 2)/(cap + 2 + k) (no other report on rsa: no
    chance; its own write counts nowhere), above the prior, and it stands there; `hag
    explain` says so."""
    e = topic_entries(db)
    enriched = f.edge(db, e["rsa"], e["primes"], confidence=0.45, source_type="enriched",
                      hit_count=units.edge_new_hit_count)  # fmt: skip
    db.commit()
    run(db, *(reports(f"s{d}", [("rsa", "primes")], day=d % 20) for d in range(100)))
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(0.45)
    for n in (2, 3):
        run(db, payload(f"o{n}", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                        learner=f"learner-{n}", day=30 + n))  # fmt: skip
    got = min(units.prerequisite_learner_cap, 100.0) + 2.0
    expected = got / (got + units.prerequisite_lift_k)
    assert expected > 0.45
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(expected)
    said = explain_text(database_url, enriched)
    assert "its recorded learners' reports read as a learned edge's" in said
    assert f"result {expected:.6f}" in said


def test_enrichment_writes_count_in_no_concepts_units(db, units):
    """rsa -> primes and rsa -> key-exchange are enriched at 0.45 as enrichment writes them
    (one session each, no learner recorded), beside rsa -> hashing authored at 0.92. Two
    learners name signatures on rsa: 2 units, below `prerequisite_unlearn_min_reports`, so
    nothing is judged (the writes would make 4). A third learner makes 3, none naming their
    targets: an enriched edge's own write is no learner naming its target, so negative
    evidence judges the enriched edges as it judges the authored one, and all three fall to
    the lift of their own units, nothing (the floor)."""
    assert units.prerequisite_unlearn_min_reports == 3
    assert units.prerequisite_unlearn_max_share == 0
    e = topic_entries(db)
    for m in ("primes", "key-exchange"):
        f.edge(db, e["rsa"], e[m], confidence=0.45, source_type="enriched",
               hit_count=units.edge_new_hit_count)  # fmt: skip
    f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    for n in (1, 2, 3):
        named_once(db, "rsa", "signatures", (n,), prefix="o")
        if n == 2:
            assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)
            assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(0.45)
    for m in ("hashing", "primes", "key-exchange"):
        assert confidence(db, e["rsa"], e[m]) == pytest.approx(units.edge_confidence_floor)


def test_one_learner_repeating_a_reversal_adds_one_unit_to_its_concepts_share(db, units):
    """hashing -> rsa is authored at 0.9 (past `prerequisite_lift_noise_held_min`), so a report
    on rsa naming hashing is the extractor's reversal. learner-1 and learner-2 each name
    primes on rsa once; learner-3 names hashing on rsa in 100 sessions. rsa's reversal share
    counts each learner's units within the cap, as any pair's: learner-3's 100 sessions add one
    unit, so rsa -> primes nets out chance over 3 units of which 1 is a reversal (in sessions
    the share would be 100 of 102, and the chance term about five times as large)."""
    k = units.prerequisite_lift_k
    e = topic_entries(db)
    f.edge(db, e["hashing"], e["rsa"], confidence=0.9)
    db.commit()
    named_once(db, "rsa", "primes", (1, 2))
    run(db, *(
        payload(f"r{d}", [turn(0, outcome="failure", struggles=[struggle("rsa", "hashing")])],
                learner="learner-3", day=3 + d % 20)
        for d in range(100)
    ))  # fmt: skip
    cap = min(1.0, units.prerequisite_learner_cap)
    u, concept = 2.0, 2.0 + cap
    weight = units.prerequisite_lift_noise_prior_reports
    share = (cap + units.prerequisite_lift_noise_prior * weight) / (concept + weight)
    chance = (concept - u) / units.prerequisite_lift_chance_spread
    net = u - chance * (1 + units.prerequisite_lift_noise_weight * share)
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(net / (net + k))
    assert net / (net + k) > 0.6


def settings_cli(db, database_url: str, *args: str) -> str:
    """`hag settings ARGS` in a process of its own on the test database: its stdout."""
    env = {**os.environ, "DATABASE_URL": database_url}
    done = subprocess.run([sys.executable, "-m", "hag.cli", "settings", *args],
                          capture_output=True, text=True, env=env, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    db.rollback()
    return done.stdout


def test_setting_a_dial_the_model_reads_reweighs_every_edge_at_once(db, units, database_url):
    """learner-1 and learner-2 name rsa -> primes: 2/(2 + k). `hag settings set
    prerequisite_lift_k 1` moves it to 2/3 in the same command, and `hag explain` still gives
    the stored value; a dial the model does not read moves nothing; `hag settings reset` puts
    the registry's k back and the edge at 2/(2 + k) for it."""
    from hag.evidence.reweigh import MODEL_DIALS

    e = topic_entries(db)
    db.commit()
    named_once(db, "rsa", "primes", (1, 2))
    k = units.prerequisite_lift_k
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))

    def cli(*args: str) -> str:
        return settings_cli(db, database_url, *args)

    said = cli("set", "prerequisite_lift_k", "1")
    assert "1 prerequisite confidence(s) re-weighed under it" in said
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / 3)
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    assert f"result {2 / 3:.6f}" in explain_text(database_url, edge)
    assert "advisory_max_chars" not in MODEL_DIALS
    assert "re-weighed" not in cli("set", "advisory_max_chars", "300")
    default = settings.REGISTRY["prerequisite_lift_k"].default
    assert "re-weighed" in cli("reset", "prerequisite_lift_k")
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + default))


def test_a_model_dial_moved_beside_an_invalid_dial_is_reweighed_by_the_repair(
    db, units, database_url
):
    """k moved while another dial's stored value is invalid: stored, not re-weighed (the line
    says so). Repairing the invalid dial, which the model does not read, makes the owed
    re-weigh (explain's result is the stored confidence again); the next write owes nothing."""
    e = topic_entries(db)
    db.commit()
    named_once(db, "rsa", "primes", (1, 2))
    k = units.prerequisite_lift_k
    db.execute("UPDATE hag_settings SET value = '\"bogus\"' WHERE key = 'advisory_max_chars'")
    db.commit()

    def cli(*args: str) -> str:
        return settings_cli(db, database_url, *args)

    assert "not re-weighed: the stored value of advisory_max_chars" in cli(
        "set", "prerequisite_lift_k", "1"
    )
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))
    said = cli("reset", "advisory_max_chars")
    assert "the re-weigh that prerequisite_lift_k's move waited for is done" in said, said
    assert "1 prerequisite confidence(s) re-weighed under the dials now stored" in said
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / 3)
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    assert f"result {2 / 3:.6f}" in explain_text(database_url, edge)
    assert "re-weighed" not in cli("set", "advisory_max_chars", "300")


def test_explain_json_prints_an_infinite_term_as_null(db, units, database_url):
    """primes -> rsa is authored at 1.0: as the reverse of rsa -> primes it stands for
    infinitely many units (k p / (1 - p)). `hag explain --json` prints that term as null, as
    the history rows keep it: JSON has no infinity (a strict parser refuses `Infinity`)."""
    e = topic_entries(db)
    f.edge(db, e["primes"], e["rsa"], confidence=1.0)
    db.commit()
    named_once(db, "rsa", "primes", (1, 2))
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    said = subprocess.run(
        [sys.executable, "-m", "hag.cli", "explain", str(edge), "--json"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "DATABASE_URL": database_url},
    )  # fmt: skip
    assert said.returncode == 0, said.stderr

    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")

    shown = json.loads(said.stdout, parse_constant=refuse)
    assert shown["terms"]["reverse"] is None
    assert shown["terms"]["confidence"] == pytest.approx(units.edge_confidence_floor)


def rebuilt(terms: dict, dials) -> float:
    """A prerequisite's confidence rebuilt from the terms `hag explain` prints, by the formula
    docs/learning-report.md states (not through `model.unit_terms`)."""

    def bounds(x: float) -> float:
        return min(dials.edge_confidence_ceiling, max(dials.edge_confidence_floor, x))

    k = dials.prerequisite_lift_k
    if terms["source_type"] == "learned":
        net = max(0.0, terms["units"] - max(terms["chance"], terms["invented"]) - terms["reverse"])
        hold = terms["hold"] if terms["hold"] is not None else 1.0
        return bounds(min(net / (net + k), hold))
    net = max(0.0, terms["units"] - terms["chance"])
    if terms["judged"]:
        return min(terms["prior"], bounds(net / (net + k)))
    return max(terms["prior"], terms["raised"] or 0.0)


def test_explain_terms_equal_the_stored_confidence(db, units, database_url):
    """After a mix of learners, repeats and an authored edge, every prerequisite's explained
    result equals its stored confidence to 1e-9, through the rule and through `hag explain`
    (prefix accepted, --json)."""
    e = topic_entries(db)
    f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    pairs = [("rsa", "primes"), ("rsa", "signatures"), ("primes", "rsa"), ("hashing", "primes")]
    for n in range(12):
        c, m = pairs[n % len(pairs)]
        turns = [turn(i, outcome="failure", struggles=[struggle(c, m)]) for i in range(1 + n % 3)]
        run(db, payload(f"x{n}", turns, learner=f"learner-{n % 5}", day=n))
    rows = db.execute(
        "SELECT id, source_entry_id, confidence FROM hag_edges WHERE edge_type = 'prerequisite'"
    ).fetchall()
    assert len(rows) >= 5
    for r in rows:
        terms = evidence_terms(db, r["id"], r["source_entry_id"], units)
        assert terms is not None
        assert abs(terms["confidence"] - r["confidence"]) <= 1e-9
        assert abs(rebuilt(terms, units) - r["confidence"]) <= 1e-9, terms
    edge = next(r for r in rows if r["source_entry_id"] == e["rsa"])
    env = {**os.environ, "DATABASE_URL": database_url}

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "hag.cli", "explain", *args],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    shown = json.loads(cli(str(edge["id"])[:12], "--json"))
    assert abs(shown["terms"]["confidence"] - edge["confidence"]) <= 1e-9
    assert f"result {edge['confidence']:.6f}" in cli(str(edge["id"])[:12])


def test_sessions_no_learner_is_recorded_for_never_add_a_learner(db, units, database_url):
    """A learned rsa -> primes carried with 100 reporting sessions and no reporter (a memory
    from before learners were kept, or an edge restored from the audit): they may all be one
    learner's, and that learner may be any recorded one. So however many units they give,
    they are one learner while no learner is recorded and add none after: the edge (and its
    concept) has 1 learner, held below the walk floor, still 1 after learner-1 names it, and 2
    only after learner-2 does; `hag explain` says so."""
    e = topic_entries(db)
    edge = f.edge(db, e["rsa"], e["primes"], confidence=0.5, source_type="learned", hit_count=100)
    db.commit()
    env = {**os.environ, "DATABASE_URL": database_url}
    held = units.edge_min_confidence / units.prerequisite_min_learners

    def explained() -> tuple[dict, str]:
        def cli(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "hag.cli", "explain", str(edge), *args],
                capture_output=True, text=True, env=env, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            return done.stdout

        return json.loads(cli("--json"))["terms"], cli()

    def names(session: str, learner: str, day: int) -> None:
        run(db, payload(session, [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                        learner=learner, day=day))  # fmt: skip

    terms, text = explained()
    assert (terms["learners"], terms["concept_learners"], terms["unattributed"]) == (1, 1, 100)
    assert terms["units"] == pytest.approx(100.0)
    assert terms["confidence"] == pytest.approx(held)
    assert "from 1 learner(s) (and 100 session(s) no learner is recorded for" in text
    names("n1", "learner-1", 1)
    terms, text = explained()
    assert (terms["learners"], terms["concept_learners"], terms["units"]) == (1, 1, 101.0)
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)
    names("n2", "learner-2", 2)
    terms, _ = explained()
    assert (terms["learners"], terms["concept_learners"], terms["units"]) == (2, 2, 102.0)
    k = units.prerequisite_lift_k
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(
        min(units.edge_confidence_ceiling, 102 / (102 + k))
    )


def test_a_reweigh_that_moves_an_edge_writes_its_terms_in_the_history_row(db, units, database_url):
    """Three learners report rsa -> primes: every history row a re-weigh wrote for it carries
    the formula's terms, and the latest equals what `hag explain EDGE --json` prints now (the
    result its new value, to 1e-9); rows of other writers (its creation) carry none."""
    e = topic_entries(db)
    db.commit()
    for n in range(3):
        run(db, payload(f"h{n}", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                        learner=f"learner-{n}", day=n))  # fmt: skip
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    rows = edge_history(db, edge)
    reweighed = [r for r in rows if r["reason"] == "prerequisite evidence (lift)"]
    assert len(reweighed) >= 2 and all(r["terms"] is not None for r in reweighed)
    assert all(r["terms"] is None for r in rows if r["reason"] != "prerequisite evidence (lift)")
    last = rows[-1]
    assert last["reason"] == "prerequisite evidence (lift)"
    now = evidence_terms(db, edge, e["rsa"], units)
    assert last["terms"] == now
    assert abs(last["new_value"] - now["confidence"]) <= 1e-9
    done = subprocess.run(
        [sys.executable, "-m", "hag.cli", "explain", str(edge), "--json"],
        capture_output=True, text=True, env={**os.environ, "DATABASE_URL": database_url},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["terms"] == last["terms"]


def one_learner_under_lift(db, dials) -> dict:
    """An old memory under the lift rule (session counts, k 2): one learner's 3 sessions put
    rsa -> primes at 3/5, above the walk floor. The topic's entries."""
    dials(prerequisite_confidence_rule="lift")
    e = topic_entries(db)
    db.commit()
    run(db, *(reports(f"s{d}", [("rsa", "primes")], day=d) for d in range(3)))
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(3 / 5)
    return e


def profile_evidence(database_url: str) -> str:
    """What `hag settings profile evidence` prints against the test database (it must
    succeed)."""
    done = subprocess.run(
        [sys.executable, "-m", "hag.cli", "settings", "profile", "evidence"],
        capture_output=True, text=True, env={**os.environ, "DATABASE_URL": database_url},
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_evidence_profile_moves_an_old_memory_to_units_at_once(db, database_url, dials):
    """Under the lift rule (session counts, k 2) one learner's 3 sessions put rsa -> primes at
    3/5, above the walk floor; `hag settings profile evidence` re-weighs every prerequisite
    under units at once: one learner, held at edge_min_confidence / 2, and says how many."""
    e = one_learner_under_lift(db, dials)
    said = profile_evidence(database_url)
    assert "1 prerequisite confidence(s) re-weighed under the new rules" in said
    settings.invalidate()
    held = settings.current().edge_min_confidence / 2
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)


def test_the_evidence_profile_moves_a_memory_on_its_earlier_k(db, database_url, units, dials):
    """A memory set to the evidence profile before k became 0.75 holds k = 1: two learners'
    one report each put rsa -> primes at 2/3. `hag settings profile evidence` moves k to the
    profile's and re-weighs the edge at once: 2/(2 + 0.75)."""
    dials(prerequisite_lift_k=1.0)
    e = topic_entries(db)
    db.commit()
    named_once(db, "rsa", "primes", (1, 2))
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / 3)
    assert "prerequisite_lift_k" in profile_evidence(database_url)
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / 2.75)


def test_list_and_migrate_name_the_dials_apart_from_the_profile(db, database_url, units, dials):
    """A memory set to the evidence profile before k became 0.75 (k = 1, written by the
    profile command): `hag settings list` ends by naming k apart from the profile and the
    command that sets it, and `hag migrate` says the same on stderr. A dial tuned by hand is
    named by the list only: it is the operator's. Once the profile is set again, the list
    names the profile and migrate says nothing of it; an invalid stored dial is not read."""
    from tests.fix_cli import run_hag
    from tests.test_settings_writes import store_raw

    settings.set_value(db, "prerequisite_lift_k", 1.0, by="cli (profile evidence)")
    db.commit()
    apart = "profile: nearest evidence, 1 of its 10 dials apart: prerequisite_lift_k 1.0"
    listed = run_hag(database_url, "settings", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-1].startswith(apart)
    migrated = run_hag(database_url, "migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert apart in migrated.stderr and "`hag settings profile evidence`" in migrated.stderr
    profile_evidence(database_url)
    assert run_hag(database_url, "settings", "list").stdout.splitlines()[-1] == "profile: evidence"
    dials(reprieve_idle_days=3)
    tuned = "profile: nearest evidence, 1 of its 10 dials apart: reprieve_idle_days 3"
    assert run_hag(database_url, "settings", "list").stdout.splitlines()[-1].startswith(tuned)
    assert "profile" not in run_hag(database_url, "migrate").stderr
    store_raw(db, "prerequisite_lift_k", '"banana"')
    assert run_hag(database_url, "settings", "list").stdout.splitlines()[-1] == (
        "profile: not read while 1 stored dial(s) are invalid (marked above)"
    )


def test_the_simulators_profile_moves_the_memory_as_the_command_does(db, dials):
    """The simulator's `--profile` (`set_profile`) runs what `hag settings profile` runs: the
    same learner's 3 sessions under the lift rule, at 3/5, are held at edge_min_confidence / 2
    once it sets the evidence profile, and the move's history row is dated at the run's start
    it was given (a simulated memory starts where an operator's would, not at its first
    session on the concept)."""
    from hag_lab.simulate.experiment import set_profile

    e = one_learner_under_lift(db, dials)
    start = T0 + timedelta(days=40)
    changed = set_profile("evidence", at=start)
    assert ("prerequisite_confidence_rule", "lift", "units") in changed
    settings.invalidate()
    held = settings.current().edge_min_confidence / 2
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    last = edge_history(db, edge)[-1]
    assert (last["reason"], last["at"]) == ("profile: re-weighed", start)
    assert last["new_value"] == pytest.approx(held)
    assert set_profile("evidence", at=start) == []


# --- the per-(edge, learner) totals the re-weigh reads (migration 210) ------------------------


def totals(db) -> dict:
    """The sums kept at write time: per (edge, learner), per edge (units at the cap they were
    summed with, learners, sessions) and the learners per concept."""
    return {
        "per_learner": {
            (r["edge_id"], r["learner_id"]): (pytest.approx(r["share"]), r["sessions"])
            for r in db.execute("SELECT * FROM hag_edge_learner_units").fetchall()
        },
        "per_edge": {
            r["edge_id"]: (pytest.approx(r["units"]), r["learners"], r["sessions"])
            for r in db.execute("SELECT * FROM hag_edge_units").fetchall()
        },
        "per_concept": {
            (r["source_entry_id"], r["learner_id"]): r["pairs"]
            for r in db.execute("SELECT * FROM hag_concept_learners").fetchall()
        },
    }


def grouped_reports(db, cap: float = 1.0) -> dict:
    """The same sums grouped afresh from every report (and the edges' concepts)."""
    per_learner = db.execute(
        "SELECT r.edge_id, r.learner_id, r.source_entry_id, sum(r.share) AS share, "
        "count(*) AS sessions FROM (SELECT lr.*, COALESCE(e.source_entry_id, u.source_entry_id) "
        "AS source_entry_id FROM hag_edge_learner_reports lr "
        "LEFT JOIN hag_edges e ON e.id = lr.edge_id "
        "LEFT JOIN hag_edge_learner_units u ON u.edge_id = lr.edge_id "
        "AND u.learner_id = lr.learner_id) r GROUP BY 1, 2, 3"
    ).fetchall()
    per_edge: dict = {}
    per_concept: dict = {}
    for r in per_learner:
        units, learners, sessions = per_edge.get(r["edge_id"], (0.0, 0, 0))
        per_edge[r["edge_id"]] = (
            units + min(cap, r["share"]),
            learners + 1,
            sessions + r["sessions"],
        )
        key = (r["source_entry_id"], r["learner_id"])
        per_concept[key] = per_concept.get(key, 0) + 1
    return {
        "per_learner": {
            (r["edge_id"], r["learner_id"]): (r["share"], r["sessions"]) for r in per_learner
        },
        "per_edge": per_edge,
        "per_concept": per_concept,
    }


def test_the_totals_follow_every_change_of_the_reports(db, units, dials):
    """The sums equal the reports grouped afresh after sessions (two learners, a session
    sharing its unit over two pairs), after a session applied again (it adds nothing), an
    erasure's pseudonym, a cull's delete and a TRUNCATE; the evidence read from them is what
    it was read from the reports (rsa -> primes: ann's 1 + 1/2 capped at 1, bob's 1); a cap
    changed since the sums were kept is read back from the per-learner rows."""
    e = topic_entries(db)
    db.commit()
    run(
        db,
        payload("a1", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                learner="ann", day=1),
        payload("a2", [turn(0, outcome="failure",
                            struggles=[struggle("rsa", "primes"), struggle("rsa", "hashing")])],
                learner="ann", day=2),
        payload("b1", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                learner="bob", day=3),
    )  # fmt: skip
    assert totals(db) == grouped_reports(db) and len(totals(db)["per_learner"]) == 3
    primes = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    assert totals(db)["per_learner"][(primes, "ann")] == (pytest.approx(1.5), 2)
    assert totals(db)["per_concept"] == {(e["rsa"], "ann"): 2, (e["rsa"], "bob"): 1}
    fact = next(x for x in _facts(db, e["rsa"]) if x.edge_id == primes)
    assert (fact.units, fact.learners, fact.concept_learners) == (pytest.approx(2.0), 2, 2)
    dials(prerequisite_learner_cap=2.0)  # the kept units were summed at 1: read back at 2
    fact = next(x for x in _facts(db, e["rsa"]) if x.edge_id == primes)
    assert fact.units == pytest.approx(2.5)
    dials(prerequisite_learner_cap=1.0)

    db.execute("UPDATE hag_sessions SET status = 'pending' WHERE session_id = 'a2'")
    db.commit()
    before = totals(db)
    run(db)
    assert totals(db) == before == grouped_reports(db)

    db.execute(
        "UPDATE hag_edge_learner_reports SET learner_id = 'erased-x' WHERE learner_id = 'ann'"
    )
    assert totals(db) == grouped_reports(db)
    assert {learner for _, learner in totals(db)["per_learner"]} == {"erased-x", "bob"}
    db.execute("DELETE FROM hag_edges WHERE id = %s", (primes,))
    assert totals(db) == grouped_reports(db) and len(totals(db)["per_learner"]) == 1
    assert totals(db)["per_concept"] == {(e["rsa"], "erased-x"): 1}
    db.execute("TRUNCATE hag_edge_learner_reports")
    assert totals(db) == {"per_learner": {}, "per_edge": {}, "per_concept": {}}
    db.rollback()


def test_two_deletes_of_one_learners_last_pairs_leave_no_learner_behind(db, units, database_url):
    """ann reported rsa -> primes and rsa -> hashing (2 pairs on rsa). Two transactions each
    delete one pair's reports at once; the second waits on the first's row lock. After both
    commit ann is no learner of rsa: the second lowers the row the first left at 1 and deletes
    it at 0 (a condition read before the wait would have left a learner with no report)."""
    import threading

    import psycopg
    from psycopg.rows import dict_row

    e = topic_entries(db)
    db.commit()
    run(db, payload("a1", [turn(0, outcome="failure",
                                struggles=[struggle("rsa", "primes"), struggle("rsa", "hashing")])],
                    learner="ann", day=1))  # fmt: skip
    assert totals(db)["per_concept"] == {(e["rsa"], "ann"): 2}
    primes = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    hashing = edge_row(db, e["rsa"], e["hashing"], "prerequisite")["id"]
    db.commit()
    first = psycopg.connect(database_url, row_factory=dict_row)
    second = psycopg.connect(database_url, row_factory=dict_row)
    delete = "DELETE FROM hag_edge_learner_reports WHERE edge_id = %s AND learner_id = 'ann'"
    try:
        first.execute(delete, (primes,))  # holds ann's row on rsa until it commits
        failed: list[BaseException] = []

        def other() -> None:
            try:
                second.execute(delete, (hashing,))
                second.commit()
            except BaseException as exc:  # reported on the test's thread
                failed.append(exc)

        waiting = threading.Thread(target=other)
        waiting.start()
        waiting.join(timeout=1.0)
        assert waiting.is_alive(), "the second delete should wait for the first's row lock"
        first.commit()
        waiting.join(timeout=30)
        assert not waiting.is_alive() and not failed, failed
    finally:
        first.close()
        second.close()
    assert totals(db)["per_concept"] == {}
    assert totals(db) == grouped_reports(db)


def _reported(db, session_id: str) -> int:
    row = db.execute(
        "SELECT count(*) AS n FROM hag_edge_learner_reports WHERE session_id = %s", (session_id,)
    ).fetchone()
    return int(row["n"])


def test_a_report_against_the_learners_own_record_is_not_evidence(db, units, dials):
    """learner-2 succeeded on primes on day 1. Its day-5 session blames primes for rsa (and
    hashing in a turn after a success on hashing): neither is recorded, the run counts two
    contradicted struggles, and rsa -> primes keeps no units. learner-3, who never showed
    primes, records its report; with `prerequisite_drop_shown` off learner-2's next session
    records both. A success in a session that ended later than the report does not count."""
    e = topic_entries(db)
    db.commit()
    run(db, payload("shown", [turn(0, outcome="success", concepts=["primes"])],
                    learner="learner-2", day=1))  # fmt: skip
    summary = run(
        db,
        payload(
            "blames",
            [
                turn(0, outcome="failure", struggles=[struggle("rsa", "primes")]),
                turn(1, outcome="success", concepts=["hashing"]),
                turn(2, outcome="failure", struggles=[struggle("rsa", "hashing")]),
            ],
            learner="learner-2",
            day=5,
        ),
        payload("later", [turn(0, outcome="success", concepts=["primes"])],
                learner="learner-3", day=9),
        payload("fresh", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                learner="learner-3", day=6),
    )  # fmt: skip
    assert summary.struggles_contradicted == 2
    assert _reported(db, "blames") == 0
    assert _reported(db, "fresh") == 1
    fact = next(
        x
        for x in _facts(db, e["rsa"])
        if x.edge_id == edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    )
    assert (fact.units, fact.learners) == (pytest.approx(1.0), 1)
    dials(prerequisite_drop_shown=False)
    run(db, payload("again", [turn(0, outcome="failure",
                                   struggles=[struggle("rsa", "primes"), struggle("rsa", "hashing")])],
                    learner="learner-2", day=12))  # fmt: skip
    assert _reported(db, "again") == 2


def test_learners_who_had_shown_the_target_and_were_named_missing_it_set_its_invented_term(
    db, units, database_url
):
    """Four learners succeed on primes, then fail on rsa; the extractor names primes as
    missing for two of them (contradicted: no units). Four learners who never showed primes
    fail on rsa, three of them named missing primes. Of the 8 failed sessions on rsa, 4 had
    shown primes and 2 of those were named anyway: the pair's own record expects
    (8 - 4) x 2/4 = 2 invented reports among the others, so rsa -> primes keeps 3 - 2 = 1 net
    unit, 1/(1 + k), where chance alone (0: no other report on rsa) would give 3/(3 + k).
    The last four sessions are applied by two workers at once."""
    e = topic_entries(db)
    db.commit()

    def fails(session: str, learner: str, day: int, named: bool) -> dict:
        blamed = [struggle("rsa", "primes")] if named else []
        return payload(session, [turn(0, outcome="failure", concepts=["rsa"], struggles=blamed)],
                       learner=learner, day=day)  # fmt: skip

    shown = [f"shown-{n}" for n in range(4)]
    run(db, *(payload(f"ok-{n}", [turn(0, outcome="success", concepts=["primes"])],
                      learner=who, day=1) for n, who in enumerate(shown)))  # fmt: skip
    run(db, *(fails(f"s-{n}", who, 5, named=n < 2) for n, who in enumerate(shown)))
    run(db, *(fails(f"n-{n}", f"new-{n}", 6 + n, named=n < 3) for n in range(4)), workers=2)

    failed = db.execute(
        "SELECT sessions FROM hag_concept_failures WHERE source_entry_id = %s", (e["rsa"],)
    ).fetchone()
    exposures = db.execute(
        "SELECT source_entry_id, target_entry_id, shown_sessions, shown_named"
        " FROM hag_shown_exposures"
    ).fetchall()
    assert failed["sessions"] == 8
    assert [tuple(r.values()) for r in exposures] == [(e["rsa"], e["primes"], 4, 2)]
    k = units.prerequisite_lift_k
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(1 / (1 + k))
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    terms = evidence_terms(db, edge, e["rsa"], units)
    assert terms is not None
    assert (terms["invented"], terms["chance"], terms["units"]) == pytest.approx((2.0, 0.0, 3.0))
    assert "invented 2.0000: of 8 sessions failed on its concept, 4 by learners" in explain_text(
        database_url, edge
    )


def test_one_contradicted_session_does_not_lower_an_authored_prerequisite(db, units):
    """rsa -> primes is authored at 0.9; three learners who never showed primes fail on rsa,
    one named missing primes and two missing hashing (3 units on rsa from 3 learners, so
    negative evidence may judge rsa's edges). One session by a learner who had shown primes,
    failing on rsa and named missing primes anyway, is one session: rsa -> primes keeps its
    prior (a rule that took the pair's invented term off an authored edge's own units would
    have judged it on that one report: invented (4 - 1) x 1/1 = 3 against its 1 unit)."""
    e = topic_entries(db)
    f.edge(db, e["rsa"], e["primes"], confidence=0.9)
    db.commit()

    def fails(session: str, learner: str, day: int, missing: str) -> dict:
        return payload(session, [turn(0, outcome="failure", concepts=["rsa"],
                                      struggles=[struggle("rsa", missing)])],
                       learner=learner, day=day)  # fmt: skip

    run(db, *(fails(f"n-{n}", f"new-{n}", 1 + n, m)
              for n, m in enumerate(("primes", "hashing", "hashing"))))  # fmt: skip
    run(db, payload("ok", [turn(0, outcome="success", concepts=["primes"])],
                    learner="shown", day=10),
        fails("s", "shown", 12, "primes"))  # fmt: skip
    failed = db.execute(
        "SELECT sessions FROM hag_concept_failures WHERE source_entry_id = %s", (e["rsa"],)
    ).fetchone()
    assert failed["sessions"] == 4
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(0.9)


def test_the_invented_term_is_kept_only_under_the_units_rule(db):
    """Under the seed's rules a failed session keeps no counts (nothing reads them)."""
    e = topic_entries(db)
    db.commit()
    run(db, payload("ok", [turn(0, outcome="success", concepts=["primes"])], day=1),
        payload("f", [turn(0, outcome="failure", concepts=["rsa"],
                           struggles=[struggle("rsa", "primes")])], day=2))  # fmt: skip
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite") is not None
    assert db.execute("SELECT count(*) AS n FROM hag_concept_failures").fetchone()["n"] == 0
    assert db.execute("SELECT count(*) AS n FROM hag_shown_exposures").fetchone()["n"] == 0


def _hits_and_withdrawn(db, edge_id) -> tuple[int, int]:
    row = db.execute(
        "SELECT e.hit_count, (SELECT COALESCE(sum(w.sessions), 0) FROM hag_pair_withdrawn w"
        "  WHERE (w.source_entry_id, w.target_entry_id) = (e.source_entry_id, e.target_entry_id))"
        " AS withdrawn FROM hag_edges e WHERE e.id = %s",
        (edge_id,),
    ).fetchone()
    return int(row["hit_count"]), int(row["withdrawn"])


def test_a_report_its_learner_contradicts_later_is_withdrawn(db, units, dials, database_url):
    """learner-4, learner-5 and learner-6 blame primes for rsa on day 2 (three learners, three
    units). On day 4 learner-4 succeeds on rsa without having shown primes: its report is
    withdrawn (out of the units, the learners and the hit count, counted on the edge).
    learner-5 succeeds on primes on day 3, then on rsa, and learner-6 succeeds on rsa in a turn
    whose prompt rendered the line rsa -> primes (the tutor supplied primes): their reports
    stand. With `prerequisite_drop_shown` off a later success withdraws nothing."""
    e = topic_entries(db)
    db.commit()
    blame = [turn(0, outcome="failure", concepts=["rsa"], struggles=[struggle("rsa", "primes")])]
    run(db, *(payload(f"b{n}", blame, learner=f"learner-{n}", day=2) for n in (4, 5, 6)))
    edge_id = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    fact = next(x for x in _facts(db, e["rsa"]) if x.edge_id == edge_id)
    assert (fact.units, fact.learners) == (pytest.approx(3.0), 3)
    assert _hits_and_withdrawn(db, edge_id) == (3, 0)

    summary = run(
        db,
        payload("s4", [turn(0, outcome="success", concepts=["rsa"])], learner="learner-4", day=4),
        payload("p5", [turn(0, outcome="success", concepts=["primes"])],
                learner="learner-5", day=3),
        payload("s5", [turn(0, outcome="success", concepts=["rsa"])],
                learner="learner-5", day=4),
        payload("s6", [turn(0, outcome="success", concepts=["rsa"], rendered=[str(edge_id)])],
                learner="learner-6", day=4),
    )  # fmt: skip
    assert summary.reports_withdrawn == 1
    assert [_reported(db, s) for s in ("b4", "b5", "b6")] == [0, 1, 1]
    fact = next(x for x in _facts(db, e["rsa"]) if x.edge_id == edge_id)
    assert (fact.units, fact.learners) == (pytest.approx(2.0), 2)
    assert _hits_and_withdrawn(db, edge_id) == (2, 1)
    k = units.prerequisite_lift_k
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))
    terms = evidence_terms(db, edge_id, e["rsa"], units)
    assert terms is not None and terms["withdrawn"] == 1 and terms["learners"] == 2
    assert terms["confidence"] == pytest.approx(confidence(db, e["rsa"], e["primes"]), abs=1e-9)
    assert "withdrawn: 1 report(s)" in explain_text(database_url, edge_id)
    assert totals(db) == grouped_reports(db)

    dials(prerequisite_drop_shown=False)
    run(db, payload("b7", blame, learner="learner-7", day=6))
    summary = run(
        db,
        payload("s7", [turn(0, outcome="success", concepts=["rsa"])], learner="learner-7", day=7),
    )
    assert summary.reports_withdrawn == 0 and _reported(db, "b7") == 1


def test_a_contradiction_applied_first_leaves_the_same_record(db, units):
    """learner-7's success on rsa (day 9) is applied before its day-8 session blaming primes
    for rsa: the report never reaches the record (a contradicted struggle) and is counted on
    the edge as withdrawn, as it would have been withdrawn in the other order; learner-8's
    success that ended before its report contradicts nothing, and a success on primes in
    between keeps learner-9's report."""
    e = topic_entries(db)
    db.commit()
    blame = [turn(0, outcome="failure", concepts=["rsa"], struggles=[struggle("rsa", "primes")])]
    succeed = [turn(0, outcome="success", concepts=["rsa"])]
    run(db, payload("s7", succeed, learner="learner-7", day=9),
        payload("s8", succeed, learner="learner-8", day=7),
        payload("p9", [turn(0, outcome="success", concepts=["primes"])], learner="learner-9", day=8),
        payload("s9", succeed, learner="learner-9", day=9))  # fmt: skip
    summary = run(db, payload("b8", blame, learner="learner-8", day=8),
                  payload("b9", blame, learner="learner-9", day=7),
                  payload("b7", blame, learner="learner-7", day=8))  # fmt: skip
    assert summary.struggles_contradicted == 1 and summary.reports_withdrawn == 0
    assert [_reported(db, s) for s in ("b7", "b8", "b9")] == [0, 1, 1]
    edge_id = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    assert _hits_and_withdrawn(db, edge_id) == (2, 1)


@pytest.mark.parametrize("order", ["report first", "success first"])
def test_a_contradiction_counts_on_its_pair_before_the_pair_has_an_edge(
    db, units, database_url, order
):
    """learner-7 blames primes for rsa on day 8 and succeeds on rsa on day 9. Report first,
    the report makes rsa -> primes and is withdrawn from it; success first, the struggle is
    contradicted when made and no edge of the pair exists yet. learner-8 then names the pair:
    either way its edge has 1 session and 1 withdrawn (kept by pair, migration 223), where
    the count used to be lost when the pair had no edge."""
    e = topic_entries(db)
    db.commit()
    blame = payload("b7", [turn(0, outcome="failure", concepts=["rsa"],
                                struggles=[struggle("rsa", "primes")])],
                    learner="learner-7", day=8)  # fmt: skip
    succeed = payload("s7", [turn(0, outcome="success", concepts=["rsa"])],
                      learner="learner-7", day=9)  # fmt: skip
    for p in (blame, succeed) if order == "report first" else (succeed, blame):
        run(db, p)
    run(db, reports("b8", [("rsa", "primes")], day=10) | {"learner_id": "learner-8"})
    edge_id = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    assert _hits_and_withdrawn(db, edge_id) == (1, 1)
    terms = evidence_terms(db, edge_id, e["rsa"], units)
    assert terms is not None and (terms["withdrawn"], terms["learners"]) == (1, 1)
    assert "withdrawn: 1 report(s)" in explain_text(database_url, edge_id)


def test_a_learners_withdrawn_reports_count_within_the_learners_cap(db, units):
    """rsa -> hashing is authored at 0.92; learner-5 names it in three sessions, then succeeds
    on rsa without having shown hashing: the three reports are withdrawn. The authored edge
    still reads them as the extractor naming its target, but as one learner's: 3 sessions,
    `prerequisite_learner_cap` (1) units, not 3."""
    e = topic_entries(db)
    authored = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    for day in (1, 2, 3):
        run(db, payload(f"h{day}", [turn(0, outcome="failure", concepts=["rsa"],
                                         struggles=[struggle("rsa", "hashing")])],
                        learner="learner-5", day=day))  # fmt: skip
    summary = run(db, payload("s5", [turn(0, outcome="success", concepts=["rsa"])],
                              learner="learner-5", day=4))  # fmt: skip
    assert summary.reports_withdrawn == 3
    terms = evidence_terms(db, authored, e["rsa"], units)
    assert terms is not None and terms["withdrawn"] == 3
    cap = units.prerequisite_learner_cap
    assert terms["withdrawn_units"] == pytest.approx(cap)
    assert terms["units"] == pytest.approx(cap)


@pytest.mark.parametrize("order", ["report first", "success first", "culled first"])
def test_a_withdrawn_report_counts_the_share_it_held(db, units, dials, order):
    """rsa -> hashing is authored at 0.92. learner-5's day-1 turn blames primes, hashing and
    signatures for rsa: a third of the session's unit each. On day 2 learner-5 succeeds on
    rsa having shown none of them, so all three are contradicted forward in time (withdrawn
    from the record, or never recorded when the success is applied first, or withdrawn from
    the audit when the two learned edges were culled in between). They still count for the
    authored edge as the extractor naming its concept's targets, but as the one session
    they were: the edge's own withdrawn units are 1/3 and its concept's units 1 (a whole
    unit per withdrawn report gave 1 and 3, one session counted three times)."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    authored = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    blame = payload("b5", [turn(0, outcome="failure", concepts=["rsa"],
                                struggles=[struggle("rsa", m)
                                           for m in ("primes", "hashing", "signatures")])],
                    learner="learner-5", day=1)  # fmt: skip
    succeed = payload("s5", [turn(0, outcome="success", concepts=["rsa"])],
                      learner="learner-5", day=150)  # fmt: skip
    for p in (blame, succeed) if order != "success first" else (succeed, blame):
        if order == "culled first" and p is succeed:
            dials(cull_max_confidence=0.99)
            assert sweeps.sweep(db, as_of=T0 + timedelta(days=100)).culled == 2
            dials(cull_max_confidence=units.cull_max_confidence)
            kept = "SELECT count(*) AS n FROM hag_edge_audit_reports"
            assert db.execute(kept).fetchone()["n"] == 2
        run(db, p)
    assert _reported(db, "b5") == 0
    assert _hits_and_withdrawn(db, authored) == (0, 1)
    terms = evidence_terms(db, authored, e["rsa"], units)
    assert terms is not None and terms["withdrawn"] == 1
    assert terms["withdrawn_units"] == pytest.approx(1 / 3)
    assert terms["concept_units"] == pytest.approx(1.0)
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)


@pytest.mark.parametrize("cap", [1.0, 2.0])
def test_a_learners_live_and_withdrawn_reports_of_a_pair_share_one_cap(db, units, dials, cap):
    """rsa -> hashing is authored at 0.92. learner-5 names it on day 1, succeeds on rsa on day 2
    (the report is withdrawn) and names it again on day 3 (recorded): two sessions of one
    learner, one live and one withdrawn, so the authored edge's own evidence is
    min(cap, 2) units: 1 at cap 1 (each part capped on its own would give 2), 2 at cap 2."""
    dials(prerequisite_learner_cap=cap)
    e = topic_entries(db)
    authored = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()

    def names(session: str, day: int) -> None:
        run(db, payload(session, [turn(0, outcome="failure", concepts=["rsa"],
                                       struggles=[struggle("rsa", "hashing")])],
                        learner="learner-5", day=day))  # fmt: skip

    names("h1", 1)
    run(db, payload("s2", [turn(0, outcome="success", concepts=["rsa"])],
                    learner="learner-5", day=2))  # fmt: skip
    names("h3", 3)
    now = settings.current()
    assert now.prerequisite_learner_cap == cap
    terms = evidence_terms(db, authored, e["rsa"], now)
    assert terms is not None and terms["withdrawn"] == 1
    assert terms["units"] == pytest.approx(min(cap, 2.0))
    assert terms["concept_units"] == pytest.approx(min(cap, 2.0))


def test_a_culled_pairs_reports_count_as_a_live_edges(db, units):
    """rsa -> hashing is authored at 0.92. learner-1 names rsa -> primes in three sessions (one
    learner: held) and the nightly culls it, keeping the three reports beside its audit row.
    rsa's units over its live and culled prerequisites, which judge the authored edge, count
    them as a live edge's: one learner's, within the cap (1 unit), not a unit a session.
    learner-1 then succeeds on rsa without primes: the kept reports are withdrawn, and the
    pair still counts them (1 unit) though its edge is gone; they used to be read by nothing
    once the edge was culled."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    authored = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    for day in (0, 1, 2):
        run(db, reports(f"a{day}", [("rsa", "primes")], day=day) | {"learner_id": "learner-1"})
    assert sweeps.sweep(db, as_of=T0 + timedelta(days=100)).culled == 1
    cap = units.prerequisite_learner_cap
    terms = evidence_terms(db, authored, e["rsa"], units)
    assert terms is not None and terms["concept_units"] == pytest.approx(cap)
    run(db, payload("s1", [turn(0, outcome="success", concepts=["rsa"])],
                    learner="learner-1", day=101))  # fmt: skip
    assert db.execute("SELECT count(*) AS n FROM hag_edge_audit_reports").fetchone()["n"] == 0
    terms = evidence_terms(db, authored, e["rsa"], units)
    assert terms is not None and terms["concept_units"] == pytest.approx(cap)
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)


@pytest.mark.parametrize("order", ["report first", "success first"])
def test_a_contradicted_pair_keeps_its_part_of_the_session(db, units, order):
    """learner-3's day-2 turn blames primes and hashing for rsa; its day-3 session succeeds
    on rsa and hashing. Applied in order, both pairs are recorded at half the unit and the
    success withdraws rsa -> primes; applied the other way, rsa -> primes is contradicted when
    made. Either way rsa -> hashing keeps half the session's unit, not the whole of it."""
    e = topic_entries(db)
    db.commit()
    blame = payload("b3", [turn(0, outcome="failure", concepts=["rsa"],
                                struggles=[struggle("rsa", "primes"), struggle("rsa", "hashing")])],
                    learner="learner-3", day=2)  # fmt: skip
    succeed = payload("s3", [turn(0, outcome="success", concepts=["rsa", "hashing"])],
                      learner="learner-3", day=3)  # fmt: skip
    for p in (blame, succeed) if order == "report first" else (succeed, blame):
        run(db, p)
    edge_id = edge_row(db, e["rsa"], e["hashing"], "prerequisite")["id"]
    fact = next(x for x in _facts(db, e["rsa"]) if x.edge_id == edge_id)
    assert (fact.units, fact.learners) == (pytest.approx(0.5), 1)
    assert _reported(db, "b3") == 1


@pytest.mark.parametrize("success", ["a later session", "a later turn"])
def test_a_withdrawn_report_still_supports_an_authored_prerequisite(db, units, success):
    """rsa -> hashing (authored 0.92): three learners name primes on rsa, learner-5 names
    hashing, and learner-5 then succeeds on rsa without having shown hashing. In a later
    session the report is withdrawn (no evidence for a learned pair), yet negative evidence
    still reads it: the extractor named hashing on a session that failed rsa, so the authored
    edge keeps 0.92. In a later turn of the same session the struggle counts nothing (that
    session did not fail rsa): the concept's 3 units from 3 learners judge the edge."""
    e = topic_entries(db)
    authored = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    for n in (2, 3, 4):
        run(db, payload(f"o{n}", [turn(0, outcome="failure", struggles=[struggle("rsa", "primes")])],
                        learner=f"learner-{n}", day=n))  # fmt: skip
    fails = turn(0, outcome="failure", struggles=[struggle("rsa", "hashing")])
    if success == "a later turn":
        succeeds = turn(1, outcome="success", concepts=["rsa"])
        summary = run(db, payload("h5", [fails, succeeds], learner="learner-5", day=5))
        assert (summary.struggles_contradicted, summary.reports_withdrawn) == (1, 0)
        assert _hits_and_withdrawn(db, authored) == (0, 0)
        assert confidence(db, e["rsa"], e["hashing"]) < 0.5
        return
    run(db, payload("h5", [fails], learner="learner-5", day=5))
    summary = run(db, payload("s5", [turn(0, outcome="success", concepts=["rsa"])],
                              learner="learner-5", day=6))  # fmt: skip
    assert summary.reports_withdrawn == 1
    assert _reported(db, "h5") == 0
    assert _hits_and_withdrawn(db, authored) == (0, 1)
    assert confidence(db, e["rsa"], e["hashing"]) == pytest.approx(0.92)
    terms = evidence_terms(db, authored, e["rsa"], units)
    assert terms is not None and not terms["judged"] and terms["units"] == pytest.approx(1.0)


def test_a_restored_prerequisite_reads_its_evidence_as_before_the_cull(db, units, dials):
    """rsa -> primes, named by learner-1 and learner-2, is culled (the cull's confidence
    ceiling raised so a supported edge qualifies): its two reports are copied beside its
    audit row, by learner. Restored, the edge has them back, so its terms are those it had
    before the cull (2 learners, nothing unattributed; without them its 2 sessions would be
    one unattributed learner), the sums kept at write time are as before, and the copies are
    gone; its concepts wait for the nightly's re-weigh."""
    from hag.nightly import audit, sweeps

    e = topic_entries(db)
    db.commit()
    for n in (1, 2):
        run(db, reports(f"c{n}", [("rsa", "primes")], day=n) | {"learner_id": f"learner-{n}"})
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    before = evidence_terms(db, edge, e["rsa"], units)
    assert before is not None and (before["learners"], before["unattributed"]) == (2, 0)
    kept = totals(db)
    dials(cull_max_confidence=0.99)
    night = sweeps.sweep(db, as_of=T0 + timedelta(days=200))
    assert night.culled == 1 and edge_row(db, e["rsa"], e["primes"], "prerequisite") is None
    copied = db.execute(
        "SELECT r.learner_id, r.session_id FROM hag_edge_audit_reports r "
        "JOIN hag_edge_audit a USING (audit_id) WHERE a.edge_id = %s ORDER BY 1",
        (edge,),
    ).fetchall()
    assert [(r["learner_id"], r["session_id"]) for r in copied] == [
        ("learner-1", "c1"),
        ("learner-2", "c2"),
    ]
    assert db.execute("SELECT count(*) AS n FROM hag_edge_learner_reports").fetchone()["n"] == 0
    assert audit.restore(edge_id=edge, conn=db).restored == [edge]
    assert evidence_terms(db, edge, e["rsa"], units) == before
    # its concepts wait for the nightly's re-weigh (migration 224), rsa's and primes'
    pending = {r["source_entry_id"] for r in db.execute("SELECT * FROM hag_reweigh_pending")}
    assert pending == {e["rsa"], e["primes"]}
    assert totals(db) == kept == grouped_reports(db)
    assert db.execute("SELECT count(*) AS n FROM hag_edge_audit_reports").fetchone()["n"] == 0


def _two_reports_culled(db, dials):
    """rsa -> primes named by learner-1 and learner-2, then culled (the cull's ceiling raised
    so a supported edge qualifies) with its two reports kept: the topic's entries and the
    culled edge's id. The ceiling stays raised."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    db.commit()
    for n in (1, 2):
        run(db, reports(f"c{n}", [("rsa", "primes")], day=n) | {"learner_id": f"learner-{n}"})
    culled = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    dials(cull_max_confidence=0.99)
    assert sweeps.sweep(db, as_of=T0 + timedelta(days=200)).culled == 1
    return e, culled


@contextlib.contextmanager
def holding_audit_row(edge_id):
    """An operator's connection holding a culled edge's audit row locked, as a restore or its
    dry run does, for the body of the block; rolled back (the lock let go) only by the body."""
    from hag.storage import db as hdb

    with hdb.pool().connection() as operator:
        operator.execute(
            "SELECT audit_id FROM hag_edge_audit WHERE edge_id = %s FOR UPDATE", (edge_id,)
        ).fetchall()
        yield operator


@pytest.mark.parametrize("restore", ["refused", "dry run"])
def test_reports_a_restore_held_are_resumed_by_the_nightly(db, units, dials, restore):
    """rsa -> primes, named by learner-1 and learner-2, is culled with its two reports kept.
    An operator's restore (or its dry run) holds the audit row while learner-3's session
    learns the pair again: the session cannot take the row (SKIP LOCKED), so the new edge
    starts from learner-3's report alone, and the restore then refuses (the pair has an edge
    again) or rolls back. The kept reports would wait beside the audit row for ever; the
    session writes the resumption it skipped instead, and the next nightly makes it: three
    sessions from three learners, as when no restore ran."""
    from hag.nightly import audit, sweeps

    e, culled = _two_reports_culled(db, dials)
    dials(cull_max_confidence=units.cull_max_confidence)
    db.commit()
    with holding_audit_row(culled) as operator:
        run(db, reports("c3", [("rsa", "primes")], day=201) | {"learner_id": "learner-3"})
        operator.rollback()
        if restore == "refused":
            refused = audit.restore(edge_id=culled, conn=operator).refused
            assert [r.edge_id for r in refused] == [culled]
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")
    assert edge["id"] != culled and edge["hit_count"] == 1
    assert evidence_terms(db, edge["id"], e["rsa"], units)["learners"] == 1
    waiting = db.execute("SELECT audit_id, edge_id FROM hag_resume_pending").fetchall()
    assert [r["edge_id"] for r in waiting] == [edge["id"]]
    db.commit()

    forecast = sweeps.sweep(db, as_of=T0 + timedelta(days=202), dry_run=True)
    assert forecast.reports_resumed == 2  # the two kept reports, made and rolled back
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite")["hit_count"] == 1
    assert db.execute("SELECT count(*) AS n FROM hag_resume_pending").fetchone()["n"] == 1
    night = sweeps.sweep(db, as_of=T0 + timedelta(days=202))
    assert night.reports_resumed == 2 and night.culled == 0
    edge = edge_row(db, e["rsa"], e["primes"], "prerequisite")
    assert edge["hit_count"] == 3
    terms = evidence_terms(db, edge["id"], e["rsa"], units)
    assert terms is not None and (terms["learners"], terms["unattributed"]) == (3, 0)
    assert terms["confidence"] == pytest.approx(edge["confidence"], abs=1e-9)
    assert db.execute("SELECT count(*) AS n FROM hag_edge_audit_reports").fetchone()["n"] == 0
    resumed = db.execute(
        "SELECT resumed_edge_id, resumed_sessions FROM hag_edge_audit WHERE edge_id = %s",
        (culled,),
    ).fetchone()
    assert (resumed["resumed_edge_id"], resumed["resumed_sessions"]) == (edge["id"], 2)
    assert db.execute("SELECT count(*) AS n FROM hag_resume_pending").fetchone()["n"] == 0


def test_a_pair_learned_again_under_the_lift_rule_keeps_its_culled_reports(db, units, dials):
    """rsa -> primes is culled with two kept reports, then the rule is the lift rule (which
    resumes nothing) when learner-3 learns the pair again, and rsa is flagged for the
    nightly (as a restore or a crossing would): the nightly re-weighs rsa but leaves the
    kept reports in the audit, as a session under that rule does; only a resumption a
    session skipped is made by the nightly."""
    from hag.nightly import sweeps

    e, culled = _two_reports_culled(db, dials)
    dials(cull_max_confidence=units.cull_max_confidence, prerequisite_confidence_rule="lift")
    run(db, reports("c3", [("rsa", "primes")], day=201) | {"learner_id": "learner-3"})
    db.execute(
        "INSERT INTO hag_reweigh_pending (source_entry_id, flagged_at) VALUES (%s, now())",
        (e["rsa"],),
    )
    db.commit()
    night = sweeps.sweep(db, as_of=T0 + timedelta(days=202))
    assert night.pending_reweighed == 1 and night.reports_resumed == 0
    kept = db.execute(
        "SELECT count(*) AS n FROM hag_edge_audit_reports r JOIN hag_edge_audit a"
        " USING (audit_id) WHERE a.edge_id = %s AND a.resumed_at IS NULL",
        (culled,),
    ).fetchone()
    assert kept["n"] == 2
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite")["hit_count"] == 1


def test_a_pair_learned_again_resumes_the_reports_of_its_culled_edge(db, units, dials):
    """learner-1 names rsa -> primes: one learner, held below the cull's ceiling, culled at
    90 days with its report kept beside the audit row. learner-1 names it again: the new
    edge has learner-1's two sessions and is still one learner (held). learner-2 names it:
    two learners, as if it had never been culled (and the pair's withdrawn count, kept by
    pair, reads the same). The culled edge
    also carried 2 sessions no learner is recorded for: they stay with its audit row, which
    records the resumption (when, the session, the edge, the 1 session that went; `hag
    history` shows it after the cull) and which a restore now refuses. Under the seed
    profile nothing resumes: the pair starts from its new session (the seed's own edge), and
    its culled reports stay."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    db.commit()

    def names(session: str, learner: str, day: int, pair=("rsa", "primes")) -> None:
        run(db, reports(session, [pair], day=day) | {"learner_id": learner})

    names("a1", "learner-1", 0)
    held = units.edge_min_confidence / units.prerequisite_min_learners
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)
    first = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    # a report of the pair withdrawn before (a later success of its learner): kept by pair
    db.execute(
        "INSERT INTO hag_pair_withdrawn VALUES (%s, %s, 'learner-9', 1, 1)", (e["rsa"], e["primes"])
    )
    db.execute("UPDATE hag_edges SET hit_count = hit_count + 2 WHERE id = %s", (first,))
    db.commit()
    assert sweeps.sweep(db, as_of=T0 + timedelta(days=100)).culled == 1
    names("a2", "learner-1", 101)
    again = edge_row(db, e["rsa"], e["primes"], "prerequisite")
    assert again["id"] != first and again["hit_count"] == 2
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)
    names("b1", "learner-2", 102)
    terms = evidence_terms(db, again["id"], e["rsa"], units)
    assert terms is not None
    assert (terms["learners"], terms["unattributed"], terms["units"]) == (2, 0, 2.0)
    assert terms["withdrawn"] == 1
    k = units.prerequisite_lift_k
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(2 / (2 + k))
    audited = db.execute("SELECT * FROM hag_edge_audit WHERE edge_id = %s", (first,)).fetchone()
    assert audited["restored_at"] is None and audited["resumed_at"] is not None
    resumed = (audited["resumed_session_id"], audited["resumed_edge_id"])
    assert resumed == ("a2", again["id"])
    assert audited["hit_count"] - audited["resumed_sessions"] == 2  # the unattributed stay
    from hag.nightly import audit
    from hag.storage.history import confidence_history

    events = confidence_history(db, str(first))
    assert events[-2]["reason"].startswith("culled by the nightly sweep")
    assert events[-1]["reason"].startswith(f"its reports resumed by edge {again['id']}")
    assert events[-1]["session_id"] == "a2" and events[-1]["at"] >= events[-2]["at"]
    refused = audit.restore(edge_id=first, conn=db).refused
    assert [r.reason for r in refused] == [
        f"its reports went to edge {again['id']}, which learned the pair again"
    ]
    assert totals(db) == grouped_reports(db)

    names("h1", "learner-1", 0, ("hashing", "primes"))
    hashing = edge_row(db, e["hashing"], e["primes"], "prerequisite")["id"]
    assert sweeps.sweep(db, as_of=T0 + timedelta(days=200)).culled >= 1
    settings.apply_profile(db, "seed", by="test")
    db.commit()
    names("h2", "learner-2", 201, ("hashing", "primes"))
    assert edge_row(db, e["hashing"], e["primes"], "prerequisite")["hit_count"] == 1
    kept = db.execute(
        "SELECT count(*) AS n FROM hag_edge_audit_reports r JOIN hag_edge_audit a "
        "USING (audit_id) WHERE a.edge_id = %s AND a.restored_at IS NULL",
        (hashing,),
    ).fetchone()["n"]
    assert kept == 1


def test_an_edge_deleted_by_hand_keeps_its_reports_as_evidence_but_never_resumes(db, units, dials):
    """learner-1 names rsa -> primes; an operator deletes the edge by hand. Its audit row
    (`manual delete`) keeps learner-1's report, which still counts in rsa's units as a
    culled edge's does (the extractor named the pair): the authored rsa -> hashing reads
    two units on rsa once learner-2 names the pair again. The new edge has one session and
    one learner (held), and the deleted edge's report stays beside its audit row, which
    neither a restore nor the new edge takes back."""
    from hag.errors import NotFoundError
    from hag.nightly import audit

    e = topic_entries(db)
    authored = f.edge(db, e["rsa"], e["hashing"], confidence=0.92)
    db.commit()
    run(db, reports("a1", [("rsa", "primes")], day=0) | {"learner_id": "learner-1"})
    first = edge_row(db, e["rsa"], e["primes"], "prerequisite")["id"]
    db.execute("DELETE FROM hag_edges WHERE id = %s", (first,))
    db.commit()
    run(db, reports("b1", [("rsa", "primes")], day=1) | {"learner_id": "learner-2"})
    again = edge_row(db, e["rsa"], e["primes"], "prerequisite")
    assert again["id"] != first and again["hit_count"] == 1
    held = units.edge_min_confidence / units.prerequisite_min_learners
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)
    terms = evidence_terms(db, again["id"], e["rsa"], units)
    assert terms is not None and (terms["learners"], terms["units"]) == (1, 1.0)
    terms = evidence_terms(db, authored, e["rsa"], units)
    assert terms is not None and terms["concept_units"] == pytest.approx(2.0)
    audited = db.execute(
        "SELECT a.reason, a.resumed_at, count(r.*) AS kept FROM hag_edge_audit a"
        " LEFT JOIN hag_edge_audit_reports r USING (audit_id) WHERE a.edge_id = %s"
        " GROUP BY a.reason, a.resumed_at",
        (first,),
    ).fetchone()
    db.rollback()
    assert (audited["reason"], audited["resumed_at"], audited["kept"]) == ("manual delete", None, 1)
    with pytest.raises(NotFoundError):
        audit.restore(edge_id=first, conn=db)


@pytest.mark.fast
def test_the_history_rows_terms_are_asdicts_terms():
    """The re-weigh writes each move's terms as `asdict` would give them (its own shallow
    copy is faster), the nested terms of an enriched edge read as a learned one's included."""
    from dataclasses import asdict, fields

    from hag.evidence import model, reweigh

    def filled(**given):
        names = [f.name for f in fields(model.EvidenceTerms)]
        return model.EvidenceTerms(**{n: given.get(n, float(i)) for i, n in enumerate(names)})

    inner = filled(as_learned=None, reversal=(1, 2))
    outer = filled(as_learned=inner)
    assert reweigh._shallow(outer) == asdict(outer)
    assert reweigh._shallow(outer)["as_learned"] == asdict(inner)


def test_a_culled_edges_report_contradicted_later_is_not_resumed(db, units, dials):
    """learner-1 names rsa -> primes (one learner, held) and it is culled, the report kept
    beside its audit row. learner-1 then succeeds on rsa without primes: the kept report is
    contradicted forward in time, as a live one would be, and leaves the audit row. learner-2
    names the pair: the new edge has one learner, held, not the two a resumed contradicted
    report would give it (the order of the cull and the success no longer matters)."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    db.commit()
    run(db, reports("a1", [("rsa", "primes")], day=0) | {"learner_id": "learner-1"})
    assert sweeps.sweep(db, as_of=T0 + timedelta(days=100)).culled == 1
    kept = "SELECT count(*) AS n FROM hag_edge_audit_reports"
    assert db.execute(kept).fetchone()["n"] == 1
    culled = db.execute("SELECT edge_id, hit_count FROM hag_edge_audit").fetchone()
    run(db, payload("s1", [turn(0, outcome="success", concepts=["rsa"])],
                    learner="learner-1", day=101))  # fmt: skip
    assert db.execute(kept).fetchone()["n"] == 0
    # withdrawn as a live report is: out of the audit row's sessions (a restore would not
    # bring it back as a session no learner is recorded for), counted on its pair
    audited = db.execute("SELECT hit_count FROM hag_edge_audit").fetchone()["hit_count"]
    assert audited == culled["hit_count"] - 1
    withdrawn = db.execute("SELECT * FROM hag_pair_withdrawn").fetchall()
    assert [tuple(w.values()) for w in withdrawn] == [(e["rsa"], e["primes"], "learner-1", 1, 1.0)]
    run(db, reports("b1", [("rsa", "primes")], day=102) | {"learner_id": "learner-2"})
    again = edge_row(db, e["rsa"], e["primes"], "prerequisite")
    terms = evidence_terms(db, again["id"], e["rsa"], units)
    assert terms is not None and terms["learners"] == 1
    held = units.edge_min_confidence / units.prerequisite_min_learners
    assert confidence(db, e["rsa"], e["primes"]) == pytest.approx(held)


def test_a_session_that_learns_a_culled_pair_again_still_withdraws_what_it_contradicts(
    db, units, dials
):
    """learner-1 names rsa -> primes and it is culled, the report kept beside its audit row.
    learner-1's next session succeeds on rsa without primes (the kept report is contradicted
    forward in time), then fails rsa naming primes: the pair is learned again, and the new
    edge would resume the kept report. The withdrawal is read under the session's locks,
    after its own writes: the report is withdrawn wherever it now stands, and the new edge
    holds the new session's report alone."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    db.commit()
    run(db, reports("a1", [("rsa", "primes")], day=0) | {"learner_id": "learner-1"})
    assert sweeps.sweep(db, as_of=T0 + timedelta(days=100)).culled == 1
    turns = [
        turn(0, outcome="success", concepts=["rsa"]),
        turn(1, outcome="failure", concepts=["rsa"], struggles=[struggle("rsa", "primes")]),
    ]
    run(db, payload("s1", turns, learner="learner-1", day=101))
    assert db.execute("SELECT count(*) AS n FROM hag_edge_audit_reports").fetchone()["n"] == 0
    withdrawn = db.execute("SELECT * FROM hag_pair_withdrawn").fetchall()
    assert [tuple(w.values()) for w in withdrawn] == [(e["rsa"], e["primes"], "learner-1", 1, 1.0)]
    again = edge_row(db, e["rsa"], e["primes"], "prerequisite")
    sessions = db.execute(
        "SELECT session_id FROM hag_edge_learner_reports WHERE edge_id = %s", (again["id"],)
    ).fetchall()
    assert [r["session_id"] for r in sessions] == ["s1"]
    assert again["hit_count"] == 1


def test_a_reweigh_never_rests_on_the_confidence_reinforcement_gave_a_moment_before(db, units):
    """rsa -> primes is named by learner-1 and learner-2, rsa -> hashing by learner-4;
    learner-3 names primes -> rsa in three sessions (one learner: held). The third session's
    reinforcement raises primes -> rsa to the seed's 3-hit floor (0.6) before the re-weigh
    puts it back: rsa -> primes, re-weighed in the same pass, must not count its reports as
    reversals on that passing value. Every stored prerequisite equals its explained terms."""
    e = topic_entries(db)
    db.commit()
    for n, (c, m) in enumerate([("rsa", "primes"), ("rsa", "primes"), ("rsa", "hashing")]):
        run(db, payload(f"a{n}", [turn(0, outcome="failure", struggles=[struggle(c, m)])],
                        learner=f"learner-{(1, 2, 4)[n]}", day=n))  # fmt: skip
    for n in range(3):
        run(db, payload(f"b{n}", [turn(0, outcome="failure", struggles=[struggle("primes", "rsa")])],
                        learner="learner-3", day=10 + n))  # fmt: skip
    assert confidence(db, e["primes"], e["rsa"]) < units.prerequisite_lift_noise_held_min
    rows = db.execute(
        "SELECT id, source_entry_id, confidence FROM hag_edges WHERE edge_type = 'prerequisite'"
    ).fetchall()
    for r in rows:
        terms = evidence_terms(db, r["id"], r["source_entry_id"], units)
        assert terms is not None
        assert abs(terms["confidence"] - r["confidence"]) <= 1e-9, (r, terms)


@pytest.mark.fast
def test_history_terms_store_a_non_finite_term_as_null_even_nested():
    """jsonb has no infinity: an enriched edge's terms read as a learned one's can hold one
    (a reverse authored at 1.0), and the write would fail on it."""
    import json

    from hag.evidence import store

    terms = {"reverse": float("inf"), "as_learned": {"reverse": float("inf"), "k": 1.0}}
    assert json.loads(json.dumps(store.finite_terms(terms))) == {
        "reverse": None, "as_learned": {"reverse": None, "k": 1.0}}  # fmt: skip


def test_a_move_outside_the_sessions_concepts_waits_for_the_nightly(db, units, database_url):
    """learner-1 and learner-2 name hashing on primes, learner-3 and learner-4 name rsa on
    primes (two learners: their units count against rsa -> primes); then learner-5 to -8 name
    primes on rsa, and a nightly runs before the eighth. The eighth session lifts rsa ->
    primes past `prerequisite_lift_noise_held_min` (its reinforcement to the seed's 0.6 first,
    then the re-weigh: the move counts from before both), so primes' reports naming rsa
    become reversals and primes -> hashing's chance grows; but the session locked rsa's
    edges, not primes'. primes is flagged (migration 224): `hag explain` says its
    stored value waits, the next nightly re-weighs it and deletes the flag, and then every
    prerequisite equals its terms."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    db.commit()
    named = [("primes", "hashing")] * 2 + [("primes", "rsa")] * 2 + [("rsa", "primes")] * 4
    for n, pair in enumerate(named, start=1):
        if n == 8:
            sweeps.sweep(db, as_of=T0 + timedelta(days=7, hours=12))
            assert db.execute("SELECT count(*) AS n FROM hag_reweigh_pending").fetchone()["n"] == 0
            assert confidence(db, e["rsa"], e["primes"]) < units.prerequisite_lift_noise_held_min
        run(db, reports(f"r{n}", [pair], day=n) | {"learner_id": f"learner-{n}"})
    assert confidence(db, e["rsa"], e["primes"]) >= units.prerequisite_lift_noise_held_min
    edge = edge_row(db, e["primes"], e["hashing"], "prerequisite")
    terms = evidence_terms(db, edge["id"], e["primes"], units)
    assert terms is not None and terms["noise_share"] > 0
    assert abs(terms["confidence"] - edge["confidence"]) > 1e-6  # what the session left
    pending = db.execute("SELECT source_entry_id FROM hag_reweigh_pending").fetchall()
    assert [r["source_entry_id"] for r in pending] == [e["primes"]]
    assert "waits for the nightly's re-weigh" in explain_text(database_url, edge["id"])

    night = sweeps.sweep(db, as_of=T0 + timedelta(days=10))
    assert night.culled == 0 and night.pending_reweighed == 1
    assert db.execute("SELECT count(*) AS n FROM hag_reweigh_pending").fetchone()["n"] == 0
    assert confidence(db, e["primes"], e["hashing"]) == pytest.approx(terms["confidence"])
    for r in db.execute(
        "SELECT id, source_entry_id, confidence FROM hag_edges WHERE edge_type = 'prerequisite'"
    ).fetchall():
        now = evidence_terms(db, r["id"], r["source_entry_id"], units)
        assert now is not None and abs(now["confidence"] - r["confidence"]) <= 1e-9, (r, now)
    assert "waits for the nightly's re-weigh" not in explain_text(database_url, edge["id"])


def test_a_culled_walked_prerequisite_flags_the_concepts_it_supported(db, units):
    """hashing -> primes is learned, walked (0.32) and idle, so the nightly culls it; rsa has
    reports naming hashing (two learners: rsa's own edges stand), which supported rsa ->
    primes while hashing -> primes was walked. The cull re-weighs hashing's edges, not rsa's:
    rsa is flagged for the next night."""
    from hag.nightly import sweeps

    e = topic_entries(db)
    f.edge(db, e["hashing"], e["primes"], confidence=0.32, source_type="learned",
           created_at=T0 - timedelta(days=60))  # fmt: skip
    db.commit()
    for n in (1, 2):
        run(db, reports(f"r{n}", [("rsa", "primes")], day=n) | {"learner_id": f"learner-{n}"})
    for n in (3, 4):
        run(db, reports(f"h{n}", [("rsa", "hashing")], day=n) | {"learner_id": f"learner-{n}"})
    db.execute("DELETE FROM hag_reweigh_pending")
    db.commit()
    assert sweeps.sweep(db, as_of=T0 + timedelta(days=100)).culled == 1
    assert edge_row(db, e["hashing"], e["primes"], "prerequisite") is None
    pending = db.execute("SELECT DISTINCT source_entry_id FROM hag_reweigh_pending").fetchall()
    assert e["rsa"] in [r["source_entry_id"] for r in pending]


@pytest.mark.parametrize("start", ["hi", "above hi"])
def test_two_edges_deciding_each_other_move_one_at_a_time(db, units, monkeypatch, start):
    """rsa -> primes and primes -> rsa, learned at `hi` (or above it, a value the model does
    not give, as an edge stored by older rules), each weighed here as `lo` while the
    other stands at `prerequisite_lift_noise_held_min` or more and `hi` below it (the model
    is wrapped to make the two decide each other; no evidence in the topic does so on its
    own). Weighed side by side, both fall to `lo`, then both rise to `hi`, pass after pass,
    and the re-weigh used to stop with both where the other's value says they should not be
    and flag them for the nightly, which would swap them again. Moved one at a time, the
    second is weighed against the first's new value: they settle at `hi` and `lo` (the
    lower id moves first), each equal to what its terms give beside the other, and nothing
    is flagged."""
    import dataclasses

    from hag.evidence import reweigh

    held_min = units.prerequisite_lift_noise_held_min
    lo, hi = held_min / 2, (held_min + 1) / 2
    real = model.unit_terms

    def deciding(fact, dials):
        value = lo if (fact.reverse_confidence or 0.0) >= held_min else hi
        return dataclasses.replace(real(fact, dials), confidence=value)

    monkeypatch.setattr(model, "unit_terms", deciding)
    e = topic_entries(db)
    stored_at = hi if start == "hi" else (hi + 1) / 2
    ab = f.edge(db, e["rsa"], e["primes"], confidence=stored_at, source_type="learned")
    ba = f.edge(db, e["primes"], e["rsa"], confidence=stored_at, source_type="learned")
    moved = reweigh.reweigh_prerequisites(
        db, [e["rsa"], e["primes"]], units, at=T0, reason="test: settle"
    )
    first, second = sorted([ab, ba], key=str)
    stored = {i: float(db.execute("SELECT confidence FROM hag_edges WHERE id = %s", (i,))
                       .fetchone()["confidence"]) for i in (ab, ba)}  # fmt: skip
    assert stored == {first: pytest.approx(hi), second: pytest.approx(lo)}
    assert moved == (1 if start == "hi" else 2)
    assert db.execute("SELECT count(*) AS n FROM hag_reweigh_pending").fetchone()["n"] == 0
    db.rollback()
