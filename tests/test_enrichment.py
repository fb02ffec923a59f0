"""Enrichment end to end: real PostgreSQL, the real `openai` client, a local OpenAI-protocol server."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from hag import config
from hag.enrichment import enrich
from tests import factories as f
from tests.fix_enrichment import MODEL, crypto_graph, reply


def enriched_edges(db):
    return db.execute(
        "SELECT s.concept_slug AS source, t.concept_slug AS target, g.edge_type, g.confidence, "
        "g.hit_count, g.source_type FROM hag_edges g JOIN hag_entries s ON s.id = g.source_entry_id "
        "JOIN hag_entries t ON t.id = g.target_entry_id WHERE g.source_type = 'enriched' "
        "ORDER BY 1, 2, 3"
    ).fetchall()


def count(db, table):
    return db.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]


def test_a_good_reply_is_written_enriched_at_the_dial_confidence(db, dials, llm):
    """Accepted edges enter through the upsert as `enriched`, at enrichment_confidence, hit 1."""
    crypto_graph(db)
    dials(enrichment_confidence=0.37)
    llm.queue_chat(
        reply(
            ("rsa", "modular-arithmetic", "prerequisite"),
            ("rsa", "public-key-cryptography", "related"),
        )
    )
    summary = enrich(model=MODEL, conn=db)
    assert [dict(r) for r in enriched_edges(db)] == [
        {
            "source": "rsa",
            "target": "modular-arithmetic",
            "edge_type": "prerequisite",
            "confidence": 0.37,
            "hit_count": 1,
            "source_type": "enriched",
        },
        {
            "source": "rsa",
            "target": "public-key-cryptography",
            "edge_type": "related",
            "confidence": 0.37,
            "hit_count": 1,
            "source_type": "enriched",
        },
    ]
    ledger = db.execute(
        "SELECT model, accepted, rejected, detail FROM hag_enrichment_ledger"
    ).fetchall()
    assert [(r["model"], r["accepted"], r["rejected"]) for r in ledger] == [(MODEL, 2, 0)]
    body = llm.requests_to("/chat/completions")[0].json_body
    assert body["model"] == MODEL and body["response_format"]["type"] == "json_schema"
    assert not summary.offline and summary.totals()["enriched"] == 1
    history = db.execute(
        "SELECT h.reason FROM hag_confidence_history h JOIN hag_edges g "
        "ON g.id = h.entity_id WHERE g.source_type = 'enriched'"
    ).fetchall()
    assert {r["reason"] for r in history} == {f"enriched by {MODEL}"}


def test_an_enriched_prerequisite_flags_its_concepts_for_the_nightly(db, llm):
    """Under the evidence profile an enriched prerequisite enters at its dial value outside
    any re-weigh's locks: its two concepts wait for the nightly's (migration 224)."""
    from hag import settings

    e = crypto_graph(db)
    settings.apply_profile(db, "evidence", by="test")
    db.commit()
    settings.invalidate()
    llm.queue_chat(reply(("rsa", "modular-arithmetic", "prerequisite")))
    enrich(model=MODEL, conn=db)
    pending = {r["source_entry_id"] for r in db.execute("SELECT * FROM hag_reweigh_pending")}
    assert pending >= {e["rsa"], e["modular-arithmetic"]}


def test_as_of_is_the_moment_the_edges_are_created_at(db, llm):
    """A backfill or a simulation stamps enriched edges and their history with its own time."""
    crypto_graph(db)
    moment = datetime(2027, 1, 15, 2, 30, tzinfo=UTC)
    llm.queue_chat(reply(("rsa", "modular-arithmetic", "prerequisite")))
    enrich(model=MODEL, conn=db, as_of=moment)
    row = db.execute(
        "SELECT g.created_at, g.updated_at, h.at FROM hag_edges g "
        "JOIN hag_confidence_history h ON h.entity_id = g.id WHERE g.source_type = 'enriched'"
    ).fetchone()
    assert (row["created_at"], row["updated_at"], row["at"]) == (moment, moment, moment)


def test_every_invalid_kind_is_rejected_with_its_reason_and_recorded(db, dials, llm):
    """Unknown slug, other topic, self-loop, disallowed type, duplicate and cycle: none written."""
    crypto_graph(db)
    dials(enrichment_max_proposals_per_orphan=10)
    llm.queue_chat(
        reply(
            ("rsa", "quantum-widgets", "prerequisite"),  # unknown slug
            ("rsa", "file-permissions", "related"),  # another topic's concept
            ("rsa", "rsa", "related"),  # self-loop
            ("rsa", "prime-numbers", "supersedes"),  # type not allowed
            ("modular-arithmetic", "rsa", "prerequisite"),  # accepted
            ("modular-arithmetic", "rsa", "prerequisite"),  # duplicate of the one above
            ("rsa", "public-key-cryptography", "prerequisite"),  # pkc -> mod (stored) -> rsa: cycle
        )
    )
    summary = enrich(model=MODEL, conn=db)
    [orphan] = summary.orphans
    assert [(r["target"], r["reject"]) for r in orphan.rejected] == [
        ("quantum-widgets", "unknown_slug"),
        ("file-permissions", "other_topic"),
        ("rsa", "self_loop"),
        ("prime-numbers", "disallowed_type"),
        ("rsa", "duplicate"),
        ("public-key-cryptography", "cycle"),
    ]
    assert [(r["source"], r["target"], r["edge_type"]) for r in enriched_edges(db)] == [
        ("modular-arithmetic", "rsa", "prerequisite")
    ]
    detail = db.execute("SELECT rejected, detail FROM hag_enrichment_ledger").fetchone()
    assert detail["rejected"] == 6
    assert [r["reject"] for r in detail["detail"]["rejected"]] == [
        "unknown_slug",
        "other_topic",
        "self_loop",
        "disallowed_type",
        "duplicate",
        "cycle",
    ]
    assert "linux-basics" in orphan.rejected[1]["detail"]


def test_an_edge_written_for_one_orphan_is_a_duplicate_for_the_next(db, llm):
    """Two orphans proposing the same `related` pair from both ends: one edge, one duplicate."""
    a = f.entry(db, concept_slug="steganography", embedding=f.vec(1.0), created_at=f.NOW)
    b = f.entry(
        db, concept_slug="one-time-pad", embedding=f.vec(0.9), created_at=f.NOW.replace(hour=13)
    )
    db.commit()
    llm.queue_chat(reply(("steganography", "one-time-pad", "related")))
    llm.queue_chat(reply(("one-time-pad", "steganography", "related")))
    summary = enrich(model=MODEL, conn=db)
    assert [(o.concept_slug, o.status) for o in summary.orphans] == [
        ("steganography", "enriched"),
        ("one-time-pad", "nothing_accepted"),
    ]
    assert summary.orphans[1].rejected[0]["reject"] == "duplicate"
    ends = db.execute("SELECT source_entry_id AS s, target_entry_id AS t FROM hag_edges").fetchall()
    assert [{r["s"], r["t"]} for r in ends] == [{a, b}]


@pytest.mark.parametrize("failure", ["malformed", "http500", "timeout"])
def test_a_failing_reply_is_retried_then_reported_with_nothing_written(db, dials, llm, failure):
    """Every attempt fails: all attempts are made and costed, no edge and no ledger row appear."""
    crypto_graph(db)
    dials(enrichment_max_attempts=3, enrichment_timeout_seconds=0.3)
    for _ in range(3):
        if failure == "malformed":
            llm.queue_chat('{"edges": [ {"source": "rsa", ')
        elif failure == "http500":
            llm.queue_error(500)
        else:
            llm.queue_delay(3.0, reply(("rsa", "modular-arithmetic", "prerequisite")))
    summary = enrich(model=MODEL, conn=db)
    [orphan] = summary.orphans
    assert orphan.status == "failed" and orphan.attempts == 3
    expected = {"malformed": "not valid JSON", "http500": "HTTP 500", "timeout": "timed out"}[
        failure
    ]
    assert expected in orphan.error
    assert len(llm.requests_to("/chat/completions")) == 3 and llm.pending() == 0
    assert enriched_edges(db) == [] and count(db, "hag_enrichment_ledger") == 0
    calls = db.execute("SELECT ok, error FROM hag_llm_calls ORDER BY call_id").fetchall()
    assert [c["ok"] for c in calls] == [False, False, False]
    assert all(expected in c["error"] for c in calls)


def test_a_retry_after_a_500_succeeds_within_the_budget(db, llm):
    """500, then a good reply: the orphan is enriched on its second attempt."""
    crypto_graph(db)
    llm.queue_error(500)
    llm.queue_chat(reply(("rsa", "modular-arithmetic", "prerequisite")))
    [orphan] = enrich(model=MODEL, conn=db).orphans
    assert (orphan.status, orphan.attempts) == ("enriched", 2)
    assert len(enriched_edges(db)) == 1


def test_an_error_another_attempt_cannot_cure_stops_at_once(db, llm):
    """A 400 (bad request, unknown model) is not retried: one call, reported, nothing written."""
    crypto_graph(db)
    llm.queue_error(400)
    [orphan] = enrich(model=MODEL, conn=db).orphans
    assert (orphan.status, orphan.attempts) == ("failed", 1) and "HTTP 400" in orphan.error
    assert count(db, "hag_enrichment_ledger") == 0


def test_unanchored_entries_are_never_sent(db, llm):
    """An `_unanchored_` orphan is neither enriched nor offered as a candidate to another."""
    crypto_graph(db)
    f.entry(
        db,
        concept_slug="_unanchored_",
        embedding=f.vec(0.99, axis=9),
        instruction="Zebra-striped secret threat model advice.",
    )
    db.commit()
    llm.chat_responder = lambda body: reply()
    summary = enrich(model=MODEL, conn=db)
    assert [o.concept_slug for o in summary.orphans] == ["rsa"]
    sent = json.dumps([r.json_body for r in llm.requests_to("/chat/completions")])
    assert "_unanchored_" not in sent and "Zebra-striped" not in sent
    assert "modular-arithmetic" in sent


def _bulk_topic(db, n):
    """A topic of n concepts: the orphan, one near concept (cosine 0.9), n - 2 far ones (0.2)."""
    f.topic(db, "big")
    db.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence, "
        "instruction, embedding) "
        "SELECT 'big', 'concept-' || lpad(g::text, 5, '0'), 'public', 'pattern', 0.8, "
        "'Teach concept ' || g || ' with a worked example and a check question.', "
        "(SELECT array_agg(CASE WHEN i = 1 THEN 0.2 WHEN i = 3 + g %% 1500 THEN sqrt(0.96) "
        "ELSE 0 END ORDER BY i) FROM generate_series(1, 1536) i)::vector "
        "FROM generate_series(1, %s) g",
        (n - 2,),
    )
    near = f.entry(db, topic_id="big", concept_slug="near-concept", embedding=f.vec(0.9, axis=2))
    far_ids = [
        r["id"]
        for r in db.execute(
            "SELECT id FROM hag_entries WHERE topic_id = 'big' AND concept_slug LIKE 'concept-%%' "
            "ORDER BY concept_slug LIMIT 2"
        ).fetchall()
    ]
    f.edge(db, near, far_ids[0])  # everyone but the orphan is wired in: one orphan only
    db.execute(
        "INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, "
        "source_type) SELECT e.id, %s, 'related', 0.8, 'seed' FROM hag_entries e "
        "WHERE e.topic_id = 'big' AND e.id <> %s AND e.id <> %s",
        (far_ids[1], far_ids[1], near),
    )
    f.entry(
        db,
        topic_id="big",
        concept_slug="the-orphan",
        embedding=f.QUERY,
        instruction="Teach the orphan.",
    )
    db.commit()


def test_the_prompt_stays_bounded_as_the_topic_grows_to_5000_concepts(db, dials, llm):
    """50 or 5,000 concepts: the same number of candidates, the nearest first, the same ceiling."""
    dials(enrichment_candidate_count=12, enrichment_candidate_chars=240)
    sizes = {}
    for n in (50, 5000):
        db.execute(
            "TRUNCATE hag_edges, hag_entries, hag_enrichment_ledger, hag_llm_calls, "
            "hag_runs CASCADE"
        )
        db.commit()
        _bulk_topic(db, n)
        llm.reset()
        llm.chat_responder = lambda body: reply()
        summary = enrich(topic="big", model=MODEL, conn=db)
        assert [o.concept_slug for o in summary.orphans] == ["the-orphan"]
        body = llm.requests_to("/chat/completions")[0].json_body
        user = body["messages"][1]["content"]
        lines = [line for line in user.splitlines() if line.startswith("- ")]
        assert len(lines) == 12 and lines[0].startswith("- near-concept: ")
        sizes[n] = (
            sum(len(m["content"]) for m in body["messages"]),
            llm.usage_totals()["prompt_tokens"],
        )
    # Ceiling: system text + labels + two orphan texts + 12 lines of slug and 240 characters.
    ceiling = len(body["messages"][0]["content"]) + 200 + 2 * 1000 + 12 * (2 + 13 + 2 + 240)
    assert sizes[5000][0] <= ceiling and sizes[50][0] <= ceiling
    assert abs(sizes[5000][1] - sizes[50][1]) <= 12  # tokens: a few digits of slugs differ, no more


def test_the_token_ledger_sums_match_the_servers_reported_usage(db, llm):
    """Prompt and completion tokens stored per call add up to what the server said it served."""
    crypto_graph(db)
    f.entry(
        db,
        concept_slug="steganography",
        embedding=f.vec(0.5, axis=5),
        created_at=f.NOW.replace(hour=13),
    )  # after rsa: orphans go oldest first
    db.commit()
    llm.queue_chat("this is not json at all", prompt_tokens=101, completion_tokens=7)
    llm.queue_chat(
        reply(("rsa", "modular-arithmetic", "prerequisite")),
        prompt_tokens=211,
        completion_tokens=31,
    )
    llm.queue_error(503)
    llm.queue_chat(reply(("steganography", "rsa", "related")))  # usage: the stub's word counts
    summary = enrich(model=MODEL, conn=db)
    served = llm.usage_totals()
    stored = db.execute(
        "SELECT sum(prompt_tokens) AS p, sum(completion_tokens) AS c, count(*) AS n, "
        "bool_and(latency_ms > 0) AS timed FROM hag_llm_calls "
        "WHERE run_id = %s",
        (summary.run_id,),
    ).fetchone()
    assert (stored["p"], stored["c"]) == (served["prompt_tokens"], served["completion_tokens"])
    assert stored["n"] == 4 and stored["timed"]
    assert served["prompt_tokens"] > 101 + 211  # the fourth reply's prompt was counted too
    cost = summary.cost()
    assert (
        cost["prompt_tokens"],
        cost["completion_tokens"],
        cost["calls"],
        cost["failed_calls"],
    ) == (served["prompt_tokens"], served["completion_tokens"], 4, 2)
    run = db.execute(
        "SELECT status, summary FROM hag_runs WHERE run_id = %s", (summary.run_id,)
    ).fetchone()
    assert (
        run["status"] == "done" and run["summary"]["cost"]["total_tokens"] == served["total_tokens"]
    )


def test_a_rerun_neither_duplicates_edges_nor_pays_twice(db, llm):
    """Same model again: no call, no new edge; a rejected-only orphan waits for another model."""
    crypto_graph(db)
    f.entry(
        db,
        concept_slug="steganography",
        embedding=f.vec(0.5, axis=5),
        created_at=f.NOW.replace(hour=13),
    )  # after rsa: orphans go oldest first
    db.commit()
    llm.queue_chat(reply(("rsa", "modular-arithmetic", "prerequisite")))
    llm.queue_chat(reply(("steganography", "quantum-widgets", "related")))  # all rejected
    first = enrich(model=MODEL, conn=db)
    assert [o.status for o in first.orphans] == ["enriched", "nothing_accepted"]
    edges = count(db, "hag_edges")
    again = enrich(model=MODEL, conn=db)
    assert again.orphans == [] and again.already_enriched == 1
    assert len(llm.requests_to("/chat/completions")) == 2 and count(db, "hag_edges") == edges
    llm.queue_chat(reply(("steganography", "rsa", "related")))
    other = enrich(model="another-model", conn=db)
    assert [(o.concept_slug, o.status) for o in other.orphans] == [("steganography", "enriched")]
    assert count(db, "hag_enrichment_ledger") == 3


def test_a_dry_run_shows_proposals_and_rejects_and_writes_nothing(db, llm):
    """Nothing in edges, ledgers or runs; what it would accept counts for the next orphan."""
    a = f.entry(db, concept_slug="steganography", embedding=f.vec(1.0), created_at=f.NOW)
    f.entry(
        db, concept_slug="one-time-pad", embedding=f.vec(0.9), created_at=f.NOW.replace(hour=13)
    )
    db.commit()
    llm.queue_chat(
        reply(("steganography", "one-time-pad", "related"), ("steganography", "nowhere", "related"))
    )
    llm.queue_chat(reply(("one-time-pad", "steganography", "related")))
    tables = (
        "hag_edges",
        "hag_enrichment_ledger",
        "hag_llm_calls",
        "hag_runs",
        "hag_confidence_history",
        "hag_entries",
    )
    before = {t: count(db, t) for t in tables}
    summary = enrich(model=MODEL, dry_run=True, conn=db)
    assert summary.dry_run and summary.accepted == 1
    assert summary.orphans[0].accepted[0]["source_entry_id"] == str(a)
    assert [r["reject"] for o in summary.orphans for r in o.rejected] == [
        "unknown_slug",
        "duplicate",
    ]
    assert summary.cost()["calls"] == 2
    assert {t: count(db, t) for t in tables} == before
    assert before["hag_edges"] == 0 and before["hag_runs"] == 0


def test_without_an_api_key_the_offline_proposer_runs_and_says_so(db):
    """No key: the deterministic offline proposer wires the orphan in, and the summary says so."""
    config.reset_config()
    crypto_graph(db)
    summary = enrich(conn=db)
    assert summary.offline and summary.proposer == "offline-similarity-v1"
    assert "offline" in summary.proposer_line and "no API key" in summary.proposer_line
    assert summary.orphans[0].status == "enriched"
    assert {r["source_type"] for r in enriched_edges(db)} == {"enriched"}


def test_an_unknown_topic_is_an_operator_error(db):
    """`--topic nowhere` fails with one line naming the topic, and writes nothing."""
    from hag.errors import NotFoundError

    with pytest.raises(NotFoundError, match="unknown topic 'nowhere'"):
        enrich(topic="nowhere", conn=db)
    assert count(db, "hag_runs") == 0


def test_the_cli_dry_run_prints_json_and_names_the_offline_proposer(db):
    """`hag enrich --dry-run --json`: the summary on stdout, the proposer on stderr, exit 0."""
    from click.testing import CliRunner

    from hag.cli import cli

    config.reset_config()
    crypto_graph(db)
    result = CliRunner().invoke(cli, ["enrich", "--topic", "cryptography", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["dry_run"] is True and data["offline"] is True
    assert [o["concept_slug"] for o in data["orphans"]] == ["rsa"]
    assert "offline" in result.stderr and count(db, "hag_edges") == 3


def test_the_cli_exits_1_when_an_orphan_fails_after_its_budget(db, dials, llm):
    """Three 500s: the human report names the error, and the exit code is 1."""
    from click.testing import CliRunner

    from hag.cli import cli

    crypto_graph(db)
    dials(enrichment_max_attempts=3)
    for _ in range(3):
        llm.queue_error(500)
    result = CliRunner().invoke(cli, ["enrich", "--model", MODEL])
    assert result.exit_code == 1
    assert "rsa: failed" in result.stdout and "HTTP 500" in result.stdout
    assert "1 orphan(s) failed" in result.stderr


def test_a_flow_run_with_a_failed_orphan_ends_failed_and_the_cli_prints_its_summary(
    db, dials, llm, prefect_harness
):
    """As `hag enrich` exits 1, the flow run ends Failed with one line (after publishing its
    report), not Completed; `hag enrich` through the flow prints the same summary, exit 1."""
    import pickle

    from click.testing import CliRunner
    from prefect.settings import PREFECT_API_URL

    from flows.enrichment import enrichment_flow
    from hag.cli import cli
    from tests.fix_prefect import run_logs

    crypto_graph(db)
    dials(enrichment_max_attempts=1)
    llm.queue_error(500)
    state = enrichment_flow(model=MODEL, return_state=True)
    assert state.is_failed() and state.message.startswith("1 orphan(s) failed")
    partly = state.result(raise_on_failure=False)
    assert partly.summary["totals"]["failed"] == 1
    assert pickle.loads(pickle.dumps(partly)).summary == partly.summary  # a result store's way
    lines = run_logs(state.state_details.flow_run_id, "orphan(s) failed")
    assert lines and not any("Traceback" in line for line in lines), lines
    llm.queue_error(500)
    through = CliRunner().invoke(
        cli, ["enrich", "--model", MODEL], env={"PREFECT_API_URL": PREFECT_API_URL.value()}
    )
    assert through.exit_code == 1, through.output
    assert "rsa: failed" in through.stdout and "1 orphan(s) failed" in through.stderr
