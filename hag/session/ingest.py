"""Ingest: check a session payload against the contract and queue it, or quarantine it whole.

Nothing from a refused payload reaches the memory: it is stored in `hag_session_quarantine`
(a bounded prefix of what was received, its SHA-256 and size, the reason, field and turn),
and the memory tables are not touched. Files are read as a stream, one payload at a time, so
memory does not grow with the file; JSON Lines split at line feeds only (a U+2028 or U+0085
inside a string is part of the payload).
A valid payload waits in `hag_sessions` as `pending`; the row is the idempotency ledger:
the same session id with the same payload (compared by the SHA-256 of its canonical JSON)
is a no-op, the same id with a different payload is refused.

The caller owns the transaction (`ingest_payload` never commits), so a batch of payloads can
be queued atomically; refusals are written in the same transaction.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import psycopg
from pydantic import ValidationError

from hag.session.contract import SessionPayload
from hag.settings import Settings
from hag.storage import visibility
from hag.storage.db import Conn, one
from hag.storage.learner_lock import lock_learner
from hag.storage.sqlfiles import query
from hag.support import bounds
from hag.support.jsonkeys import unique_keys


@dataclass(frozen=True)
class IngestResult:
    status: str  # accepted | duplicate | quarantined
    session_id: str | None
    source: str
    reason: str | None = None
    field: str | None = None
    turn_index: int | None = None
    quarantine_id: int | None = None
    state: str | None = None  # a duplicate: where the session stands (STATES)

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


@dataclass(frozen=True)
class Oversize:
    """A payload too large to hold: its first bytes, its size and its SHA-256 (read streaming)."""

    prefix: bytes
    size: int
    sha256: str


@dataclass(frozen=True)
class Unreadable:
    """A part of a file the reader could not take as payloads: its text (bounded) and why."""

    text: str | bytes
    reason: str


Raw = Mapping[str, Any] | str | bytes | Oversize | Unreadable
Item = str | bytes | Oversize | Unreadable  # what reading a file yields per payload


def ingest_payload(
    conn: Conn,
    payload: Raw,
    source: str = "api",
    dials: Settings | None = None,
) -> IngestResult:
    """Queue one session payload (a dict, JSON text or bytes), or quarantine it with the reason."""
    if dials is None:
        from hag import settings

        dials = settings.current()
    if isinstance(payload, Oversize):
        refusal = _too_large(payload.size, dials)
        return quarantine(conn, payload, refusal, source, dials=dials)
    if isinstance(payload, Unreadable):
        return quarantine(conn, payload.text, Refusal(payload.reason), source, dials=dials)
    data, session_id, learner = _raw_bytes(payload), None, None
    try:
        raw = _parse_text(data, dials)
        parsed = _parse(raw, dials)
        if isinstance(parsed.get("session_id"), str):
            session_id = parsed["session_id"]
        if isinstance(parsed.get("learner_id"), str):
            learner = _storable(parsed["learner_id"])
        session = _validate(raw, parsed, dials)
        _check_references(conn, session, dials)
        canonical = json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(canonical.encode()).hexdigest()
        return _queue(conn, session, canonical, digest, source, dials)
    except Refusal as refusal:
        if learner is not None:  # a refusal naming a learner is theirs too: not while erased
            lock_learner(conn, learner, dials, shared=True)
        return quarantine(conn, data, refusal, source, session_id, dials)


def quarantine(
    conn: Conn,
    raw: bytes | str | Oversize,
    refusal: Refusal,
    source: str,
    session_id: str | None = None,
    dials: Settings | None = None,
) -> IngestResult:
    """Keep a refused payload for review: a bounded prefix (dial session_quarantine_max_bytes)
    with the SHA-256 and size of the whole, and the reason; returns the quarantined result."""
    if dials is None:
        from hag import settings

        dials = settings.current()
    keep = dials.session_quarantine_max_bytes
    if isinstance(raw, Oversize):
        prefix, size, digest = raw.prefix[:keep], raw.size, raw.sha256
    else:
        data = raw if isinstance(raw, bytes) else raw.encode("utf-8", "surrogatepass")
        prefix, size, digest = data[:keep], len(data), hashlib.sha256(data).hexdigest()
    row = one(
        conn.execute(
            query("session", "quarantine_payload"),
            {
                "source": _storable(source),
                "session_id": None if session_id is None else _storable(session_id)[:200],
                "reason": _storable(refusal.reason),
                "field": None if refusal.field is None else _storable(refusal.field),
                "turn_index": refusal.turn_index,
                "raw": _storable(prefix.decode("utf-8", errors="replace")),
                "raw_bytes": size,
                "raw_sha256": digest,
            },
        ).fetchone()
    )
    return IngestResult(
        "quarantined",
        session_id,
        source,
        refusal.reason,
        refusal.field,
        refusal.turn_index,
        row["quarantine_id"],
    )


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def _storable(text: str) -> str:
    """Text PostgreSQL can hold: NUL written as the JSON escape, lone surrogates as U+FFFD."""
    return _UNSTORABLE.sub(lambda m: "\\u0000" if m.group() == "\x00" else "\ufffd", text)


def _raw_bytes(payload: Mapping[str, Any] | str | bytes) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode("utf-8", "surrogatepass")
    return json.dumps(payload, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")


def _too_large(size: int, dials: Settings) -> Refusal:
    return Refusal(
        f"payload is {size} bytes, over the limit of "
        f"{dials.session_max_payload_bytes} (dial session_max_payload_bytes)"
    )


def _parse_text(data: bytes, dials: Settings) -> str:
    """The payload as text: refused when too large, not UTF-8, or nested too deep to parse."""
    if len(data) > dials.session_max_payload_bytes:
        raise _too_large(len(data), dials)
    try:
        raw = data.decode("utf-8")  # strict: overlong forms and surrogates are invalid too
    except UnicodeDecodeError as exc:
        raise Refusal(
            f"payload is not UTF-8 text: {exc.reason} at byte {exc.start} "
            f"({data[exc.start : exc.start + 4].hex(' ')})"
        ) from None
    depth = nesting_depth(raw)
    if depth > dials.session_max_depth:
        raise Refusal(
            f"payload is nested {depth} levels deep, over the limit of "
            f"{dials.session_max_depth} (dial session_max_depth)"
        )
    return raw


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str) -> int:
    """How deeply arrays and objects nest in a JSON text (strings skipped), without parsing
    it: the parser recurses per level, so depth is checked before parsing."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    depth = deepest = 0
    for ch in brackets:
        depth += 1 if ch in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _parse(raw: str, dials: Settings) -> dict[str, Any]:
    try:
        parsed = json.loads(raw, parse_constant=_no_constants, object_pairs_hook=unique_keys)
    except (json.JSONDecodeError, ValueError) as exc:
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise Refusal(f"malformed JSON: {message}{where}") from None
    except RecursionError:  # the depth check above keeps this from happening; belt and braces
        raise Refusal("payload is nested too deeply to parse") from None
    if not isinstance(parsed, dict):
        raise Refusal(f"a payload is a JSON object, not a {type(parsed).__name__}")
    return parsed


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _validate(raw: str, parsed: dict[str, Any], dials: Settings) -> SessionPayload:
    bad = _first_unstorable(parsed, "")
    if bad is not None:
        where, what = bad
        raise Refusal(f"{where}: contains {what}", where, _turn_of(where, parsed))
    try:
        session = SessionPayload.model_validate_json(raw)
    except ValidationError as exc:
        raise _refusal_from(exc, parsed) from None
    if len(session.turns) > dials.session_max_turns:
        raise Refusal(
            f"turns: {len(session.turns)} turns, over the limit of "
            f"{dials.session_max_turns} (dial session_max_turns)",
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
    problem = count_problem(session, dials)
    if problem:
        raise Refusal(*problem)
    _check_bounds(session, dials)
    return session


def count_problem(session: SessionPayload, dials: Settings) -> tuple[str, str, int | None] | None:
    """(reason, field, turn) when a session holds more observations, struggles or distinct
    successful concept slugs than its dials allow (each costs rows, locks and memory when
    applied), or None. Checked at ingest and again when applied (the dials may have moved)."""
    for position, turn in enumerate(session.turns):
        if len(turn.struggles) > dials.session_max_struggles_per_turn:
            field = f"turns[{position}].struggles"
            return (
                f"{field}: {len(turn.struggles)} struggles in one turn, over the limit of "
                f"{dials.session_max_struggles_per_turn} (dial session_max_struggles_per_turn)",
                field,
                turn.turn_index,
            )
    observations = sum(len(t.observations) for t in session.turns)
    struggles = sum(len(t.struggles) for t in session.turns)
    successes = len(
        {slug for t in session.turns if t.outcome == "success" for slug in t.concept_slugs}
    )
    for field, count, what, dial, limit in (
        ("observations", observations, "observations", "session_max_observations",
         dials.session_max_observations),
        ("struggles", struggles, "struggles", "session_max_struggles",
         dials.session_max_struggles),
        ("concept_slugs", successes, "distinct concept slugs in successful turns",
         "session_max_success_slugs", dials.session_max_success_slugs),
    ):  # fmt: skip
        if count > limit:
            return (
                f"turns[*].{field}: {count} {what} in the session, over the limit of "
                f"{limit} (dial {dial})",
                f"turns[*].{field}",
                None,
            )
    return None


def _check_bounds(session: SessionPayload, dials: Settings) -> None:
    """Refuse a timestamp far from now and slugs, names or texts over their dials."""
    problem = bounds.timestamp_problem(session.ended_at, dials)
    if problem:
        raise Refusal(f"ended_at: {problem}", "ended_at")
    checks: list[tuple[str, str, str, int | None]] = [
        ("topic_id", session.topic_id, bounds.SLUG, None)
    ]
    for p, t in enumerate(session.turns):
        at = f"turns[{p}]"
        checks.append((f"{at}.student_message", t.student_message, bounds.TEXT, t.turn_index))
        checks += [
            (f"{at}.concept_slugs[{j}]", slug, bounds.SLUG, t.turn_index)
            for j, slug in enumerate(t.concept_slugs)
        ]
        for j, s in enumerate(t.struggles):
            checks += [
                (
                    f"{at}.struggles[{j}].concept_slug",
                    s.concept_slug,
                    bounds.NAME,
                    t.turn_index,
                ),
                (
                    f"{at}.struggles[{j}].missing_slug",
                    s.missing_slug,
                    bounds.NAME,
                    t.turn_index,
                ),
                (f"{at}.struggles[{j}].evidence", s.evidence, bounds.TEXT, t.turn_index),
            ]
        for j, o in enumerate(t.observations):
            checks += [
                (
                    f"{at}.observations[{j}].concept",
                    o.concept,
                    bounds.NAME,
                    t.turn_index,
                ),
                (f"{at}.observations[{j}].text", o.text, bounds.TEXT, t.turn_index),
            ]
    for where, value, dial, turn_index in checks:
        problem = bounds.length_problem(value, dial, dials)
        if problem:
            raise Refusal(f"{where}: {problem}", where, turn_index)


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


def _first_unstorable(value: Any, path: str) -> tuple[str, str] | None:
    """The first text (key or value) holding a NUL or a lone surrogate (a `\\ud800` escape):
    neither is UTF-8 text PostgreSQL can store. Returns (field path, what it holds)."""
    if isinstance(value, str):
        found = _UNSTORABLE.search(value)
        if found is None:
            return None
        what = "a NUL character" if found.group() == "\x00" else "a lone UTF-16 surrogate"
        return path or "payload", what
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else key
            hit = _first_unstorable(key, here) or _first_unstorable(item, here)
            if hit:
                return hit
    if isinstance(value, list):
        for i, item in enumerate(value):
            hit = _first_unstorable(item, f"{path}[{i}]")
            if hit:
                return hit
    return None


def _check_references(conn: Conn, session: SessionPayload, dials: Settings) -> None:
    """Refuse a payload that names a topic, entry or edge the memory does not hold, or an
    entry (an edge's end included) its learner may not read in its topic."""
    if (
        conn.execute(query("session", "topic_exists"), {"topic_id": session.topic_id}).fetchone()
        is None
    ):
        raise Refusal(f"topic_id: unknown topic {session.topic_id!r}", "topic_id")
    entries, edges = named_ids(session)
    for kind, name, wanted in (
        ("entry", "known_entry_ids", entries),
        ("edge", "known_edge_ids", edges),
    ):
        if not wanted:
            continue
        known = {
            r["id"]: r
            for r in conn.execute(query("session", name), {"ids": list(wanted)}).fetchall()
        }
        unknown = [i for i in wanted if i not in known]
        if unknown:
            field, turn_index = wanted[unknown[0]]
            extra = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
            raise Refusal(f"{field}: unknown {kind} id {unknown[0]}{extra}", field, turn_index)
        if kind == "edge":
            for edge_id, (field, turn_index) in wanted.items():
                for end in ("source_entry_id", "target_entry_id"):
                    entries.setdefault(known[edge_id][end], (field, turn_index))
    problem = unreadable(conn, session, entries, dials)
    if problem:
        raise Refusal(*problem)


def named_ids(
    session: SessionPayload,
) -> tuple[dict[UUID, tuple[str, int]], dict[UUID, tuple[str, int]]]:
    """The entry and edge ids a session names, each with the first field and turn naming it."""
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
    return entries, edges


def unreadable(
    conn: Conn,
    session: SessionPayload,
    entries: Mapping[UUID, tuple[str, int]],
    dials: Settings,
) -> tuple[str, str, int] | None:
    """(reason, field, turn) for the first named entry the session's learner may not read in
    its topic (hag_entry_readable, the retrieval rule), or None when every one is readable."""
    who = visibility.reader(session.learner_id, session.topic_id, dials)
    denied = visibility.unreadable_entries(conn, list(entries), who)
    if not denied:
        return None
    first = next(i for i in entries if i in denied)
    field, turn_index = entries[first]
    extra = f" (and {len(denied) - 1} more)" if len(denied) > 1 else ""
    return (
        f"{field}: entry {first} ({denied[first]}) is not readable by learner "
        f"{session.learner_id!r} in topic {session.topic_id!r}{extra}",
        field,
        turn_index,
    )


def _queue(
    conn: Conn,
    session: SessionPayload,
    canonical: str,
    digest: str,
    source: str,
    dials: Settings,
) -> IngestResult:
    lock_learner(conn, session.learner_id, dials, shared=True)
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
    stored = one(
        conn.execute(
            query("session", "stored_digest"), {"session_id": session.session_id}
        ).fetchone()
    )
    state = STATES.get(stored["status"], stored["status"])
    if stored["payload_sha256"] == digest:
        return IngestResult("duplicate", session.session_id, source, state=state)
    raise Refusal(
        f"session_id: session {session.session_id!r} was already received with a different "
        f"payload (it is {state})",
        "session_id",
    )


# A received session's state by its ledger status, in the words an operator reads:
# `rejected` sessions had a bad payload and are in the quarantine.
STATES = {
    "pending": "pending",
    "processed": "applied",
    "failed": "failed",
    "rejected": "quarantined",
}


# --- files ---------------------------------------------------------------------------------


_CHUNK = 1 << 20  # bytes read at a time from a file


def read_payloads(
    path: Path, stream: IO[bytes] | None = None, max_bytes: int | None = None
) -> Iterator[tuple[str, Item]]:
    """(source, raw) for each payload of a JSON file (object or array) or JSON Lines file,
    read as a stream: memory holds one payload at a time, whatever the file's size.

    `.jsonl` / `.ndjson` files (and `stream`, standard input) hold one payload per line, and
    lines end at a line feed only. Any other file is one JSON document; an array's items are
    yielded one by one as their own text. Raw is text when it is UTF-8, the bytes when it is
    not (ingest refuses them by name), or an `Oversize` digest of a payload larger than
    `max_bytes` (dial session_max_payload_bytes). A document that does not parse is yielded
    from the point where it stops parsing, to be quarantined as one.
    """
    if max_bytes is None:
        from hag import settings

        max_bytes = settings.current().session_max_payload_bytes
    if stream is not None:
        yield from _json_lines(str(path), stream, max_bytes)
        return
    with path.open("rb") as f:
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            yield from _json_lines(str(path), f, max_bytes)
        else:
            yield from _json_document(str(path), f, max_bytes)


def _text_or_bytes(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _json_lines(name: str, f: IO[bytes], max_bytes: int) -> Iterator[tuple[str, Item]]:
    number = 0
    while True:
        line = f.readline(max_bytes + 2)  # the payload, its line feed, and one byte more
        if not line:
            return
        number += 1
        if len(line) > max_bytes + 1 or (len(line) == max_bytes + 1 and not line.endswith(b"\n")):
            yield f"{name}:{number}", _drain_line(line, f)
            continue
        if line.strip():
            yield f"{name}:{number}", _text_or_bytes(line.rstrip(b"\r\n"))


def _drain_line(start: bytes, f: IO[bytes]) -> Oversize:
    """Read the rest of an over-long line, keeping only its start, size and digest."""
    digest, size, chunk = hashlib.sha256(start), len(start), start
    while not chunk.endswith(b"\n"):
        chunk = f.readline(_CHUNK)
        if not chunk:
            break
        digest.update(chunk)
        size += len(chunk)
    return Oversize(start[:_CHUNK], size, digest.hexdigest())


def _json_document(name: str, f: IO[bytes], max_bytes: int) -> Iterator[tuple[str, Item]]:
    head = f.read(_CHUNK)
    first = head.lstrip()[:1]
    if first != b"[":  # one payload: the whole file, if it fits
        rest = f.read(max_bytes + 1 - len(head)) if len(head) <= max_bytes else b""
        data = head + rest
        if len(data) > max_bytes:
            digest = hashlib.sha256(data)
            size = len(data)
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                digest.update(chunk)
                size += len(chunk)
            yield name, Oversize(data[:_CHUNK], size, digest.hexdigest())
        else:
            yield name, _text_or_bytes(data)
        return
    yield from _json_array(name, head, f, max_bytes)


_SPACE = re.compile(r"\s*")


def _json_array(name: str, head: bytes, f: IO[bytes], max_bytes: int) -> Iterator[tuple[str, Item]]:
    """The items of a top-level JSON array, one at a time, each as the text it was written in.

    The array's own syntax is read strictly: one ',' between items, a closing ']', and nothing
    but white space after it. Where it breaks (a missing or doubled comma, an item that does
    not parse, an array not closed, text after it), what is left is yielded as one
    `Unreadable` naming the place, to be quarantined: the items before it stand, and no item
    after it is taken or dropped without a word.
    """
    decoder = codecs.getincrementaldecoder("utf-8")()
    scanner = json.JSONDecoder(parse_constant=_no_constants)
    try:
        buffer = decoder.decode(head)
    except UnicodeDecodeError:
        yield name, head + f.read(max_bytes)
        return
    position = buffer.index("[") + 1
    index, at_end, after_item, after_comma = 0, False, False, False

    def more() -> bool:
        """Read the next chunk onto what is left of the buffer; False at the file's end."""
        nonlocal buffer, position, at_end
        if at_end:
            return False
        chunk = f.read(_CHUNK)
        at_end = not chunk
        try:
            buffer = buffer[position:] + decoder.decode(chunk, final=at_end)
        except UnicodeDecodeError as exc:  # the bytes that would not decode go to quarantine
            exc.object = buffer[position:].encode("utf-8", "surrogatepass") + chunk
            raise
        position = 0
        return bool(chunk)

    def unreadable(why: str) -> tuple[str, Item]:
        later = "" if index == 0 else f"; the {index} item(s) before it were read"
        return f"{name}[{index}]", Unreadable(buffer[position:][:_CHUNK], f"{why}{later}")

    try:
        while True:
            position = _SPACE.match(buffer, position).end()  # type: ignore[union-attr]
            if position >= len(buffer) and more():
                continue
            char = buffer[position : position + 1]
            if after_item and char == ",":
                position, after_item, after_comma = position + 1, False, True
                continue
            if char == "]" and not after_comma:
                position += 1
                while _SPACE.match(buffer, position).end() >= len(buffer) and more():  # type: ignore[union-attr]
                    pass
                position = _SPACE.match(buffer, position).end()  # type: ignore[union-attr]
                if position < len(buffer):
                    yield (
                        f"{name}",
                        Unreadable(
                            buffer[position:][:_CHUNK],
                            f"text after the array's closing ']' was not read "
                            f"(the array's {index} item(s) were)",
                        ),
                    )
                return
            if not char:
                yield unreadable("the array ends without its closing ']'")
                return
            if char == "]":
                yield unreadable("a ',' before the array's closing ']' has no item after it")
                return
            if after_item:
                yield unreadable(
                    f"expected ',' or ']' after item [{index - 1}], found {char!r}: "
                    "this item and the ones after it were not read"
                )
                return
            try:
                _, end = scanner.raw_decode(buffer, position)
            except (ValueError, RecursionError) as exc:
                # Incomplete (read more) or malformed (nothing more to read, or too large).
                at = exc.pos - position if isinstance(exc, json.JSONDecodeError) else None
                if len(buffer) - position <= max_bytes * 2 and more():
                    continue  # (`more` moves what is left to the buffer's start)
                what = (
                    f"over {max_bytes} bytes (dial session_max_payload_bytes) or not valid JSON"
                    if len(buffer) - position > max_bytes * 2
                    else f"not valid JSON ({exc.msg} at character {at} of it)"
                    if isinstance(exc, json.JSONDecodeError)
                    else "not valid JSON"
                )
                yield unreadable(
                    f"item [{index}] is {what}: it and the items after it were not read"
                )
                return
            yield f"{name}[{index}]", buffer[position:end]
            index, position, after_item, after_comma = index + 1, end, True, False
    except UnicodeDecodeError as exc:
        later = "" if index == 0 else f"; the {index} item(s) before it were read"
        yield (
            f"{name}[{index}]",
            Unreadable(
                exc.object[: 2 * _CHUNK],
                f"the file is not UTF-8 text from item [{index}] on: it was not read{later}",
            ),
        )


def list_quarantined(conn: Conn, limit: int = 100) -> list[dict[str, Any]]:
    """The latest refused payloads, newest first (raw text shortened to its size and start)."""
    return [
        dict(r)
        for r in conn.execute(query("session", "list_quarantined"), {"limit": limit}).fetchall()
    ]
