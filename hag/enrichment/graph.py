"""What enrichment reads from and writes to the database (sql/queries/enrichment.sql).

Reads: the orphans, each orphan's candidates, and the facts the validation needs. Writes:
the enrichment ledger (entry, model), the cost ledger (one row per model call) and the run
row. The edges themselves go through `hag.storage.edges.upsert_edges`, like every other edge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from psycopg.types.json import Jsonb

from hag.enrichment.prompt import Candidate, Orphan
from hag.enrichment.validate import Accepted, GraphFacts, SlugFacts
from hag.storage.db import Conn, one
from hag.storage.sqlfiles import query


def topic_exists(conn: Conn, topic_id: str) -> bool:
    return bool(
        one(conn.execute(query("enrichment", "topic_exists"), {"topic_id": topic_id}).fetchone())[
            "found"
        ]
    )


def select_orphans(conn: Conn, topic_id: str | None, model: str, limit: int) -> list[Orphan]:
    """The next `limit` orphans not yet sent to `model`, oldest first."""
    rows = conn.execute(
        query("enrichment", "orphans"), {"topic_id": topic_id, "model": model, "limit": limit}
    ).fetchall()
    return [Orphan(**r) for r in rows]


def count_already_enriched(conn: Conn, topic_id: str | None, model: str) -> int:
    """Orphans skipped because `model` already had them (the ledger says so)."""
    row = one(
        conn.execute(
            query("enrichment", "orphans_already_enriched"),
            {"topic_id": topic_id, "model": model},
        ).fetchone()
    )
    return int(row["n"])


def select_candidates(conn: Conn, orphan: Orphan, count: int) -> list[Candidate]:
    """The orphan's `count` nearest concepts in its topic and scope, nearest first."""
    rows = conn.execute(
        query("enrichment", "candidates"), {"entry_id": orphan.entry_id, "candidate_count": count}
    ).fetchall()
    return [
        Candidate(
            r["entry_id"],
            r["slug"],
            r["title"],
            r["description"],
            float(r["similarity"]),
            tuple(r["aliases"] or ()),
        )
        for r in rows
    ]


def graph_facts(
    conn: Conn, orphan: Orphan, slugs: Sequence[str], unstored: Iterable[Accepted] = ()
) -> GraphFacts:
    """Where the named slugs live, and the edges and prerequisite reach among their entries.

    `unstored` are edges accepted earlier in this run that are not in the database (a dry
    run writes nothing): they count as existing for the duplicate and cycle checks.
    """
    resolved = {
        r["slug"]: SlugFacts(
            r["slug"], r["entry_id"], r["maturity"], r["in_catalogue"], tuple(r["other_topics"])
        )
        for r in conn.execute(
            query("enrichment", "resolve_slugs"),
            {
                "topic_id": orphan.topic_id,
                "scope": orphan.visibility_scope,
                "slugs": list(slugs),
            },
        ).fetchall()
    }
    ids = [orphan.entry_id] + [f.entry_id for f in resolved.values() if f.entry_id is not None]
    extra = list(unstored)
    edges = {
        (r["source_entry_id"], r["target_entry_id"], r["edge_type"])
        for r in conn.execute(query("enrichment", "edges_among"), {"ids": ids}).fetchall()
    }
    involved = set(ids)
    edges |= {
        a.identity for a in extra if a.source_entry_id in involved and a.target_entry_id in involved
    }
    prerequisites = [a for a in extra if a.proposal.edge_type == "prerequisite"]
    reach = {
        (r["start"], r["node"])
        for r in conn.execute(
            query("enrichment", "prerequisite_reach"),
            {
                "ids": ids,
                "extra_sources": [a.source_entry_id for a in prerequisites],
                "extra_targets": [a.target_entry_id for a in prerequisites],
            },
        ).fetchall()
    }
    return GraphFacts(resolved, frozenset(edges), frozenset(reach))


def claim_orphan(conn: Conn, orphan: Orphan, model: str, run_id: UUID, at: datetime) -> bool:
    """Insert the ledger row for (orphan, model); False when another run has it already."""
    row = conn.execute(
        query("enrichment", "claim_orphan"),
        {"entry_id": orphan.entry_id, "model": model, "run_id": run_id, "at": at},
    ).fetchone()
    return row is not None


def settle_orphan(
    conn: Conn, orphan: Orphan, model: str, accepted: int, rejected: int, detail: Mapping[str, Any]
) -> None:
    conn.execute(
        query("enrichment", "settle_orphan"),
        {
            "entry_id": orphan.entry_id,
            "model": model,
            "accepted": accepted,
            "rejected": rejected,
            "detail": Jsonb(detail),
        },
    )


def record_calls(conn: Conn, run_id: UUID, calls: Iterable[Mapping[str, Any]]) -> None:
    """Write model calls into the cost ledger (hag_llm_calls)."""
    conn.cursor().executemany(
        query("enrichment", "record_call"),
        [
            {
                "run_id": run_id,
                "entry_id": c["entry_id"],
                "model": c["model"],
                "prompt_tokens": c["prompt_tokens"],
                "completion_tokens": c["completion_tokens"],
                "latency_ms": c["latency_ms"],
                "ok": c["ok"],
                "error": c["error"],
                "at": c["at"],
            }
            for c in calls
        ],
    )


def start_run(conn: Conn, run_id: UUID, at: datetime, params: Mapping[str, Any]) -> None:
    conn.execute(
        query("enrichment", "start_run"), {"run_id": run_id, "at": at, "params": Jsonb(params)}
    )


def finish_run(
    conn: Conn, run_id: UUID, at: datetime, summary: Mapping[str, Any], status: str
) -> None:
    conn.execute(
        query("enrichment", "finish_run"),
        {"run_id": run_id, "at": at, "summary": Jsonb(summary), "status": status},
    )


def run_calls(conn: Conn, run_id: UUID) -> list[dict[str, Any]]:
    """The cost ledger of one run, call by call, as stored."""
    return [
        dict(r)
        for r in conn.execute(query("enrichment", "run_calls"), {"run_id": run_id}).fetchall()
    ]
