"""The batch jobs' run rows (`hag_runs`): one id per run, liveness, and runs left behind.

A run has one id. A run that Prefect runs takes its flow run's id as its `run_id` (the id
the Prefect UI shows), so the operator meets the same id everywhere; a run outside Prefect
makes its own (`new_id()`). `flow_run_id` keeps the link (and tells the two apart when a
flow run is retried, which makes a run of its own). `resolve()` accepts an id whole, by a
unique prefix of at least `MIN_PREFIX` hex digits (as git does), or by the ending listings
print (`short()`), and refuses an unknown or ambiguous one, naming the candidates.

Ids are printed by their last `SHORT` digits: Prefect's flow-run ids are time-ordered, so
the runs of one scheduled batch share their first digits, while their endings are random.

While a run works, a connection of its own holds a transaction-level advisory lock keyed on
the run id, in one transaction left open for the run's length (`alive()`). A killed process
loses its connection, and the server drops the transaction and the lock with it; so a later
run that finds a row still `running` whose lock nobody holds knows the process is gone, and
marks the row `abandoned` with when and why (`reap()`). Nothing here lives in a session, so
it holds through a transaction-mode pooler too (the open transaction keeps its server
connection); the transaction takes no snapshot between statements and writes nothing, so it
holds back no vacuum.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hag.errors import NotFoundError, ValidationError
from hag.storage import db
from hag.storage.db import Conn, one
from hag.storage.sqlfiles import query

# The advisory-lock class of run liveness locks (the run id's hash is the other key); any
# constant works, it only has to differ from the project's other advisory locks.
RUN_LOCK_CLASS = 0x4A47_0060
# Shorter prefixes match too much to be worth looking up: git's own minimum abbreviation.
MIN_PREFIX = 4
SHORT = 8  # how many hex digits a listing prints: the id's ending (`resolve` accepts it back)
ABANDONED_WHY = "its process is gone: the run's liveness lock was free while the row said running"

_HEX = re.compile(r"[0-9a-f]+")
# Every kind a run row is written with (the nightly, session-end's process, enrichment's
# run, an audit restore): `hag runs --kind` takes these and refuses anything else.
KINDS = ("nightly", "session_end", "enrichment", "restore")


def short(run_id: uuid.UUID | str | None) -> str:
    """The abbreviation listings print: the id's last `SHORT` hex digits, the part that
    tells time-ordered ids apart (accepted back wherever an id is taken)."""
    return "" if run_id is None else str(run_id).replace("-", "")[-SHORT:]


def new_id(flow_run_id: uuid.UUID | str | None, *, conn: Conn | None = None) -> uuid.UUID:
    """The id of a new run: its Prefect flow run's, or its own outside Prefect (or when the
    flow run already made a run, as a retried flow run has)."""
    if flow_run_id is None:
        return uuid.uuid4()
    wanted = uuid.UUID(str(flow_run_id))
    with db.connection_or_own(conn) as c:
        taken = c.execute(query("runs", "get_run"), {"run_id": wanted}).fetchone() is not None
        if conn is None:
            c.rollback()
    return uuid.uuid4() if taken else wanted


def hold(conn: Conn, run_id: uuid.UUID) -> None:
    """Take the run's liveness lock in `conn`'s transaction (held until that transaction ends)."""
    conn.execute(query("runs", "hold_run"), {"lock_class": RUN_LOCK_CLASS, "run_id": run_id})


@contextmanager
def alive(run_id: uuid.UUID) -> Iterator[None]:
    """Hold the run's liveness lock for the duration of a block, in a transaction of its own
    on a connection of its own (the run's work commits on others as it goes)."""
    with db.connect() as conn:
        hold(conn, run_id)
        conn.execute(query("runs", "idle_run"))
        try:
            yield
        finally:
            if not conn.broken:  # a lost connection took the lock with it
                conn.rollback()  # gives the lock back


def reap(conn: Conn, *, keep: tuple[uuid.UUID, ...] = ()) -> list[uuid.UUID]:
    """Mark `abandoned` every `running` row whose process is gone; returns their ids.

    Committed here (on a clean transaction). A row whose liveness lock is held, or that
    another reaper is judging, is left alone; `keep` names the caller's own run.
    """
    conn.rollback()
    rows = conn.execute(query("runs", "running_runs"), {"except": list(keep)}).fetchall()
    gone = []
    for row in rows:
        params = {"lock_class": RUN_LOCK_CLASS, "run_id": row["run_id"]}
        if one(conn.execute(query("runs", "owner_gone"), params).fetchone())["gone"]:
            conn.execute(
                query("runs", "mark_abandoned"), {"run_id": row["run_id"], "why": ABANDONED_WHY}
            )
            gone.append(row["run_id"])
    conn.commit()
    return gone


def working(conn: Conn, kind: str) -> list[dict[str, Any]]:
    """The runs of `kind` still `running`, oldest first: after `reap`, live ones."""
    rows = conn.execute(query("runs", "working_runs"), {"kind": kind}).fetchall()
    conn.commit()
    return [dict(r) for r in rows]


def link_flow_run(conn: Conn, run_id: uuid.UUID, flow_run_id: uuid.UUID | str | None) -> None:
    """Record the Prefect flow run that made this run (nothing when there is none)."""
    if flow_run_id is not None:
        conn.execute(
            query("runs", "link_flow_run"), {"run_id": run_id, "flow_run_id": str(flow_run_id)}
        )


def hex_prefix(text: str | uuid.UUID, noun: str, hint: str) -> tuple[str, str]:
    """`(typed, prefix)`: what the operator typed, and the lower-case hex digits it stands
    for (dashes dropped), refused by name when it cannot be an id or is shorter than
    `MIN_PREFIX` digits. Shared by every command that takes an id or its abbreviation."""
    typed = str(text).strip()
    prefix = typed.lower().replace("-", "")
    article = "an" if noun[0] in "aeiou" else "a"
    if not _HEX.fullmatch(prefix) or len(prefix) > 32:
        raise ValidationError(f"{typed!r} is not {article} {noun} ({hint})")
    if len(prefix) < MIN_PREFIX:
        raise ValidationError(f"{noun} {typed!r} is too short: give at least {MIN_PREFIX} digits")
    return typed, prefix


def ambiguous(noun: str, typed: str, candidates: list[str]) -> ValidationError:
    """The one-line refusal of an id that names several things, with their distinguishing parts."""
    return ValidationError(
        f"{noun} {typed!r} is ambiguous: it matches {', '.join(candidates)}; "
        "give more digits of the start, or the ending shown"
    )


def resolve(text: str | uuid.UUID, *, conn: Conn | None = None) -> uuid.UUID:
    """The run id an operator means: a run id or Prefect flow-run id, whole, by a unique
    prefix, or by the ending listings print.

    Raises ValidationError for text that cannot be an id, NotFoundError when no run
    matches, and ValidationError naming the candidates when the prefix is ambiguous.
    """
    typed, prefix = hex_prefix(text, "run id", "hex digits of a run or flow-run id")
    with db.connection_or_own(conn) as c:
        rows = c.execute(query("runs", "match_run"), {"prefix": prefix}).fetchall()
        if conn is None:
            c.rollback()
    if not rows:
        raise NotFoundError(f"no run {typed!r} (neither a run id nor a Prefect flow-run id)")
    if len(rows) > 1:
        # A retried flow run made a run of its own under the same flow-run id: the id typed
        # is the first run's own, and the others match it only as that flow run's retries.
        own = [r for r in rows if _names(r["run_id"], prefix)]
        if len(own) == 1 and all(r is own[0] or r["flow_run_id"] == own[0]["run_id"] for r in rows):
            return own[0]["run_id"]  # type: ignore[no-any-return]
        raise ambiguous(
            "run id",
            typed,
            [f"{short(r['run_id'])} ({r['kind']}, {r['started_at']:%Y-%m-%d %H:%M})" for r in rows],
        )
    return rows[0]["run_id"]  # type: ignore[no-any-return]


def _names(run_id: uuid.UUID, prefix: str) -> bool:
    """Whether the hex digits typed start or end this id (as `match_run` matches)."""
    digits = run_id.hex
    return digits.startswith(prefix) or digits.endswith(prefix)


def mark_cancelled(ids: list[str], why: str, *, since: float) -> list[uuid.UUID]:
    """Close as `cancelled` the runs of these flow runs, once their processes are gone: rows
    still `running`, or marked failed by the stop itself (at or after `since`, epoch s)."""
    with db.connect() as conn:
        rows = conn.execute(
            query("runs", "mark_cancelled"), {"ids": ids, "why": why, "since": since}
        ).fetchall()
        conn.commit()
    return [r["run_id"] for r in rows]


def listing(
    limit: int, *, kind: str | None = None, conn: Conn | None = None
) -> list[dict[str, Any]]:
    """The newest `limit` runs (of one kind, or all), newest first: id, kind, status, times,
    the flow run, and the counts the run recorded."""
    with db.connection_or_own(conn) as c:
        rows = c.execute(query("runs", "list_runs"), {"limit": limit, "kind": kind}).fetchall()
        if conn is None:
            c.rollback()
    return [dict(r) for r in rows]


def get(run_id: uuid.UUID, *, conn: Conn | None = None) -> dict[str, Any] | None:
    """A run's row, or None."""
    with db.connection_or_own(conn) as c:
        row = c.execute(query("runs", "get_run"), {"run_id": run_id}).fetchone()
        if conn is None:
            c.rollback()
    return dict(row) if row else None
