"""Benchmark: `retrieve` over HTTP (`hag service`) beside the same calls in process, one run.

The baseline is measured in the same run, on the same database and the same queries: for
each number of concurrent clients (threads: 1, 8, 32), in-process calls
(`hag.retrieval.retrieve` on this process's pools) and HTTP calls (`hag.service.client`, one
`hag service` subprocess on a loopback port, so clients and server are separate processes)
take turns in rounds, the first of each round alternating, so a load change on this shared
machine falls on both. Each round has queries of its own, sent once to each side: both
sides' caches are warm (resident sets loaded) and neither has embedded the round's texts.

It prints p50/p99 of each and the difference of the p99s; the service's own time on the
call (its `Server-Timing` header: the retrieve and its encoding, without the network and
the HTTP stacks); and the CPU each call cost, in milliseconds, by process: in process, the
bench (the retrieve) and the database; over HTTP, the client (this process), the service
and the database. The CPU columns are what a loaded machine does not blur: with every core
busy, a call waits for about `clients x CPU per call / cores`, so the extra CPU of HTTP,
times the clients, over the cores is the least the p99s can differ by. Then HTTP's extra
CPU per call split by process (the client; the service beyond the retrieve in process; the
database) with the p99 difference of each round, which shows its spread, and the verdict
on issue 31's goal: HTTP p99 within 5 ms of in-process p99 at 8 clients.

The result cache is off (dial retrieval_cache_ttl_seconds = 0): every call runs the passes.
The embedder is the offline one; the embedding is part of both figures alike.

    python -m bench.bench_service               # demo size (the demo corpus, 65 entries)
    python -m bench.bench_service 1m1536        # also 1M x 1,536 (bench_retrieval's loader:
                                                # 4 minutes idle, 25 on a busy machine;
                                                # about 15 GB of RAM: run it alone)
Environment: HAG_BENCH_SERVICE_CALLS (default 600 per mode and concurrency),
HAG_BENCH_SERVICE_ROUNDS (default 3), HAG_BENCH_SERVICE_THREADS (the service_threads dial;
default: the dial's), HAG_BENCH_KEEP_DIR as in bench_retrieval (the 1M database kept
between runs).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

CLIENTS = (1, 8, 32)
GOAL_MS = 5.0  # issue 31: HTTP p99 within this of in-process p99 at 8 clients
TOKEN = "bench-service-token"
ROOT = Path(__file__).resolve().parents[1]

Query = tuple[str, str, str]  # topic, learner, message


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


def demo_queries(count: int) -> list[Query]:
    """Distinct turns over the demo's topics and concepts (no two embed the same text)."""
    import json

    from hag.operations.corpus import DEMO_CORPUS

    concepts = json.loads(DEMO_CORPUS.read_text())["concepts"]
    return [
        (
            c["topic_id"],
            f"learner-{i % 17}",
            f"question {i}: how does {c['title']} work, and when is it used?",
        )
        for i, c in ((i, concepts[i % len(concepts)]) for i in range(count))
    ]


def big_queries(count: int) -> list[Query]:
    """Turns over bench_retrieval's 50 topics (offline vectors: near no stored row)."""
    return [
        (f"t{i % 50:02d}", f"learner-{i % 17}", f"question {i} of the benchmark")
        for i in range(count)
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def service(url: str) -> Iterator[tuple[str, int]]:
    """`hag service` on a free loopback port against `url`: (base URL, pid); stopped by
    SIGTERM at the end."""
    from hag.service.client import HagClient

    port = free_port()
    env = {**os.environ, "DATABASE_URL": url, "HAG_SERVICE_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hag.cli", "service", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _healthy(HagClient(base, TOKEN, timeout=5)):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("hag service did not start")
            time.sleep(0.2)
        yield base, proc.pid
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _healthy(client: Any) -> bool:
    from hag.errors import HagError

    try:
        return bool(client.health().ok)
    except HagError:
        return False


def run_clients(
    call: Callable[[Query], float | None], queries: list[Query], clients: int
) -> tuple[list[float], list[float]]:
    """Each of `clients` threads calls its share of `queries` in turn: the latencies (ms),
    and what the calls returned (the service's own milliseconds, when it said)."""
    times: list[float] = []
    served: list[float] = []
    lock = threading.Lock()

    def worker(share: list[Query]) -> None:
        mine, theirs = [], []
        for q in share:
            started = time.perf_counter()
            server_ms = call(q)
            mine.append((time.perf_counter() - started) * 1000)
            if server_ms is not None:
                theirs.append(server_ms)
        with lock:
            times.extend(mine)
            served.extend(theirs)

    threads = [threading.Thread(target=worker, args=(queries[i::clients],)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return times, served


class Cpu:
    """CPU seconds used so far by named processes (a database: its postmaster and backends)."""

    def __init__(self, **pids: int) -> None:
        import psutil

        self._procs = {name: psutil.Process(pid) for name, pid in pids.items()}

    def now(self) -> dict[str, float]:
        import psutil

        used = {}
        for name, proc in self._procs.items():
            total = 0.0
            family = [proc, *proc.children(recursive=True)] if name == "database" else [proc]
            for one in family:
                try:
                    times = one.cpu_times()
                except psutil.Error:
                    continue
                total += times.user + times.system
            used[name] = total
        return used


@dataclass
class Side:
    """One side's figures at one concurrency: latencies, the service's own times, CPU."""

    times: list[float] = field(default_factory=list)
    served: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    p99s: list[float] = field(default_factory=list)  # each round's own p99

    def add(self, times: list[float], served: list[float], before: dict, after: dict) -> None:
        self.times += times
        self.served += served
        self.p99s.append(pct(times, 99))
        for name in after:
            self.cpu[name] = self.cpu.get(name, 0.0) + after[name] - before[name]

    def cpu_ms(self, name: str) -> float:
        return 1000 * self.cpu.get(name, 0.0) / max(len(self.times), 1)


def postmaster_pid(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        folder = conn.execute("SHOW data_directory").fetchone()[0]
    return int(Path(folder, "postmaster.pid").read_text().split()[0])


def measure(label: str, url: str, make_queries: Callable[[int], list[Query]]) -> None:
    from hag import retrieval
    from hag.service.client import HagClient

    calls = int(os.environ.get("HAG_BENCH_SERVICE_CALLS", "600"))
    rounds = int(os.environ.get("HAG_BENCH_SERVICE_ROUNDS", "3"))
    per_round = max(calls // rounds, 1)
    queries = make_queries(50 + per_round * rounds * len(CLIENTS))
    warm, queries = queries[:50], queries[50:]

    def local(q: Query) -> float | None:
        retrieval.retrieve(*q)
        return None

    with service(url) as (base, service_pid):
        client = HagClient(base, TOKEN)

        def remote(q: Query) -> float | None:
            client.retrieve(*q)
            return client.last_server_ms

        cpu = Cpu(bench=os.getpid(), service=service_pid, database=postmaster_pid(url))
        run_clients(local, warm, 4)
        run_clients(remote, warm, 4)
        print(
            f"{'clients':>7}  {'in-process p50/p99':>18}  {'HTTP p50/p99':>15}  {'p99 diff':>8}  "
            f"{'service p50/p99':>15}  {'CPU ms/call in: bench+db':>24}  "
            f"{'HTTP: client+service+db':>23}  load",
            flush=True,
        )
        at_8 = extra_8 = None
        parts: dict[int, str] = {}
        for clients in CLIENTS:
            sides = {"in": Side(), "http": Side()}
            for r in range(rounds):
                block, queries = queries[:per_round], queries[per_round:]
                order = [("in", local), ("http", remote)]
                for name, call in order if (r + clients) % 2 == 0 else order[::-1]:
                    before = cpu.now()
                    times, served = run_clients(call, block, clients)
                    sides[name].add(times, served, before, cpu.now())
            inp, http = sides["in"], sides["http"]
            diff = pct(http.times, 99) - pct(inp.times, 99)
            extra = sum(http.cpu_ms(n) for n in ("bench", "service", "database")) - sum(
                inp.cpu_ms(n) for n in ("bench", "database")
            )
            if clients == 8:
                at_8, extra_8 = diff, extra
            rounds_diff = " / ".join(
                f"{h - i:+.1f}" for h, i in zip(http.p99s, inp.p99s, strict=True)
            )
            parts[clients] = (
                f"{clients:>7}  client {http.cpu_ms('bench'):.2f}, service beyond the retrieve "
                f"{http.cpu_ms('service') - inp.cpu_ms('bench'):+.2f}, database "
                f"{http.cpu_ms('database') - inp.cpu_ms('database'):+.2f}; p99 diff by round "
                f"{rounds_diff} ms"
            )
            print(
                f"{clients:>7}  {pct(inp.times, 50):>8.2f} / {pct(inp.times, 99):>7.2f}  "
                f"{pct(http.times, 50):>6.2f} / {pct(http.times, 99):>6.2f}  {diff:>+8.2f}  "
                f"{pct(http.served, 50):>6.2f} / {pct(http.served, 99):>6.2f}  "
                f"{inp.cpu_ms('bench'):>15.2f} + {inp.cpu_ms('database'):.2f}  "
                f"{http.cpu_ms('bench'):>9.2f} + {http.cpu_ms('service'):.2f} + "
                f"{http.cpu_ms('database'):.2f}  {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        print("HTTP's extra CPU per call by process (ms), and the p99 difference of each round:")
        for line in parts.values():
            print(line, flush=True)
    verdict = "met" if at_8 is not None and at_8 <= GOAL_MS else "NOT met"
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > cores:
        verdict += (
            f" (load {load:.1f} on {cores} cores: the p99s are mostly waits for a core, "
            "either way; read the CPU line)"
        )
    print(f"{label}: goal (HTTP p99 within {GOAL_MS:g} ms of in-process at 8 clients) {verdict}")
    if extra_8 is not None:
        print(
            f"{label}: HTTP cost {extra_8:+.2f} ms of CPU per call at 8 clients (client + service "
            f"+ database, less in process); with every core busy a call queues behind the others' "
            f"CPU, about 8 x {extra_8:.2f} / {cores} cores = {8 * extra_8 / cores:+.1f} ms more",
            flush=True,
        )


@contextmanager
def demo_database() -> Iterator[str]:
    """An embedded server of its own with the demo corpus loaded, the result cache off."""
    from hag import config, retrieval, settings
    from hag.operations import corpus
    from hag.storage import db, migrate
    from hag.vectors import embeddings

    folder = tempfile.mkdtemp(prefix="hag-bench-service-")
    server = db.embedded_server(Path(folder) / "pgdata")
    url = str(server.get_uri())
    os.environ["DATABASE_URL"] = url
    os.environ["HAG_EMBEDDING_PROVIDER"] = "offline"
    config.reset_config()
    embeddings.reset_embedder()
    db.close_all()
    retrieval.clear_caches()
    try:
        migrate.migrate_database()
        corpus.load_file(corpus.DEMO_CORPUS)
        with db.connect() as conn:
            settings.set_value(conn, "retrieval_cache_ttl_seconds", 0, by="bench")
            if os.environ.get("HAG_BENCH_SERVICE_THREADS"):
                threads = int(os.environ["HAG_BENCH_SERVICE_THREADS"])
                settings.set_value(conn, "service_threads", threads, by="bench")
            conn.commit()
        settings.invalidate()
        yield url
    finally:
        db.close_all()
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
        for name in ("DATABASE_URL", "HAG_EMBEDDING_PROVIDER"):
            os.environ.pop(name, None)
        config.reset_config()
        embeddings.reset_embedder()


def declare_offline_embedder(conn: Any) -> None:
    """The rows' vectors are synthetic, made by no embedder: the offline one is declared the
    memory's (adopting it would rightly refuse), so that a text retrieve (ours and the
    service's) embeds with it. In the caller's transaction."""
    from hag.vectors import embedder_identity
    from hag.vectors.embeddings import get_embedder

    identity, probe = embedder_identity.measure(get_embedder())
    embedder_identity.write(conn, identity, probe)


@contextmanager
def big_database() -> Iterator[str]:
    """1M x 1,536 rows by bench_retrieval's own loader (HAG_BENCH_KEEP_DIR keeps them)."""
    from bench import bench_retrieval as br
    from hag import config, retrieval, settings
    from hag.storage import db
    from hag.vectors import embeddings

    scale = br.Scale("1m", 1_000_000, 1536)
    keep = os.environ.get("HAG_BENCH_KEEP_DIR")
    folder = os.path.join(keep, "1m-1536") if keep else tempfile.mkdtemp(prefix="hag-bench-1m-")
    os.makedirs(folder, exist_ok=True)
    os.chmod(folder, 0o755)
    loaded = os.path.exists(os.path.join(folder, "loaded"))
    server = br.start_server(os.path.join(folder, "pgdata"))
    os.environ["DATABASE_URL"] = str(server.get_uri())
    os.environ["HAG_EMBEDDING_DIM"] = "1536"
    os.environ["HAG_EMBEDDING_PROVIDER"] = "offline"
    config.reset_config()
    embeddings.reset_embedder()
    db.close_all()
    retrieval.clear_caches()
    try:
        if not loaded:
            started = time.perf_counter()
            corpus = br.make_corpus(scale.rows, scale.dim, np.random.default_rng(20261130))
            br.load(corpus, scale, time.perf_counter() - started)
            if keep:
                open(os.path.join(folder, "loaded"), "w").close()
        from hag.storage import migrate

        with db.connect() as conn:
            migrate.migrate(conn, scale.dim)
            declare_offline_embedder(conn)
            conn.commit()
        settings.invalidate()
        yield str(server.get_uri())
    finally:
        db.close_all()
        server.stop()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
        for name in ("DATABASE_URL", "HAG_EMBEDDING_DIM", "HAG_EMBEDDING_PROVIDER"):
            os.environ.pop(name, None)
        config.reset_config()
        embeddings.reset_embedder()


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    calls = int(os.environ.get("HAG_BENCH_SERVICE_CALLS", "600"))
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; {calls} calls per "
        f"mode and concurrency; result cache off",
        flush=True,
    )
    with demo_database() as url:
        print("\n--- demo size (the demo corpus: 3 topics, 65 entries, offline embedder)")
        measure("demo", url, demo_queries)
    if "1m1536" in argv:
        with big_database() as url:
            print("\n--- 1M entries x 1,536 dimensions (bench_retrieval's data)")
            measure("1m1536", url, big_queries)


if __name__ == "__main__":
    main()
