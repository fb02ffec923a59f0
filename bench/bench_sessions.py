"""Session-end throughput: 1,000 sessions of 20 turns through the flow, beside bare SQL.

The baseline is the same work as bare SQL: the exact statements (and parameters) that the
pipeline sends for each session are recorded once, the database is reset, and they are
replayed one transaction per session with no Python rules, no pydantic and no Prefect.
Then the same sessions go through `process_pending` (no Prefect) and through the
session-end flow (Prefect, warmed up first; the expectation suites are timed apart).

Then the scale-out part: sessions per minute at 1, 2 and 4 workers, as threads
(`process_pending(workers=n)`) and as separate processes, on a *hot* world (every session
on the same rows) and a *spread* one (disjoint groups), with the evidence for where it stops
scaling: samples of pg_stat_activity's wait events, the CPU of the workers and of the
server's processes, WAL per session, and the load average beside every figure.

Run: `python -m bench sessions` (a private embedded PostgreSQL in a temporary folder);
`HAG_BENCH_SESSIONS_PARTS=scale` (or `flow`) runs one part, `HAG_BENCH_SCALE_SESSIONS`
sets the sessions per scale-out run (default: `HAG_BENCH_SESSIONS`, 1,000).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from psycopg.types.json import Jsonb

SESSIONS = int(os.environ.get("HAG_BENCH_SESSIONS", "1000"))
SCALE_SESSIONS = int(os.environ.get("HAG_BENCH_SCALE_SESSIONS", str(SESSIONS)))
SCALE_WORKERS = (1, 2, 4)
SPREAD_GROUPS = 8
SAMPLE_SECONDS = 0.05
# Which parts to run: "flow" (bare SQL, process_pending, the flow) and "scale" (workers).
PARTS = set(os.environ.get("HAG_BENCH_SESSIONS_PARTS", "flow,scale").split(","))
TURNS = 20
ENTRIES = 30
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def _entry_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=10_000 + k)


def _edge_id(k: int) -> uuid.UUID:
    return uuid.UUID(int=20_000 + k)


def _edges() -> list[tuple[int, int, str]]:
    rng = random.Random(1)
    out: set[tuple[int, int, str]] = set()
    while len(out) < 2 * ENTRIES:
        s, t = rng.sample(range(ENTRIES), 2)
        out.add((s, t, rng.choice(["prerequisite", "leads_to", "related", "fallback"])))
    return sorted(out)


EDGES = _edges()


def _group_edges(groups: int) -> list[tuple[int, tuple[int, int, str]]]:
    """(edge index, (source, target, type)) of every group; group g owns entries g*ENTRIES…"""
    return [
        (g * len(EDGES) + k, (g * ENTRIES + s, g * ENTRIES + t, kind))
        for g in range(groups)
        for k, (s, t, kind) in enumerate(EDGES)
    ]


def build_world(conn: Any, groups: int = 1) -> None:
    """The topic, its concepts and entries, and the seed edges; `groups` disjoint copies."""
    from pgvector import Vector

    from hag.vectors.embeddings import embed_texts

    conn.execute(
        "TRUNCATE hag_edge_audit, hag_confidence_history, hag_session_quarantine, hag_sessions, "
        "hag_learner_successes, hag_runs, hag_edges, hag_entries, hag_concepts, hag_topics "
        "RESTART IDENTITY CASCADE"
    )
    conn.execute("INSERT INTO hag_topics (topic_id, title) VALUES ('cryptography', 'Cryptography')")
    texts = [
        f"Advice about concept {k}: explain it with a small worked example."
        for k in range(ENTRIES * groups)
    ]
    vectors = embed_texts(texts)
    for k in range(ENTRIES * groups):
        conn.execute(
            "INSERT INTO hag_concepts (topic_id, slug, title, description, embedding) "
            "VALUES ('cryptography', %s, %s, %s, %s)",
            (f"concept-{k}", f"Concept {k}", texts[k], Vector(vectors[k])),
        )
        conn.execute(
            "INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, confidence, "
            "instruction, embedding, created_at, updated_at) VALUES (%s, 'cryptography', %s, 'public', %s, "
            "0.6, %s, %s, %s, %s)",
            (
                _entry_id(k),
                f"concept-{k}",
                ["candidate", "pattern", "proven"][k % 3],
                texts[k],
                Vector(vectors[k]),
                T0 - timedelta(days=30),
                T0 - timedelta(days=30),
            ),
        )
    for k, (s, t, kind) in _group_edges(groups):
        conn.execute(
            "INSERT INTO hag_edges (id, source_entry_id, target_entry_id, edge_type, confidence, source_type, "
            "created_at, updated_at) VALUES (%s, %s, %s, %s, 0.5, 'seed', %s, %s)",
            (
                _edge_id(k),
                _entry_id(s),
                _entry_id(t),
                kind,
                T0 - timedelta(days=30),
                T0 - timedelta(days=30),
            ),
        )
    conn.commit()


def sessions(count: int = SESSIONS, groups: int = 1) -> list[dict[str, Any]]:
    """Realistic-looking sessions: a decision per turn, its edges rendered, some struggles.

    With `groups` > 1, session i works in group i mod groups only (its own entries, edges,
    learners and new concept names), so sessions of different groups share no row.
    """
    rng = random.Random(7)
    by_source: dict[int, list[int]] = {}
    for k, (s, _, _) in _group_edges(groups):
        by_source.setdefault(s, []).append(k)
    out = []
    for i in range(count):
        g = i % groups
        suffix = f" g{g}" if groups > 1 else ""
        turns = []
        for t in range(TURNS):
            d = g * ENTRIES + rng.randrange(ENTRIES)
            struggles = (
                [
                    {
                        "concept_slug": f"concept-{d}",
                        "missing_slug": f"concept-{g * ENTRIES + rng.randrange(ENTRIES)}",
                        "evidence": "I don't see where that comes from",
                    }
                ]
                if rng.random() < 0.1
                else []
            )
            observations = (
                [
                    {
                        "graph": rng.choice(["topic", "student", "tutor"]),
                        "concept": rng.choice(
                            [
                                f"Concept {g * ENTRIES + rng.randrange(ENTRIES)}",
                                f"drift thing{suffix}",
                                f"visual learner{suffix}",
                            ]
                        ),
                        "text": f"Observed in session {i} turn {t}: draw it first.",
                    }
                ]
                if rng.random() < 0.05
                else []
            )
            turns.append(
                {
                    "turn_index": t,
                    "student_message": f"question {t} of session {i}",
                    "concept_slugs": [f"concept-{d}"],
                    "decision_entry_id": str(_entry_id(d)),
                    "used_entry_ids": [
                        str(_entry_id(d)),
                        str(_entry_id(g * ENTRIES + rng.randrange(ENTRIES))),
                    ],
                    "rendered_edge_ids": [str(_edge_id(k)) for k in by_source.get(d, [])[:2]],
                    "outcome": rng.choice(["success", "success", "failure", None]),
                    "outcome_strength": rng.choice([None, 0.5, 1.0]),
                    "struggles": struggles,
                    "observations": observations,
                }
            )
        out.append(
            {
                "session_id": f"bench-{i:05d}",
                "learner_id": f"learner-{i % 50}{suffix.replace(' ', '-')}",
                "topic_id": "cryptography",
                "ended_at": (T0 + timedelta(minutes=i)).isoformat(),
                "turns": turns,
            }
        )
    return out


def ingest_all(conn: Any, payloads: list[dict[str, Any]]) -> float:
    from hag.session.ingest import ingest_payload

    start = time.perf_counter()
    for p in payloads:
        assert ingest_payload(conn, p, source="bench").accepted
    conn.commit()
    return time.perf_counter() - start


class Recorder:
    """A connection stand-in that records every statement a session sends, per transaction,
    with the rows each returned (read, then rewound for the caller). Only `execute` is
    recorded; any other way of sending SQL fails here rather than go unrecorded."""

    def __init__(self, conn: Any):
        self.conn, self.current, self.transactions = conn, [], []

    def execute(self, statement: Any, params: Any = None) -> Any:
        cursor = self.conn.execute(statement, params)
        rows = None
        if cursor.description is not None:
            rows = [tuple(row.values()) for row in cursor.fetchall()]
            if rows:
                cursor.scroll(0, mode="absolute")
        self.current.append((statement, params, rows))
        return cursor

    @property
    def info(self) -> Any:  # the transaction status a session's rollback reads
        return self.conn.info

    @property
    def broken(self) -> bool:
        return bool(self.conn.broken)

    @property
    def closed(self) -> bool:
        return bool(self.conn.closed)

    def commit(self) -> None:
        self.conn.commit()
        self.transactions.append(self.current)
        self.current = []

    def rollback(self) -> None:
        self.conn.rollback()
        self.current = []


def _renamed(
    value: Any, ids: dict[uuid.UUID, uuid.UUID], named: set[uuid.UUID] | None = None
) -> Any:
    """A recorded parameter with the ids the database generated when recording replaced by the
    ones it generated on replay (an edge learned by session 3 is named again by session 9);
    every recorded id it names (uuids, id strings, inside lists, dicts, Jsonb) goes into
    `named`."""
    if isinstance(value, str) and len(value) == 36 and value.count("-") == 4:
        try:
            return str(_renamed(uuid.UUID(value), ids, named))
        except ValueError:
            return value
    if isinstance(value, uuid.UUID):
        if named is not None:
            named.add(value)
        return ids.get(value, value)
    if isinstance(value, Jsonb):
        return Jsonb(_renamed(value.obj, ids, named))
    if isinstance(value, dict):
        return {k: _renamed(v, ids, named) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_renamed(v, ids, named) for v in value)
    return value


def _leaves(value: Any) -> list[Any]:
    """A returned row as the flat list of its values, ids found wherever they sit (a column,
    an array, json: uuids and id strings alike, as uuids), dict keys in sorted order,
    timestamps left out (`now()` differs on replay), floats to 9 places (sums may add in
    another order), arrays and vectors opened."""
    if isinstance(value, datetime):
        return []
    if isinstance(value, str) and len(value) == 36 and value.count("-") == 4:
        try:
            return [uuid.UUID(value)]
        except ValueError:
            return [value]
    if isinstance(value, dict):
        leaves: list[Any] = []
        for k in sorted(value):
            leaves += [("key", k), *_leaves(value[k])]
        return leaves
    if hasattr(value, "tolist") or hasattr(value, "to_list"):  # numpy arrays, vectors
        value = value.tolist() if hasattr(value, "tolist") else value.to_list()
    if isinstance(value, list | tuple):
        return [("open", len(value)), *(leaf for v in value for leaf in _leaves(v))]
    if isinstance(value, float):
        return [round(value, 9)]
    return [value]


_FRESH = object()  # a row's id that nothing before it named: one the database generated


class IdMap:
    """Recorded ids the database generated, mapped to the ones it generated on replay.

    A returned row is matched by its other values (ids already known mapped, timestamps
    left out: `now()` differs), never by its position (a RETURNING or an ORDER BY id may
    list rows in another order on replay); a fresh id mapped twice two ways stops the
    replay."""

    def __init__(self) -> None:
        self.ids: dict[uuid.UUID, uuid.UUID] = {}
        self.known: set[uuid.UUID] = set()  # recorded ids named so far
        self.known_now: set[uuid.UUID] = set()  # the same, as the replay has them

    def name(self, params: Any) -> Any:
        named: set[uuid.UUID] = set()
        renamed = _renamed(params, self.ids, named)
        for u in named - self.known:
            self.known.add(u)
            self.known_now.add(self.ids.get(u, u))
        return renamed

    def _key(self, row: tuple[Any, ...], known: set[uuid.UUID], rename: bool) -> tuple[Any, ...]:
        return tuple(
            _FRESH if isinstance(v, uuid.UUID) and v not in known
            else (self.ids.get(v, v) if rename and isinstance(v, uuid.UUID) else v)
            for v in _leaves(row)
        )  # fmt: skip

    def match(self, statement: Any, recorded: list[tuple[Any, ...]], now: list[Any]) -> None:
        rows = [tuple(r.values()) for r in now]
        if len(rows) != len(recorded):
            raise AssertionError(
                f"{len(rows)} rows on replay, {len(recorded)} recorded: {statement}"
            )
        # an id in both results is the world's (a generated one never repeats): known as itself
        found = {v for row in recorded for v in _leaves(row) if isinstance(v, uuid.UUID)}
        again = {v for row in rows for v in _leaves(row) if isinstance(v, uuid.UUID)}
        for v in (found & again) - self.known:
            self.known.add(v)
            self.known_now.add(v)
        waiting: dict[tuple[Any, ...], list[tuple[Any, ...]]] = {}
        for row in rows:
            waiting.setdefault(self._key(row, self.known_now, False), []).append(row)
        for was in recorded:
            candidates = waiting.get(self._key(was, self.known, True))
            if not candidates:
                raise AssertionError(f"no replayed row matches {was}: {statement}")
            fresh_here = any(isinstance(v, uuid.UUID) and v not in self.known for v in _leaves(was))
            if fresh_here and len(candidates) > 1:
                raise AssertionError(f"{len(candidates)} replayed rows match {was}: {statement}")
            got = candidates.pop(0)
            for a, b in zip(_leaves(was), _leaves(got), strict=True):
                fresh = isinstance(a, uuid.UUID) and a not in self.known
                if fresh and self.ids.setdefault(a, b) != b:
                    raise AssertionError(f"id {a} replayed as {self.ids[a]} and {b}")
        for v in found - self.known:
            self.known.add(v)
            self.known_now.add(self.ids.get(v, v))


def replay(conn: Any, trace: list[list[tuple[Any, Any, Any]]]) -> tuple[float, float]:
    """Send the recorded statements again, one transaction per session, reading every result
    (as the pipeline does) and carrying generated ids forward: (seconds in all, seconds of
    them spent renaming ids, to take out of the baseline)."""
    ids = IdMap()
    renaming = 0.0
    start = time.perf_counter()
    for statements in trace:
        for statement, params, recorded in statements:
            t = time.perf_counter()
            named = ids.name(params)
            renaming += time.perf_counter() - t
            cursor = conn.execute(statement, named)
            if recorded is None:
                continue
            now = cursor.fetchall()
            t = time.perf_counter()
            ids.match(statement, recorded, now)
            renaming += time.perf_counter() - t
        conn.commit()
    return time.perf_counter() - start, renaming


def fingerprint(conn: Any) -> str:
    """What the sessions left in the memory, by natural identity (concept and text for an
    entry, the ends' identities and type for an edge), ids and wall-clock times aside: the
    replay must leave the same. A digest of the sorted rows of entries, edges, learner
    reports, sessions and confidence history."""
    return str(
        conn.execute(
            """
            WITH ent AS (
                SELECT id, concept_slug || ':' || md5(instruction) AS ident FROM hag_entries
            ), parts AS (
                SELECT 'entry' AS kind, ident || ' ' || e.topic_id || ' ' || e.visibility_scope
                       || ' ' || e.maturity || ' ' || round(e.confidence::numeric, 9) || ' '
                       || e.success_count || ' ' || e.failure_count AS line
                FROM hag_entries e JOIN ent USING (id)
                UNION ALL
                SELECT 'edge', s.ident || '>' || t.ident || ' ' || g.edge_type || ' '
                       || g.source_type || ' ' || round(g.confidence::numeric, 9) || ' '
                       || g.hit_count || ' ' || g.traversal_count || ' '
                       || COALESCE(round(g.prior_confidence::numeric, 9)::text, '-')
                FROM hag_edges g JOIN ent s ON s.id = g.source_entry_id
                JOIN ent t ON t.id = g.target_entry_id
                UNION ALL
                SELECT 'report', s.ident || '>' || t.ident || ' ' || g.edge_type || ' '
                       || r.session_id || ' ' || r.learner_id || ' ' || r.turns || ' '
                       || round(r.share::numeric, 9)
                FROM hag_edge_learner_reports r JOIN hag_edges g ON g.id = r.edge_id
                JOIN ent s ON s.id = g.source_entry_id JOIN ent t ON t.id = g.target_entry_id
                UNION ALL
                SELECT 'bridged', session_id || ' ' || concept_slug || ' ' || supplied_slug
                FROM hag_learner_bridged
                UNION ALL
                SELECT 'session', session_id || ' ' || status || ' ' || COALESCE(applied_seq, 0)
                FROM hag_sessions
                UNION ALL
                SELECT 'history', entity_kind || ' ' || count(*) || ' '
                       || round(sum(new_value)::numeric, 6)
                FROM hag_confidence_history GROUP BY entity_kind
            )
            SELECT count(*) || ' ' || md5(string_agg(kind || ' ' || line, E'\n'
                                                      ORDER BY kind, line)) AS digest
            FROM parts
            """
        ).fetchone()["digest"]
    )


class Sampler:
    """Samples, every `SAMPLE_SECONDS` while a run lasts, what the database's sessions do and
    the CPU the server's processes used: the evidence for where scaling stops."""

    def __init__(self, url: str, postmaster_pid: int):
        import psutil

        self.url, self.postmaster = url, psutil.Process(postmaster_pid)
        self.waits: dict[str, int] = {}
        self.cpu: dict[int, tuple[float, float]] = {}  # pid -> (first seen, last seen)
        self.own_cpu = 0.0  # the sampler's own CPU, taken off the client's in thread mode
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._stop.clear()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _server_cpu(self) -> None:
        import psutil

        for proc in [self.postmaster, *self.postmaster.children()]:
            try:
                times = proc.cpu_times()
            except psutil.Error:
                continue
            used = times.user + times.system
            first = self.cpu.get(proc.pid, (used, used))[0]
            self.cpu[proc.pid] = (first, used)

    def _run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            me = conn.info.backend_pid
            self._server_cpu()
            while not self._stop.wait(SAMPLE_SECONDS):
                for state, kind, event in conn.execute(
                    "SELECT state, wait_event_type, wait_event FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND pid <> %s "
                    "AND state IN ('active', 'idle in transaction')",
                    (me,),
                ).fetchall():
                    if state == "idle in transaction":
                        label = "in transaction, waiting for the client (Python)"
                    elif kind is None:
                        label = "running on CPU"
                    else:
                        label = f"{kind}:{event}"
                    self.waits[label] = self.waits.get(label, 0) + 1
                self._server_cpu()
        self.own_cpu = time.thread_time()

    @property
    def server_cpu_seconds(self) -> float:
        return sum(last - first for first, last in self.cpu.values())


def machine_cpu() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine since boot, from /proc/stat."""
    fields = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def wal_counters(conn: Any) -> tuple[int, int, int]:
    """(bytes, records, full-page images) of WAL written since the server started."""
    row = conn.execute(
        "SELECT pg_current_wal_lsn() - '0/0' AS b, wal_records, wal_fpi FROM pg_stat_wal"
    ).fetchone()
    return int(row["b"]), int(row["wal_records"]), int(row["wal_fpi"])


def worker_process() -> None:
    """One separate worker process: warm up, say ready, wait for 'go', drain, print totals."""
    import json
    import resource
    import sys

    from hag import settings
    from hag.session.process import process_pending
    from hag.storage import db

    with db.pool().connection() as conn:
        conn.execute("SELECT 1")
    settings.current()

    def cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    warm = cpu()  # imports and connecting are not the run's work
    print("ready", flush=True)
    sys.stdin.readline()
    summary = process_pending()
    print(
        json.dumps(
            {
                "sessions": summary.sessions,
                "rejects": summary.rejects,
                "retries": summary.retries,
                "cpu": cpu() - warm,
            }
        ),
        flush=True,
    )
    db.close_all()


def drain_with_processes(workers: int) -> tuple[float, int, int, float]:
    """`workers` separate processes drain the queue; (seconds, sessions, retries, their CPU s)."""
    import json
    import subprocess
    import sys

    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.bench_sessions", "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parent.parent,
        )
        for _ in range(workers)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        start = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [
            json.loads(proc.communicate(timeout=1800)[0].strip().splitlines()[-1]) for proc in procs
        ]
        seconds = time.perf_counter() - start
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert all(r["rejects"] == 0 for r in results), results
    return (
        seconds,
        sum(r["sessions"] for r in results),
        sum(r["retries"] for r in results),
        sum(r["cpu"] for r in results),
    )


def scale_out(server: Any) -> None:
    """Sessions per minute at 1, 2 and 4 workers (threads, processes), hot and spread worlds."""
    from hag.session.process import process_pending
    from hag.storage import db

    url = db.database_url()
    print(
        f"\nscale-out: {SCALE_SESSIONS} sessions per run, the same database; 'hot': every session "
        f"shares the same {ENTRIES} entries and {len(EDGES)} edges; 'spread': {SPREAD_GROUPS} "
        f"disjoint groups (session i in group i mod {SPREAD_GROUPS}); {os.cpu_count()} cores"
    )
    header = (
        f"  {'world':6} {'mode':9} {'n':>2} {'seconds':>8} {'sess/min':>9} {'speed-up':>8} "
        f"{'retries':>7} {'py cpu s':>8} {'pg cpu s':>8} {'busy %':>6} {'load1':>11} "
        f"{'cpu ms/session':>14} {'WAL kB/session':>14} {'records':>7} {'FPI':>5}"
    )
    evidence = []
    for world, groups in (("hot", 1), ("spread", SPREAD_GROUPS)):
        payloads = sessions(SCALE_SESSIONS, groups)
        print(header)
        base: float | None = None
        for mode in ("threads", "processes"):
            for n in SCALE_WORKERS:
                with db.connect() as conn:
                    build_world(conn, groups)
                    ingest_all(conn, payloads)
                    conn.execute("CHECKPOINT")  # no checkpoint of the set-up inside the run
                    conn.execute("SELECT pg_stat_force_next_flush()")
                    wal_before = wal_counters(conn)
                    conn.commit()
                load_before = os.getloadavg()[0]
                busy0, total0 = machine_cpu()
                py0 = time.process_time()
                with Sampler(url, server.get_pid()) as sampler:
                    if mode == "threads":
                        start = time.perf_counter()
                        summary = process_pending(workers=n)
                        seconds = time.perf_counter() - start
                        done, retries = summary.sessions, summary.retries
                        py_cpu = time.process_time() - py0
                    else:
                        seconds, done, retries, py_cpu = drain_with_processes(n)
                busy1, total1 = machine_cpu()
                load_after = os.getloadavg()[0]
                py_cpu -= sampler.own_cpu if mode == "threads" else 0.0
                time.sleep(0.6)  # backends report their WAL counters at most every 0.5 s
                with db.connect() as conn:
                    wal, records, fpi = (
                        a - b for a, b in zip(wal_counters(conn), wal_before, strict=True)
                    )
                assert done == SCALE_SESSIONS, (world, mode, n, done)
                rate = done / seconds * 60
                base = rate if base is None else base
                print(
                    f"  {world:6} {mode:9} {n:>2} {seconds:8.2f} {rate:9,.0f} "
                    f"{rate / base:8.2f} {retries:7d} {py_cpu:8.1f} "
                    f"{sampler.server_cpu_seconds:8.1f} "
                    f"{100 * (busy1 - busy0) / max(total1 - total0, 1):6.0f} "
                    f"{load_before:5.1f}->{load_after:4.1f} "
                    f"{1000 * (py_cpu + sampler.server_cpu_seconds) / done:14.1f} "
                    f"{wal / done / 1024:14.1f} {records / done:7.0f} {fpi / done:5.1f}",
                    flush=True,
                )
                evidence.append((world, mode, n, sampler.waits))
    print(
        "\n  what the database sessions were doing (share of samples taken every "
        f"{SAMPLE_SECONDS * 1000:.0f} ms; 4 workers):"
    )
    for world, mode, n, waits in evidence:
        if n != max(SCALE_WORKERS):
            continue
        total = sum(waits.values()) or 1
        top = sorted(waits.items(), key=lambda kv: -kv[1])[:5]
        print(f"  {world:6} {mode:9} " + "; ".join(f"{k} {100 * v / total:.0f}%" for k, v in top))


def flow_and_baseline() -> None:
    """Bare SQL, process_pending and the session-end flow over the same sessions."""
    from hag import settings
    from hag.session.process import process_pending
    from hag.session.queue import apply_pending_session
    from hag.session.steps import Caches
    from hag.session.summary import ProcessSummary
    from hag.storage import db
    from hag.vectors import embeddings

    payloads = sessions()
    print(
        f"{SESSIONS} sessions x {TURNS} turns; {ENTRIES} entries, {len(EDGES)} seed edges; "
        f"embedder {embeddings.get_embedder().name}"
    )
    with db.connect() as conn:
        build_world(conn)
        ingest_seconds = ingest_all(conn, payloads)
        # Record the exact statements of each session's transaction (untimed).
        recorder = Recorder(conn)
        summary = ProcessSummary()
        caches, dials = Caches(), settings.current()
        while apply_pending_session(recorder, dials, run_id=None, caches=caches, summary=summary):
            pass
        trace, recorded = recorder.transactions, fingerprint(conn)

        build_world(conn)
        ingest_all(conn, payloads)
        replayed_seconds, renaming = replay(conn, trace)
        bare = replayed_seconds - renaming  # the ids' renaming is the replay's, not the SQL's
        replayed = fingerprint(conn)
        assert replayed == recorded, f"the replay left {replayed}, the pipeline {recorded}"

        build_world(conn)
        ingest_all(conn, payloads)
    direct = process_pending()
    assert direct.sessions == SESSIONS, direct

    from flows.session_end import session_end_flow

    session_end_flow(check=False)  # warm-up: starts the temporary Prefect server
    with db.connect() as conn:
        build_world(conn)
        ingest_all(conn, payloads)
    start = time.perf_counter()
    result = session_end_flow(check=False)
    flow_seconds = time.perf_counter() - start
    assert result["sessions"] == SESSIONS, result
    start = time.perf_counter()
    try:
        from hag import quality

        quality.run_all()
        checks = f"{time.perf_counter() - start:.2f} s (once per flow run, not per session)"
    except Exception as exc:
        checks = f"not measured ({type(exc).__name__}: {str(exc).splitlines()[0][:80]})"

    def rate(seconds: float) -> str:
        return f"{seconds:7.2f} s  {SESSIONS / seconds * 60:9,.0f} sessions/min"

    print(f"  ingest (validate + queue)     {rate(ingest_seconds)}")
    print(f"  bare SQL (same statements)    {rate(bare)}   baseline")
    print(
        f"  process_pending (no Prefect)  {rate(direct.seconds)}   ratio {direct.seconds / bare:.2f}"
    )
    print(f"  session-end flow (Prefect)    {rate(flow_seconds)}   ratio {flow_seconds / bare:.2f}")
    print(f"  expectation suites            {checks}")
    steps = ", ".join(f"{k} {v:.2f} s" for k, v in direct.step_seconds.items())
    print(f"  time per step (no Prefect): {steps}")
    print(
        f"  goal: >= 1,000 sessions/min through the flow, ratio <= 2 "
        f"-> {'met' if SESSIONS / flow_seconds * 60 >= 1000 and flow_seconds / bare <= 2 else 'NOT met'}"
    )


def main() -> None:
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    from bench.private_db import migrated_server

    with migrated_server("hag-bench-sessions-") as (server, folder):
        os.environ.setdefault("PREFECT_HOME", str(folder / "prefect"))
        if "flow" in PARTS:
            flow_and_baseline()
        if "scale" in PARTS:
            scale_out(server)


if __name__ == "__main__":
    import sys

    worker_process() if sys.argv[1:] == ["--worker"] else main()
