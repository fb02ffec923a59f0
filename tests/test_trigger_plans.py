"""Statement triggers plan their joins per call (migration 230).

PL/pgSQL prepares each static statement of a function once per connection and keeps its
plan, planned for the row counts of an early call. A trigger's statement that joins two sets
of its statement's rows (the old and new transition tables, or two of its own CTEs over
them) then joins by a nested loop on every later call of that connection when its first
writes were small: quadratic in the rows a large statement changed (`python -m bench
kept_plans` measures it). Such a join runs through EXECUTE, planned on every call. This reads every statement trigger's function in the migrated memory."""

from __future__ import annotations

import re
from pathlib import Path

EXECUTED = re.compile(r"EXECUTE\s+\$q\$.*?\$q\$", re.DOTALL)
CTE = re.compile(r"(?:WITH|,)\s*(\w+)\s+AS\s*\(", re.IGNORECASE)


def _trigger_functions(db) -> dict[str, tuple[str, set[str]]]:
    """Each function a statement trigger with transition tables runs: its source and the
    names its triggers give those tables."""
    rows = db.execute(
        "SELECT p.proname, p.prosrc, t.tgoldtable, t.tgnewtable FROM pg_trigger t"
        " JOIN pg_proc p ON p.oid = t.tgfoid WHERE NOT t.tgisinternal"
        " AND (t.tgoldtable IS NOT NULL OR t.tgnewtable IS NOT NULL)"
    ).fetchall()
    found: dict[str, tuple[str, set[str]]] = {}
    for r in rows:
        source, names = found.get(r["proname"], (r["prosrc"], set()))
        names |= {n for n in (r["tgoldtable"], r["tgnewtable"]) if n}
        found[r["proname"]] = (source, names)
    return found


FROM_LIST = re.compile(
    r"\b(?:FROM|USING)\s+(.*?)(?=\bWHERE\b|\bGROUP\b|\bORDER\b|\bRETURNING\b|\bHAVING\b"
    r"|\bLIMIT\b|\bON\s+CONFLICT\b|\bUNION\b|\)|$)",
    re.IGNORECASE | re.DOTALL,
)
ITEM = re.compile(
    r"(?:^|,|\bJOIN(?:\s+LATERAL)?)\s*(\w+)", re.IGNORECASE
)  # a FROM list's items: its first, and each after a comma or a JOIN of any kind


def _static_joins(source: str, tables: set[str]) -> list[str]:
    """The static statements (outside EXECUTE) that join two sets of the statement's rows:
    two of the transition tables and the statement's own CTEs in one FROM list (a comma or a
    JOIN of any kind between them, however many tables stand between), or two transition
    tables one read in an EXISTS or IN over the other."""
    static = EXECUTED.sub("", re.sub(r"--[^\n]*", "", source))
    found = []
    for statement in static.split(";"):
        named = {t for t in tables if re.search(rf"\b{t}\b", statement)}
        if not named:
            continue
        sets = {c.lower() for c in CTE.findall(statement)} | {t.lower() for t in tables}
        joined_lists = [
            items for m in FROM_LIST.finditer(statement)
            if len(items := [x for x in ITEM.findall(m.group(1)) if x.lower() in sets]) > 1
        ]  # fmt: skip
        # two transition tables side by side (a UNION ALL, folded by a GROUP BY) are not joined
        nested = len(named) > 1 and re.search(r"\bEXISTS\b|\bIN\s*\(\s*SELECT\b", statement, re.I)
        if joined_lists or nested:
            found.append(" ".join(statement.split())[:160])
    return found


def test_statement_triggers_join_their_rows_through_execute(db):
    """No statement trigger joins two sets of its statement's rows in a static statement:
    the history's and the search copy's old-to-new joins and the kept sums' join of what an
    insert wrote to what it added are planned per call."""
    functions = _trigger_functions(db)
    assert {"hag_record_confidence_changes", "hag_entry_search_sync", "hag_edge_units_keep"} <= set(
        functions
    )
    static = {name: _static_joins(*functions[name]) for name in functions}
    assert {name: found for name, found in static.items() if found} == {}


MIGRATIONS = Path(__file__).resolve().parents[1] / "sql" / "migrations"


def test_the_check_finds_a_static_join():
    """The check above can fail: the functions as migrations 229, 195 and 222 wrote them
    (static joins of old and new rows, and of the kept sums' CTEs) are found, the same
    functions as migration 230 writes them are not; and so are a comma join across another
    table, an aliased CTE joined with LEFT JOIN, while a UNION ALL of old and new rows is
    not a join."""
    rows = {"old_rows", "new_rows", "added_reports", "removed_reports"}
    for name in ("229_edge_history_by_statement", "195_search_copy_in_place"):
        assert _static_joins((MIGRATIONS / f"{name}.sql").read_text(), rows), name
    assert _static_joins((MIGRATIONS / "222_cull_with_reports.sql").read_text(), rows)
    assert not _static_joins(
        (MIGRATIONS / "230_transition_joins_planned_per_call.sql").read_text(), rows
    )
    comma = "INSERT INTO h SELECT n.id FROM new_rows n, hag_edges e, old_rows o WHERE n.id = o.id"
    aliased = "WITH d AS (SELECT * FROM added_reports), up AS (SELECT * FROM d)"
    aliased += " SELECT * FROM up AS u LEFT JOIN d ON d.edge_id = u.edge_id"
    side_by_side = "INSERT INTO g SELECT * FROM (SELECT 1 FROM new_rows n UNION ALL"
    side_by_side += " SELECT -1 FROM old_rows o) c GROUP BY 1"
    assert _static_joins(comma, rows) and _static_joins(aliased, rows)
    assert not _static_joins(side_by_side, rows)
