"""HAG memory: the long-term, learning memory of an AI tutor (PostgreSQL + pgvector)."""

from pathlib import Path

__version__ = "0.1.0"

#: The repository root: where `sql/`, `expectations/` and the embedded database folder live.
PROJECT_ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = PROJECT_ROOT / "sql"
