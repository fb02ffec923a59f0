"""Process configuration: where the database (and its read replica) is, how to reach the models.

This is deliberately separate from the dials in `hag_settings` (see `hag.settings`):
these values say *where* things are, the dials say *how* the memory behaves.
Read lazily, once per process; `reset_config()` exists for tests.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from hag import work_dir


class ProcessConfig(BaseSettings):
    """Environment-driven configuration (prefix `HAG_`, plus the usual OpenAI names)."""

    model_config = SettingsConfigDict(env_prefix="HAG_", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "HAG_DATABASE_URL")
    )
    # The read path (`retrieve`) only: a hot standby of the memory database. Unset, it reads
    # the primary. Every write, and the dials, go to `database_url` whatever this says.
    read_database_url: str | None = None  # HAG_READ_DATABASE_URL
    # Default: `.hag` in the checkout, or in the current directory for an installed wheel.
    data_dir: Path = Field(default_factory=lambda: work_dir() / ".hag")
    # HAG_REQUIRE_DATABASE=1 (or `hag --require-database`): with DATABASE_URL unset, refuse
    # to start the embedded server instead of quietly using an empty memory (a worker, a
    # service). A flow run of a deployment refuses it whatever this says (flows/).
    require_database: bool = False

    embedding_provider: Literal["auto", "openai", "offline", "local"] = "auto"
    embedding_model: str = "text-embedding-3-small"
    # None = the provider's natural dimension (1536 for text-embedding-3-small and offline).
    embedding_dim: int | None = Field(default=None, ge=2, le=16000)

    llm_provider: Literal["auto", "openai", "offline"] = "auto"
    llm_model: str = "gpt-4o-mini"

    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("HAG_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("HAG_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    openai_timeout_seconds: float = Field(default=30.0, gt=0)
    openai_max_retries: int = Field(default=2, ge=0, le=10)

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"


@lru_cache(maxsize=1)
def get_config() -> ProcessConfig:
    return ProcessConfig()


def reset_config() -> None:
    """Forget the cached configuration (tests change the environment between cases)."""
    get_config.cache_clear()


def ensure_runtime_dir() -> None:
    """The embedded server keeps a lock in $XDG_RUNTIME_DIR; give it a private one if unset."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and Path(current).is_dir() and (Path(current).stat().st_mode & 0o077) == 0:
        return
    path = Path(f"/tmp/hag-runtime-{os.getuid()}")
    path.mkdir(mode=0o700, exist_ok=True)
    path.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(path)
