"""The report's figures as pure functions: graph recovery and calibration.

Recovery (the education literature's test of a learned prerequisite graph): at a confidence
threshold t, the memory *claims* every pair (source concept, target concept) that has an
edge of the type with confidence >= t; precision is the share of claims that are true in the
hidden graph, recall the share of true pairs claimed, direction accuracy the share of claims
on a truly related pair that point the right way. Only pairs whose two concepts the truth
knows are scored (an edge to a concept minted from drift has no truth and is counted apart).

Calibration (as spaced-repetition benchmarks score recall predictions): every confidence
the tutor saw at the time of use is a predicted success probability for that turn; log-loss
and the binned RMSE (bins of equal width, weighted by their counts) say how well it matched
what happened. The baseline is the constant predictor at the observed success rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hag.storage.schema import KNOWN_SOURCE_TYPES

THRESHOLDS: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
SCORED_TYPES: tuple[str, ...] = ("prerequisite", "leads_to", "fallback")
PROVENANCE: tuple[str, ...] = KNOWN_SOURCE_TYPES


@dataclass(frozen=True)
class EdgeFact:
    """One edge as the report sees it: its two concepts, type, provenance and confidence."""

    source: str
    target: str
    edge_type: str
    source_type: str
    confidence: float
    hit_count: int = 0


def edge_facts(
    edges: Iterable[Mapping[str, Any]], entries: Iterable[Mapping[str, Any]], topic_id: str
) -> list[EdgeFact]:
    """Exported edges (`hag export edges` rows) resolved to concepts through exported entries;
    only edges between two topic-graph entries of `topic_id` are kept."""
    slug_of = {
        str(e["id"]): e["concept_slug"]
        for e in entries
        if e["topic_id"] == topic_id
        and is_topic_scope(e["visibility_scope"])
        and e["concept_slug"] != "_unanchored_"
    }
    out = []
    for g in edges:
        s, t = slug_of.get(str(g["source_entry_id"])), slug_of.get(str(g["target_entry_id"]))
        if s is not None and t is not None:
            out.append(
                EdgeFact(
                    s,
                    t,
                    g["edge_type"],
                    g["source_type"],
                    float(g["confidence"]),
                    int(g.get("hit_count") or 0),
                )
            )
    return out


def facts_from_rows(rows: Iterable[Mapping[str, Any]]) -> list[EdgeFact]:
    """Snapshot rows (`sql/queries/simulate.sql: topic_edges`) as edge facts."""
    return [
        EdgeFact(
            r["source_slug"],
            r["target_slug"],
            r["edge_type"],
            r["source_type"],
            float(r["confidence"]),
            int(r.get("hit_count") or 0),
        )
        for r in rows
    ]


def is_topic_scope(scope: str) -> bool:
    return scope not in ("tutor", "visual") and not scope.startswith("student:")


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def recovery_at(
    facts: Sequence[EdgeFact],
    truth: frozenset[tuple[str, str]] | set[tuple[str, str]],
    concepts: Iterable[str],
    edge_type: str,
    threshold: float,
    provenance: Iterable[str] | None = None,
    denominator: set[tuple[str, str]] | frozenset[tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Precision, recall and direction accuracy of one edge type's claims at one threshold.

    `provenance` limits the claims to those source types (None: all); `denominator` is the
    set of true pairs recall is measured against (default: the whole truth).
    """
    known = set(concepts)
    allowed = None if provenance is None else set(provenance)
    claims: set[tuple[str, str]] = set()
    outside = 0
    for f in facts:
        if f.edge_type != edge_type or f.confidence < threshold:
            continue
        if allowed is not None and f.source_type not in allowed:
            continue
        if f.source in known and f.target in known:
            claims.add((f.source, f.target))
        else:
            outside += 1
    true_pairs = set(truth)
    wanted = true_pairs if denominator is None else set(denominator)
    tp = len(claims & true_pairs)
    related = [c for c in claims if c in true_pairs or (c[1], c[0]) in true_pairs]
    precision = _ratio(tp, len(claims))
    recall = _ratio(len(claims & wanted), len(wanted))
    f1 = (
        2 * precision * recall / (precision + recall)
        if precision is not None and recall is not None and precision + recall > 0
        else None
    )
    return {
        "threshold": threshold,
        "claimed": len(claims),
        "true_positive": tp,
        "false_positive": len(claims) - tp,
        "truth": len(wanted),
        "recalled": len(claims & wanted),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "direction_accuracy": _ratio(sum(1 for c in related if c in true_pairs), len(related)),
        "outside_truth": outside,
    }


def recovery_curve(
    facts: Sequence[EdgeFact],
    truth: frozenset[tuple[str, str]] | set[tuple[str, str]],
    concepts: Iterable[str],
    edge_type: str,
    *,
    provenance: Iterable[str] | None = None,
    denominator: set[tuple[str, str]] | frozenset[tuple[str, str]] | None = None,
    thresholds: Sequence[float] = THRESHOLDS,
) -> list[dict[str, Any]]:
    concepts = list(concepts)
    return [
        recovery_at(facts, truth, concepts, edge_type, t, provenance, denominator)
        for t in thresholds
    ]


def provenance_breakdown(
    facts: Sequence[EdgeFact],
    truth: frozenset[tuple[str, str]],
    concepts: Iterable[str],
    edge_type: str,
    threshold: float,
) -> dict[str, Any]:
    """Per source type: claims at `threshold` and how many are true."""
    known = set(concepts)
    out: dict[str, Any] = {}
    for f in facts:
        if f.edge_type != edge_type or f.confidence < threshold:
            continue
        if f.source not in known or f.target not in known:
            continue
        row = out.setdefault(f.source_type, {"claimed": 0, "true": 0, "false": 0})
        row["claimed"] += 1
        row["true" if (f.source, f.target) in truth else "false"] += 1
    return dict(sorted(out.items()))


def precision_by_hits(
    facts: Sequence[EdgeFact],
    truth: frozenset[tuple[str, str]] | set[tuple[str, str]],
    concepts: Iterable[str],
    edge_type: str,
    source_type: str = "learned",
    minimum_hits: Sequence[int] = (1, 2, 3, 5, 10),
) -> list[dict[str, Any]]:
    """Claims by corroboration instead of confidence: edges seen in at least k sessions."""
    known = set(concepts)
    rows = []
    for k in minimum_hits:
        claims = {
            (f.source, f.target)
            for f in facts
            if f.edge_type == edge_type
            and f.source_type == source_type
            and f.hit_count >= k
            and f.source in known
            and f.target in known
        }
        tp = len(claims & set(truth))
        rows.append(
            {
                "min_hits": k,
                "claimed": len(claims),
                "true_positive": tp,
                "precision": _ratio(tp, len(claims)),
                "recall": _ratio(tp, len(truth)),
            }
        )
    return rows


# --- calibration ----------------------------------------------------------------------------

_EPS = 1e-6


def log_loss(predicted: Sequence[float], observed: Sequence[bool | int]) -> float | None:
    """Mean negative log-likelihood of the outcomes under the predicted probabilities."""
    if not predicted:
        return None
    total = 0.0
    for p, y in zip(predicted, observed, strict=True):
        p = min(1 - _EPS, max(_EPS, float(p)))
        total -= math.log(p) if y else math.log(1 - p)
    return total / len(predicted)


def reliability_bins(
    predicted: Sequence[float], observed: Sequence[bool | int], bins: int = 10
) -> list[dict[str, Any]]:
    """Equal-width bins over [0, 1]: count, mean prediction and observed rate of each
    non-empty bin (a prediction of exactly 1.0 falls in the last bin)."""
    acc = [[0, 0.0, 0] for _ in range(bins)]
    for p, y in zip(predicted, observed, strict=True):
        b = min(bins - 1, max(0, int(float(p) * bins)))
        acc[b][0] += 1
        acc[b][1] += float(p)
        acc[b][2] += int(bool(y))
    return [
        {
            "lo": i / bins,
            "hi": (i + 1) / bins,
            "n": n,
            "mean_predicted": s / n,
            "observed_rate": k / n,
        }
        for i, (n, s, k) in enumerate(acc)
        if n
    ]


def binned_rmse(
    predicted: Sequence[float], observed: Sequence[bool | int], bins: int = 10
) -> float | None:
    """sqrt(sum_b n_b (mean prediction_b - observed rate_b)^2 / N) over the reliability bins."""
    rows = reliability_bins(predicted, observed, bins)
    n = sum(r["n"] for r in rows)
    if not n:
        return None
    return math.sqrt(
        sum(r["n"] * (r["mean_predicted"] - r["observed_rate"]) ** 2 for r in rows) / n
    )


def calibration(
    predicted: Sequence[float], observed: Sequence[bool | int], bins: int = 10
) -> dict[str, Any]:
    """Log-loss and binned RMSE, beside the constant predictor at the observed success rate."""
    n = len(predicted)
    if not n:
        return {
            "n": 0,
            "log_loss": None,
            "baseline_log_loss": None,
            "binned_rmse": None,
            "mean_predicted": None,
            "observed_rate": None,
            "bins": [],
        }
    rate = sum(int(bool(y)) for y in observed) / n
    return {
        "n": n,
        "log_loss": log_loss(predicted, observed),
        "baseline_log_loss": log_loss([rate] * n, observed),
        "binned_rmse": binned_rmse(predicted, observed, bins),
        "mean_predicted": sum(float(p) for p in predicted) / n,
        "observed_rate": rate,
        "bins": reliability_bins(predicted, observed, bins),
    }


# --- edges scored against the hidden graph --------------------------------------------------


def brier(predicted: Sequence[float], truth: Sequence[bool | int]) -> float | None:
    """Mean squared difference between each confidence and the 0/1 truth of its claim."""
    if not predicted:
        return None
    return sum((float(p) - int(bool(y))) ** 2 for p, y in zip(predicted, truth, strict=True)) / len(
        predicted
    )


def auc(predicted: Sequence[float], truth: Sequence[bool | int]) -> float | None:
    """The chance a true claim's confidence exceeds a false one's (ties count a half): the
    area under the ROC curve; None without both classes."""
    pos = [float(p) for p, y in zip(predicted, truth, strict=True) if y]
    neg = [float(p) for p, y in zip(predicted, truth, strict=True) if not y]
    if not pos or not neg:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def truth_scores(
    facts: Sequence[EdgeFact],
    truth: frozenset[tuple[str, str]] | set[tuple[str, str]],
    concepts: Iterable[str],
    edge_type: str,
    provenance: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Brier score and AUC of one edge type's confidences against the hidden graph: every
    edge between two known concepts is a claim, true when the truth holds its pair."""
    known = set(concepts)
    allowed = None if provenance is None else set(provenance)
    rows = [
        (f.confidence, (f.source, f.target) in truth)
        for f in facts
        if f.edge_type == edge_type
        and (allowed is None or f.source_type in allowed)
        and f.source in known
        and f.target in known
    ]
    predicted = [p for p, _ in rows]
    labels = [y for _, y in rows]
    return {
        "n": len(rows),
        "true": sum(1 for y in labels if y),
        "brier": brier(predicted, labels),
        "auc": auc(predicted, labels),
    }


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean, sample standard deviation, min and max of per-seed figures (None left out: `n`
    says how many seeds a figure has, fewer than the run's where a seed had none, as a
    precision with no claim at the threshold). One seed has no sd (None)."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None}
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return {"n": len(xs), "mean": mean, "sd": sd, "min": min(xs), "max": max(xs)}
