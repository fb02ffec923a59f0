"""A real local HTTP server speaking (a small part of) the OpenAI protocol, for tests.

Standard library only. The real ``openai`` client talks to it over a socket, so request
building, retries, timeouts and response parsing in the client all run for real.

Endpoints (everything else is 404; any request without ``Authorization: Bearer <key>`` is 401):

* ``POST /v1/embeddings`` - deterministic unit vectors derived from a SHA-256 of each text
  (values are float32-exact, so the ``float`` and ``base64`` encodings carry the same numbers),
  or a vector registered with :meth:`OpenAIStub.set_embedding`; after
  :attr:`OpenAIStub.embedding_delay` seconds when set (a hung endpoint).
* ``POST /v1/chat/completions`` - replies scripted with :meth:`OpenAIStub.queue_chat`,
  :meth:`OpenAIStub.queue_error` and :meth:`OpenAIStub.queue_delay` (FIFO), otherwise
  :attr:`OpenAIStub.chat_responder` is called with the request JSON.

Connections are HTTP/1.0 (one request per connection), so no keep-alive socket outlives a
request and shutdown is clean.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import itertools
import json
import math
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

__all__ = ["OpenAIStub", "RecordedRequest", "count_tokens", "hash_embedding"]

DEFAULT_DIM = 1536


def count_tokens(text: str) -> int:
    """The stub's deterministic token count: whitespace-separated words."""
    return len(text.split())


def _f32(x: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


def hash_embedding(text: str, dim: int = DEFAULT_DIM) -> list[float]:
    """Deterministic unit vector (float32-exact values) for ``text``; same text -> same vector."""
    if dim <= 0:
        raise ValueError("dim must be positive")
    seed = text.encode("utf-8")
    raw: list[float] = []
    block = 0
    while len(raw) < dim:
        digest = hashlib.sha256(seed + b"\x00" + block.to_bytes(4, "little")).digest()
        # 8 uint32 per digest, mapped to [-1, 1)
        raw.extend(v / 2147483648.0 - 1.0 for v in struct.unpack("<8I", digest))
        block += 1
    raw = raw[:dim]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [_f32(v / norm) for v in raw]


class RecordedRequest(NamedTuple):
    """One received request; unpacks as ``(path, json_body, headers)``.

    ``headers`` keys are lower-cased; ``json_body`` is None when the body was empty or not JSON.
    """

    path: str
    json_body: Any
    headers: dict[str, str]


_COUNTED = object()  # a chat reply's usage: the counted tokens


@dataclass
class _ChatReply:
    content: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    delay: float = 0.0
    usage: Any = _COUNTED  # else sent as it is (None: `"usage": null`)


@dataclass
class _ErrorReply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


def _default_chat_responder(request_json: dict[str, Any]) -> str:
    rf = request_json.get("response_format") or {}
    if isinstance(rf, dict) and rf.get("type") in ("json_schema", "json_object"):
        return "{}"
    return "stub reply"


def _message_text(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def _error_json(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    stub: OpenAIStub

    def process_request(self, request: Any, client_address: Any) -> None:
        # Counted from accept (server thread) until the connection socket is closed.
        self.stub._handler_started()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.stub._handler_finished()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.stub._handler_finished()

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # client went away; nothing to report
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"
    server: _Server
    server_version = "OpenAIStub/1.0"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self.server.stub._dispatch(self, "GET")

    def do_POST(self) -> None:
        self.server.stub._dispatch(self, "POST")

    def do_PUT(self) -> None:
        self.server.stub._dispatch(self, "PUT")

    def do_DELETE(self) -> None:
        self.server.stub._dispatch(self, "DELETE")


class OpenAIStub:
    """Local OpenAI-protocol server. Use as a context manager or call start()/stop()."""

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        self.dim = dim
        self.chat_responder: Callable[[dict[str, Any]], str] = _default_chat_responder
        # Seconds every /v1/embeddings request waits before answering (a slow or hung
        # endpoint); a client that gives up first gets nothing (counted in dropped_replies).
        self.embedding_delay = 0.0
        # A served model's own limits and quirks: a text longer than this is refused with a
        # 400 naming the model's context length; `dimensions` in a request is refused with
        # a 400 (a model without shortened outputs, as vLLM answers); the 200 reply's JSON
        # passed through this first (a str return is sent as a text body).
        self.max_input_chars: int | None = None
        self.max_batch: int | None = None  # more texts a request: 413 (TEI's batch limit)
        self.refuse_dimensions = False
        self.embedding_filter: Callable[[dict[str, Any]], Any] | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active_handlers = 0
        self._requests: list[RecordedRequest] = []
        self._chat_queue: deque[_ChatReply | _ErrorReply] = deque()
        self._embedding_errors: deque[_ErrorReply] = deque()
        self._embeddings: dict[str, list[float]] = {}
        self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self._dropped = 0
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> OpenAIStub:
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.stub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-stub",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, wake delayed replies (they are dropped) and close every socket."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        if thread is not None:
            thread.join(timeout)
        self.wait_idle(timeout)
        server.server_close()
        self._server = None
        self._thread = None

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("OpenAIStub is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Block until no request is in flight (e.g. a delayed reply noticed its client left)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._active_handlers:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def _handler_started(self) -> None:
        with self._lock:
            self._active_handlers += 1

    def _handler_finished(self) -> None:
        with self._idle:
            self._active_handlers -= 1
            self._idle.notify_all()

    # ------------------------------------------------------------------ scripting
    def set_embedding(self, text: str, vector: Sequence[float]) -> None:
        """Return exactly ``vector`` (as given, any length) whenever ``text`` is embedded."""
        with self._lock:
            self._embeddings[text] = [float(v) for v in vector]

    def embedding_for(self, text: str, dim: int | None = None) -> list[float]:
        """The vector the stub would return for ``text`` (float32-exact)."""
        with self._lock:
            explicit = self._embeddings.get(text)
        if explicit is not None:
            return list(explicit)
        return hash_embedding(text, dim or self.dim)

    def queue_embedding_error(
        self, status: int = 500, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        """Next /v1/embeddings request fails with ``status`` (FIFO)."""
        with self._lock:
            self._embedding_errors.append(_ErrorReply(status, body, dict(headers or {})))

    def queue_chat(
        self,
        content: str,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        finish_reason: str = "stop",
        usage: Any = _COUNTED,
    ) -> None:
        """Next chat completion answers ``content``; token counts default to word counts,
        and ``usage`` (a dict, or None for null) replaces the reply's usage object."""
        with self._lock:
            self._chat_queue.append(
                _ChatReply(content, prompt_tokens, completion_tokens, finish_reason, usage=usage)
            )

    def queue_error(
        self, status: int = 500, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        """Next chat completion fails with ``status``; ``body`` is a dict (JSON) or str."""
        with self._lock:
            self._chat_queue.append(_ErrorReply(status, body, dict(headers or {})))

    def queue_delay(
        self,
        seconds: float,
        content: str,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
    ) -> None:
        """Next chat completion waits ``seconds`` before answering ``content``.

        If the client gives up first (timeout), the reply is dropped and its usage is NOT
        counted in :meth:`usage_totals` (see :attr:`dropped_replies`).
        """
        with self._lock:
            self._chat_queue.append(
                _ChatReply(content, prompt_tokens, completion_tokens, delay=float(seconds))
            )

    def pending(self) -> int:
        """Scripted chat replies not yet consumed."""
        with self._lock:
            return len(self._chat_queue)

    # ------------------------------------------------------------------ inspection
    @property
    def requests(self) -> list[RecordedRequest]:
        """Snapshot of every request received: ``(path, json_body, headers)`` tuples."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        """Recorded requests whose path ends with ``path`` (e.g. ``"/chat/completions"``)."""
        return [r for r in self.requests if r.path.endswith(path)]

    def usage_totals(self) -> dict[str, int]:
        """Summed chat usage the stub sent (prompt/completion/total); dropped replies excluded."""
        with self._lock:
            return dict(self._usage)

    @property
    def dropped_replies(self) -> int:
        """Delayed replies abandoned because the client disconnected (or the stub stopped)."""
        with self._lock:
            return self._dropped

    def reset(self) -> None:
        """Forget recorded requests, scripted replies, registered vectors and usage."""
        with self._lock:
            self._requests.clear()
            self._chat_queue.clear()
            self._embedding_errors.clear()
            self._embeddings.clear()
            self._usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
            self._dropped = 0

    # ------------------------------------------------------------------ HTTP handling
    def _dispatch(self, h: _Handler, method: str) -> None:
        path = h.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in h.headers.items()}
        length = int(headers.get("content-length") or 0)
        raw = h.rfile.read(length) if length > 0 else b""
        body: Any = None
        bad_json = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                bad_json = True
        with self._lock:
            self._requests.append(RecordedRequest(path, body, headers))

        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            self._send_json(
                h,
                401,
                _error_json(
                    "You didn't provide an API key (stub: missing bearer).",
                    "invalid_request_error",
                    "missing_api_key",
                ),
            )
            return

        route = (method, path.rstrip("/"))
        if route == ("POST", "/v1/embeddings"):
            handler: Callable[[_Handler, dict[str, Any]], None] = self._embeddings_endpoint
        elif route == ("POST", "/v1/chat/completions"):
            handler = self._chat_endpoint
        else:
            self._send_json(
                h,
                404,
                _error_json(
                    f"Unknown request URL: {method} {path}", "invalid_request_error", "unknown_url"
                ),
            )
            return
        if bad_json or not isinstance(body, dict):
            self._send_json(
                h, 400, _error_json("Request body must be a JSON object.", "invalid_request_error")
            )
            return
        handler(h, body)

    def _send_json(
        self, h: _Handler, status: int, payload: Any, extra_headers: dict[str, str] | None = None
    ) -> bool:
        if isinstance(payload, (bytes, str)):
            data = payload.encode() if isinstance(payload, str) else payload
            ctype = "text/plain; charset=utf-8"
        else:
            data = json.dumps(payload).encode()
            ctype = "application/json"
        try:
            h.send_response(status)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(data)))
            h.send_header("Connection", "close")
            for k, v in (extra_headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
            h.wfile.flush()
        except OSError:
            return False
        return True

    def _send_error_reply(self, h: _Handler, err: _ErrorReply) -> None:
        body = err.body
        if body is None:
            body = _error_json(
                f"stub scripted error {err.status}",
                "server_error" if err.status >= 500 else "invalid_request_error",
            )
        self._send_json(h, err.status, body, err.headers)

    def _bad_request(self, h: _Handler, message: str) -> None:
        self._send_json(h, 400, _error_json(message, "invalid_request_error"))

    def _embeddings_endpoint(self, h: _Handler, body: dict[str, Any]) -> None:
        with self._lock:
            err = self._embedding_errors.popleft() if self._embedding_errors else None
        if err is not None:
            self._send_error_reply(h, err)
            return
        if self.embedding_delay > 0 and self._client_gone_during(h, self.embedding_delay):
            with self._lock:
                self._dropped += 1
            return
        inp = body.get("input")
        if isinstance(inp, str):
            texts = [inp]
        elif isinstance(inp, list) and inp:
            if all(isinstance(x, int) for x in inp):  # one token array
                texts = [" ".join(map(str, inp))]
            else:
                texts = [x if isinstance(x, str) else " ".join(map(str, x)) for x in inp]
        else:
            self._bad_request(h, "'input' must be a non-empty string or array")
            return
        if self.max_batch is not None and len(texts) > self.max_batch:
            self._send_json(
                h,
                413,
                _error_json(
                    f"batch size {len(texts)} > maximum allowed batch size {self.max_batch}",
                    "invalid_request_error",
                ),
            )
            return
        too_long = [t for t in texts if self.max_input_chars and len(t) > self.max_input_chars]
        if too_long:
            self._bad_request(
                h,
                f"This model's maximum context length is {self.max_input_chars} tokens, "
                f"however you requested {len(too_long[0])} tokens",
            )
            return
        dim = body.get("dimensions")
        if dim is not None and self.refuse_dimensions:
            self._bad_request(h, "Model does not support matryoshka representation")
            return
        if dim is None:
            dim = self.dim
        elif not isinstance(dim, int) or isinstance(dim, bool) or dim <= 0:
            self._bad_request(h, "'dimensions' must be a positive integer")
            return
        fmt = body.get("encoding_format") or "float"
        if fmt not in ("float", "base64"):
            self._bad_request(h, "'encoding_format' must be 'float' or 'base64'")
            return
        data = []
        tokens = 0
        for i, text in enumerate(texts):
            vec = self.embedding_for(text, dim)
            tokens += count_tokens(text)
            emb: Any = vec
            if fmt == "base64":
                emb = base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
            data.append({"object": "embedding", "index": i, "embedding": emb})
        reply: Any = {
            "object": "list",
            "data": data,
            "model": body.get("model", ""),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        if self.embedding_filter is not None:
            reply = self.embedding_filter(reply)
        self._send_json(h, 200, reply)

    def _client_gone_during(self, h: _Handler, seconds: float) -> bool:
        """Wait ``seconds``; True if the client disconnected or the stub is stopping."""
        deadline = time.monotonic() + seconds
        conn: socket.socket = h.connection
        while True:
            if self._stopping.is_set():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                readable, _, _ = select.select([conn], [], [], min(left, 0.05))
                if readable and conn.recv(1, socket.MSG_PEEK) == b"":
                    return True  # EOF: client closed (e.g. timed out)
                if readable:  # unexpected extra bytes; just sleep out the delay
                    return self._stopping.wait(max(0.0, deadline - time.monotonic()))
            except OSError:
                return True

    def _chat_endpoint(self, h: _Handler, body: dict[str, Any]) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            self._bad_request(h, "'messages' must be a non-empty array")
            return
        if body.get("stream"):
            self._bad_request(h, "stream=true is not supported by OpenAIStub")
            return
        with self._lock:
            item = self._chat_queue.popleft() if self._chat_queue else None
        if isinstance(item, _ErrorReply):
            self._send_error_reply(h, item)
            return
        if item is None:
            item = _ChatReply(self.chat_responder(body))
        if item.delay > 0 and self._client_gone_during(h, item.delay):
            with self._lock:
                self._dropped += 1
            return
        content = item.content
        prompt = item.prompt_tokens
        if prompt is None:
            prompt = sum(count_tokens(_message_text(m)) for m in messages)
        completion = item.completion_tokens
        if completion is None:
            completion = count_tokens(content)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        sent_usage = usage if item.usage is _COUNTED else item.usage
        payload = {
            "id": f"chatcmpl-stub-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": item.finish_reason,
                }
            ],
            "usage": sent_usage,
            "system_fingerprint": None,
        }
        # Count before writing, so usage_totals() is current once the client has its answer.
        with self._lock:
            for k, v in usage.items():
                self._usage[k] += v
        if not self._send_json(h, 200, payload):
            with self._lock:
                for k, v in usage.items():
                    self._usage[k] -= v
                self._dropped += 1
