"""Named SQL queries kept in `.sql` files (the yesql pattern).

A file holds blocks that start with `-- name: some_name`, followed by comment lines that
document the query, then the statement. Parameters are psycopg's named placeholders
(`%(topic_id)s`), always bound, never interpolated.
"""

from __future__ import annotations

import re
from functools import cache

from hag import SQL_DIR

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


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
