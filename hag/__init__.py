"""HAG memory: the long-term, learning memory of an AI tutor (PostgreSQL + pgvector).

The public API is `hag.Memory` and the names in `__all__` (hag/api.py, docs/api.md). They
load on first use, so `import hag` stays light.
"""

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hag.api import (
        Advisory,
        ConfigError,
        DatabaseError,
        DatabaseUnavailable,
        EdgeExplanation,
        EmbedderError,
        EmbedderMismatch,
        EmbedderUnavailable,
        HagError,
        HistoryEvent,
        IngestResult,
        Memory,
        MissingExtra,
        NightlyResult,
        NightlySummary,
        NotFoundError,
        ProcessSummary,
        RenderedEdge,
        RetrievalResult,
        ValidationError,
    )

# The public names, as docs/api.md lists them (tests/test_api.py holds the three together).
__all__ = [
    "Memory",
    "RetrievalResult",
    "Advisory",
    "RenderedEdge",
    "IngestResult",
    "ProcessSummary",
    "EdgeExplanation",
    "HistoryEvent",
    "NightlyResult",
    "NightlySummary",
    "HagError",
    "ConfigError",
    "ValidationError",
    "NotFoundError",
    "DatabaseError",
    "DatabaseUnavailable",
    "EmbedderError",
    "EmbedderUnavailable",
    "EmbedderMismatch",
    "MissingExtra",
]

__version__ = "0.1.0"

_PACKAGE = Path(__file__).resolve().parent

#: The checkout's root (README, prefect.yaml, flows/, tests/). Only a checkout has one: in an
#: installed wheel this names site-packages, so the library never reads its data from here.
PROJECT_ROOT = _PACKAGE.parent


def _data(installed: str, checkout: str) -> Path:
    """One of the library's data folders: inside the package when installed from the wheel
    (pyproject's force-include puts it there), else where the checkout keeps it."""
    inside = _PACKAGE / installed
    return inside if inside.is_dir() else PROJECT_ROOT / checkout


#: Migrations, SQL functions and named queries (`sql/` in a checkout, `hag/_sql` in the wheel).
SQL_DIR = _data("_sql", "sql")
#: The data-quality suites as JSON (`expectations/suites/` in a checkout, `hag/_suites`).
SUITES_DIR = _data("_suites", "expectations/suites")
#: The documentation (`docs/` in a checkout, `hag/_docs` in the wheel; `python -m hag.docs`).
DOCS_DIR = _data("_docs", "docs")
#: The demo corpus, a reviewed data file that lives inside the package in both cases.
DEMO_CORPUS = _PACKAGE / "data" / "demo_corpus.json"


def checkout() -> Path | None:
    """The root of the checkout this package runs from, or None for an installed wheel."""
    return PROJECT_ROOT if (PROJECT_ROOT / "pyproject.toml").is_file() else None


def work_dir() -> Path:
    """Where writable state goes by default (`.hag/`, `reports/`): the checkout's root when
    the package runs from one, else the current directory."""
    return checkout() or Path.cwd()


def __getattr__(name: str) -> Any:
    """The public API's names, imported from hag.api on first use."""
    if name in __all__:
        from hag import api

        return getattr(api, name)
    raise AttributeError(f"module 'hag' has no attribute {name!r}")
