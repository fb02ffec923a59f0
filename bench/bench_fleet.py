"""How many tutor processes a host holds at 1M x 1,536: each one's resident memory, and the
retrieve p50/p99 of 1, 2 and 4 such processes reading at once.

A tutor process that calls `hag.retrieve` in process holds its own read pool, caches and
resident sets (up to the `resident_max_mb` dial each, docs/retrieval.md); the service (`hag
service`) holds one of each for every tutor that calls it (docs/service.md). This bench
measures the first shape: each child process warms its resident sets on every topic (the
reads a long-running tutor makes), then times `retrieve_with_vector` over queries near
stored rows, and reports its resident set size (VmRSS) and its unique memory (USS, what
a second process adds).

The memory is bench_writes' (1M entries x 1,536 + 1M edges, 50 topics, kept with
`HAG_BENCH_KEEP_DIR`; loaded first when missing). `HAG_BENCH_FLEET_PROCESSES` (default
1,2,4) and `HAG_BENCH_FLEET_QUERIES` (per process, default 300).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

PROCESSES = [int(x) for x in os.environ.get("HAG_BENCH_FLEET_PROCESSES", "1,2,4").split(",")]
QUERIES = int(os.environ.get("HAG_BENCH_FLEET_QUERIES", "300"))
TOPICS = [f"t{g:02d}" for g in range(1, 50)] + ["cryptography"]


def tutor(seed: int) -> None:
    """One tutor process: warm every topic's resident set, wait for 'go', time the reads."""
    import numpy as np
    import psutil

    from bench.bench_writes import DIM, POOL
    from hag import retrieval, settings
    from hag.storage.db import connect

    with connect() as conn:
        dials = settings.load(conn)
    rng = np.random.default_rng(20261202)
    pool = rng.standard_normal((POOL, DIM)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    own = np.random.default_rng(seed)

    def query() -> tuple[str, np.ndarray]:
        q = pool[own.integers(POOL)] + own.standard_normal(DIM).astype(np.float32) * 0.02
        return TOPICS[own.integers(len(TOPICS))], q / np.linalg.norm(q)

    me = psutil.Process()
    base = me.memory_info().rss
    for _ in range(dials.resident_load_after_reads + 2):
        for topic in TOPICS:
            retrieval.retrieve_with_vector(topic, "lf1", query()[1], [], [])
        time.sleep(0.5)  # the background loads
    time.sleep(5)
    print("ready", flush=True)
    sys.stdin.readline()
    times = []
    for _ in range(QUERIES):
        topic, q = query()
        started = time.perf_counter()
        retrieval.retrieve_with_vector(topic, "lf1", q, [], [])
        times.append((time.perf_counter() - started) * 1000)
    full = me.memory_full_info()
    print(
        json.dumps(
            {
                "times": times,
                "rss_mb": full.rss / 2**20,
                "uss_mb": full.uss / 2**20,
                "base_rss_mb": base / 2**20,
                "resident_max_mb": dials.resident_max_mb,
            }
        ),
        flush=True,
    )


def main() -> None:
    import numpy as np

    from bench import bench_writes
    from bench.bench_retrieval import start_server
    from hag import config
    from hag.storage import db, migrate

    os.environ["HAG_EMBEDDING_DIM"] = str(bench_writes.DIM)
    os.environ["HAG_EMBEDDING_PROVIDER"] = "offline"
    keep = os.environ.get("HAG_BENCH_KEEP_DIR")
    if not keep:  # `python -m bench` runs every module: this one only on a kept memory
        print("skipped: bench_fleet runs on a kept memory (set HAG_BENCH_KEEP_DIR)", flush=True)
        return
    folder = os.path.join(keep, f"writes-{bench_writes.ROWS}")
    server = start_server(os.path.join(folder, "pgdata"))
    try:
        url = str(server.get_uri())
        os.environ["DATABASE_URL"] = url
        config.reset_config()
        db.close_all()
        with db.connect() as conn:
            migrate.migrate(conn, bench_writes.DIM)
            conn.commit()
        if not os.path.exists(os.path.join(folder, "loaded")):
            bench_writes.load_filler(bench_writes.ROWS)
            Path(folder, "loaded").touch()
        db.close_all()
        print(
            f"tutor processes on {bench_writes.ROWS:,} x {bench_writes.DIM}: {QUERIES} retrieves "
            f"each after warming every topic; load average {os.getloadavg()[0]:.2f} on "
            f"{os.cpu_count()} cores",
            flush=True,
        )
        for n in PROCESSES:
            procs = [
                subprocess.Popen(
                    [sys.executable, "-m", "bench.bench_fleet", "--tutor", str(seed)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=Path(__file__).resolve().parent.parent,
                )
                for seed in range(n)
            ]
            try:
                for proc in procs:
                    assert proc.stdout is not None
                    assert proc.stdout.readline().strip() == "ready"
                load = os.getloadavg()[0]
                for proc in procs:
                    assert proc.stdin is not None
                    proc.stdin.write("go\n")
                    proc.stdin.flush()
                out = [json.loads(p.communicate(timeout=1800)[0].splitlines()[-1]) for p in procs]
            finally:
                for proc in procs:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
            times = np.concatenate([o["times"] for o in out])
            print(
                f"  {n} process(es): retrieve p50 {np.percentile(times, 50):6.1f} ms, "
                f"p99 {np.percentile(times, 99):6.1f} ms; per process RSS "
                f"{np.mean([o['rss_mb'] for o in out]):6.0f} MB (USS "
                f"{np.mean([o['uss_mb'] for o in out]):6.0f} MB, before warming "
                f"{np.mean([o['base_rss_mb'] for o in out]):4.0f} MB; resident_max_mb "
                f"{out[0]['resident_max_mb']}); load {load:.1f}->{os.getloadavg()[0]:.1f}",
                flush=True,
            )
    finally:
        db.close_all()
        server.stop()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--tutor"]:
        tutor(int(sys.argv[2]))
    else:
        main()
