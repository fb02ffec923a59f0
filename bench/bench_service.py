"""Benchmark: `retrieve` over HTTP (`hag service`) beside the same calls in process, one run.

The baseline is measured in the same run, on the same database and the same queries: for
each number of concurrent clients (threads: 1, 8, 32), in-process calls
(`hag.retrieval.retrieve` on this process's pools) and HTTP calls (`hag.service.client`, one
`hag service` subprocess on a loopback port, so clients and server are separate processes)
take turns in short blocks, A B B A: a block is HAG_BENCH_SERVICE_BLOCK calls per client
(8) with every client on one side, so each call is measured under the concurrency the goal
names, and a burst of other work on this shared machine, which lasts seconds, falls on
both sides. The same client threads serve every block of one concurrency (an HTTP client
keeps its connection). Each pair of blocks has queries of its own, sent once to each side:
both sides' caches are warm (resident sets loaded) and neither has embedded the texts.

It prints p50/p99 of each side, pooled over its blocks, and the difference of the pooled
p99s with a 90% interval (the pairs of blocks drawn again with replacement); the spread of
the blocks' own p99s and of the pairs' differences; the load average at the blocks'
starts; the service's own time on the call (its `Server-Timing` header: the retrieve and
its encoding, without the network and the HTTP stacks); and the CPU each call cost, in
milliseconds, by process: in process, the bench (the retrieve) and the database; over
HTTP, the client (this process), the service and the database. The CPU columns are what a
loaded machine does not blur: with every core busy, a call waits for about `clients x CPU
per call / cores`, so the extra CPU of HTTP, times the clients, over the cores is the least
the p99s can differ by. Then the verdict on issue 31's goal: HTTP p99 within 5 ms of
in-process p99 at 8 clients, "not decided" when the interval holds 5 ms.

The result cache is off (dial retrieval_cache_ttl_seconds = 0): every call runs the passes.
The embedder is the offline one; the embedding is part of both figures alike.

    python -m bench.bench_service               # demo size (the demo corpus, 65 entries)
    python -m bench.bench_service 1m1536        # also 1M x 1,536 (bench_retrieval's loader:
                                                # 4 minutes idle, 25 on a busy machine;
                                                # about 15 GB of RAM: run it alone)
Environment: HAG_BENCH_SERVICE_CALLS (at least this many calls per side and concurrency,
default 3,000), HAG_BENCH_SERVICE_BLOCK (calls per client in a block, default 8),
HAG_BENCH_SERVICE_CLIENTS (the concurrencies, comma-separated; default 1,8,32),
HAG_BENCH_SERVICE_THREADS (the service_threads dial of the demo database; default: the
dial's), HAG_BENCH_SERVICE_ROOT (the checkout `hag service` runs from, for an A/B of the
service's code; default this one), HAG_BENCH_KEEP_DIR as in bench_retrieval (the 1M
database kept in DIR/1m-1536 between runs; a later run, of this bench or of
`bench_retrieval 1m1536`, finds it loaded).
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
        cwd=os.environ.get("HAG_BENCH_SERVICE_ROOT") or ROOT,
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


class Crew:
    """`size` client threads that live through every block of one concurrency, so each
    keeps its HTTP connection (and its thread-local state) from block to block, as a
    tutor does; a block's calls are taken from one shared list, so the threads finish it
    together."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._start = threading.Barrier(size + 1)
        self._done = threading.Barrier(size + 1)
        self._call: Callable[[Query], float | None] | None = None
        self._queries: list[Query] = []
        self._next = 0
        self._times: list[float] = []
        self._served: list[float] = []
        self._threads = [threading.Thread(target=self._work, daemon=True) for _ in range(size)]
        for t in self._threads:
            t.start()

    def run(
        self, call: Callable[[Query], float | None], queries: list[Query]
    ) -> tuple[list[float], list[float]]:
        """Every query of `queries` called once by the crew: the latencies (ms), and what
        the calls returned (the service's own milliseconds, when it said)."""
        self._call, self._queries, self._next = call, queries, 0
        self._times, self._served = [], []
        self._start.wait()
        self._done.wait()
        return self._times, self._served

    def close(self) -> None:
        self._call = None
        self._start.wait()
        for t in self._threads:
            t.join()

    def _work(self) -> None:
        while True:
            self._start.wait()
            call = self._call
            if call is None:
                return
            mine, theirs = [], []
            while True:
                with self._lock:
                    i = self._next
                    self._next += 1
                if i >= len(self._queries):
                    break
                started = time.perf_counter()
                server_ms = call(self._queries[i])
                mine.append((time.perf_counter() - started) * 1000)
                if server_ms is not None:
                    theirs.append(server_ms)
            with self._lock:
                self._times += mine
                self._served += theirs
            self._done.wait()


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
    """One side's figures at one concurrency: its blocks' latencies, the service's own
    times, CPU, and the load average at each block's start."""

    blocks: list[np.ndarray] = field(default_factory=list)
    served: list[float] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    loads: list[float] = field(default_factory=list)

    def add(
        self,
        times: list[float],
        served: list[float],
        before: dict[str, float],
        after: dict[str, float],
        load: float,
    ) -> None:
        self.blocks.append(np.asarray(times))
        self.served += served
        self.loads.append(load)
        for name in after:
            self.cpu[name] = self.cpu.get(name, 0.0) + after[name] - before[name]

    @property
    def times(self) -> np.ndarray:
        return np.concatenate(self.blocks) if self.blocks else np.zeros(0)

    def cpu_ms(self, name: str) -> float:
        return 1000 * self.cpu.get(name, 0.0) / max(len(self.times), 1)


def pooled_difference(inp: Side, http: Side, p: float = 99) -> float:
    """HTTP's p`p` less in process's, each over all its blocks' calls pooled."""
    return float(np.percentile(http.times, p) - np.percentile(inp.times, p))


def interval(inp: Side, http: Side, draws: int = 1000) -> tuple[float, float]:
    """A 90% interval of the pooled p99 difference: the pairs of blocks (an in-process
    block and the HTTP block beside it, under the same load) drawn again with replacement,
    `draws` times; the 5th and 95th percentiles of the differences they give."""
    rng = np.random.default_rng(31)
    pairs = len(inp.blocks)
    found = []
    for _ in range(draws):
        pick = rng.integers(0, pairs, pairs)
        a = np.concatenate([inp.blocks[i] for i in pick])
        b = np.concatenate([http.blocks[i] for i in pick])
        found.append(np.percentile(b, 99) - np.percentile(a, 99))
    low, high = np.percentile(found, [5, 95])
    return float(low), float(high)


def postmaster_pid(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        folder = conn.execute("SHOW data_directory").fetchone()[0]
    return int(Path(folder, "postmaster.pid").read_text().split()[0])


def plan(clients: int) -> tuple[int, int]:
    """(pairs of blocks, calls per block per side) at `clients`: blocks of
    HAG_BENCH_SERVICE_BLOCK calls per client, an even number of pairs (A B B A) with at
    least HAG_BENCH_SERVICE_CALLS calls per side in all."""
    calls = int(os.environ.get("HAG_BENCH_SERVICE_CALLS", "3000"))
    block = int(os.environ.get("HAG_BENCH_SERVICE_BLOCK", "8")) * clients
    pairs = max(2, -(-calls // block))
    return pairs + pairs % 2, block


def measure(label: str, url: str, make_queries: Callable[[int], list[Query]]) -> None:
    from hag import retrieval
    from hag.service.client import HagClient

    chosen = os.environ.get("HAG_BENCH_SERVICE_CLIENTS", "")
    counts = [int(n) for n in chosen.split(",") if n.strip()] or list(CLIENTS)
    plans = {clients: plan(clients) for clients in counts}
    queries = make_queries(50 + sum(pairs * block for pairs, block in plans.values()))
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
        crew = Crew(4)
        crew.run(local, warm)
        crew.run(remote, warm)
        crew.close()
        print(
            f"{'clients':>7}  {'in-process p50/p99':>18}  {'HTTP p50/p99':>15}  "
            f"{'p99 diff [90%]':>22}  {'service p50/p99':>15}  "
            f"{'CPU ms/call in: bench+db':>24}  {'HTTP: client+service+db':>23}  load",
            flush=True,
        )
        at_8: tuple[float, float, float] | None = None
        extra_8 = None
        parts: dict[int, str] = {}
        for clients in counts:
            pairs, per_block = plans[clients]
            sides = {"in": Side(), "http": Side()}
            crew = Crew(clients)
            started = time.perf_counter()
            for k in range(pairs):
                block, queries = queries[:per_block], queries[per_block:]
                order = [("in", local), ("http", remote)]
                for name, call in order if k % 2 == 0 else order[::-1]:  # A B, B A, ...
                    load, before = os.getloadavg()[0], cpu.now()
                    times, served = crew.run(call, block)
                    sides[name].add(times, served, before, cpu.now(), load)
            crew.close()
            took = time.perf_counter() - started
            inp, http = sides["in"], sides["http"]
            diff = pooled_difference(inp, http)
            low, high = interval(inp, http)
            extra = sum(http.cpu_ms(n) for n in ("bench", "service", "database")) - sum(
                inp.cpu_ms(n) for n in ("bench", "database")
            )
            if clients == 8:
                at_8, extra_8 = (diff, low, high), extra
            loads = inp.loads + http.loads
            print(
                f"{clients:>7}  {pct(list(inp.times), 50):>8.2f} / {pct(list(inp.times), 99):>7.2f}  "
                f"{pct(list(http.times), 50):>6.2f} / {pct(list(http.times), 99):>6.2f}  "
                f"{diff:>+8.2f} [{low:+.1f}, {high:+.1f}]  "
                f"{pct(http.served, 50):>6.2f} / {pct(http.served, 99):>6.2f}  "
                f"{inp.cpu_ms('bench'):>15.2f} + {inp.cpu_ms('database'):.2f}  "
                f"{http.cpu_ms('bench'):>9.2f} + {http.cpu_ms('service'):.2f} + "
                f"{http.cpu_ms('database'):.2f}  {min(loads):.2f}-{max(loads):.2f}",
                flush=True,
            )
            block_in = [pct(list(b), 99) for b in inp.blocks]
            block_http = [pct(list(b), 99) for b in http.blocks]
            by_pair = np.asarray(block_http) - np.asarray(block_in)
            parts[clients] = (
                f"{clients:>7}  {pairs} pairs of {per_block}-call blocks per side "
                f"({len(inp.times)} calls each, {took:.0f} s); block p99s in process "
                f"{np.median(block_in):.1f} [{min(block_in):.1f}-{max(block_in):.1f}], HTTP "
                f"{np.median(block_http):.1f} [{min(block_http):.1f}-{max(block_http):.1f}]; "
                f"HTTP - in process by pair: median {np.median(by_pair):+.1f}, "
                f"10th-90th {np.percentile(by_pair, 10):+.1f} to "
                f"{np.percentile(by_pair, 90):+.1f} ms\n"
                f"{'':>7}  HTTP's extra CPU per call: client {http.cpu_ms('bench'):.2f}, "
                f"service beyond the retrieve {http.cpu_ms('service') - inp.cpu_ms('bench'):+.2f}, "
                f"database {http.cpu_ms('database') - inp.cpu_ms('database'):+.2f} ms"
            )
        print("Blocks (p99 of each block; its spread is the load's, not the code's) and CPU:")
        for line in parts.values():
            print(line, flush=True)
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if at_8 is not None:
        diff, low, high = at_8
        verdict = "met" if diff <= GOAL_MS else "NOT met"
        if low <= GOAL_MS < high:
            verdict += (
                f" (its 90% interval {low:+.1f} to {high:+.1f} ms holds {GOAL_MS:g}: not decided)"
            )
        print(
            f"{label}: goal (HTTP p99 within {GOAL_MS:g} ms of in-process at 8 clients, "
            f"pooled over the blocks) {verdict}: {diff:+.2f} ms; load {load:.2f} on {cores} cores"
        )
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
    print(
        f"1M x 1,536: data kept from an earlier run in {folder}, not loaded again"
        if loaded
        else f"1M x 1,536: loading into {folder} (4 to 25 minutes)",
        flush=True,
    )
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
    calls = int(os.environ.get("HAG_BENCH_SERVICE_CALLS", "3000"))
    block = int(os.environ.get("HAG_BENCH_SERVICE_BLOCK", "8"))
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; at least {calls} "
        f"calls per side and concurrency, in blocks of {block} per client, in process and "
        f"HTTP alternating A B B A; result cache off",
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
