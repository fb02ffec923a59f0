"""The terms of a prerequisite's confidence under the units rule, read now (`hag explain`).

The re-weigh (`hag.evidence.reweigh`) reads the evidence around a concept
(`store.prerequisite_evidence`) and stores `model.unit_terms(...).confidence`; this reads the
same facts for one edge's source concept and returns the same terms, so what `hag explain`
prints is what the re-weigh computes from the memory as it stands now.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any
from uuid import UUID

from hag.evidence import model, store
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


def edge_terms(
    conn: Conn, edge_id: UUID, edge: dict[str, Any], dials: Settings
) -> dict[str, Any] | None:
    """`evidence_terms` for an edge as `storage.history.explain_edge` found it: None once
    culled or when it is not a prerequisite (the API's and the service's `terms`)."""
    if edge["culled"] or edge["edge_type"] != "prerequisite":
        return None
    return evidence_terms(conn, edge_id, edge["source_entry_id"], dials)
