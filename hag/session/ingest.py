"""Ingest: check a session payload against the contract and queue it, or quarantine it whole.

Nothing from a refused payload reaches the memory: it is stored in `hag_session_quarantine`
exactly as received (raw text, reason, field, turn), and the memory tables are not touched.
A valid payload waits in `hag_sessions` as `pending`; the row is the idempotency ledger:
the same session id with the same payload (compared by the SHA-256 of its canonical JSON)
is a no-op, the same id with a different payload is refused.

The caller owns the transaction (`ingest_payload` never commits), so a batch of payloads can
be queued atomically; refusals are written in the same transaction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from pydantic import ValidationError

from hag.session.contract import SessionPayload
from hag.sqlfiles import query


@dataclass(frozen=True)
class IngestResult:
    status: str  # accepted | duplicate | quarantined
    session_id: str | None
    source: str
    reason: str | None = None
    field: str | None = None
    turn_index: int | None = None
    quarantine_id: int | None = None

    @property
    def accepted(self) -> bool:
        """True when the session is queued (now, or by an identical earlier ingest)."""
        return self.status in ("accepted", "duplicate")

    @property
    def quarantined(self) -> bool:
        return self.status == "quarantined"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Refusal(Exception):
    """A payload breaks the contract; names the field and, when there is one, the turn."""

    def __init__(self, reason: str, field: str | None = None, turn_index: int | None = None):
        super().__init__(reason)
        self.reason, self.field, self.turn_index = reason, field, turn_index


def ingest_payload(
    conn: Any,
    payload: Mapping[str, Any] | str | bytes,
    source: str = "api",
    dials: Mapping[str, Any] | None = None,
) -> IngestResult:
    """Queue one session payload (a dict, JSON text or bytes), or quarantine it with the reason."""
    if dials is None:
        from hag import settings  # noqa: PLC0415

        dials = settings.current()
    raw, session_id = _raw_text(payload), None
    try:
        if isinstance(payload, bytes) and not _is_utf8(payload):
            raise Refusal("payload is not UTF-8 text")
        parsed = _parse(raw, dials)
        if isinstance(parsed.get("session_id"), str):
            session_id = parsed["session_id"]
        session = _validate(raw, parsed, dials)
        _check_references(conn, session)
        canonical = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        return _queue(conn, session, canonical, digest, source)
    except Refusal as refusal:
        return quarantine(conn, raw, refusal, source, session_id)


def quarantine(
    conn: Any, raw: str, refusal: Refusal, source: str, session_id: str | None = None
) -> IngestResult:
    """Keep a refused payload whole, with the reason; returns the quarantined result."""
    row = conn.execute(
        query("session", "quarantine_payload"),
        {
            "source": source,
            "session_id": session_id,
            "reason": refusal.reason,
            "field": refusal.field,
            "turn_index": refusal.turn_index,
            # PostgreSQL text cannot hold NUL; every other character is kept as received.
            "raw": raw.replace("\x00", "\\u0000"),
        },
    ).fetchone()
    return IngestResult(
        "quarantined",
        session_id,
        source,
        refusal.reason,
        refusal.field,
        refusal.turn_index,
        row["quarantine_id"],
    )


def _raw_text(payload: Mapping[str, Any] | str | bytes) -> str:
    if isinstance(payload, bytes):
        return payload.decode("utf-8", errors="replace")
    if isinstance(payload, str):
        return payload
    return json.dumps(payload, ensure_ascii=False, default=str)


def _parse(raw: str, dials: Mapping[str, Any]) -> dict[str, Any]:
    size = len(raw.encode("utf-8", errors="replace"))
    if size > dials["session_max_payload_bytes"]:
        raise Refusal(
            f"payload is {size} bytes, over the limit of "
            f"{dials['session_max_payload_bytes']} (dial session_max_payload_bytes)"
        )
    try:
        parsed = json.loads(raw, parse_constant=_no_constants)
    except (json.JSONDecodeError, ValueError) as exc:
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise Refusal(f"malformed JSON: {message}{where}") from None
    if not isinstance(parsed, dict):
        raise Refusal(f"a payload is a JSON object, not a {type(parsed).__name__}")
    return parsed


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _validate(raw: str, parsed: dict[str, Any], dials: Mapping[str, Any]) -> SessionPayload:
    try:
        session = SessionPayload.model_validate_json(raw)
    except ValidationError as exc:
        raise _refusal_from(exc, parsed) from None
    nul = _first_nul(parsed, "")
    if nul is not None:
        raise Refusal(f"{nul}: contains a NUL character", nul, _turn_of(nul, parsed))
    if len(session.turns) > dials["session_max_turns"]:
        raise Refusal(
            f"turns: {len(session.turns)} turns, over the limit of "
            f"{dials['session_max_turns']} (dial session_max_turns)",
            "turns",
        )
    seen: set[int] = set()
    for position, turn in enumerate(session.turns):
        if turn.turn_index in seen:
            raise Refusal(
                f"turns[{position}].turn_index: turn_index {turn.turn_index} appears twice",
                f"turns[{position}].turn_index",
                turn.turn_index,
            )
        seen.add(turn.turn_index)
    missing = sorted(set(range(len(session.turns))) - seen)
    if missing:
        raise Refusal(
            f"turns: turn {missing[0]} is missing (turn indexes run 0..{len(seen) - 1}, once each)",
            "turns",
            missing[0],
        )
    return session


def _refusal_from(exc: ValidationError, parsed: dict[str, Any]) -> Refusal:
    errors = exc.errors(include_url=False)
    first = errors[0]
    field = _path(first["loc"])
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    shown = "" if first["type"] == "missing" else f", got {_short(first.get('input'))}"
    return Refusal(
        f"{field or 'payload'}: {first['msg']}{shown}{more}", field or None, _turn_of(field, parsed)
    )


def _path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _turn_of(field: str | None, parsed: dict[str, Any]) -> int | None:
    """The turn a field path points into: its declared turn_index, or its position."""
    if not field or not field.startswith("turns["):
        return None
    position = int(field[len("turns[") : field.index("]")])
    turns = parsed.get("turns")
    if isinstance(turns, list) and position < len(turns) and isinstance(turns[position], dict):
        declared = turns[position].get("turn_index")
        if isinstance(declared, int) and not isinstance(declared, bool) and declared >= 0:
            return declared
    return position


def _first_nul(value: Any, path: str) -> str | None:
    if isinstance(value, str):
        return path or "payload" if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _first_nul(item, f"{path}.{key}" if path else key)
            if found:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _first_nul(item, f"{path}[{i}]")
            if found:
                return found
    return None


def _check_references(conn: Any, session: SessionPayload) -> None:
    """Refuse a payload that names a topic, entry or edge the memory does not hold."""
    if (
        conn.execute(query("session", "topic_exists"), {"topic_id": session.topic_id}).fetchone()
        is None
    ):
        raise Refusal(f"topic_id: unknown topic {session.topic_id!r}", "topic_id")
    entries: dict[UUID, tuple[str, int]] = {}
    edges: dict[UUID, tuple[str, int]] = {}
    for position, turn in enumerate(session.turns):
        if turn.decision_entry_id is not None:
            entries.setdefault(
                turn.decision_entry_id, (f"turns[{position}].decision_entry_id", turn.turn_index)
            )
        for j, entry_id in enumerate(turn.used_entry_ids):
            entries.setdefault(
                entry_id, (f"turns[{position}].used_entry_ids[{j}]", turn.turn_index)
            )
        for j, edge_id in enumerate(turn.rendered_edge_ids):
            edges.setdefault(
                edge_id, (f"turns[{position}].rendered_edge_ids[{j}]", turn.turn_index)
            )
    for kind, wanted in (("entry", entries), ("edge", edges)):
        if not wanted:
            continue
        known = {
            r["id"]
            for r in conn.execute(
                query("session", f"known_{kind}_ids"), {"ids": list(wanted)}
            ).fetchall()
        }
        unknown = [i for i in wanted if i not in known]
        if unknown:
            field, turn_index = wanted[unknown[0]]
            extra = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise Refusal(f"{field}: unknown {kind} id {unknown[0]}{extra}", field, turn_index)


def _queue(
    conn: Any, session: SessionPayload, canonical: str, digest: str, source: str
) -> IngestResult:
    params = {
        "session_id": session.session_id,
        "learner_id": session.learner_id,
        "topic_id": session.topic_id,
        "ended_at": session.ended_at,
        "payload": canonical,
        "payload_sha256": digest,
    }
    conn.execute("SAVEPOINT hag_ingest")
    try:
        inserted = conn.execute(query("session", "queue_session"), params).fetchone()
    except psycopg.DataError as exc:
        conn.execute("ROLLBACK TO SAVEPOINT hag_ingest")
        reason = str(exc).strip().splitlines()[0]
        raise Refusal(f"payload: the database refused it: {reason}") from None
    conn.execute("RELEASE SAVEPOINT hag_ingest")
    if inserted is not None:
        return IngestResult("accepted", session.session_id, source)
    stored = conn.execute(
        query("session", "stored_digest"), {"session_id": session.session_id}
    ).fetchone()
    if stored["payload_sha256"] == digest:
        return IngestResult("duplicate", session.session_id, source)
    raise Refusal(
        f"session_id: session {session.session_id!r} was already received with a different payload",
        "session_id",
    )


# --- files ---------------------------------------------------------------------------------


def read_payloads(path: Path, text: str | None = None) -> Iterator[tuple[str, str]]:
    """(source, raw text) for each payload of a JSON file (object or array) or JSON Lines file.

    `.jsonl` / `.ndjson` files hold one payload per line; any other file is one JSON
    document. A document that does not parse is yielded whole, to be quarantined as one.
    """
    if text is None:
        text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                yield f"{path}:{number}", line
        return
    try:
        document = json.loads(text, parse_constant=_no_constants)
    except (json.JSONDecodeError, ValueError):
        yield str(path), text
        return
    if isinstance(document, list):
        for i, item in enumerate(document):
            yield f"{path}[{i}]", json.dumps(item, ensure_ascii=False)
    else:
        yield str(path), text


def list_quarantined(conn: Any, limit: int = 100) -> list[dict[str, Any]]:
    """The latest refused payloads, newest first (raw text shortened to its size and start)."""
    return [
        dict(r)
        for r in conn.execute(query("session", "list_quarantined"), {"limit": limit}).fetchall()
    ]
