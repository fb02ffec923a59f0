"""The terms of an edge's confidence under the units rule, read now (`hag explain`).

The re-weigh (`hag.evidence.reweigh`) reads the evidence around a concept
(`store.prerequisite_evidence`) and stores `model.unit_terms(...).confidence`; this reads the
same facts for one edge's source concept and returns the same terms, so what `hag explain`
prints is what the re-weigh computes from the memory as it stands now. A learned `leads_to`
or `fallback` under `edge_grading_rule = units` gets the sequence formula's terms the same
way (`store.sequence_evidence`, `sequences.edge_terms`), an authored or enriched one the terms
of its judgement; each re-weigh writes the same dict onto the history row of each edge it
moves.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from uuid import UUID

from hag.evidence import model, sequences, store
from hag.evidence.sequences import SequenceEvidence
from hag.settings import Settings
from hag.storage.db import Conn


def evidence_terms(
    conn: Conn, edge_id: UUID, source_entry_id: UUID, dials: Settings
) -> dict[str, Any] | None:
    """The units rule's terms for a live prerequisite, as a dict (`model.EvidenceTerms`);
    None when the edge is no prerequisite the units rule weighs (another type, culled, or
    another rule selected)."""
    if not model.units_selected(dials):
        return None
    for fact in store.prerequisite_evidence(conn, [source_entry_id], dials):
        if fact.edge_id == edge_id:
            return asdict(model.unit_terms(fact, dials))
    return None


def sequence_terms(fact: SequenceEvidence, dials: Settings) -> dict[str, Any]:
    """A sequence edge's terms as a dict: a learned one's `sequences.SequenceTerms` (units,
    learners, chance, reverse, prior, hold, the hold of moves without a walked prerequisite,
    result), an authored or enriched one's `sequences.AuthoredSequenceTerms` (its prior, the
    struggles that judge it, result)."""
    return asdict(sequences.edge_terms(fact, dials))


def edge_sequence_terms(
    conn: Conn, edge_id: UUID, source_entry_id: UUID, dials: Settings
) -> dict[str, Any] | None:
    """`sequence_terms` for a live sequence edge read now; None when the units rule is not
    selected for sequence edges."""
    if not sequences.units_selected(dials):
        return None
    for fact in store.sequence_evidence(conn, [source_entry_id], [], dials):
        if fact.edge_id == edge_id:
            return sequence_terms(fact, dials)
    return None


def edge_terms(
    conn: Conn, edge_id: UUID, edge: dict[str, Any], dials: Settings
) -> dict[str, Any] | None:
    """The terms of an edge as `storage.history.explain_edge` found it (the CLI's, the
    API's and the service's `terms`): a prerequisite's `evidence_terms`, a leads_to's or
    fallback's `edge_sequence_terms`; None once culled or for any other edge."""
    if edge["culled"]:
        return None
    if edge["edge_type"] == "prerequisite":
        return evidence_terms(conn, edge_id, edge["source_entry_id"], dials)
    if edge["edge_type"] in sequences.SEQUENCE_TYPES:
        return edge_sequence_terms(conn, edge_id, edge["source_entry_id"], dials)
    return None


def reweigh_pending(conn: Conn, edge: dict[str, Any], terms: dict[str, Any] | None) -> bool:
    """Whether a live prerequisite's concept waits for the nightly's re-weigh (migration 224):
    until then its stored confidence may differ from its terms' result."""
    if terms is None or edge["culled"] or edge["edge_type"] != "prerequisite":
        return False
    return store.reweigh_pending(conn, edge["source_entry_id"])
