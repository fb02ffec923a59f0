"""Resident sets: a searched set's eligible rows kept in the read process's memory.

A topic pass through the search copy (migration 080) costs PostgreSQL's per-row work over
every eligible row of the topic: at 1M x 384 about 8,000 rows and 4.5 ms, where numpy takes
0.3 ms over the same rows in memory (docs/retrieval.md, issue 15). So a set the read path
searches often is read once into memory (its eligible rows' ids, maturity tiers and unit
vectors in half precision, widened to float32), and a pass over it becomes:

1. the boosted half-precision score of every row in numpy, the best `compact_candidates`;
2. one query (`resident_rerank`) reading those rows' exact similarities from hag_entries and,
   in the same snapshot, the set's stamp (migration 095: the sum of the changes recorded
   for the set by the copy's trigger, seeded with a random one by migration 125) and the
   database's identity (hag_database_identity: system identifier, database oid, a random
   id);
3. when the identity and the stamp are the ones the rows were read at, the set in memory
   is the set in that snapshot, and the re-rank is proven exactly as the copy's
   (ranking.rerank_compact): the seed's top 5, not an estimate. When the stamp is not, the
   set follows the writes since (below) and answers from the result; when it cannot, it is
   dropped and the pass goes through the copy as before, in the same turn; when the
   identity is not (another database behind the read URL: a restore, a failover), every
   held set is.

Following writes (migration 185): each change row lists the ids it changed in its set and
its transaction's id, and a held set keeps the snapshot its rows are as of. A read that finds
the stamp moved reads the set's change rows that snapshot does not see, the rows they name
as the set holds them now, and the new stamp and snapshot (query resident_changes); the set
applies them (`ResidentSet.followed`, a new set sharing the loaded matrix) and is kept only
when the old stamp plus the changes read is the new stamp. A change that names no rows (the
nightly fold, set '*'), more than `resident_follow_max_rows` changed rows, or a sum that
does not add up drops it, to be read again in full.

Which sets, and how much memory: a set is read in the background after
`resident_load_after_reads` exact reads through the copy since it was last resident, one load
at a time per process, when it fits in `resident_max_mb`. When it does not, it takes the
memory of sets that earn less for it: a set's claim is its exact reads per byte held, each
read counting half as much every `resident_half_life_seconds`; sets with a smaller claim are
dropped, least first, when that makes room (a claim must be `resident_claim_margin` times
larger to win, so sets read about as often do not take turns), and otherwise the newcomer
stays with the copy (its size is remembered, so it is read again only once its claim would
win). A working set
larger than the budget keeps the sets read most per byte, without thrashing. A set
dropped (a change it could not follow) before it served as many reads as it took to earn its
load waits twice as many reads the next time (and half as many again once it serves them).
Only a read-pool connection's passes use them (a caller's
connection may see rows it never commits). The eligibility filter's dials and the pass's
scopes are part of a set's key, the boosts are applied per read, so a changed dial never
serves rows read under the old one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hag.retrieval.ranking import Row, products, rerank_compact
from hag.retrieval.tiers import tier_boosts
from hag.settings import Settings
from hag.storage import db
from hag.storage.db import Conn
from hag.storage.sqlfiles import query

log = logging.getLogger("hag.retrieval.resident")

_MB = 1 << 20
_MAX_BACKOFF = 10  # at most 2**10 times `resident_load_after_reads` between two loads
_MAX_KEYS = 100_000  # sets whose reads are counted; the least recently read are forgotten


class _StampMoved(Exception):
    """A held set's stamp is no longer the one its rows are as of."""


class SetKey(NamedTuple):
    """What a resident set holds: one searched set, these scopes, this eligibility filter.
    Its fields are the parameters of the queries that read the set (`params`)."""

    search_set: str
    topic_id: str | None
    scopes: tuple[str, ...]
    retrieval_min_confidence: float
    floor_proven: float
    floor_pattern: float
    floor_candidate: float

    def params(self) -> dict[str, Any]:
        return {**self._asdict(), "scopes": list(self.scopes)}


def filter_key(
    search_set: str, topic_id: str | None, scopes: Sequence[str], filters: dict[str, Any]
) -> SetKey:
    """The key of a pass's set: its search set, topic and scopes, and the filter's dials
    (`filters`: store.filters)."""
    return SetKey(
        search_set,
        topic_id,
        tuple(scopes),
        filters["retrieval_min_confidence"],
        filters["floor_proven"],
        filters["floor_pattern"],
        filters["floor_candidate"],
    )


_NO_ROWS = np.zeros(0, np.int64)


@dataclass
class ResidentSet:
    """One set's eligible rows in memory, as of one snapshot. Never changed once shared: a
    set that follows writes is replaced by a new one (`followed`), which shares the vectors
    read at load and holds only the rows added since in `added`."""

    identity: str  # the database it was read from (sql function hag_database_identity)
    stamp: int
    snapshot: str  # the snapshot its rows are as of (pg_current_snapshot), for the changes since
    ids: np.ndarray  # (n, 16) uint8: the uuids' bytes
    tiers: np.ndarray  # (n,) int8: 0 proven, 1 pattern, 2 candidate
    vectors: np.ndarray  # (m, dim) float32: rows 0..m-1, unit, half precision widened
    added: np.ndarray | None = None  # (n - m, dim) float32: rows m..n-1, added by changes
    left: np.ndarray = field(default_factory=lambda: _NO_ROWS)  # rows no longer in the set
    served: int = 0
    nbytes: int = field(init=False)
    live: int = field(init=False)  # rows in the set
    _at: dict[bytes, int] | None = field(default=None, repr=False)  # id -> row, made on demand

    def __post_init__(self) -> None:
        extra = 0 if self.added is None else self.added.nbytes
        self.nbytes = self.ids.nbytes + self.tiers.nbytes + self.vectors.nbytes + extra
        self.live = len(self.tiers) - len(self.left)

    def scores(self, unit: np.ndarray, boosts: np.ndarray) -> np.ndarray:
        """The boosted half-precision score of every row; -inf for rows that left the set."""
        if not len(self.tiers):
            return np.zeros(0, np.float32)
        found = products(self.vectors, unit)
        if self.added is not None:
            found = np.concatenate([found, products(self.added, unit)])
        found *= boosts[self.tiers]  # in place: no second array of the set's size
        found[self.left] = -np.inf
        return found

    def row(self, i: int) -> np.ndarray:
        base = len(self.vectors)
        found: np.ndarray = (
            self.vectors[i] if i < base or self.added is None else self.added[i - base]
        )
        return found

    def followed(
        self,
        stamp: int,
        snapshot: str,
        changes: Sequence[tuple[bytes, int | None, bytes | None]],
        compact_share: float,
    ) -> ResidentSet:
        """This set with `changes` applied: (id, tier, vector in halfvec's binary form) for
        each changed row, tier and vector None for a row no longer in the set. A row whose
        vector is unchanged only takes its new tier; one with a new vector leaves its old
        row and is added. Rebuilt in memory when the rows added or left since the load
        pass `compact_share` of the set."""
        at = dict(self.at())
        tiers = self.tiers.copy()
        left = set(self.left.tolist())
        new_ids: list[bytes] = []
        new_tiers: list[int] = []
        new_vectors: list[np.ndarray] = []
        n = len(tiers)
        for id_bytes, tier, vector in changes:
            i = at.get(id_bytes)
            if vector is None or tier is None:
                if i is not None:
                    left.add(i)
                continue
            widened = _halves(vector)
            if i is not None and np.array_equal(self.row(i), widened):
                tiers[i] = tier
                left.discard(i)
                continue
            if i is not None:
                left.add(i)
            at[id_bytes] = n + len(new_ids)
            new_ids.append(id_bytes)
            new_tiers.append(tier)
            new_vectors.append(widened)
        ids = self.ids
        vectors = self.vectors
        added = self.added
        if new_ids and not len(vectors):  # a set read empty: no width to stack on
            vectors = np.zeros((0, len(new_vectors[0])), np.float32)
        if new_ids:
            ids = np.concatenate([ids, np.frombuffer(b"".join(new_ids), np.uint8).reshape(-1, 16)])
            tiers = np.concatenate([tiers, np.array(new_tiers, np.int8)])
            stacked = np.stack(new_vectors)
            added = stacked if added is None else np.concatenate([added, stacked])
        gone = np.array(sorted(left), np.int64)
        extra = len(gone) + (0 if added is None else len(added))
        if extra and extra > compact_share * (len(tiers) - len(gone)):
            return _compacted(
                self.identity, stamp, snapshot, ids, tiers, vectors, added, gone, self.served
            )
        result = ResidentSet(
            self.identity, stamp, snapshot, ids, tiers, vectors, added, gone, self.served
        )
        result._at = at
        return result

    def at(self) -> dict[bytes, int]:
        """Each id's row (made at the first change the set follows; rows are never reused)."""
        if self._at is None:
            self._at = {self.ids[i].tobytes(): i for i in range(len(self.ids))}
        return self._at


def _halves(vector: bytes) -> np.ndarray:
    """A halfvec in its binary form (halfvec_send), widened to float32."""
    dim = (len(vector) - 4) // 2
    return np.frombuffer(vector, ">f2", dim, 4).astype(np.float32)


def _compacted(
    identity: str,
    stamp: int,
    snapshot: str,
    ids: np.ndarray,
    tiers: np.ndarray,
    vectors: np.ndarray,
    added: np.ndarray | None,
    gone: np.ndarray,
    served: int,
) -> ResidentSet:
    """A set's rows in memory without the rows that left it, in one matrix again."""
    keep = np.ones(len(tiers), bool)
    keep[gone] = False
    base = len(vectors)
    parts = [vectors[keep[:base]]]
    if added is not None:
        parts.append(added[keep[base:]])
    matrix = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
    matrix.setflags(write=False)
    return ResidentSet(identity, stamp, snapshot, ids[keep], tiers[keep], matrix, served=served)


class Residents:
    """The resident sets of one read pool's server, their admissions and their memory."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._sets: dict[SetKey, ResidentSet] = {}
        self._reads: dict[SetKey, int] = {}  # reads through the copy since resident
        self._backoff: dict[SetKey, int] = {}
        self._rates: dict[SetKey, tuple[float, float]] = {}  # decayed reads, when
        self._sizes: dict[SetKey, int] = {}  # bytes of a set read before
        self._loading: SetKey | None = None
        self._generation = 0  # moves on clear(): a load begun before it is not kept

    def clear(self) -> None:
        with self._lock:
            self._sets.clear()
            self._reads.clear()
            self._backoff.clear()
            self._rates.clear()
            self._sizes.clear()
            self._generation += 1

    def holds(self, key: SetKey) -> bool:
        with self._lock:
            return key in self._sets

    def before_index(self, key: SetKey, dials: Settings) -> bool:
        """Whether `key` is held and small enough to answer before an index is tried."""
        with self._lock:
            held = self._sets.get(key)
            return held is not None and held.nbytes <= dials.resident_before_index_max_mb * _MB

    def nbytes(self) -> int:
        with self._lock:
            return sum(s.nbytes for s in self._sets.values())

    def answer(
        self,
        conn: Conn,
        key: SetKey,
        vector: np.ndarray,
        count: int,
        dials: Settings,
    ) -> tuple[list[Row], str] | None:
        """The pass's proven answer from the resident set `key`, or None (not resident, the
        set changed since it was read and could not follow, or the re-rank proved nothing
        even widened). A set whose stamp moved applies the rows changed since (`_follow`)
        and answers from them, once per read: a set changed again meanwhile leaves this
        read to the copy."""
        with self._lock:
            self._trim(dials)
            held = self._sets.get(key)
            if held is None:
                return None
        norm = float(np.linalg.norm(vector))
        if not norm:
            return None
        unit = (vector / norm).astype(np.float32)
        try:
            return self._rerank(conn, key, held, unit, vector, count, dials)
        except _StampMoved:
            pass
        followed = self._follow(conn, key, held, dials)
        if followed is None:
            return None
        try:
            answered = self._rerank(conn, key, followed, unit, vector, count, dials)
        except _StampMoved:  # changed again meanwhile: the copy answers, the set stays
            return None
        if answered is None:
            return None
        rows, method = answered
        return rows, method.replace("resident", "resident-followed", 1)

    def _rerank(
        self,
        conn: Conn,
        key: SetKey,
        held: ResidentSet,
        unit: np.ndarray,
        vector: np.ndarray,
        count: int,
        dials: Settings,
    ) -> tuple[list[Row], str] | None:
        """The proven answer from `held`; None when none is proven (or the set was dropped).
        Raises _StampMoved when the set's stamp is no longer `held`'s."""
        boosts = np.array(tier_boosts(dials), np.float32)  # by hag_maturity_tier's number
        total = held.live
        approximate = held.scores(unit, boosts)
        requested = max(dials.compact_candidates, count)
        for attempt in range(2):
            if requested >= total:
                chosen = np.flatnonzero(approximate > -np.inf)
            else:  # the best `requested`, without negating (copying) every score
                size = len(approximate)
                chosen = np.argpartition(approximate, size - requested)[size - requested :]
            rows = conn.execute(
                query("retrieval", "resident_rerank"),
                {
                    **key.params(),
                    "query": vector,
                    "ids": [uuid.UUID(bytes=held.ids[i].tobytes()) for i in chosen],
                    "approximate": [float(approximate[i]) for i in chosen],
                },
            ).fetchall()
            if rows[0]["identity"] != held.identity:
                self._forget_database(rows[0]["identity"], key, held)
                return None
            if int(rows[0]["stamp"]) != held.stamp:
                raise _StampMoved
            found = [{k: v for k, v in r.items() if k != "stamp"} for r in rows if r["id"]]
            if len(found) != len(chosen):  # a candidate left the set at an equal stamp
                log.warning("resident set %s disagrees with its stamp; dropped", key[:2])
                self._drop(key, held, dials)
                return None
            # every eligible row is a candidate: nothing outside them to prove against
            asked = len(found) + 1 if requested >= total else requested
            reranked = rerank_compact(found, count, asked, dials)
            if reranked.proven:
                with self._lock:
                    held.served += 1
                    self._count(key, dials)
                return reranked.rows, "resident" if attempt == 0 else "resident-widened"
            requested *= dials.ann_widen_factor
        return None

    def _follow(
        self, conn: Conn, key: SetKey, held: ResidentSet, dials: Settings
    ) -> ResidentSet | None:
        """`held` with the rows changed since its snapshot applied (query resident_changes,
        migration 185), kept in place of it; None, with the set dropped to be read again in
        full, when following is off (`resident_follow_max_rows` 0), more rows changed than
        that dial, a change does not name its rows (a fold, a TRUNCATE, a backfill), or
        the changes read do not add up to the new stamp (a change missed)."""
        limit = dials.resident_follow_max_rows
        if limit <= 0:
            self._drop(key, held, dials)
            return None
        with self._lock:  # another read may have followed it already: fewer rows since
            newer = self._sets.get(key)
        if newer is not None and newer.identity == held.identity:
            held = newer  # any held version follows exactly; a later one reads fewer rows
        rows = conn.execute(
            query("retrieval", "resident_changes"),
            {**key.params(), "snapshot": held.snapshot, "max_rows": limit},
            binary=True,
        ).fetchall()
        head = rows[0]
        if head["identity"] != held.identity:
            self._forget_database(head["identity"], key, held)
            return None
        stamp = int(head["stamp"])
        if head["unknown"] or head["changed"] > limit or held.stamp + int(head["added"]) != stamp:
            self._drop(key, held, dials)
            return None
        changes = [(r["id"], r["tier"], r["vector"]) for r in rows if r["id"] is not None]
        width = held.vectors.shape[1] if len(held.vectors) else None
        if width is not None and any(
            v is not None and (len(v) - 4) // 2 != width for _, _, v in changes
        ):  # vectors of another dimension (a re-embedding): nothing to add them to
            self._drop(key, held, dials)
            return None
        followed = held.followed(
            stamp, head["snapshot"], changes, dials.resident_follow_compact_share
        )
        with self._lock:
            if self._sets.get(key) is held:  # else another read followed it (or it left)
                self._sets[key] = followed
        return followed

    def note_read(
        self,
        key: SetKey,
        dials: Settings,
        executor: Executor,
        *,
        indexed: bool = False,
    ) -> None:
        """Count a read of set `key` the memory could have answered; start its load once it
        has earned it. `indexed`: the index answered it, which counts only for a set known
        (from an earlier read of it) to be within `resident_before_index_max_mb`."""
        if dials.resident_max_mb <= 0:
            return
        with self._lock:
            if key in self._sets:
                return
            size = self._sizes.get(key)
            if indexed and (size is None or size > dials.resident_before_index_max_mb * _MB):
                return
            self._count(key, dials)
            self._reads[key] = self._reads.get(key, 0) + 1
            needed = dials.resident_load_after_reads << self._backoff.get(key, 0)
            if self._reads[key] < needed or self._loading is not None:
                return  # a set that earned it while another loads starts on its next read
            if size is not None and self._evictions(key, size, dials) is None:
                self._reads[key] = 0  # known not to win yet: ask again after as many reads
                return
            self._loading = key
            generation = self._generation
        try:
            executor.submit(self._load_in_background, key, dials, generation)
        except RuntimeError:  # the executor is shutting down
            with self._lock:
                self._loading = None

    def load(self, conn: Conn, key: SetKey, dials: Settings) -> bool:
        """Read set `key` into memory now, on `conn`; whether it is resident afterwards."""
        with self._lock:
            generation = self._generation
        return self._load(conn, key, dials, generation)

    def wait(self, timeout: float = 60.0) -> None:
        """Until no load is running (tests and the benchmark's warm-up)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if self._loading is None:
                    return
            time.sleep(0.005)

    def _count(self, key: SetKey, dials: Settings) -> None:
        """One more exact read of `key` in its decayed count (the lock is held)."""
        now = self._clock()
        self._rates[key] = (self._rate(key, now, dials) + 1.0, now)
        if len(self._rates) > _MAX_KEYS:  # sets long unread (or of old dials): no claim left
            self._rates = dict(
                sorted(self._rates.items(), key=lambda kv: -kv[1][1])[: _MAX_KEYS // 2]
            )
            for book in (self._reads, self._backoff, self._sizes):
                for stale in [k for k in book if k not in self._rates]:
                    del book[stale]

    def _trim(self, dials: Settings) -> None:
        """Drop held sets, smallest claim first, until they fit `resident_max_mb` as it is
        now (a lowered dial frees memory at the next read; 0 frees all) (the lock is held)."""
        budget = dials.resident_max_mb * _MB
        if budget <= 0:
            self._sets.clear()
            return
        used = sum(s.nbytes for s in self._sets.values())
        if used <= budget:  # the usual case: nothing to sort on a read
            return
        for k, _, _ in self._by_claim(dials):
            if used <= budget:
                break
            used -= self._sets.pop(k).nbytes

    def _by_claim(self, dials: Settings, but: object = None) -> list[tuple[Any, float, int]]:
        """The held sets (but `but`) as (key, claim, bytes), smallest claim first; a claim
        is the set's decayed reads per byte held (the lock is held)."""
        now = self._clock()
        held = [
            (k, self._rate(k, now, dials) / max(h.nbytes, 1), h.nbytes)
            for k, h in self._sets.items()
            if k != but
        ]
        return sorted(held, key=lambda item: item[1])

    def _rate(self, key: SetKey, now: float, dials: Settings) -> float:
        """Exact reads of `key`, each halved every `resident_half_life_seconds` since."""
        value, at = self._rates.get(key, (0.0, now))
        return value * math.pow(0.5, (now - at) / dials.resident_half_life_seconds)

    def _evictions(self, key: SetKey, size: int, dials: Settings) -> list[SetKey] | None:
        """The held sets to drop so that `size` bytes of `key` fit in `resident_max_mb`, those
        with the smallest claim (reads per byte) first and only those whose claim times
        `resident_claim_margin` is below `key`'s (so that sets read about as often do not
        take turns); None when even all of them would not make room (the lock is held)."""
        budget = dials.resident_max_mb * _MB
        claim = self._rate(key, self._clock(), dials) / max(size, 1)
        others = self._by_claim(dials, but=key)
        used = sum(n for _, _, n in others)
        dropped: list[SetKey] = []
        for k, other_claim, n in others:
            if used + size <= budget or other_claim * dials.resident_claim_margin >= claim:
                break
            dropped.append(k)
            used -= n
        return dropped if used + size <= budget else None

    def _load_in_background(self, key: SetKey, dials: Settings, generation: int) -> None:
        try:
            with db.reading() as conn:
                self._load(conn, key, dials, generation)
        except Exception:  # a failed load only leaves the set with the copy
            log.exception("reading resident set %s failed", key[:2])
        finally:
            with self._lock:
                self._loading = None

    def _load(
        self,
        conn: Conn,
        key: SetKey,
        dials: Settings,
        generation: int,
    ) -> bool:
        budget = dials.resident_max_mb * _MB
        rows = self._read(conn, key, budget)
        with self._lock:
            if generation != self._generation:
                return False
            self._reads.pop(key, None)
            if rows is None:  # larger than the whole budget: tried again if the dial grows
                self._sizes[key] = budget + 1
                return False
            held = ResidentSet(*rows)
            self._sizes[key] = held.nbytes
            dropped = self._evictions(key, held.nbytes, dials)
            if dropped is None:
                log.info("resident set %s waits: the memory holds sets read more", key[:2])
                return False
            for k in dropped:
                del self._sets[k]
            self._sets[key] = held
            return True

    def _read(
        self, conn: Conn, key: SetKey, room: int
    ) -> tuple[str, int, str, np.ndarray, np.ndarray, np.ndarray] | None:
        """The database's identity, the set's stamp and snapshot, ids, tiers and vectors
        (none for an empty set: it is held too, and answers nothing until its stamp moves);
        None when they would take over `room` bytes (the read stops there)."""
        identity = snapshot = ""
        stamp: int | None = None
        ids: list[bytes] = []
        tiers: list[int] = []
        vectors: list[bytes] = []
        size = 0
        with conn.cursor(binary=True) as cursor:
            for row in cursor.stream(query("retrieval", "resident_rows"), key.params()):
                identity, stamp, snapshot = row["identity"], row["stamp"], row["snapshot"]
                if row["id"] is None:
                    break  # the set has no eligible rows: its stamp only
                ids.append(row["id"])
                tiers.append(row["tier"])
                vectors.append(row["vector"])
                size += 17 + 2 * (len(row["vector"]) - 4)  # float32: twice the half bytes
                if size > room:
                    return None
        if stamp is None:
            raise RuntimeError("resident_rows returned no row, not even the stamp")
        dim = (len(vectors[0]) - 4) // 2 if vectors else 0
        halves = np.frombuffer(b"".join(vectors), np.dtype([("head", ">i4"), ("x", ">f2", dim)]))
        matrix = halves["x"].astype(np.float32)
        matrix.setflags(write=False)
        id_bytes = np.frombuffer(b"".join(ids), np.uint8).reshape(-1, 16)
        return identity, int(stamp), snapshot, id_bytes, np.array(tiers, np.int8), matrix

    def _forget_database(self, now: str, key: SetKey, held: ResidentSet) -> None:
        """Another database answers behind the read URL (a restore, a failover): every set
        held was read from the one before, whatever its stamp, so none is kept. A read that
        began before another one found this and sets were loaded again (`held` is no longer
        its key's set) changes nothing: those were read from the database now answering."""
        with self._lock:
            if self._sets.get(key) is not held:
                return
        log.warning(
            "the read path's database changed (%s, was %s): resident sets dropped",
            now,
            held.identity,
        )
        self.clear()

    def _drop(self, key: SetKey, held: ResidentSet, dials: Settings) -> None:
        """The set changed: forget it, and wait longer next time if it served too little."""
        with self._lock:
            if self._sets.get(key) is not held:
                return
            del self._sets[key]
            needed = dials.resident_load_after_reads << self._backoff.get(key, 0)
            level = self._backoff.get(key, 0)
            if held.served < needed:
                self._backoff[key] = min(level + 1, _MAX_BACKOFF)
            elif level:
                self._backoff[key] = level - 1


residents = Residents()
db.on_read_pool_closed(residents.clear)  # the sets of the database left
