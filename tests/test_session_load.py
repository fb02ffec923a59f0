"""Load: four workers drain a queue of valid and hostile sessions while a nightly and a restore
run against the same memory. Afterwards every valid session is applied exactly once, every
hostile one is refused at ingest or rejected when applied (or, at the dials' limits, applied
within its bounds), and nothing is left pending or failed. Sized to run in about a minute."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

from hag.nightly import audit, sweeps
from hag.session.ingest import ingest_payload
from hag.session.process import process_pending
from tests import factories as f
from tests.fix_session import LONG_CONCEPT, SLUGS, build_world, entry_id, queue_unchecked, sessions
from tests.session_builders import T0, payload, turn

VALID = 80
CULL_AS_OF = f.NOW


def _cullable(db, n: int = 4) -> list[Any]:
    """Weak, old learned edges between two concepts no session names, culled by a first
    nightly (the restore brings them back during the load)."""
    a = f.entry(db, concept_slug="lattices-old")
    b = f.entry(db, concept_slug="ciphers-old")
    ids = [
        f.edge(
            db,
            a,
            b,
            kind,
            confidence=0.1,
            source_type="learned",
            created_at=CULL_AS_OF - timedelta(days=200),
        )
        for kind in ("prerequisite", "fallback", "leads_to", "related")[:n]
    ]
    db.commit()
    return ids


def _at_the_limits(dials: Any) -> dict[str, Any]:
    """The largest session the count dials allow: every bound reached, none passed."""
    turns = []
    per_turn = dials.session_max_struggles_per_turn
    n_turns = -(-dials.session_max_struggles // per_turn)
    obs_per_turn = -(-dials.session_max_observations // n_turns)
    slugs_per_turn = -(-dials.session_max_success_slugs // n_turns)
    budget = {"obs": dials.session_max_observations, "slugs": dials.session_max_success_slugs}
    for t in range(n_turns):
        k = min(obs_per_turn, budget["obs"])
        s = min(slugs_per_turn, budget["slugs"])
        budget["obs"] -= k
        budget["slugs"] -= s
        turns.append(
            turn(
                t,
                decision=entry_id(t % len(SLUGS)),
                outcome="success",
                concepts=[f"concept-{t}-{j}" for j in range(s)],
                struggles=[
                    {
                        "concept_slug": SLUGS[t % len(SLUGS)],
                        "missing_slug": f"idea {t} {j}",
                        "evidence": "I never saw that",
                    }
                    for j in range(per_turn)
                ],  # fmt: skip
                observations=[
                    {
                        "graph": ("topic", "student", "tutor")[j % 3],
                        "concept": f"Idea {t} {j}",
                        "text": f"Turn {t}, idea {j}: draw it first.",
                    }
                    for j in range(k)
                ],  # fmt: skip
            )
        )
    return payload("limits", turns, learner="l0", ended_at=T0 + timedelta(minutes=700))


def _hostile(dials: Any) -> dict[str, Any]:
    """Payloads refused at ingest, by name: more than the dials allow, bad slugs, malformed."""
    one_turn = [turn(0, decision=entry_id(0), outcome="success")]
    many_obs = payload("h-observations", one_turn)
    many_obs["turns"][0]["observations"] = [
        {"graph": "topic", "concept": f"Flood {k}", "text": "x"}
        for k in range(dials.session_max_observations + 1)
    ]
    many_successes = payload("h-successes", one_turn)
    many_successes["turns"][0]["concept_slugs"] = [
        f"slug-{k}" for k in range(dials.session_max_success_slugs + 1)
    ]
    passwd = payload("h-slug", one_turn)
    passwd["turns"][0]["concept_slugs"] = ["../../etc/passwd"]
    blank = payload("h-blank", one_turn)
    blank["turns"][0]["concept_slugs"] = [" "]
    pile = payload("h-struggles", one_turn)
    pile["turns"][0]["struggles"] = [
        {"concept_slug": "rsa", "missing_slug": f"m{k}", "evidence": "why"}
        for k in range(dials.session_max_struggles_per_turn + 1)
    ]
    return {
        "h-observations": many_obs,
        "h-successes": many_successes,
        "h-slug": passwd,
        "h-blank": blank,
        "h-struggles": pile,
        "h-malformed": '{"session_id": "h-malformed", "turns": [',
    }


def _queued_hostile() -> list[dict[str, Any]]:
    """Payloads queued as an older ingest would have (no bounds checked): rejected when applied."""
    flood = payload("q-observations", [turn(0)])
    flood["turns"][0]["observations"] = [
        {"graph": "topic", "concept": f"Flood {k}", "text": "x"} for k in range(2_500)
    ]
    huge_concept = payload(
        "q-concept",
        [turn(0, observations=[{"graph": "topic", "concept": LONG_CONCEPT, "text": "Words."}])],
    )
    return [flood, huge_concept]


def test_four_workers_a_nightly_and_a_restore_under_hostile_load(db):
    """80 valid sessions and one at every dial's limit applied once each; 6 hostile payloads
    refused at ingest and 2 queued ones rejected; the nightly and the restore complete;
    nothing is left pending or failed."""
    from hag import settings

    build_world(db)
    culled_ids = _cullable(db)
    first = sweeps.sweep(db, as_of=CULL_AS_OF)
    assert first.counts()["culled"] == len(culled_ids)
    dials = settings.current()

    valid = [*sessions(VALID, seed=11), _at_the_limits(dials)]
    for body in valid:
        assert ingest_payload(db, body).status == "accepted", body["session_id"]
    refused = {name: ingest_payload(db, raw, source=name) for name, raw in _hostile(dials).items()}
    db.commit()
    assert {n: r.status for n, r in refused.items()} == dict.fromkeys(refused, "quarantined")
    for body in _queued_hostile():
        queue_unchecked(db, body)

    results: dict[str, Any] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def run(name: str, job: Any) -> None:
        try:
            start.wait()
            results[name] = job()
        except BaseException as exc:
            errors.append(exc)

    jobs = {
        "sessions": lambda: process_pending(batch_size=10, workers=4),
        "nightly": lambda: sweeps.run_nightly(as_of=CULL_AS_OF + timedelta(days=1)),
        "restore": lambda: audit.restore(run_id=first.run_id),
    }
    threads = [threading.Thread(target=run, args=item) for item in jobs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)

    summary = results["sessions"]
    assert (summary.sessions, summary.rejects, summary.failures) == (VALID + 1, 2, 0)
    assert (summary.left_pending, summary.left_failed) == (0, 0)
    assert {r["session_id"] for r in summary.rejected} == {"q-observations", "q-concept"}
    rows = db.execute(
        "SELECT status, count(*) AS n, count(DISTINCT applied_seq) AS seqs "
        "FROM hag_sessions GROUP BY status"
    ).fetchall()
    assert {r["status"]: (r["n"], r["seqs"]) for r in rows} == {
        "processed": (VALID + 1, VALID + 1),  # each valid session applied once, in one order
        "rejected": (2, 0),
    }
    assert sorted(map(str, results["restore"].restored)) == sorted(map(str, culled_ids))
    nightly = results["nightly"]
    assert db.execute(
        "SELECT status FROM hag_runs WHERE run_id = %s", (nightly.run_id,)
    ).fetchone() == {"status": "done"}
    # the session at the limits was applied within them: one entry per observation at most,
    # one success row per distinct concept
    limits = db.execute(
        "SELECT count(*) AS n FROM hag_learner_successes WHERE session_id = 'limits'"
    ).fetchone()["n"]
    assert limits == dials.session_max_success_slugs
    assert db.execute(
        "SELECT count(*) AS n FROM hag_session_quarantine WHERE source LIKE 'h-%%'"
    ).fetchone()["n"] == len(refused)
