"""Retrieve latency alone on a database `bench_retrieval` kept, without its numpy floor.

    HAG_BENCH_KEEP_DIR=DIR python -m bench.bench_kept_latency 10m

For a memory larger than the host's RAM, where the floor (the eligible rows held in numpy)
and the seed's reference query per sample would crowd out the page cache the reads need:
the same corpus and query kinds as `bench_retrieval` (its `make_corpus`, `make_samples`),
one client, one query at a time, default dials; latency only, no recall. Prints the first
read of each topic (cold), the issue's set, the stress set and the issue's set again.
HAG_BENCH_QUERIES (default 200) sizes the issue's set; the stress set is half of it.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import numpy as np

from bench import bench_retrieval as br


def main(label: str) -> None:
    from hag.retrieval import resident
    from hag.storage import db

    scale = br.sized(label)
    if scale is None:
        raise SystemExit(f"not a scale named by its row count: {label!r} (10m, 2m, 500k)")
    folder = os.path.join(os.environ["HAG_BENCH_KEEP_DIR"], f"{scale.label}-{scale.dim}")
    if not os.path.exists(os.path.join(folder, "loaded")):
        raise SystemExit(f"no kept database in {folder}: load it with bench.bench_retrieval")
    server = br.start_server(os.path.join(folder, "pgdata"))
    br.point_at(server, scale.dim)
    try:
        corpus = br.make_corpus(scale.rows, scale.dim, np.random.default_rng(20261130))
        rng = np.random.default_rng(7)
        count = int(os.environ.get("HAG_BENCH_QUERIES", "200"))
        samples = br.make_samples(corpus, count, ("related", "other topic"), rng)
        stress = br.make_samples(corpus, max(1, count // 2), ("no centre",), rng)
        first_of_topic: dict[int, tuple[Any, ...]] = {}
        for sample in samples:
            first_of_topic.setdefault(sample[0], sample)
        run("first read of each topic (cold)", list(first_of_topic.values()))
        run("issue's set (related / other topic)", samples)
        run("stress set (near no row)", stress)
        run("issue's set again", samples)
        print(f"resident sets held: {resident.residents.nbytes() / 2**20:,.0f} MB", flush=True)
    finally:
        db.close_all()
        server.stop()


def run(name: str, items: list[tuple[Any, ...]]) -> None:
    from hag import retrieval

    ms = []
    for t, q, slugs, learner, _ in items:
        started = time.perf_counter()
        retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1])
        ms.append((time.perf_counter() - started) * 1000)
    a = np.array(ms)
    p50, p95, p99 = np.percentile(a, [50, 95, 99])
    print(
        f"{name:<36} n={len(a):4d} p50 {p50:9.1f}  p95 {p95:9.1f}  p99 {p99:9.1f}  "
        f"max {a.max():9.1f} ms  load {os.getloadavg()[0]:.2f}",
        flush=True,
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "10m")
