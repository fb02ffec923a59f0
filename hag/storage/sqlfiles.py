"""Named SQL queries kept in `.sql` files (the yesql pattern).

A file holds blocks that start with `-- name: some_name`, followed by comment lines that
document the query, then the statement. Parameters are psycopg's named placeholders
(`%(topic_id)s`), always bound, never interpolated. A placeholder named after a dial
(`%(edge_min_confidence)s`) is bound from the snapshot of dials by `with_dials`, so the
walk from a dial's declaration to where it acts is the registry, then the SQL.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from hag import SQL_DIR

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"%\(([a-z_][a-z0-9_]*)\)s")


@cache
def queries(module: str) -> dict[str, str]:
    """Every named query of `sql/queries/<module>.sql`, by name."""
    text = (SQL_DIR / "queries" / f"{module}.sql").read_text()
    names = list(_NAME.finditer(text))
    if not names:
        raise LookupError(f"sql/queries/{module}.sql has no '-- name:' blocks")
    found: dict[str, str] = {}
    for i, match in enumerate(names):
        end = names[i + 1].start() if i + 1 < len(names) else len(text)
        body = text[match.end() : end].strip()
        if match.group(1) in found:
            raise LookupError(f"sql/queries/{module}.sql defines {match.group(1)!r} twice")
        found[match.group(1)] = body
    return found


def query(module: str, name: str) -> str:
    """One named query; a KeyError names the file and the missing query."""
    try:
        return queries(module)[name]
    except KeyError:
        raise KeyError(f"no query {name!r} in sql/queries/{module}.sql") from None


@cache
def placeholders(sql: str) -> frozenset[str]:
    """The names of a statement's `%(name)s` placeholders."""
    return frozenset(_PLACEHOLDER.findall(sql))


def dial_values(names: Iterable[str], dials: Mapping[str, Any]) -> dict[str, Any]:
    """The value of each of `names` that is a dial (a list dial as a list), by its own name;
    names that are not dials are left out."""
    known = set(dials)
    return {
        name: list(value) if isinstance(value := dials[name], tuple) else value
        for name in names
        if name in known
    }


def with_dials(sql: str, dials: Mapping[str, Any], **params: Any) -> dict[str, Any]:
    """The parameters of `sql`: each placeholder named after a dial takes the dial's value
    from `dials`, every other one comes from `params`, which may also override a dial (a
    caller's explicit value wins)."""
    return dial_values(sorted(placeholders(sql) - params.keys()), dials) | params
