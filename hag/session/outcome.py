"""Why a claimed session did not apply: its payload (rejected), or anything else (failed).

A session that passed ingest can still fail when it is applied. When the payload is the
cause (a value the database refuses, a constraint or a row limit the contract does not know
about, a rule that depends on the memory and no longer holds), applying it again can never
succeed: it is `rejected` and its payload quarantined. When the cause is outside the
payload (the lock table or memory exhausted, a deadlock after its retries, a statement or
lock timeout, a function or column missing on this server, a lost connection, a bug), the
same session applies once the cause is removed: it is `failed`, kept whole, and
`hag process-sessions --retry-failed` puts it back to pending. A failed session is never
quarantined, and a run that leaves one exits non-zero.

The class is read from the exception's type and, for a database error, its SQLSTATE class
(PostgreSQL's Appendix A), not from its message.
"""

from __future__ import annotations

from enum import Enum

import psycopg
from pydantic import ValidationError as ContractError

from hag.errors import (
    EmbedderError,
    EmbedderMismatch,
    EmbedderRefused,
    EmbedderUnavailable,
    HagError,
)
from hag.storage import db

__all__ = ["Outcome", "SessionRefused", "SessionsFailed", "classify", "error_class"]


class Outcome(Enum):
    RETRY = "retry"  # a deadlock or serialization failure: the same transaction again
    REJECTED = "rejected"  # the payload: quarantined, never retried
    FAILED = "failed"  # anything else: kept whole, retried on request


# SQLSTATE classes a payload's own values cause: 22 data exception (a value out of range,
# a string too long), 23 integrity constraint violation (a reference that vanished after
# ingest), 54 program limit exceeded (an index row over its size).
_PAYLOAD_SQLSTATE_CLASSES = frozenset({"22", "23", "54"})


class SessionRefused(HagError):
    """A queued session breaks a rule that ingest also enforces (checked again when applied)."""


def classify(exc: BaseException) -> Outcome:
    """What to do with a session whose transaction raised `exc`."""
    if isinstance(exc, psycopg.Error):
        sqlstate = exc.sqlstate
        if db.worth_retrying(exc):
            return Outcome.RETRY
        if sqlstate is None:  # raised by the client: a stored value it cannot convert
            return Outcome.REJECTED if isinstance(exc, psycopg.DataError) else Outcome.FAILED
        return Outcome.REJECTED if sqlstate[:2] in _PAYLOAD_SQLSTATE_CLASSES else Outcome.FAILED
    if isinstance(exc, SessionRefused | ContractError):
        return Outcome.REJECTED
    # A text the embedder cannot give a usable vector (no word in it: a zero vector) is the
    # payload's; an endpoint down or another embedder is not (the queue leaves those pending),
    # and a text the endpoint refuses while it embeds others (longer than its model takes)
    # fails the session, kept to retry once the dial or the model is changed.
    if isinstance(exc, EmbedderError) and not isinstance(
        exc, EmbedderUnavailable | EmbedderMismatch | EmbedderRefused
    ):
        return Outcome.REJECTED
    return Outcome.FAILED


def error_class(exc: BaseException) -> str:
    """The error's class as an operator searches for it: `OutOfMemory (53200)`."""
    sqlstate = getattr(exc, "sqlstate", None)
    return f"{type(exc).__name__} ({sqlstate})" if sqlstate else type(exc).__name__


class SessionsFailed(HagError):
    """A run left sessions failed for a reason outside their payload (they can be retried)."""

    def __init__(self, failures: int):
        super().__init__(
            f"{failures} session(s) failed for a reason outside their payload and were kept; "
            "after fixing the cause, retry them with `hag process-sessions --retry-failed`"
        )
        self.failures = failures
