"""The data-quality suites (SPEC §8): a sound memory passes; each corruption fails its guard.

The suites read committed data through connections of their own, so every corruption is
committed, in a database private to its test (`private_db`, dropped afterwards): constraints
that would refuse the corrupt row are dropped there, so the suites see a database broken in
exactly one way.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from psycopg.types.json import Jsonb

from hag import quality
from hag.nightly import sweeps
from hag.quality import SUITES_DIR
from tests import factories as f

AS_OF = f.NOW
DAY = timedelta(days=1)


def _sound_memory(db):
    """Entries of every graph, edges of every provenance, and one finished cull run."""
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    c = f.entry(db, concept_slug="primes", maturity="candidate", confidence=0.3)
    f.entry(db, concept_slug="_unanchored_", maturity="candidate", confidence=0.2)
    f.entry(db, concept_slug="_unanchored_", maturity="candidate", confidence=0.2)
    f.entry(db, concept_slug="rsa", scope="tutor")
    f.entry(db, concept_slug="rsa", scope="student:ada")
    f.entry(db, topic_id="linux-basics", concept_slug="pipes", scope="student:ada")
    f.entry(db, concept_slug="rsa", scope="visual")
    f.edge(db, a, b, "prerequisite", source_type="seed")
    f.edge(db, b, c, "leads_to", confidence=0.3, source_type="learned")
    f.edge(db, a, c, "related", confidence=0.4, source_type="enriched")
    for t in ("fallback", "supersedes"):
        f.edge(db, c, a, t, confidence=0.1, source_type="learned", created_at=AS_OF - 100 * DAY)
    db.commit()
    run = sweeps.sweep(db, as_of=AS_OF)
    assert run.culled == 2
    return {"a": a, "b": b, "c": c, "run": run.run_id}


def _failing(db) -> set[tuple[str, str, str]]:
    result = quality.run_all(db)
    return {(x.suite, x.expectation, x.column) for x in result.failures}


def test_sound_memory_passes_every_suite(db):
    """A memory built by the rules, after a real cull, passes every expectation."""
    _sound_memory(db)
    result = quality.run_all(db)
    assert result.success, result.report()
    assert [s.suite for s in result.suites] == ["entries", "edges", "cull_runs", "culled_edges"]
    assert all(s.rows > 0 for s in result.suites)


def test_demo_corpus_passes_every_suite(db):
    """The shipped demo corpus is a sound memory."""
    from hag.operations import corpus

    corpus.load_file(corpus.DEMO_CORPUS)
    result = quality.run_all(db, suites=("entries", "edges"))
    assert result.success, result.report()


def test_suites_are_kept_as_reviewable_files():
    """Each suite is a JSON file naming the view it reads; every expectation says what it guards."""
    for name in quality.SUITES:
        doc = json.loads((SUITES_DIR / f"{name}.json").read_text())
        assert doc["name"] == name and doc["meta"]["reads"].startswith("hag_quality_")
        assert all(e["meta"]["guards"] for e in doc["expectations"])


def _drop(db, table, constraint):
    db.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}")


def _new_entry(db, **kw):
    return f.entry(db, **kw)


# Each case: (what to break, SQL-level corruption, the exact expectations that must fail).
def entry_confidence(db, m):
    _drop(db, "hag_entries", "hag_entries_confidence_check")
    db.execute("UPDATE hag_entries SET confidence = 1.5 WHERE id = %s", (m["a"],))


def match_quality(db, m):
    _drop(db, "hag_entries", "hag_entries_concept_match_quality_check")
    db.execute("UPDATE hag_entries SET concept_match_quality = -0.1 WHERE id = %s", (m["a"],))


def maturity(db, m):
    _drop(db, "hag_entries", "hag_entries_maturity_check")
    db.execute("UPDATE hag_entries SET maturity = 'retired' WHERE id = %s", (m["a"],))


def scope_shape(db, m):
    _drop(db, "hag_entries", "hag_entries_visibility_scope_check")
    db.execute("UPDATE hag_entries SET visibility_scope = 'student' WHERE id = %s", (m["c"],))


def slug_shape(db, m):
    _drop(db, "hag_entries", "hag_entries_concept_slug_check")
    db.execute("UPDATE hag_entries SET concept_slug = 'RSA!' WHERE id = %s", (m["c"],))


def topic_identity(db, m):
    db.execute("DROP INDEX hag_entries_topic_concept_slug_uniq")
    _new_entry(db, concept_slug="rsa")


def student_identity(db, m):
    db.execute("DROP INDEX hag_entries_student_pattern_uniq")
    _new_entry(db, topic_id="data-structures", concept_slug="rsa", scope="student:ada")


def visual_identity(db, m):
    db.execute("DROP INDEX hag_entries_visual_concept_uniq")
    _new_entry(db, topic_id="data-structures", concept_slug="rsa", scope="visual")


def negative_failures(db, m):
    _drop(db, "hag_entries", "hag_entries_failure_count_check")
    db.execute("UPDATE hag_entries SET failure_count = -1 WHERE id = %s", (m["a"],))


def edge_below_floor(db, m):
    db.execute("UPDATE hag_edges SET confidence = 0.01 WHERE source_type = 'seed'")


def edge_type(db, m):
    _drop(db, "hag_edges", "hag_edges_edge_type_check")
    db.execute("UPDATE hag_edges SET edge_type = 'causes' WHERE source_type = 'seed'")


def unknown_provenance(db, m):
    db.execute("UPDATE hag_edges SET source_type = 'imported' WHERE source_type = 'enriched'")


def duplicate_edge(db, m):
    _drop(db, "hag_edges", "hag_edges_identity")
    f.edge(db, m["a"], m["b"], "prerequisite", source_type="learned")


def self_loop(db, m):
    _drop(db, "hag_edges", "hag_edges_no_self_loop")
    f.edge(db, m["a"], m["a"], "related", source_type="learned")


def dangling_target(db, m):
    db.execute("SET LOCAL session_replication_role = replica")  # foreign keys off, this tx only
    db.execute("DELETE FROM hag_entries WHERE id = %s", (m["c"],))


def dangling_source(db, m):
    db.execute("SET LOCAL session_replication_role = replica")
    db.execute("DELETE FROM hag_edges WHERE source_entry_id = %s", (m["a"],))
    db.execute(
        "UPDATE hag_edges SET source_entry_id = gen_random_uuid() WHERE source_type = 'learned'"
    )


def unanchored_edge(db, m):
    lone = db.execute(
        "SELECT id FROM hag_entries WHERE concept_slug = '_unanchored_' LIMIT 1"
    ).fetchone()
    f.edge(db, m["a"], lone["id"], "related", source_type="learned")


def negative_hits(db, m):
    _drop(db, "hag_edges", "hag_edges_hit_count_check")
    db.execute("UPDATE hag_edges SET hit_count = -2 WHERE source_type = 'seed'")


def audit_row_lost(db, m):
    db.execute(
        "DELETE FROM hag_edge_audit WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )


def seed_culled(db, m):
    db.execute(
        "UPDATE hag_edge_audit SET source_type = 'seed' "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )


def off_allowlist(db, m):
    db.execute(
        "UPDATE hag_edge_audit SET source_type = 'imported' "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )


def strong_culled(db, m):
    db.execute(
        "UPDATE hag_edge_audit SET confidence = 0.9 "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )


def traversed_culled(db, m):
    db.execute(
        "UPDATE hag_edge_audit SET traversal_count = 4 "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )


def young_culled(db, m):
    db.execute(
        "UPDATE hag_edge_audit SET created_at = %s "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)",
        (AS_OF - 10 * DAY,),
    )


def culled_outside_a_run(db, m):
    db.execute(
        "UPDATE hag_edge_audit SET run_id = gen_random_uuid() "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )


def restored_keeping_reports(db, m):
    """A cull marked restored whose kept reports never went back with it."""
    db.execute(
        "UPDATE hag_edge_audit SET restored_at = now(), restored_by = 'test' "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit)"
    )
    db.execute(
        "INSERT INTO hag_edge_audit_reports (audit_id, session_id, learner_id, turns, share, "
        "reported_at) SELECT min(audit_id), 's-1', 'learner-1', 1, 1.0, now() FROM hag_edge_audit"
    )


def restored_culled_again(db, m):
    """An edge an operator restored, deleted again under a recorded cull of the same rule."""
    first = db.execute(
        "UPDATE hag_edge_audit SET restored_at = now(), restored_by = 'test' "
        "WHERE audit_id = (SELECT min(audit_id) FROM hag_edge_audit) RETURNING *"
    ).fetchone()
    db.execute(
        "INSERT INTO hag_edge_audit (run_id, reason, rule_values, deleted_at, edge_id, "
        "source_entry_id, target_entry_id, edge_type, condition, confidence, hit_count, "
        "source_type, source_session_id, traversal_count, last_traversed_at, created_at, "
        "updated_at) VALUES (%(run_id)s, 'cull', %(rule_values)s, now(), %(edge_id)s, "
        "%(source_entry_id)s, %(target_entry_id)s, %(edge_type)s, %(condition)s, "
        "%(confidence)s, %(hit_count)s, %(source_type)s, %(source_session_id)s, "
        "%(traversal_count)s, %(last_traversed_at)s, %(created_at)s, %(updated_at)s)",
        {**first, "rule_values": Jsonb(first["rule_values"])},
    )
    db.execute(
        "UPDATE hag_runs SET summary = jsonb_set(summary, '{culled}', "
        "to_jsonb((summary ->> 'culled')::int + 1)) WHERE run_id = %s",
        (first["run_id"],),
    )


BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"
REGEX = "expect_column_values_to_match_regex"
COMPOUND = "expect_compound_columns_to_be_unique"

CASES = [
    (entry_confidence, {("entries", BETWEEN, "confidence")}),
    (match_quality, {("entries", BETWEEN, "concept_match_quality")}),
    (maturity, {("entries", IN_SET, "maturity")}),
    (scope_shape, {("entries", REGEX, "visibility_scope")}),
    (slug_shape, {("entries", REGEX, "concept_slug")}),
    (topic_identity, {("entries", COMPOUND, "topic_id, concept_slug, visibility_scope")}),
    (student_identity, {("entries", COMPOUND, "visibility_scope, concept_slug")}),
    (visual_identity, {("entries", "expect_column_values_to_be_unique", "concept_slug")}),
    (negative_failures, {("entries", BETWEEN, "failure_count")}),
    (edge_below_floor, {("edges", BETWEEN, "confidence")}),
    (edge_type, {("edges", IN_SET, "edge_type")}),
    (unknown_provenance, {("edges", IN_SET, "source_type")}),
    (duplicate_edge, {("edges", COMPOUND, "source_entry_id, target_entry_id, edge_type")}),
    (self_loop, {("edges", IN_SET, "self_loop")}),
    (dangling_target, {("edges", IN_SET, "target_exists")}),
    (dangling_source, {("edges", IN_SET, "source_exists")}),
    (unanchored_edge, {("edges", IN_SET, "touches_unanchored")}),
    (negative_hits, {("edges", BETWEEN, "hit_count")}),
    (audit_row_lost, {("cull_runs", "expect_column_pair_values_to_be_equal", "culled, audited")}),
    (
        seed_culled,
        {
            ("culled_edges", "expect_column_values_to_not_be_in_set", "source_type"),
            ("culled_edges", IN_SET, "provenance_allowed"),
        },
    ),
    (off_allowlist, {("culled_edges", IN_SET, "provenance_allowed")}),
    (strong_culled, {("culled_edges", IN_SET, "below_threshold")}),
    (traversed_culled, {("culled_edges", IN_SET, "untraversed_enough")}),
    (young_culled, {("culled_edges", IN_SET, "old_enough")}),
    (restored_keeping_reports, {("culled_edges", IN_SET, "reports_placed")}),
    (restored_culled_again, {("culled_edges", IN_SET, "not_restored_before")}),
    (
        culled_outside_a_run,
        {
            ("culled_edges", IN_SET, "run_recorded"),
            ("cull_runs", "expect_column_pair_values_to_be_equal", "culled, audited"),
        },
    ),
]


@pytest.mark.parametrize(("corrupt", "expected"), CASES, ids=[c[0].__name__ for c in CASES])
def test_each_corruption_fails_exactly_its_guard(private_db, corrupt, expected):
    """Breaking the database in one way fails exactly the expectation that guards against it."""
    memory = _sound_memory(private_db)
    corrupt(private_db, memory)
    private_db.commit()
    assert _failing(private_db) == expected


def test_every_expectation_has_a_corruption_test():
    """No expectation in a suite file is left without a case above that makes it fail."""
    guarded = set().union(*(expected for _, expected in CASES))
    declared = set()
    for name in quality.SUITES:
        doc = json.loads((SUITES_DIR / f"{name}.json").read_text())
        for e in doc["expectations"]:
            k = e["kwargs"]
            column = k.get("column") or ", ".join(
                k.get("column_list") or (k["column_A"], k["column_B"])
            )
            declared.add((name, e["type"], column))
    missing = declared - guarded
    # Counters share one rule; the success/traversal twins are pinned by their siblings.
    assert missing == {("entries", BETWEEN, "success_count"), ("edges", BETWEEN, "traversal_count")}


def test_a_failure_names_its_rows_by_the_views_key(private_db):
    """The sample is the offending rows by id with the value found, not the bare values
    (`[True]` says nothing of which edge loops)."""
    _sound_memory(private_db)
    edge_below_floor(private_db, None)
    private_db.commit()
    low = private_db.execute(
        "SELECT id FROM hag_edges WHERE confidence < 0.05 ORDER BY id"
    ).fetchall()
    [failure] = quality.run_all(private_db, suites=("edges",)).failures
    assert failure.column == "confidence"
    named = {str(row["id"]) for row in failure.sample}
    assert named <= {str(r["id"]) for r in low} and len(named) == min(5, len(low))
    assert all(row["confidence"] < 0.05 for row in failure.sample)


def test_progress_reports_each_suite_as_it_finishes(db):
    """`run_all(progress=...)` receives one line per suite, in order, naming it and its time."""
    _sound_memory(db)
    lines: list[str] = []
    result = quality.run_all(db, progress=lines.append)
    per_suite = [line for line in lines if "expectations over" in line]
    assert [line.split()[1] for line in per_suite] == list(quality.SUITES)
    assert all(line.startswith("ok") and line.endswith(" s)") for line in per_suite)
    assert result.success


def test_counts_come_from_the_database_and_the_sample_stays_small(private_db):
    """2,000 bad rows are counted exactly in PostgreSQL; only a short sample reaches Python."""
    _sound_memory(private_db)
    _drop(private_db, "hag_entries", "hag_entries_failure_count_check")
    private_db.execute(
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence,"
        " instruction, embedding, failure_count) "
        "SELECT 'cryptography', 'bulk-' || i, 'public', 'candidate', 0.3, 'x', embedding, -1 "
        "FROM generate_series(1, 2000) i, (SELECT embedding FROM hag_entries LIMIT 1) e"
    )
    private_db.commit()
    [failure] = quality.run_all(private_db, suites=("entries",)).failures
    assert (failure.column, failure.unexpected_count) == ("failure_count", 2000)
    assert 0 < len(failure.sample) <= 5


def test_suite_sessions_take_their_work_mem_and_parallel_workers_from_the_dials(db, dials):
    """The suites' own PostgreSQL sessions run with work_mem = suite_work_mem_mb and
    max_parallel_workers_per_gather = suite_parallel_workers."""
    import sqlalchemy as sa

    from hag.quality import _gx

    _sound_memory(db)
    dials(suite_work_mem_mb=48, suite_parallel_workers=3)
    assert quality.run_all(db, suites=("cull_runs",)).success
    [engine] = _gx.engines()  # one view validated, one engine
    with engine.connect() as suite_session:
        assert suite_session.execute(sa.text("SHOW work_mem")).scalar() == "48MB"
        assert (
            suite_session.execute(sa.text("SHOW max_parallel_workers_per_gather")).scalar() == "3"
        )


def test_suites_run_side_by_side_up_to_the_dial_and_report_in_order(private_db, monkeypatch):
    """With suite_concurrency = 2, two suites are in flight at once; the failures and the
    order of the report are those of one suite at a time."""
    import threading
    import time

    from hag import settings
    from hag.quality import _gx

    memory = _sound_memory(private_db)
    unknown_provenance(private_db, memory)
    seed_culled(private_db, memory)
    private_db.commit()
    validate, lock = _gx.validate, threading.Lock()
    in_flight, most = [0], [0]

    def counted(*args):
        with lock:
            in_flight[0] += 1
            most[0] = max(most[0], in_flight[0])
        time.sleep(0.2)  # long enough for a second worker to start if there is one
        try:
            return validate(*args)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(_gx, "validate", counted)
    outcome = {}
    for workers in (1, 2):
        settings.set_value(private_db, "suite_concurrency", workers, by="test")
        private_db.commit()
        settings.invalidate()
        most[0] = 0
        lines: list[str] = []
        result = quality.run_all(private_db, progress=lines.append)
        per_suite = [line.split()[1] for line in lines if "expectations over" in line]
        assert per_suite == list(quality.SUITES)
        outcome[workers] = (most[0], {(x.suite, x.expectation, x.column) for x in result.failures})
    assert outcome[1][0] == 1 and outcome[2][0] == 2
    assert (
        outcome[1][1]
        == outcome[2][1]
        == {
            ("edges", IN_SET, "source_type"),
            ("culled_edges", "expect_column_values_to_not_be_in_set", "source_type"),
            ("culled_edges", IN_SET, "provenance_allowed"),
        }
    )


def _probe(code, database_url=None):
    """Run `code` in a fresh interpreter (GX's import is per process), on the database at
    `database_url` when given; its completed process, stdout captured."""
    import os
    import subprocess
    import sys

    from hag import PROJECT_ROOT

    env = dict(os.environ) if database_url is None else {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        cwd=PROJECT_ROOT,
        env=env,
    )


def test_great_expectations_loads_without_the_modules_the_suites_never_call():
    """Importing GX leaves scipy.stats, altair and jsonschema unloaded until first used (each
    is a placeholder, or not imported at all: only a left-out expectation imports altair)."""
    probe = (
        "import sys\n"
        "from hag.quality import _gx\n"
        "_gx.import_gx()\n"
        "names = ('scipy.stats', 'altair', 'jsonschema')\n"
        "print([n for n in names if n in sys.modules and '__getattr__' not in vars(sys.modules[n])])\n"
        "import scipy.stats\n"
        "print(scipy.stats.entropy([0.5, 0.5], [0.5, 0.5]))\n"
    )
    done = _probe(probe)
    deferred, used = done.stdout.split("\n")[:2]
    assert deferred == "[]"  # every one of them is still a placeholder after GX loaded
    assert float(used) == 0.0  # and the real module answers on first use


def test_a_whole_check_passes_without_loading_the_deferred_modules(db, database_url):
    """After every suite has run and passed, scipy.stats, altair and jsonschema are still
    placeholders: validation never touches them, so deferring them costs no expectation."""
    _sound_memory(db)
    probe = (
        "import sys\n"
        "from hag import quality\n"
        "result = quality.run_all()\n"
        "names = ('scipy.stats', 'altair', 'jsonschema')\n"
        "print(result.success, len(result.suites))\n"
        "print([n for n in names if n in sys.modules and '__getattr__' not in vars(sys.modules[n])])\n"
        "fluent = 'great_expectations.datasource.fluent.'\n"
        "print(sorted(n.removeprefix(fluent) for n, m in list(sys.modules.items())\n"
        "             if n.startswith(fluent) and n.endswith('_datasource')\n"
        "             and not vars(m).get('__hag_stand_in__')))\n"
    )
    done = _probe(probe, database_url)
    passed, loaded, real_datasources = done.stdout.splitlines()[-3:]
    assert passed == "True 4"
    assert loaded == "[]"
    # of GX's fluent datasources, only the PostgreSQL one and what it is built from are real
    assert real_datasources == "['invalid_datasource', 'postgres_datasource', 'sql_datasource']"


def test_great_expectations_leaves_out_the_datasources_of_other_engines():
    """GX's datasources for engines the suites never read (Spark, pandas readers, SQLite,
    Snowflake, ...) are stand-ins that refuse use, naming what was left out; the PostgreSQL
    datasource is GX's own."""
    probe = (
        "import sys\n"
        "from hag.quality import _gx\n"
        "_gx.import_gx()\n"
        "fluent = sys.modules['great_expectations.datasource.fluent']\n"
        "print(vars(sys.modules[fluent.SparkDatasource.__module__]).get('__hag_stand_in__'))\n"
        "print(vars(sys.modules[fluent.PostgresDatasource.__module__]).get('__hag_stand_in__'))\n"
        "try:\n"
        "    fluent.SqliteDatasource(name='x')\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    done = _probe(probe)
    spark, postgres, refusal = done.stdout.splitlines()[:3]
    assert (spark, postgres) == ("True", "None")
    assert refusal.startswith(
        "great_expectations.datasource.fluent.sqlite_datasource.SqliteDatasource is left out"
    )


def test_the_stand_ins_are_verified_for_the_locked_great_expectations():
    """The GX release the stand-ins were verified against is the one installed: a GX upgrade
    fails here until the stand-in tests have been run against it and VERIFIED_WITH moved."""
    import importlib.metadata

    from hag.quality import _deferred

    assert importlib.metadata.version("great_expectations") == _deferred.VERIFIED_WITH


def test_another_great_expectations_release_loads_in_full(db, database_url):
    """With a GX release the stand-ins were not verified against, nothing is left out (every
    datasource module is GX's own) and the suites run as before."""
    _sound_memory(db)
    probe = (
        "import sys\n"
        "from hag.quality import _deferred\n"
        "_deferred.VERIFIED_WITH = '0.0'\n"
        "from hag import quality\n"
        "result = quality.run_all()\n"
        "print(result.success, len(result.suites))\n"
        "print(sum(1 for m in list(sys.modules.values()) if vars(m).get('__hag_stand_in__')))\n"
        "print(sys.modules['great_expectations.datasource.fluent.spark_datasource'].__file__)\n"
    )
    done = _probe(probe, database_url)
    passed, stand_ins, spark = done.stdout.splitlines()[-3:]
    assert passed == "True 4"
    assert stand_ins == "0"
    assert spark.endswith("great_expectations/datasource/fluent/spark_datasource.py")


def test_the_flow_task_logs_a_line_per_suite(db, prefect_harness):
    """Inside a flow, the suites task logs one line per suite through the run logger."""
    import logging

    from prefect import flow

    from tasks.checks import run_expectations

    _sound_memory(db)

    @flow
    def checks() -> dict:
        return run_expectations()

    class Lines(logging.Handler):
        """Only the task-run logger's own records (caplog would also see them propagated)."""

        def __init__(self) -> None:
            super().__init__(logging.INFO)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    handler = Lines()
    logger = logging.getLogger("prefect.task_runs")
    logger.addHandler(handler)
    try:
        assert checks()["success"] is True
    finally:
        logger.removeHandler(handler)
    logged = [line for line in handler.lines if "expectations over" in line]
    assert [line.split()[1] for line in logged] == list(quality.SUITES)


def _hag(database_url, *args):
    import os
    import subprocess
    import sys

    from hag import PROJECT_ROOT

    return subprocess.run(
        [sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "DATABASE_URL": database_url},
        cwd=PROJECT_ROOT,
        timeout=120,
    )


def test_hag_check_prints_a_progress_line_per_suite_on_stderr(db, database_url):
    """`hag check` says on stderr how each suite went as it finishes; stdout stays the report."""
    _sound_memory(db)
    done = _hag(database_url, "check", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["success"] is True
    progress = [line for line in done.stderr.splitlines() if "expectations over" in line]
    assert [line.split()[1] for line in progress] == list(quality.SUITES)


def test_a_nightly_dry_run_leaves_the_suites_to_hag_check(db, database_url):
    """A dry run changes nothing, so it runs no suite (a broken memory passes) and says so."""
    _sound_memory(db)
    db.execute("UPDATE hag_edges SET source_type = 'imported' WHERE source_type = 'enriched'")
    db.commit()
    dry = _hag(database_url, "nightly", "--dry-run", "--as-of", "2026-11-30T12:00:00Z")
    assert dry.returncode == 0, dry.stderr
    assert "suites: skipped" in dry.stderr and "expectations over" not in dry.stderr
    assert _hag(database_url, "check").returncode == 1  # the same memory, checked on demand


# The scope shape as SPEC §2 and the table's CHECK state it, with a look-ahead.
SCOPE_WITH_LOOKAHEAD = (
    r"^(?:tutor|visual|student:[A-Za-z0-9][A-Za-z0-9._@-]{0,127}|(?!student)[a-z][a-z0-9_-]*)$"
)


def test_the_scope_regex_without_look_ahead_matches_exactly_what_the_look_ahead_form_does(db):
    """The suite's look-ahead-free scope regex accepts the same strings as the look-ahead form,
    in PostgreSQL's own regex engine, over every short string near 'student' and random ones."""
    import itertools
    import random

    doc = json.loads((SUITES_DIR / "entries.json").read_text())
    [scope] = [e for e in doc["expectations"] if e["kwargs"].get("column") == "visibility_scope"]
    assert "(?!" not in scope["kwargs"]["regex"]
    alphabet = "studenxa0_-:A."
    near = [  # each prefix of 'student', then up to two more characters
        "student"[:k] + "".join(tail)
        for k in range(8)
        for n in range(3)
        for tail in itertools.product(alphabet, repeat=n)
    ]
    rng = random.Random(15)
    strings = near + [
        "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 12))) for _ in range(20000)
    ]
    strings += ["student:" + "a" * n for n in (0, 1, 127, 128, 129)] + ["tutor", "visual", ""]
    differ = db.execute(
        "SELECT s FROM unnest(%s::text[]) AS s WHERE (s ~ %s) IS DISTINCT FROM (s ~ %s)",
        (strings, scope["kwargs"]["regex"], SCOPE_WITH_LOOKAHEAD),
    ).fetchall()
    assert differ == []
    accepted = db.execute(
        "SELECT count(*) FILTER (WHERE s ~ %s) AS n FROM unnest(%s::text[]) AS s",
        (SCOPE_WITH_LOOKAHEAD, strings),
    ).fetchone()["n"]
    assert 0 < accepted < len(strings)  # both sides of the rule were exercised
