"""Defer the import of modules Great Expectations loads but these suites never call.

`import great_expectations` imports every expectation it ships, and one of them (the KL
divergence check) pulls in `scipy.stats` and `altair` at module level; a metric pulls in
`jsonschema`. Together they were about a third of GX's import time (docs/expectations.md).
None of them runs for the expectations in `suites/`, so until something reads an attribute
of one of them, the name is bound to an empty placeholder module; the first attribute read
imports the real module and the placeholder takes on its contents.

The standard library's `importlib.util.LazyLoader` is the usual tool, but a plain `import
altair` statement reads the module's `__spec__`, which makes it load at once; hence a finder
of our own. A module that is already imported is left alone.
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
from types import ModuleType
from typing import Any

#: What GX imports at start-up and the suites here never use.
UNUSED_BY_SUITES = ("scipy.stats", "altair", "jsonschema")

_lock = threading.RLock()  # resolving one may resolve another (altair imports jsonschema)


class _Placeholders(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A finder that answers for the deferred names with placeholder modules."""

    def __init__(self, names: Iterable[str]) -> None:
        self.names = set(names)

    def find_spec(
        self, fullname: str, path: Any = None, target: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

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
