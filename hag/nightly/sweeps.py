"""The nightly maintenance of the memory (SPEC §5): promotion, archiving and the audited cull.

A run is: read the dials in force → decide and apply every step in SQL, in one transaction
(`sql/queries/sweeps.sql`, rules in migration 030) → report. The cull's audit rows are
written by the AFTER DELETE statement trigger of migration 001 inside that same
transaction, from the run id, reason and rule values this module sets first. Under the lift
rule the cull re-weighs the prerequisites its deletions touch in that transaction too
(`_cull`). Under `edge_grading_rule = units` a run first re-weighs every `leads_to` and
`fallback`, in a transaction of its own (`_reweigh_sequences`), and again after a cull that
moved a prerequisite. Under the lift rule the cull locks its edges first in one pass
sorted by id, as session-end locks them (`lock_cull`); a sweep PostgreSQL ends to break a
deadlock with a session runs again (`_swept`). A dry run
asks the same rules what they would do and writes nothing at all: no run row, and so no
run id (its summary's `run_id` is None: there would be nothing to look up).

The big-night guard: when the caller passes `decide` (the Prefect flow does) and the cull
would delete more than the guard dials allow, promotion and archiving commit first (never
held back), `decide` is shown the forecast and answers; approval culls exactly the
forecast edges (those the rule still allows), a refusal culls nothing, and the summary
says which (`guard`). Without `decide` (the command line, the simulator) nothing pauses.

While a run works, its connection holds the run's liveness lock (hag/storage/runs.py); a run
starting marks `abandoned` any run left `running` by a process that is gone.

`as_of` is the run's "now" for every age rule, and the time the run stamps on what it
changes (audit `deleted_at`, maturity history), so a backfill as of a past date leaves the
memory it would have left on that date.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

import psycopg

from hag import settings
from hag.errors import HagError, ValidationError
from hag.evidence import sequences
from hag.evidence import store as evidence
from hag.evidence.model import lift_selected
from hag.evidence.model import units_selected as resumes_prerequisites
from hag.evidence.reweigh import reweigh_prerequisites, reweigh_sequence_edges
from hag.operations import privacy
from hag.settings import Settings
from hag.storage import db, runs
from hag.storage.db import Conn, one
from hag.storage.edges import say_why
from hag.storage.sqlfiles import dial_values, placeholders, queries, query, with_dials
from hag.support import bounds
from hag.support.timing import timed

# Any constant works; it only has to differ from the other advisory locks of the project.
NIGHTLY_LOCK = 0x4A47_0030
CULL_REASON = "cull"
# The rule values each audit row of a cull keeps: the cull's own rule and the run's as_of
# (the run row keeps every dial). Every dial in every row was 557 bytes of jsonb per culled
# edge, four fifths of the audit's bytes (issue 26: the audited cull at 16x a bare DELETE).
CULL_RULE_KEYS = (
    "cull_max_confidence",
    "cull_min_age_days",
    "cull_max_traversals",
    "cull_source_types",
    "as_of",
)
REWEIGH_REASON = "cull: the survivors re-weighed (lift)"
SEQUENCE_REWEIGH_REASON = "nightly: sequence edges re-weighed (units)"


@dataclass(frozen=True)
class Decision:
    """An operator's answer to a paused big night: approve the forecast cull, or not."""

    approved: bool
    outcome: str  # "approved", "rejected" or "timed out": what the report says happened
    note: str = ""


def guard_reason(forecast: int, total_edges: int, dials: Settings) -> str | None:
    """Why a cull of `forecast` of `total_edges` edges needs an operator, or None if not.

    Too many edges (`cull_guard_max_edges`, 0 = no count limit), or too large a share of
    all edges (`cull_guard_max_share`) once the cull is at least `cull_guard_min_edges` (a
    small memory culling a handful of edges is no big night).
    """
    max_edges = dials.cull_guard_max_edges
    if max_edges and forecast > max_edges:
        return f"the cull would delete {forecast} edges, more than cull_guard_max_edges {max_edges}"
    share = forecast / total_edges if total_edges else 0.0
    max_share = dials.cull_guard_max_share
    if forecast >= dials.cull_guard_min_edges and share > max_share:
        return (
            f"the cull would delete {forecast} of {total_edges} edges ({share:.1%}), more than "
            f"cull_guard_max_share {max_share:.1%}"
        )
    return None


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

    run_id: uuid.UUID | None  # None for a dry run: nothing was recorded
    as_of: datetime
    dry_run: bool
    promoted_to_pattern: int = 0
    promoted_to_proven: int = 0
    archived: int = 0
    reprieved: int = 0
    culled: int = 0
    # under the lift rule: prerequisites whose confidence the cull's re-weigh of the survivors
    # changed (the siblings of a culled prerequisite, and the edges into its concept)
    reweighed: int = 0
    # under edge_grading_rule = units: leads_to and fallback edges whose confidence the run's
    # re-weigh moved to what their formula gives now (`_reweigh_sequences`), before the cull;
    # and those the pass after a cull that moved what they read moved again
    sequence_reweighed: int = 0
    sequence_reweighed_after_cull: int = 0
    # concepts flagged since the last night (a moved edge their prerequisites read was
    # outside a session's locks, or a restore), re-weighed with the cull's (migration 224)
    pending_reweighed: int = 0
    reports_resumed: int = 0
    # times PostgreSQL ended the sweep's transaction to break a deadlock and it ran again
    retries: int = 0
    culled_by_source_type: dict[str, int] = field(default_factory=dict)
    culled_edges: list[CulledEdge] = field(default_factory=list)  # the first report_max_rows
    rule_values: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    step_seconds: dict[str, float] = field(default_factory=dict)  # where the time went
    # The big-night guard when it tripped: reason, forecast, decision (None: it did not).
    guard: dict[str, Any] | None = None
    flow_run_id: str | None = None  # the Prefect flow run that made this run, if any
    # the retention step (hag/operations/privacy.py): rows whose raw messages were (would be) stripped
    retention: dict[str, int] = field(default_factory=dict)
    # The first `nightly_log_max_promotions` entries promoted, named (entry id, concept, to).
    promoted: list[dict[str, Any]] = field(default_factory=list)

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
            **({"reweighed": self.reweighed} if self.reweighed else {}),
            **({"sequence_reweighed": self.sequence_reweighed} if self.sequence_reweighed else {}),
            **(
                {"sequence_reweighed_after_cull": self.sequence_reweighed_after_cull}
                if self.sequence_reweighed_after_cull
                else {}
            ),
            **({"pending_reweighed": self.pending_reweighed} if self.pending_reweighed else {}),
            **({"reports_resumed": self.reports_resumed} if self.reports_resumed else {}),
            **({"retries": self.retries} if self.retries else {}),
            **({"guard": self.guard} if self.guard else {}),
            **({"retention": self.retention} if any(self.retention.values()) else {}),
        }

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["run_id"] = str(self.run_id) if self.run_id else None
        data["as_of"] = self.as_of.isoformat()
        data["culled_edges"] = [{**asdict(e), "edge_id": str(e.edge_id)} for e in self.culled_edges]
        return data


Decide = Callable[["NightlySummary"], Decision]


@dataclass
class NightlyResult:
    """A whole night: the sweep's summary, and the topics with a search index after the
    read path's upkeep (None for a dry run, which changes nothing and so keeps none)."""

    summary: NightlySummary
    topic_indexes: list[str] | None

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary.as_dict(), "topic_indexes": self.topic_indexes}


class FailedAfterDone(HagError):
    """A run whose changes committed (its row says done, the error beside its counts) and
    whose step after them failed: the sequence step's second pass. The night's upkeep
    still runs, and the callers publish the run's report (`summary`) and run its checks;
    then this is raised, so the run is seen to have failed there."""

    def __init__(self, message: str, summary: NightlySummary):
        super().__init__(message)
        self.summary = summary


class AnotherNightly(HagError):
    """A real run found another nightly run still working (its row `running` and its
    liveness lock held: a run paused on a big night, or one mid-sweep) and changed nothing.
    The flow ends Cancelled with this line; `hag nightly` exits 1 with it."""


def other_nightly(conn: Conn | None = None) -> str | None:
    """Why a real run may not start now (another nightly run is live), or None.

    One nightly at a time is kept here rather than by the deployment's concurrency limit:
    Prefect releases a deployment's slot when a run pauses, and the paused run's process then
    fails to renew its lease and is ended within about four minutes, so a limit would end a
    big night's wait for the operator. Runs left behind are reaped first, so a `running` row
    is a live run's. Two runs starting at the same moment both pass; the sweep's advisory
    lock then takes them in turn (the second finds nothing left to do).
    """
    with db.connection_or_own(conn) as c:
        runs.reap(c)
        working = runs.working(c, "nightly")
    if not working:
        return None
    other = working[0]
    return (
        f"nightly run {runs.short(other['run_id'])} (started "
        f"{other['started_at']:%Y-%m-%d %H:%M %Z}) is still working or waits for an "
        "operator's decision: this run changed nothing; decide or cancel that run first"
    )


def _upkeep() -> list[str]:
    from hag.retrieval import ann

    return ann.nightly_upkeep()


def nightly(
    as_of: datetime | None = None,
    dry_run: bool = False,
    *,
    sweep_step: Callable[[datetime | None, bool], NightlySummary] | None = None,
    upkeep_step: Callable[[], list[str]] | None = None,
) -> NightlyResult:
    """The nightly's steps, in order, whatever starts it (`hag nightly`, the flow, the
    simulator): the sweep, then the read path's upkeep (`ann.nightly_upkeep`: per-topic
    indexes, the search copy clustered, its change rows folded), which a dry run skips.

    The flow passes its Prefect tasks as the steps (a task run each, the operator's pause
    inside the sweep's); by default they are `run_nightly` (no pause) and the upkeep itself.
    """
    try:
        summary = (sweep_step or (lambda a, d: run_nightly(as_of=a, dry_run=d)))(as_of, dry_run)
    except FailedAfterDone:  # the run is done: its upkeep still runs, then the error stands
        (upkeep_step or _upkeep)()
        raise
    indexed = None if dry_run else (upkeep_step or _upkeep)()
    return NightlyResult(summary, indexed)


def run_nightly(
    as_of: datetime | None = None,
    dry_run: bool = False,
    *,
    flow_run_id: uuid.UUID | str | None = None,
    decide: Decide | None = None,
) -> NightlySummary:
    """Promote, archive and cull as of `as_of` (default: now); a dry run changes nothing.

    Run under a Prefect flow run (`flow_run_id`), the run takes that flow run's id (one id
    everywhere, hag/storage/runs.py); `decide` is asked on a big night (see above).
    """
    with db.connect() as conn:
        return sweep(conn, as_of=as_of, dry_run=dry_run, flow_run_id=flow_run_id, decide=decide)


def sweep(
    conn: Conn,
    *,
    as_of: datetime | None = None,
    dry_run: bool = False,
    run_id: uuid.UUID | None = None,
    flow_run_id: uuid.UUID | str | None = None,
    decide: Decide | None = None,
) -> NightlySummary:
    """The nightly run on a caller's connection (committed here; nothing open is left)."""
    started = time.perf_counter()
    conn.rollback()  # begin from a clean transaction: the dials and the clock read fresh
    dials = settings.load(conn)
    when = (
        _aware(as_of)
        if as_of is not None
        else one(conn.execute(query("sweeps", "database_now")).fetchone())["now"]
    )
    conn.rollback()
    problem = as_of is not None and bounds.timestamp_problem(when, dials)
    if problem:  # a far moment would be written into every row the run touches
        raise ValidationError(f"--as-of {problem}")
    summary = NightlySummary(
        run_id=None if dry_run else run_id or runs.new_id(flow_run_id, conn=conn),
        as_of=when,
        dry_run=dry_run,
        rule_values=rule_values(dials, when),
        flow_run_id=str(flow_run_id) if flow_run_id else None,
    )
    params = sweep_parameters(dials, when, summary.run_id)
    try:
        if dry_run:  # the forecast reads the confidences the real run's first step would write
            summary.reports_resumed = _resumable_prerequisites(conn, summary.as_of, dials)
            _reweigh_sequences(conn, summary, dials)
            _forecast(conn, params, summary, dials)
            conn.rollback()
        else:
            assert summary.run_id is not None
            _recorded_run(conn, summary, params, dials, decide)
    finally:  # a run done before its last step failed (FailedAfterDone) reports it too
        summary.seconds = time.perf_counter() - started
    return summary


def _recorded_run(
    conn: Conn,
    summary: NightlySummary,
    params: dict[str, Any],
    dials: Settings,
    decide: Decide | None,
) -> None:
    """A real run: its row (and liveness lock) first, then the work, then the row closed.

    The sequence re-weigh commits before the sweep's transaction: if the sweep fails, the
    confidences it wrote are still what their formula gives (a re-weigh is idempotent), and
    the run row says the run failed."""
    run_id = summary.run_id
    assert run_id is not None
    busy = other_nightly(conn)
    if busy is not None:
        raise AnotherNightly(busy)
    with runs.alive(run_id):  # before the row exists: a reaper never sees it running unheld
        conn.execute(
            query("sweeps", "start_run"),
            {
                "run_id": run_id,
                "as_of": summary.as_of,
                "params": json.dumps(
                    {"as_of": summary.as_of.isoformat(), "dials": summary.rule_values}
                ),
            },
        )
        runs.link_flow_run(conn, run_id, summary.flow_run_id)
        conn.commit()
        try:
            _reweigh_sequences(conn, summary, dials)
            _note_progress(conn, run_id, summary.counts())
            conn.commit()
            moved = _swept(conn, params, summary, dials, decide)
        except BaseException as exc:
            with contextlib.suppress(psycopg.Error):  # a lost connection: nothing to undo
                conn.rollback()
            _record_failure(conn, run_id, exc)
            raise
        if not (moved and sequences.units_selected(dials)):
            return
        # the cull moved what the sequence edges read: the step again, in a transaction of
        # its own after the run's (which is done: its changes are committed and audited)
        done = copy.deepcopy(summary)
        try:
            _reweigh_sequences(conn, summary, dials, after_cull=True)
            _finish(conn, run_id, summary)  # the counts with both passes
            conn.commit()
        except BaseException as exc:
            with contextlib.suppress(psycopg.Error):  # a lost connection: nothing to undo
                conn.rollback()
            _restore(summary, done)  # the report shows what committed
            _record_failure(conn, run_id, exc, after_done=True)
            if not isinstance(exc, Exception):  # an interrupt stays one
                raise
            raise FailedAfterDone(
                f"nightly run {runs.short(run_id)} is done, but re-weighing the sequence "
                f"edges after its cull failed: {type(exc).__name__}: {exc}",
                summary,
            ) from exc


def _note_progress(conn: Conn, run_id: uuid.UUID, counts: dict[str, Any]) -> None:
    """The counts of what the transaction about to commit holds, on the still-running row:
    a run that fails later keeps them beside its error (`fail_run` merges), and so does one
    whose process dies (the reaper marks it abandoned and leaves its summary)."""
    conn.execute(
        query("sweeps", "note_progress"), {"run_id": run_id, "summary": json.dumps(counts)}
    )


def _restore(summary: NightlySummary, saved: NightlySummary) -> None:
    """The summary as `saved` holds it, its timings kept (they say where the time went)."""
    for f in fields(summary):
        if f.name != "step_seconds":
            setattr(summary, f.name, copy.deepcopy(getattr(saved, f.name)))


def _swept(
    conn: Conn,
    params: dict[str, Any],
    summary: NightlySummary,
    dials: Settings,
    decide: Decide | None,
) -> bool:
    """The sweep's transaction, committed with the run row done; whether its cull moved what
    sequence edges read (`_apply`).

    Its UPDATEs of entries and the seed's cull lock rows in the order they scan them, where
    session-end locks them sorted by id: a session holding one row the sweep wants, and
    waiting on one the sweep holds, makes PostgreSQL end one of the two. Locking the rows
    first in a sorted pass writes each changed row twice (measured at 200k + 200k: the
    sweep's server CPU 2.46 -> 3.02 s with the entries locked first, the cull's 1.65 ->
    2.28 s with its edges). A sweep so ended runs again from the start instead, up to
    `session_max_retries` times (the summary as it was before), unless it had committed part
    of itself: the big-night guard commits promotions before the operator's decision.
    """
    run_id = summary.run_id
    assert run_id is not None
    before = copy.deepcopy(summary)

    def attempt(retries: int) -> bool:
        if retries:  # the summary as before the first attempt, its timings kept
            conn.rollback()
            _restore(summary, before)
            summary.retries = retries
        moved = _apply(conn, params, summary, dials, decide)
        with timed(summary.step_seconds, "graph counts"):
            evidence.fold_graph_counts(conn)
        _finish(conn, run_id, summary)
        conn.commit()
        return moved

    return db.retried(attempt, dials.session_max_retries, may_retry=lambda: summary.guard is None)


def _finish(conn: Conn, run_id: uuid.UUID, summary: NightlySummary) -> None:
    conn.execute(
        query("sweeps", "finish_run"),
        {"run_id": run_id, "summary": json.dumps(summary.counts())},
    )


def _reweigh_sequences(
    conn: Conn, summary: NightlySummary, dials: Settings, *, after_cull: bool = False
) -> None:
    """Under `edge_grading_rule = units`, every `leads_to` and `fallback` takes the confidence
    its formula gives now (`hag.evidence.reweigh.reweigh_sequence_edges`).

    Session-end re-weighs the sequence edges around a session's moves only, yet a learned
    edge's chance reads its topic's total of moves and its prior reads a prerequisite's
    confidence, and both move with sessions that never touch the edge: without this step an
    edge keeps the confidence of its last re-weigh, which the cull below and the tutor's
    reads then use. A cull that deletes or re-weighs prerequisites moves what some of them
    read (a prerequisite's confidence in the prior, a concept's units), so a run whose cull
    did runs this step again after it, in a transaction of its own: after the run, `hag
    explain` gives every sequence edge's stored confidence, and a second run for the same
    `as_of` moves none. One sorted lock pass over the sequence edges, alone in its
    transaction: a second pass beside the cull's could deadlock with a session's single
    pass. A dry run re-weighs in its own transaction, which it rolls back, so its forecast
    reads what the real run's cull will (its `sequence_reweighed` counts the first pass).
    """
    waiting = evidence.resume_pending(conn, sequences.SEQUENCE_TYPES)
    if not sequences.units_selected(dials):  # their resumptions void under another grading
        evidence.clear_resume_pending(conn, waiting)
        return
    with timed(summary.step_seconds, "sequence reweigh" + (" after cull" if after_cull else "")):
        conn.execute(query("sweeps", "lock_nightly"), {"lock_id": NIGHTLY_LOCK})
        evidence.lock_every_edge_of(conn, sequences.SEQUENCE_TYPES)
        # resumptions sessions could not make while a restore held the audit row (read
        # before the lock pass, so their edges are locked)
        summary.reports_resumed += evidence.resume_stranded(
            conn, waiting, locked=None, at=summary.as_of
        )
        evidence.clear_resume_pending(conn, waiting)
        moved = reweigh_sequence_edges(
            conn,
            evidence.sequence_sources(conn),
            [],
            dials,
            at=summary.as_of,
            reason=SEQUENCE_REWEIGH_REASON,
            run_id=summary.run_id,
        )
        if after_cull:
            summary.sequence_reweighed_after_cull += moved
        else:
            summary.sequence_reweighed += moved


def rule_values(dials: Settings, as_of: datetime) -> dict[str, Any]:
    """The dials in force for this run, as the audit keeps them (plus the run's as_of): every
    dial a sweep query names as a placeholder (sql/queries/sweeps.sql), by its own key, so
    a rule's dial reaches its SQL from the registry with nothing between."""
    named = set().union(*(placeholders(sql) for sql in queries("sweeps").values()))
    return dial_values(sorted(named), dials) | {"as_of": as_of.isoformat()}


def sweep_parameters(dials: Settings, as_of: datetime, run_id: uuid.UUID | None) -> dict[str, Any]:
    """The bound parameters every sweep query takes (the dials by their own keys)."""
    return {
        **rule_values(dials, as_of),
        "as_of": as_of,
        "run_id": run_id,
        "limit": dials.sweep_report_max_rows,
        "only_edges": None,  # the cull of an approved forecast: exactly these edge ids
    }


def _apply(
    conn: Conn,
    params: dict[str, Any],
    summary: NightlySummary,
    dials: Settings,
    decide: Decide | None,
) -> bool:
    """Promotion, archive, reprieve, retention and the cull; whether the cull deleted or
    re-weighed what sequence edges read (a prerequisite, or a sequence edge)."""
    conn.execute(query("sweeps", "lock_nightly"), {"lock_id": NIGHTLY_LOCK})
    with timed(summary.step_seconds, "promotion"):
        # A candidate that also passes the proven rule goes on to proven in the first step
        # (one row version); the second moves the entries that were patterns.
        first = one(conn.execute(query("sweeps", "promote_to_pattern"), params).fetchone())
        summary.promoted_to_pattern = int(first["n"])
        summary.promoted_to_proven = int(first["to_proven"]) + _count(
            conn, "promote_to_proven", params
        )
        if summary.promotions and dials.nightly_log_max_promotions:
            rows = conn.execute(
                query("sweeps", "promoted_entries"),
                {"run_id": summary.run_id, "limit": dials.nightly_log_max_promotions},
            ).fetchall()
            summary.promoted = [{**r, "entry_id": str(r["entry_id"])} for r in rows]
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
    with timed(summary.step_seconds, "retention"):
        summary.retention = privacy.strip_expired(conn, summary.as_of, dials).as_dict()
    if decide is not None and not _guarded_cull_approved(conn, params, summary, dials, decide):
        return False
    return _cull(conn, params, summary, dials)


def _guarded_cull_approved(
    conn: Conn,
    params: dict[str, Any],
    summary: NightlySummary,
    dials: Settings,
    decide: Decide,
) -> bool:
    """The big-night guard: False when the operator held the cull back (nothing culled).

    Under the guard's limit nothing changes (True, the cull goes on in this transaction).
    Over it, promotion and archiving commit, the operator decides on the forecast, and on
    approval the cull is limited to the forecast edges, in a transaction of its own.
    """
    with timed(summary.step_seconds, "forecast"):
        forecast = [r["id"] for r in conn.execute(query("sweeps", "cull_candidate_ids"), params)]
        total = int(one(conn.execute(query("sweeps", "count_edges")).fetchone())["n"])
    reason = guard_reason(len(forecast), total, dials)
    if reason is None:
        return True
    _fill_forecast(conn, params, summary)
    guard = {"reason": reason, "forecast": len(forecast), "total_edges": total}
    assert summary.run_id is not None
    _note_progress(  # what commits now: the run's steps before the cull, none of the forecast
        conn,
        summary.run_id,
        {**summary.counts(), "culled": 0, "culled_by_source_type": {}, "guard": guard},
    )
    conn.commit()  # promotion and archiving are not held back by the pause
    summary.guard = guard
    with timed(summary.step_seconds, "decision"):
        decision = decide(summary)  # no transaction stays open while the operator thinks
    summary.guard.update(decision=decision.outcome, note=decision.note)
    summary.culled, summary.culled_by_source_type, summary.culled_edges = 0, {}, []
    _note_progress(conn, summary.run_id, summary.counts())  # the decision, whatever follows
    conn.commit()
    if not decision.approved:
        return False
    conn.execute(query("sweeps", "lock_nightly"), {"lock_id": NIGHTLY_LOCK})
    params["only_edges"] = forecast
    return True


def _cull(conn: Conn, params: dict[str, Any], summary: NightlySummary, dials: Settings) -> bool:
    """The audited cull; under the lift rule, the survivors re-weighed in the same transaction.
    Whether it moved what sequence edges read: a prerequisite deleted, re-weighed or given
    resumed reports (in their prior, and their concept's units), or a sequence edge deleted
    (in its siblings' sums).

    A culled prerequisite's reports leave its concept's count, so its siblings' chance (and
    the reverse evidence of the edges into its concept) change: without the re-weigh their
    confidences would stay as computed from counts that included the culled reports until
    their concept is reported on again. The rows are locked first, in the one sorted order
    every edge write uses (`lock_cull`), so the cull queues behind sessions sharing them and
    they behind it, never each behind the other (under the seed's rule: `_swept`).
    """
    lift = lift_selected(dials)
    with timed(summary.step_seconds, "cull"):
        conn.execute(
            query("sweeps", "set_delete_context"),
            {
                "run_id": str(summary.run_id),
                "reason": CULL_REASON,
                "rule_values": json.dumps({k: summary.rule_values[k] for k in CULL_RULE_KEYS}),
                "deleted_at": summary.as_of.isoformat(),
            },
        )
        flags = evidence.pending_sources(conn)  # under another rule they mean nothing
        # resumptions sessions could not make while a restore held the audit row: made under
        # the rule that resumes (their edges' concepts locked and re-weighed), else void
        waiting = evidence.resume_pending(conn, ["prerequisite"])
        resuming = waiting if resumes_prerequisites(dials) else []
        pending = (
            sorted(set(flags.values()) | {w.source_entry_id for w in resuming}, key=str)
            if lift
            else []
        )
        resumed = summary.reports_resumed
        if lift:  # (under the seed's rule a deadlock with a session runs the sweep again)
            locked = conn.execute(
                query("sweeps", "lock_cull"), {**params, "pending": pending}
            ).fetchall()
            summary.reports_resumed += evidence.resume_stranded(
                conn, resuming, locked=[r["id"] for r in locked], at=summary.as_of
            )
            params = {**params, "only_edges": [r["id"] for r in locked if r["doomed"]]}
        cull = query("sweeps", "cull_edges")
        by_type = conn.execute(cull, with_dials(cull, dials, **params)).fetchall()
        summary.culled_by_source_type = {r["source_type"]: r["n"] for r in by_type}
        summary.culled = sum(summary.culled_by_source_type.values())
        if summary.culled:
            conn.execute(query("sweeps", "analyze_audit"))
    if lift:
        culled = {s for r in by_type for s in r["prerequisite_sources"]}
        sources = sorted(culled | set(pending), key=str)
        with timed(summary.step_seconds, "reweigh"):
            summary.reweighed = reweigh_prerequisites(
                conn,
                sources,
                dials,
                at=summary.as_of,
                reason=REWEIGH_REASON,
                run_id=summary.run_id,
                # a culled edge that stood at a threshold moved too: to nothing
                removed=(
                    [t for r in by_type for t in r["held_targets"]],
                    [s for r in by_type for s in r["walked_sources"]],
                ),
            )
            summary.pending_reweighed = len(set(flags.values()))
    evidence.clear_pending(conn, flags)
    evidence.clear_resume_pending(conn, waiting)
    with timed(summary.step_seconds, "report"):
        if summary.culled:
            rows = conn.execute(query("sweeps", "culled_report_rows"), params).fetchall()
            summary.culled_edges = [CulledEdge(**r) for r in rows]
    return (
        summary.reweighed > 0
        or summary.reports_resumed > resumed  # a concept's units moved, if no confidence did
        or any(r["prerequisite_sources"] or r["sequence_edges"] for r in by_type)
    )


def _resumable_prerequisites(conn: Conn, at: datetime, dials: Settings) -> int:
    """Dry run: how many kept reports the cull would resume into prerequisites (those sessions
    could not resume while a restore held the audit row), made as the cull makes them and
    rolled back. In a transaction of its own, as in the real run: its locks and the sequence
    step's are each taken in one sorted pass, never both in one transaction."""
    waiting = evidence.resume_pending(conn, ["prerequisite"])
    if not waiting or not resumes_prerequisites(dials):
        conn.rollback()
        return 0
    try:
        edges = [w.edge_id for w in waiting]
        evidence.lock_edges(conn, edges)
        return evidence.resume_stranded(conn, waiting, locked=edges, at=at)
    finally:
        conn.rollback()


def _forecast(conn: Conn, params: dict[str, Any], summary: NightlySummary, dials: Settings) -> None:
    row = one(conn.execute(query("sweeps", "maturity_forecast"), params).fetchone())
    summary.promoted_to_pattern = row["promoted_to_pattern"]
    summary.promoted_to_proven = row["promoted_to_proven"]
    summary.archived = row["archived"]
    if params["reprieve_idle_days"] > 0:
        summary.reprieved = _count(conn, "reprieve_forecast", params)
    summary.retention = privacy.strip_expired(conn, summary.as_of, dials, dry_run=True).as_dict()
    _fill_forecast(conn, params, summary)
    total = int(one(conn.execute(query("sweeps", "count_edges")).fetchone())["n"])
    reason = guard_reason(summary.culled, total, dials)
    if reason is not None:
        summary.guard = {
            "reason": reason,
            "forecast": summary.culled,
            "total_edges": total,
            "decision": "a scheduled run would pause for an operator's decision",
            "note": "",
        }


def _fill_forecast(conn: Conn, params: dict[str, Any], summary: NightlySummary) -> None:
    """The cull the rule would make now: counts by provenance, and the report's rows."""
    by_type = conn.execute(query("sweeps", "cull_forecast"), params).fetchall()
    summary.culled_by_source_type = {r["source_type"]: r["n"] for r in by_type}
    summary.culled = sum(summary.culled_by_source_type.values())
    if summary.culled:
        rows = conn.execute(query("sweeps", "cull_forecast_rows"), params).fetchall()
        summary.culled_edges = [CulledEdge(**r) for r in rows]


def _count(conn: Conn, name: str, params: dict[str, Any]) -> int:
    return int(one(conn.execute(query("sweeps", name), params).fetchone())["n"])


def _record_failure(
    conn: Conn, run_id: uuid.UUID, exc: BaseException, *, after_done: bool = False
) -> None:
    """The run row says the run failed, with the error beside the counts of what it had
    committed (`_note_progress`); a failure after the run was done (the sequence step's
    second pass) leaves it done and its counts, and adds the error."""
    error = f"{type(exc).__name__}: {exc}"[:500]
    try:
        conn.execute(
            query("sweeps", "note_failure_after_done" if after_done else "fail_run"),
            {"run_id": run_id, "summary": json.dumps({"error": error})},
        )
        conn.commit()
    except Exception:
        with contextlib.suppress(psycopg.Error):  # a lost connection records nothing
            conn.rollback()


def _aware(moment: datetime) -> datetime:
    """A naive --as-of means UTC (the operator's clock is not the server's)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def render_markdown(summary: NightlySummary) -> str:
    """A link-free summary an operator reads in the Prefect UI."""
    mode = "Dry run (nothing was changed)" if summary.dry_run else "Nightly run"
    lines = [f"# {mode} as of {summary.as_of:%Y-%m-%d %H:%M %Z}", ""]
    if summary.run_id is not None:
        # One id: a flow run's run has its id; only a retried flow run's differs.
        other = summary.flow_run_id not in (None, str(summary.run_id))
        flow_run = f" (retry of Prefect flow run `{summary.flow_run_id}`)" if other else ""
        lines += [f"Run id: `{summary.run_id}`{flow_run}", ""]
    lines += [
        "| step | entries or edges |",
        "| --- | ---: |",
        f"| candidate → pattern | {summary.promoted_to_pattern} |",
        f"| pattern → proven | {summary.promoted_to_proven} |",
        f"| archived (sank) | {summary.archived} |",
        f"| reprieved (lifted back to the floor) | {summary.reprieved} |",
        f"| edges culled | {summary.culled} |",
    ]
    if summary.sequence_reweighed:
        lines.append(f"| sequence edges re-weighed (units) | {summary.sequence_reweighed} |")
    if summary.sequence_reweighed_after_cull:
        lines.append(
            "| sequence edges re-weighed again after the cull | "
            f"{summary.sequence_reweighed_after_cull} |"
        )
    if summary.pending_reweighed:
        lines.append(
            f"| concepts flagged for a re-weigh, re-weighed | {summary.pending_reweighed} |"
        )
    if summary.reports_resumed:
        lines.append(f"| culled reports resumed (left by a restore) | {summary.reports_resumed} |")
    for source_type, n in summary.culled_by_source_type.items():
        lines.append(f"| culled, {source_type} | {n} |")
    if summary.guard:
        g = summary.guard
        lines += [
            "",
            f"Big-night guard: {g['reason']}. Decision: {g['decision']}"
            + (f" ({g['note']})" if g.get("note") else "")
            + (
                f"; {g['forecast']} forecast edge(s) were not culled."
                if summary.culled == 0 and not summary.dry_run
                else "."
            ),
        ]
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
    if summary.culled > len(summary.culled_edges) and summary.run_id is not None:
        lines += [
            "",
            f"The table lists the {len(summary.culled_edges)} weakest of "
            f"{summary.culled} culled edges; `hag audit culled --run {runs.short(summary.run_id)}` "
            "lists them all.",
        ]
    if summary.culled and summary.run_id is not None:
        lines += ["", f"To undo: `hag audit restore --run {runs.short(summary.run_id)}`."]
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


def culled_table(summary: NightlySummary, *, restorable: bool = True) -> list[dict[str, Any]]:
    """The culled (or forecast) edges as table rows that fit a page: concept names, type,
    provenance, confidence, age, and the command that puts the edge back (short ids, which
    `hag audit restore` accepts). A forecast (`restorable=False`, or a dry run) has none."""
    undo = restorable and not summary.dry_run
    return [
        {
            "source": e.source_concept or "?",
            "target": e.target_concept or "?",
            "type": e.edge_type,
            "provenance": e.source_type,
            "confidence": round(e.confidence, 3),
            "age (days)": e.age_days,
            **({"restore": f"hag audit restore {runs.short(e.edge_id)}"} if undo else {}),
        }
        for e in summary.culled_edges
    ]
