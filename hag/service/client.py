"""A typed client of the HTTP service (hag/service), on the standard library alone.

Each calling thread keeps one connection alive (http.client), so a turn pays no TCP
handshake; the client is safe to share between threads.

    client = HagClient("http://127.0.0.1:8765", token="...")
    result = client.retrieve("cryptography", "ada", "how does RSA use primes?")
    prompt += result.text

Each method returns the service's own response model (hag/service/models.py) and raises
the library's errors on a refusal: NotFoundError (404), ValidationError (400, 409, 422,
with the field named), HagError (401), ServiceUnavailable (503, a connection refused or a
timeout). Keep one client per process.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from hag.errors import HagError, NotFoundError, ValidationError
from hag.service.models import (
    API_PREFIX,
    EdgeExplanation,
    ErrorBody,
    Health,
    RetrieveRequest,
    RetrieveResult,
    SessionState,
)

__all__ = [
    "HagClient",
    "ServiceError",
    "ServiceNotFound",
    "ServiceUnavailable",
    "ServiceValidationError",
]

Model = TypeVar("Model", bound=BaseModel)

_READ = 65536  # bytes asked of the socket per read: a retrieve's answer in one or two
_MAX_HEAD = 65536  # an answer's status line and headers, at most


class ServiceError(HagError):
    """The service refused a request; `status` is its HTTP status, `field` what it named."""

    def __init__(self, message: str, status: int, field: str | None = None):
        super().__init__(message)
        self.status, self.field = status, field


class ServiceUnavailable(ServiceError):
    """The service (or its database) cannot answer now: 503, refused or timed out."""


class ServiceValidationError(ServiceError, ValidationError):
    """The request broke the contract (400, 409, 422); the message names the field."""


class ServiceNotFound(ServiceError, NotFoundError):
    """The topic, edge or id does not exist (404)."""


class HagClient:
    """The service at `base_url`, called with `token` (HAG_SERVICE_TOKEN on the server)."""

    def __init__(self, base_url: str, token: str, *, timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        parts = urllib.parse.urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError(f"base_url {base_url!r} is not an http(s) URL")
        if any(not " " < c <= "~" for c in parts.path):
            raise ValidationError(
                f"base_url {base_url!r}: its path has a space or control character"
            )
        if any(not " " <= c <= "~" for c in token):
            raise ValidationError("token: only printable ASCII can travel in an HTTP header")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._prefix = parts.path
        self._token = token
        default = 443 if self._https else 80
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        port = f":{parts.port}" if parts.port not in (None, default) else ""
        self._host_header = f"Host: {host}{port}\r\n"
        self.timeout = timeout
        self._local = threading.local()  # one kept-alive connection per calling thread

    def retrieve(
        self,
        topic_id: str,
        learner_id: str,
        message: str,
        *,
        level: str | None = None,
        focus: str | None = None,
        recent_concepts: Iterable[Sequence[str]] = (),
        expected_concepts: Iterable[str] = (),
    ) -> RetrieveResult:
        """The memory for one turn (as hag.retrieval.retrieve); `text` goes into the prompt."""
        body = RetrieveRequest(
            topic_id=topic_id,
            learner_id=learner_id,
            message=message,
            level=level,
            focus=focus,
            recent_concepts=[list(turn) for turn in recent_concepts],
            expected_concepts=list(expected_concepts),
        )
        return self._call("POST", "/retrieve", RetrieveResult, body.model_dump_json().encode())

    def submit_session(self, payload: Mapping[str, Any] | str | bytes) -> SessionState:
        """Queue one session payload (docs/session-contract.schema.json), or learn where a
        session already received stands. A payload that breaks the contract raises
        ServiceValidationError naming the field (the service keeps it in the quarantine)."""
        return self._call("POST", "/sessions", SessionState, payload)

    def explain_edge(self, edge_id: str, *, limit: int | None = None) -> EdgeExplanation:
        """An edge's confidence and newest events; the id whole, a unique prefix or ending."""
        path = f"/edges/{urllib.parse.quote(str(edge_id), safe='')}/explain"
        if limit is not None:
            path += f"?limit={int(limit)}"
        return self._call("GET", path, EdgeExplanation)

    def health(self) -> Health:
        """Whether the service can serve (a 503 here is a report, not an exception)."""
        return self._call("GET", "/health", Health, accept=(503,))

    def _call(
        self,
        method: str,
        path: str,
        model: type[Model],
        body: Any = None,
        accept: tuple[int, ...] = (),
    ) -> Model:
        data = None
        if isinstance(body, bytes | str):
            data = body.encode() if isinstance(body, str) else body
        elif body is not None:
            data = json.dumps(body).encode()
        target = self._prefix + API_PREFIX + path
        for attempt in (1, 2):
            connection = self._connection()
            try:
                status, text = self._exchange(connection, method, target, data)
                break
            except (http.client.HTTPException, OSError) as exc:
                connection.close()
                self._local.connection = None
                # A kept-alive connection the server closed while idle: once more on a new
                # one (every call is safe to repeat: a retrieve reads, a session is
                # idempotent by its id).
                stale = isinstance(exc, ConnectionResetError | BrokenPipeError)
                if attempt == 1 and stale:
                    continue
                raise ServiceUnavailable(
                    f"the service at {self.base_url} did not answer: {exc or type(exc).__name__}",
                    503,
                ) from None
        if status >= 400 and status not in accept:
            raise _refusal(status, text)
        try:
            return model.model_validate_json(text)
        except PydanticError as exc:
            raise ServiceError(
                f"the service answered {status} with an unexpected body ({exc.error_count()} "
                f"problem(s), first: {exc.errors()[0]['msg']})",
                status,
            ) from None

    def _exchange(
        self, connection: http.client.HTTPConnection, method: str, target: str, data: bytes | None
    ) -> tuple[int, bytes]:
        """One request on `connection` and its (status, body).

        The request line, headers and body leave in one write (http.client writes the body
        apart: a system call here and a second read and parse on the server every turn),
        and the answer is read by `_read_response`, not http.client's parser, which reads
        the headers line by line and parses them with the email package: about 40%
        of the client's CPU on a turn (docs/journal/2026-12-02-service-overhead.md).
        """
        if connection.sock is None:
            connection.connect()
        head = (
            f"{method} {target} HTTP/1.1\r\n{self._host_header}"
            f"Authorization: Bearer {self._token}\r\n"
            "Accept: application/json\r\n"
        )
        if data is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        connection.sock.sendall(head.encode("latin-1") + b"\r\n" + (data or b""))
        status, headers, text = _read_response(connection.sock)
        if headers.get("connection", "").lower() == "close":
            connection.close()
        timing = headers.get("server-timing")
        self._local.server_ms = _duration(timing) if timing else None
        return status, text

    def _connection(self) -> http.client.HTTPConnection:
        """This thread's kept-alive connection to the service (made on first use)."""
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            connection = kind(self._host, self._port, timeout=self.timeout)
            self._local.connection = connection
        return connection

    @property
    def last_server_ms(self) -> float | None:
        """The milliseconds the service reported working on this thread's last call (its
        `Server-Timing` header: a retrieve sends one), None when it sent none. The rest of
        the call's time is the network and the HTTP stacks."""
        return getattr(self._local, "server_ms", None)

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    def __enter__(self) -> HagClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Broken(http.client.HTTPException):
    """The service's answer could not be read as HTTP/1.1 (a ServiceUnavailable outside)."""


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response from `sock`: (status, headers by lower-case name, body).

    Reads in large pieces (a retrieve's answer, ~12 KB, is one or two reads) and splits
    the head itself. The body is framed by Content-Length, chunked transfer encoding, or
    the end of the connection, as HTTP/1.1 allows. The service closing the connection
    before the first byte is a ConnectionResetError (a kept-alive connection closed while
    idle: the caller retries once); any other short or malformed answer is `_Broken`.
    """
    buffer = bytearray()
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        if len(buffer) > _MAX_HEAD:
            raise _Broken("the answer's head is too long")
        chunk = sock.recv(_READ)
        if not chunk:
            if buffer:
                raise _Broken("the connection closed inside the answer's head")
            raise ConnectionResetError("the service closed the connection")
        buffer += chunk
    lines = bytes(buffer[:end]).decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code = rest[:3]
    if not version.startswith("HTTP/1.") or not code.isdigit():
        raise _Broken(f"not an HTTP/1.1 answer: {lines[0][:40]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise _Broken(f"a malformed header line: {line[:40]!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
        headers["connection"] = "close"
    body = buffer[end + 4 :]
    if code[0] == "1" or code in ("204", "304"):  # no body, whatever the headers say
        return int(code), headers, b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return int(code), headers, _read_chunked(sock, body)
    length = headers.get("content-length")
    if length is None:  # framed by the connection's end
        headers["connection"] = "close"
        while chunk := sock.recv(_READ):
            body += chunk
        return int(code), headers, bytes(body)
    if not length.isdigit():
        raise _Broken(f"a malformed Content-Length: {length[:20]!r}")
    return int(code), headers, _read_exactly(sock, body, int(length))


def _read_exactly(sock: socket.socket, body: bytearray, size: int) -> bytes:
    """`body` (already read) completed from `sock` to `size` bytes."""
    while len(body) < size:
        chunk = sock.recv(max(size - len(body), _READ))
        if not chunk:
            raise _Broken(f"the connection closed after {len(body)} of {size} bytes")
        body += chunk
    if len(body) > size:
        raise _Broken("more bytes than the answer's Content-Length")
    return bytes(body)


def _read_chunked(sock: socket.socket, pending: bytearray) -> bytes:
    """A chunked body, `pending` its first bytes already read."""
    body = bytearray()
    while True:
        while (eol := pending.find(b"\r\n")) < 0:
            chunk = sock.recv(_READ)
            if not chunk:
                raise _Broken("the connection closed inside a chunked answer")
            pending += chunk
        size_text = bytes(pending[:eol]).split(b";")[0].strip()
        if not size_text or size_text.strip(b"0123456789abcdefABCDEF"):
            raise _Broken(f"a malformed chunk size: {size_text[:20]!r}")
        size = int(size_text, 16)
        del pending[: eol + 2]
        if size == 0:  # the last chunk: then trailers, if any, and a blank line
            while not pending.startswith(b"\r\n") and b"\r\n\r\n" not in pending:
                chunk = sock.recv(_READ)
                if not chunk:
                    raise _Broken("the connection closed inside a chunked answer's end")
                pending += chunk
            return bytes(body)
        needed = size + 2
        while len(pending) < needed:
            chunk = sock.recv(max(needed - len(pending), _READ))
            if not chunk:
                raise _Broken("the connection closed inside a chunk")
            pending += chunk
        body += pending[:size]
        del pending[:needed]


def _duration(timing: str) -> float | None:
    """The `dur` of a `Server-Timing` header's first metric (`retrieve;dur=4.212`)."""
    for part in timing.split(",")[0].split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name == "dur":
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _refusal(status: int, text: bytes) -> ServiceError:
    """The library's error for a refusal, with the service's one line."""
    try:
        body = ErrorBody.model_validate_json(text)
    except PydanticError:
        body = ErrorBody(detail=text.decode(errors="replace").strip()[:200] or f"HTTP {status}")
    message = f"{body.detail} (HTTP {status})"
    if status == 404:
        return ServiceNotFound(message, status, body.field)
    if status in (400, 409, 422):
        return ServiceValidationError(message, status, body.field)
    if status >= 500:
        return ServiceUnavailable(message, status, body.field)
    return ServiceError(message, status, body.field)
