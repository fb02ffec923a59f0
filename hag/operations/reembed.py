"""`hag reembed`: move a memory to another embedder (docs/embedders.md).

The configured embedder is the target. Every entry's text (and every concept's) is embedded
again in batches of `reembed_batch_size`, each batch committed into the staging tables of
migration 115, so a killed run resumes where it stopped (a run for another target starts
over). Until the switch every reader and writer uses the memory's own vectors. The switch is
one transaction: it locks out writers (readers go on), stages what was written since the
last batch, moves the staged vectors into place (the search copy and its change stamps
follow through the copy's trigger, so every resident set is read again), changes the
columns' dimension and rebuilds the vector indexes when the dimension changes, records the
new embedder and empties the staging tables. Processes started before the switch keep the
embedder they checked: restart the tutor's processes and the workers after it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from pgvector import Vector
from psycopg import sql

from hag.storage.sqlfiles import query
from hag.vectors import embedder_identity
from hag.vectors.embedder_identity import Identity
from hag.vectors.embeddings import Embedder, cut, max_chars, require_fit

Progress = Callable[[str], None]


@dataclass
class ReembedReport:
    """What a `hag reembed` did: from which embedder to which, and how many texts."""

    source: str
    target: str
    entries: int = 0
    concepts: int = 0
    embedded_now: int = 0  # texts this run embedded (a resumed run: fewer than the whole)
    resumed_from: int = 0  # texts already staged by an earlier run when this one started
    dimension_changed: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def reembed(*, batch_size: int | None = None, progress: Progress = _stderr) -> ReembedReport:
    """Move the configured database's memory to the configured embedder (see the module)."""
    from hag import settings
    from hag.storage import db, migrate
    from hag.vectors.embeddings import get_embedder

    started = time.perf_counter()
    embedder = get_embedder()
    with db.connect() as conn:
        # The schema brought up to date at the memory's own dimension, not the target's.
        migrate.migrate(conn, migrate.stored_dimension(conn) or embedder.dim)
        conn.commit()
        found = embedder_identity.held(conn)
        target, probe = embedder_identity.measure(embedder)
        report = ReembedReport(found[0].label if found else "an unrecorded embedder", target.label)
        size = batch_size or settings.load(conn).reembed_batch_size
        report.resumed_from = _prepare(conn, target, progress)
        total = _progress(conn)
        report.entries, report.concepts = total["entries"], total["concepts"]
        progress(
            f"reembed: {report.source} -> {report.target}, {report.entries} entries and "
            f"{report.concepts} concepts, batches of {size}"
        )
        report.embedded_now = _stage(conn, embedder, size, progress, commit=True)
        report.dimension_changed = _switch(conn, embedder, target, probe, size, progress)
    embedder_identity.forget_checks()
    report.seconds = round(time.perf_counter() - started, 3)
    progress(f"reembed: switched to {report.target} ({report.embedded_now} embedded by this run)")
    return report


def _prepare(conn: Any, target: Identity, progress: Progress) -> int:
    """Keep what an earlier run for this target staged (return how many), else start over."""
    row = conn.execute(query("reembed", "target")).fetchone()
    staged_for = Identity(**json.loads(row["identity"])) if row["identity"] else None
    if staged_for is not None and staged_for.same_embedder(target):
        done = _progress(conn)
        already = int(done["entries_staged"]) + int(done["concepts_staged"])
        progress(f"reembed: resuming the move to {target.label}: {already} texts already staged")
        conn.commit()
        return already
    conn.execute(query("reembed", "clear"))
    conn.execute(
        query("reembed", "set_target"), {"identity": json.dumps(asdict(target), sort_keys=True)}
    )
    conn.commit()
    return 0


def _progress(conn: Any) -> dict[str, int]:
    row = conn.execute(query("reembed", "progress")).fetchone()
    return {k: int(v) for k, v in row.items()}


def _stage(conn: Any, embedder: Embedder, size: int, progress: Progress, *, commit: bool) -> int:
    """Embed and stage what has no current staged vector, `size` texts a batch (each
    committed when `commit`); return how many texts were embedded."""
    limit = max_chars()
    embedded = 0
    while True:
        rows = conn.execute(query("reembed", "entries_to_embed"), {"limit": size}).fetchall()
        kind = "entries"
        if not rows:
            rows = conn.execute(query("reembed", "concepts_to_embed"), {"limit": size}).fetchall()
            kind = "concepts"
        if not rows:
            return embedded
        texts = [r["text"] for r in rows]
        labels = [
            f"entry {r['id']}" if kind == "entries" else f"concept {r['topic_id']}/{r['slug']}"
            for r in rows
        ]
        cut_texts = [cut(t, limit) for t in texts]
        vectors = require_fit(embedder.embed(cut_texts), cut_texts, labels)
        _write_batch(conn, kind, rows, texts, vectors)
        if commit:
            conn.commit()
        embedded += len(rows)
        done = _progress(conn)
        progress(
            f"reembed: {done['entries_staged']}/{done['entries']} entries, "
            f"{done['concepts_staged']}/{done['concepts']} concepts staged"
        )


def _write_batch(
    conn: Any, kind: str, rows: list[Any], texts: list[str], vectors: np.ndarray
) -> None:
    embeddings = [Vector(v) for v in vectors]
    if kind == "entries":
        params: dict[str, Any] = {"ids": [r["id"] for r in rows]}
        name = "stage_entries"
    else:
        params = {"topic_ids": [r["topic_id"] for r in rows], "slugs": [r["slug"] for r in rows]}
        name = "stage_concepts"
    conn.execute(query("reembed", name), {**params, "texts": texts, "embeddings": embeddings})


def _switch(
    conn: Any,
    embedder: Embedder,
    target: Identity,
    probe: np.ndarray,
    size: int,
    progress: Progress,
) -> bool:
    """The one transaction that puts the staged vectors in place; True when the
    dimension changed."""
    from hag import settings
    from hag.retrieval import ann
    from hag.storage import migrate

    with conn.transaction():
        conn.execute(query("reembed", "lock_writers"))
        _stage(conn, embedder, size, progress, commit=False)  # written since the last batch
        changed = migrate.stored_dimension(conn) != target.dim
        topics: list[str] = []
        if changed:
            for index in conn.execute(query("reembed", "vector_indexes")).fetchall():
                label = index["label"] or ""
                if label.startswith("hag-ann topic:"):
                    topics.append(label.removeprefix("hag-ann topic:"))
                conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(index["index_name"])))
            conn.execute("SELECT hag_relax_embedding_dim()")
        conn.execute(query("reembed", "swap_entries"))
        conn.execute(query("reembed", "swap_concepts"))
        if changed:
            conn.execute("SELECT hag_fix_embedding_dim(%s)", (target.dim,))
            dials = settings.load(conn)
            for topic_id in topics:
                ann._build(conn, topic_id, dials, concurrently=False)
        embedder_identity.write(conn, target, probe)
        conn.execute(query("reembed", "clear"))
    return changed
