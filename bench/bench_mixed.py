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
`HAG_BENCH_MIXED_CLIENTS` (1,8,32). At 1M rows it needs the machine's big-run lock.
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
        "session_id": f"mixed-{i:07d}",
        "learner_id": f"learner-{i % 200}",
        "topic_id": f"t{t:02d}",
        "ended_at": (T0 + timedelta(seconds=i)).isoformat(),
        "turns": turns,
    }


def _writer(c, by_topic, rate: float, stop: threading.Event, counts: dict, start: int) -> None:
    """Ingest and apply one session every 1/rate seconds (behind schedule: at once)."""
    from hag import db, settings
    from hag.session.ingest import ingest_payload
    from hag.session.queue import apply_pending_session
    from hag.session.steps import Caches
    from hag.session.summary import ProcessSummary

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
            apply_pending_session(conn, dials, run_id=None, caches=caches, summary=summary)
            i += 1
    counts["sessions"] = i - start
    counts["seconds"] = time.perf_counter() - began
    counts["rejected"] = summary.rejects + summary.failures


def _client(samples, reads: Reads, stop: threading.Event, seed: int, dials: Any) -> None:
    from hag import db, retrieval
    from hag.retrieval import ranking, store

    rng = random.Random(seed)
    n = 0
    reference = db.connect(autocommit=True)  # the seed's exact query, outside the timing
    while not stop.is_set():
        t, q, slugs, learner, _kind = samples[rng.randrange(len(samples))]
        started = time.perf_counter()
        result = retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1])
        ms = (time.perf_counter() - started) * 1000
        topic = [p for p in result.passes if p.name == "topic-semantic"]
        hits = wanted = 0
        n += 1
        if n % RECALL_EVERY == 0:
            params = {**store.filters(dials), "query": q, "topic_id": f"t{t:02d}"}
            exact = store.seed_exact(
                reference, {**params, "scopes": ["public"]}, dials["match_count"]
            )
            concept = store.concept_pass(reference, slugs, f"t{t:02d}", ["public"], dials)[0]
            want = [r.row["id"] for r in ranking.merge_topic(exact, concept, slugs[:1], dials)]
            got = {a.entry_id for a in result.topic_advisories}
            hits, wanted = len(got & set(want)), len(want)
        with reads.lock:
            reads.ms.append(ms)
            reads.topic_passes += len(topic)
            reads.resident += sum("resident" in p.path for p in topic)
            reads.hits += hits
            reads.wanted += wanted
    reference.close()


def run_mixed(c: br.Corpus, rate: int, clients: int, samples, dials, start: int) -> int:
    from hag import retrieval

    by_topic = {
        t: np.flatnonzero((c.topic == t) & (c.scope == 0) & (c.maturity != "archived"))
        for t in range(br.TOPICS)
    }
    retrieval.clear_caches()
    reads, stop, counts = Reads(), threading.Event(), {}
    threads = [
        threading.Thread(target=_client, args=(samples, reads, stop, k, dials))
        for k in range(clients)
    ]
    threads.append(threading.Thread(target=_writer, args=(c, by_topic, rate, stop, counts, start)))
    for th in threads:
        th.start()
    time.sleep(SECONDS)
    stop.set()
    for th in threads:
        th.join()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    p50, p99 = br.pct(reads.ms, 50), br.pct(reads.ms, 99)
    share = reads.resident / reads.topic_passes if reads.topic_passes else 0.0
    recall = reads.hits / reads.wanted if reads.wanted else float("nan")
    achieved = counts["sessions"] / counts["seconds"]
    print(
        f"{rate:3d} sessions/s asked, {clients:2d} clients: retrieve p50 {p50:6.1f} ms, "
        f"p99 {p99:6.1f} ms over {len(reads.ms):,} reads; resident {share:5.1%} of topic "
        f"passes; recall@5 {recall:.4f}; session-end {achieved:5.1f} sessions/s achieved "
        f"({counts['rejected']} rejected or failed); load {load}",
        flush=True,
    )
    label = f"mixed.{ROWS // 1000}k.{rate}ps.{clients}c"
    record(f"{label}.p99_ms", p99)
    record(f"{label}.sessions_per_s", achieved)
    return start + counts["sessions"]


def main() -> None:
    from hag import config, db, embeddings, retrieval, settings

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
        os.environ["DATABASE_URL"] = str(server.get_uri())
        os.environ["HAG_EMBEDDING_DIM"] = str(DIM)
        os.environ["HAG_EMBEDDING_PROVIDER"] = "offline"
        config.reset_config()
        embeddings.reset_embedder()
        db.close_all()
        db.close_read_pool()
        retrieval.clear_caches()
        rng = np.random.default_rng(20261130)
        started = time.perf_counter()
        corpus = br.make_corpus(ROWS, DIM, rng)  # the same rows for the same seed
        if not loaded:
            br.load(corpus, br.Scale("mixed", ROWS, DIM), time.perf_counter() - started)
        else:  # kept from an earlier run (its sessions applied too): brought up to this schema
            from hag import migrate

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
        start = 0
        for rate in RATES:
            for clients in CLIENTS:
                start = run_mixed(corpus, rate, clients, samples, dials, start)
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
