"""The nightly sweep over 1,000,000 entries and 1,000,000 edges, beside a bare DELETE; then
the data-quality suites over the same memory, beside one pass over every quality view.

Target (issue 5): the whole sweep (promotion, archiving, the audited cull, the run record
and the report rows, one transaction) in at most 60 s on 2 cores. Baseline, measured in
the same run on the same rows: a bare `DELETE … WHERE` of exactly the rows the cull takes,
with no trigger (so no audit), rolled back. The ratio is the price of the audit, the
promotions and the bookkeeping. Issue 26's goals: the sweep under 8 s on an idle machine,
the audited cull within 5x the bare DELETE. Beside the wall times it prints (and records)
the server CPU of the sweep, of each step, and the cull's CPU over the bare DELETE's: on a
shared machine the wall times move with the load, the CPU far less.

Its own embedded PostgreSQL in a temporary folder (never the project's .hag database),
migrated with 8-dimension embeddings: the sweeps never read a vector, and at 1,536
dimensions the vectors are stored out of line (TOAST), so the heap the sweep scans is the
same while the disk would need about 6 GB more. `HAG_BENCH_ROWS` scales it down. The server
gets `HAG_BENCH_NIGHTLY_SHARED_BUFFERS` (default 1GB, what a host of a 1M memory gives it;
`128MB` is PostgreSQL's default, at which the figures before 2026-12-02 were measured).

The suites (issue 15: at most 10 s over 1M + 1M, memory that does not grow with the table)
run in a child process as `hag check` runs them, so its wall time includes importing Great
Expectations and its peak resident memory is theirs alone. Baseline, same run, same rows:
one `count(v.*)` pass over each quality view, which builds every column of every row once.

Every learned edge carries `HAG_BENCH_NIGHTLY_REPORTS` learner reports (default 1, the
evidence profile's shape: a learned edge is made by a learner's report; 0 gives the shape
measured before 2026-12-05, edges without reports): the cull copies a culled edge's
reports beside its audit row and takes them out of the kept sums in its own statement, and
the bare DELETE does neither, so the cull's ratio includes that price.

`HAG_BENCH_NIGHTLY_PROFILE` names the profile whose dials the memory runs under (default
seed; the stored confidences stay the load's). `HAG_BENCH_NIGHTLY_SEQUENCES=1` makes a third
of the learned edges (edge i with i mod 5 = 3) `leads_to` and `fallback` instead of
prerequisites, each learner report a move along one: under `edge_grading_rule = units` (the
evidence profile) the night re-weighs every sequence edge before its cull and, when the cull
moved what they read, again after it (steps `sequence reweigh` and `sequence reweigh after
cull`), which this shape prices.

After the suites it runs the night after (`as_of` one day on) on the swept memory: a
memory its rules already weigh, where the first night's cull and re-weigh found most of the
work (under the evidence profile the first night re-weighs the concepts its cull touched
and flags those its crossings reach; the night after re-weighs the flagged ones and those
of its own cull). Last, it times the re-weigh's read of the evidence at 1,000 to 100,000
concepts of that memory (`_evidence_reads`).

`HAG_BENCH_NIGHTLY_DIR=/some/folder` keeps the database there instead of a temporary folder;
run again on the same folder, it finds the swept memory and measures the suites alone (the
load takes minutes at 1M + 1M, the suites seconds), so they can be measured more than once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.figures import record

ROWS = int(os.environ.get("HAG_BENCH_ROWS", "1000000"))
SHARED_BUFFERS = os.environ.get("HAG_BENCH_NIGHTLY_SHARED_BUFFERS", "1GB")
REPORTS = int(os.environ.get("HAG_BENCH_NIGHTLY_REPORTS", "1"))
PROFILE = os.environ.get("HAG_BENCH_NIGHTLY_PROFILE", "seed")
SEQUENCES = os.environ.get("HAG_BENCH_NIGHTLY_SEQUENCES", "0") == "1"
AS_OF = datetime(2026, 11, 30, 2, 30, tzinfo=UTC)
TARGET_SECONDS = 60.0
SUITES_TARGET_SECONDS = 10.0
EVIDENCE_SIZES = (1, 1_000, 5_000, 10_000, 20_000, 100_000)
QUALITY_VIEWS = (
    "hag_quality_entries",
    "hag_quality_edges",
    "hag_quality_cull_runs",
    "hag_quality_culled_edges",
)

# The suites as `hag check` runs them, in a process of their own (DATABASE_URL inherited).
SUITES_CHILD = """
import json, resource, time
start = time.perf_counter()
from hag import quality
imported = quality.import_gx()
result = quality.run_all()
print(json.dumps({
    "seconds": time.perf_counter() - start,
    "import_seconds": imported,
    "suites": [[s.suite, s.rows, s.evaluated, s.seconds] for s in result.suites],
    "failures": [f.line() for f in result.failures],
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""

LOAD_ENTRIES = """
INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence,
                         instruction, embedding, success_count, failure_count, created_at, updated_at)
SELECT 'topic-' || (i %% 50), 'c-' || i, 'public',
       (ARRAY['candidate', 'candidate', 'pattern', 'pattern', 'proven'])[1 + (i %% 5)],
       random(), 'advice ' || i, '[1,0,0,0,0,0,0,0]',
       (random() * 12)::int, (random() * 4)::int, %(as_of)s - random() * interval '400 days',
       %(as_of)s - interval '1 day'
FROM generate_series(1, %(n)s) AS i
"""

# Edge i goes from entry i to entry i + 2 + (i mod 1000): unique identities, no self-loops.
# Provenance 20% seed, 60% learned (prerequisites, the type learner reports name most;
# with `sequences`, a third of them `leads_to` and `fallback`), 20% enriched; half below
# 0.35; 70% never traversed; created over the last 400 days (about 78% at least 90 days old).
LOAD_EDGES = """
INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, confidence, hit_count,
                       source_type, traversal_count, created_at, updated_at)
SELECT s.id, t.id,
       CASE WHEN %(sequences)s AND n.i %% 5 = 3 THEN (ARRAY['leads_to', 'fallback'])[1 + n.i / 5 %% 2]
            WHEN n.i %% 5 IN (1, 2, 3) THEN 'prerequisite' ELSE 'related' END,
       0.05 + random() * 0.6, 1,
       (ARRAY['seed', 'learned', 'learned', 'learned', 'enriched'])[1 + (n.i %% 5)],
       CASE WHEN random() < 0.7 THEN 0 ELSE 1 + (random() * 5)::int END,
       n.at, n.at
FROM (SELECT i, %(as_of)s - random() * interval '400 days' AS at
      FROM generate_series(1, %(n)s) AS i) AS n
JOIN numbered s ON s.n = n.i
JOIN numbered t ON t.n = (n.i + 1 + (n.i %% 1000)) %% %(n)s + 1
"""

# Each learned edge's learner reports (`REPORTS` each, learners among 5,000): under the
# evidence profile a learned edge is made by a learner's report, and the cull copies its
# reports beside its audit row and takes them out of the kept sums. Written with the
# triggers on, so the sums the cull updates are there.
LOAD_REPORTS = """
INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, reported_at)
SELECT e.id, 's-' || g || '-' || e.id, 'learner-' || abs(hashtext(e.id::text || g)) %% 5000,
       1, 1, e.created_at
FROM hag_edges e CROSS JOIN generate_series(1, %(reports)s) AS g
WHERE e.source_type = 'learned'
"""

# The cull rule written out as a bare DELETE (no audit, no report), its values bound from the
# same dials the sweep reads (hag.nightly.sweeps.sweep_parameters).
BARE_DELETE = """
DELETE FROM hag_edges
WHERE source_type = ANY (%(cull_source_types)s) AND confidence < %(cull_max_confidence)s
  AND traversal_count <= %(cull_max_traversals)s
  AND created_at <= %(as_of)s - make_interval(days => %(cull_min_age_days)s)
"""


def _start_server(folder: Path) -> tuple[object, str]:
    """The bench's server, with `SHARED_BUFFERS`: at PostgreSQL's default (128 MB) a 1M + 1M
    memory does not fit, and the sweeping backend writes out the dirty pages it evicts."""
    import psycopg

    from hag.storage import db

    server = db.embedded_server(folder / "pgdata")
    with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
        if conn.execute("SHOW shared_buffers").fetchone()[0] != SHARED_BUFFERS:
            conn.execute(f"ALTER SYSTEM SET shared_buffers = '{SHARED_BUFFERS}'")
            restart = True
        else:
            restart = False
    if restart:
        server.stop()
        server.start()  # the same object: get_server would hand back the stopped instance
    return server, str(server.get_uri())


def _load(conn, n: int) -> None:
    t = time.perf_counter()
    params = {"n": n, "as_of": AS_OF, "sequences": SEQUENCES}
    conn.execute("SET session_replication_role = replica")  # bulk load: no history rows
    conn.execute(
        "INSERT INTO hag_topics (topic_id, title) "
        "SELECT 'topic-' || i, 'Topic ' || i FROM generate_series(0, 49) i"
    )
    conn.execute(LOAD_ENTRIES, params)
    conn.execute(
        "CREATE TEMP TABLE numbered AS "
        "SELECT row_number() OVER (ORDER BY id) AS n, id FROM hag_entries"
    )
    conn.execute("CREATE INDEX ON numbered (n)")
    conn.execute(LOAD_EDGES, params)
    conn.execute("SET session_replication_role = origin")
    reports = conn.execute(LOAD_REPORTS, {"reports": REPORTS}).rowcount if REPORTS else 0
    if PROFILE != "seed":  # its dials only: the stored confidences stay the load's
        from hag import settings

        settings.apply_profile(conn, PROFILE, by="bench")
    conn.commit()
    conn.autocommit = True
    conn.execute("VACUUM ANALYZE hag_entries")
    conn.execute("VACUUM ANALYZE hag_edges")
    conn.execute("VACUUM ANALYZE hag_edge_learner_reports")
    conn.autocommit = False
    print(
        f"loaded {n:,} entries, {n:,} edges and {reports:,} learner reports "
        f"in {time.perf_counter() - t:.1f} s",
        flush=True,
    )


def _settle_sequences(conn) -> None:
    """The sequence edges at their formula, as a night before this one left them: the
    night's first pass then re-weighs a settled memory, as it would in service, and the cull
    (and the bare DELETE beside it) judges the same confidences."""
    from hag import settings
    from hag.nightly import sweeps

    t = time.perf_counter()
    summary = sweeps.NightlySummary(run_id=None, as_of=AS_OF, dry_run=False)
    sweeps._reweigh_sequences(conn, summary, settings.load(conn))
    conn.commit()
    print(
        f"sequence edges settled: {summary.sequence_reweighed:,} moved "
        f"in {time.perf_counter() - t:.1f} s",
        flush=True,
    )


def _backend_cpu(conn) -> float:
    """CPU seconds the connection's server process has used (user + system): the work, which
    a loaded machine stretches far less than the wall time it takes."""
    pid = conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _server_cpu_by_step(conn, into: dict[str, float]):
    """While the sweep runs, each of its timed steps also adds the server CPU it used to
    `into` (the sweep's `timed` blocks, wrapped): the cull's CPU beside the bare DELETE's is
    a ratio that load stretches far less than the wall times'."""
    from hag.nightly import sweeps

    plain = sweeps.timed

    @contextlib.contextmanager
    def timed(seconds: dict[str, float], step: str):
        cpu = _backend_cpu(conn)
        try:
            with plain(seconds, step):
                yield
        finally:
            into[step] = into.get(step, 0.0) + _backend_cpu(conn) - cpu

    sweeps.timed = timed
    try:
        yield into
    finally:
        sweeps.timed = plain


def _checkpoint(conn) -> None:
    """Start the bare DELETE and the sweep each from a checkpoint. The first change to a page
    after a checkpoint writes the whole page to the WAL (8 kB), later ones only the change.
    The bare DELETE ran right after the load's VACUUM had written its pages, and the cull
    after 630 MB of promotion and archive WAL (measured at 1M): whether each paid for whole
    pages depended on where the load's checkpoints fell, and the cull's ratio counted the
    difference as the audit's price (9.2x of CPU at load 12 on 2026-12-02, 4.3-5.9x from a
    checkpoint). From a checkpoint both pay their first writes, as a nightly run does."""
    conn.rollback()
    conn.autocommit = True
    conn.execute("CHECKPOINT")
    conn.autocommit = False


def _bare_delete(conn, *, with_reports: bool = False) -> tuple[float, int]:
    """The cull's rows deleted bare (no trigger, so no audit), rolled back: the edges, or the
    edges and their learner reports (what the cull removes, nothing kept beside it)."""
    conn.execute("SET LOCAL session_replication_role = replica")  # no audit trigger: bare
    from hag import settings  # after DATABASE_URL is set
    from hag.nightly import sweeps

    params = sweeps.sweep_parameters(settings.load(conn), AS_OF, uuid.uuid4())
    statement = BARE_DELETE
    if with_reports:
        statement = (
            f"WITH gone AS ({BARE_DELETE} RETURNING id), reports AS ("
            "DELETE FROM hag_edge_learner_reports r USING gone WHERE r.edge_id = gone.id) "
            "SELECT count(*) AS n FROM gone"
        )
    t = time.perf_counter()
    cursor = conn.execute(statement, params)
    deleted = cursor.fetchone()["n"] if with_reports else cursor.rowcount
    seconds = time.perf_counter() - t
    conn.rollback()
    return seconds, deleted


def _view_pass(conn) -> float:
    """The baseline: one pass over each quality view that builds every column of every row."""
    from psycopg import sql

    t = time.perf_counter()
    for view in QUALITY_VIEWS:
        conn.execute(sql.SQL("SELECT count(v.*) FROM {} v").format(sql.Identifier(view))).fetchone()
    conn.rollback()
    return time.perf_counter() - t


def _suites() -> dict:
    """Run every suite in a child process; its timings, peak memory and any failure."""
    done = subprocess.run(
        [sys.executable, "-c", SUITES_CHILD], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"the suites failed to run:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _print_suites(checked: dict, floor_seconds: float) -> None:
    validation = checked["seconds"] - checked["import_seconds"]
    for suite, rows, evaluated, seconds in checked["suites"]:
        print(
            f"  suite {suite:<13} {evaluated:2d} expectations over {rows:>9,} rows: {seconds:6.2f} s"
        )
    print(
        f"data-quality suites (child process, as hag check): {checked['seconds']:6.2f} s "
        f"[import {checked['import_seconds']:.2f} s, the rest {validation:.2f} s], "
        f"peak memory {checked['peak_rss_mb']:.0f} MB"
    )
    print(f"baseline: one pass over every quality view: {floor_seconds:6.2f} s")
    print(f"ratio suites less import / one pass:        {validation / floor_seconds:6.1f}x")
    if ROWS == 1_000_000:
        record("nightly.suites_seconds", checked["seconds"])
    verdict = "within" if checked["seconds"] <= SUITES_TARGET_SECONDS else "OVER"
    print(
        f"target {SUITES_TARGET_SECONDS:.0f} s: {verdict} ({checked['seconds']:.1f} s)", flush=True
    )
    assert not checked["failures"], checked["failures"]


def _record(summary, bare_seconds: float) -> None:
    """The figures the regression check compares (bench/recorded.json)."""
    record("nightly.sweep_seconds", summary.seconds)
    for step in ("promotion", "archive", "cull"):
        record(f"nightly.{step}_seconds", summary.step_seconds[step])
    record("nightly.bare_delete_seconds", bare_seconds)
    record("nightly.cull_over_bare_delete", summary.step_seconds["cull"] / bare_seconds)


def _evidence_reads(conn) -> None:
    """The re-weigh's read (`store.prerequisite_evidence`) over the first EVIDENCE_SIZES
    concepts of the swept memory, each size timed alone, and what each concept beyond the
    previous size cost: a session-end pass reads one concept or a few, a nightly the concepts
    its cull and the flags touched, a few or hundreds of thousands. One concept's read is
    the fixed part (it counted every entry of the concept's topic graph, 21-35 ms for a topic
    of 20,000, until migration 228 kept the counts). From 1,000 concepts on, a read that
    grows about linearly (its windows sort, n log n) costs about the same per concept at
    every size. It took 5x more per concept at 5,000 than at 12,000 when the planner chose a
    nested loop over two of the query's CTEs: the ratio printed is the costliest step's cost
    per concept over the last one's (1.4x at 1M when it was measured; 18x before)."""
    from hag import settings
    from hag.evidence import store

    dials = settings.load(conn)
    sources = store.prerequisite_sources(conn)[: max(EVIDENCE_SIZES)]
    sizes = [n for n in EVIDENCE_SIZES if n <= len(sources)]
    seconds = {}
    for n in sizes:
        t = time.perf_counter()
        edges = len(store.prerequisite_evidence(conn, sources[:n], dials))
        seconds[n] = time.perf_counter() - t
        what = "concept" if n == 1 else "concepts"
        print(f"evidence read, {n:,} {what} ({edges:,} edges): {seconds[n]:6.3f} s", flush=True)
    conn.rollback()
    grown = sizes[1:]  # past the one concept's fixed part
    steps = [
        (b, (seconds[b] - seconds[a]) / (b - a)) for a, b in zip(grown, grown[1:], strict=False)
    ]
    if steps:
        print(
            "evidence read per concept beyond the size before: "
            + ", ".join(f"to {n:,} {c * 1e6:.0f} us" for n, c in steps)
            + f"; costliest / the last {max(c for _, c in steps) / max(steps[-1][1], 1e-9):.1f}x",
            flush=True,
        )


def _swept(conn) -> bool:
    return conn.execute("SELECT count(*) AS n FROM hag_quality_cull_runs").fetchone()["n"] > 0


def main() -> None:
    kept = os.environ.get("HAG_BENCH_NIGHTLY_DIR")
    folder = Path(kept) if kept else Path(tempfile.mkdtemp(prefix="hag-bench-nightly-"))
    server = None
    previous = os.environ.get("DATABASE_URL")
    try:
        server, url = _start_server(folder)
        os.environ["DATABASE_URL"] = url
        from hag import config
        from hag.nightly import sweeps
        from hag.storage import db, migrate

        config.reset_config()
        db.close_all()
        with db.connect() as conn:
            migrate.migrate(conn, 8)
            again = _swept(conn)
            conn.rollback()
        if again:  # a kept folder, loaded and swept before: the suites alone
            print(f"suites only, on the memory kept in {folder}", flush=True)
            with db.connect() as conn:
                floor_seconds = _view_pass(conn)
            _print_suites(_suites(), floor_seconds)
            return
        with db.connect() as conn:
            _load(conn, ROWS)
            conn.execute("SELECT count(*) FROM hag_edges").fetchone()  # warm both tables alike
            conn.execute("SELECT count(*) FROM hag_entries").fetchone()
            conn.rollback()
            if SEQUENCES:
                _settle_sequences(conn)
            _checkpoint(conn)
            cpu = _backend_cpu(conn)
            bare_seconds, bare_rows = _bare_delete(conn)
            bare_cpu = _backend_cpu(conn) - cpu
            _checkpoint(conn)
            cpu = _backend_cpu(conn)
            with_reports_seconds, _ = _bare_delete(conn, with_reports=True)
            with_reports_cpu = _backend_cpu(conn) - cpu
            forecast = sweeps.sweep(conn, as_of=AS_OF, dry_run=True)
            _checkpoint(conn)
            cpu = _backend_cpu(conn)
            with _server_cpu_by_step(conn, {}) as step_cpu:
                summary = sweeps.sweep(conn, as_of=AS_OF)
            sweep_cpu = _backend_cpu(conn) - cpu
            audited = conn.execute("SELECT count(*) AS n FROM hag_edge_audit").fetchone()["n"]
            kept_reports = conn.execute(
                "SELECT count(*) AS n FROM hag_edge_audit_reports"
            ).fetchone()["n"]
            learned_culled = conn.execute(
                "SELECT count(*) AS n FROM hag_edge_audit WHERE source_type = 'learned'"
            ).fetchone()["n"]
            conn.rollback()
        assert 0 < summary.culled == bare_rows == forecast.culled == audited, (
            summary.culled,
            bare_rows,
            forecast.culled,
            audited,
        )
        assert kept_reports == REPORTS * learned_culled, (kept_reports, learned_culled)
        steps = ", ".join(f"{k} {v:.1f} s" for k, v in summary.step_seconds.items())
        print(
            f"rows: {ROWS:,} entries + {ROWS:,} edges; culled {summary.culled:,} edges "
            f"(audited {audited:,}, their {kept_reports:,} learner reports kept beside them), "
            f"promoted {summary.promotions:,}, archived {summary.archived:,}"
        )
        print(f"nightly sweep (one transaction, audited): {summary.seconds:6.2f} s   [{steps}]")
        print(f"dry run of the same sweep:                 {forecast.seconds:6.2f} s")
        print(f"baseline: bare DELETE of the same rows:    {bare_seconds:6.2f} s")
        print(f"ratio sweep / bare DELETE:                 {summary.seconds / bare_seconds:6.1f}x")
        print(
            f"server CPU: sweep {sweep_cpu:.2f} s, bare DELETE {bare_cpu:.2f} s "
            f"(ratio {sweep_cpu / max(bare_cpu, 0.01):.1f}x): the work, less stretched by load"
        )
        cull = summary.step_seconds["cull"]
        cull_cpu_ratio = step_cpu["cull"] / max(bare_cpu, 0.01)
        print(f"ratio audited cull step / bare DELETE:     {cull / bare_seconds:6.1f}x")
        print(
            f"baseline: bare DELETE of the edges and their reports: {with_reports_seconds:.2f} s; "
            f"audited cull / it: {cull / with_reports_seconds:.1f}x, server CPU "
            f"{step_cpu['cull'] / max(with_reports_cpu, 0.01):.1f}x"
        )
        print(
            "server CPU by step: "
            + ", ".join(f"{k} {v:.2f} s" for k, v in step_cpu.items() if v >= 0.005)
            + f"; audited cull / bare DELETE: {cull_cpu_ratio:.1f}x"
        )
        verdict = "within" if summary.seconds <= TARGET_SECONDS else "OVER"
        print(f"target {TARGET_SECONDS:.0f} s: {verdict} ({summary.seconds:.1f} s)", flush=True)
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        print(f"server shared_buffers: {SHARED_BUFFERS}", flush=True)
        if summary.sequence_reweighed or summary.sequence_reweighed_after_cull:
            print(
                f"sequence edges re-weighed: {summary.sequence_reweighed:,} before the cull, "
                f"{summary.sequence_reweighed_after_cull:,} after it"
            )
        if ROWS == 1_000_000 and REPORTS == 1 and not SEQUENCES:  # this shape's figures
            _record(summary, bare_seconds)
            record("nightly.sweep_server_cpu_seconds", sweep_cpu)
            record("nightly.cull_cpu_over_bare_delete_cpu", cull_cpu_ratio)
        with db.connect() as conn:
            floor_seconds = _view_pass(conn)
        _print_suites(_suites(), floor_seconds)
        with db.connect() as conn:  # after the suites, which measure the first night's memory
            _checkpoint(conn)
            cpu = _backend_cpu(conn)
            after = sweeps.sweep(conn, as_of=AS_OF + timedelta(days=1))
            after_cpu = _backend_cpu(conn) - cpu
        after_steps = ", ".join(f"{k} {v:.1f} s" for k, v in after.step_seconds.items())
        print(
            f"the night after (culled {after.culled:,}, re-weighed {after.reweighed:,} edges, "
            f"flagged concepts {after.pending_reweighed:,}): {after.seconds:6.2f} s, "
            f"server CPU {after_cpu:.2f} s   [{after_steps}]; first night / night after: "
            f"{summary.seconds / max(after.seconds, 0.01):.1f}x",
            flush=True,
        )
        with db.connect() as conn:
            _evidence_reads(conn)
    finally:
        from hag.storage import db

        db.close_all()
        if previous is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = previous
        if server is not None:
            server.stop()
        if not kept:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
