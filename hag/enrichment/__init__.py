"""LLM enrichment of orphan concepts (SPEC §6): proposals, validation, ledgers, backfills.

An orphan is a topic-scope entry with no edge in or out (drift residue such as
`buffer-overflow` in Cryptography); `_unanchored_` rows never are. A proposer (a model
through the `openai` client, or the offline default) proposes typed edges to a bounded
list of similar concepts of the same topic; every proposal is validated before anything
is written, and accepted ones enter through `hag.storage.edges.upsert_edges` as `enriched` edges
at the `enrichment_confidence` dial. See docs/enrichment.md.
"""

from hag.enrichment.run import Call, EnrichmentSummary, OrphanResult, enrich

__all__ = ["Call", "EnrichmentSummary", "OrphanResult", "enrich"]
