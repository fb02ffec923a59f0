"""The retrieve endpoint's own path: `POST /v1/retrieve` answered beside FastAPI, not through it.

A tutor calls retrieve every turn, so its HTTP cost is what the service adds to a turn. Going
through FastAPI cost about 3.5 ms of the server's CPU per call on this machine (measured,
docs/service.md): the middleware stack, solving the bearer dependency, validating the body
in Python, building a `Response`, and the library's result turned into dicts by
`dataclasses.asdict` before `json.dumps`. With eight tutors on two cores that CPU queues in
front of every turn. `RetrieveFastPath`, the front door of the application (`Service` in
app.py), answers a well-formed, authorised retrieve itself:

- the token is compared on the raw header, the body validated by pydantic's core in one
  call (`RetrieveRequest.model_validate_json`);
- the retrieve runs on the service's own thread pool (`service_threads` of them) through
  the event loop's executor hand-off: one hop out and one back, without anyio's
  cancel scopes and limiter around it;
- the answer is encoded once, straight from the library's frozen dataclasses
  (`result_json`: orjson when it is installed, else the standard library), and sent with a
  `Server-Timing: retrieve;dur=...` header, the milliseconds the server worked on it, so a
  client can tell the network and the HTTP stack from the retrieve.

Under `hag service` most retrieves do not even reach this ASGI path: the connection's own
protocol (hag/service/wire.py) reads a plain retrieve from the raw bytes with
`plain_request` and answers it with `respond_here` on the connection's own thread (or
`respond` from the loop), without h11 and the ASGI messages; this path
answers the retrieves that protocol hands on, and every retrieve under another server.

A request without the token is answered 401 here, with the application's own reply and
before its body is read (the application's route would read a body of any size first).
Anything else, and every request this path would refuse (a body that is not a valid
`RetrieveRequest`), goes on to the FastAPI application unchanged (the body replayed), which
answers it as it always has: the same 422 lines, one place for them. An error of the retrieve itself is answered by the application's own error replies
(`reply_for`), so a 404 or 503 reads the same on either path.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import hmac
import json
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

from pydantic import ValidationError as PydanticError

from hag.service.models import API_PREFIX, RetrieveRequest

try:  # pragma: no cover - which branch runs depends on the install
    import orjson
except ImportError:  # the service extra alone does not bring it
    orjson = None  # type: ignore[assignment]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PATH = f"{API_PREFIX}/retrieve"
JSON = b"application/json"
_REQUEST_LINE = f"POST {PATH} HTTP/1.1\r\n".encode()
# Headers that make a request more than a plain retrieve: the general path answers it.
_REFUSED = frozenset((b"transfer-encoding", b"expect", b"upgrade"))


def result_json(result: Any) -> bytes:
    """The retrieve answer's bytes: `RetrievalResult.as_dict()` as JSON, without its copies.

    `as_dict` deep-copies every advisory (`dataclasses.asdict`), about a millisecond a turn;
    here the encoder walks the frozen dataclasses itself. tests/test_service.py holds both
    encoders to `as_dict`'s values.
    """
    body = _fields(result)
    body["rendered_edge_ids"] = result.rendered_edge_ids
    body["used_entry_ids"] = result.used_entry_ids
    if orjson is not None:
        return orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
    return stdlib_json(body)


def stdlib_json(body: Any) -> bytes:
    """`body` (dataclasses and uuids inside) as JSON by the standard library's encoder."""
    return json.dumps(body, default=_plain, separators=(",", ":")).encode()


def _fields(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


def _plain(value: Any) -> Any:
    if isinstance(value, UUID):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


class RetrieveFastPath:
    """An ASGI application: `POST /v1/retrieve` answered here, everything else by `app`.

    `token` is the service's bearer token; `pool` the executor the retrieve runs on;
    `reply_for(exc)` the application's (status, JSON body, headers) for an exception;
    `refused()` its answer to a request without the token (401, challenged).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        pool: Callable[[], ThreadPoolExecutor],
        gate: Callable[[], Turns],
        reply_for: Callable[[BaseException], tuple[int, bytes, dict[str, str]]],
        refused: Callable[[], tuple[int, bytes, dict[str, str]]],
    ) -> None:
        self.app = app
        self._refused = refused
        self._authorisation = b"Bearer " + token.encode()
        self._token = token.encode()
        self._pool = pool
        self._gate = gate
        self._reply_for = reply_for

    def _authorised(self, header: bytes) -> bool:
        """The header carries the token as the application reads it (the scheme in any case,
        the credentials stripped): the raw header first, the parse only when it differs."""
        if hmac.compare_digest(header, self._authorisation):
            return True
        scheme, _, credentials = header.decode("latin-1").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            credentials.strip().encode("latin-1"), self._token
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != PATH or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        authorisation: bytes | None = None
        content_type = b""
        for name, value in scope["headers"]:
            if name == b"authorization" and authorisation is None:  # the first, as the app
                authorisation = value
            elif name == b"content-type":
                content_type = value
        if not self._authorised(authorisation or b""):
            # refused before a byte of the body is read: a caller without the token never
            # makes the service hold its body (the application's route would read it whole)
            await self._send(send, *self._refused())
            return
        body = await _body(receive)
        request = None
        if not content_type or content_type.split(b";")[0].strip().lower() == JSON:
            try:
                request = RetrieveRequest.model_validate_json(body)
            except PydanticError:
                request = None
        if request is None:  # the application answers it (401, 422) as it answers any other
            await self.app(scope, _replay(body, receive), send)
            return
        await self._send(send, *await self.respond(request))

    @staticmethod
    async def _send(send: Send, status: int, payload: bytes, headers: dict[str, str]) -> None:
        raw = [(b"content-type", JSON), (b"content-length", str(len(payload)).encode())]
        raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": payload})

    async def respond(self, request: RetrieveRequest) -> tuple[int, bytes, dict[str, str]]:
        """The retrieve on the pool (one hop out, one back): (status, JSON body, headers),
        the application's own error reply for an exception of the retrieve."""
        loop = asyncio.get_running_loop()
        try:
            payload, headers = await loop.run_in_executor(self._pool(), answer, request)
        except Exception as exc:
            return self._reply_for(exc)
        return 200, payload, headers

    def respond_here(self, request: RetrieveRequest) -> tuple[int, bytes, dict[str, str]]:
        """The retrieve on the calling thread (a connection's own, hag/service/wire.py), as
        `respond` answers it; at most `service_threads` at once, as on the pool."""
        with self._gate():
            try:
                payload, headers = answer(request)
            except Exception as exc:
                return self._reply_for(exc)
        return 200, payload, headers

    def plain_request(self, data: bytes) -> RetrieveRequest | None:
        """The retrieve in `data`, the raw bytes of one whole HTTP/1.1 request, when they
        are a plain, authorised `POST /v1/retrieve` with a valid body; else None.

        For the connection's own protocol (hag/service/wire.py), which answers such a
        request without an HTTP parser or ASGI messages. Anything unusual is None and goes
        the general way (h11, this class's `__call__`, FastAPI), which answers it as for any
        request: a partial or pipelined request, a query string, a header folded over lines
        or given twice, a transfer encoding, `Expect`, `Upgrade` or `Connection: close`,
        HTTP/1.0, no `Host`, a wrong token or content type, a body pydantic refuses.
        """
        end = data.find(b"\r\n\r\n")
        if end < 0 or not data.startswith(_REQUEST_LINE):
            return None
        seen: dict[bytes, bytes] = {}
        for line in data[len(_REQUEST_LINE) : end].split(b"\r\n"):
            name, colon, value = line.partition(b":")
            key = name.lower()
            if not colon or key in seen or not name or name[-1:] in b" \t" or line[:1] in b" \t":
                return None
            seen[key] = value.strip(b" \t")
        if (
            b"host" not in seen
            or _REFUSED.intersection(seen)
            or seen.get(b"connection", b"").lower() == b"close"
        ):
            return None
        body = data[end + 4 :]
        length = seen.get(b"content-length", b"")
        if not length.isdigit() or int(length) != len(body):
            return None
        content_type = seen.get(b"content-type", b"")
        if content_type and content_type.split(b";")[0].strip().lower() != JSON:
            return None
        if not hmac.compare_digest(seen.get(b"authorization", b""), self._authorisation):
            return None
        try:
            return RetrieveRequest.model_validate_json(body)
        except PydanticError:
            return None


class Turns:
    """At most `size` holders at once, the others served in the order they came (first in,
    first out, as a thread pool's queue serves its work).

    `threading.Semaphore` lets a thread that arrives when a place is free take it ahead of
    one already woken for it, which then waits again at the back: with more connections
    than places that puts some calls at the back more than once, in the latency's tail.
    Here a place given up passes straight to the longest waiter.
    """

    def __init__(self, size: int) -> None:
        self._free = size
        self._lock = threading.Lock()
        self._waiting: collections.deque[threading.Lock] = collections.deque()

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiting:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiting.append(turn)
        turn.acquire()  # released by the holder that passes its place on

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._waiting:
                self._waiting.popleft().release()
            else:
                self._free += 1


def answer(request: RetrieveRequest) -> tuple[bytes, dict[str, str]]:
    """The retrieve (on a connection's thread or a pool thread) and its bytes, with the time
    it took."""
    from hag.retrieval import retrieve

    started = time.perf_counter()
    result = retrieve(
        request.topic_id,
        request.learner_id,
        request.message,
        level=request.level,
        focus=request.focus,
        recent_concepts=request.recent_concepts,
        expected_concepts=request.expected_concepts,
    )
    payload = result_json(result)
    took = (time.perf_counter() - started) * 1000
    return payload, {"Server-Timing": f"retrieve;dur={took:.3f}"}


async def _body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            return b"".join(chunks)
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the application the body already read, then the server's."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body, only a disconnect comes

    return replayed
