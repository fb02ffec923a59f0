"""Statement triggers plan their joins per call (migration 230).

PL/pgSQL prepares each static statement of a function once per connection and keeps its
plan, planned for the row counts of an early call. A trigger's statement that joins two sets
of its statement's rows (the old and new transition tables, or two of its own CTEs over
them) then joins by a nested loop on every later call of that connection when its first
writes were small: quadratic in the rows a large statement changed (`python -m bench
kept_plans` measures it). Such a join runs through EXECUTE, planned on every call.

The other direction too (migration 231): a statement that reads its statement's rows beside a
table keeps the plan of a connection's first call, so after a large first call (a cull) it
read the whole table by a hash join on every later small write of that connection. Those
statements run through EXECUTE as well. This reads every statement trigger's function in the
migrated memory."""

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


def _static_statements(source: str) -> list[str]:
    """A function's statements outside EXECUTE, comments left out."""
    return EXECUTED.sub("", re.sub(r"--[^\n]*", "", source)).split(";")


def _static_joins(source: str, tables: set[str]) -> list[str]:
    """The static statements (outside EXECUTE) that join two sets of the statement's rows:
    two of the transition tables and the statement's own CTEs in one FROM list (a comma or a
    JOIN of any kind between them, however many tables stand between), or two transition
    tables one read in an EXISTS or IN over the other."""
    found = []
    for statement in _static_statements(source):
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


INSERT_TARGET = re.compile(r"\bINSERT\s+INTO\s+\w+", re.IGNORECASE)


def _static_table_reads(source: str, rows: set[str], tables: set[str]) -> list[str]:
    """The static statements (outside EXECUTE) that read a set of the statement's rows (a
    transition table named in `rows`) and name a table of the memory besides the one an
    INSERT writes: a join, a semi- or anti-join, or an UPDATE or DELETE whose plan was
    chosen for the row counts of an early call."""
    found = []
    for statement in _static_statements(source):
        if not any(re.search(rf"\b{r}\b", statement, re.IGNORECASE) for r in rows):
            continue
        rest = INSERT_TARGET.sub("", statement)
        if any(re.search(rf"\b{t}\b", rest, re.IGNORECASE) for t in tables):
            found.append(" ".join(statement.split())[:160])
    return found


def _memory_tables(db) -> set[str]:
    return {
        r["relname"]
        for r in db.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm')"
        )
    }


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


def test_statement_triggers_read_their_rows_beside_a_table_through_execute(db):
    """No statement trigger reads its statement's rows beside a table of the memory in a
    static statement: the cascades, the audit's copy of the reports and the kept sums'
    removal are planned per call (migration 231)."""
    functions = _trigger_functions(db)
    tables = _memory_tables(db)
    assert {"hag_edge_learner_reports", "hag_edges", "hag_edge_units"} <= tables
    assert {
        "hag_edge_reports_cascade", "hag_edge_audit_reports_cascade", "hag_audit_deleted_edges",
        "hag_edge_units_keep",
    } <= set(functions)  # fmt: skip
    static = {name: _static_table_reads(*functions[name], tables) for name in functions}
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


def test_the_check_finds_a_static_table_read():
    """The table-read check can fail: the functions as migrations 160, 222, 220 and 230 wrote
    them are found (each cascade, the audit's copy, the kept sums' removal), the same
    functions as migration 231 writes them are not; an INSERT of a statement's rows alone
    is not a table read."""
    rows = {"old_rows", "new_rows", "added_reports", "removed_reports", "old_edges", "old_audit"}
    tables = {"hag_edges", "hag_edge_learner_reports", "hag_edge_audit_reports",
              "hag_edge_learner_units", "hag_edge_units", "hag_concept_learners",
              "hag_confidence_history", "hag_edge_audit", "hag_graph_concepts"}  # fmt: skip
    for name, function in [
        ("160_nightly_trigger_costs", "hag_edge_reports_cascade"),
        ("222_cull_with_reports", "hag_edge_audit_reports_cascade"),
        ("220_culled_reports_kept", "hag_audit_deleted_edges"),
        ("230_transition_joins_planned_per_call", "hag_edge_units_keep"),
    ]:
        source = (MIGRATIONS / f"{name}.sql").read_text()
        body = source[source.index(f"FUNCTION {function}()") :]
        body = body[: body.index("\n$$;")]
        assert _static_table_reads(body, rows, tables), name
    assert not _static_table_reads(
        (MIGRATIONS / "231_table_joins_planned_per_call.sql").read_text(), rows, tables
    )
    alone = "INSERT INTO hag_confidence_history (entity_id) SELECT n.id FROM new_rows n"
    assert not _static_table_reads(alone, rows, tables)
