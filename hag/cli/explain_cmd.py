"""`hag explain EDGE`: why a prerequisite, a leads_to or a fallback has its confidence,
term by term."""

from __future__ import annotations

from typing import Any

import click

from hag.cli._common import echo_json, json_option, ready


@click.command()
@click.argument("edge_id")
@json_option
def explain(edge_id: str, as_json: bool) -> None:
    """Why an edge has its confidence now: under the units rule, the terms of its formula.

    EDGE is an edge's id, whole, by a unique prefix, or by the ending the listings print. For a
    live prerequisite under the units rule (`prerequisite_confidence_rule = units`): the units
    and distinct learners that report it, its concept's units and learners, the chance and
    reverse evidence netted out, the prior of an authored edge, and the result, which is the
    confidence the re-weigh stores. For a learned leads_to or fallback under
    `edge_grading_rule = units`: its unprompted units and learners, the chance and reverse
    units, the prior of the walked prerequisite meaning the same step, the holds, and the
    result; for an authored or enriched one, its prior, the struggle units and learners on
    the concept its step says needs the other, the verdict, and the result. The result is
    the formula's value now; the stored confidence is its value at the edge's last re-weigh
    (a sequence edge's chance moves with every move in its topic). Otherwise the edge as it
    stands (`hag history EDGE` shows how it got there).
    """
    from hag import settings
    from hag.evidence.explain import edge_terms, reweigh_pending
    from hag.evidence.model import authored_verdict
    from hag.evidence.store import finite_terms
    from hag.storage import db
    from hag.storage.history import explain_edge

    ready()
    with db.connect() as conn:
        dials = settings.load(conn)
        key, edge, _ = explain_edge(conn, edge_id, 1)
        live = not edge["culled"]
        terms = edge_terms(conn, key, edge, dials)
        pending = reweigh_pending(conn, edge, terms)
    if as_json:
        shown = {k: v for k, v in edge.items() if k != "culled"} if live else {"edge_id": key}
        # JSON has no infinity (an authored reverse edge at 1.0 stands for infinite units):
        # null, as the history rows and the service print it
        shown_terms = None if terms is None else finite_terms(terms)
        echo_json({**shown, "exists": live, "terms": shown_terms, "reweigh_pending": pending})
        return
    if not live:
        click.echo(f"edge {key}: culled (`hag history` shows its events)")
        return
    click.echo(
        f"edge {key}: {edge['edge_type']} {edge['topic_id']}/{edge['source_concept']} -> "
        f"{edge['target_concept']} ({edge['source_type']}), confidence {edge['confidence']:.6f}"
    )
    t = terms
    if t is None:
        click.echo("no evidence terms: not an edge the units rule weighs by its formula")
        return
    if edge["edge_type"] != "prerequisite":
        _echo_sequence(t)
        return
    unattributed = t["unattributed"]
    click.echo(
        f"  reports: {t['units']:.4f} units from {t['learners']} learner(s)"
        + (
            f" (and {unattributed} session(s) no learner is recorded for: one learner when no"
            " other is, else none, as they may be a recorded learner's)"
            if unattributed
            else ""
        )
        + f"; its concept {t['concept_units']:.4f} units from {t['concept_learners']} learner(s)"
    )
    if pending:
        click.echo(
            "  its concept waits for the nightly's re-weigh: an edge its terms read moved where"
            " the writer could not lock it, or an edge of it was restored; the stored"
            " confidence may differ from the result below until then"
        )
    if t.get("withdrawn"):
        where = (
            "counted nowhere above"
            if t["source_type"] == "learned"
            else f"{t.get('withdrawn_units', 0.0):.4f} units, each learner's within the cap,"
            " in its units above: negative evidence still reads the extractor naming it"
        )
        click.echo(
            f"  withdrawn: {t['withdrawn']} report(s), recorded or not, whose learner next "
            f"succeeded on its concept before showing its target ({where})"
        )
    click.echo(
        f"  chance {t['chance']:.4f} (noise share {t['noise_share']:.4f}), reverse evidence "
        f"{t['reverse']:.4f}, k {t['k']:g}: net {t['net']:.4f}, lift net/(net+k) {t['lift']:.6f}"
    )
    if t["source_type"] == "learned":
        _echo_reverse(t, "reported")
        click.echo(
            f"  invented {t['invented']:.4f}: of {t['failed_sessions']} sessions failed on its "
            f"concept, {t['shown_sessions']} by learners who had shown its target, "
            f"{t['shown_named']} of those naming it anyway (net takes the larger of chance "
            "and invented)"
        )
        held = (
            "not held"
            if t["hold"] is None
            else f"held at {t['hold']:.6f} (fewer than {t['min_learners']} learners)"
        )
        click.echo(f"  {held}")
    else:
        click.echo(
            f"  prior {t['prior']:.6f}, support {t['support']:.4f} units: "
            f"{authored_verdict(t, dials)}"
        )
        if t["source_type"] == "enriched":  # an authored value moves by negative evidence alone
            _echo_confirmed(t)
    click.echo(f"  result {t['confidence']:.6f}")


def _echo_reverse(t: dict[str, Any], verb: str) -> None:
    """A learned edge's reverse edge's learners and whether its units count against it
    (`model.reverse_counts`); nothing without a reverse edge."""
    from hag.evidence.model import reverse_counts

    if not t.get("reverse_learners"):
        return
    counted = reverse_counts(t["reverse_learners"], t["min_learners"])
    click.echo(
        f"  the reverse edge is {verb} by {t['reverse_learners']} learner(s): its units count "
        f"against this one from {t['min_learners']} ({'counted' if counted else 'not counted'})"
    )


def _echo_confirmed(t: dict[str, Any]) -> None:
    """What an enriched prerequisite's recorded learners' reports give it, read as a learned
    edge's (`hag.evidence.model.confirmed_terms`)."""
    a = t.get("as_learned")
    if a is None:
        click.echo(
            f"  confirmed by fewer than {t['min_learners']} recorded learners: its reports "
            "raise nothing"
        )
        return
    given = "nothing" if t["raised"] is None else f"{t['raised']:.6f}"
    click.echo(
        f"  its recorded learners' reports read as a learned edge's: {a['units']:.4f} "
        f"units from {a['learners']} learner(s), chance {a['chance']:.4f}, invented "
        f"{a['invented']:.4f}, reverse {a['reverse']:.4f}: net {a['net']:.4f}, give {given}"
        + ("" if t["judged"] else " (it stands at the larger of that and its prior)")
    )


def _echo_sequence(t: dict[str, Any]) -> None:
    """A leads_to's or fallback's terms: a learned one's formula
    (`hag.evidence.sequences.SequenceTerms`), an authored or enriched one's judgement
    (`hag.evidence.sequences.AuthoredSequenceTerms`)."""
    if t["source_type"] != "learned":
        prerequisite = "none" if t["prerequisite"] is None else f"{t['prerequisite']:.4f}"
        verdict = (
            f"judged: it may hold {t['supported']:.6f} (the prerequisite meaning the same "
            "step, or the edge floor)"
            if t["judged"]
            else f"not judged (needs {t['min_reports']} units from {t['min_learners']} learners)"
        )
        click.echo(
            f"  prior {t['prior']:.6f}; struggles on the concept its step says needs the "
            f"other: {t['needing_units']:.4f} units from {t['needing_learners']} learner(s); "
            f"prerequisite meaning the same step {prerequisite}"
        )
        click.echo(f"  {verdict}")
        click.echo(f"  result {t['confidence']:.6f}")
        return
    click.echo(f"  unprompted moves: {t['units']:.4f} units from {t['learners']} learner(s)")
    prior = "none" if t["prior"] is None else f"{t['prior']:.4f}"
    click.echo(
        f"  chance {t['chance']:.4f}, reverse {t['reverse']:.4f}, prior {prior} (walked "
        f"prerequisite meaning the same step), k {t['k']:g}: net {t['net']:.4f}, "
        f"lift net/(net+k) {t['lift']:.6f}"
    )
    _echo_reverse(t, "made")
    holds = []
    if t["hold"] is not None:
        why = ": the walked prerequisite meaning the same step, no move of its own"
        holds.append(
            f"held at {t['hold']:.6f} (fewer than {t['min_learners']} learners"
            f"{why if t['prior'] else ''})"
        )
    if t["unsupported"] is not None:
        holds.append(f"held at {t['unsupported']:.6f} (no walked prerequisite: moves alone)")
    click.echo(f"  {'; '.join(holds) if holds else 'not held'}")
    click.echo(f"  result {t['confidence']:.6f}")
