"""The evidence profile in session-end processing and the nightly run (issue 14), on the real
database: lift, negative evidence, baseline grading, the reprieve, `hag settings profile`, and
sibling re-weighing under concurrent workers."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import timedelta

import pytest

from hag import settings
from hag.nightly import sweeps
from hag.session.process import process_pending
from hag.session.queue import apply_pending_session
from hag.session.steps import Caches
from hag.session.summary import ProcessSummary
from tests import factories as f
from tests.fix_db import reset_database
from tests.fix_session import EARLIER_ROUNDS, memory
from tests.session_builders import T0, edge_row, entry_row, ingest, payload, run, turn

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

CONCEPTS = ["rsa", "modular-arithmetic", "primes", "hashing", "signatures", "key-exchange"]


def use_evidence(db):
    """The evidence profile set in the test database (and the cache dropped), with the
    rules' values of the earlier rounds (EARLIER_ROUNDS), whose arithmetic these tests pin;
    the dials the profile changed."""
    changed = settings.apply_profile(db, "evidence", by="test")
    for key, value in EARLIER_ROUNDS.items():
        settings.set_value(db, key, value, by="test")
    db.commit()
    settings.invalidate()
    return changed


@pytest.fixture
def evidence(db):
    changed = use_evidence(db)
    assert {k for k, _, _ in changed} >= {"prerequisite_confidence_rule", "edge_grading_rule"}
    return changed


@pytest.fixture
def by_sessions(evidence):
    """The lift rule, every session counting 1: its ladder and chance as the first three
    rounds measured them."""
    return evidence


def topic_entries(db, confidence: float = 0.8):
    """One public pattern entry per concept, created before the sessions (a topic of 6)."""
    return {
        slug: f.entry(
            db, concept_slug=slug, confidence=confidence, created_at=T0 - timedelta(days=30)
        )
        for slug in CONCEPTS
    }


def struggle(concept: str, missing: str) -> dict[str, str]:
    return {"concept_slug": concept, "missing_slug": missing, "evidence": "I never got that"}


def reports(session: str, pairs, day: int = 0):
    """One session whose failed turn reports each (concept, missing) pair once."""
    return payload(
        session,
        [turn(0, outcome="failure", struggles=[struggle(c, m) for c, m in pairs])],
        day=day,
    )


def test_lift_gives_the_seed_ladder_to_an_uncontested_learned_prerequisite(db, by_sessions):
    """Reported in 1, 2, 3 sessions and nothing else on rsa: 1/3, 1/2, 3/5."""
    e = topic_entries(db)
    db.commit()
    got = []
    for day in range(3):
        run(db, reports(f"s{day}", [("rsa", "primes")], day=day))
        got.append(edge_row(db, e["rsa"], e["primes"], "prerequisite")["confidence"])
    assert got == pytest.approx([1 / 3, 1 / 2, 3 / 5])


def test_a_new_report_on_the_same_concept_reweighs_its_siblings(db, by_sessions):
    """rsa -> primes at 3 reports (0.6) falls when 4 reports on rsa name other concepts:
    chance = 4 / 8 (the evidence profile's spread), h' = 2.5 -> 2.5 / 4.5; the other edges
    are re-weighed too."""
    e = topic_entries(db)
    db.commit()
    run(db, *(reports(f"p{d}", [("rsa", "primes")], day=d) for d in range(3)))
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite")["confidence"] == pytest.approx(0.6)
    others = [
        ("rsa", "hashing"),
        ("rsa", "signatures"),
        ("rsa", "key-exchange"),
        ("rsa", "hashing"),
    ]
    run(db, *(reports(f"o{d}", [pair], day=10 + d) for d, pair in enumerate(others)))
    primes = edge_row(db, e["rsa"], e["primes"], "prerequisite")["confidence"]
    assert primes == pytest.approx(2.5 / 4.5)
    # rsa -> hashing: h = 2, chance = 5 / 8, h' = 1.375 -> 1.375 / 3.375
    hashing = edge_row(db, e["rsa"], e["hashing"], "prerequisite")["confidence"]
    assert hashing == pytest.approx(1.375 / 3.375)


def test_the_reverse_direction_counts_against_a_learned_prerequisite(db, by_sessions):
    """primes -> rsa reported twice, after rsa -> primes three times: 2 - 3 < 0 -> the floor;
    and rsa -> primes (re-weighed as the reverse of a reported edge) drops to h' = 1."""
    e = topic_entries(db)
    db.commit()
    run(db, *(reports(f"a{d}", [("rsa", "primes")], day=d) for d in range(3)))
    run(db, *(reports(f"b{d}", [("primes", "rsa")], day=5 + d) for d in range(2)))
    assert edge_row(db, e["primes"], e["rsa"], "prerequisite")["confidence"] == pytest.approx(0.05)
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite")["confidence"] == pytest.approx(1 / 3)


def test_learned_prerequisites_are_not_outcome_graded_under_lift(db, evidence):
    """A rendered learned prerequisite keeps its evidence confidence through a failed turn,
    and its traversal still counts; under the seed profile the same turn takes 0.05."""
    e = topic_entries(db)
    edge_id = f.edge(db, e["rsa"], e["primes"], confidence=0.6, source_type="learned", hit_count=3)
    db.commit()
    run(db, payload("g", [turn(0, rendered=[edge_id], outcome="failure")]))
    row = edge_row(db, e["rsa"], e["primes"], "prerequisite")
    assert (row["confidence"], row["traversal_count"]) == (pytest.approx(0.6), 1)
    settings.apply_profile(db, "seed", by="test")
    db.commit()
    run(db, payload("h", [turn(0, rendered=[edge_id], outcome="failure")], day=1))
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite")["confidence"] == pytest.approx(0.55)


def test_baseline_grading_moves_an_edge_by_outcome_minus_its_concept_rate(db, evidence):
    """Source concept 8 successes / 2 failures (b = 0.75), 10 renderings so far (half step):
    success +2(0.05)(0.25)(0.5) = +0.0125, then failure -2(0.05)(0.75)(10/21)."""
    src = f.entry(db, concept_slug="rsa", success_count=8, failure_count=2)
    dst = f.entry(db, concept_slug="primes")
    edge_id = f.edge(db, src, dst, "fallback", confidence=0.5, traversal_count=10)
    db.commit()
    run(
        db,
        payload(
            "b",
            [
                turn(0, rendered=[edge_id], outcome="success"),
                turn(1, rendered=[edge_id], outcome="failure"),
            ],
        ),
    )
    expected = 0.5 + 0.0125 - 2 * 0.05 * 0.75 * 10 / 21
    row = edge_row(db, src, dst, "fallback")
    assert row["confidence"] == pytest.approx(expected)
    assert row["traversal_count"] == 12


def confidences(db, *ids):
    """Each edge's (confidence, unlearned_from), as stored."""
    rows = db.execute(
        "SELECT id, confidence, unlearned_from FROM hag_edges WHERE id = ANY(%s)", (list(ids),)
    ).fetchall()
    return {r["id"]: (r["confidence"], r["unlearned_from"]) for r in rows}


def test_negative_evidence_lowers_an_unsupported_authored_prerequisite(db, evidence):
    """5 sessions report rsa's struggles, none naming hashing or anything resting on it:
    the authored rsa -> hashing falls to the floor, 0.9 kept beside it; rsa -> primes, named,
    keeps 0.9; and rsa -> modular-arithmetic keeps 0.9 because primes rests on it (authored
    primes -> mod)."""
    e = topic_entries(db)
    wrong = f.edge(db, e["rsa"], e["hashing"], confidence=0.9)
    named = f.edge(db, e["rsa"], e["primes"], confidence=0.9)
    below = f.edge(db, e["rsa"], e["modular-arithmetic"], confidence=0.9)
    f.edge(db, e["primes"], e["modular-arithmetic"], confidence=0.9)
    db.commit()
    run(db, *(reports(f"n{d}", [("rsa", "primes")], day=d) for d in range(4)))
    assert confidences(db, wrong)[wrong] == (pytest.approx(0.9), None)  # 4: too few to judge
    run(db, reports("n4", [("rsa", "primes")], day=4))
    assert confidences(db, wrong, named, below) == {
        wrong: (pytest.approx(0.05), pytest.approx(0.9)),
        named: (pytest.approx(0.9), None),
        below: (pytest.approx(0.9), None),
    }


def test_negative_evidence_takes_no_support_from_a_reversed_report(db, evidence):
    """rsa's 5 sessions all name primes, and primes rests on hashing (authored 0.9), which
    would support rsa -> hashing (a learner missing hashing misses primes too); but the memory
    holds that primes builds on rsa (authored primes -> rsa 0.9), so a report on rsa naming
    primes is the extractor's reversal, not a gap under hashing: it supports nothing, and the
    wrong authored rsa -> hashing falls to the floor with 0.9 kept beside it. Without the
    reverse edge the same reports support it (rsa -> modular-arithmetic in the test above)."""
    e = topic_entries(db)
    wrong = f.edge(db, e["rsa"], e["hashing"], confidence=0.9)
    f.edge(db, e["primes"], e["hashing"], confidence=0.9)
    f.edge(db, e["primes"], e["rsa"], confidence=0.9)
    db.commit()
    run(db, *(reports(f"w{d}", [("rsa", "primes")], day=d) for d in range(5)))
    floor = settings.current().edge_confidence_floor
    assert confidences(db, wrong)[wrong] == (pytest.approx(floor), pytest.approx(0.9))


def test_negative_evidence_is_undone_when_later_reports_support_the_edge(db, evidence):
    """Lowered after 5 unsupported reports, rsa -> hashing gets its 0.9 back (and keeps
    nothing beside it) once a sixth session names hashing (1 of 6, above 5%)."""
    e = topic_entries(db)
    wrong = f.edge(db, e["rsa"], e["hashing"], confidence=0.9)
    db.commit()
    run(db, *(reports(f"n{d}", [("rsa", "primes")], day=d) for d in range(5)))
    assert confidences(db, wrong)[wrong] == (pytest.approx(0.05), pytest.approx(0.9))
    run(db, reports("n5", [("rsa", "hashing")], day=5))
    assert confidences(db, wrong)[wrong] == (pytest.approx(0.9), None)


def test_the_seed_profile_leaves_authored_prerequisites_alone(db):
    """Under the default (seed) dials the same 12 reports change no authored edge."""
    e = topic_entries(db)
    wrong = f.edge(db, e["rsa"], e["hashing"], confidence=0.9)
    db.commit()
    run(db, *(reports(f"n{d}", [("rsa", "primes")], day=d) for d in range(12)))
    got = db.execute("SELECT confidence FROM hag_edges WHERE id = %s", (wrong,)).fetchone()
    assert got["confidence"] == pytest.approx(0.9)
    # and the learned edge followed the seed's floors: 0.3, then 0.6 from the third report
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite")["confidence"] == pytest.approx(0.6)


# --- the reprieve ------------------------------------------------------------------------------


def test_reprieve_lifts_a_sunk_unused_entry_back_to_its_floor(db, dials):
    """Below the floor and unused 8 days: lifted to the floor (candidate 0.7, pattern 0.4);
    used 6 days ago, archived, or with the dial at 0 (the seed): left alone."""
    now = f.NOW
    sunk = f.entry(
        db, maturity="candidate", confidence=0.5, last_matched_at=now - timedelta(days=8)
    )
    sunk_pattern = f.entry(
        db, maturity="pattern", confidence=0.2, created_at=now - timedelta(days=9)
    )
    recent = f.entry(
        db, maturity="pattern", confidence=0.2, last_matched_at=now - timedelta(days=6)
    )
    archived = f.entry(db, maturity="archived", confidence=0.2, created_at=now - timedelta(days=30))
    db.commit()
    assert sweeps.run_nightly(as_of=now).reprieved == 0  # the seed: no reprieve
    dials(reprieve_idle_days=7)
    forecast = sweeps.run_nightly(as_of=now, dry_run=True)
    assert forecast.reprieved == 2
    assert entry_row(db, sunk)["confidence"] == pytest.approx(0.5)  # a dry run writes nothing
    assert sweeps.run_nightly(as_of=now).reprieved == 2
    got = {i: entry_row(db, i)["confidence"] for i in (sunk, sunk_pattern, recent, archived)}
    assert got == {
        sunk: pytest.approx(0.7),
        sunk_pattern: pytest.approx(0.4),
        recent: pytest.approx(0.2),
        archived: pytest.approx(0.2),
    }
    assert sweeps.run_nightly(as_of=now).reprieved == 0  # a second run changes nothing
    reasons = db.execute(
        "SELECT reason FROM hag_confidence_history WHERE entity_id = %s AND reason <> 'created'",
        (sunk,),
    ).fetchall()
    assert [r["reason"] for r in reasons] == ["reprieve: sunk below its floor and unused"]


# --- who reported it (fourth round) ------------------------------------------------------------


def learner_reports(db):
    """(source concept, target concept, session, learner, turns) of every recorded report."""
    rows = db.execute(
        "SELECT s.concept_slug AS src, t.concept_slug AS dst, r.session_id, r.learner_id, r.turns "
        "FROM hag_edge_learner_reports r JOIN hag_edges e ON e.id = r.edge_id "
        "JOIN hag_entries s ON s.id = e.source_entry_id "
        "JOIN hag_entries t ON t.id = e.target_entry_id ORDER BY 1, 2, 3"
    ).fetchall()
    return [(r["src"], r["dst"], r["session_id"], r["learner_id"], r["turns"]) for r in rows]


def two_turns(session: str, learner: str, day: int = 0):
    """Two failed turns name rsa -> primes (the first twice), the second also rsa -> hashing."""
    return payload(
        session,
        [
            turn(0, outcome="failure", struggles=[struggle("rsa", "primes")] * 2),
            turn(
                1,
                outcome="failure",
                struggles=[struggle("rsa", "primes"), struggle("rsa", "hashing")],
            ),
        ],
        learner=learner,
        day=day,
    )


def test_session_end_records_who_reported_each_prerequisite_once(db):
    """Under any profile (here the seed's) each proposed prerequisite gets a row per session
    with the learner and the turns that named it; applying the session again (its ledger
    row set back to pending) adds nothing, though the hit count counts it again."""
    topic_entries(db)
    db.commit()
    run(db, two_turns("s1", "ann"), reports("s2", [("rsa", "primes")], day=1))
    want = [
        ("rsa", "hashing", "s1", "ann", 1),
        ("rsa", "primes", "s1", "ann", 2),
        ("rsa", "primes", "s2", "learner-1", 1),
    ]
    assert learner_reports(db) == want
    db.execute("UPDATE hag_sessions SET status = 'pending' WHERE session_id = 's1'")
    db.commit()
    assert process_pending().sessions == 1
    e = {r["concept_slug"]: r["id"] for r in db.execute("SELECT * FROM hag_entries").fetchall()}
    assert edge_row(db, e["rsa"], e["primes"], "prerequisite")["hit_count"] == 3
    assert learner_reports(db) == want
    # the rows go with their edge (a cull, or any delete)
    db.execute(
        "DELETE FROM hag_edges WHERE source_entry_id = %s AND target_entry_id = %s",
        (e["rsa"], e["primes"]),
    )
    db.commit()
    assert learner_reports(db) == [("rsa", "hashing", "s1", "ann", 1)]


# --- the cull re-weighs its survivors (fourth round) -------------------------------------------


def cull_world(db):
    """rsa -> primes learned from 3 reports; rsa -> signatures learned from 4, at the floor
    because the authored signatures -> rsa (0.9) stands for 18 reports the other way; both
    learned edges 100 days old and never walked. rsa -> primes was weighed with the 4
    other reports on rsa as chance: 4 / 8, h' = 2.5 -> 2.5 / 4.5."""
    e = topic_entries(db)
    old = f.NOW - timedelta(days=100)
    primes = f.edge(
        db,
        e["rsa"],
        e["primes"],
        confidence=2.5 / 4.5,
        source_type="learned",
        hit_count=3,
        created_at=old,
    )
    doomed = f.edge(
        db,
        e["rsa"],
        e["signatures"],
        confidence=0.05,
        source_type="learned",
        hit_count=4,
        created_at=old,
    )
    authored = f.edge(db, e["signatures"], e["rsa"], confidence=0.9)
    db.commit()
    return primes, doomed, authored


def test_the_cull_reweighs_the_survivors_of_the_concepts_it_culled_from(db, evidence):
    """The nightly cull deletes rsa -> signatures (audited) and, in the same run, re-weighs
    rsa's other prerequisites from the counts without its 4 reports: rsa -> primes has no
    chance left against it, 3 / 5. The history row says why; a second run changes nothing."""
    primes, doomed, authored = cull_world(db)
    summary = sweeps.run_nightly(as_of=f.NOW)
    assert summary.culled == 1 and summary.reweighed == 1
    assert summary.counts()["reweighed"] == 1
    got = confidences(db, primes, doomed, authored)
    assert got == {primes: (pytest.approx(0.6), None), authored: (pytest.approx(0.9), None)}
    audited = db.execute(
        "SELECT edge_id, run_id FROM hag_edge_audit WHERE reason = 'cull'"
    ).fetchall()
    assert [(r["edge_id"], r["run_id"]) for r in audited] == [(doomed, summary.run_id)]
    why = db.execute(
        "SELECT reason, old_value, new_value, run_id FROM hag_confidence_history "
        "WHERE entity_id = %s AND reason <> 'created'",
        (primes,),
    ).fetchall()
    assert [(r["reason"], r["run_id"]) for r in why] == [(sweeps.REWEIGH_REASON, summary.run_id)]
    again = sweeps.run_nightly(as_of=f.NOW)
    assert (again.culled, again.reweighed) == (0, 0)
    assert "reweighed" not in again.counts()


def test_under_the_seed_profile_the_cull_reweighs_nothing(db):
    """The seed's rules: the same cull leaves rsa -> primes as it stood (the seed's nightly
    run is unchanged, its counts carry no re-weigh key)."""
    primes, doomed, _ = cull_world(db)
    summary = sweeps.run_nightly(as_of=f.NOW)
    assert (summary.culled, summary.reweighed) == (1, 0)
    assert "reweighed" not in summary.counts()
    assert confidences(db, primes) == {primes: (pytest.approx(2.5 / 4.5), None)}


def test_the_cull_waits_for_a_session_holding_a_sibling_row(db, evidence, database_url):
    """The cull's lock pass takes the survivors' rows too: while another transaction holds
    rsa -> primes (as a session re-weighing rsa's siblings does), the nightly run waits, then
    re-weighs from the committed state."""
    import threading

    import psycopg

    primes, doomed, _ = cull_world(db)
    holder = psycopg.connect(database_url, autocommit=False)
    holder.execute("SELECT id FROM hag_edges WHERE id = %s FOR NO KEY UPDATE", (primes,))
    done: dict[str, object] = {}
    worker = threading.Thread(target=lambda: done.update(s=sweeps.run_nightly(as_of=f.NOW)))
    worker.start()
    worker.join(timeout=2.0)
    assert worker.is_alive()  # queued behind the held sibling row
    holder.execute("UPDATE hag_edges SET hit_count = 5 WHERE id = %s", (primes,))
    holder.commit()
    holder.close()
    worker.join(timeout=180.0)
    assert not worker.is_alive()
    summary = done["s"]
    assert isinstance(summary, sweeps.NightlySummary) and summary.culled == 1
    # re-weighed from the committed hit count: 5 reports, nothing else on rsa -> 5 / 7
    assert confidences(db, primes) == {primes: (pytest.approx(5 / 7), None)}


# --- the profile command ----------------------------------------------------------------------


def test_settings_profile_command_sets_the_set_and_says_what_changed(db, database_url):
    """`hag settings profile evidence` lists each dial it changed; again, nothing changes."""
    env = {**__import__("os").environ, "DATABASE_URL": database_url}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "hag.cli", "settings", "profile", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )

    first = cli("evidence")
    assert first.returncode == 0, first.stderr
    assert 'prerequisite_confidence_rule: "seed" -> "units"' in first.stdout
    assert "reprieve_idle_days: 0 -> 7" in first.stdout
    assert "nothing changed" in cli("evidence").stdout
    settings.invalidate()
    assert settings.active_profile(settings.load(db)) == "evidence"
    back = cli("seed")
    assert back.returncode == 0 and 'edge_grading_rule: "units" -> "seed"' in back.stdout
    bad = cli("fast")
    assert bad.returncode != 0 and "fast" in bad.stderr


# --- concurrency: sibling re-weighing takes its locks in the one sorted order -------------------


def contested_sessions(n: int = 120, seed: int = 3) -> list[dict]:
    """Sessions whose struggles keep hitting the same few concepts in both directions, with
    rendered edges, so concurrent workers re-weigh the same sibling rows."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        turns = []
        for t in range(rng.randint(1, 4)):
            pairs = [tuple(rng.sample(CONCEPTS[:4], 2)) for _ in range(rng.randint(1, 3))]
            turns.append(
                turn(
                    t,
                    outcome=rng.choice(["success", "failure"]),
                    struggles=[struggle(c, m) for c, m in pairs],
                )
            )
        out.append(
            payload(
                f"c{i:03d}",
                turns,
                ended_at=T0 + timedelta(minutes=rng.randint(0, 600)),
                learner=f"learner-{i % 4}",  # repeat weighting reads who reported what
            )
        )
    return out


def _world(db):
    reset_database(db)
    use_evidence(db)
    e = topic_entries(db)
    f.edge(db, e["rsa"], e["modular-arithmetic"], confidence=0.9)
    f.edge(db, e["primes"], e["modular-arithmetic"], confidence=0.9)
    db.commit()


def test_four_workers_reweighing_siblings_end_in_the_state_of_serial_processing(db):
    """Concurrent sessions reporting on the same concepts neither deadlock for good nor lose a
    report: replaying their commit order serially gives the same memory, confidences too."""
    batch = contested_sessions()
    _world(db)
    assert all(r.accepted for r in ingest(db, *batch))
    concurrent = process_pending(batch_size=20, workers=4)
    assert (concurrent.sessions, concurrent.rejects) == (len(batch), 0)
    assert concurrent.edges_reweighed > 0
    order = [
        r["session_id"]
        for r in db.execute("SELECT session_id FROM hag_sessions ORDER BY applied_seq").fetchall()
    ]
    parallel_state = memory(db)
    reports_total = sum(
        len({(s["concept_slug"], s["missing_slug"]) for t in p["turns"] for s in t["struggles"]})
        for p in batch
    )
    hits = db.execute(
        "SELECT sum(hit_count) AS n FROM hag_edges WHERE edge_type = 'prerequisite'"
    ).fetchone()["n"]
    assert hits == reports_total  # every session's report counted exactly once
    attributed = db.execute("SELECT count(*) AS n FROM hag_edge_learner_reports").fetchone()["n"]
    assert attributed == reports_total  # ...and attributed to its learner exactly once

    _world(db)
    assert all(r.accepted for r in ingest(db, *batch))
    summary = ProcessSummary()
    dials = settings.current()
    from hag.storage import db as hdb

    with hdb.pool().connection() as conn:
        for session_id in order:
            applied = apply_pending_session(
                conn, dials, run_id=None, caches=Caches(), summary=summary, session_id=session_id
            )
            assert applied == session_id
    assert memory(db) == parallel_state


def audited(db, source, target, hits: int, *, restored: bool = False) -> None:
    """A culled prerequisite source -> target as the audit keeps it (its reports included)."""
    db.execute(
        "INSERT INTO hag_edge_audit (reason, edge_id, source_entry_id, target_entry_id, "
        "edge_type, confidence, hit_count, source_type, traversal_count, created_at, "
        "updated_at, restored_at) VALUES ('cull', gen_random_uuid(), %s, %s, 'prerequisite', "
        "0.05, %s, 'learned', 0, now(), now(), %s)",
        (source, target, hits, "2026-11-30" if restored else None),
    )


def test_a_concepts_reversal_share_counts_live_and_culled_reports(db, by_sessions):
    """rsa's reports: 3 sessions name primes (primes -> rsa is held at 0.9: reversals), 2 name
    hashing; the audit keeps a culled rsa -> signatures (4 reports) and a culled
    rsa -> primes (2 reports, reversals too), and a restored one that counts as live (not
    again). So [9 + 2 = 11 reports, 3 + 2 = 5 reversals]; with the held line above 0.9, none
    is a reversal."""
    from hag.evidence import store

    e = topic_entries(db)
    f.edge(db, e["primes"], e["rsa"], confidence=0.9)
    audited(db, e["rsa"], e["signatures"], 4)
    audited(db, e["rsa"], e["primes"], 2)
    audited(db, e["rsa"], e["key-exchange"], 7, restored=True)
    db.commit()
    run(db, *(reports(f"p{d}", [("rsa", "primes")], day=d) for d in range(3)))
    run(db, *(reports(f"h{d}", [("rsa", "hashing")], day=3 + d) for d in range(2)))
    learned = edge_row(db, e["rsa"], e["hashing"], "prerequisite")["id"]
    for held_min, expected in ((0.6, (11, 5)), (0.95, (11, 0))):
        dials = settings.current().with_overrides(
            edge_min_confidence=0.3, prerequisite_lift_noise_held_min=held_min
        )
        found = {x.edge_id: x for x in store.prerequisite_evidence(db, [e["rsa"]], dials)}
        assert found[learned].reversal_reports == expected


def test_negative_evidence_takes_support_from_a_culled_prerequisite(db, evidence):
    """rsa's 5 live sessions name signatures only; the audit keeps a culled rsa -> primes (2
    reports), and primes rests on modular-arithmetic (authored 0.9). Those culled reports
    still support rsa -> modular-arithmetic (a learner missing it misses primes too: 2 of 7,
    above 5%), so it keeps 0.9; rsa -> hashing, which nothing supports, falls to the floor."""
    e = topic_entries(db)
    below = f.edge(db, e["rsa"], e["modular-arithmetic"], confidence=0.9)
    wrong = f.edge(db, e["rsa"], e["hashing"], confidence=0.9)
    f.edge(db, e["primes"], e["modular-arithmetic"], confidence=0.9)
    audited(db, e["rsa"], e["primes"], 2)
    db.commit()
    run(db, *(reports(f"s{d}", [("rsa", "signatures")], day=d) for d in range(5)))
    assert confidences(db, below, wrong) == {
        below: (pytest.approx(0.9), None),
        wrong: (pytest.approx(0.05), pytest.approx(0.9)),
    }


def test_a_noisy_concept_needs_more_reports_under_the_noise_dial(db, dials):
    """rsa -> hashing, 3 sessions, beside 3 reversed reports on rsa: with
    prerequisite_lift_noise_weight 10 its chance is multiplied by 1 + 10 x the reversal
    share ((3 + 0.05 x 5) / (6 + 5)) = 3.95, so it ends lower than with the dial at 0, by
    the arithmetic of model.lift_confidence written out here."""
    confidences_by_weight = {}
    for weight in (0.0, 10.0):
        reset_database(db)
        use_evidence(db)
        e = topic_entries(db)
        f.edge(db, e["primes"], e["rsa"], confidence=0.9)
        dials(prerequisite_lift_noise_weight=weight)
        run(
            db,
            *(reports(f"w{weight}-p{d}", [("rsa", "primes")], day=d) for d in range(3)),
            *(reports(f"w{weight}-h{d}", [("rsa", "hashing")], day=3 + d) for d in range(3)),
        )
        row = edge_row(db, e["rsa"], e["hashing"], "prerequisite")
        confidences_by_weight[weight] = row["confidence"]
    dial = settings.current()
    k, spread = dial.prerequisite_lift_k, dial.prerequisite_lift_chance_spread
    share = (
        3 + dial.prerequisite_lift_noise_prior * dial.prerequisite_lift_noise_prior_reports
    ) / (6 + dial.prerequisite_lift_noise_prior_reports)

    def expected(scale: float) -> float:
        net = max(0.0, 3 - 3 / spread * scale)  # rsa's other 3 reports, spread evenly
        return max(dial.edge_confidence_floor, net / (net + k))

    assert confidences_by_weight[0.0] == pytest.approx(expected(1.0))
    assert confidences_by_weight[10.0] == pytest.approx(expected(1.0 + 10.0 * share))
    assert confidences_by_weight[10.0] < confidences_by_weight[0.0]
