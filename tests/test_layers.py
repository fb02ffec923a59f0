"""The direction of the layers: flows -> tasks -> hag. The library never imports upward.

Ruff's banned-api rule (TID251) guards the read path; lazy imports inside functions are the
usual way upward, so this test reads every import statement under `hag/` wherever it stands.
"""

from __future__ import annotations

import ast

import pytest

from hag import PROJECT_ROOT

#: Top-level names `hag/` must never import, and why (one line each).
BANNED_IN_HAG = {
    "expectations": "the suites' runner is hag.quality; expectations/ holds only the JSON suites",
}


def imported_names(source: str) -> set[str]:
    """The top-level module of every import statement in `source`, at any depth."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_scan_sees_lazy_and_dotted_imports():
    """A function-level `import x.y` and a `from x import y` both count as importing `x`."""
    source = "def f():\n    import expectations.entries\n    from flows.nightly import g\n"
    assert imported_names(source) == {"expectations", "flows"}
    assert imported_names("from . import expectations\nimport hag.quality\n") == {"hag"}


@pytest.mark.parametrize("banned", sorted(BANNED_IN_HAG))
def test_the_library_never_imports_upward(banned):
    """No module under hag/ imports a banned top-level name, not even lazily."""
    offenders = [
        str(path.relative_to(PROJECT_ROOT))
        for path in sorted((PROJECT_ROOT / "hag").rglob("*.py"))
        if banned in imported_names(path.read_text())
    ]
    assert offenders == [], f"{banned}: {BANNED_IN_HAG[banned]}"
