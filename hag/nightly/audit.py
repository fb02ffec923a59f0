"""Review and restore of culled edges, from the audit the cull writes (SPEC §2 "Audit").

Every culled edge has a full copy in `hag_edge_audit`. `culled()` lists them; `restore()`
puts them back exactly as they were (same id, every column, and the learner reports the
audit copied beside each row, so its evidence reads as before the cull), refusing, with the
reason, an edge whose endpoint entry is gone or which has since been recreated. A restored
edge is never culled again by the rule (the operator's word outranks it; see
docs/nightly.md).

Runs are named as everywhere (hag/storage/runs.py: a run id or Prefect flow-run id, or a unique
prefix of either, or the ending listings print), and culled edges by their id, a unique
prefix of it, or its printed ending, so what is printed short is accepted back.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.pq import TransactionStatus

from hag import settings
from hag.errors import NotFoundError, ValidationError
from hag.evidence import store as evidence
from hag.storage import db, runs
from hag.storage.db import Conn, one
from hag.storage.edges import move_kept_reports, say_why
from hag.storage.sqlfiles import query


@dataclass(frozen=True)
class Refusal:
    edge_id: uuid.UUID
    reason: str


@dataclass
class RestoreResult:
    """Which edges went back (or, in a dry run, would), and which were refused with why."""

    restored: list[uuid.UUID] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)
    dry_run: bool = False
    # Each edge asked for: concepts, type, provenance, confidence, and what happened to it.
    edges: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "restored": [str(e) for e in self.restored],
            "refused": [{"edge_id": str(r.edge_id), "reason": r.reason} for r in self.refused],
        }


def resolve_edge(text: str | uuid.UUID, *, conn: Conn | None = None) -> uuid.UUID:
    """The culled edge an operator means: its id, a unique prefix of it (>= 4 digits), or
    the ending listings print."""
    typed, prefix = runs.hex_prefix(text, "edge id", "hex digits of a culled edge's id")
    with db.connection_or_own(conn) as c:
        rows = c.execute(query("audit", "match_culled_edge"), {"prefix": prefix}).fetchall()
        if conn is None:
            c.rollback()
    if not rows:
        raise NotFoundError(f"edge {typed!r}: no culled edge has this id")
    if len(rows) > 1:
        raise runs.ambiguous("edge id", typed, [runs.short(r["edge_id"]) for r in rows])
    return rows[0]["edge_id"]  # type: ignore[no-any-return]


def culled_columns(conn: Conn | None = None) -> list[str]:
    """The columns `culled` returns, in order, whether or not there are rows (a CSV's header
    is the same with none)."""
    with db.connection_or_own(conn) as c:
        cursor = c.execute(query("audit", "culled"), {"since": None, "run_id": None, "limit": 0})
        columns = [d.name for d in cursor.description or ()]
        if conn is None:
            c.rollback()
    return columns


def culled(
    since: datetime | None = None,
    run_id: uuid.UUID | str | None = None,
    *,
    limit: int | None = None,
    conn: Conn | None = None,
) -> list[dict[str, Any]]:
    """Culled edges, newest first: every audit column an operator reviews, both concepts.

    `run_id` is resolved as everywhere (an id, a unique prefix, or its ending); an unknown run is
    an error, not an empty answer.
    """
    with db.connection_or_own(conn) as c:
        if run_id is not None:
            run_id = runs.resolve(run_id, conn=c)
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
    edge_id: uuid.UUID | str | list[uuid.UUID | str] | None = None,
    run_id: uuid.UUID | str | None = None,
    *,
    dry_run: bool = False,
    by: str = "hag audit restore",
    flow_run_id: uuid.UUID | str | None = None,
    conn: Conn | None = None,
) -> RestoreResult:
    """Put culled edges back as they were: some edges (ids or prefixes), or one run's.

    Restores what it can and refuses the rest with a reason (an endpoint entry no longer
    exists, or the edge has since been recreated); one transaction, committed here, which
    also writes the restore's own run row (kind `restore`, its id the flow run's when
    Prefect runs it; the restored edges' history names it). A dry run says what would come
    back and what would be refused, and writes nothing.

    A restore locks its audit rows and then puts edges back, while a session-end locks its
    edges and then the audit rows whose kept reports it withdraws (evidence.sql
    `lock_kept_audits`): the two can wait on each other, and PostgreSQL's deadlock check
    then ends one of them. A restore so ended, in a transaction of its own (not autocommit,
    nothing of the caller's open), runs again from the start, up to `session_max_retries`
    times, as an ended session-end does; what the other writer committed meanwhile decides
    its verdicts. Raised, it leaves the connection with no transaction open.
    """
    if (edge_id is None) == (run_id is None):
        raise ValueError("restore takes exactly one of edge_id or run_id")
    wanted = [] if edge_id is None else edge_id if isinstance(edge_id, list) else [edge_id]
    if run_id is None and not wanted:
        raise ValidationError("restore: no edge id given")
    with db.connection_or_own(conn) as c:
        alone = not c.autocommit and c.info.transaction_status == TransactionStatus.IDLE
        # read in the restore's own transaction, as stored: another dial's invalid value does
        # not stop it (a restore of a prerequisite still refuses: its flags read the model's)
        retries = settings.load_as_stored(c).session_max_retries if alone else 0
        return db.retried(
            lambda _: _restore_once(c, wanted, run_id, dry_run, by, flow_run_id), retries
        )


def _restore_once(
    c: Conn,
    wanted: list[uuid.UUID | str],
    run_id: uuid.UUID | str | None,
    dry_run: bool,
    by: str,
    flow_run_id: uuid.UUID | str | None,
) -> RestoreResult:
    """One attempt at a restore, in one transaction: committed, or rolled back and raised."""
    try:
        asked = {
            "edge_ids": sorted({str(resolve_edge(e, conn=c)) for e in wanted}),
            "run_id": str(runs.resolve(run_id, conn=c)) if run_id is not None else None,
        }
        new_run = None if dry_run else runs.new_id(flow_run_id, conn=c)
        result = _restore(c, asked, by, dry_run, new_run)
        if new_run is not None:
            _record_run(c, new_run, flow_run_id, asked, result)
        if dry_run:
            c.rollback()
        else:
            c.commit()
    except BaseException:
        c.rollback()
        raise
    return result


def _record_run(
    conn: Conn,
    run_id: uuid.UUID,
    flow_run_id: uuid.UUID | str | None,
    asked: dict[str, Any],
    result: RestoreResult,
) -> None:
    """The restore's run row, written done in the restore's own transaction."""
    conn.execute(
        query("runs", "record_finished_run"),
        {
            "run_id": run_id,
            "kind": "restore",
            "flow_run_id": str(flow_run_id) if flow_run_id else None,
            "params": json.dumps(asked),
            "summary": json.dumps(
                {"restored": len(result.restored), "refused": len(result.refused)}
            ),
        },
    )


def _restore(
    conn: Conn, asked: dict[str, Any], by: str, dry_run: bool, run_id: uuid.UUID | None
) -> RestoreResult:
    conn.execute(query("audit", "lock_restorable"), asked).fetchall()
    verdicts = conn.execute(query("audit", "restore_verdicts"), asked).fetchall()
    if not verdicts:
        what = (
            f"edge(s) {', '.join(runs.short(e) for e in asked['edge_ids'])}"
            if asked["edge_ids"]
            else f"run {runs.short(asked['run_id'])}"
        )
        raise NotFoundError(
            f"{what}: no culled edge waiting to be restored (never culled, or already restored)"
        )
    # An edge asked for by id whose cull was restored already is refused by name, as when it
    # is the only one asked for, not left out of the answer.
    waiting = {str(v["edge_id"]) for v in verdicts}
    done_before = [
        Refusal(
            r["edge_id"],
            f"restored already, at {r['restored_at']:%Y-%m-%d %H:%M} by {r['restored_by']}",
        )
        for r in conn.execute(query("audit", "restored_already"), asked).fetchall()
        if str(r["edge_id"]) not in waiting and r["restored_at"] is not None
    ]
    result = RestoreResult(
        refused=[Refusal(v["edge_id"], v["refusal"]) for v in verdicts if v["refusal"]]
        + done_before,
        dry_run=dry_run,
        edges=[
            {
                k: v[k]
                for k in (
                    "edge_id",
                    "source_concept",
                    "target_concept",
                    "edge_type",
                    "source_type",
                    "confidence",
                    "refusal",
                )
            }
            for v in verdicts
        ],
    )
    wanted = [v for v in verdicts if not v["refusal"]]
    if wanted and dry_run:
        result.restored = sorted((v["edge_id"] for v in wanted), key=str)
    elif wanted:
        say_why(conn, "restored from the cull audit", run_id=run_id)
        back = conn.execute(
            query("audit", "restore_edges"),
            {
                "audit_ids": [v["audit_id"] for v in wanted],
                "by": by,
            },
        ).fetchall()
        result.restored = sorted((r["edge_id"] for r in back), key=str)
        done = set(result.restored)
        move_kept_reports(
            conn, [(v["audit_id"], v["edge_id"]) for v in wanted if v["edge_id"] in done]
        )
        restored = [
            (v["source_entry_id"], v["target_entry_id"])
            for v in wanted
            if v["edge_id"] in done and v["edge_type"] == "prerequisite"
        ]
        if restored:  # their concepts wait for the nightly's re-weigh (migration 224)
            evidence.flag_written_prerequisites(
                conn,
                restored,
                settings.load(conn),
                one(conn.execute(query("sweeps", "database_now")).fetchone())["now"],
            )
        result.refused += [
            Refusal(v["edge_id"], "the edge was recreated while restoring")
            for v in wanted
            if v["edge_id"] not in done
        ]
    result.refused.sort(key=lambda r: str(r.edge_id))
    return result
