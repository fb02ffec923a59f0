"""The service's HTTP/1.1 connections: uvicorn's h11 protocol, a plain retrieve answered first.

A tutor's retrieve is one small request on a kept-alive connection, every turn. Through
uvicorn's protocol it costs the server h11's parsing and state machine, the ASGI scope and
messages, and two writes (the head, then the body); with eight tutors on two cores that
CPU queues in front of every turn (docs/journal/2026-12-02-service-overhead.md).
`RetrieveProtocol` looks at the bytes of each request before h11 does: when they are one
whole, plain, authorised `POST /v1/retrieve` (`RetrieveFastPath.plain_request`), the
answer, head and body, leaves in one write. Every other request, and any byte that
arrives while h11 is in the middle of one, goes to h11 and the application; a request
that arrives while a retrieve is being answered waits for that answer (HTTP/1.1 answers
in order).

A connection whose requests are plain retrieves is then served by a thread of its own
(`_Served`): from its first plain retrieve the event loop stops reading it, and one thread
reads the socket, runs the retrieve and writes the answer, request after request, as a
caller in process would, with no hand-off to the loop or to a pool between them (each
hand-off wakes a sleeping thread: docs/journal/2026-12-02-thread-per-connection.md). The
retrieves all these threads run at once are bounded by `service_threads`, as on the pool,
and they share the process's database pools and resident sets. The first request that is
not a plain retrieve (or only part of one) goes back to the loop with the connection, and
h11 answers it; the peer closing, an error of the socket, an idle keep-alive timeout or
the server stopping closes it, always on the loop.

The rest of a connection's life is uvicorn's: keep-alive timeout, flow control, graceful
shutdown (an answer in flight is finished, sent with `Connection: close`, then the
connection closes).
"""

from __future__ import annotations

import contextlib
import http
import logging
import os
import select
import socket
import threading
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from hag.service.fast import JSON, RetrieveFastPath
from hag.service.models import RetrieveRequest

log = logging.getLogger("hag.service")
_READ = 65536  # bytes asked of the socket per read: a retrieve request in one


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
        self._served: _Served | None = None  # the thread serving this connection, if any

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
        if self._can_hand_over():
            self.flow.pause_reading()
            self._served = _Served(self, request)
            return
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

    def _can_hand_over(self) -> bool:
        """Whether this connection can go to a thread of its own: nothing of it waits in
        the transport's write buffer, the server counts no requests (uvicorn's
        limit_max_requests), and it is not stopping."""
        return (
            self.transport.get_write_buffer_size() == 0
            and self.config.limit_max_requests is None
            and not self._last
            and self.transport.get_extra_info("socket") is not None
        )

    def handed_back(self, rest: bytes, close: bool) -> None:
        """On the loop: the connection's thread is done; `rest` is what it read and did not
        answer (h11's now), `close` whether the connection ends."""
        served, self._served = self._served, None
        if served is not None:
            served.release()
        self._answering = False
        if close or self._last or self.transport.is_closing():
            self.transport.close()
            return
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        self.flow.resume_reading()
        if rest:
            self.data_received(rest)

    async def _answer(self, request: RetrieveRequest) -> None:
        try:
            status, payload, headers = await self._fast.respond(request)  # type: ignore[union-attr]
            if not self.transport.is_closing():
                self.transport.write(self.head(status, len(payload), headers) + payload)
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

    def head(self, status: int, length: int, headers: dict[str, str]) -> bytes:
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
        if self._served is not None:
            self._last = True
            self._served.stop()  # its thread wakes, answers what it holds, closes
        elif self._answering:
            self._last = True
        else:
            super().shutdown()

    @property
    def stopping(self) -> bool:
        """The server asked this connection to close after the answer in flight."""
        return self._last


class _Served:
    """A thread serving one connection's plain retrieves: read, retrieve, write, again.

    It works on its own duplicate of the connection's socket descriptor (non-blocking, as
    the loop left it: it waits with poll), and hands the connection back to the loop
    (`RetrieveProtocol.handed_back`) when a request is not a plain retrieve, the peer
    closes, the socket fails, the connection idles past uvicorn's keep-alive timeout, or
    the server stops; the loop alone closes the connection.
    """

    def __init__(self, protocol: RetrieveProtocol, first: RetrieveRequest) -> None:
        self._protocol = protocol
        self._loop = protocol.loop
        self._idle_ms = int(protocol.timeout_keep_alive * 1000)
        fd = protocol.transport.get_extra_info("socket").fileno()
        self._sock = socket.socket(fileno=os.dup(fd))
        self._poll = select.poll()
        self._poll.register(self._sock.fileno(), select.POLLIN)
        self._thread = threading.Thread(
            target=self._run, args=(first,), name="hag-connection", daemon=True
        )
        self._thread.start()

    def _run(self, request: RetrieveRequest) -> None:
        rest, close = b"", True
        fast = self._protocol._fast
        assert fast is not None
        try:
            while True:
                status, payload, headers = fast.respond_here(request)
                last = self._protocol.stopping
                self._send(self._protocol.head(status, len(payload), headers) + payload)
                if last or self._protocol.stopping:
                    break
                data = self._receive()
                if not data or self._protocol.stopping:
                    break  # the peer closed, the idle timeout passed, or the server stops
                found = fast.plain_request(data)
                if found is None:  # h11's, on the loop
                    rest, close = data, False
                    break
                request = found
        except OSError:
            pass  # the peer went away: the loop closes the connection
        except BaseException:
            log.exception("a connection's thread failed")
        finally:
            try:
                self._loop.call_soon_threadsafe(self._protocol.handed_back, rest, close)
            except RuntimeError:  # the loop is closed: the process is ending
                self._sock.close()

    def _receive(self) -> bytes:
        """The next bytes of the connection; b"" when it closed or idled past the timeout."""
        while True:
            if not self._poll.poll(self._idle_ms):
                return b""
            try:
                return self._sock.recv(_READ)
            except BlockingIOError:
                continue

    def _send(self, data: bytes) -> None:
        view, sent = memoryview(data), 0
        while sent < len(data):
            try:
                sent += self._sock.send(view[sent:])
            except BlockingIOError:
                if not select.select([], [self._sock], [], self._idle_ms / 1000)[1]:
                    raise TimeoutError("the peer reads nothing") from None

    def stop(self) -> None:
        """On the loop, the server stopping: wake the thread from its wait for a request."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RD)

    def release(self) -> None:
        """On the loop, the thread done: its descriptor closed."""
        self._thread.join()
        self._sock.close()


_KNOWN = frozenset(int(status) for status in http.HTTPStatus)
