"""The service's HTTP/1.1 connections: uvicorn's h11 protocol, a plain retrieve answered first.

A tutor's retrieve is one small request on a kept-alive connection, every turn. Through
uvicorn's protocol it costs the server h11's parsing and state machine, the ASGI scope and
messages, and two writes (the head, then the body); with eight tutors on two cores that
CPU queues in front of every turn (docs/journal/2026-12-02-service-overhead.md).
`RetrieveProtocol` looks at the bytes of each request before h11 does: when they are one
whole, plain, authorised `POST /v1/retrieve` (`RetrieveFastPath.plain_request`), it runs
the retrieve on the service's retrieve pool and writes the answer, head and body, in one
write. Every other request, and any byte that arrives while h11 is in the middle of one,
goes to h11 and the application exactly as before; a request that arrives while a
retrieve is being answered waits for that answer (HTTP/1.1 answers in order).

The rest of a connection's life is uvicorn's: keep-alive timeout, flow control, graceful
shutdown (an answer in flight is finished, sent with `Connection: close`, then the
connection closes).
"""

from __future__ import annotations

import http
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from hag.service.fast import JSON, RetrieveFastPath
from hag.service.models import RetrieveRequest


def server_config(app: Any, host: str, port: int, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for the service `app` on `host:port`, on `RetrieveProtocol`."""
    return uvicorn.Config(app, host=host, port=port, http=RetrieveProtocol, **options)


class RetrieveProtocol(H11Protocol):
    """uvicorn's h11 protocol with a plain retrieve answered before h11 parses it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The application uvicorn was given (create_app's); another has no retrieve path.
        self._fast: RetrieveFastPath | None = getattr(self.config.app, "fast_path", None)
        self._answering = False  # a retrieve of this connection is being answered
        self._held = bytearray()  # what arrived meanwhile: the next request(s)
        self._last = False  # the server is stopping: close after the answer in flight

    def data_received(self, data: bytes) -> None:
        if self._answering:
            self._held += data
            self.flow.pause_reading()
            return
        request = self._plain_retrieve(data)
        if request is None:
            super().data_received(data)
            return
        self._unset_keepalive_if_required()
        self._answering = True
        task = self.loop.create_task(self._answer(request))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    def _plain_retrieve(self, data: bytes) -> RetrieveRequest | None:
        """The retrieve `data` holds, when h11 is between requests and it is a plain one."""
        conn = self.conn
        if (
            self._fast is None
            or self.limit_concurrency is not None
            or conn.our_state is not h11.IDLE
            or conn.their_state is not h11.IDLE
            or conn.trailing_data[0]
        ):
            return None
        return self._fast.plain_request(data)

    async def _answer(self, request: RetrieveRequest) -> None:
        try:
            status, payload, headers = await self._fast.respond(request)  # type: ignore[union-attr]
            if not self.transport.is_closing():
                self.transport.write(self._head(status, len(payload), headers) + payload)
        finally:
            self._answering = False
            if self._last:
                self.transport.close()
            else:
                self.on_response_complete()  # counted; keep-alive timer; reading resumed
                if self._held and not self.transport.is_closing():
                    held = bytes(self._held)
                    self._held.clear()
                    self.data_received(held)

    def _head(self, status: int, length: int, headers: dict[str, str]) -> bytes:
        """The status line and headers of an answer (uvicorn's own Server and Date too)."""
        phrase = http.HTTPStatus(status).phrase if status in _KNOWN else ""
        lines = [f"HTTP/1.1 {status} {phrase}".encode()]
        lines += [name + b": " + value for name, value in self.server_state.default_headers]
        lines.append(b"content-type: " + JSON)
        lines.append(b"content-length: " + str(length).encode())
        lines += [f"{name.lower()}: {value}".encode("latin-1") for name, value in headers.items()]
        if self._last:
            lines.append(b"connection: close")
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def shutdown(self) -> None:
        """The server is stopping: an idle connection closes now, a busy one after its answer."""
        if self._answering:
            self._last = True
        else:
            super().shutdown()


_KNOWN = frozenset(int(status) for status in http.HTTPStatus)
