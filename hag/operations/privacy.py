"""A learner's own data: export it, erase it, and keep raw transcripts only so long.

Where a learner's data lives, and what each operation does with it, is docs/privacy.md.

- `export_learner` streams every row held about one learner to a JSON Lines file through
  server-side cursors (memory stays flat), in one consistent snapshot, and ends with a
  manifest of the rows per table.
- `erase_learner` removes the learner's rows, in one transaction, and replaces their id in the
  shared graph's evidence by a random pseudonym (per learner, and per session): the counts the
  evidence model reads stay, and no confidence moves. An erasure record keeps when, by whom,
  a salted hash of the id and the counts, never the data. A dry run does the same work and
  rolls it back, so the counts it prints are exactly the real run's.
- `strip_expired` is the nightly's retention step: the student's words out of processed
  payloads older than `message_retention_days`, the raw text out of the quarantine after
  `quarantine_retention_days` (0: keep, the default); a second run changes nothing.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import json
import os
import re
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hag import settings
from hag.errors import NotFoundError, ValidationError
from hag.settings import Settings
from hag.storage import db
from hag.storage.db import Conn, one
from hag.storage.learner_lock import lock_learner
from hag.storage.sqlfiles import query

__all__ = [
    "ErasureResult",
    "ExportResult",
    "RetentionCounts",
    "erase_learner",
    "export_learner",
    "learner_hash",
    "operator_name",
    "strip_expired",
]

# The learner id as the contract and the schema admit it (hag/session/contract.py LearnerId).
LEARNER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
_ID_CHAR = "A-Za-z0-9._@-"

# The export's named queries, in the order the file holds them (one table each).
EXPORT_QUERIES = (
    "export_sessions",
    "export_entries",
    "export_edges",
    "export_confidence_history",
    "export_maturity_history",
    "export_reports",
    "export_audit_reports",
    "export_successes",
    "export_bridged",
    "export_withdrawn",
    "export_quarantine",
)

# The erasure's statements in order, each with the table and what it does to the rows it
# counts. Private rows go first (history, edges and the audit's copies of them, then the
# entries); the shared evidence is pseudonymised; the sessions go last.
ERASE_STEPS = (
    ("erase_private_history", "hag_confidence_history", "deleted"),
    ("erase_maturity_history", "hag_maturity_history", "deleted"),
    ("erase_enrichment_ledger", "hag_enrichment_ledger", "deleted"),
    ("erase_llm_calls", "hag_llm_calls", "deleted"),
    ("erase_private_edges", "hag_edges", "deleted"),
    ("erase_private_resume_pending", "hag_resume_pending", "deleted"),
    ("count_erased_culls", "hag_erased_culls", "runs noted"),
    ("erase_private_audit", "hag_edge_audit", "deleted"),
    ("erase_private_withdrawn", "hag_pair_withdrawn", "deleted"),
    ("erase_private_entries", "hag_entries", "deleted"),
    ("erase_private_graph_counts", "hag_graph_concepts", "deleted"),
    ("pseudonymise_reports", "hag_edge_learner_reports", "pseudonymised"),
    ("pseudonymise_audit_reports", "hag_edge_audit_reports", "pseudonymised"),
    ("pseudonymise_successes", "hag_learner_successes", "pseudonymised"),
    ("pseudonymise_bridged", "hag_learner_bridged", "pseudonymised"),
    ("pseudonymise_withdrawn", "hag_pair_withdrawn", "pseudonymised"),
    ("pseudonymise_history_sessions", "hag_confidence_history", "pseudonymised"),
    ("pseudonymise_edge_sessions", "hag_edges", "pseudonymised"),
    ("pseudonymise_audit_sessions", "hag_edge_audit", "pseudonymised"),
    ("erase_quarantine", "hag_session_quarantine", "deleted"),
    ("erase_run_rejections", "hag_runs", "redacted"),
    ("erase_sessions", "hag_sessions", "deleted"),
)


def check_learner_id(learner_id: str) -> str:
    """The id as given, or a one-line ValidationError when no learner can have it."""
    if not LEARNER_ID.fullmatch(learner_id or ""):
        raise ValidationError(
            f"learner id {learner_id!r} is not a learner id "
            "(1-128 of A-Z a-z 0-9 . _ @ -, starting with a letter or digit)"
        )
    return learner_id


def _params(learner_id: str) -> dict[str, Any]:
    """The bound parameters every privacy query takes: the id, the private scope, the id as a
    whole word in free text, and the id in a session id, where it may run into the session's
    own part (`ada.lovelace-s20`): between any non-alphanumeric characters. A backslash makes
    any non-alphanumeric character literal in a PostgreSQL regular expression."""
    escaped = "".join(c if c.isalnum() else "\\" + c for c in learner_id)
    return {
        "learner_id": learner_id,
        "scope": f"student:{learner_id}",
        "pattern": f"(^|[^{_ID_CHAR}]){escaped}($|[^{_ID_CHAR}])",
        "id_in_session": f"(^|[^A-Za-z0-9]){escaped}($|[^A-Za-z0-9])",
    }


def learner_hash(conn: Conn, learner_id: str) -> str:
    """HMAC-SHA-256 of the learner id under the database's erasure salt (hag_meta)."""
    salt = one(conn.execute(query("privacy", "erasure_salt")).fetchone())["value"]
    return hmac.new(bytes.fromhex(salt), learner_id.encode(), hashlib.sha256).hexdigest()


def operator_name(given: str | None = None) -> str:
    """Who runs an erasure: the name given, else the operating-system user."""
    if given and given.strip():
        return given.strip()
    try:
        return f"os user {getpass.getuser()}"
    except (KeyError, OSError):  # no passwd entry (a container's anonymous uid)
        return f"os uid {os.getuid()}"


def _refuse_unknown(conn: Conn, learner_id: str) -> dict[str, Any]:
    params = _params(learner_id)
    present = one(conn.execute(query("privacy", "learner_presence"), params).fetchone())
    if present["present"]:
        return params
    erased = one(
        conn.execute(
            query("privacy", "erased_before"), {"learner_hash": learner_hash(conn, learner_id)}
        ).fetchone()
    )["erased_at"]
    if erased is not None:
        raise NotFoundError(
            f"learner {learner_id!r} was erased on {erased:%Y-%m-%d}: nothing is held about them"
        )
    raise NotFoundError(f"unknown learner {learner_id!r}: nothing is held about them")


# --- export ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportResult:
    learner_id: str
    path: str
    counts: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def iter_learner_rows(conn: Conn, learner_id: str, batch: int) -> Iterator[tuple[str, str]]:
    """(table, row as JSON text) for every row held about the learner, table by table, each
    through a server-side cursor fetching `batch` rows per round trip."""
    params = _params(learner_id)
    for name in EXPORT_QUERIES:
        with conn.cursor(name=f"hag_learner_{name}") as cur:
            cur.itersize = batch
            cur.execute(query("privacy", name), params)
            for row in cur:
                yield row["tbl"], row["row"]


def export_learner(learner_id: str, out: Path, *, conn: Conn | None = None) -> ExportResult:
    """Write everything held about one learner to `out` as JSON Lines: one
    `{"table": ..., "row": {...}}` line per row, then one `{"manifest": {...}}` line with the
    rows per table. The file appears whole or not at all; an unknown learner is refused."""
    check_learner_id(learner_id)
    if conn is None:
        with db.connect() as own:
            return export_learner(learner_id, out, conn=own)
    batch = settings.current().export_batch_rows
    conn.rollback()
    # One snapshot for every table: the file never holds a session without its reports.
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    counts: dict[str, int] = {}
    out = out.expanduser()
    target_dir = out.parent if str(out.parent) else Path(".")
    if not target_dir.is_dir():
        raise ValidationError(f"--out {out}: folder {target_dir} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".part", dir=target_dir)
    try:
        _refuse_unknown(conn, learner_id)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for table, row in iter_learner_rows(conn, learner_id, batch):
                counts[table] = counts.get(table, 0) + 1
                f.write(f'{{"table": {json.dumps(table)}, "row": {row}}}\n')
            manifest = {
                "learner_id": learner_id,
                "exported_at": datetime.now(UTC).isoformat(),
                "counts": counts,
            }
            f.write(json.dumps({"manifest": manifest}) + "\n")
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    finally:
        conn.rollback()
    return ExportResult(learner_id, str(out), counts)


# --- erasure --------------------------------------------------------------------------------


@dataclass
class ErasureResult:
    learner_hash: str
    erased_by: str
    dry_run: bool
    # table -> {"deleted": n, "pseudonymised": n, ...}: only what was (or would be) touched
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    erasure_id: int | None = None
    erased_at: datetime | None = None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["erased_at"] = self.erased_at.isoformat() if self.erased_at else None
        return data

    def lines(self) -> list[str]:
        """One line per table and action, as the command line prints them."""
        return [
            f"{table}: {n} {action}"
            for table, actions in self.counts.items()
            for action, n in actions.items()
        ]


def erase_learner(
    learner_id: str,
    *,
    dry_run: bool = False,
    operator: str | None = None,
    conn: Conn | None = None,
) -> ErasureResult:
    """Remove every row of one learner in one transaction and record the erasure (a dry run
    does the same work and rolls it back). An unknown learner is refused in one line."""
    check_learner_id(learner_id)
    if conn is None:
        with db.connect() as own:
            return erase_learner(learner_id, dry_run=dry_run, operator=operator, conn=own)
    conn.rollback()
    try:
        params = _refuse_unknown(conn, learner_id)
        params["pseudonym"] = f"erased-{uuid.uuid4()}"
        result = ErasureResult(learner_hash(conn, learner_id), operator_name(operator), dry_run)
        # The learner's session rows first, as session-end holds its session's row before any
        # other lock: a worker applying one finishes first, and none is claimed meanwhile.
        # Then the learner's ingest lock, exclusive: no session of the learner is queued
        # until the erasure commits, and those queued since the rows were locked are locked
        # in turn; every row the learner's sessions wrote is then committed and seen below.
        conn.execute(query("privacy", "lock_sessions"), params)
        # (the dials as stored, a default standing in for an invalid one: an invalid dial
        # stops ingest, `settings.current`, never an erasure)
        lock_learner(conn, learner_id, settings.load_as_stored(conn), shared=False)
        conn.execute(query("privacy", "lock_sessions"), params)
        for name in ("collect_sessions", "collect_entries", "collect_edges"):
            conn.execute(query("privacy", name), params)
        conn.execute("ANALYZE hag_erase_sessions")
        conn.execute("ANALYZE hag_erase_entries")
        conn.execute("ANALYZE hag_erase_edges")
        # every edge, then every audit row, the steps below write or delete, each in one
        # sorted pass before any of them (session-end's order: its edges, then the report
        # sums and audit rows it writes)
        conn.execute(query("privacy", "lock_erased_edges"), params)
        conn.execute(query("privacy", "lock_erased_audits"), params)
        for name, table, action in ERASE_STEPS:
            n = conn.execute(query("privacy", name), params).rowcount
            if n:
                actions = result.counts.setdefault(table, {})
                actions[action] = actions.get(action, 0) + n
        if dry_run:
            conn.rollback()
            return result
        row = one(
            conn.execute(
                query("privacy", "record_erasure"),
                {
                    "erased_by": result.erased_by,
                    "learner_hash": result.learner_hash,
                    "counts": json.dumps(result.counts),
                },
            ).fetchone()
        )
        conn.execute(query("privacy", "record_erased_sessions"), {"erasure_id": row["erasure_id"]})
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    result.erasure_id, result.erased_at = row["erasure_id"], row["erased_at"]
    return result


# --- retention ------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetentionCounts:
    sessions_stripped: int = 0
    quarantine_stripped: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def strip_expired(
    conn: Conn, as_of: datetime, dials: Settings, *, dry_run: bool = False
) -> RetentionCounts:
    """The nightly's retention step, on the caller's transaction: strip the student's words
    from payloads older than `message_retention_days` and the raw text from quarantined
    payloads older than `quarantine_retention_days` (0: keep); how many rows were (or, in a
    dry run, would be) stripped. Stripped rows are stamped: a second run strips nothing."""
    counts = {}
    for key, days, strip, forecast in (
        (
            "sessions_stripped",
            dials.message_retention_days,
            "retention_strip_sessions",
            "retention_forecast_sessions",
        ),
        (
            "quarantine_stripped",
            dials.quarantine_retention_days,
            "retention_strip_quarantine",
            "retention_forecast_quarantine",
        ),
    ):
        if days <= 0:
            counts[key] = 0
            continue
        params = {"as_of": as_of, "days": days, "at": as_of}
        if dry_run:
            found = one(conn.execute(query("privacy", forecast), params).fetchone())
            counts[key] = int(found["n"])
        else:
            counts[key] = conn.execute(query("privacy", strip), params).rowcount
    return RetentionCounts(**counts)
