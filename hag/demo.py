"""The end-to-end demo: what the README's first command runs."""

from __future__ import annotations

from typing import Any

import click

from hag import db
from hag.corpus import DEMO_CORPUS, load_file
from hag.embeddings import announce
from hag.sqlfiles import query


def graph_summary() -> dict[str, Any]:
    with db.connect() as conn:
        graphs = conn.execute(query("corpus", "graph_summary")).fetchall()
        topics = conn.execute(query("corpus", "topic_summary")).fetchall()
    return {"graphs": graphs, "topics": topics}


def print_summary(summary: dict[str, Any]) -> None:
    click.echo("\nThe three graphs (and the visual bucket):")
    for g in summary["graphs"]:
        click.echo(
            f"  {g['graph']:<8} {g['entries']:>5} entries  (proven {g['proven']}, pattern {g['pattern']}, "
            f"candidate {g['candidate']}, archived {g['archived']}) across {g['topics']} topic(s)"
        )
    click.echo("\nTopics:")
    for t in summary["topics"]:
        click.echo(
            f"  {t['topic_id']:<16} {t['entries']:>4} entries {t['edges']:>4} edges "
            f"(seed {t['seed_edges']}, learned {t['learned_edges']}, enriched {t['enriched_edges']}), "
            f"{t['orphans']} orphan(s)"
        )


def run_demo() -> dict[str, Any]:
    announce()
    click.echo(f"database: {db.database_url()}")
    report = load_file(DEMO_CORPUS)
    click.echo(
        f"demo corpus: {report.topics} topics, {report.concepts} concepts, {report.entries} entries, "
        f"{report.edges} edges new"
    )
    summary = graph_summary()
    print_summary(summary)
    return {"load": report.as_dict(), **summary}
