"""The batch jobs' run rows (`hag_runs`): one id per run, liveness, and runs left behind.

A run is named by two ids: the memory's own `run_id` and, when Prefect ran it, the flow
run the Prefect UI shows (`flow_run_id`). `resolve()` accepts either, whole or as a unique
prefix of at least `MIN_PREFIX` hex digits (as git does), and refuses an unknown or
ambiguous one by name.

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

from hag import db
from hag.db import Conn, one
from hag.errors import NotFoundError, ValidationError
from hag.sqlfiles import query

# The advisory-lock class of run liveness locks (the run id's hash is the other key); any
# constant works, it only has to differ from the project's other advisory locks.
RUN_LOCK_CLASS = 0x4A47_0060
# Shorter prefixes match too much to be worth looking up: git's own minimum abbreviation.
MIN_PREFIX = 4
SHORT = 8  # how many hex digits a listing prints (and `resolve` accepts back)
ABANDONED_WHY = "its process is gone: the run's liveness lock was free while the row said running"

_HEX = re.compile(r"[0-9a-f]+")


def short(run_id: uuid.UUID | str | None) -> str:
    """The abbreviation listings print (accepted back wherever a run id is taken)."""
    return "" if run_id is None else str(run_id)[:SHORT]


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


def resolve(text: str | uuid.UUID, *, conn: Conn | None = None) -> uuid.UUID:
    """The run id an operator means: a run id or Prefect flow-run id, or a unique prefix.

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
        named = ", ".join(f"{short(r['run_id'])} ({r['kind']})" for r in rows)
        raise ValidationError(f"run id {typed!r} is ambiguous: it matches {named}")
    return rows[0]["run_id"]  # type: ignore[no-any-return]


def get(run_id: uuid.UUID, *, conn: Conn | None = None) -> dict[str, Any] | None:
    """A run's row, or None."""
    with db.connection_or_own(conn) as c:
        row = c.execute(query("runs", "get_run"), {"run_id": run_id}).fetchone()
        if conn is None:
            c.rollback()
    return dict(row) if row else None
