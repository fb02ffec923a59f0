"""Defer or leave out the modules Great Expectations loads but these suites never call.

`import great_expectations` imports every expectation it ships, and one of them (the KL
divergence check) pulls in `scipy.stats` and `altair` at module level; a metric pulls in
`jsonschema`. Together they were about a third of GX's import time (docs/expectations.md).
None of them runs for the expectations in `suites/`, so until something reads an attribute
of one of them, the name is bound to an empty placeholder module; the first attribute read
imports the real module and the placeholder takes on its contents.

The standard library's `importlib.util.LazyLoader` is the usual tool, but a plain `import
altair` statement reads the module's `__spec__`, which makes it load at once; hence a finder
of our own. A module that is already imported is left alone.

GX also imports a fluent datasource for every engine it supports (Spark, pandas readers,
Snowflake, SQLite, ...), building pydantic models for each at import: about a quarter of its
import time (docs/expectations.md). The suites read PostgreSQL through GX's SQL datasource
only, so those modules are left out (`stand_in`): each name one of them would define is a
stand-in class that raises when used. GX registers a datasource type when its class is
defined, so the left-out types are simply not offered (`context.data_sources.add_spark` is
missing); what the suites use is the same. The modules GX needs while it imports are release
specific, and GX cannot be imported twice in one process (pydantic refuses its validators the
second time), so the stand-ins are used only with the GX release they were verified against
(`VERIFIED_WITH`, a test holds it to the locked one); any other release loads in full.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

#: What GX imports at start-up and the suites here never use.
UNUSED_BY_SUITES = ("scipy.stats", "altair", "jsonschema")

#: The GX release the stand-ins were verified against (tests/test_expectations.py).
VERIFIED_WITH = "1.24.1"
_FLUENT = "great_expectations.datasource.fluent"
#: The fluent datasource modules the suites' PostgreSQL datasource is built from.
_FLUENT_USED = frozenset({"postgres_datasource", "sql_datasource", "invalid_datasource"})

_lock = threading.RLock()  # resolving one may resolve another (altair imports jsonschema)


class _NamedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder that answers for a set of module names with modules of its own making."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = set(names)

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object, filled by exec_module


class _Placeholders(_NamedFinder):
    """Answers for the deferred names with placeholder modules."""

    def exec_module(self, module: ModuleType) -> None:
        module.__getattr__ = partial(self._resolve, module)  # type: ignore[method-assign]

    def _resolve(self, placeholder: ModuleType, attr: str) -> Any:
        # Dunder probes (`__file__`, ...) by tools that walk sys.modules must not set off the
        # import they are looking past; `__path__` is read to import a submodule (Prefect
        # imports `jsonschema.exceptions`), which is a real use.
        if attr.startswith("__") and attr.endswith("__") and attr != "__path__":
            raise AttributeError(attr)
        name = placeholder.__name__
        with _lock:
            if sys.modules.get(name) is placeholder:
                self.names.discard(name)
                del sys.modules[name]
                real = importlib.import_module(name)
                del placeholder.__dict__["__getattr__"]
                placeholder.__dict__.update(real.__dict__)
            else:
                real = sys.modules[name]
        return getattr(real, attr)


def defer(names: Iterable[str] = UNUSED_BY_SUITES) -> None:
    """Bind each name not yet imported to a placeholder that imports it on first use."""
    with _lock:
        if any(isinstance(f, _Placeholders) for f in sys.meta_path):
            return
        pending = [n for n in names if n not in sys.modules]
        if pending:
            sys.meta_path.insert(0, _Placeholders(pending))


def _gx_folder(*parts: str) -> Path | None:
    """A folder of the installed GX package, found without importing it."""
    spec = importlib.util.find_spec("great_expectations")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).joinpath(*parts)


def unused_expectation_modules(used: Iterable[str]) -> list[str]:
    """GX's own expectation modules (one per expectation type, named after it) for every
    type not in `used`: the types the suites name."""
    folder = _gx_folder("expectations", "core")
    if folder is None:
        return []
    wanted = set(used)
    return [
        f"great_expectations.expectations.core.{p.stem}"
        for p in sorted(folder.glob("expect_*.py"))
        if p.stem not in wanted
    ]


def unused_datasource_modules() -> list[str]:
    """GX's fluent datasource modules for engines other than PostgreSQL, found on disk
    without importing GX: every `*_datasource`, `pandas_*` and `spark_*` module, and
    `fabric`, except the ones the PostgreSQL datasource is built from."""
    folder = _gx_folder("datasource", "fluent")
    if folder is None:
        return []
    stems = sorted(p.stem for p in folder.glob("*.py"))
    return [
        f"{_FLUENT}.{stem}"
        for stem in stems
        if stem not in _FLUENT_USED
        and (
            stem.endswith("_datasource")
            or stem.startswith(("pandas_", "spark_"))
            or stem == "fabric"
        )
    ]


class _StandIns(_NamedFinder):
    """Answers for the left-out modules with modules of stand-in classes."""

    def exec_module(self, module: ModuleType) -> None:
        made: dict[str, type] = {}

        def left_out(attr: str) -> type:
            if attr.startswith("__") and attr.endswith("__"):
                raise AttributeError(attr)
            if attr not in made:
                made[attr] = type(attr, (_LeftOut,), {"__module__": module.__name__})
            return made[attr]

        module.__getattr__ = left_out  # type: ignore[method-assign]
        module.__hag_stand_in__ = True  # type: ignore[attr-defined]


class _LeftOut:
    """What a left-out datasource module defines: a class that cannot be used."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise ImportError(
            f"{type(self).__module__}.{type(self).__name__} is left out of Great Expectations "
            "by hag's suites (they read PostgreSQL only); import great_expectations before hag "
            "loads it to have every datasource"
        )


def stand_in(names: Iterable[str]) -> None:
    """Leave the named GX modules out of the import, if the installed GX is the release they
    were verified against (any other release loads in full)."""
    import importlib.metadata

    with _lock:
        if any(isinstance(f, _StandIns) for f in sys.meta_path):
            return
        try:
            if importlib.metadata.version("great_expectations") != VERIFIED_WITH:
                return
        except importlib.metadata.PackageNotFoundError:
            return
        pending = [n for n in names if n not in sys.modules]
        if pending:
            sys.meta_path.insert(0, _StandIns(pending))
