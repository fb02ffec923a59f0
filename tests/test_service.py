"""The HTTP service driven by its typed client through a real uvicorn server on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from hag import retrieval
from hag.errors import ValidationError
from hag.operations import corpus
from hag.service.client import (
    HagClient,
    ServiceError,
    ServiceNotFound,
    ServiceUnavailable,
    ServiceValidationError,
)
from tests.session_builders import payload, turn

PROJECT_ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-token-" + uuid.uuid4().hex
MESSAGE = "how does RSA use prime numbers"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Running:
    """A uvicorn server of `create_app` in a thread of this process, configured as `hag
    service` configures it (its own connection protocol, hag/service/wire.py)."""

    def __init__(self, **options: Any) -> None:
        import uvicorn

        from hag.service import create_app
        from hag.service.wire import server_config

        self.app = create_app(TOKEN)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(
            server_config(self.app, "127.0.0.1", self.port, log_level="warning", **options)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Running:
        self.thread.start()
        while not self.server.started:
            assert self.thread.is_alive(), "the service did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


@pytest.fixture
def service(db: Any) -> Iterator[Running]:
    """The demo corpus loaded and the service running on a free loopback port."""
    corpus.load_file(corpus.DEMO_CORPUS)
    db.commit()
    retrieval.clear_caches()
    with Running() as running:
        yield running
    retrieval.clear_caches()


@pytest.fixture
def client(service: Running) -> Iterator[HagClient]:
    with HagClient(service.url, TOKEN) as client:
        yield client


def raw(service: Running, method: str, path: str, body: bytes | None = None, token: str = TOKEN):
    """(status, parsed body) of one request sent as given."""
    request = urllib.request.Request(
        service.url + path,
        data=body,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def test_retrieve_over_http_is_the_in_process_result(client):
    """The client's typed result carries the same prompt text and ids as the library's."""
    over_http = client.retrieve(
        "cryptography", "ada", MESSAGE, recent_concepts=[["rsa"]], expected_concepts=["rsa"]
    )
    retrieval.clear_caches()
    local = retrieval.retrieve(
        "cryptography", "ada", MESSAGE, recent_concepts=[["rsa"]], expected_concepts=["rsa"]
    )
    assert over_http.text == local.text and over_http.text
    assert over_http.used_entry_ids == local.used_entry_ids
    assert over_http.rendered_edge_ids == local.rendered_edge_ids
    assert over_http.degraded == "" and over_http.topic_advisories


def test_a_retrieve_reports_the_services_own_time(service, client):
    """A retrieve answers with Server-Timing; the client reads it as last_server_ms."""
    assert client.last_server_ms is None
    client.retrieve("cryptography", "ada", MESSAGE)
    assert client.last_server_ms is not None and client.last_server_ms > 0
    request = urllib.request.Request(
        service.url + "/v1/retrieve",
        data=json.dumps(
            {"topic_id": "cryptography", "learner_id": "ada", "message": MESSAGE}
        ).encode(),
        headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Server-Timing"].startswith("retrieve;dur=")
    client.health()
    assert client.last_server_ms is None  # the application's endpoints send none


def test_a_retrieve_without_the_token_is_refused_by_the_application(service):
    """The retrieve's own path hands a missing or wrong token to the app: 401, challenged."""
    body = b'{"topic_id": "cryptography", "learner_id": "ada", "message": "hi"}'
    assert raw(service, "POST", "/v1/retrieve", body, token="wrong") == (
        401,
        {"detail": "a valid bearer token is required"},
    )
    request = urllib.request.Request(service.url + "/v1/retrieve", data=body, method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    with caught.value as refused:
        assert refused.code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"


def test_a_retrieve_without_the_token_is_refused_before_its_body_is_read(service):
    """A wrong token announcing a gigabyte body, of which only the head is sent: answered 401
    at once (reading the body first, the service would wait for the gigabyte)."""
    head = (
        b"POST /v1/retrieve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        sock.sendall(head + b'{"topic_id": "')
        ((status, headers, body),) = _answers(sock, 1)
    assert (status, headers["www-authenticate"]) == (401, "Bearer")
    assert json.loads(body) == {"detail": "a valid bearer token is required"}


def test_the_token_is_read_as_the_application_reads_it(service):
    """The scheme in any case and the credentials stripped, as FastAPI's bearer reads them:
    a lowercase `bearer` and an extra space are answered, as before the early refusal."""
    body = RETRIEVE.encode()
    for header in (f"bearer {TOKEN}", f"Bearer  {TOKEN}", f"BEARER {TOKEN} "):
        request = urllib.request.Request(
            service.url + "/v1/retrieve", data=body, method="POST",
            headers={"Authorization": header, "Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=30) as answered:
            assert answered.status == 200, header


@pytest.mark.parametrize("encoder", ["orjson", "stdlib"])
def test_the_retrieve_answer_is_the_librarys_as_dict(service, monkeypatch, encoder):
    """result_json, with orjson or the standard library, encodes exactly as_dict's values."""
    from hag.service import fast

    if encoder == "stdlib":
        monkeypatch.setattr(fast, "orjson", None)
    elif fast.orjson is None:
        pytest.skip("orjson is not installed")
    result = retrieval.retrieve(
        "cryptography", "ada", MESSAGE, recent_concepts=[["rsa"]], expected_concepts=["rsa"]
    )
    assert result.topic_advisories and result.edges and result.passes
    assert json.loads(fast.result_json(result)) == result.as_dict()


def _request(body: bytes, path: str = "/v1/retrieve", extra: str = "") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n{extra}"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _answers(sock: socket.socket, count: int) -> list[tuple[int, dict[str, str], bytes]]:
    """`count` answers read from `sock` in order (each framed by its Content-Length, as the
    service frames every answer to a request it can read)."""
    buffer, answers = b"", []
    while len(answers) < count:
        end = buffer.find(b"\r\n\r\n")
        if end >= 0:
            lines = buffer[:end].decode("latin-1").split("\r\n")
            headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
            size = int(headers.get("content-length", 0))
            if len(buffer) >= end + 4 + size:
                status = int(lines[0].split()[1])
                answers.append((status, headers, buffer[end + 4 : end + 4 + size]))
                buffer = buffer[end + 4 + size :]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed after {len(answers)} of {count} answers"
        buffer += chunk
    return answers


RETRIEVE = json.dumps({"topic_id": "cryptography", "learner_id": "ada", "message": MESSAGE})


def test_a_plain_retrieve_is_answered_by_the_connections_own_protocol(service, monkeypatch):
    """The client's retrieve is a plain request: answered before h11, in one write, with
    the same body as the general path gives the same request sent in two pieces."""
    from hag.service.fast import RetrieveFastPath

    taken: list[bool] = []
    plain = RetrieveFastPath.plain_request

    def spy(self: RetrieveFastPath, data: bytes) -> Any:
        found = plain(self, data)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(RetrieveFastPath, "plain_request", spy)
    request = _request(RETRIEVE.encode())
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        sock.sendall(request)
        ((status, headers, whole),) = _answers(sock, 1)
        sock.sendall(request[:40])  # the head in two pieces: h11 and the application
        time.sleep(0.2)
        sock.sendall(request[40:])
        ((again, _, pieces),) = _answers(sock, 1)
    assert taken[0] is True and False in taken[1:]
    assert (status, again) == (200, 200) and headers["server-timing"].startswith("retrieve;")
    first, second = json.loads(whole), json.loads(pieces)
    assert first["text"] and first["text"] == second["text"]
    assert first["used_entry_ids"] == second["used_entry_ids"]


@pytest.mark.parametrize(
    ("path", "extra", "status"),
    [
        ("/v1/retrieve", "Connection: close\r\n", 200),
        ("/v1/retrieve?trace=1", "", 200),
        ("/v1/retrieve", "Transfer-Encoding: gzip\r\n", 400),
    ],
)
def test_a_retrieve_out_of_the_ordinary_takes_the_general_path(service, path, extra, status):
    """Connection: close, a query string, a transfer encoding: not plain, so h11 and the
    application answer them as HTTP says (the first closes after its answer; h11 refuses
    an encoding it cannot undo)."""
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        sock.sendall(_request(RETRIEVE.encode(), path=path, extra=extra))
        ((answered, headers, body),) = _answers(sock, 1)
        assert answered == status
        if status == 200:
            assert json.loads(body)["text"] and "server-timing" in headers
        if extra.startswith("Connection"):
            assert headers["connection"] == "close" and sock.recv(10) == b""


def test_requests_sent_before_a_retrieve_is_answered_are_answered_in_order(service):
    """A retrieve, then at once a malformed retrieve and a health check on the same
    connection: three answers, in the order asked (HTTP/1.1 pipelining)."""
    health = f"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        sock.sendall(_request(RETRIEVE.encode()))
        sock.sendall(_request(b'{"topic_id": 7}') + health.encode())
        answers = _answers(sock, 3)
    assert [status for status, _, _ in answers] == [200, 422, 200]
    assert json.loads(answers[0][2])["text"]
    assert json.loads(answers[1][2])["field"] == "topic_id"
    assert json.loads(answers[2][2])["ok"] is True


def _answered_on(monkeypatch: pytest.MonkeyPatch, hold: float = 0.0) -> list[str]:
    """The names of the threads the service's retrieves run on, in order (each held
    `hold` seconds); "busy:N" entries say how many ran at once when one began."""
    from hag.service import fast

    names: list[str] = []
    running = [0]
    lock = threading.Lock()
    original = fast.answer

    def spy(request: Any) -> Any:
        with lock:
            running[0] += 1
            names.append(threading.current_thread().name)
            names.append(f"busy:{running[0]}")
        try:
            time.sleep(hold)
            return original(request)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(fast, "answer", spy)
    return names


def _connection_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "hag-connection"]


def test_a_connection_of_plain_retrieves_is_served_by_a_thread_of_its_own(service, monkeypatch):
    """From its first plain retrieve a connection is read, answered and written by one
    thread of its own (no pool); a request of another kind goes back to the loop and h11,
    the next retrieve to a thread again; the peer closing ends the thread."""
    names = _answered_on(monkeypatch)
    health = f"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sock:
        answers = []
        for request in (
            (_request(RETRIEVE.encode()),) * 2 + (health.encode(),) + (_request(RETRIEVE.encode()),)
        ):
            sock.sendall(request)
            answers += _answers(sock, 1)
            if len(answers) == 2:
                assert len(_connection_threads()) == 1
    assert [status for status, _, _ in answers] == [200] * 4
    assert json.loads(answers[2][2])["ok"] is True
    assert [name for name in names if not name.startswith("busy")] == ["hag-connection"] * 3
    deadline = time.monotonic() + 10
    while _connection_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _connection_threads() == []


def test_connection_threads_run_at_most_service_threads_retrieves_at_once(db, dials, monkeypatch):
    """service_threads bounds the retrieves that connections' own threads run at once, as
    it bounds the retrieve pool: four connections, two dials' worth at a time."""
    corpus.load_file(corpus.DEMO_CORPUS)
    db.commit()
    retrieval.clear_caches()
    dials(service_threads=2)
    names = _answered_on(monkeypatch, hold=0.3)
    with Running() as running, ExitStack() as stack:
        socks = [
            stack.enter_context(socket.create_connection(("127.0.0.1", running.port), timeout=30))
            for _ in range(4)
        ]
        for sock in socks:
            sock.sendall(_request(RETRIEVE.encode()))
        assert [_answers(sock, 1)[0][0] for sock in socks] == [200] * 4
    busy = [int(name.split(":")[1]) for name in names if name.startswith("busy")]
    assert len(busy) == 4 and max(busy) == 2
    retrieval.clear_caches()


def test_the_retrieve_turns_are_first_come_first_served():
    """A place given up passes to the longest waiter, never to a thread that came later."""
    from hag.service.fast import Turns

    turns, order, lock = Turns(1), [], threading.Lock()
    turns.__enter__()  # the one place taken

    def wait(n: int) -> None:
        with turns, lock:
            order.append(n)

    threads = []
    for n in range(4):
        threads.append(threading.Thread(target=wait, args=(n,)))
        threads[-1].start()
        while len(turns._waiting) < n + 1:
            time.sleep(0.001)
    turns.__exit__()
    for t in threads:
        t.join(timeout=10)
    assert order == [0, 1, 2, 3] and turns._free == 1


def test_an_idle_connection_of_its_own_thread_closes_after_the_keep_alive_timeout(db):
    """A connection served by its own thread that sends nothing for uvicorn's keep-alive
    timeout is closed, as h11's would be; a server stopping closes one at once."""
    corpus.load_file(corpus.DEMO_CORPUS)
    db.commit()
    retrieval.clear_caches()
    with (
        Running(timeout_keep_alive=1) as running,
        socket.create_connection(("127.0.0.1", running.port), timeout=30) as sock,
    ):
        sock.sendall(_request(RETRIEVE.encode()))
        assert _answers(sock, 1)[0][0] == 200
        started = time.monotonic()
        assert sock.recv(10) == b""
        assert 0.5 < time.monotonic() - started < 10
    # the stop against an idle timeout far longer than any scheduling delay, so the close
    # can only be the stop's
    with Running(timeout_keep_alive=120) as running:
        with socket.create_connection(("127.0.0.1", running.port), timeout=60) as sock:
            sock.sendall(_request(RETRIEVE.encode()))
            assert _answers(sock, 1)[0][0] == 200
            assert len(_connection_threads()) == 1
            running.server.should_exit = True
            started = time.monotonic()
            assert sock.recv(10) == b""
            assert time.monotonic() - started < 60  # the stop, not the idle timeout
        running.thread.join(timeout=30)
        assert not running.thread.is_alive()
    assert _connection_threads() == []
    retrieval.clear_caches()


def test_a_retrieve_in_flight_at_shutdown_is_answered_then_the_connection_closes(db, monkeypatch):
    """The server stopping while the connection's own protocol answers a retrieve: the
    answer goes out whole, with Connection: close, and the server then stops."""
    corpus.load_file(corpus.DEMO_CORPUS)
    db.commit()
    retrieval.clear_caches()
    started, release = threading.Event(), threading.Event()
    original = retrieval.retrieve

    def slow(*args: Any, **kwargs: Any) -> Any:
        started.set()
        release.wait(timeout=30)
        return original(*args, **kwargs)

    monkeypatch.setattr(retrieval, "retrieve", slow)
    with Running() as running:
        with socket.create_connection(("127.0.0.1", running.port), timeout=30) as sock:
            sock.sendall(_request(RETRIEVE.encode()))
            assert started.wait(timeout=30)
            running.server.should_exit = True
            time.sleep(0.5)  # the server asks every connection to shut down
            release.set()
            ((status, headers, body),) = _answers(sock, 1)
            assert status == 200 and json.loads(body)["text"]
            assert headers["connection"] == "close" and sock.recv(10) == b""
        running.thread.join(timeout=30)
        assert not running.thread.is_alive()
    retrieval.clear_caches()


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", b"hello"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nhel\r\n2;x=1\r\nlo\r\n0\r\nTrailer: 1\r\n\r\n",
            b"hello",
        ),
        (b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\nhello", b"hello"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
)
def test_the_client_reads_every_framing_http_allows(answer, body):
    """Content-Length, chunked (with an extension and a trailer), the connection's end."""
    from hag.service.client import _read_response

    ours, theirs = socket.socketpair()
    with ours, theirs:
        for i in range(0, len(answer), 7):  # in small pieces, as a network may deliver it
            theirs.sendall(answer[i : i + 7])
        theirs.shutdown(socket.SHUT_WR)
        assert _read_response(ours)[2] == body


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Le",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\nhello\r\n0\r\n\r\n",
    ],
)
def test_a_broken_answer_is_unavailable_not_a_socket_error(answer):
    """A short, malformed or foreign answer raises ServiceUnavailable naming no socket type."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    with (
        listener,
        HagClient(url, TOKEN, timeout=10) as client,
        pytest.raises(ServiceUnavailable, match="did not answer") as caught,
    ):
        client.health()
    thread.join(timeout=10)
    assert caught.value.status == 503


def test_the_client_reads_the_duration_of_server_timing():
    """The first metric's dur is the figure; none, or a malformed one, is None."""
    from hag.service.client import _duration

    assert _duration("retrieve;dur=4.25") == 4.25
    assert _duration('retrieve;desc="x";dur=1, db;dur=9') == 1.0
    assert _duration("retrieve") is None and _duration("retrieve;dur=soon") is None


def test_a_token_that_cannot_travel_in_a_header_is_refused_by_the_client():
    """A token with a line break (header injection) or a URL path with a space: one line."""
    with pytest.raises(ValidationError, match="printable ASCII"):
        HagClient("http://127.0.0.1:1", "abc\r\nX-Evil: 1")
    with pytest.raises(ValidationError, match="space or control"):
        HagClient("http://127.0.0.1:1/a b", TOKEN)


def test_an_unknown_topic_is_a_404_naming_it(client):
    """The library's NotFoundError is a 404 with its message, raised as ServiceNotFound."""
    with pytest.raises(ServiceNotFound, match="unknown topic 'nowhere'") as caught:
        client.retrieve("nowhere", "ada", MESSAGE)
    assert caught.value.status == 404


def test_a_session_is_queued_and_a_resubmission_says_its_state(client, db):
    """Accepted as pending; the same payload again is a duplicate that says the state."""
    session = payload("svc-1", [turn(0, message="hi")])
    first = client.submit_session(session)
    assert (first.status, first.session_id, first.state) == ("accepted", "svc-1", "pending")
    again = client.submit_session(json.dumps(session))
    assert (again.status, again.state) == ("duplicate", "pending")
    assert db.execute("SELECT count(*) AS n FROM hag_sessions").fetchone()["n"] == 1


def test_a_payload_breaking_the_contract_is_refused_and_quarantined(client, db):
    """422 naming the field and turn, kept in the quarantine as `hag ingest` keeps it."""
    bad = payload("svc-2", [turn(0, outcome="triumph")])
    with pytest.raises(ServiceValidationError) as caught:
        client.submit_session(bad)
    assert caught.value.status == 422
    assert caught.value.field == "turns[0].outcome"
    row = db.execute("SELECT field, source FROM hag_session_quarantine").fetchone()
    assert row == {"field": "turns[0].outcome", "source": "service"}


def test_the_same_session_id_with_another_payload_is_a_409(client):
    """A different payload under an id already received: 409, the session_id named."""
    client.submit_session(payload("svc-3", [turn(0, message="hi")]))
    with pytest.raises(ServiceValidationError, match="different payload") as caught:
        client.submit_session(payload("svc-3", [turn(0, message="hello there")]))
    assert (caught.value.status, caught.value.field) == (409, "session_id")


def test_an_edge_is_explained_by_its_id_prefix(client, db):
    """An edge's confidence and its events, found by a unique prefix; an entry id is 404."""
    edge = db.execute("SELECT id, confidence FROM hag_edges ORDER BY id LIMIT 1").fetchone()
    explained = client.explain_edge(edge["id"].hex[:12])
    assert explained.edge_id == edge["id"]
    assert explained.confidence == pytest.approx(edge["confidence"])
    assert explained.culled is False and explained.total_events == len(explained.events)
    entry = db.execute("SELECT id FROM hag_entries LIMIT 1").fetchone()["id"]
    with pytest.raises(ServiceNotFound, match="an entry, not an edge"):
        client.explain_edge(str(entry))


def test_an_explain_limit_out_of_range_is_refused_by_name(service, db):
    """`limit` 0 or past a PostgreSQL integer: 422 naming it (the second was a 503, "integer
    out of range", a server fault for a caller's value)."""
    edge = db.execute("SELECT id FROM hag_edges ORDER BY id LIMIT 1").fetchone()["id"]
    for limit in (0, 3_000_000_000):
        status, body = raw(service, "GET", f"/v1/edges/{edge}/explain?limit={limit}")
        assert (status, body["field"]) == (422, "limit"), body
        assert body["detail"] == "limit: must be 1 to 2147483647"
    assert raw(service, "GET", f"/v1/edges/{edge}/explain?limit=2")[0] == 200


def test_a_prerequisite_is_explained_with_its_terms_under_the_units_rule(client, db):
    """Under the evidence profile a learned prerequisite's explanation carries the units
    rule's terms, their result equal to the stored confidence (as `hag explain` prints);
    another edge type carries none."""
    from hag import settings
    from tests.session_builders import run
    from tests.test_evidence_session import struggle

    settings.apply_profile(db, "evidence", by="test")
    db.commit()
    settings.invalidate()
    for n in range(4):
        failed = turn(0, outcome="failure", struggles=[struggle("caesar-cipher", "xor")])
        run(db, payload(f"svc-terms-{n}", [failed], learner=f"learner-{n}", day=n))
    edge = db.execute(
        "SELECT id, confidence FROM hag_edges WHERE edge_type = 'prerequisite'"
        " AND source_type = 'learned' ORDER BY created_at LIMIT 1"
    ).fetchone()
    assert edge is not None
    explained = client.explain_edge(str(edge["id"]))
    assert explained.terms is not None
    assert explained.terms["learners"] == 4
    assert abs(explained.terms["confidence"] - edge["confidence"]) <= 1e-9
    other = db.execute(
        "SELECT id FROM hag_edges WHERE edge_type <> 'prerequisite' LIMIT 1"
    ).fetchone()
    assert client.explain_edge(str(other["id"])).terms is None


def test_a_removed_edge_is_explained_from_its_audit_row(client, db):
    """A deleted edge keeps its type and ends, no confidence, and its removal as an event."""
    edge = db.execute("SELECT id, edge_type FROM hag_edges ORDER BY id LIMIT 1").fetchone()
    db.execute("DELETE FROM hag_edges WHERE id = %s", (edge["id"],))
    db.commit()
    explained = client.explain_edge(str(edge["id"]))
    assert (explained.culled, explained.confidence) == (True, None)
    assert explained.edge_type == edge["edge_type"]
    assert explained.events[-1].reason.startswith("removed (manual delete)")


def test_an_oversized_session_is_refused_by_its_size_and_quarantined(client, db, dials):
    """A body past session_max_payload_bytes: 422 naming the size; its digest quarantined."""
    dials(session_max_payload_bytes=1024)
    big = payload("svc-big", [turn(0, message="x" * 2000)])
    with pytest.raises(ServiceValidationError, match="1024") as caught:
        client.submit_session(big)
    assert caught.value.status == 422
    row = db.execute("SELECT raw_bytes FROM hag_session_quarantine").fetchone()
    assert row["raw_bytes"] > 1024


def test_a_service_that_is_not_there_is_unavailable():
    """A refused connection raises ServiceUnavailable (a HagError), not an OSError."""
    address = f"http://127.0.0.1:{free_port()}"
    with (
        HagClient(address, TOKEN, timeout=5) as nobody,
        pytest.raises(ServiceUnavailable, match="did not answer"),
    ):
        nobody.health()


def test_health_reports_a_migrated_database_and_the_memorys_embedder(client):
    """A migrated test database with the recorded embedder is healthy."""
    report = client.health()
    assert (report.ok, report.database, report.migrated, report.embedder) == (
        True,
        True,
        True,
        True,
    )


def test_every_request_needs_the_bearer_token(service):
    """No token or a wrong one: 401 with a WWW-Authenticate challenge; health included."""
    assert raw(service, "GET", "/v1/health", token="wrong")[0] == 401
    request = urllib.request.Request(service.url + "/v1/health")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=30)
    with caught.value as refused_plain:
        assert refused_plain.code == 401
        assert refused_plain.headers["WWW-Authenticate"] == "Bearer"
    with HagClient(service.url, "wrong") as wrong, pytest.raises(ServiceError) as refused:
        wrong.health()
    assert refused.value.status == 401


# Malformed bodies and what the refusal must name.
MALFORMED: list[tuple[str, bytes, str]] = [
    ("/v1/retrieve", b"{", "json"),
    ("/v1/retrieve", b"[]", "object"),
    ("/v1/retrieve", b'{"learner_id": "ada", "message": "hi"}', "topic_id"),
    ("/v1/retrieve", b'{"topic_id": 7, "learner_id": "ada", "message": "hi"}', "topic_id"),
    (
        "/v1/retrieve",
        b'{"topic_id": "cryptography", "learner_id": "ada", "message": "hi", "k": 1}',
        "k",
    ),
    (
        "/v1/retrieve",
        b'{"topic_id": "cryptography", "learner_id": "ada", "message": "hi", '
        b'"recent_concepts": "rsa"}',
        "recent_concepts",
    ),
    ("/v1/retrieve", b'{"topic_id": "Bad Topic!", "learner_id": "ada", "message": "hi"}', "topic"),
    (
        "/v1/retrieve",
        b'{"topic_id": "cryptography", "learner_id": "ada", "message": " "}',
        "message",
    ),
    (
        "/v1/retrieve",
        b'{"topic_id": "cryptography", "learner_id": "ada", "message": "key \\ud800 secret"}',
        "message",
    ),
    (
        "/v1/retrieve",
        b'{"topic_id": "cryptography", "learner_id": "ada", "message": "hi", "focus": "\\udfff"}',
        "focus",
    ),
    ("/v1/sessions", b"{", "json"),
    ("/v1/sessions", b'"just a string"', "payload"),
    ("/v1/sessions", b'{"session_id": "x"}', "learner_id"),
    ("/v1/sessions", b"\xff\xfe", "UTF-8"),
]


@pytest.mark.parametrize(("path", "body", "named"), MALFORMED)
def test_a_malformed_body_is_a_4xx_naming_what_is_wrong(service, path, body, named):
    """Never a 500: a 4xx whose one-line detail names the field or the problem."""
    status, answer = raw(service, "POST", path, body)
    assert 400 <= status < 500, (status, answer)
    assert named.lower() in answer["detail"].lower(), answer
    assert "\n" not in answer["detail"]


def test_a_database_that_does_not_answer_is_a_503_in_one_line(service, monkeypatch):
    """The database gone: 503 with one line naming no driver type; health says so too."""
    from hag import config
    from hag.storage import db
    from tests.fix_db import unreachable_url

    monkeypatch.setenv("DATABASE_URL", unreachable_url())
    config.reset_config()
    db.close_all()
    retrieval.clear_caches()
    try:
        status, answer = raw(
            service,
            "POST",
            "/v1/retrieve",
            b'{"topic_id": "cryptography", "learner_id": "ada", "message": "hi"}',
        )
        health_status, health = raw(service, "GET", "/v1/health")
    finally:
        monkeypatch.undo()
        config.reset_config()
        db.close_all()
    assert status == 503, answer
    assert answer == {"detail": "the database is unavailable; try again later"}
    assert health_status == 503 and health["database"] is False and not health["ok"]
    assert "psycopg" not in json.dumps([answer, health]).lower()


def test_a_database_away_is_a_503_on_a_connection_kept_open(service, monkeypatch):
    """A session sent while the database is away: 503 in one line, no traceback in the
    service's log, and the client's kept-alive connection answers its next request (a
    handler that raised again after answering had the server close it)."""
    import http.client
    import logging

    from hag import config, settings
    from hag.storage import db
    from tests.fix_db import unreachable_url

    logged: list[logging.LogRecord] = []
    catch = logging.Handler(logging.ERROR)
    catch.emit = logged.append  # type: ignore[method-assign]
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "hag.service")]
    for logger in loggers:
        logger.addHandler(catch)
    monkeypatch.setenv("DATABASE_URL", unreachable_url())
    config.reset_config()
    db.close_all()
    settings.invalidate()
    connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=30)
    answers = []
    try:
        connection.connect()
        first = connection.sock
        for _ in range(2):
            connection.request(
                "POST",
                "/v1/sessions",
                body=b"{}",
                headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            )
            response = connection.getresponse()
            answers.append((response.status, json.loads(response.read())))
        kept = connection.sock is first
    finally:
        connection.close()
        for logger in loggers:
            logger.removeHandler(catch)
        monkeypatch.undo()
        config.reset_config()
        db.close_all()
        settings.invalidate()
    unavailable = (503, {"detail": "the database is unavailable; try again later"})
    assert answers == [unavailable, unavailable] and kept
    assert [r.getMessage() for r in logged] == []


def test_the_thread_pool_is_sized_by_its_dial(db, dials):
    """service_threads sizes the running service's thread limiter and its retrieve pool."""
    dials(service_threads=3)
    with Running() as running:
        assert running.app.state.threads == 3
        assert running.app.state.retrieve_pool._max_workers == 3


def test_the_switch_interval_is_set_by_its_dial_and_put_back(db, dials):
    """service_switch_interval_ms is the running service's interpreter switch interval;
    at shutdown the process's own interval is back."""
    before = sys.getswitchinterval()
    dials(service_switch_interval_ms=2.5)
    with Running():
        assert sys.getswitchinterval() == pytest.approx(0.0025)
    assert sys.getswitchinterval() == before


def test_the_published_openapi_schema_is_current():
    """docs/openapi.json is what `python -m hag.service.openapi` prints now."""
    from hag.service.openapi import schema_text

    published = (PROJECT_ROOT / "docs/openapi.json").read_text()
    assert published == schema_text(), (
        "regenerate: python -m hag.service.openapi > docs/openapi.json"
    )


def test_the_core_client_imports_no_web_framework():
    """hag.service.client and hag.retrieval load without fastapi, starlette or uvicorn."""
    code = (
        "import sys, hag.service.client, hag.retrieval; "
        "print(sorted(m for m in ('fastapi', 'starlette', 'uvicorn', 'httpx') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=60
    )
    assert done.stdout.strip() == "[]", done.stderr


def test_hag_service_stops_on_sigterm_leaving_no_connection(service, database_url, db):
    """`hag service` says its embedder, answers, then SIGTERM: exit 0 within seconds, no
    session of it left."""
    port, tag = free_port(), "hag-svc-" + uuid.uuid4().hex[:12]
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "HAG_SERVICE_TOKEN": TOKEN,
        "PGAPPNAME": tag,
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "hag.cli", "service", "--port", str(port)],
        env=env,
        cwd=PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    stack = ExitStack()
    try:
        client = HagClient(f"http://127.0.0.1:{port}", TOKEN, timeout=30)
        stack.callback(client.close)
        deadline = time.monotonic() + 90
        while True:
            try:
                assert client.retrieve("cryptography", "ada", MESSAGE).text
                break
            except ServiceError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"it never answered: {proc.stderr.read() if proc.stderr else ''}")
                time.sleep(0.2)
        sessions = "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = %s"
        assert db.execute(sessions, (tag,)).fetchone()["n"] > 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0, proc.stderr.read() if proc.stderr else ""
        said = proc.stderr.read().decode() if proc.stderr else ""
        assert "embedder: " in said, said  # which embedder it serves with (offline: says so)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        stack.close()
    db.rollback()
    assert db.execute(sessions, (tag,)).fetchone()["n"] == 0


def test_only_the_service_imports_the_web_stack():
    """fastapi, starlette and uvicorn are imported under hag/service and `hag service` only."""
    import ast

    web = {"fastapi", "starlette", "uvicorn"}
    allowed = {PROJECT_ROOT / "hag/cli/service_cmd.py"}
    offenders = []
    for path in sorted((PROJECT_ROOT / "hag").rglob("*.py")):
        if path in allowed or (PROJECT_ROOT / "hag/service") in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in web]
    assert offenders == []


def test_a_degraded_turn_says_so_over_http(demo_memory, private_db, openai_stub, monkeypatch):
    """The embedding endpoint refusing: 200 from the concept pass, `degraded` naming why."""
    from hag import settings
    from tests.fix_embedder import use_stub

    settings.set_value(private_db, "embedding_retries", 0, by="test")
    private_db.commit()
    settings.invalidate()
    for _ in range(3):
        openai_stub.queue_embedding_error(503)
    use_stub(monkeypatch, openai_stub.base_url)
    retrieval.clear_caches()
    with Running() as running, HagClient(running.url, TOKEN) as client:
        result = client.retrieve(
            "cryptography", "ada", "how does rsa work", recent_concepts=[demo_memory[:3]]
        )
    assert result.degraded.startswith("embedder unavailable") and "503" in result.degraded
    assert result.topic_advisories and [p.name for p in result.passes] == [
        "topic-concept",
        "edge-walk",
    ]


def test_an_ingest_takes_one_writer_connection_when_the_dials_expired(db, monkeypatch):
    """The service's ingest holds one connection of the writers' pool; reading the dials
    once their cache expired takes another of the same pool. Read while holding the first,
    a burst as large as the pool waited on itself until the pool's timeout: here a pool of
    one connection makes one ingest such a burst."""
    from hag import settings
    from hag.service import app
    from hag.storage import db as hdb
    from tests import factories as f

    f.topic(db, "cryptography")
    db.commit()
    hdb.close_all()
    monkeypatch.setattr(hdb, "WRITE_CONNECTIONS", 1)
    try:
        hdb.pool().timeout = 5.0
        settings.invalidate()  # the cache has just expired
        state = app._ingest(payload("pool-once", [turn(0, message="hi")]))
        assert (state.session_id, state.state) == ("pool-once", "pending")
    finally:
        hdb.close_all()
