"""The project's exceptions: every one carries a one-line reason fit for an operator."""

from __future__ import annotations


class HagError(Exception):
    """Base class: the CLI prints the message on one line and exits non-zero."""


class ConfigError(HagError):
    """Process configuration (DSN, provider keys, dimensions) is missing or inconsistent."""


class MigrationError(HagError):
    """The migration ledger disagrees with the files on disk, or a migration failed."""


class SettingsError(HagError):
    """A dial is unknown, or a value has the wrong type or is out of range."""


class CorpusError(HagError):
    """A corpus file breaks the contract; nothing from it was written."""


class ValidationError(HagError):
    """A payload breaks the contract; the message names the field (and the turn)."""


class PartlyFailed(HagError):
    """A job that did its work but not all of it (orphans that failed, edges refused): its
    flow run ends Failed with this after publishing its report, and `summary` is the job's
    summary, which a command that ran the flow prints as it prints the direct job's."""

    def __init__(self, reason: str, summary: dict[str, object]):
        super().__init__(reason)
        self.summary = summary

    def __reduce__(self) -> tuple[type[PartlyFailed], tuple[str, dict[str, object]]]:
        return type(self), (str(self), self.summary)  # a run's result may be pickled


class NotFoundError(HagError):
    """A named thing (entry, edge, run, topic) does not exist."""


class FolderError(HagError):
    """A folder hag would write or clear holds files it did not make; nothing was touched."""


class EmbedderError(HagError):
    """An embedding could not be made, or is not fit to store or search with."""


class EmbedderUnavailable(EmbedderError):
    """The embedding endpoint failed, refused or did not answer in time."""


class EmbedderRefused(EmbedderError):
    """The embedding endpoint refused one text (longer than its model takes, say) while it
    embeds others: `index` is the text's place. A session is kept failed, not rejected (its
    payload keeps the contract; the fix is the `embed_max_chars` dial or the model), to be
    retried once the cause is fixed."""

    def __init__(self, reason: str, index: int = 0):
        super().__init__(reason)
        self.index = index

    def __reduce__(self) -> tuple[type[EmbedderRefused], tuple[str, int]]:
        return type(self), (str(self), self.index)


class EmbedderMismatch(EmbedderError):
    """The configured embedder is not the one the memory's vectors were made with."""


class MissingExtra(HagError):
    """A feature needs an optional part of the install (an extra) that is not installed."""


class DatabaseError(HagError):
    """The database refused or failed a statement (the public API's wrap of psycopg's errors)."""


class DatabaseUnavailable(DatabaseError):
    """The database could not be reached: no connection, or the connection was lost."""
