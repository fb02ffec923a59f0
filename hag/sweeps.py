"""The nightly maintenance of the memory (SPEC §5): promotion, archiving and the audited cull.

A run is: read the dials in force → decide and apply every step in SQL, in one transaction
(`sql/queries/sweeps.sql`, rules in migration 030) → report. The cull's audit rows are
written by the AFTER DELETE statement trigger of migration 001 inside that same
transaction, from the run id, reason and rule values this module sets first. A dry run
asks the same rules what they would do and writes nothing at all (not even a run row).

`as_of` is the run's "now" for every age rule, and the time the run stamps on what it
changes (audit `deleted_at`, maturity history), so a backfill as of a past date leaves the
memory it would have left on that date.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from hag import db, settings
from hag.edges import say_why
from hag.sqlfiles import query
from hag.timing import timed

# Any constant works; it only has to differ from the other advisory locks of the project.
NIGHTLY_LOCK = 0x4A47_0030
CULL_REASON = "cull"

PROMOTION_DIALS = (
    "promotion_min_age_days",
    "promotion_min_confidence",
    "promotion_max_failures",
    "proven_min_age_days",
    "proven_min_confidence",
    "proven_min_successes",
    "proven_max_failure_ratio",
    "archive_max_confidence",
    "archive_min_failures",
)
REPRIEVE_DIALS = (
    "reprieve_idle_days",
    "retrieval_min_confidence",
    "floor_proven",
    "floor_pattern",
    "floor_candidate",
)
CULL_DIALS = (
    "cull_max_confidence",
    "cull_min_age_days",
    "cull_max_traversals",
    "cull_source_types",
)


@dataclass(frozen=True)
class CulledEdge:
    """One row of the operator's table: source → target, type, provenance, confidence, age."""

    edge_id: uuid.UUID
    source_concept: str | None
    target_concept: str | None
    edge_type: str
    source_type: str
    confidence: float
    age_days: int


@dataclass
class NightlySummary:
    """What one nightly run changed (or, for a dry run, would change)."""

    run_id: uuid.UUID
    as_of: datetime
    dry_run: bool
    promoted_to_pattern: int = 0
    promoted_to_proven: int = 0
    archived: int = 0
    reprieved: int = 0
    culled: int = 0
    culled_by_source_type: dict[str, int] = field(default_factory=dict)
    culled_edges: list[CulledEdge] = field(default_factory=list)  # the first report_max_rows
    rule_values: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    step_seconds: dict[str, float] = field(default_factory=dict)  # where the time went

    @property
    def promotions(self) -> int:
        return self.promoted_to_pattern + self.promoted_to_proven

    def counts(self) -> dict[str, Any]:
        """The numbers a run row keeps (hag_runs.summary) and the audit check reads."""
        return {
            "promoted_to_pattern": self.promoted_to_pattern,
            "promoted_to_proven": self.promoted_to_proven,
            "archived": self.archived,
            "reprieved": self.reprieved,
            "culled": self.culled,
            "culled_by_source_type": self.culled_by_source_type,
        }

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["run_id"] = str(self.run_id)
        data["as_of"] = self.as_of.isoformat()
        data["culled_edges"] = [{**asdict(e), "edge_id": str(e.edge_id)} for e in self.culled_edges]
        return data


def run_nightly(as_of: datetime | None = None, dry_run: bool = False) -> NightlySummary:
    """Promote, archive and cull as of `as_of` (default: now); a dry run changes nothing."""
    with db.connect() as conn:
        return sweep(conn, as_of=as_of, dry_run=dry_run)


def sweep(
    conn: Any,
    *,
    as_of: datetime | None = None,
    dry_run: bool = False,
    run_id: uuid.UUID | None = None,
) -> NightlySummary:
    """The nightly run on a caller's connection (committed here; nothing open is left)."""
    started = time.perf_counter()
    conn.rollback()  # begin from a clean transaction: the dials and the clock read fresh
    dials = settings.load(conn)
    when = (
        _aware(as_of)
        if as_of is not None
        else conn.execute(query("sweeps", "database_now")).fetchone()["now"]
    )
    conn.rollback()
    summary = NightlySummary(
        run_id=run_id or uuid.uuid4(),
        as_of=when,
        dry_run=dry_run,
        rule_values=rule_values(dials, when),
    )
    params = sweep_parameters(dials, when, summary.run_id)
    if dry_run:
        _forecast(conn, params, summary)
        conn.rollback()
    else:
        conn.execute(
            query("sweeps", "start_run"),
            {
                "run_id": summary.run_id,
                "as_of": when,
                "params": json.dumps({"as_of": when.isoformat(), "dials": summary.rule_values}),
            },
        )
        conn.commit()
        try:
            _apply(conn, params, summary)
            conn.execute(
                query("sweeps", "finish_run"),
                {"run_id": summary.run_id, "summary": json.dumps(summary.counts())},
            )
            conn.commit()
        except BaseException as exc:
            conn.rollback()
            _record_failure(conn, summary.run_id, exc)
            raise
    summary.seconds = time.perf_counter() - started
    return summary


def rule_values(dials: Mapping[str, Any], as_of: datetime) -> dict[str, Any]:
    """The dials in force for this run, as the audit keeps them (plus the run's as_of)."""
    values = {key: dials[key] for key in (*PROMOTION_DIALS, *REPRIEVE_DIALS, *CULL_DIALS)}
    values["as_of"] = as_of.isoformat()
    return values


def sweep_parameters(
    dials: Mapping[str, Any], as_of: datetime, run_id: uuid.UUID
) -> dict[str, Any]:
    """The bound parameters every sweep query takes (the dials by their own keys)."""
    return {
        **rule_values(dials, as_of),
        "cull_source_types": list(dials["cull_source_types"]),
        "as_of": as_of,
        "run_id": run_id,
        "limit": dials["sweep_report_max_rows"],
    }


def _apply(conn: Any, params: dict[str, Any], summary: NightlySummary) -> None:
    conn.execute(query("sweeps", "lock_nightly"), {"lock_id": NIGHTLY_LOCK})
    with timed(summary.step_seconds, "promotion"):
        summary.promoted_to_pattern = _count(conn, "promote_to_pattern", params)
        summary.promoted_to_proven = _count(conn, "promote_to_proven", params)
    with timed(summary.step_seconds, "archive"):
        summary.archived = sum(
            _count(conn, "archive_sunk", {**params, "from_maturity": m})
            for m in ("candidate", "pattern")
        )
    with timed(summary.step_seconds, "reprieve"):
        if params["reprieve_idle_days"] > 0:
            say_why(
                conn,
                "reprieve: sunk below its floor and unused",
                run_id=summary.run_id,
                at=summary.as_of,
            )
            summary.reprieved = _count(conn, "reprieve_sunk", params)
    with timed(summary.step_seconds, "cull"):
        conn.execute(
            query("sweeps", "set_delete_context"),
            {
                "run_id": str(summary.run_id),
                "reason": CULL_REASON,
                "rule_values": json.dumps(summary.rule_values),
                "deleted_at": summary.as_of.isoformat(),
            },
        )
        by_type = conn.execute(query("sweeps", "cull_edges"), params).fetchall()
        summary.culled_by_source_type = {r["source_type"]: r["n"] for r in by_type}
        summary.culled = sum(summary.culled_by_source_type.values())
    with timed(summary.step_seconds, "report"):
        if summary.culled:
            rows = conn.execute(query("sweeps", "culled_report_rows"), params).fetchall()
            summary.culled_edges = [CulledEdge(**r) for r in rows]


def _forecast(conn: Any, params: dict[str, Any], summary: NightlySummary) -> None:
    row = conn.execute(query("sweeps", "maturity_forecast"), params).fetchone()
    summary.promoted_to_pattern = row["promoted_to_pattern"]
    summary.promoted_to_proven = row["promoted_to_proven"]
    summary.archived = row["archived"]
    if params["reprieve_idle_days"] > 0:
        summary.reprieved = _count(conn, "reprieve_forecast", params)
    by_type = conn.execute(query("sweeps", "cull_forecast"), params).fetchall()
    summary.culled_by_source_type = {r["source_type"]: r["n"] for r in by_type}
    summary.culled = sum(summary.culled_by_source_type.values())
    if summary.culled:
        rows = conn.execute(query("sweeps", "cull_forecast_rows"), params).fetchall()
        summary.culled_edges = [CulledEdge(**r) for r in rows]


def _count(conn: Any, name: str, params: dict[str, Any]) -> int:
    return int(conn.execute(query("sweeps", name), params).fetchone()["n"])


def _record_failure(conn: Any, run_id: uuid.UUID, exc: BaseException) -> None:
    try:
        conn.execute(
            query("sweeps", "fail_run"),
            {
                "run_id": run_id,
                "summary": json.dumps({"error": f"{type(exc).__name__}: {exc}"[:500]}),
            },
        )
        conn.commit()
    except Exception:  # noqa: BLE001 - the original error is the one worth raising
        conn.rollback()


def _aware(moment: datetime) -> datetime:
    """A naive --as-of means UTC (the operator's clock is not the server's)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def render_markdown(summary: NightlySummary) -> str:
    """A link-free summary an operator reads in the Prefect UI."""
    mode = "Dry run (nothing was changed)" if summary.dry_run else "Nightly run"
    lines = [
        f"# {mode} as of {summary.as_of:%Y-%m-%d %H:%M %Z}",
        "",
        f"Run id: `{summary.run_id}`",
        "",
        "| step | entries or edges |",
        "| --- | ---: |",
        f"| candidate → pattern | {summary.promoted_to_pattern} |",
        f"| pattern → proven | {summary.promoted_to_proven} |",
        f"| archived (sank) | {summary.archived} |",
        f"| reprieved (lifted back to the floor) | {summary.reprieved} |",
        f"| edges culled | {summary.culled} |",
    ]
    for source_type, n in summary.culled_by_source_type.items():
        lines.append(f"| culled, {source_type} | {n} |")
    rv = summary.rule_values
    lines += [
        "",
        "Rules in force: cull edges of provenance "
        f"{', '.join(rv['cull_source_types'])} (never seed) with confidence below "
        f"{rv['cull_max_confidence']}, traversed at most {rv['cull_max_traversals']} times, at "
        f"least {rv['cull_min_age_days']} days old; promote candidates at least "
        f"{rv['promotion_min_age_days']} days old with confidence at least "
        f"{rv['promotion_min_confidence']} and at most {rv['promotion_max_failures']} failures.",
    ]
    if summary.culled > len(summary.culled_edges):
        lines += [
            "",
            f"The table lists the {len(summary.culled_edges)} weakest of "
            f"{summary.culled} culled edges; `hag audit culled --run {summary.run_id}` "
            "lists them all.",
        ]
    if summary.culled and not summary.dry_run:
        lines += ["", f"To undo: `hag audit restore --run {summary.run_id}`."]
    return "\n".join(lines) + "\n"


def counts_table(summary: NightlySummary) -> list[dict[str, Any]]:
    """What the run changed, a row per step (the nightly-counts artifact)."""
    return [
        {"step": step, "count": n}
        for step, n in (
            ("candidate → pattern", summary.promoted_to_pattern),
            ("pattern → proven", summary.promoted_to_proven),
            ("archived", summary.archived),
            ("reprieved", summary.reprieved),
            ("promotions", summary.promotions),
            ("culls", summary.culled),
        )
    ]


def culled_table(summary: NightlySummary) -> list[dict[str, Any]]:
    """The culled edges as table rows (source → target, type, provenance, confidence, age)."""
    return [
        {
            "edge": f"{e.source_concept or '?'} → {e.target_concept or '?'}",
            "type": e.edge_type,
            "provenance": e.source_type,
            "confidence": round(e.confidence, 4),
            "age_days": e.age_days,
            "edge_id": str(e.edge_id),
        }
        for e in summary.culled_edges
    ]
