"""The HTTP service: the memory behind a bearer token, for tutors in any language.

`create_app()` builds the FastAPI application (hag/service/app.py); `hag service` runs it
with uvicorn in one process, so every client shares that process's pools, caches and
resident sets. FastAPI loads only when `create_app` is first asked for, so the core's
typed client and models (hag/service/client.py, hag/service/models.py) never need it.
docs/service.md describes the endpoints; docs/openapi.json is their schema
(`python -m hag.service.openapi`).
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hag.service.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """`create_app` loads FastAPI on first use, so the core's client and models (hag.service
    .client, hag.service.models) import without the service extra."""
    if name == "create_app":
        from hag.service.app import create_app

        return create_app
    raise AttributeError(f"module 'hag.service' has no attribute {name!r}")
