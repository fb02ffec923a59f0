"""The HTTP service: the memory behind a bearer token, for tutors in any language.

`create_app()` builds the FastAPI application (hag/service/app.py); `hag service` runs it
with uvicorn in one process, so every client shares that process's pools, caches and
resident sets. FastAPI is imported here only: the core (hag/retrieval, hag/client.py)
never needs it. docs/service.md describes the endpoints; docs/openapi.json is their schema
(`python -m hag.service.openapi`).
"""

from hag.service.app import create_app

__all__ = ["create_app"]
