"""Statement triggers plan their joins per call (migration 230).

PL/pgSQL prepares each static statement of a function once per connection and keeps its
plan, planned for the row counts of an early call. A trigger's statement that joins two sets
of its statement's rows (the old and new transition tables, or two of its own CTEs over
them) then joins by a nested loop on every later call of that connection when its first
writes were small: quadratic in the rows a large statement changed (`python -m bench
kept_plans` measures it). Such a join runs through EXECUTE, planned on every call. This reads every statement trigger's function in the migrated memory."""

from __future__ import annotations

import re

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


def _static_joins(source: str, tables: set[str]) -> list[str]:
    """The static statements (outside EXECUTE) that join two sets of the statement's rows:
    two transition tables joined (a JOIN, EXISTS or IN over the other), or two CTEs of the
    statement joined to each other."""
    static = EXECUTED.sub("", re.sub(r"--[^\n]*", "", source))
    found = []
    for statement in static.split(";"):
        named = {t for t in tables if re.search(rf"\b{t}\b", statement)}
        if not named:
            continue
        ctes = set(CTE.findall(statement))
        sets = ctes | tables  # the statement's row sets: its CTEs and the transition tables
        pairs = re.finditer(
            r"(?:FROM|JOIN|,)\s+(\w+)(?:\s+(?:AS\s+)?\w+)?\s*(?:JOIN|,)\s*(\w+)",
            statement,
            re.IGNORECASE,
        )
        cte_joins = [m for m in pairs if m.group(1) in sets and m.group(2) in sets]
        # two of them side by side (a UNION ALL, folded by a GROUP BY) are not a join
        joined = re.search(r"\bJOIN\b|\bEXISTS\b|\bIN\s*\(\s*SELECT\b", statement, re.I)
        if (len(named) > 1 and joined) or cte_joins:
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


def test_the_check_finds_a_static_join(db):
    """The check above can fail: the history function as migration 229 wrote it (a static
    join of old and new rows) and the kept sums as migration 222 wrote them are found."""
    old_rows_join = (
        "BEGIN INSERT INTO hag_confidence_history SELECT n.id FROM old_rows o"
        " JOIN new_rows n ON n.id = o.id; RETURN NULL; END"
    )
    cte_join = (
        "BEGIN WITH d AS (SELECT * FROM added_reports n), up AS (INSERT INTO x SELECT * FROM d"
        " RETURNING *), ch AS (SELECT * FROM up JOIN d ON d.edge_id = up.edge_id)"
        " INSERT INTO y SELECT * FROM ch; END"
    )
    assert _static_joins(old_rows_join, {"old_rows", "new_rows"})
    assert _static_joins(cte_join, {"added_reports", "removed_reports"})
    comma = "BEGIN INSERT INTO h SELECT n.id FROM old_rows o, new_rows n WHERE n.id = o.id; END"
    aliased = "BEGIN WITH d AS (SELECT * FROM added_reports), up AS (SELECT * FROM d)"
    aliased += " SELECT * FROM up AS u JOIN d ON d.edge_id = u.edge_id; END"
    assert _static_joins(comma, {"old_rows", "new_rows"})
    assert _static_joins(aliased, {"added_reports"})
    side_by_side = "BEGIN INSERT INTO g SELECT * FROM (SELECT 1 FROM new_rows n UNION ALL"
    side_by_side += " SELECT -1 FROM old_rows o) c GROUP BY 1; END"
    assert not _static_joins(side_by_side, {"old_rows", "new_rows"})
