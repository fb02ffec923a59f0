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

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from hag import work_dir
from hag.errors import ConfigError


class ProcessConfig(BaseSettings):
    """Environment-driven configuration (prefix `HAG_`, plus the usual OpenAI names)."""

    # A variable set to nothing is unset (a compose file's `${VAR}` with VAR undefined): so a
    # blank HAG_OPENAI_API_KEY does not hide OPENAI_API_KEY, and a blank switch is its default.
    model_config = SettingsConfigDict(
        env_prefix="HAG_", extra="ignore", populate_by_name=True, env_ignore_empty=True
    )

    database_url: str | None = Field(
        default=None, validation_alias=AliasChoices("DATABASE_URL", "HAG_DATABASE_URL")
    )
    # The read path (`retrieve`) only: a hot standby of the memory database. Unset, it reads
    # the primary. Every write, and the dials, go to `database_url` whatever this says.
    read_database_url: str | None = None  # HAG_READ_DATABASE_URL
    # What stands between the project and PostgreSQL (HAG_DATABASE_POOLER). `transaction`: a
    # pooler in transaction mode (PgBouncer's pool_mode=transaction), which hands each
    # transaction to any server connection. Every connection then prepares no statements
    # (psycopg's prepare_threshold=None) and the read path keeps its settings per
    # transaction; nothing the project does relies on a session (docs/operations.md).
    # `none` (a direct connection) and `session` (a session-mode pooler) change nothing.
    database_pooler: Literal["none", "session", "transaction"] = "none"
    # The same database reached directly, not through the pooler (HAG_DIRECT_DATABASE_URL):
    # for the upkeep that needs a session of its own (the nightly's index builds and CLUSTER,
    # which take session settings around statements that cannot run in a transaction).
    # Unset, that upkeep uses DATABASE_URL, and behind a transaction-mode pooler is skipped.
    direct_database_url: str | None = None
    # A deployed flow run's database URL, when the Prefect server has a Secret block of this
    # name (tasks/runtime.py, docs/operations.md); else the worker's DATABASE_URL.
    database_secret_block: str = "hag-database-url"  # HAG_DATABASE_SECRET_BLOCK
    # How long a connection attempt may wait for the server (HAG_DATABASE_CONNECT_TIMEOUT_
    # SECONDS), unless DATABASE_URL or PGCONNECT_TIMEOUT say otherwise: a server that
    # accepts and never answers (a hung host, a full backlog) is then one line after this
    # long, not psycopg's 130 s. At least 2 (libpq's minimum).
    database_connect_timeout_seconds: int = Field(default=10, ge=2, le=3600)
    # TCP keepalive of every connection (HAG_DATABASE_KEEPALIVE_SECONDS): libpq's
    # keepalives_idle, with keepalives_interval a third of it and keepalives_count 3, and
    # tcp_user_timeout twice it for data sent and not acknowledged, so a server that
    # vanished without a reset (a failover that moved its address, a host gone) is noticed
    # within about twice this, waiting for an answer or sending a statement, where the OS's
    # defaults wait two hours before the first probe and about 15 minutes on a send. A live
    # server's kernel answers the probes and acknowledges however long a query runs. Unless
    # DATABASE_URL sets any of those parameters; 0 leaves the OS's; Unix sockets have none.
    database_keepalive_seconds: int = Field(default=30, ge=0, le=7200)
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

    # One OpenAI-compatible server for both, or each its own: HAG_EMBEDDING_BASE_URL /
    # HAG_EMBEDDING_API_KEY and HAG_LLM_BASE_URL / HAG_LLM_API_KEY (a server such as vLLM
    # serves one model, so embeddings and chat are often two). A server of its own takes its
    # own key only; without one, its own key or the shared one goes to the shared server
    # (`_endpoint`). A blank value is unset (a compose file's `${VAR}` with VAR undefined).
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("HAG_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("HAG_OPENAI_BASE_URL", "OPENAI_BASE_URL")
    )
    embedding_api_key: SecretStr | None = None
    embedding_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_base_url: str | None = None
    # Whether embedding requests carry `dimensions` (HAG_EMBEDDING_SEND_DIMENSIONS). Unset:
    # only when HAG_EMBEDDING_DIM shortens a model known to take it (text-embedding-3-*);
    # a server whose model has no shortened outputs refuses the field (vLLM, ada-002).
    embedding_send_dimensions: bool | None = None
    openai_timeout_seconds: float = Field(default=30.0, gt=0)
    openai_max_retries: int = Field(default=2, ge=0, le=10)

    # The HTTP service (`hag service`, docs/service.md): the bearer token every request must
    # carry (HAG_SERVICE_TOKEN; unset, the service refuses to start), and where it listens.
    service_token: SecretStr | None = None
    service_host: str = "127.0.0.1"  # HAG_SERVICE_HOST: loopback only unless told otherwise
    service_port: int = Field(default=8765, ge=1, le=65535)  # HAG_SERVICE_PORT

    @field_validator(
        "openai_api_key",
        "openai_base_url",
        "embedding_api_key",
        "embedding_base_url",
        "llm_api_key",
        "llm_base_url",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pgdata"

    def embedding_endpoint(self) -> tuple[SecretStr | None, str | None]:
        """The embedder's key and base URL, as a pair: its own server takes its own key only
        (the shared key, OpenAI's say, is never sent to another host); else its own key or
        the shared one, to the shared server."""
        return _endpoint("HAG_EMBEDDING", self.embedding_api_key, self.embedding_base_url, self)

    def llm_endpoint(self) -> tuple[SecretStr | None, str | None]:
        """The proposer's key and base URL, as a pair (as `embedding_endpoint`)."""
        return _endpoint("HAG_LLM", self.llm_api_key, self.llm_base_url, self)


def _endpoint(
    prefix: str, key: SecretStr | None, url: str | None, config: ProcessConfig
) -> tuple[SecretStr | None, str | None]:
    if url is not None:
        if key is None:
            raise ConfigError(
                f"{prefix}_BASE_URL is set: set {prefix}_API_KEY too (the shared key is not "
                "sent to another server; any text for a server that takes none)"
            )
        return key, url
    return key or config.openai_api_key, config.openai_base_url


def shown_url(url: str | None) -> str | None:
    """A base URL as it may be printed: without user, password or query (a token in it)."""
    if not url:
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host + (f":{port}" if port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


# What each constrained variable accepts, for the one line an invalid value gets.
_ALLOWED = {
    "embedding_dim": "an integer from 2 to 16000 (or unset: the model's own)",
    "embedding_provider": "one of auto, openai, offline, local",
    "llm_provider": "one of auto, openai, offline",
    "openai_timeout_seconds": "a number of seconds above 0",
    "database_connect_timeout_seconds": "a whole number of seconds from 2 to 3600",
    "database_keepalive_seconds": "a whole number of seconds from 0 to 7200",
    "openai_max_retries": "an integer from 0 to 10",
    "service_port": "a TCP port from 1 to 65535",
    "embedding_send_dimensions": "true or false (or unset: only to shorten a model known to)",
}


@lru_cache(maxsize=1)
def get_config() -> ProcessConfig:
    """The process configuration; an invalid environment value is one ConfigError line."""
    try:
        return ProcessConfig()
    except ValidationError as exc:
        raise ConfigError(_one_line(exc)) from None


def _one_line(exc: ValidationError) -> str:
    """`HAG_EMBEDDING_DIM='abc' is not valid: use an integer from 2 to 16000 ...`."""
    first = exc.errors()[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    info = ProcessConfig.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    names = alias.choices if isinstance(alias, AliasChoices) else [f"HAG_{field.upper()}"]
    variable = " / ".join(str(n) for n in names)
    allowed = _ALLOWED.get(field, first["msg"])
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{variable}={first.get('input')!r} is not valid: use {allowed}{more}"


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
