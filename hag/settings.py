"""The registry of every dial, and the 60-second cache through which code reads them.

Each dial is declared once, as a field of the `Settings` snapshot: its name is the key, its
annotation the type, and `_num` / `_dial` give its default, bounds, one-line description
and the part of the system that reads it. REGISTRY is built from those fields, and each
dial is a row in `hag_settings` (SPEC §7). `hag migrate` writes new keys with
their defaults and keeps edited values; `hag settings set` validates type and range before
writing. Nothing outside this registry hard-codes a threshold, and a test proves every key
has a reader (tests/test_settings.py).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, get_type_hints

from hag.errors import SettingsError
from hag.storage.schema import EDGE_TYPES

if TYPE_CHECKING:  # annotations only: `current()` imports hag.storage.db when it first connects
    import psycopg

    from hag.storage.db import Conn

# A topic scope as the schema admits it (migration 001): a lower-case slug not naming another graph.
# Patterns are matched whole (`re.fullmatch`): `$` would also match before a trailing newline.
TOPIC_SCOPE = r"(?!student)[a-z][a-z0-9_-]*"


# A dial's value on its way in or out: raw input (a CLI word, a JSON value from hag_settings)
# before `validate`, the JSON stored after. Typed once it is in a snapshot (Settings).
JSON = Any


@dataclass(frozen=True)
class Dial:
    key: str
    type: str  # float | int | bool | str | list
    default: JSON
    description: str
    consumer: str  # the module (path) that reads it
    min: float | None = None
    max: float | None = None
    choices: tuple[str, ...] = ()  # allowed items of a list dial (or values of a str dial)
    forbidden: tuple[str, ...] = field(default=())  # items a list dial may never hold
    pattern: str = ""  # the shape every item of a list dial (or a str dial's value) must have
    min_items: int = 0  # a list dial with fewer items is refused


def _num(default: float, lo: float, hi: float, description: str, consumer: str) -> Any:
    """A number dial's declaration: an int or float by its field's annotation."""
    return field(
        metadata={
            "dial": {
                "default": default,
                "min": lo,
                "max": hi,
                "description": description,
                "consumer": consumer,
            }
        }
    )


def _dial(default: JSON, description: str, consumer: str, **rules: Any) -> Any:
    """A bool, str or list dial's declaration (`rules`: Dial's choices, forbidden, pattern,
    min_items)."""
    return field(
        metadata={
            "dial": {"default": default, "description": description, "consumer": consumer, **rules}
        }
    )


R, S, W, E, C, B, V = (
    "hag/retrieval",
    "hag/session",
    "hag/nightly",
    "hag/enrichment",
    "hag/settings.py",
    "hag/support/bounds.py",
    "hag/evidence",
)


@dataclass(frozen=True)
class Settings(Mapping[str, Any]):
    """Every dial, declared once: a snapshot holds one typed attribute per dial (`s.floor_proven`).

    Each field is a dial: its name is the key, its annotation the type (a list dial is a
    tuple of words), and `_num` / `_dial` hold its default, bounds, meaning and reader, from
    which REGISTRY is built (`_registry`). So a misspelt dial fails mypy instead of a run.
    Build a snapshot with `snapshot`, `defaults` or `load`, never field by field.

    Transitional: the snapshot is still a read-only Mapping (`s["floor_proven"]`, `keys()`,
    `items()`, `{**s}`) so that code not yet converted to attributes keeps working; an
    unknown key raises SettingsError. New code reads attributes.
    """

    # The seed's numbers are kept exactly (SPEC marks them *seed*); the rest are ours and say so.
    # fmt: off
    # The registry reads as a table: one dial per line, so long lines are allowed here.
    # --- retrieval (SPEC §3) ---
    retrieval_min_confidence: float = _num(0.4, 0, 1, "seed: p_min_confidence, the global floor of every pass", R)
    floor_proven: float = _num(0.30, 0, 1, "seed: confidence floor for proven entries", R)
    floor_pattern: float = _num(0.40, 0, 1, "seed: confidence floor for pattern entries", R)
    floor_candidate: float = _num(0.70, 0, 1, "seed: confidence floor for candidate entries", R)
    boost_proven: float = _num(1.1, 0.5, 3, "seed: maturity boost/weight of proven entries in ranking", R)
    boost_pattern: float = _num(1.05, 0.5, 3, "seed: maturity boost/weight of pattern entries in ranking", R)
    boost_candidate: float = _num(1.0, 0.5, 3, "seed: maturity boost/weight of other entries (1.0)", R)
    match_count: int = _num(5, 1, 100, "seed: rows each semantic pass returns (LIMIT 5)", R)
    concept_match_count: int = _num(5, 1, 100, "ours: rows the by-concept pass returns", R)
    topic_top_k: int = _num(5, 1, 100, "seed: topic advisories that survive the merge and re-rank", R)
    tutor_match_count: int = _num(5, 0, 100, "seed: rows of the tutor pass (same RPC, LIMIT 5)", R)
    student_match_count: int = _num(5, 0, 100, "seed: rows of the student pass (same RPC, LIMIT 5)", R)
    concept_match_bonus: float = _num(1.30, 1, 5, "seed: ranking bonus when the slug is in the expected set", R)
    recent_concept_turns: int = _num(3, 1, 50, "seed: turns whose concept slugs feed the by-concept pass", R)
    query_message_max_chars: int = _num(500, 1, 100000, "seed: student message characters in the query context", R)
    # the relevance ranking (issue 30, docs/retrieval.md "Relevance"): one setting away from the seed's
    retrieval_ranking: str = _dial("seed", "ours: seed = the seed's context string, by-concept pass from the recent turns and score similarity x confidence x maturity x bonus; relevance = the message alone is embedded, the topic's nearest catalogue concepts feed a catalogue pass, the score blends entry and concept similarity, adds the message's BM25 over the returned concepts and confidence as a bounded tie-break", R, choices=("seed", "relevance"))
    relevance_catalogue_concepts: int = _num(8, 1, 100, "ours (measured on the development half, docs/retrieval.md): under relevance, the topic's catalogue concepts nearest the message whose entries the catalogue pass reads (and the lexical signal's documents)", R)
    relevance_concept_weight: float = _num(0.5, 0, 1, "ours (measured): under relevance, the share of the concept's similarity in an entry's relevance (the rest: the entry's own)", R)
    relevance_lexical_weight: float = _num(0.03, 0, 1, "ours (measured on the development half): under relevance, the concept's BM25 score for the message's words (over the catalogue pass's concepts) times this is added to an entry's score; 0 = no lexical signal", R)
    relevance_lexical_k1: float = _num(1.2, 0, 10, "ours (BM25's customary value): under relevance, how fast a repeated word's weight saturates in the lexical signal", R)
    relevance_lexical_b: float = _num(0.75, 0, 1, "ours (BM25's customary value): under relevance, how much a long concept document's words are discounted in the lexical signal (0 = not at all)", R)
    relevance_confidence_weight: float = _num(0.02, 0, 1, "ours (measured): under relevance, confidence x maturity boost times this is added to the relevance: a tie-break, bounded by this x the largest boost", R)
    embed_max_chars: int = _num(2000, 1, 100000, "seed: every embedded text is cut to this many characters", "hag/vectors/embeddings")
    embedder_agree_min_cosine: float = _num(0.99, 0.5, 1, "ours: cosine at or above which two vectors of one text count as one model's (the probe text's at migrate, each adoption sample's)", "hag/vectors/embedder_identity.py")
    embedder_adopt_sample_entries: int = _num(5, 1, 1000, "ours: stored entries re-embedded to adopt a memory that records no embedder; at least half must agree", "hag/vectors/embedder_identity.py")
    advisory_max_chars: int = _num(400, 20, 100000, "seed: advisory text clipped at a sentence boundary", R)
    topic_scopes: tuple[str, ...] = _dial(["public"], "ours: visibility scopes the topic passes read", "hag/storage/visibility.py", pattern=TOPIC_SCOPE, forbidden=("tutor", "visual"), min_items=1)
    band_high_min: float = _num(0.75, 0, 1, "ours: confidence at or above which the band label is 'high'", R)
    band_medium_min: float = _num(0.5, 0, 1, "ours: confidence at or above which the band label is 'medium'", R)
    edge_walk_top_k: int = _num(2, 0, 20, "seed: top entries that get a decision tree", R)
    edge_min_confidence: float = _num(0.3, 0, 1, "seed: edges below this are not walked", R)
    edge_include_candidate_targets: bool = _dial(True, "seed: walk edges into candidate entries (on)", R)
    edge_target_max_chars: int = _num(100, 10, 10000, "seed: target instruction characters on an edge line", R)
    edge_walk_max_edges_per_entry: int = _num(3, 1, 50, "ours: edge lines rendered per walked entry", R)
    retrieval_cache_ttl_seconds: int = _num(30, 0, 86400, "ours: result cache lifetime (0 disables it)", R)
    retrieval_cache_size: int = _num(1024, 0, 1000000, "ours: result cache entries (0 disables it)", R)
    embedding_cache_size: int = _num(4096, 0, 1000000, "ours: cached query embeddings by context string", R)
    embedding_timeout_seconds: float = _num(3.0, 0.1, 600.0, "ours: a turn's query embedding gives up after this long, its retries included; retrieve then answers from the passes that need no query vector and says so", R)
    embedding_retries: int = _num(1, 0, 10, "ours: further tries of a turn's query embedding after a failure, within embedding_timeout_seconds", R)
    reembed_batch_size: int = _num(64, 1, 10000, "ours: texts `hag reembed` embeds and stages per committed batch (a kill loses at most one batch)", "hag/operations/reembed.py")
    ann_candidates: int = _num(20, 5, 10000, "ours (measured, docs/retrieval.md): nearest rows fetched before the maturity re-rank", R)
    hnsw_ef_search: int = _num(80, 1, 1000, "ours (measured, docs/retrieval.md): hnsw.ef_search on the approximate path; the contrast test sends the queries it would miss to the exact query", R)
    ann_min_contrast: float = _num(1.5, 1.0, 100.0, "ours (measured, docs/retrieval.md): below this relative contrast (mean distance over the nearest candidate's) the exact query answers instead of the approximate one", R)
    ann_contrast_sample_rows: int = _num(2000, 0, 100000, "ours (measured, docs/retrieval.md): random rows of an indexed set kept in memory; a query whose contrast against them is low skips the approximate walk (0: always walk first)", R)
    ann_mean_ttl_seconds: int = _num(3600, 1, 604800, "ours: how long the mean vector of a searched set (the contrast's reference) is reused", R)
    ann_widen_factor: int = _num(4, 2, 100, "ours: how much larger the second approximate try is before the exact query", R)
    hnsw_m: int = _num(16, 2, 100, "ours: m of the per-topic HNSW indexes (pgvector's default, with which recall was measured)", R)
    hnsw_ef_construction: int = _num(64, 4, 1000, "ours: ef_construction of the per-topic HNSW indexes (pgvector's default)", R)
    ann_build_lock_timeout_seconds: int = _num(60, 1, 86400, "ours: a per-topic index build gives up waiting for open transactions after this long (the nightly run tries again the next night)", R)
    ann_build_memory_mb: int = _num(1024, 64, 65536, "ours: maintenance_work_mem of a per-topic index build (an HNSW graph built in memory is several times faster)", R)
    exact_scan_max_rows: int = _num(2000, 0, 100000000, "ours (measured, docs/retrieval.md): the tutor scope is scanned exactly up to this many rows, above it searched through its HNSW index", R)
    topic_exact_scan_max_rows: int = _num(25000, 0, 100000000, "ours (measured, docs/retrieval.md): a topic is scanned exactly up to this many rows; above it gets (and uses) its own HNSW index", R)
    compact_candidates: int = _num(20, 5, 10000, "ours (measured, docs/retrieval.md): rows an exact-shaped pass takes from the half-precision search copy before re-ranking them with the exact vectors", R)
    compact_similarity_error: float = _num(0.003, 0.0, 2.0, "ours (derived, docs/retrieval.md): bound on |cosine in half precision - exact cosine| for unit vectors, by which a re-ranked compact answer is proven equal to the exact query's", R)
    search_copy_cluster_min_rows: int = _num(20000, 0, 1000000000, "ours (measured, docs/retrieval.md): the nightly run rewrites a partition of the search copy in the order its passes read it (CLUSTER) once it holds more rows than this", R)
    resident_max_mb: int = _num(1024, 0, 1000000, "ours (measured, docs/retrieval.md): memory a read process may hold in resident sets, searched sets of the copy kept in numpy and checked against the copy's stamp on every read (0: none)", R)
    resident_load_after_reads: int = _num(2, 1, 1000000, "ours: a searched set is read into memory after this many reads through the copy since it was last resident (doubled each time a set changes before serving that many reads)", R)
    resident_before_index_max_mb: int = _num(16, 0, 1000000, "ours (measured, docs/retrieval.md): a held set up to this size answers before an ANN index is tried (smaller sets are cheaper to multiply than to walk), and counts the reads the index answers toward being held", R)
    resident_claim_margin: float = _num(2.0, 1.0, 1000.0, "ours: a set takes a held set's memory only when its claim (reads per byte) is this many times larger, so that sets read about as often do not take turns", R)
    resident_half_life_seconds: int = _num(900, 1, 604800, "ours: a set's claim to the read process's memory is its exact reads per byte, each read counting half as much after this long; a set with a larger claim takes the memory of those with smaller ones", R)
    resident_follow_max_rows: int = _num(1000, 0, 1000000, "ours: a held set whose stamp moved applies the rows changed since it was read (migration 185) when they are at most this many, and is read again in full otherwise (0: always read again)", R)
    resident_follow_compact_share: float = _num(0.1, 0.0, 10.0, "ours: a held set that followed writes is rebuilt in memory once the rows added or left since it was read pass this share of its rows (a left row's vector stays in memory until then)", R)
    search_copy_cluster_lock_timeout_seconds: int = _num(2, 1, 3600, "ours: the nightly CLUSTER of a search-copy partition gives up (until the next night) when a reader holds it longer than this, since every read queued behind it waits too", R)
    # --- session-end processing (SPEC §4) ---
    observation_base_confidence: float = _num(0.5, 0, 1, "ours: initial confidence of a new entry before the ladder quality", S)
    student_pattern_dedup_threshold: float = _num(0.72, 0, 1, "seed: cosine at which a student pattern reinforces an existing one", S)
    ladder_quality_exact: float = _num(1.0, 0, 1, "ours: ladder step 1 (exact canonical slug) quality", S)
    ladder_quality_near: float = _num(0.8, 0, 1, "ours: ladder step 2 (alias / normalised / embedding) quality", S)
    ladder_quality_minted: float = _num(0.6, 0, 1, "ours: ladder step 3 (new slug minted in the topic) quality", S)
    ladder_quality_unanchored: float = _num(0.25, 0, 1, "ours: ladder step 4 (_unanchored_) quality", S)
    ladder_near_similarity: float = _num(0.85, 0, 1, "ours: embedding cosine for a step-2 near match", S)
    ladder_mint_min_chars: int = _num(3, 1, 100, "ours: shorter names are not minted but left _unanchored_", S)
    edge_new_confidence: float = _num(0.3, 0.05, 1, "seed: confidence of a newly learned edge", "hag/storage/edges.py")
    edge_new_hit_count: int = _num(1, 0, 100, "seed: hit_count of a newly learned edge", "hag/storage/edges.py")
    edge_reinforce_min_hits: int = _num(3, 1, 1000, "seed: hit_count at which re-observation lifts to the high floor", "hag/storage/edges.py")
    edge_reinforce_confidence_high: float = _num(0.6, 0.05, 1, "seed: floor after edge_reinforce_min_hits observations", "hag/storage/edges.py")
    edge_reinforce_confidence_low: float = _num(0.3, 0.05, 1, "seed: floor of a re-observed edge below that", "hag/storage/edges.py")
    edge_grade_step_success: float = _num(0.05, 0, 1, "seed: edge confidence added when its turn succeeded", S)
    edge_grade_step_failure: float = _num(0.05, 0, 1, "seed: edge confidence removed when its turn failed", S)
    edge_confidence_floor: float = _num(0.05, 0.001, 1, "seed: edges never grade below this", S)
    edge_confidence_ceiling: float = _num(1.0, 0.05, 1, "seed: edges never grade above this", S)
    entry_learning_rate_proven: float = _num(0.10, 0, 1, "seed: entry learning rate when proven", S)
    entry_learning_rate_default: float = _num(0.20, 0, 1, "seed: entry learning rate otherwise", S)
    outcome_strength_default: float = _num(1.0, 0, 1, "ours: outcome strength when a turn reports none", S)
    session_batch_size: int = _num(200, 1, 100000, "ours: pending sessions taken per flow batch", S)
    session_max_payload_bytes: int = _num(5_000_000, 1000, 1_000_000_000, "ours: larger payloads are refused", S)
    session_max_turns: int = _num(1000, 1, 1_000_000, "ours: sessions with more turns are refused", S)
    session_topic_scope: str = _dial("public", "ours: visibility scope of the topic entries sessions write and look up", S, pattern=TOPIC_SCOPE, forbidden=("tutor", "visual"))
    session_quarantine_max_bytes: int = _num(65536, 256, 100_000_000, "ours: bytes of a refused payload kept in the quarantine (with its SHA-256 and size)", S)
    session_max_depth: int = _num(32, 4, 1000, "ours: payloads nested deeper than this (objects and arrays) are refused before parsing", S)
    session_max_retries: int = _num(8, 0, 1000, "ours: retries of a session-end, an audit restore or a nightly sweep whose transaction hit a deadlock or serialization failure", S)
    session_max_observations: int = _num(2000, 0, 1_000_000, "ours: sessions with more observations (all turns) are refused whole at ingest", S)
    session_max_struggles: int = _num(2000, 0, 1_000_000, "ours: sessions with more struggles (all turns) are refused whole at ingest", S)
    session_max_struggles_per_turn: int = _num(20, 0, 100_000, "ours: sessions with a turn reporting more struggles are refused whole at ingest", S)
    session_max_success_slugs: int = _num(500, 0, 1_000_000, "ours: sessions whose successful turns name more distinct concept slugs are refused whole at ingest (each is a hag_learner_successes row)", S)
    session_lock_buckets: int = _num(256, 1, 4096, "ours: hash buckets of the advisory locks guarding a session's identities (and a learner's ingest lock, hag/storage/learner_lock.py): a session holds at most this many, whatever its size", S)
    # the evidence rules (issue 14; `hag settings profile evidence` selects them, docs/learning-report.md)
    prerequisite_confidence_rule: str = _dial("seed", "ours: seed = learned prerequisites move by the seed's reinforcement floors and outcome grading; lift = from the sessions that reported them net of chance, h'/(h'+k), never outcome-graded; units = the lift rule over evidence units: a session is one unit per concept, a learner's total per pair is capped, and too few learners hold an edge below the walk floor (docs/learning-report.md)", V, choices=("seed", "lift", "units"))
    prerequisite_learner_cap: float = _num(1.0, 0.01, 1000, "ours: under units, one learner's evidence for a pair (the sum of its sessions' shares) counts at most this many units", V)
    prerequisite_min_learners: int = _num(2, 2, 1000, "ours: under units, a learned prerequisite reported by fewer distinct learners is held below the walk floor (edge_min_confidence x learners / this), a reverse edge's units (a learned prerequisite's reports; the moves along any leads_to or fallback) count against a learned prerequisite, leads_to or fallback only from this many learners (an authored reverse prerequisite's prior still counts; an authored sequence line's does not), and negative evidence lowers an authored one only from a concept reported on by at least this many", V)
    prerequisite_drop_shown: bool = _dial(True, "ours: under units, a struggle naming as missing a concept its learner already succeeded on (a successful turn on it, earlier in the session or in an earlier session of the topic) proposes and reports nothing: the learner's own record contradicts it; so does one whose learner next succeeds on the struggled concept before succeeding on the missing one (a success whose prompt had a line to it passed over), and a recorded one is withdrawn when that success comes; off for learners who forget between sessions", V)
    prerequisite_lift_k: float = _num(2.0, 0.01, 1000, "ours: k of the lift rule h'/(h'+k) (2 keeps the seed's 0.33/0.5/0.6 ladder for an uncontested edge)", V)
    prerequisite_lift_chance_spread: float = _num(0.0, 0, 100000, "ours: concepts over which a failing concept's other struggle reports spread by chance (0: the topic's other concepts)", V)
    prerequisite_lift_noise_weight: float = _num(0.0, 0, 1000, "ours (measured, docs/learning-report.md): the chance term of a learned c -> m is scaled by 1 + this x c's reversal share, the share of c's struggle reports (live and culled prerequisites out of c; under units, their units, each learner's capped) naming a concept the memory holds to build on c; 0: off", V)
    prerequisite_lift_noise_prior: float = _num(0.05, 0, 1, "ours: the reversal share a concept with no reports is given, which its own reports outweigh...", V)
    prerequisite_lift_noise_prior_reports: float = _num(5.0, 0, 1000, "ours: ...as if it came from this many reports", V)
    prerequisite_lift_noise_held_min: float = _num(0.6, 0, 1, "ours: a prerequisite x -> c at this confidence or more makes a report on c naming x a reversal", V)
    prerequisite_unlearn_min_reports: int = _num(0, 0, 1000000, "ours: under lift, an authored or enriched prerequisite is judged by negative evidence once its concept has this many struggle reports, over its live and culled prerequisites (0: never)", V)
    prerequisite_unlearn_max_share: float = _num(0.02, 0, 1, "ours: ...and lowered to the confidence its own reports earn when the reports naming its target, or a concept resting on it, are at most this share of the concept's reports (0: lowered only when none supports it)", V)
    edge_grading_rule: str = _dial("seed", "ours: seed = +-step by the turn's outcome; baseline = 2 step (outcome - the source concept's smoothed success rate), the step shrinking with renderings; units = baseline for the other types, while leads_to and fallback take their confidence from sequence evidence in units, never from outcomes (hag.evidence.sequences)", S, choices=("seed", "baseline", "units"))
    edge_grade_baseline_n0: float = _num(10.0, 0.01, 1000000, "ours: the baseline rule's step is scaled by n0/(n0 + renderings)", S)
    edge_grade_baseline_prior: float = _num(0.5, 0, 1, "ours: prior success rate in the source concept's smoothed success rate", S)
    edge_grade_baseline_prior_weight: float = _num(2.0, 0, 1000000, "ours: pseudo-turns of that prior in the smoothed success rate", S)
    # --- bounds on what enters from outside (docs/bounds.md) ---
    timestamp_window_years: int = _num(5, 1, 1000, "ours: every timestamp that enters (ended_at, corpus times, --as-of) lies within this many years of now", B)
    slug_max_chars: int = _num(200, 8, 2000, "ours: longest topic id or concept slug a payload or corpus may carry (a btree row holds about 2,700 bytes)", B)
    concept_name_max_chars: int = _num(200, 8, 2000, "ours: longest concept name an observation, a struggle or a corpus title may carry (names become slugs)", B)
    text_max_chars: int = _num(20000, 100, 1_000_000, "ours: longest free text (messages, observation texts, evidence, instructions, descriptions)", B)
    # --- daily sweeps (SPEC §5) ---
    promotion_min_age_days: int = _num(14, 0, 3650, "seed: candidate age before promotion to pattern", W)
    promotion_min_confidence: float = _num(0.50, 0, 1, "seed: candidate confidence for promotion to pattern", W)
    promotion_max_failures: int = _num(0, 0, 1000000, "seed: failure_count allowed for promotion (0)", W)
    proven_min_age_days: int = _num(30, 0, 3650, "ours: pattern age before promotion to proven", W)
    proven_min_confidence: float = _num(0.80, 0, 1, "ours: pattern confidence for promotion to proven", W)
    proven_min_successes: int = _num(5, 0, 1000000, "ours: success_count for promotion to proven", W)
    proven_max_failure_ratio: float = _num(0.2, 0, 1, "ours: failures/(successes+failures) allowed for proven", W)
    archive_max_confidence: float = _num(0.15, 0, 1, "ours: non-proven entries below this confidence are archived", W)
    archive_min_failures: int = _num(3, 0, 1000000, "ours: ...and with at least this many failures", W)
    cull_max_confidence: float = _num(0.35, 0, 1, "seed: edges below this confidence may be culled", W)
    cull_min_age_days: int = _num(90, 0, 36500, "seed: edges younger than this are never culled", W)
    cull_max_traversals: int = _num(0, 0, 1000000, "seed: only edges traversed at most this often (never) are culled", W)
    cull_source_types: tuple[str, ...] = _dial(
        ["learned", "enriched"],
        "seed: positive allowlist of provenance classes the cull may delete", W,
        forbidden=("seed",), pattern=r"[a-z][a-z0-9_]*",
    )
    reprieve_idle_days: int = _num(0, 0, 3650, "ours: nightly, an entry below its retrieval floor and unused this many days is lifted back to the floor (0: never, the seed)", W)
    sweep_report_max_rows: int = _num(200, 1, 100000, "ours: culled edges listed in a run's report (all stay in the audit)", W)
    cull_guard_max_edges: int = _num(1000, 0, 1000000000, "ours: a scheduled nightly run that would cull more edges than this pauses for an operator's decision (0: no count limit)", W)
    cull_guard_max_share: float = _num(0.10, 0, 1, "ours: ...or that would cull more than this share of all edges (1: no share limit)", W)
    cull_guard_min_edges: int = _num(50, 1, 1000000000, "ours: the share limit applies from this many culled edges on (a handful is no big night)", W)
    cull_guard_timeout_seconds: int = _num(3600, 1, 604800, "ours: a paused big night left unanswered this long culls nothing", "tasks/sweeps.py")
    # --- enrichment (SPEC §6) ---
    enrichment_confidence: float = _num(0.4, 0.05, 1, "seed (value ours): confidence of an enriched edge, below authored ones", E)
    enrichment_candidate_count: int = _num(12, 1, 200, "ours: candidate concepts offered to the model per orphan", E)
    enrichment_max_proposals_per_orphan: int = _num(3, 1, 50, "ours: proposals accepted per orphan", E)
    enrichment_default_limit: int = _num(50, 1, 100000, "ours: orphans per run when no --limit is given", E)
    enrichment_max_attempts: int = _num(3, 1, 20, "ours: calls per orphan before it is reported failed", E)
    enrichment_timeout_seconds: float = _num(30.0, 0.1, 600, "ours: one model call's timeout", E)
    enrichment_allowed_types: tuple[str, ...] = _dial(
        ["prerequisite", "related"],
        "ours: edge types a model may propose", E, choices=EDGE_TYPES,
        # fallback needs an observed failure, supersedes retires knowledge: sessions only.
        forbidden=("fallback", "supersedes"),
    )
    enrichment_temperature: float = _num(0.0, 0, 2, "ours: sampling temperature of the proposer", E)
    enrichment_max_description_chars: int = _num(1000, 50, 100000, "ours: concept description characters in a prompt", E)
    enrichment_candidate_chars: int = _num(240, 20, 100000, "ours: characters of each candidate concept's line in a prompt", E)
    enrichment_retry_backoff_seconds: float = _num(0.5, 0, 60, "ours: wait before a failed model call is retried (doubles per attempt)", E)
    enrichment_prices_usd_per_million_tokens: tuple[str, ...] = _dial(
        ["gpt-4o-mini:0.15:0.60", "offline-similarity-v1:0:0"],
        "ours: price per model, as model:prompt:completion in USD per million tokens (the cost ledger's cost column; an unlisted model's cost is unknown)", E,
        pattern=r"^[A-Za-z0-9._/-]+:[0-9]+(\.[0-9]+)?:[0-9]+(\.[0-9]+)?$",
    )
    enrichment_offline_min_similarity: float = _num(0.25, -1, 1, "ours: the offline proposer also proposes candidates at or above this cosine", E)
    # --- corpus and export ---
    export_batch_rows: int = _num(2000, 1, 1_000_000, "ours: rows `hag export` fetches per round trip from its server-side cursor (memory stays flat)", "hag/operations/corpus.py")
    # --- a learner's own data (issue 25, docs/privacy.md) ---
    message_retention_days: int = _num(0, 0, 36500, "ours: the nightly strips the student's words from processed payloads whose session ended this many days ago (0: keep them)", "hag/operations/privacy.py")
    quarantine_retention_days: int = _num(0, 0, 36500, "ours: the nightly strips the received text from quarantined payloads this many days old; reason, size and SHA-256 stay (0: keep it)", "hag/operations/privacy.py")
    # --- the operator's command line ---
    history_default_limit: int = _num(50, 1, 100000, "ours: events `hag history ID` shows when no --limit is given (the newest)", "hag/cli/history_cmd.py")
    runs_default_limit: int = _num(20, 1, 100000, "ours: runs `hag runs` lists when no --limit is given (the newest)", "hag/cli/runs_cmd.py")
    nightly_log_max_promotions: int = _num(20, 0, 100000, "ours: promoted entries a nightly run names in its log (id and concept), then 'and K more'; 0 names none", "hag/nightly/sweeps.py")
    # --- the HTTP service (docs/service.md) ---
    service_threads: int = _num(16, 1, 1000, "ours (measured, docs/service.md): requests the service runs at once in each of its two thread pools (retrieves; ingests and explains); more wait their turn, so the read pool's connections are not oversubscribed", "hag/service")
    service_switch_interval_ms: float = _num(0.5, 0.05, 100, "ours (measured, docs/journal/2026-12-02-thread-per-connection.md): the service process's interpreter switch interval (Python's default is 5 ms): a connection's thread whose socket read returned waits at most about this long for a running retrieve to yield the interpreter; at 8 clients and demo size 0.5 ms took HTTP's p99 from +8.2 to +2.2 ms over in process (mean of 4 A/B runs each)", "hag/service")
    # --- data-quality suites (SPEC §8) ---
    suite_work_mem_mb: int = _num(128, 4, 65536, "ours: PostgreSQL work_mem of the suites' own sessions (uniqueness checks hash every row's key)", "hag/quality")
    suite_concurrency: int = _num(2, 1, 16, "ours: data-quality suites run at the same time, each on its own PostgreSQL sessions (the work is the server's)", "hag/quality")
    suite_parallel_workers: int = _num(0, 0, 64, "ours: PostgreSQL max_parallel_workers_per_gather of the suites' own sessions (each worker of a uniqueness check rebuilds the whole grouping)", "hag/quality")
    # --- the cache itself ---
    settings_cache_ttl_seconds: int = _num(60, 0, 3600, "seed: how long a process trusts its copy of the dials, and the read path its check of the memory's embedder", C)
    # fmt: on

    def __getitem__(self, key: str) -> Any:
        if key not in REGISTRY:
            raise SettingsError(f"unknown setting {key!r}")
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with some dials changed (validated): for dry runs, tests and what-ifs."""
        return snapshot({**self, **{key: validate(key, v) for key, v in overrides.items()}})


# The type word of a dial (hag_settings.value_type) from its field's annotation.
_TYPE_WORDS: dict[Any, str] = {
    float: "float",
    int: "int",
    bool: "bool",
    str: "str",
    tuple[str, ...]: "list",
}


def _registry() -> dict[str, Dial]:
    """The dials as Settings declares them, in declaration order."""
    hints = get_type_hints(Settings)
    return {
        f.name: Dial(key=f.name, type=_TYPE_WORDS[hints[f.name]], **f.metadata["dial"])
        for f in fields(Settings)
    }


REGISTRY: dict[str, Dial] = _registry()


# The profiles (SPEC §4, issue 14): the recommended set of rule dials, set in one step by
# `hag settings profile NAME`. `seed` is every registry default (the seed's rules);
# `evidence` the rules measured in docs/learning-report.md. A profile names only rule dials:
# everything else keeps whatever value an operator gave it. The evidence profile's k keeps a
# net of one learner's capped unit below the level at which the model holds an edge, even
# without the learner hold, and lets two learners' whole units reach it: cap / (cap + k) <
# prerequisite_lift_noise_held_min <= 2 cap / (2 cap + k), i.e. 2/3 < k <= 4/3 at a cap of
# 1 and a level of 0.6. 0.75 leaves one unit at 0.57, clear of 0.6 (docs/learning-report.md).
EVIDENCE_PROFILE: dict[str, Any] = {
    "prerequisite_confidence_rule": "units",
    "prerequisite_lift_k": 0.75,
    "prerequisite_lift_chance_spread": 24.0,
    "prerequisite_lift_noise_weight": 20.0,
    "prerequisite_learner_cap": 1.0,
    "prerequisite_min_learners": 2,
    "prerequisite_unlearn_min_reports": 3,
    "prerequisite_unlearn_max_share": 0.0,
    "edge_grading_rule": "units",
    "reprieve_idle_days": 7,
}
# The seed profile keeps the keys it has always set, every one at its registry default (less
# the nine dials migration 201 retired); the dials the units rule added are read by that rule
# only, so the seed's rules never see them.
SEED_PROFILE_KEYS: tuple[str, ...] = (
    "prerequisite_confidence_rule",
    "prerequisite_lift_k",
    "prerequisite_lift_chance_spread",
    "prerequisite_lift_noise_weight",
    "prerequisite_unlearn_min_reports",
    "prerequisite_unlearn_max_share",
    "edge_grading_rule",
    "edge_grade_baseline_n0",
    "edge_grade_baseline_prior",
    "edge_grade_baseline_prior_weight",
    "reprieve_idle_days",
)
PROFILES: dict[str, dict[str, Any]] = {
    "seed": {key: REGISTRY[key].default for key in SEED_PROFILE_KEYS},
    "evidence": EVIDENCE_PROFILE,
}


# --- validation -------------------------------------------------------------------------

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
# A number typed as text: ASCII digits only, whole (`re.fullmatch`, no `$`), nothing around:
# float() and int() would also take '0.5\n', '٠.٥' (Arabic-Indic digits) and '1_000'.
_INT_TEXT = r"[+-]?[0-9]+"
_FLOAT_TEXT = r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|nan)"


def dial(key: str) -> Dial:
    try:
        return REGISTRY[key]
    except KeyError:
        raise SettingsError(f"unknown setting {key!r} (see `hag settings list`)") from None


def validate(key: str, value: JSON) -> JSON:
    """The value coerced to the dial's type, or a SettingsError naming what is wrong."""
    d = dial(key)
    if d.type in ("float", "int"):
        if isinstance(value, bool):
            raise SettingsError(f"{key} takes a number, not {value!r}")
        kind = "a number" if d.type == "float" else "a whole number"
        if isinstance(value, str) and not re.fullmatch(
            _FLOAT_TEXT if d.type == "float" else _INT_TEXT, value
        ):
            raise SettingsError(f"{key} takes {kind} (ASCII digits, nothing around), not {value!r}")
        try:
            number = float(value) if d.type == "float" else _as_int(value)
        except (TypeError, ValueError):
            raise SettingsError(f"{key} takes {kind}, not {value!r}") from None
        if isinstance(number, float) and not math.isfinite(number):
            raise SettingsError(f"{key} must be finite, not {value!r}")
        number += 0  # -0.0 is stored as 0.0 (docs/bounds.md)
        if (d.min is not None and number < d.min) or (d.max is not None and number > d.max):
            raise SettingsError(
                f"{key} must be between {_fmt(d.min)} and {_fmt(d.max)}, not {value!r}"
            )
        return number
    if d.type == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise SettingsError(f"{key} takes true or false, not {value!r}")
    if d.type == "list":
        items = _as_list(key, value)
        bad = [i for i in items if d.choices and i not in d.choices]
        if bad:
            raise SettingsError(
                f"{key} items must be among {', '.join(d.choices)}; not {', '.join(bad)}"
            )
        banned = [i for i in items if i in d.forbidden]
        if banned:
            raise SettingsError(f"{key} may never contain {', '.join(banned)}")
        misshapen = [i for i in items if d.pattern and not re.fullmatch(d.pattern, i)]
        if misshapen:
            raise SettingsError(f"{key} items must match {d.pattern}; not {', '.join(misshapen)}")
        if len(items) < d.min_items:
            raise SettingsError(f"{key} needs at least {d.min_items} item(s)")
        return items
    text = str(value)
    if d.choices and text not in d.choices:
        raise SettingsError(f"{key} must be one of {', '.join(d.choices)}, not {value!r}")
    if text in d.forbidden or (d.pattern and not re.fullmatch(d.pattern, text)):
        raise SettingsError(
            f"{key} must match {d.pattern} and not be {', '.join(d.forbidden)}; not {value!r}"
        )
    return text


# Pairs of dials whose values must stay ordered: (lower, upper). Checked when one is set, so
# no single edit can leave the memory with rules that contradict each other (an edge ceiling
# under the confidence edges start at would pull every graded seed edge down to it).
ORDERED: tuple[tuple[str, str], ...] = (
    ("band_medium_min", "band_high_min"),
    ("edge_reinforce_confidence_low", "edge_reinforce_confidence_high"),
    ("edge_confidence_floor", "edge_confidence_ceiling"),
    ("edge_confidence_floor", "edge_new_confidence"),
    # The ceiling stays at or above every confidence the memory starts or lifts an edge at,
    # and the floor at or below each of them.
    ("edge_new_confidence", "edge_confidence_ceiling"),
    ("edge_reinforce_confidence_high", "edge_confidence_ceiling"),
    ("enrichment_confidence", "edge_confidence_ceiling"),
    ("edge_confidence_floor", "edge_reinforce_confidence_low"),
    ("edge_confidence_floor", "enrichment_confidence"),
    # An entry archived for its low confidence could never have been promoted at it.
    ("archive_max_confidence", "promotion_min_confidence"),
    ("promotion_min_confidence", "proven_min_confidence"),
)
# Pairs that must stay strictly ordered: (lower, upper). A learned edge too few learners
# support is held below the walk floor (hag.evidence.model.unit_terms); a floor at or above
# the walk floor would lift every such edge, one learner's or none's, back onto the walk.
STRICTLY_ORDERED: tuple[tuple[str, str], ...] = (("edge_confidence_floor", "edge_min_confidence"),)
# (item dial, list dial): the item must be one of the list's values. Sessions write topic
# entries in `session_topic_scope`; a scope the topic passes do not read would write entries
# no learner can read, and every session with a topic observation would be refused.
MEMBER_OF: tuple[tuple[str, str], ...] = (("session_topic_scope", "topic_scopes"),)


def check_order(values: Mapping[str, Any]) -> None:
    """Refuse a set of dial values in which an ordered pair is inverted (or a member missing)."""
    for low, high in ORDERED:
        if values[low] > values[high]:
            raise SettingsError(f"{low} ({values[low]}) may not exceed {high} ({values[high]})")
    for low, high in STRICTLY_ORDERED:
        if values[low] >= values[high]:
            raise SettingsError(f"{low} ({values[low]}) must stay below {high} ({values[high]})")
    for item, among in MEMBER_OF:
        if values[item] not in values[among]:
            raise SettingsError(
                f"{item} ({values[item]}) must be one of {among} ({', '.join(values[among])})"
            )


def _as_int(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(value)
        return int(value)
    return int(str(value).strip())


def _as_list(key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                raise SettingsError(
                    f"{key} takes a JSON list or comma-separated words, not {value!r}"
                ) from None
        else:
            value = [part.strip() for part in text.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(i, str) and i for i in value):
        raise SettingsError(f"{key} takes a list of words, not {value!r}")
    return list(dict.fromkeys(value))


def _fmt(x: float | None) -> str:
    return "-inf" if x is None else (str(int(x)) if float(x).is_integer() else str(x))


# --- database side ----------------------------------------------------------------------


def sync_registry(conn: psycopg.Connection[Any]) -> None:  # any row shape (migrate)
    """Write every registry dial into hag_settings: new keys get defaults, values are kept.

    A value still equal to the stored default follows the registry's (possibly new) default;
    an edited value is kept. Descriptions, bounds and consumers always follow the registry. A stored value that the
    registry's new bounds no longer admit is reset to the default, and says so in updated_by.
    """
    rows = [
        (
            d.key,
            json.dumps(d.default),
            d.type,
            json.dumps(d.default),
            d.min,
            d.max,
            d.description,
            d.consumer,
        )
        for d in REGISTRY.values()
    ]
    with conn.cursor() as cur:
        cur.executemany(
            """
            INSERT INTO hag_settings (key, value, value_type, default_value, min_value, max_value, description, consumer)
            VALUES (%s, %s::jsonb, %s, %s::jsonb, %s, %s, %s, %s)
            ON CONFLICT (key) DO UPDATE SET
                -- A value still at the old default was never edited: it follows a changed
                -- default (the old row values are read before any assignment).
                value = CASE WHEN hag_settings.value = hag_settings.default_value
                             THEN EXCLUDED.value ELSE hag_settings.value END,
                value_type = EXCLUDED.value_type, default_value = EXCLUDED.default_value,
                min_value = EXCLUDED.min_value, max_value = EXCLUDED.max_value,
                description = EXCLUDED.description, consumer = EXCLUDED.consumer
            """,
            rows,
        )
        stored = cur.execute("SELECT key, value FROM hag_settings").fetchall()
    for row in stored:
        key, value = (row["key"], row["value"]) if isinstance(row, dict) else row
        if key not in REGISTRY:
            continue  # a retired dial stays visible until a migration removes it
        try:
            validate(key, value)
        except SettingsError:
            conn.execute(
                "UPDATE hag_settings SET value = default_value, updated_by = 'registry (out of range)', "
                "updated_at = now() WHERE key = %s",
                (key,),
            )


def snapshot(values: Mapping[str, Any]) -> Settings:
    """The snapshot of validated dial values (every registry key): list dials become tuples."""
    typed: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return Settings(**typed)


def defaults() -> Settings:
    """Every dial at its registry default, with no database (for pure-rule tests)."""
    return snapshot({d.key: validate(d.key, d.default) for d in REGISTRY.values()})


@dataclass(frozen=True)
class _Snapshot:
    tried: float  # when it was last read or tried again (monotonic): its TTL runs from here
    read: float  # when it was read from the database
    settings: Settings


_cache_lock = threading.Lock()
_cache: _Snapshot | None = None
_generation = 0  # how many times `invalidate` ran: a reload begun before one stores nothing
# One thread reloads an expired snapshot; the others go on with it meanwhile.
_reload_lock = threading.Lock()


def load(conn: Conn) -> Settings:
    """Read every dial from the database now, falling back to defaults for missing keys.

    A stored value its dial refuses (written by hand, or by a release with other bounds)
    stops the caller with one line naming the dial, the value and the repair: a dial
    silently at its default could change what the memory does (docs/bounds.md)."""
    values, invalid = stored(conn)
    if invalid:
        key = min(invalid)
        more = f" ({len(invalid) - 1} more invalid dial(s): see `hag settings list`)"
        raise SettingsError(
            invalid_message(key, *invalid[key]) + (more if len(invalid) > 1 else "")
        )
    return snapshot(values)


def load_as_stored(conn: Conn) -> Settings:
    """Every dial as stored, its default standing in for a value its dial refuses: for the
    writes an invalid dial must never stop (an erasure's lock, a restore's retries), where
    `load` stops the caller."""
    return snapshot(stored(conn)[0])


def stored(conn: Conn) -> tuple[dict[str, Any], dict[str, tuple[JSON, str]]]:
    """Every dial's validated stored value, and the stored values their dial refuses
    (key: (value, reason)), whose defaults stand in among the values."""
    from hag.storage.sqlfiles import query

    values = {d.key: d.default for d in REGISTRY.values()}
    invalid: dict[str, tuple[JSON, str]] = {}
    for row in conn.execute(query("settings", "stored_dials")).fetchall():
        key, value = (row["key"], row["value"]) if isinstance(row, dict) else row
        if key in REGISTRY:
            try:
                values[key] = validate(key, value)
            except SettingsError as exc:
                invalid[key] = (value, str(exc))
    return values, invalid


def invalid_message(key: str, value: JSON, reason: str) -> str:
    """The one line naming an invalid stored dial and its repair."""
    return (
        f"the stored value of {key}, {json.dumps(value)}, is invalid ({reason}); "
        f"repair it with `hag settings reset {key}`"
    )


def current() -> Settings:
    """The dials through the process cache (TTL: the dial settings_cache_ttl_seconds, 60 s).

    Once the snapshot is that old, one thread reloads it while the others go on with it. A
    reload that cannot reach the database within the connect timeout keeps the snapshot for
    another TTL and says so in the log: the read path goes on answering from a read replica
    while the primary is away, with the dials it read last (no `hag settings` can commit on
    an unreachable primary). Only a process that has no snapshot yet waits for the database,
    and fails with it.
    """
    with _cache_lock:
        kept, generation = _cache, _generation
    if (
        kept is not None
        and time.monotonic() - kept.tried < kept.settings.settings_cache_ttl_seconds
    ):
        return kept.settings
    if not _reload_lock.acquire(blocking=kept is None):
        assert kept is not None
        return kept.settings
    try:
        with _cache_lock:
            if _cache is not None and _cache is not kept:  # loaded while this thread waited
                return _cache.settings
        return _reload(kept, generation)
    finally:
        _reload_lock.release()


def _reload(kept: _Snapshot | None, generation: int) -> Settings:
    global _cache
    import logging

    import psycopg

    from hag.storage import db

    started = time.monotonic()
    try:
        wait = db.connect_wait_seconds(db.database_url())
        with db.pool().connection(timeout=wait) as conn:
            fresh = _Snapshot(started, started, load(conn))
    except psycopg.OperationalError as exc:  # the pool's timeout is one too
        if kept is None:
            raise
        fresh = _Snapshot(started, kept.read, kept.settings)
        logging.getLogger(__name__).warning(
            "the dials could not be read again (%s); the snapshot read %.0f s ago serves "
            "until the next try in %.0f s",
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
            started - kept.read,
            kept.settings.settings_cache_ttl_seconds,
        )
    with _cache_lock:
        if _generation == generation:  # not invalidated meanwhile (another database)
            _cache = fresh
    return fresh.settings


def invalidate() -> None:
    """Drop the cached snapshot (after `set`, and between tests, or on a move to another
    database); a reload under way then stores nothing."""
    global _cache, _generation
    with _cache_lock:
        _cache = None
        _generation += 1


def lock_dials(conn: Conn) -> None:
    """Serialise the writers of the dials until `conn` commits (sql/queries/settings.sql)."""
    from hag.storage.sqlfiles import query

    conn.execute(query("settings", "lock_dials"))


def owe_reweigh(conn: Conn, key: str) -> None:
    """Record that `key`, a dial the model reads, moved without the re-weigh it needs (another
    dial's stored value was invalid); `reweigh_owed` names it until a re-weigh pays it."""
    from hag.storage.sqlfiles import query

    conn.execute(query("settings", "owe_reweigh"), {"key": key})


def reweigh_owed(conn: Conn) -> str | None:
    """The dial whose move still waits for its re-weigh, or None."""
    from hag.storage.sqlfiles import query

    row = conn.execute(query("settings", "reweigh_owed")).fetchone()
    return None if row is None else str(row["value"])


def reweigh_paid(conn: Conn) -> None:
    """Forget an owed re-weigh (every edge the model owns was just re-weighed)."""
    from hag.storage.sqlfiles import query

    conn.execute(query("settings", "reweigh_paid"))


def set_value(conn: Conn, key: str, raw: JSON, by: str = "cli") -> JSON:
    """Validate and store one dial; returns the stored value. Writers take turns (the lock
    is held to the caller's commit), so the combination validated is the one committed. An
    invalid stored value (of this dial or another) does not stop it: that is its repair, and
    another dial's default stands in for it in the order check."""
    value = validate(key, raw)
    lock_dials(conn)
    check_order({**stored(conn)[0], key: value})
    conn.execute(
        "UPDATE hag_settings SET value = %s::jsonb, updated_at = now(), updated_by = %s WHERE key = %s",
        (json.dumps(value), by, key),
    )
    invalidate()
    return value


def reset_value(conn: Conn, key: str, by: str = "cli") -> JSON:
    return set_value(conn, key, dial(key).default, by)


def profile_values(name: str) -> dict[str, Any]:
    """The dial values of a named profile, or a SettingsError naming the known ones."""
    try:
        return dict(PROFILES[name])
    except KeyError:
        raise SettingsError(
            f"unknown profile {name!r} (known: {', '.join(sorted(PROFILES))})"
        ) from None


def profile_tag(name: str) -> str:
    """What the profile command appends to `updated_by` on each dial it writes; read back by
    `profile_moved`."""
    return f"(profile {name})"


def apply_profile(conn: Conn, name: str, by: str = "cli") -> list[tuple[str, Any, Any]]:
    """Set every dial of a profile; returns (key, old, new) for each dial that changed."""
    wanted = profile_values(name)
    lock_dials(conn)
    current_values = load(conn)
    changed = [(k, current_values[k], validate(k, v)) for k, v in wanted.items()]
    changed = [(k, old, new) for k, old, new in changed if old != new]
    check_order({**current_values, **{k: new for k, _, new in changed}})
    for key, _, new in changed:
        conn.execute(
            "UPDATE hag_settings SET value = %s::jsonb, updated_at = now(), updated_by = %s "
            "WHERE key = %s",
            (json.dumps(new), f"{by} {profile_tag(name)}", key),
        )
    invalidate()
    return changed


@dataclass(frozen=True)
class ProfileStanding:
    """The profile nearest a memory's dials (`name`; None when two are as near) and each of
    its dials the memory holds at another value: (key, the memory's value, the profile's)."""

    name: str | None
    apart: tuple[tuple[str, Any, Any], ...]

    def line(self) -> str:
        """One line for an operator: the profile, or how far the memory is from the nearest
        one and the command that closes the gap (a profile's values can move in a release,
        and a memory keeps its stored ones until an operator sets the profile again)."""
        if self.name is None:
            return f"profile: none, as near one profile as another ({len(self.apart)} dials apart)"
        if not self.apart:
            return f"profile: {self.name}"
        dials = ", ".join(
            f"{key} {json.dumps(held)} (the profile's {json.dumps(wanted)})"
            for key, held, wanted in self.apart
        )
        return (
            f"profile: nearest {self.name}, {len(self.apart)} of its "
            f"{len(PROFILES[self.name])} dials apart: {dials}; `hag settings profile "
            f"{self.name}` sets the profile's values (and re-weighs the edges under them)"
        )


def profile_standing(values: Mapping[str, Any]) -> ProfileStanding:
    """The profile the fewest dials away from the (validated) values; on a tie, none."""
    standings = sorted(
        (
            ProfileStanding(
                name, tuple((k, values[k], v) for k, v in wanted.items() if values[k] != v)
            )
            for name, wanted in PROFILES.items()
        ),
        key=lambda standing: len(standing.apart),
    )
    nearest = standings[0]
    if nearest.apart and any(len(s.apart) == len(nearest.apart) for s in standings[1:]):
        return ProfileStanding(None, nearest.apart)
    return nearest


def profile_line(values: Mapping[str, Any], invalid: Mapping[str, Any]) -> str:
    """The standing of the stored dials (`stored`), as one line; none while a stored dial is
    invalid (its default would stand in for a value the memory does not hold)."""
    if invalid:
        return f"profile: not read while {len(invalid)} stored dial(s) are invalid (marked above)"
    return profile_standing(values).line()


def profile_moved(conn: Conn) -> str | None:
    """The standing's line for the dials a memory took from its nearest profile (the profile
    command wrote them) and the profile now sets otherwise: a release moved them. None when
    there are none; dials an operator set by hand are the operator's and not named."""
    values, invalid = stored(conn)
    standing = profile_standing(values)
    if invalid or standing.name is None:
        return None
    taken = {
        row["key"]
        for row in conn.execute(
            "SELECT key FROM hag_settings WHERE right(updated_by, %s) = %s",
            (len(profile_tag(standing.name)), profile_tag(standing.name)),
        ).fetchall()
    }
    moved = tuple(dial for dial in standing.apart if dial[0] in taken)
    return ProfileStanding(standing.name, moved).line() if moved else None


def active_profile(values: Mapping[str, Any]) -> str | None:
    """The profile whose every dial the values match, if any."""
    standing = profile_standing(values)
    return None if standing.apart else standing.name


def listing(conn: Conn, invalid: Mapping[str, tuple[JSON, str]]) -> list[dict[str, Any]]:
    """Every dial's row, each with the reason its stored value is refused (None: valid):
    `invalid` as `stored` read it on the same connection."""
    rows = conn.execute(
        "SELECT key, value, value_type, default_value, min_value, max_value, description, consumer, "
        "updated_at, updated_by FROM hag_settings ORDER BY key"
    ).fetchall()
    return [{**r, "invalid": invalid[r["key"]][1] if r["key"] in invalid else None} for r in rows]
