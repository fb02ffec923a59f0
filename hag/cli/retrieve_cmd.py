"""`hag retrieve`: what the tutor's memory would put into the prompt for one turn."""

from __future__ import annotations

import click

from hag.cli._common import echo_json, json_option, note, ready


@click.command()
@click.option("--topic", "topic_id", required=True, help="Topic id (slug), e.g. cryptography.")
@click.option("--learner", "learner_id", required=True, help="Learner id: whose patterns to read.")
@click.option("--message", required=True, help="The student's message this turn.")
@click.option("--level", default=None, help="Proficiency level for the query context.")
@click.option("--focus", default=None, help="Current focus for the query context.")
@click.option(
    "--recent",
    multiple=True,
    metavar="SLUGS",
    help="Concept slugs of one recent turn, comma-separated; repeat per turn, oldest first.",
)
@click.option(
    "--expected",
    multiple=True,
    metavar="SLUG",
    help="An expected concept slug (earns the concept-match bonus); repeatable.",
)
@json_option
def retrieve(
    topic_id: str,
    learner_id: str,
    message: str,
    level: str | None,
    focus: str | None,
    recent: tuple[str, ...],
    expected: tuple[str, ...],
    as_json: bool,
) -> None:
    """Print the rendered memory blocks for one turn (--json: the whole result)."""
    ready()
    from hag.retrieval import retrieve as run_retrieval
    from hag.storage import db
    from hag.vectors.embeddings import announce

    announce()
    turns = [[s.strip() for s in item.split(",") if s.strip()] for item in recent]
    try:
        result = run_retrieval(
            topic_id,
            learner_id,
            message,
            level=level,
            focus=focus,
            recent_concepts=turns,
            expected_concepts=expected,
        )
    finally:
        db.close_read_pool()
    if result.degraded:
        note(f"hag: {result.degraded} (answered from the concept pass and the edge walk only)")
    if as_json:
        echo_json(result.as_dict())
        return
    click.echo(result.text, nl=False)
    paths = ", ".join(f"{p.name} {p.path} {p.rows} rows {p.milliseconds} ms" for p in result.passes)
    note(f"passes: {paths}")
