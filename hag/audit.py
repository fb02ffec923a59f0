"""Review and restore of culled edges, from the audit the cull writes (SPEC §2 "Audit").

Every culled edge has a full copy in `hag_edge_audit`. `culled()` lists them; `restore()`
puts them back exactly as they were (same id, every column), refusing, with the reason,
an edge whose endpoint entry is gone or which has since been recreated. A restored edge is
never culled again by the rule (the operator's word outranks it; see docs/nightly.md).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hag import db
from hag.edges import say_why
from hag.errors import NotFoundError
from hag.sqlfiles import query

# Columns of a culled-edge listing, in the order tables and CSV files show them.
CULLED_COLUMNS = (
    "deleted_at",
    "run_id",
    "edge_id",
    "source_concept",
    "target_concept",
    "edge_type",
    "source_type",
    "confidence",
    "hit_count",
    "traversal_count",
    "created_at",
    "restored_at",
)


@dataclass(frozen=True)
class Refusal:
    edge_id: uuid.UUID
    reason: str


@dataclass
class RestoreResult:
    """Which edges went back, and which were refused with their reason."""

    restored: list[uuid.UUID] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "restored": [str(e) for e in self.restored],
            "refused": [{"edge_id": str(r.edge_id), "reason": r.reason} for r in self.refused],
        }


def culled(
    since: datetime | None = None,
    run_id: uuid.UUID | str | None = None,
    *,
    limit: int | None = None,
    conn: Any = None,
) -> list[dict[str, Any]]:
    """Culled edges, newest first: every audit column an operator reviews, both concepts."""
    with db.connection_or_own(conn) as c:
        rows = c.execute(
            query("audit", "culled"),
            {
                "since": since,
                "run_id": str(run_id) if run_id else None,
                "limit": limit,
            },
        ).fetchall()
        if conn is None:
            c.rollback()
    return [dict(r) for r in rows]


def restore(
    edge_id: uuid.UUID | str | None = None,
    run_id: uuid.UUID | str | None = None,
    *,
    by: str = "hag audit restore",
    conn: Any = None,
) -> RestoreResult:
    """Put culled edges back as they were: one edge, or every edge one run culled.

    Restores what it can and refuses the rest with a reason (an endpoint entry no longer
    exists, or the edge has since been recreated); one transaction, committed here.
    """
    if (edge_id is None) == (run_id is None):
        raise ValueError("restore takes exactly one of edge_id or run_id")
    asked = {
        "edge_id": str(edge_id) if edge_id else None,
        "run_id": str(run_id) if run_id else None,
    }
    with db.connection_or_own(conn) as c:
        try:
            result = _restore(c, asked, by)
            c.commit()
        except BaseException:
            c.rollback()
            raise
    return result


def _restore(conn: Any, asked: dict[str, Any], by: str) -> RestoreResult:
    conn.execute(query("audit", "lock_restorable"), asked).fetchall()
    verdicts = conn.execute(query("audit", "restore_verdicts"), asked).fetchall()
    if not verdicts:
        what = f"edge {asked['edge_id']}" if asked["edge_id"] else f"run {asked['run_id']}"
        raise NotFoundError(
            f"{what}: no culled edge waiting to be restored (never culled, or already restored)"
        )
    result = RestoreResult(
        refused=[Refusal(v["edge_id"], v["refusal"]) for v in verdicts if v["refusal"]]
    )
    wanted = [v for v in verdicts if not v["refusal"]]
    if wanted:
        say_why(conn, "restored from the cull audit")
        back = conn.execute(
            query("audit", "restore_edges"),
            {
                "audit_ids": [v["audit_id"] for v in wanted],
                "by": by,
            },
        ).fetchall()
        result.restored = sorted((r["edge_id"] for r in back), key=str)
        done = set(result.restored)
        result.refused += [
            Refusal(v["edge_id"], "the edge was recreated while restoring")
            for v in wanted
            if v["edge_id"] not in done
        ]
    result.refused.sort(key=lambda r: str(r.edge_id))
    return result
