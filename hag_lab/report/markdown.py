"""report.md: the figures of report.json, in words and tables, with the plots inline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def fmt(value: Any, digits: int = 3) -> str:
    """A figure as the report prints it: floats to `digits` places, None as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _cell(value: Any) -> str:
    """A table cell: a mapping (such as the seconds per step) as `key value` pairs, not JSON."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {fmt(v, 1)}" for k, v in value.items())
    return fmt(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(" --- " for _ in header) + "|"]
    lines += ["| " + " | ".join(fmt(c) for c in row) + " |" for row in rows]
    return lines


def _curve_table(curve: Sequence[Mapping[str, Any]]) -> list[str]:
    return _table(
        [
            "threshold",
            "claimed",
            "true",
            "false",
            "truth",
            "precision",
            "recall",
            "F1",
            "direction",
            "outside truth",
        ],
        [
            [
                r["threshold"],
                r["claimed"],
                r["true_positive"],
                r["false_positive"],
                r["truth"],
                r["precision"],
                r["recall"],
                r["f1"],
                r["direction_accuracy"],
                r["outside_truth"],
            ]
            for r in curve
        ],
    )


def _truth_section(report: Mapping[str, Any]) -> list[str]:
    """Edge confidences at the end against the hidden graph (issue 14), when the report has them."""
    truth = report.get("truth_scores")
    if not truth:
        return []
    out = [
        "## Edges against the hidden graph",
        "",
        "Every edge between two concepts the truth knows is a claim; Brier is the mean squared "
        "difference between its confidence and its truth (0 or 1), AUC the chance a true "
        "claim's confidence exceeds a false one's.",
        "",
    ]
    kinds = ["learned_prerequisite", "prerequisite", "leads_to", "fallback"]
    out += _table(
        ["edges", "n", "true", "Brier", "AUC"],
        [[k, truth[k]["n"], truth[k]["true"], truth[k]["brier"], truth[k]["auc"]] for k in kinds],
    )
    authored = truth.get("authored_prerequisites", [])
    if authored:
        out += ["", "Authored (seed) prerequisites at the end:", ""]
        out += _table(
            [
                "authored prerequisite",
                "true in the hidden graph",
                "confidence",
                "learners who failed lacking it, unshown",
            ],
            [
                [
                    f"{r['source']} → {r['target']}",
                    ("yes (unseen)" if r.get("unseen") else "yes") if r["true"] else "no",
                    r["confidence"],
                    r.get("lacking_learners"),
                ]
                for r in authored
            ],
        )
    return out + [""]


def _persistent_errors(c: Mapping[str, Any], r: Mapping[str, Any]) -> list[str]:
    """The paragraph on the persistent error kinds (issue 29), when the run had any."""
    if not (c.get("p_repeat_session") or c.get("misconception_share")):
        return []
    return [
        f"Persistent extractor errors (counted among the invented ones): in "
        f"{r['repeating_sessions']} sessions (share {c['p_repeat_session']} asked) the "
        f"extractor misread one pair and repeated it, {r['reported_repeated']} reports; "
        f"{r['misconception_learners']} learners (share {c['misconception_share']} asked) "
        f"held a misconception and named it {r['reported_misconception']} times.",
        "",
    ]


def render(
    report: Mapping[str, Any], audit: Sequence[Mapping[str, Any]], days: Sequence[Mapping[str, Any]]
) -> str:
    c, r, h = report["config"], report["run"], report["headline"]
    out: list[str] = [f"# Does the memory learn? — {report['name']}", ""]
    out += [
        f"{r['sessions']} simulated sessions ({r['turns']} turns) by {r['learners']} learners over "
        f"{c['days']} simulated days from {c['start'][:10]}, seed {c['seed']}. The extractor dropped "
        f"true struggles with probability {c['p_miss']} and invented false ones with probability "
        f"{c['p_false']} per failed turn. Every turn read the memory through `retrieve`; every session "
        "went in through `ingest_payload` and session-end processing; the nightly sweeps ran "
        "after every simulated day with `as_of` = the end of that day.",
        "",
        f"Turn success rate {fmt(r['success_rate'], 3)}; {r['true_struggles']} true struggles, of "
        f"which {r['reported_true']} reported; {r['reported_false']} invented; "
        f"{r['quarantined']} payloads quarantined.",
        "",
        *_persistent_errors(c, r),
        "## Headline",
        "",
    ]
    out += _table(["figure", "value"], [[k, v] for k, v in h.items()])
    out += [
        "",
        "## Graph recovery",
        "",
        "A claim is an edge of the type at or above the threshold between two concepts the "
        "truth knows. *learned*: `learned` edges only, recall against the true pairs the memory "
        "did not hold as seed or enriched edges at the start. *memory*: every provenance, "
        "against the whole truth. *struggled*: every provenance, against the true pairs the "
        "extractor reported at least once. Direction accuracy: of the claims on a truly "
        "related pair, the share pointing the right way. `leads_to` A→B is true when A is a "
        "direct prerequisite of B, `fallback` A→B when B is a direct prerequisite of A.",
        "",
        "![recovery](recovery.png)",
        "",
    ]
    for kind, curves in report["recovery"].items():
        for scope, curve in curves.items():
            out += [f"### {kind} — {scope}", ""]
            out += _curve_table(curve)
            out += [""]
    out += ["### Prerequisite claims by provenance", ""]
    for label in ("provenance_at_0.3", "provenance_at_0.6"):
        rows = [[k, v["claimed"], v["true"], v["false"]] for k, v in report[label].items()]
        out += (
            [f"At {label.rsplit('_', 1)[1]}:", ""]
            + _table(["provenance", "claimed", "true", "false"], rows)
            + [""]
        )
    out += [
        "### Learned prerequisites by corroboration",
        "",
        "Claims by the number of sessions that reported the pair (`hit_count`) instead of by "
        "confidence: what the reinforcement rule counts before outcome grading moves it.",
        "",
    ]
    out += _table(
        ["sessions >=", "claimed", "true", "precision", "recall of the whole truth"],
        [
            [r["min_hits"], r["claimed"], r["true_positive"], r["precision"], r["recall"]]
            for r in report["precision_by_hits"]
        ],
    )
    out += [""]
    b = report["extractor_baseline"]
    out += [
        "Trusting the extractor directly (no memory): every pair reported once — precision "
        f"{fmt(b['reported_1x']['precision'])}, recall {fmt(b['reported_1x']['recall'])} "
        f"({b['reported_1x']['claimed']} claims); reported three times or more — precision "
        f"{fmt(b['reported_3x']['precision'])}, recall {fmt(b['reported_3x']['recall'])}.",
        "",
    ]

    out += _truth_section(report)
    out += [
        "## Calibration (outcome score)",
        "",
        "Each confidence the tutor was shown (the decision entry, every advisory used, every "
        "rendered edge line) is scored as a prediction of that turn's outcome. Baseline: the "
        "constant predictor at the observed success rate. For edges this is an outcome score, "
        "not a truth score: it rewards confidences that drift toward the success rate (edges "
        "against the hidden graph are above).",
        "",
        "![reliability](reliability.png)",
        "",
    ]
    rows = [
        [
            k,
            v["n"],
            v["mean_predicted"],
            v["observed_rate"],
            v["log_loss"],
            v["baseline_log_loss"],
            v["binned_rmse"],
        ]
        for k, v in report["calibration"].items()
    ]
    out += _table(
        [
            "used",
            "n",
            "mean confidence",
            "success rate",
            "log-loss",
            "baseline log-loss",
            "binned RMSE",
        ],
        rows,
    )
    out += [""]

    lc = report["lifecycle"]
    out += [
        "## Lifecycle",
        "",
        f"{lc['promotions']} promotions, {lc['archived']} entries archived, {lc['culls']} edges culled, "
        f"{lc['enrichment_accepted']} enrichment proposals accepted over the run. "
        "Rendered edges are never culled (the cull takes only never-traversed edges), so cull "
        "counts depend on how much a rule renders and are not comparable across rules.",
        "",
        "![lifecycle](lifecycle.png)",
        "",
    ]
    if days:
        step = max(1, len(days) // 12)
        picked = [d for i, d in enumerate(days) if i % step == 0 or i == len(days) - 1]
        out += _table(
            [
                "day",
                "success rate",
                "turns with advice",
                "visible entries",
                "seed",
                "learned",
                "enriched",
                "promotions",
                "culls",
                "enrichment accepted",
                "learned prereq true/false >= 0.6",
                "memory prereq P/R >= 0.6",
            ],
            [
                [
                    d["day"] + 1,
                    fmt(d["success_rate"], 2),
                    fmt(d["decision_coverage"], 2),
                    f"{d['visible_topic_entries']}/{d['topic_entries']}",
                    d["edges_by_provenance"].get("seed", 0),
                    d["edges_by_provenance"].get("learned", 0),
                    d["edges_by_provenance"].get("enriched", 0),
                    d["promotions"],
                    d["culls"],
                    d["enrichment_accepted"],
                    f"{d['learned_prereq_true_06']}/{d['learned_prereq_false_06']}",
                    f"{fmt(d['memory_prereq_precision_06'], 2)}/{fmt(d['memory_prereq_recall_06'], 2)}",
                ]
                for d in picked
            ],
        )
        out += [""]
    verdict = lc.get("culled_vs_truth", {})
    out += [
        "### Cull audit",
        "",
        f"Deleted edges against the hidden truth (prerequisite, leads_to, fallback): "
        f"{verdict.get('false', 0)} false, {verdict.get('true', 0)} true, "
        f"{verdict.get('unscored', 0)} of types or concepts the truth does not score.",
        "",
    ]
    if audit:
        out += _table(
            [
                "deleted at",
                "edge",
                "type",
                "provenance",
                "confidence",
                "hits",
                "traversals",
                "created",
                "reason",
                "restored",
            ],
            [
                [
                    str(a["deleted_at"])[:19],
                    f"{a['source_slug']} → {a['target_slug']}",
                    a["edge_type"],
                    a["source_type"],
                    a["confidence"],
                    a["hit_count"],
                    a["traversal_count"],
                    str(a["created_at"])[:10],
                    a["reason"],
                    str(a["restored_at"] or "")[:19],
                ]
                for a in audit
            ],
        )
    else:
        out += ["No edge was deleted."]
    out += [
        "",
        "## The topic graph, before and after",
        "",
        "Edges coloured by provenance (seed blue, learned orange, enriched green), line style "
        "by type, width and opacity by confidence; concepts in rows by depth in the hidden "
        "prerequisite graph, foundations at the bottom, concepts the truth does not know in "
        "grey at the top. Right: the prerequisite claims at 0.6 against the truth.",
        "",
        "![graph](graph.png)",
        "",
    ]
    if report.get("extra"):
        out += ["## Also run", ""]
        out += _table(["what", "result"], [[k, _cell(v)] for k, v in report["extra"].items()])
        out += [""]
    out += [
        "## Files",
        "",
        "`truth.json` (hidden graph and the struggle counts), `edges.json` and `entries.json` "
        "(the topic as `hag export edges|entries --topic` prints it at the end), "
        "`edges_before.json`, `audit.json`, `timeline.json`, `uses.csv` (every confidence "
        "shown and the outcome), `report.json` (every figure above).",
        "",
    ]
    return "\n".join(out)
