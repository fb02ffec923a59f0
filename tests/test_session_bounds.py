"""Bounds on what one session may carry, and on the locks it takes: observations, struggles
and successful concepts per session are dials (the whole payload refused, the field named),
concept slugs have the schema's shape, and a session's advisory locks do not grow with it."""

from __future__ import annotations

import json

import pytest

from hag import settings
from hag.session.contract import SessionPayload
from hag.session.ingest import ingest_payload
from hag.session.process import process_pending
from hag.session.steps import apply_session
from hag.storage import db as hdb
from tests import factories as f
from tests.session_builders import ingest, payload, turn


@pytest.fixture
def topic(db):
    f.entry(db, concept_slug="rsa")
    db.commit()


def _observations(n, graph="topic"):
    return [
        {"graph": graph, "concept": f"Concept {k}", "text": f"Say it {k} ways."} for k in range(n)
    ]


def _struggles(n):
    return [
        {"concept_slug": "rsa", "missing_slug": f"idea-{k}", "evidence": "I never got that"}
        for k in range(n)
    ]


def _refused(db, body, field, dial):
    result = ingest_payload(db, body, source="test")
    db.commit()
    assert result.quarantined, result
    assert result.field == field and f"(dial {dial})" in result.reason, result.reason
    assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == 0
    return result


@pytest.mark.parametrize(
    ("dial", "field", "build"),
    [
        (
            "session_max_observations",
            "turns[*].observations",
            lambda n: [
                turn(0, observations=_observations(2)),
                turn(1, observations=_observations(n - 2)),
            ],
        ),
        (
            "session_max_struggles",
            "turns[*].struggles",
            lambda n: [turn(0, struggles=_struggles(2)), turn(1, struggles=_struggles(n - 2))],
        ),
        (
            "session_max_success_slugs",
            "turns[*].concept_slugs",
            lambda n: [
                turn(0, outcome="success", concepts=["rsa"] * 50),  # repeats count once
                turn(1, outcome="success", concepts=[f"c-{k}" for k in range(n - 1)]),
                turn(2, outcome="failure", concepts=[f"f-{k}" for k in range(50)]),
            ],
        ),
    ],
    ids=["observations", "struggles", "success slugs"],
)
def test_a_session_over_a_count_dial_is_refused_whole_and_at_it_accepted(
    db, topic, dials, dial, field, build
):
    """One over the dial: refused whole, naming the field and the dial; at the dial: queued."""
    dials(**{dial: 5})
    _refused(db, payload("over", build(6)), field, dial)
    assert ingest_payload(db, payload("at", build(5))).status == "accepted"


def test_a_turn_with_too_many_struggles_is_refused_with_its_turn(db, topic, dials):
    """A turn over session_max_struggles_per_turn: refused, naming that turn's struggles."""
    dials(session_max_struggles_per_turn=3)
    body = payload("many", [turn(0, struggles=_struggles(3)), turn(1, struggles=_struggles(4))])
    result = _refused(db, body, "turns[1].struggles", "session_max_struggles_per_turn")
    assert result.turn_index == 1


@pytest.mark.parametrize("slug", ["", " ", "../../etc/passwd", "RSA", "rsa ", "-rsa", "a/b"])
def test_a_concept_slug_off_the_slug_pattern_is_refused(db, topic, slug):
    """concept_slugs have the schema's slug shape: blank, path-like or upper-case refused."""
    body = payload("odd", [turn(0, outcome="success", concepts=["rsa", slug])])
    result = ingest_payload(db, body)
    db.commit()
    assert result.quarantined and result.field == "turns[0].concept_slugs[1]", result
    assert db.execute("SELECT count(*) AS n FROM hag_learner_successes").fetchone()["n"] == 0


def test_slugs_of_the_schema_shape_are_accepted(db, topic):
    """`rsa`, `modular-arithmetic`, `x509` and the `_unanchored_` placeholder are slugs."""
    body = payload(
        "fine",
        [
            turn(
                0, outcome="success", concepts=["rsa", "modular-arithmetic", "x509", "_unanchored_"]
            )
        ],
    )
    assert ingest_payload(db, body).status == "accepted"


def test_a_queued_session_over_a_lowered_dial_is_rejected_when_applied(db, topic, dials):
    """A dial lowered after ingest holds when the session is applied: rejected, named."""
    assert ingest(db, payload("big", [turn(0, observations=_observations(4))]))[0].accepted
    dials(session_max_observations=3)
    summary = process_pending()
    assert (summary.sessions, summary.rejects, summary.failures) == (0, 1, 0)
    assert "session_max_observations" in summary.rejected[0]["reason"]


def test_a_rejected_sessions_successes_are_no_evidence(db, topic, dials):
    """A session rejected when applied leaves nothing of it as evidence: the success ingest
    recorded for it (which marks its concept shown, so the learner's later struggles naming
    it would be dropped) goes with the rejection; another session's stays."""
    body = payload(
        "big", [turn(0, outcome="success", concepts=["rsa"], observations=_observations(4))]
    )
    kept = payload("small", [turn(0, outcome="success", concepts=["x509"])])
    assert all(r.accepted for r in ingest(db, body, kept))
    count = "SELECT session_id FROM hag_learner_successes ORDER BY session_id"
    assert [r["session_id"] for r in db.execute(count)] == ["big", "small"]
    dials(session_max_observations=3)
    summary = process_pending()
    assert (summary.sessions, summary.rejects) == (1, 1)
    assert [r["session_id"] for r in db.execute(count)] == ["small"]


def test_the_simulators_and_the_benchmarks_sessions_fit_the_default_dials():
    """The defaults admit the payload sizes the simulator and the benchmark send, many times."""
    from bench.bench_sessions import TURNS
    from hag_lab.simulate.tutor import TutorPolicy

    dials = settings.defaults()
    policy = TutorPolicy()
    assert dials.session_max_observations >= 10 * 3 * max(policy.max_turns, TURNS)
    assert dials.session_max_struggles >= 10 * 2 * max(policy.max_turns, TURNS)
    assert dials.session_max_struggles_per_turn >= 10 * 2
    assert dials.session_max_success_slugs >= 10 * max(policy.max_turns, TURNS)


# --- the locks one session holds --------------------------------------------------------------


def _locks_while_applying(db, n_observations):
    """(advisory locks, all locks) the session's backend holds with its transaction open."""
    body = payload(f"obs-{n_observations}", [turn(0, observations=_observations(n_observations))])
    session = SessionPayload.model_validate_json(json.dumps(body))
    with hdb.connect() as work:
        apply_session(work, session, settings.current())
        rows = db.execute(
            "SELECT locktype, count(*) AS n FROM pg_locks WHERE pid = %s GROUP BY locktype",
            (work.info.backend_pid,),
        ).fetchall()
        work.rollback()
    db.rollback()
    held = {r["locktype"]: r["n"] for r in rows}
    return held.get("advisory", 0), sum(held.values())


def test_a_sessions_locks_stay_flat_as_its_observations_grow(db, topic, dials):
    """1, 200 and 1,500 new topic concepts: at most session_lock_buckets advisory locks, and
    the large sessions hold as many locks in all as each other (not one per identity)."""
    dials(session_lock_buckets=16)
    one = _locks_while_applying(db, 1)
    medium = _locks_while_applying(db, 200)
    large = _locks_while_applying(db, 1500)
    assert one[0] == 1
    assert medium[0] == large[0] == 16
    # beyond the 15 more advisory locks: a TOAST table and its index, once a statement's
    # change row (the ids it changed in its set, migration 185) grows past TOAST's threshold
    assert large[1] == medium[1] <= one[1] + 15 + 2


def test_the_lock_bucket_dial_is_read(db, topic, dials):
    """session_lock_buckets is the most advisory locks a session takes."""
    dials(session_lock_buckets=4)
    assert _locks_while_applying(db, 300)[0] == 4
    dials(session_lock_buckets=64)
    assert _locks_while_applying(db, 300)[0] > 4
