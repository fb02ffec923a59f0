"""Flat memory (issue 11): peak RSS of `hag ingest` and `hag export edges` at 1x and 10x size.

Each command runs as its own process against a private embedded PostgreSQL; its peak
resident set size is the kernel's accounting of that process (`ru_maxrss` of a small
launcher's child), so nothing of this harness is counted. Ingest reads a JSON Lines file of the
session benchmark's sessions (20 turns each); export prints every edge of a table filled
with generated edges. Memory is flat when the 10x figure stays near the 1x one.

Run: `python -m bench memory` (HAG_BENCH_MEMORY_SESSIONS, HAG_BENCH_MEMORY_EDGES set the 1x
sizes; defaults 1,000 sessions and 30,000 edges).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

SESSIONS = int(os.environ.get("HAG_BENCH_MEMORY_SESSIONS", "1000"))
EDGES = int(os.environ.get("HAG_BENCH_MEMORY_EDGES", "30000"))
SCALE = 10


# A small launcher runs the command and reports its child's peak RSS: a child forked from
# this harness would inherit the harness's own high-water mark.
_LAUNCHER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)"
    ".returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)\n"
)


def peak_rss_mb(args: list[str]) -> tuple[float, float, int]:
    """(peak RSS in MB, seconds, exit code) of `python -m hag.cli ARGS` run as a child."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, sys.executable, "-m", "hag.cli", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return int(out[0]) / 1024, time.perf_counter() - start, int(out[1])


def write_sessions(path: Path, count: int) -> int:
    """A JSON Lines file of `count` sessions (the session benchmark's shape); returns bytes."""
    from bench.bench_sessions import sessions

    with path.open("w") as f:
        for i, body in enumerate(sessions(count)):
            body["session_id"] = f"mem-{count}-{i}"
            f.write(json.dumps(body) + "\n")
    return path.stat().st_size


def fill_edges(conn: Any, count: int) -> None:
    """`count` learned edges between generated entries of one topic (no embeddings computed)."""
    conn.execute("TRUNCATE hag_edges CASCADE")
    conn.execute("DELETE FROM hag_entries WHERE concept_slug LIKE 'mem-%%'")
    side = int(count**0.5) + 1
    conn.execute(
        """
        INSERT INTO hag_entries (topic_id, concept_slug, visibility_scope, maturity, confidence,
                                 instruction, embedding)
        SELECT 'cryptography', 'mem-' || g, 'public', 'pattern', 0.6,
               'Generated entry ' || g || ' for the memory benchmark.',
               (SELECT embedding FROM hag_entries LIMIT 1)
        FROM generate_series(1, %(side)s) g
        """,
        {"side": side},
    )
    conn.execute(
        """
        INSERT INTO hag_edges (source_entry_id, target_entry_id, edge_type, condition, confidence,
                               hit_count, source_type)
        SELECT s.id, t.id, 'leads_to', 'when the generated condition ' || s.concept_slug || ' holds',
               0.5, 1, 'learned'
        FROM hag_entries s JOIN hag_entries t ON s.id <> t.id
        WHERE s.concept_slug LIKE 'mem-%%' AND t.concept_slug LIKE 'mem-%%'
        LIMIT %(count)s
        """,
        {"count": count},
    )
    conn.commit()


def main() -> None:
    os.environ.setdefault("DO_NOT_TRACK", "1")
    from bench.bench_sessions import build_world
    from bench.private_db import migrated_server
    from hag.session.process import pending_count
    from hag.storage import db

    with migrated_server("hag-bench-memory-") as (_, folder):
        with db.connect() as conn:  # a new connection knows the vector type migrate created
            build_world(conn)
            conn.commit()
        print("| command | size | file / rows | peak RSS (MB) | seconds |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for n in (SESSIONS, SESSIONS * SCALE):
            path = folder / f"sessions-{n}.jsonl"
            size = write_sessions(path, n)
            rss, seconds, code = peak_rss_mb(["ingest", str(path)])
            with db.connect() as conn:
                queued = pending_count(conn)
                conn.execute("TRUNCATE hag_sessions, hag_session_quarantine CASCADE")
                conn.commit()
            assert code == 0 and queued == n, (code, queued, n)
            print(
                f"| hag ingest | {n:,} sessions | {size / 1e6:,.0f} MB | {rss:,.0f} | {seconds:,.1f} |"
            )
            path.unlink()
        for n in (EDGES, EDGES * SCALE):
            with db.connect() as conn:
                fill_edges(conn, n)
            rss, seconds, code = peak_rss_mb(["export", "edges"])
            assert code == 0, code
            print(f"| hag export edges | {n:,} edges | {n:,} rows | {rss:,.0f} | {seconds:,.1f} |")


if __name__ == "__main__":
    main()
