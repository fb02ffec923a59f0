"""The report's PNG plots (matplotlib, Agg backend: no display needed).

The graph picture lays itself out (no networkx): concepts in rows by their depth in the
hidden prerequisite DAG, foundations at the bottom, concepts the truth does not know (minted
from drift) in a row of their own at the top. Edges are coloured by provenance, like the
seed's filter-by-origin view.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import FancyArrowPatch

from hag_lab.report.metrics import SCORED_TYPES, EdgeFact
from hag_lab.simulate.world import World

PROVENANCE_COLOURS = {"seed": "#4C72B0", "learned": "#DD8452", "enriched": "#55A868"}
OTHER_COLOUR = "#8172B3"
TYPE_STYLES = {
    "prerequisite": "-",
    "fallback": "--",
    "leads_to": ":",
    "related": "-.",
    "supersedes": (0, (1, 3)),
}


def _save(fig: Any, path: Path, *, tight: bool = True) -> Path:
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _series(curve: Sequence[Mapping[str, Any]], key: str) -> list[float]:
    """One column of a curve, a missing value as NaN (a gap in the line)."""
    return [float("nan") if row.get(key) is None else row[key] for row in curve]


def recovery_plot(
    recovery: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], path: Path
) -> Path:
    """Precision and recall against the confidence threshold, one panel per scored type."""
    kinds = [k for k in SCORED_TYPES if k in recovery]
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 3.8), squeeze=False)
    for ax, kind in zip(axes[0], kinds, strict=True):
        for scope, style in (("learned", "-"), ("memory", "--")):
            curve = recovery[kind].get(scope)
            if not curve:
                continue
            xs = [row["threshold"] for row in curve]
            ax.plot(
                xs,
                _series(curve, "precision"),
                style,
                color="#C44E52",
                marker="o",
                ms=3,
                label=f"precision ({scope})",
            )
            ax.plot(
                xs,
                _series(curve, "recall"),
                style,
                color="#4C72B0",
                marker="s",
                ms=3,
                label=f"recall ({scope})",
            )
        ax.set_title(f"{kind} edges vs hidden truth")
        ax.set_xlabel("confidence threshold")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    return _save(fig, path)


def reliability_plot(calibration: Mapping[str, Mapping[str, Any]], path: Path) -> Path:
    """Observed success rate against predicted confidence, per kind of thing used."""
    fig, ax = plt.subplots(figsize=(5.2, 4.8))
    ax.plot([0, 1], [0, 1], color="grey", lw=1, label="perfect calibration")
    colours = {"decision": "#C44E52", "entry": "#DD8452", "edge": "#4C72B0"}
    for kind, cal in calibration.items():
        bins = cal.get("bins") or []
        if not bins:
            continue
        total = sum(b["n"] for b in bins)
        ax.plot(
            [b["mean_predicted"] for b in bins],
            [b["observed_rate"] for b in bins],
            "-",
            color=colours.get(kind, "black"),
            lw=1,
        )
        ax.scatter(
            [b["mean_predicted"] for b in bins],
            [b["observed_rate"] for b in bins],
            s=[max(8.0, 400.0 * b["n"] / total) for b in bins],
            color=colours.get(kind, "black"),
            alpha=0.7,
            label=f"{kind} (n={cal['n']}, RMSE {cal['binned_rmse']:.3f})",
        )
    ax.set_xlabel("confidence at time of use")
    ax.set_ylabel("observed success rate")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.set_title("Reliability (marker area = share of uses)")
    return _save(fig, path)


def lifecycle_plot(timeline: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Edges by provenance, cumulative lifecycle events and learned-prerequisite quality per day."""
    days = [row["day"] + 1 for row in timeline]
    fig, axes = plt.subplots(1, 4, figsize=(20, 3.8))
    ax = axes[0]
    for source_type, colour in PROVENANCE_COLOURS.items():
        ax.plot(
            days,
            [row["edges_by_provenance"].get(source_type, 0) for row in timeline],
            color=colour,
            label=source_type,
        )
    ax.set_title("edges in the topic graph, by provenance")
    ax.set_xlabel("simulated day")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax = axes[1]
    for key, colour, label in (
        ("promotions", "#55A868", "promotions (cumulative)"),
        ("culls", "#C44E52", "culled edges (cumulative)"),
        ("enrichment_accepted", "#8172B3", "enrichment acceptances (cumulative)"),
    ):
        ax.plot(days, [row[key] for row in timeline], color=colour, label=label)
    ax.set_title("lifecycle events")
    ax.set_xlabel("simulated day")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax = axes[2]
    ax.plot(
        days,
        [row["learned_prereq_true_06"] for row in timeline],
        color="#55A868",
        label="true, confidence >= 0.6",
    )
    ax.plot(
        days,
        [row["learned_prereq_false_06"] for row in timeline],
        color="#C44E52",
        label="false, confidence >= 0.6",
    )
    ax.plot(
        days,
        [row["learned_prereq_true_03"] for row in timeline],
        ":",
        color="#55A868",
        label="true, >= 0.3",
    )
    ax.plot(
        days,
        [row["learned_prereq_false_03"] for row in timeline],
        ":",
        color="#C44E52",
        label="false, >= 0.3",
    )
    ax.set_title("learned prerequisite edges vs truth")
    ax.set_xlabel("simulated day")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax = axes[3]
    rates = _series(timeline, "success_rate")
    ax.plot(days, rates, color="#4C72B0", lw=0.8, alpha=0.5, label="success rate per day")
    window = 7
    smooth = [
        sum(rates[max(0, i - window + 1) : i + 1]) / len(rates[max(0, i - window + 1) : i + 1])
        for i in range(len(rates))
    ]
    ax.plot(days, smooth, color="#4C72B0", lw=2, label=f"success rate, {window}-day mean")
    coverage = _series(timeline, "decision_coverage")
    ax.plot(days, coverage, color="#DD8452", lw=1.2, label="turns with an advisory to act on")
    visible = [
        row.get("visible_topic_entries", 0) / max(1, row.get("topic_entries", 0))
        for row in timeline
    ]
    ax.plot(days, visible, color="#55A868", lw=1.2, label="topic entries above their floor")
    ax.set_ylim(0, 1)
    ax.set_title("success rate and what the memory can still show")
    ax.set_xlabel("simulated day")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def _layout(world: World, extra: Sequence[str]) -> dict[str, tuple[float, float]]:
    depth = world.depth()
    rows: dict[int, list[str]] = {}
    for slug in world.slugs:
        rows.setdefault(depth[slug], []).append(slug)
    top = max(rows, default=0) + 1
    if extra:
        rows[top] = sorted(extra)
    pos: dict[str, tuple[float, float]] = {}
    for level, slugs in rows.items():
        # order a row by the mean position of its prerequisites, so lines cross less
        def anchor(s: str) -> float:
            xs = [pos[p][0] for p in world.prerequisites_of(s) if p in pos]
            return sum(xs) / len(xs) if xs else 0.5

        slugs = sorted(slugs, key=lambda s: (anchor(s), s)) if level else sorted(slugs)
        for i, slug in enumerate(slugs):
            pos[slug] = ((i + 1) / (len(slugs) + 1), float(level))
    return pos


def _draw_graph(
    ax: Any,
    world: World,
    facts: Sequence[EdgeFact],
    pos: Mapping[str, tuple[float, float]],
    colour_of: Any,
    title: str,
) -> None:
    for f in facts:
        if f.source not in pos or f.target not in pos:
            continue
        (x1, y1), (x2, y2) = pos[f.source], pos[f.target]
        ax.add_patch(
            FancyArrowPatch(
                (x1, y1),
                (x2, y2),
                arrowstyle="-|>",
                mutation_scale=7,
                connectionstyle="arc3,rad=0.12",
                color=colour_of(f),
                linestyle=TYPE_STYLES.get(f.edge_type, "-"),
                lw=0.6 + 1.6 * f.confidence,
                alpha=0.25 + 0.6 * f.confidence,
                shrinkA=6,
                shrinkB=6,
            )
        )
    for slug, (x, y) in pos.items():
        known = slug in world.concepts
        ax.scatter(
            [x],
            [y],
            s=60,
            color="white" if known else "#EEEEEE",
            edgecolors="black" if known else "grey",
            zorder=3,
        )
        ax.annotate(
            slug,
            (x, y),
            xytext=(0, LABEL_TIERS[0]),
            textcoords="offset points",
            ha="center",
            va="top",
            fontsize=5.5,
            zorder=4,
            color="black" if known else "grey",
            bbox={"boxstyle": "square,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.8},
        )
    ax.set_title(title, fontsize=10)
    ax.set_xlim(-0.02, 1.02)
    ymax = max((y for _, y in pos.values()), default=0)
    ax.set_ylim(-0.8, ymax + 0.6)
    ax.axis("off")


# Offsets (points) a node's label may take, nearest first: below, above, then further out.
LABEL_TIERS = (-7.0, 7.0, -15.0, 15.0, -23.0, 23.0)


def _place(label: Any, offset: float) -> None:
    label.xyann = (0, offset)
    label.set_va("top" if offset < 0 else "bottom")


def _declutter(ax: Any, labels: Sequence[Any]) -> None:
    """Give every node label a place where it overlaps no other label.

    Greedy, left to right within each row of the layout: the first tier (below, above,
    further out) where the label's drawn box meets no label placed before; a label that fits
    nowhere is broken at its hyphens onto lines and tried again.
    """
    renderer = ax.figure.canvas.get_renderer()
    placed: list[Any] = []
    for label in sorted(labels, key=lambda a: (a.xy[1], a.xy[0])):
        for text in (label.get_text(), label.get_text().replace("-", "-\n")):
            label.set_text(text)
            for offset in LABEL_TIERS:
                _place(label, offset)
                box = label.get_window_extent(renderer)
                if not any(box.overlaps(other) for other in placed):
                    break
            else:
                continue
            break
        placed.append(label.get_window_extent(renderer))


def graph_plot(
    world: World,
    before: Sequence[EdgeFact],
    after: Sequence[EdgeFact],
    path: Path,
    *,
    threshold: float = 0.6,
) -> Path:
    """Before and after, coloured by provenance; then the prerequisite claims vs the truth."""
    # Laid out already: the labels were placed for this layout.
    return _save(graph_figure(world, before, after, threshold=threshold), path, tight=False)


def graph_figure(
    world: World,
    before: Sequence[EdgeFact],
    after: Sequence[EdgeFact],
    *,
    threshold: float = 0.6,
) -> Any:
    """The figure graph_plot saves (three panels; node labels placed so none overlap)."""
    extra = sorted(
        {s for f in [*before, *after] for s in (f.source, f.target)} - set(world.concepts)
    )
    pos = _layout(world, extra)
    fig, axes = plt.subplots(1, 3, figsize=(21, 7.5))

    def by_provenance(f: EdgeFact) -> str:
        return PROVENANCE_COLOURS.get(f.source_type, OTHER_COLOUR)

    _draw_graph(axes[0], world, before, pos, by_provenance, f"before: {len(before)} edges")
    _draw_graph(axes[1], world, after, pos, by_provenance, f"after: {len(after)} edges")
    claims = [f for f in after if f.edge_type == "prerequisite" and f.confidence >= threshold]
    claimed = {(f.source, f.target) for f in claims}
    missed = [
        EdgeFact(s, t, "prerequisite", "missed", 0.3)
        for s, t in sorted(world.prerequisites)
        if (s, t) not in claimed
    ]

    def by_truth(f: EdgeFact) -> str:
        if f.source_type == "missed":
            return "#BBBBBB"
        return "#55A868" if (f.source, f.target) in world.prerequisites else "#C44E52"

    _draw_graph(
        axes[2],
        world,
        [*missed, *claims],
        pos,
        by_truth,
        f"prerequisite edges >= {threshold} after, against the hidden truth",
    )
    handles = [Line2D([], [], color=c, lw=2, label=k) for k, c in PROVENANCE_COLOURS.items()]
    handles += [Line2D([], [], color="black", ls=s, lw=1, label=k) for k, s in TYPE_STYLES.items()]
    axes[1].legend(handles=handles, fontsize=7, loc="upper right", ncol=2)
    axes[2].legend(
        handles=[
            Line2D([], [], color="#55A868", lw=2, label="true claim"),
            Line2D([], [], color="#C44E52", lw=2, label="false claim"),
            Line2D([], [], color="#BBBBBB", lw=2, label="true, not claimed"),
        ],
        fontsize=7,
        loc="upper right",
    )
    fig.tight_layout()
    for ax in axes:
        _declutter(ax, [t for t in ax.texts if hasattr(t, "xyann")])
    return fig
