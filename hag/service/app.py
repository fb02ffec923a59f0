"""The FastAPI application: four endpoints under /v1, a bearer token, one-line errors.

Every endpoint that touches the database is a plain `def` (or hands its work to
`run_in_threadpool`), so concurrent requests run in the thread pool, whose size is the
`service_threads` dial, while the event loop only moves bytes; a retrieve is answered in
front of all this, on a pool of its own of the same size (hag/service/fast.py). Errors are
one line in an `ErrorBody`: the request's own shape 422 (the field named), the library's
refusals 400/404/409, a database or embedder the process cannot use 503; no exception type
or driver text of psycopg or openai reaches a client.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from functools import partial
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from hag import settings
from hag.errors import (
    ConfigError,
    EmbedderError,
    HagError,
    NotFoundError,
    SettingsError,
    ValidationError,
)
from hag.service.fast import RetrieveFastPath, Turns, answer
from hag.service.models import (
    API_PREFIX,
    EdgeExplanation,
    ErrorBody,
    Health,
    RetrieveRequest,
    RetrieveResult,
    SessionState,
)
from hag.storage import db
from hag.storage.schema import PG_INT_MAX

log = logging.getLogger("hag.service")

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in (
        (400, "The library refused a value (the message names it)."),
        (401, "No bearer token, or not the service's."),
        (404, "The topic, edge or id does not exist."),
        (409, "The request conflicts with what the memory holds."),
        (422, "The request's shape is wrong (the field is named)."),
        (503, "The database (or the embedder's record) cannot be used right now."),
    )
}


# The `Authorization: Bearer ...` header, read without refusing (the check answers 401).
Credentials = Annotated[
    HTTPAuthorizationCredentials | None,
    Depends(HTTPBearer(auto_error=False, description="HAG_SERVICE_TOKEN")),
]


class Refused(Exception):
    """A refusal with its status code, raised inside an endpoint."""

    def __init__(self, status: int, body: ErrorBody):
        super().__init__(body.detail)
        self.status, self.body = status, body


def create_app(token: str) -> FastAPI:
    """The application, answering only requests that carry `Authorization: Bearer <token>`."""
    if not token:
        raise ConfigError("the service needs a bearer token: set HAG_SERVICE_TOKEN")
    expected = token.encode()

    def authorised(creds: Credentials) -> None:
        given = creds.credentials.encode() if creds is not None else b""
        if creds is None or not hmac.compare_digest(given, expected):
            raise _unauthorised()

    app = Service(
        title="HAG memory service",
        version="1",
        summary="An AI tutor's long-term memory over HTTP (docs/service.md).",
        lifespan=_lifespan,
        dependencies=[Depends(authorised)],
        responses=_ERRORS,
    )
    _handlers(app)
    _routes(app)
    app.fast_path = RetrieveFastPath(
        partial(FastAPI.__call__, app),
        token=token,
        pool=lambda: app.state.retrieve_pool,
        gate=lambda: app.state.retrieve_gate,
        reply_for=_error_reply,
        refused=lambda: _error_reply(_unauthorised()),
    )
    return app


def _unauthorised() -> Refused:
    return Refused(401, ErrorBody(detail="a valid bearer token is required"))


class Service(FastAPI):
    """The FastAPI application with the retrieve endpoint's own path in front of it.

    A retrieve, every turn of every tutor, skips FastAPI's middleware, dependencies and
    response machinery (hag/service/fast.py); whatever that path would refuse, and every
    other request, reaches the routes and handlers of this application.
    """

    fast_path: RetrieveFastPath

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.fast_path(scope, receive, send)


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Size the thread pools and set the interpreter's switch interval from the dials; at
    shutdown close them and the database pools (nothing left open) and put the interval
    back."""
    dials = await run_in_threadpool(settings.current)
    threads = dials.service_threads
    # A connection's thread that has read a request waits for the interpreter behind a
    # running retrieve for up to the switch interval (5 ms by default), a wait the same
    # retrieve in the tutor's process mostly does not pay (docs/service.md).
    interval = sys.getswitchinterval()
    sys.setswitchinterval(dials.service_switch_interval_ms / 1000)
    anyio.to_thread.current_default_thread_limiter().total_tokens = threads
    app.state.threads = threads
    app.state.retrieve_pool = ThreadPoolExecutor(threads, thread_name_prefix="hag-service")
    # The retrieves a connection's own thread runs (hag/service/wire.py): as many at once.
    app.state.retrieve_gate = Turns(threads)
    try:
        yield
    finally:
        app.state.retrieve_pool.shutdown(wait=True)
        await run_in_threadpool(db.close_all)
        sys.setswitchinterval(interval)


def _routes(app: FastAPI) -> None:
    @app.post(f"{API_PREFIX}/retrieve", response_model=RetrieveResult, tags=["memory"])
    def retrieve(body: RetrieveRequest) -> Any:
        """The memory for one turn: ranked advisories, edge trees and the prompt text."""
        # The retrieve's own path (hag/service/fast.py) answers every request this route
        # would; the route is its schema, and what it answers with is the same call.
        payload, headers = answer(body)
        return Response(payload, media_type="application/json", headers=headers)

    @app.post(
        f"{API_PREFIX}/sessions",
        response_model=SessionState,
        tags=["sessions"],
        openapi_extra={"requestBody": _SESSION_BODY},
    )
    async def submit_session(request: Request) -> Any:
        """Queue one session payload (the contract of `hag ingest`), or say where it stands.

        A payload that breaks the contract is quarantined, as `hag ingest` does, and
        answered 422 with the field and turn; the same session id with another payload 409.
        """
        limit = await run_in_threadpool(lambda: settings.current().session_max_payload_bytes)
        raw = await _read_body(request, limit)
        return await run_in_threadpool(_ingest, raw)

    @app.get(
        f"{API_PREFIX}/edges/{{edge_id}}/explain", response_model=EdgeExplanation, tags=["memory"]
    )
    def explain_edge(edge_id: str, limit: int | None = None) -> Any:
        """An edge's confidence and its newest events (id whole, a unique prefix or ending).

        `limit`: events shown, the newest (default: the history_default_limit dial).
        """
        if limit is not None and not 1 <= limit <= PG_INT_MAX:
            raise Refused(422, ErrorBody(detail=f"limit: must be 1 to {PG_INT_MAX}", field="limit"))
        return _explain(edge_id, limit)

    @app.get(
        f"{API_PREFIX}/health",
        response_model=Health,
        tags=["operations"],
        responses={503: {"model": Health, "description": "Not fit to serve (see detail)."}},
    )
    def health() -> Any:
        """The database answers, is migrated, and the configured embedder is the memory's."""
        report = _health()
        return JSONResponse(report.model_dump(mode="json"), status_code=200 if report.ok else 503)


_SESSION_BODY: dict[str, Any] = {
    "required": True,
    "description": "One session payload: docs/session-contract.schema.json.",
    "content": {"application/json": {"schema": {"type": "object"}}},
}


async def _read_body(request: Request, limit: int) -> Any:
    """The body as bytes, or an `Oversize` digest past `limit` bytes (quarantined as such)."""
    from hag.session.ingest import Oversize

    digest, kept, size = hashlib.sha256(), bytearray(), 0
    async for chunk in request.stream():
        digest.update(chunk)
        size += len(chunk)
        if len(kept) <= limit:
            kept += chunk[: limit + 1 - len(kept)]
    if size > limit:
        return Oversize(bytes(kept[: 1 << 20]), size, digest.hexdigest())
    return bytes(kept)


def _ingest(raw: Any) -> SessionState:
    from hag.session.ingest import ingest_payload

    # the dials before the connection: reading them takes a connection of the same pool when
    # the cache has expired, and a burst of ingests each holding one would wait on each other
    dials = settings.current()
    with db.pool().connection() as conn:  # the writers' pool bounds the service's writers
        result = ingest_payload(conn, raw, source="service", dials=dials)
        conn.commit()  # a refusal is kept in the quarantine, as `hag ingest` keeps it
    if result.quarantined:
        body = ErrorBody(
            detail=str(result.reason), field=result.field, turn_index=result.turn_index
        )
        conflict = result.field == "session_id" and "already received" in str(result.reason)
        raise Refused(409 if conflict else 422, body)
    return SessionState(
        status=result.status,  # type: ignore[arg-type]
        session_id=str(result.session_id),
        state=result.state or "pending",
    )


def _explain(text: str, limit: int | None) -> EdgeExplanation:
    from hag.evidence.explain import edge_terms, reweigh_pending
    from hag.storage.history import explain_edge

    with db.pool().connection() as conn:
        dials = settings.load(conn)
        shown = limit or dials.history_default_limit
        key, edge, events = explain_edge(conn, text, shown)
        terms = edge_terms(conn, key, edge, dials)
        pending = reweigh_pending(conn, edge, terms)
    return EdgeExplanation(
        edge_id=key,
        edge_type=edge["edge_type"],
        source_entry_id=edge["source_entry_id"],
        target_entry_id=edge["target_entry_id"],
        confidence=edge["confidence"],
        culled=edge["culled"],
        total_events=events[0]["total"] if events else 0,
        events=events,  # type: ignore[arg-type]
        terms=terms,
        reweigh_pending=pending,
    )


def _health() -> Health:
    from hag.storage import migrate
    from hag.vectors import embedder_identity
    from hag.vectors.embeddings import get_embedder

    database = migrated = matches = False
    detail = ""
    try:
        with db.connect() as conn:
            conn.execute("SELECT 1")
            database = True
            migrated = migrate.is_current(conn)
            if not migrated:
                detail = "the database is not migrated to this code: run `hag migrate`"
            else:
                embedder_identity.check(conn, get_embedder())
                matches = True
    except EmbedderError as exc:
        detail = str(exc)
    except HagError as exc:
        detail = str(exc)
    except Exception as exc:
        detail = _database_line(exc)
        if not detail:
            raise
    return Health(
        ok=database and migrated and matches,
        database=database,
        migrated=migrated,
        embedder=matches,
        detail=detail,
    )


def _database_line(exc: BaseException) -> str:
    """One line for an error of the database driver or its pool, without its type; "" for
    anything else."""
    import sys

    psycopg = sys.modules.get("psycopg")
    if psycopg is None or not isinstance(exc, psycopg.Error):
        return ""
    if isinstance(exc, psycopg.OperationalError):
        return "the database is unavailable; try again later"
    lines = str(exc).strip().splitlines()
    return "the database refused the request" + (f": {lines[0]}" if lines else "")


# The library's own refusals: which status each gets.
_STATUS: tuple[tuple[type[HagError], int], ...] = (
    (NotFoundError, 404),
    (ValidationError, 400),
    (EmbedderError, 503),
    (ConfigError, 503),
    (SettingsError, 503),
    (HagError, 400),
)


def _error(exc: BaseException) -> tuple[int, ErrorBody, dict[str, str]]:
    """The status, one-line body and headers the service answers an exception with."""
    if isinstance(exc, Refused):
        return exc.status, exc.body, {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
    if isinstance(exc, HagError):
        status = next(code for kind, code in _STATUS if isinstance(exc, kind))
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return status, ErrorBody(detail=detail), {}
    line = _database_line(exc)
    if line:
        return 503, ErrorBody(detail=line), {}
    if type(exc).__name__ == "ClientDisconnect":  # Starlette's: nobody reads this answer
        return 400, ErrorBody(detail="the client closed the connection before its body ended"), {}
    log.error("unforeseen error", exc_info=exc)
    return 500, ErrorBody(detail="internal error (logged by the service)"), {}


def _error_reply(exc: BaseException) -> tuple[int, bytes, dict[str, str]]:
    """`_error` as the bytes of its JSON body (the retrieve path's form)."""
    status, body, headers = _error(exc)
    return status, body.model_dump_json(exclude_none=True).encode(), headers


def _handlers(app: FastAPI) -> None:
    def reply(status: int, body: ErrorBody, headers: dict[str, str]) -> JSONResponse:
        return JSONResponse(body.model_dump(mode="json", exclude_none=True), status, headers)

    @app.exception_handler(RequestValidationError)
    async def malformed(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "the request is malformed"}
        loc = [p for p in first.get("loc", ()) if p not in ("body", "query", "path")]
        # The library's spelling of a path (hag/session/ingest.py): `turns[0].outcome`.
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        field = path or None
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        message = str(first.get("msg", "invalid")).splitlines()[0]
        detail = f"{field}: {message}{more}" if field else f"{message}{more}"
        return reply(422, ErrorBody(detail=detail, field=field), {})

    import psycopg
    from starlette.requests import ClientDisconnect

    # Every exception the service expects is named here: Starlette answers those in its
    # ExceptionMiddleware and the connection stays open. A handler of `Exception` alone runs
    # in ServerErrorMiddleware, which raises the exception again after answering: uvicorn
    # then logs a traceback and closes the client's kept-alive connection, right for a
    # defect only, not for a database that is away or a client that went.
    @app.exception_handler(Refused)
    @app.exception_handler(HagError)
    @app.exception_handler(psycopg.Error)
    @app.exception_handler(ClientDisconnect)
    @app.exception_handler(Exception)
    async def refused(request: Request, exc: Exception) -> JSONResponse:
        return reply(*_error(exc))
