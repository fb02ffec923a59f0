"""A learner's ingest lock: ingest queues a learner's session under it shared, an erasure
of the learner holds it exclusive (sql/queries/session.sql, `lock_learner`)."""

from __future__ import annotations

from hag.settings import Settings
from hag.storage.db import Conn
from hag.storage.sqlfiles import query

# The first key of a learner's ingest lock (session-end's identity locks take 0x4A47_0020,
# the nightly 0x4A47_0030).
LEARNER_LOCK_CLASS = 0x4A47_0021


def lock_learner(conn: Conn, learner_id: str, dials: Settings, *, shared: bool) -> None:
    """The learner's ingest lock, to the end of the transaction: ingest takes it shared while
    it queues one of the learner's sessions, an erasure exclusive, so no session of the
    learner is queued while it is erased and the erasure waits for one being queued. One lock
    per bucket of `session_lock_buckets`: a transaction queueing many learners' sessions
    holds at most that many."""
    conn.execute(
        query("session", "lock_learner"),
        {
            "shared": shared,
            "lock_class": LEARNER_LOCK_CLASS,
            "learner_id": learner_id,
            "session_lock_buckets": dials.session_lock_buckets,
        },
    )
