"""Fuzzing the payload contract (issue 11): hypothesis mutates valid payloads at the byte, JSON
and field level. Every case either is refused, quarantined and leaves the memory's digest
unchanged, or is accepted, and a later `process_pending` applies or rejects it with nothing
left pending (the queue never blocks) and no learned edge outside the learner's visibility."""

from __future__ import annotations

import itertools
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hag.session.ingest import ingest_payload
from hag.session.process import process_pending
from tests import factories as f
from tests.fix_db import reset_database
from tests.session_builders import payload, turn

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
MEMORY = ("hag_topics", "hag_concepts", "hag_entries", "hag_edges", "hag_confidence_history")
_ids = itertools.count()

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
hostile_text = st.sampled_from(
    [
        "",
        " ",
        "a\x00b",
        "line\u2028sep\u0085next",
        "x" * 30_000,
        " ".join(["w"] * 6000),
        "public\n",
        "9999-12-31T23:59:59-14:00",
        "0001-01-01T00:00:00+14:00",
        "2026-03-01T12:00:00",
        "../../etc/passwd",
        "'; DROP TABLE hag_entries; --",
    ]
)


def memory_digest(db):
    """One digest of every memory table's rows (equal digests: an unchanged memory)."""
    parts = []
    for table in MEMORY:
        row = db.execute(
            f"SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS d FROM {table} t"
        ).fetchone()
        parts.append(row["d"])
    db.rollback()
    return "".join(parts)


def _world(db):
    reset_database(db)
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    e = f.edge(db, a, b)
    ada = f.entry(db, concept_slug="rsa", scope="student:ada")
    drawing = f.entry(db, concept_slug="rsa", scope="visual")
    other = f.entry(db, topic_id="biology", concept_slug="cells")
    db.commit()
    return {"a": a, "b": b, "e": e, "ada": ada, "visual": drawing, "other": other}


def _base(world, session_id):
    a, b, e = world["a"], world["b"], world["e"]
    return payload(
        session_id,
        [
            turn(0, decision=a, used=[a], rendered=[e], outcome="success", concepts=["rsa"]),
            turn(
                1,
                decision=b,
                outcome="failure",
                struggles=[
                    {
                        "concept_slug": "rsa",
                        "missing_slug": "modular-arithmetic",
                        "evidence": "why mod?",
                    }
                ],
                observations=[
                    {"graph": "topic", "concept": "Euler totient", "text": "Count coprimes."}
                ],
            ),
        ],
        learner="fuzzer",
    )


@st.composite
def mutation(draw):
    """A function from (valid payload dict, world) to the raw payload to ingest."""
    level = draw(st.sampled_from(["bytes", "json", "field"]))
    if level == "bytes":
        kind = draw(st.sampled_from(["flip", "insert", "truncate", "delete"]))
        where = draw(st.floats(0, 1))
        junk = draw(st.binary(min_size=1, max_size=8))

        def apply(body, world):
            data = json.dumps(body, ensure_ascii=False).encode()
            i = int(where * (len(data) - 1))
            if kind == "flip":
                return data[:i] + bytes([data[i] ^ junk[0]]) + data[i + 1 :]
            if kind == "insert":
                return data[:i] + junk + data[i:]
            if kind == "truncate":
                return data[:i]
            return data[:i] + data[i + len(junk) * 3 :]

        return apply
    if level == "json":
        path_choice = draw(st.integers(0, 10_000))
        value = draw(json_value)
        drop = draw(st.booleans())

        def apply(body, world):
            spots = list(_spots(body))
            container, key = spots[path_choice % len(spots)]
            if drop and isinstance(container, dict):
                del container[key]
            else:
                container[key] = value
            return body

        return apply
    field = draw(
        st.sampled_from(
            [
                "session_id",
                "learner_id",
                "topic_id",
                "ended_at",
                "student_message",
                "concept",
                "text",
                "evidence",
                "concept_slugs",
                "decision",
                "used",
                "rendered",
            ]
        )
    )
    text = draw(hostile_text)
    foreign = draw(st.sampled_from(["ada", "visual", "other", "b"]))

    def apply(body, world):
        t0, t1 = body["turns"]
        if field in ("session_id", "learner_id", "topic_id", "ended_at"):
            body[field] = text
        elif field == "student_message":
            t0["student_message"] = text
        elif field in ("concept", "text"):
            t1["observations"][0][field] = text
        elif field == "evidence":
            t1["struggles"][0]["evidence"] = text
        elif field == "concept_slugs":
            t0["concept_slugs"] = [text]
        elif field == "decision":
            t1["decision_entry_id"] = str(world[foreign])
        elif field == "used":
            t0["used_entry_ids"] = [str(world[foreign])]
        else:
            t0["rendered_edge_ids"] = [str(world[foreign])]
        return body

    return apply


def _spots(value):
    """Every (container, key) in a JSON value, for a JSON-level mutation."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield value, key
            yield from _spots(item)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield value, i
            yield from _spots(item)


@FUZZ
@given(mutate=mutation())
def test_a_mutated_payload_is_refused_cleanly_or_never_blocks_the_queue(db, mutate):
    """Refused: quarantined, memory digest unchanged. Accepted: applied or rejected, none left."""
    world = _world(db)
    raw = mutate(_base(world, f"fuzz-{next(_ids)}"), world)
    before = memory_digest(db)
    result = ingest_payload(db, raw, source="fuzz")
    db.commit()
    if result.quarantined:
        assert memory_digest(db) == before
        assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == 0
        assert db.execute("SELECT count(*) AS n FROM hag_session_quarantine").fetchone()["n"] == 1
        db.rollback()
        return
    assert result.status == "accepted"
    summary = process_pending()
    assert summary.sessions + summary.rejects == 1
    statuses = db.execute("SELECT status FROM hag_sessions").fetchall()
    assert [r["status"] for r in statuses] in (["processed"], ["rejected"])
    # no learned edge touches a drawing or another learner's pattern
    leaks = db.execute(
        """
        SELECT count(*) AS n FROM hag_edges e
        JOIN hag_entries s ON s.id = e.source_entry_id
        JOIN hag_entries t ON t.id = e.target_entry_id
        WHERE e.source_type = 'learned'
          AND (s.visibility_scope IN ('visual', 'student:ada')
               OR t.visibility_scope IN ('visual', 'student:ada'))
        """
    ).fetchone()["n"]
    assert leaks == 0
    # ada's private pattern was never graded by another learner's session
    learner = db.execute("SELECT learner_id FROM hag_sessions").fetchone()["learner_id"]
    ada = (
        None
        if learner == "ada"
        else db.execute(
            "SELECT confidence, success_count, failure_count FROM hag_entries WHERE id = %s",
            (world["ada"],),
        ).fetchone()
    )
    assert ada in (None, {"confidence": 0.8, "success_count": 0, "failure_count": 0})
    db.rollback()
