"""Write a simulation's report: `reports/<name>/` with report.md, report.json, PNG plots and
the raw material every figure can be recomputed from (exported edges and entries, the
simulator's truth file, the uses log, the daily timeline, the cull audit).
"""

from __future__ import annotations

import csv
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hag import settings
from hag.evidence.model import drops_shown
from hag.operations.corpus import export_rows
from hag.settings import REGISTRY
from hag.storage.db import Conn
from hag.storage.sqlfiles import query
from hag.support.jsonkeys import to_jsonable
from hag_lab.report import metrics, plots
from hag_lab.report.markdown import fmt
from hag_lab.report.metrics import EdgeFact
from hag_lab.simulate.run import SimulationRun
from hag_lab.simulate.world import World

# The registry's defaults, not the live dials: the report's keys ("..._at_0.6") stay put.
# the seed's "three independent observations" confidence
HEADLINE_THRESHOLD = float(REGISTRY["edge_reinforce_confidence_high"].default)
# where a new learned edge enters (and the edge walk starts)
ENTRY_THRESHOLD = float(REGISTRY["edge_new_confidence"].default)
# where authored prerequisites are judged (issue 14: "below 0.5"): the lower edge of the
# "medium" confidence band, below which a reader sees an edge labelled low
HALF = float(REGISTRY["band_medium_min"].default)


# A report is JSON of many shapes (curves, tables, nested summaries): the one Any here.
JSON = Any


def _clean(value: JSON) -> JSON:
    """NaN is not JSON: turn it into null everywhere."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write_json(path: Path, data: JSON) -> Path:
    path.write_text(json.dumps(_clean(data), default=to_jsonable, indent=2, sort_keys=False) + "\n")
    return path


# --- what the database says at the end -----------------------------------------------------


def collect_exports(conn: Conn, topic_id: str) -> dict[str, list[dict[str, Any]]]:
    """The topic's edges and entries exactly as `hag export` prints them, and the cull audit."""
    edges = export_rows(conn, "edges", topic_id)
    entries = export_rows(conn, "entries", topic_id)
    audit = [dict(r) for r in conn.execute(query("simulate", "audit_rows"))]
    conn.rollback()
    return {"edges": edges, "entries": entries, "audit": audit}


# --- the figures ---------------------------------------------------------------------------


def _pairs(
    facts: Iterable[EdgeFact], edge_type: str, *, exclude: str | None = None
) -> set[tuple[str, str]]:
    return {
        (f.source, f.target)
        for f in facts
        if f.edge_type == edge_type and (exclude is None or f.source_type != exclude)
    }


def recovery(
    world: World,
    before: Sequence[EdgeFact],
    after: Sequence[EdgeFact],
    struggles: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Every recovery curve the report shows.

    - `memory`: every edge of the type, any provenance, against the whole truth;
    - `learned`: only `learned` edges, recall against the true pairs the memory did not
      already hold (as seed or enriched edges) when the simulation started;
    - `struggled` (prerequisite only): any provenance, recall against the true pairs the
      extractor reported at least once (what the memory could have learned).
    """
    out: dict[str, Any] = {}
    concepts = world.slugs
    for kind in metrics.SCORED_TYPES:
        truth = world.truth_for(kind)
        assert truth is not None
        missing_at_start = set(truth) - _pairs(before, kind, exclude="learned")
        curves = {
            "memory": metrics.recovery_curve(after, truth, concepts, kind),
            "learned": metrics.recovery_curve(
                after, truth, concepts, kind, provenance=("learned",), denominator=missing_at_start
            ),
        }
        if kind == "prerequisite":
            reported = {(s["concept"], s["missing"]) for s in struggles if s["reported_true"] > 0}
            curves["struggled"] = metrics.recovery_curve(
                after, truth, concepts, kind, denominator=reported & set(truth)
            )
        out[kind] = curves
    return out


def recall_bound(
    world: World,
    before: Sequence[EdgeFact],
    struggles: Sequence[Mapping[str, Any]],
    min_learners: int,
) -> dict[str, Any]:
    """The learned-prerequisite recall the reports allow under the units rule with its drop
    rule (`model.drops_shown`): of the true pairs the memory lacked at the start (the
    `learned` recall's denominator), the share named by at least `min_learners` learners who
    had not shown the missing concept. Fewer such learners hold a pair below the walk floor,
    and a report from a learner who had shown it is dropped, so that rule cannot recall
    more."""
    truth = world.truth_for("prerequisite")
    assert truth is not None
    lacked = set(truth) - _pairs(before, "prerequisite", exclude="learned")
    named = {
        (s["concept"], s["missing"]) for s in struggles if s["unshown_learners"] >= min_learners
    }
    reachable = len(named & lacked)
    return {
        "min_learners": min_learners,
        "pairs": len(lacked),
        "named": reachable,
        "recall_bound": reachable / len(lacked) if lacked else None,
    }


def extractor_baseline(world: World, struggles: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What trusting the extractor's reports directly would claim (no memory, no reinforcement):
    every pair reported at least once, and every pair reported at least three times."""
    out = {}
    for min_reports in (1, 3):
        claims = {
            (s["concept"], s["missing"])
            for s in struggles
            if s["reported_true"] + s["reported_false"] >= min_reports
        }
        tp = len(claims & world.prerequisites)
        out[f"reported_{min_reports}x"] = {
            "claimed": len(claims),
            "true_positive": tp,
            "precision": tp / len(claims) if claims else None,
            "recall": tp / len(world.prerequisites) if world.prerequisites else None,
        }
    return out


def calibration(uses: Sequence[Any]) -> dict[str, Any]:
    """Calibration of decision entries, every used entry, and rendered edges (by provenance)."""
    out: dict[str, Any] = {}
    for kind in ("decision", "entry", "edge"):
        rows = [u for u in uses if u.kind == kind]
        out[kind] = metrics.calibration([u.confidence for u in rows], [u.success for u in rows])
    for source_type in metrics.PROVENANCE:
        rows = [u for u in uses if u.kind == "edge" and u.source_type == source_type]
        out[f"edge:{source_type}"] = metrics.calibration(
            [u.confidence for u in rows], [u.success for u in rows]
        )
    return out


def culls_against_truth(world: World, audit: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Audited deletions of scored types by verdict: did the cull remove true or false edges?"""
    out = {"true": 0, "false": 0, "unscored": 0}
    for row in audit:
        truth = world.truth_for(row["edge_type"])
        known = row["source_slug"] in world.concepts and row["target_slug"] in world.concepts
        if truth is None or not known:
            out["unscored"] += 1
        else:
            out["true" if (row["source_slug"], row["target_slug"]) in truth else "false"] += 1
    return out


def _promotions(nightly: Mapping[str, Any]) -> int:
    """Entries a nightly run promoted (candidate -> pattern and pattern -> proven)."""
    return int(nightly.get("promoted_to_pattern", 0)) + int(nightly.get("promoted_to_proven", 0))


def timeline(run: SimulationRun) -> list[dict[str, Any]]:
    """One row per simulated day: graph size by provenance, cumulative lifecycle events, and
    how many learned prerequisite edges are true or false at the two thresholds."""
    world = run.world
    audit_start = sum(int(r["n"]) for r in run.before.audit)
    accepted_start = run.before.enrichment.get("accepted", 0)
    promotions = archived = 0
    rows = []
    for snap in run.days:
        facts = metrics.facts_from_rows(snap.edges)
        promotions += _promotions(snap.nightly)
        archived += int(snap.nightly.get("archived", 0))
        row: dict[str, Any] = {
            "day": snap.day,
            "at": snap.at,
            "sessions": snap.sessions,
            "turns": snap.turns,
            "success_rate": snap.successes / snap.turns if snap.turns else None,
            "decision_coverage": snap.decisions / snap.turns if snap.turns else None,
            "visible_topic_entries": snap.visible_entries,
            "topic_entries": snap.topic_entries,
            "edges_by_provenance": dict(Counter(f.source_type for f in facts)),
            "edges_by_type": dict(Counter(f.edge_type for f in facts)),
            "maturity": snap.maturity,
            "promotions": promotions,
            "archived": archived,
            "culls": sum(int(r["n"]) for r in snap.audit) - audit_start,
            "enrichment_accepted": snap.enrichment.get("accepted", 0) - accepted_start,
        }
        for t, suffix in ((HEADLINE_THRESHOLD, "06"), (ENTRY_THRESHOLD, "03")):
            learned = [
                f
                for f in facts
                if f.edge_type == "prerequisite"
                and f.source_type == "learned"
                and f.confidence >= t
                and f.source in world.concepts
                and f.target in world.concepts
            ]
            true = sum(1 for f in learned if (f.source, f.target) in world.prerequisites)
            row[f"learned_prereq_true_{suffix}"] = true
            row[f"learned_prereq_false_{suffix}"] = len(learned) - true
        memory = metrics.recovery_at(
            facts, world.prerequisites, world.slugs, "prerequisite", HEADLINE_THRESHOLD
        )
        row["memory_prereq_precision_06"] = memory["precision"]
        row["memory_prereq_recall_06"] = memory["recall"]
        row["process"], row["nightly"], row["enrich"] = snap.process, snap.nightly, snap.enrich
        rows.append(row)
    return rows


def _at(curve: Sequence[Mapping[str, Any]], threshold: float) -> Mapping[str, Any]:
    return next(r for r in curve if abs(r["threshold"] - threshold) < 1e-9)


def truth_scores(
    world: World,
    before: Sequence[EdgeFact],
    after: Sequence[EdgeFact],
    *,
    lacking: Mapping[tuple[str, str], int] | None = None,
) -> dict[str, Any]:
    """Edge confidences scored against the hidden graph (Brier, AUC), at the end of the run:
    learned prerequisites, the whole memory's prerequisites, each scored type; and what became
    of the authored (seed) prerequisites the truth holds and the ones it contradicts, each with
    its `lacking_learners` (`lacking`: the learners who failed its concept while lacking its
    target, before the memory had seen them succeed on it; from the simulator's hidden state).
    A true one with none is *unseen*: no report the memory keeps could have named its target
    for it, so its concept's reports are what they would be for a wrong one."""
    concepts = world.slugs
    out: dict[str, Any] = {
        "learned_prerequisite": metrics.truth_scores(
            after, world.prerequisites, concepts, "prerequisite", ("learned",)
        ),
    }
    for kind in metrics.SCORED_TYPES:
        truth = world.truth_for(kind)
        assert truth is not None
        out[kind] = metrics.truth_scores(after, truth, concepts, kind)
    authored_before = {
        (f.source, f.target)
        for f in before
        if f.edge_type == "prerequisite" and f.source_type == "seed"
    }
    end = {
        (f.source, f.target): f.confidence
        for f in after
        if f.edge_type == "prerequisite" and f.source_type == "seed"
    }
    authored = []
    for pair in sorted(authored_before):
        if pair[0] in world.concepts and pair[1] in world.concepts:
            authored.append(
                {
                    "source": pair[0],
                    "target": pair[1],
                    "true": pair in world.prerequisites,
                    "confidence": end.get(pair),
                    "lacking_learners": None if lacking is None else lacking.get(pair, 0),
                    "unseen": None
                    if lacking is None
                    else pair in world.prerequisites and lacking.get(pair, 0) == 0,
                }
            )
    out["authored_prerequisites"] = authored
    return out


def _below(rows: Sequence[Mapping[str, Any]], true: bool, level: float) -> int:
    return sum(
        1
        for r in rows
        if r["true"] is true and (r["confidence"] is None or r["confidence"] < level)
    )


def headline(
    rec: Mapping[str, Any],
    cal: Mapping[str, Any],
    lifecycle: Mapping[str, Any],
    baseline: Mapping[str, Any],
    by_hits: Sequence[Mapping[str, Any]],
    truth: Mapping[str, Any] | None = None,
    bound: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    prereq = rec["prerequisite"]
    learned06, learned03 = (
        _at(prereq["learned"], HEADLINE_THRESHOLD),
        _at(prereq["learned"], ENTRY_THRESHOLD),
    )
    memory06 = _at(prereq["memory"], HEADLINE_THRESHOLD)
    return {
        "learned_prereq_precision_at_0.6": learned06["precision"],
        "learned_prereq_recall_at_0.6": learned06["recall"],
        "learned_prereq_recall_bound": bound["recall_bound"] if bound else None,
        "learned_prereq_precision_at_0.3": learned03["precision"],
        "learned_prereq_recall_at_0.3": learned03["recall"],
        "learned_prereq_direction_accuracy_at_0.3": learned03["direction_accuracy"],
        "struggled_prereq_recall_at_0.3": _at(prereq["struggled"], ENTRY_THRESHOLD)["recall"],
        "learned_prereq_precision_hits_ge_3": next(
            r["precision"] for r in by_hits if r["min_hits"] == 3
        ),
        "memory_prereq_precision_at_0.6": memory06["precision"],
        "memory_prereq_recall_at_0.6": memory06["recall"],
        "extractor_precision_reported_1x": baseline["reported_1x"]["precision"],
        "leads_to_precision_at_0.6": _at(rec["leads_to"]["memory"], HEADLINE_THRESHOLD)[
            "precision"
        ],
        "fallback_precision_at_0.6": _at(rec["fallback"]["memory"], HEADLINE_THRESHOLD)[
            "precision"
        ],
        "leads_to_recall_at_0.6": _at(rec["leads_to"]["memory"], HEADLINE_THRESHOLD)["recall"],
        "fallback_recall_at_0.6": _at(rec["fallback"]["memory"], HEADLINE_THRESHOLD)["recall"],
        # the edges the memory learned (no authored or enriched one): what the rules earned
        **{
            f"learned_{kind}_{figure}_at_0.6": _at(rec[kind]["learned"], HEADLINE_THRESHOLD)[figure]
            for kind in ("leads_to", "fallback")
            for figure in ("precision", "recall")
        },
        "decision_log_loss": cal["decision"]["log_loss"],
        "decision_baseline_log_loss": cal["decision"]["baseline_log_loss"],
        "decision_binned_rmse": cal["decision"]["binned_rmse"],
        "edge_log_loss": cal["edge"]["log_loss"],
        "edge_baseline_log_loss": cal["edge"]["baseline_log_loss"],
        "edge_binned_rmse": cal["edge"]["binned_rmse"],
        "promotions": lifecycle["promotions"],
        "archived": lifecycle["archived"],
        "culls": lifecycle["culls"],
        "enrichment_accepted": lifecycle["enrichment_accepted"],
    } | (_truth_headline(truth) if truth is not None else {})


def fixed_set_brier(
    world: World,
    before: Sequence[EdgeFact],
    after: Sequence[EdgeFact],
    struggles: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Learned prerequisites' Brier over a set the memory does not choose: every true pair
    the memory lacked at the start (the learned recall's denominator) and every pair the
    extractor reported, less the pairs an authored or enriched edge held at the start; each
    scored by its learned edge's confidence at the end, 0 where there is none. The headline's
    truth-Brier scores the learned edges that exist at the end, so a true pair left without
    an edge costs it nothing, and one-learner edges held low dilute it."""
    known = set(world.slugs)
    given = _pairs(before, "prerequisite", exclude="learned")
    reported = {
        (s["concept"], s["missing"]) for s in struggles if s["reported_true"] or s["reported_false"]
    }
    pairs = sorted(
        p for p in (set(world.prerequisites) | reported) - given if p[0] in known and p[1] in known
    )
    end = {
        (f.source, f.target): f.confidence
        for f in after
        if f.edge_type == "prerequisite" and f.source_type == "learned"
    }
    labels = [p in world.prerequisites for p in pairs]
    return {
        "n": len(pairs),
        "true": sum(labels),
        "brier": metrics.brier([end.get(p, 0.0) for p in pairs], labels),
    }


def _truth_headline(truth: Mapping[str, Any]) -> dict[str, Any]:
    """The truth-scored figures added to the headline (issue 14; the keys above stay)."""
    authored = truth["authored_prerequisites"]
    return {
        "learned_prereq_truth_brier": truth["learned_prerequisite"]["brier"],
        "learned_prereq_truth_brier_fixed": (truth.get("learned_prerequisite_fixed") or {}).get(
            "brier"
        ),
        "learned_prereq_truth_auc": truth["learned_prerequisite"]["auc"],
        "memory_prereq_truth_brier": truth["prerequisite"]["brier"],
        "memory_prereq_truth_auc": truth["prerequisite"]["auc"],
        "leads_to_truth_auc": truth["leads_to"]["auc"],
        "fallback_truth_auc": truth["fallback"]["auc"],
        "authored_prereq_false": sum(1 for r in authored if not r["true"]),
        "authored_prereq_false_below_0.5": _below(authored, False, HALF),
        "authored_prereq_true_below_0.5": _below(authored, True, HALF),
        **_unseen_headline(authored),
    }


def _unseen_headline(authored: Sequence[Mapping[str, Any]]) -> dict[str, int | None]:
    """The true authored prerequisites no kept report could have named (`truth_scores`'s
    `unseen`), and those of them below 0.5; None when the run did not count them."""
    if any(r.get("unseen") is None for r in authored):
        return {"authored_prereq_true_unseen": None, "authored_prereq_true_unseen_below_0.5": None}
    unseen = [r for r in authored if r["unseen"]]
    return {
        "authored_prereq_true_unseen": len(unseen),
        "authored_prereq_true_unseen_below_0.5": _below(unseen, True, HALF),
    }


CULL_NOTE = (
    "rendered edges are never culled (the cull takes only never-traversed edges), so cull "
    "counts depend on how many edges a rule renders and are not comparable across rules"
)


# --- writing -------------------------------------------------------------------------------


def write_uses(path: Path, uses: Sequence[Any]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(
            [
                "day",
                "session_id",
                "turn_index",
                "kind",
                "id",
                "edge_type",
                "source_type",
                "confidence",
                "success",
            ]
        )
        for u in uses:
            writer.writerow(
                [
                    u.day,
                    u.session_id,
                    u.turn_index,
                    u.kind,
                    u.id,
                    u.edge_type or "",
                    u.source_type or "",
                    repr(float(u.confidence)),  # exact: a recount must bin it the same way
                    int(u.success),
                ]
            )
    return path


def write_report(
    run: SimulationRun,
    out_dir: Path,
    *,
    name: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the whole folder and return report.json's content."""
    from hag.storage import db

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    world = run.world
    with db.connect() as conn:
        exported = collect_exports(conn, world.topic_id)
    struggles = run.struggle_table()
    before = metrics.facts_from_rows(run.before.edges)
    after = metrics.edge_facts(exported["edges"], exported["entries"], world.topic_id)

    rec = recovery(world, before, after, struggles)
    dials = settings.current()
    bound = (
        recall_bound(world, before, struggles, dials.prerequisite_min_learners)
        if drops_shown(dials)
        else None  # other rules keep those reports, or one learner's: no bound from them
    )
    cal = calibration(run.uses)
    days = timeline(run)
    last = (
        days[-1] if days else {"promotions": 0, "archived": 0, "culls": 0, "enrichment_accepted": 0}
    )
    lifecycle = {
        "promotions": last["promotions"],
        "archived": last["archived"],
        "culls": last["culls"],
        "enrichment_accepted": last["enrichment_accepted"],
        "audit": exported["audit"],
        "culled_vs_truth": culls_against_truth(world, exported["audit"]),
    }
    baseline = extractor_baseline(world, struggles)
    by_hits = metrics.precision_by_hits(after, world.prerequisites, world.slugs, "prerequisite")
    truth = truth_scores(world, before, after, lacking=run.lacking_counts())
    truth["learned_prerequisite_fixed"] = fixed_set_brier(world, before, after, struggles)
    report = {
        "name": name or out_dir.name,
        "config": run.config.describe(),
        "run": {
            "sessions": run.sessions,
            "turns": run.turns,
            "successes": run.successes,
            "success_rate": run.successes / run.turns if run.turns else None,
            "quarantined": run.quarantined,
            "learners": len(run.learners),
            "mastered_at_end": sum(len(lr.mastered) for lr in run.learners),
            "seconds": dict(run.seconds),
            "true_struggles": sum(s["true"] for s in struggles),
            "reported_true": sum(s["reported_true"] for s in struggles),
            "reported_false": sum(s["reported_false"] for s in struggles),
            # the persistent error kinds (counted in reported_false too)
            "repeating_sessions": run.repeating_sessions,
            "reported_repeated": run.error_reports["repeated"],
            "misconception_learners": sum(1 for lr in run.learners if lr.misconception),
            "reported_misconception": run.error_reports["misconception"],
        },
        "profile": run.config.profile,
        "headline": headline(rec, cal, lifecycle, baseline, by_hits, truth, bound),
        "truth_scores": truth,
        "recovery": rec,
        "recall_bound": bound,
        "precision_by_hits": by_hits,
        "provenance_at_0.3": metrics.provenance_breakdown(
            after, world.prerequisites, world.slugs, "prerequisite", ENTRY_THRESHOLD
        ),
        "provenance_at_0.6": metrics.provenance_breakdown(
            after, world.prerequisites, world.slugs, "prerequisite", HEADLINE_THRESHOLD
        ),
        "extractor_baseline": baseline,
        # scored against the turn's outcome, not the truth: an edge's confidence is no
        # prediction of a turn's success, so this rewards drift toward the success rate
        "calibration": cal,
        "lifecycle": {k: v for k, v in lifecycle.items() if k != "audit"},
        "notes": {
            "calibration": "outcome score: each confidence shown is scored as a prediction of "
            "its turn's outcome; edges are scored against the hidden graph in truth_scores",
            "culls": CULL_NOTE,
        },
        "extra": dict(extra or {}),
    }

    write_json(out_dir / "truth.json", {**world.as_dict(), "struggles": struggles})
    write_json(out_dir / "edges.json", exported["edges"])
    write_json(out_dir / "entries.json", exported["entries"])
    write_json(out_dir / "edges_before.json", run.before.edges)
    write_json(out_dir / "audit.json", exported["audit"])
    write_json(out_dir / "timeline.json", days)
    write_uses(out_dir / "uses.csv", run.uses)
    plots.recovery_plot(rec, out_dir / "recovery.png")
    plots.reliability_plot(
        {k: cal[k] for k in ("decision", "entry", "edge")}, out_dir / "reliability.png"
    )
    if days:
        plots.lifecycle_plot(days, out_dir / "lifecycle.png")
    plots.graph_plot(world, before, after, out_dir / "graph.png", threshold=HEADLINE_THRESHOLD)
    write_json(out_dir / "report.json", report)
    from hag_lab.report.markdown import render

    (out_dir / "report.md").write_text(render(report, exported["audit"], days))
    return report


def culls_line(verdict: Mapping[str, int]) -> str:
    """The culled edges split as the README's "false in the hidden graph" figure counts them."""
    true, false, unscored = (verdict.get(k, 0) for k in ("true", "false", "unscored"))
    return (
        f"culled edges: {true + false + unscored} = {true + false} the hidden graph scores "
        f"({false} false, {true} true) + {unscored} of types or concepts it does not score"
    )


def summary_lines(report: Mapping[str, Any], folder: Path | None = None) -> list[str]:
    """The terminal summary: the headline figures in a few lines."""
    h = report["headline"]
    r = report["run"]
    lines = [
        f"simulated {r['sessions']} sessions ({r['turns']} turns, success rate "
        f"{fmt(r['success_rate'], 2)}) for {r['learners']} learners; "
        f"struggles: {r['true_struggles']} true, {r['reported_true']} reported, "
        f"{r['reported_false']} invented by the extractor",
        f"prerequisite recovery (learned edges): precision {fmt(h['learned_prereq_precision_at_0.6'])} "
        f"recall {fmt(h['learned_prereq_recall_at_0.6'])} at >= 0.6; precision "
        f"{fmt(h['learned_prereq_precision_at_0.3'])} recall {fmt(h['learned_prereq_recall_at_0.3'])} "
        f"direction {fmt(h['learned_prereq_direction_accuracy_at_0.3'])} at >= 0.3 "
        f"(trusting every report: precision {fmt(h['extractor_precision_reported_1x'])}; "
        f"recall the reports allow {fmt(h['learned_prereq_recall_bound'])}: true pairs named "
        "by enough learners who had not shown the target)",
        f"learned prerequisites seen in >= 3 sessions: precision "
        f"{fmt(h['learned_prereq_precision_hits_ge_3'])}",
        f"whole memory at >= 0.6: prerequisite precision {fmt(h['memory_prereq_precision_at_0.6'])} "
        f"recall {fmt(h['memory_prereq_recall_at_0.6'])}; leads_to precision "
        f"{fmt(h['leads_to_precision_at_0.6'])}; fallback precision {fmt(h['fallback_precision_at_0.6'])}",
        f"edges against the hidden graph: learned prerequisites Brier "
        f"{fmt(h.get('learned_prereq_truth_brier'))} AUC {fmt(h.get('learned_prereq_truth_auc'))}; "
        f"all prerequisites Brier {fmt(h.get('memory_prereq_truth_brier'))} AUC "
        f"{fmt(h.get('memory_prereq_truth_auc'))}; authored prerequisites below 0.5: "
        f"{h.get('authored_prereq_false_below_0.5')} of {h.get('authored_prereq_false')} false, "
        f"{h.get('authored_prereq_true_below_0.5')} true ("
        f"{h.get('authored_prereq_true_unseen_below_0.5')} of them unseen: no learner failed "
        f"the concept lacking the target before showing it; "
        f"{h.get('authored_prereq_true_unseen')} true ones unseen in all)",
        f"outcome score (each confidence shown as a prediction of its turn's outcome, not of "
        f"truth): decision entries log-loss {fmt(h['decision_log_loss'])} (base rate "
        f"{fmt(h['decision_baseline_log_loss'])}), binned RMSE {fmt(h['decision_binned_rmse'])}; "
        f"edges log-loss {fmt(h['edge_log_loss'])} (base rate {fmt(h['edge_baseline_log_loss'])}), "
        f"binned RMSE {fmt(h['edge_binned_rmse'])}",
        f"lifecycle: {h['promotions']} promotions, {h['archived']} entries archived, "
        f"{h['culls']} edges culled (audited; {CULL_NOTE}), "
        f"{h['enrichment_accepted']} enrichment proposals accepted",
        culls_line(report["lifecycle"].get("culled_vs_truth", {})),
    ]
    if folder is not None:
        lines.append(f"report: {folder / 'report.md'}")
    return lines
