"""Mixed load: tutor clients retrieving while session-end writes the same topics.

N tutor clients (threads in this process, `retrieve_with_vector` on the shared read pool)
query the memory while one session-end worker ingests and applies sessions at a steady
rate (sessions per second), each session on a topic the clients read: every turn grades the
entries it used (success or failure), some report a struggle (a learned prerequisite
between two of the topic's concepts), a few an observation (a new candidate entry), as the
simulator's payloads do. Each write changes the topic's searched rows, so it changes the
stamp of the set a client may hold resident (hag.retrieval.resident).

Per (rate, clients) it prints: retrieve p50/p99; the share of topic passes answered by a
resident set; recall@5 of the topic block against the seed's exact query (run right after
the answer, on the same thread, outside the timing: a session applied in between can move
a row, so the figure is a floor); the sessions per second achieved; the load average.

Its own embedded PostgreSQL (bench_retrieval's data: 50 topics, unit vectors around 200
centres). `HAG_BENCH_MIXED_ROWS` (default 100,000), `HAG_BENCH_MIXED_DIM` (1,536),
`HAG_BENCH_MIXED_SECONDS` per run (20), `HAG_BENCH_MIXED_RATES` (10,50),
`HAG_BENCH_MIXED_CLIENTS` (1,8,32), `HAG_BENCH_MIXED_WARM` seconds of reads before each
run's writes and figures (15), after one warm-up of at most `HAG_BENCH_MIXED_WARM_SETS`
seconds (180) in which 8 clients read the sets into memory (kept from run to run), `HAG_BENCH_MIXED_MODES` (follow,reload: every run with the
resident sets following the writes, then every run with them read again after a write), `HAG_BENCH_MIXED_WRITE_COST`
sessions for the trigger's write cost (200), `HAG_BENCH_MIXED_RESIDENT_MB` (the dial
resident_max_mb for the run; default: as set). `HAG_BENCH_MIXED_VIA` (threads): `service`
adds, after those runs, the same grid with the clients over HTTP: a `hag service`
subprocess holds the pools and resident sets, each client thread calls it with the typed
client (`HagClient.retrieve`, a text message embedded offline by the service), beside
in-process clients calling `hag.retrieval.retrieve` with the same texts in the same run,
the two alternating cell by cell, the result cache off for both (no recall figure: the
texts' vectors are near no stored row, like the stress set). At 1M rows it needs the machine's big-run lock.
HAG_BENCH_KEEP_DIR=DIR keeps the database in DIR/mixed-<rows>-<dim> and measures it again
on the next run without reloading, after migrating it to this checkout (the sessions an
earlier run applied stay in it); HAG_BENCH_LOAD_ONLY=1: load, do not measure.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from bench import bench_retrieval as br
from bench.figures import record

ROWS = int(os.environ.get("HAG_BENCH_MIXED_ROWS", "100000"))
DIM = int(os.environ.get("HAG_BENCH_MIXED_DIM", "1536"))
SECONDS = float(os.environ.get("HAG_BENCH_MIXED_SECONDS", "20"))
RATES = [int(x) for x in os.environ.get("HAG_BENCH_MIXED_RATES", "10,50").split(",")]
CLIENTS = [int(x) for x in os.environ.get("HAG_BENCH_MIXED_CLIENTS", "1,8,32").split(",")]
MODES = [m for m in os.environ.get("HAG_BENCH_MIXED_MODES", "follow,reload").split(",") if m]
WRITE_COST_SESSIONS = int(os.environ.get("HAG_BENCH_MIXED_WRITE_COST", "200"))
WARM = float(os.environ.get("HAG_BENCH_MIXED_WARM", "15"))
WARM_SETS = float(os.environ.get("HAG_BENCH_MIXED_WARM_SETS", "180"))
RESIDENT_MB = os.environ.get("HAG_BENCH_MIXED_RESIDENT_MB")  # default: the dial's
VIA = os.environ.get("HAG_BENCH_MIXED_VIA", "threads").split(",")
RUN = int(time.time())  # in each session id
RECALL_EVERY = 10  # one answer in ten is checked against the seed's exact query
TURNS = 10
T0 = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass
class Reads:
    """What the clients measured in one run."""

    ms: list[float] = field(default_factory=list)
    topic_passes: int = 0
    resident: int = 0
    hits: int = 0
    wanted: int = 0
    followed: int = 0  # of the resident passes, those that applied changed rows first
    followed_ms: list[float] = field(default_factory=list)  # the reads those passes were in
    measuring: bool = False  # False during the warm-up: nothing counted
    lock: threading.Lock = field(default_factory=threading.Lock)


def _payload(c: br.Corpus, by_topic: dict[int, np.ndarray], i: int, rng: random.Random) -> dict:
    """One session on a random topic, shaped as the simulator's: graded turns, a struggle in
    one turn of ten, an observation in one of twenty."""
    t = rng.randrange(br.TOPICS)
    rows = by_topic[t]
    turns = []
    for k in range(TURNS):
        d, other = (int(rows[rng.randrange(len(rows))]) for _ in range(2))
        turns.append(
            {
                "turn_index": k,
                "student_message": f"question {k} of session {i}",
                "concept_slugs": [f"c{d}"],
                "decision_entry_id": str(c.ids[d]),
                "used_entry_ids": [str(c.ids[d]), str(c.ids[other])],
                "outcome": rng.choice(["success", "success", "failure", None]),
                "struggles": (
                    [{"concept_slug": f"c{d}", "missing_slug": f"c{other}", "evidence": "lost"}]
                    if rng.random() < 0.1
                    else []
                ),
                "observations": (
                    [{"graph": "topic", "concept": f"c{d}", "text": f"Draw it first ({i}/{k})."}]
                    if rng.random() < 0.05
                    else []
                ),
            }
        )
    return {
        "session_id": f"mixed-{RUN}-{i:07d}",  # a kept memory holds earlier runs' sessions
        "learner_id": f"learner-{i % 200}",
        "topic_id": f"t{t:02d}",
        "ended_at": (T0 + timedelta(seconds=i)).isoformat(),
        "turns": turns,
    }


def _writer(c, by_topic, rate: float, stop: threading.Event, counts: dict, start: int) -> None:
    """Ingest and apply one session every 1/rate seconds (behind schedule: at once)."""
    from hag import settings
    from hag.session.ingest import ingest_payload
    from hag.session.queue import apply_pending_session
    from hag.session.steps import Caches
    from hag.session.summary import ProcessSummary
    from hag.storage import db

    rng = random.Random(start)
    dials = settings.current()
    caches, summary = Caches(), ProcessSummary()
    began = time.perf_counter()
    i = start
    with db.connect() as conn:
        while not stop.is_set():
            due = began + (i - start) / rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            ingest_payload(conn, _payload(c, by_topic, i, rng), source="bench")
            conn.commit()
            applied = time.perf_counter()
            apply_pending_session(conn, dials, run_id=None, caches=caches, summary=summary)
            counts.setdefault("apply_ms", []).append((time.perf_counter() - applied) * 1000)
            i += 1
    counts["sessions"] = i - start
    counts["seconds"] = time.perf_counter() - began
    counts["rejected"] = summary.rejects + summary.failures


def _client(
    samples, reads: Reads, stop: threading.Event, seed: int, dials: Any, via: Any = None
) -> None:
    """One tutor client: `via` None reads with the samples' vectors in process (recall
    checked); "text" reads `hag.retrieval.retrieve` with a text message; a HagClient reads
    the same texts over HTTP."""
    from hag import retrieval
    from hag.retrieval import ranking, store
    from hag.storage import db

    rng = random.Random(seed)
    n = 0
    reference = db.connect(autocommit=True)  # the seed's exact query, outside the timing
    while not stop.is_set():
        t, q, slugs, learner, _kind = samples[rng.randrange(len(samples))]
        message = f"question {rng.randrange(1_000_000)} on t{t:02d}"
        started = time.perf_counter()
        if via is None:
            result = retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1])
        elif via == "text":
            result = retrieval.retrieve(
                f"t{t:02d}", learner, message, None, None, [slugs], slugs[:1]
            )
        else:
            result = via.retrieve(
                f"t{t:02d}",
                learner,
                message,
                recent_concepts=[slugs],
                expected_concepts=slugs[:1],
            )
        ms = (time.perf_counter() - started) * 1000
        topic = [p for p in result.passes if p.name == "topic-semantic"]
        hits = wanted = 0
        n += 1
        if via is None and n % RECALL_EVERY == 0:
            params = {**store.filters(dials), "query": q, "topic_id": f"t{t:02d}"}
            exact = store.seed_exact(
                reference, {**params, "scopes": ["public"]}, dials["match_count"]
            )
            concept = store.concept_pass(reference, slugs, f"t{t:02d}", ["public"], dials)[0]
            want = [r.row["id"] for r in ranking.merge_topic(exact, concept, slugs[:1], dials)]
            got = {a.entry_id for a in result.topic_advisories}
            hits, wanted = len(got & set(want)), len(want)
        with reads.lock:
            if not reads.measuring:
                continue
            if any("followed" in p.path for p in topic):
                reads.followed += 1
                reads.followed_ms.append(ms)
            reads.ms.append(ms)
            reads.topic_passes += len(topic)
            reads.resident += sum("resident" in p.path for p in topic)
            reads.hits += hits
            reads.wanted += wanted
    reference.close()


def run_mixed(
    c: br.Corpus,
    rate: int,
    clients: int,
    samples,
    dials,
    start: int,
    mode: str,
    via: Any = None,
    side: str = "",
) -> int:
    """One run: `clients` readers and one writer at `rate` sessions/s, resident sets
    following writes (`mode` 'follow') or read again after each ('reload':
    resident_follow_max_rows 0, as before migration 185); `via` as `_client` takes it,
    `side` names it in the printed line and the recorded figures."""
    from hag import settings
    from hag.storage import db

    with db.connect() as conn:
        if mode == "reload":
            settings.set_value(conn, "resident_follow_max_rows", 0, by="bench")
        else:
            settings.reset_value(conn, "resident_follow_max_rows", by="bench")
        conn.commit()
    settings.invalidate()

    by_topic = _by_topic(c)
    reads, stop, counts = Reads(), threading.Event(), {}
    threads = [
        threading.Thread(target=_client, args=(samples, reads, stop, k, dials, via))
        for k in range(clients)
    ]
    writer = threading.Thread(target=_writer, args=(c, by_topic, rate, stop, counts, start))
    for th in threads:
        th.start()
    time.sleep(WARM)  # the clients read the sets into memory before the writes begin
    with reads.lock:
        reads.measuring = True
    writer.start()
    threads.append(writer)
    time.sleep(SECONDS)
    stop.set()
    for th in threads:
        th.join()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    p50, p99 = br.pct(reads.ms, 50), br.pct(reads.ms, 99)
    share = reads.resident / reads.topic_passes if reads.topic_passes else 0.0
    recall = reads.hits / reads.wanted if reads.wanted else float("nan")
    achieved = counts["sessions"] / counts["seconds"]
    apply_p50 = br.pct(counts.get("apply_ms", [0.0]), 50)
    print(
        (f"{side:>8} " if side else "")
        + f"{mode:>6} {rate:3d} sessions/s asked, {clients:2d} clients: retrieve p50 "
        f"{p50:6.1f} ms, p99 {p99:6.1f} ms over {len(reads.ms):,} reads; resident "
        f"{share:5.1%} of topic passes ({reads.followed / max(reads.topic_passes, 1):5.1%} "
        f"after following writes, those reads p50 {br.pct(reads.followed_ms or [0.0], 50):.1f} "
        f"ms); recall@5 {'n/a' if recall != recall else f'{recall:.4f}'}; session-end "
        f"{achieved:5.1f} sessions/s achieved, apply p50 {apply_p50:.1f} ms "
        f"({counts['rejected']} rejected or failed); load {load}",
        flush=True,
    )
    label = f"mixed.{ROWS // 1000}k.{rate}ps.{clients}c" + (".reload" if mode == "reload" else "")
    label += f".{side}" if side else ""
    record(f"{label}.p99_ms", p99)
    record(f"{label}.sessions_per_s", achieved)
    record(f"{label}.resident_share", share)
    return start + counts["sessions"]


def _sync_function(migration: str) -> str:
    """The CREATE OR REPLACE of the search copy's trigger function in one migration file."""
    from hag import SQL_DIR

    text = (SQL_DIR / "migrations" / migration).read_text()
    begin = text.index("CREATE OR REPLACE FUNCTION hag_entry_search_sync()")
    return text[begin : text.index("\n$$;", begin) + 4]


def warm_sets(samples, dials: Any) -> None:
    """8 clients read until every sampled topic's set is resident (at most
    `HAG_BENCH_MIXED_WARM_SETS` seconds): the runs then start from the sets a long-running
    tutor holds, and keep them from one run to the next (at 1M x 1,536 a topic's set is
    47 MB, read in the background one at a time)."""
    from hag.retrieval.resident import residents

    reads, stop = Reads(), threading.Event()
    threads = [
        threading.Thread(target=_client, args=(samples, reads, stop, 1000 + k, dials))
        for k in range(8)
    ]
    for th in threads:
        th.start()
    began = time.perf_counter()
    wanted = len({t for t, *_ in samples})  # the topics' sets (the tutor scope's has an index)
    held = 0
    while time.perf_counter() - began < WARM_SETS and held < wanted:
        time.sleep(1)
        held = len(residents._sets)
    stop.set()
    for th in threads:
        th.join()
    print(
        f"warm-up: {held} sets resident ({residents.nbytes() / 2**20:,.0f} MB) after "
        f"{time.perf_counter() - began:.0f} s; load "
        + " ".join(f"{x:.2f}" for x in os.getloadavg()),
        flush=True,
    )


def write_cost(c: br.Corpus, dials: Any, sessions: int, start: int = 0) -> int:
    """Session-end's cost with the copy's trigger of migration 160 (change rows naming sets)
    and of 185 (naming rows too), in alternating blocks on this memory, no readers: the
    median ms to apply one session (the simulator's payload) with each."""
    from hag.session.ingest import ingest_payload
    from hag.session.queue import apply_pending_session
    from hag.session.steps import Caches
    from hag.session.summary import ProcessSummary
    from hag.storage import db

    if sessions <= 0:
        return start
    by_topic = _by_topic(c)
    bodies = {
        "160": _sync_function("160_nightly_trigger_costs.sql"),
        "185": _sync_function("185_search_changes_by_row.sql"),
    }
    took: dict[str, list[float]] = {name: [] for name in bodies}
    rng = random.Random(start)
    caches, summary = Caches(), ProcessSummary()
    blocks = 4
    i = start
    with db.connect() as conn:
        try:
            for block in range(blocks):
                for name in sorted(bodies, reverse=block % 2 == 1):
                    conn.execute(bodies[name])
                    conn.commit()
                    for _ in range(sessions // (2 * blocks)):
                        ingest_payload(conn, _payload(c, by_topic, i, rng), source="bench")
                        conn.commit()
                        began = time.perf_counter()
                        apply_pending_session(
                            conn, dials, run_id=None, caches=caches, summary=summary
                        )
                        took[name].append((time.perf_counter() - began) * 1000)
                        i += 1
        finally:
            conn.rollback()
            conn.execute(bodies["185"])
            conn.commit()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    old, new = (float(np.median(took[name])) for name in ("160", "185"))
    print(
        f"session-end apply, median of {len(took['185'])} each, alternating: change rows "
        f"naming sets (migration 160) {old:.1f} ms, naming rows too (185) {new:.1f} ms, "
        f"x{new / old:.2f}; load {load}",
        flush=True,
    )
    record(f"mixed.{ROWS // 1000}k.apply_ms", new)
    return i


def over_the_service(c: br.Corpus, samples: list[Any], dials: Any, start: int) -> int:
    """The grid again with text messages, following writes: in-process clients and clients
    of a `hag service` subprocess on the same database, alternating cell by cell (in-process
    first in even cells); the writer stays in this process."""
    from bench.bench_service import TOKEN, declare_offline_embedder, service
    from hag import retrieval, settings
    from hag.service.client import HagClient
    from hag.storage import db

    with db.connect() as conn:
        declare_offline_embedder(conn)  # so that a text retrieve embeds (synthetic rows)
        settings.set_value(conn, "retrieval_cache_ttl_seconds", 0, by="bench")
        settings.reset_value(conn, "resident_follow_max_rows", by="bench")
        conn.commit()
    settings.invalidate()
    retrieval.clear_caches()
    with service(os.environ["DATABASE_URL"]) as (base, _pid):
        client = HagClient(base, TOKEN, timeout=120)
        # the service reads its sets into memory first, as warm_sets did for this process
        warm = Reads()
        stop = threading.Event()
        threads = [
            threading.Thread(target=_client, args=(samples, warm, stop, 2000 + k, dials, client))
            for k in range(8)
        ]
        for th in threads:
            th.start()
        time.sleep(min(WARM_SETS, 60))
        stop.set()
        for th in threads:
            th.join()
        cell = 0
        for rate in RATES:
            for clients in CLIENTS:
                sides = [("in-proc", "text"), ("service", client)]
                for side, via in sides if cell % 2 == 0 else sides[::-1]:
                    start = run_mixed(c, rate, clients, samples, dials, start, "follow", via, side)
                cell += 1
        client.close()
    return start


def _by_topic(c: br.Corpus) -> dict[int, np.ndarray]:
    return {
        t: np.flatnonzero((c.topic == t) & (c.scope == 0) & (c.maturity != "archived"))
        for t in range(br.TOPICS)
    }


def main() -> None:
    from hag import config, settings
    from hag.storage import db
    from hag.vectors import embeddings

    keep = os.environ.get("HAG_BENCH_KEEP_DIR")
    if keep:
        folder = os.path.join(keep, f"mixed-{ROWS}-{DIM}")
        os.makedirs(folder, exist_ok=True)
    else:
        folder = tempfile.mkdtemp(prefix="hag-bench-mixed-")
    os.chmod(folder, 0o755)
    loaded = os.path.exists(os.path.join(folder, "loaded"))
    server = br.start_server(os.path.join(folder, "pgdata"))
    print(
        f"mixed load: {ROWS:,} entries x {DIM} dimensions; {SECONDS:.0f} s per run; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        + (f"; data kept from an earlier run in {folder}" if loaded else ""),
        flush=True,
    )
    try:
        br.point_at(server, DIM)
        rng = np.random.default_rng(20261130)
        started = time.perf_counter()
        corpus = br.make_corpus(ROWS, DIM, rng)  # the same rows for the same seed
        if not loaded:
            br.load(corpus, br.Scale("mixed", ROWS, DIM), time.perf_counter() - started)
        else:  # kept from an earlier run (its sessions applied too): brought up to this schema
            from hag.storage import migrate

            with db.connect() as conn:
                migrate.migrate(conn, DIM)
                conn.commit()
        if keep:
            open(os.path.join(folder, "loaded"), "w").close()
            if os.environ.get("HAG_BENCH_LOAD_ONLY"):
                return
        with db.connect() as conn:
            dials = settings.load(conn)
            conn.rollback()
        settings.invalidate()
        samples = br.make_samples(corpus, 400, ("related", "other topic"), rng)
        corpus.vectors = np.zeros((0, DIM), np.float32)  # 6 GB at 1M x 1,536: not needed now
        if RESIDENT_MB:
            with db.connect() as conn:
                settings.set_value(conn, "resident_max_mb", int(RESIDENT_MB), by="bench")
                conn.commit()
            settings.invalidate()
            print(f"resident_max_mb set to {RESIDENT_MB}", flush=True)
        warm_sets(samples, dials)
        start = write_cost(corpus, dials, WRITE_COST_SESSIONS)
        # each mode's runs together, from the sets the warm-up read: reloading drops the sets
        # a following run would start from, so alternating would measure the recovery
        for mode in MODES:
            for rate in RATES:
                for clients in CLIENTS:
                    start = run_mixed(corpus, rate, clients, samples, dials, start, mode)
        if "service" in VIA:
            start = over_the_service(corpus, samples, dials, start)
    finally:
        db.close_all()
        db.close_read_pool()
        server.stop()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
        for name in ("DATABASE_URL", "HAG_EMBEDDING_DIM", "HAG_EMBEDDING_PROVIDER"):
            os.environ.pop(name, None)
        config.reset_config()
        embeddings.reset_embedder()


if __name__ == "__main__":
    main()
