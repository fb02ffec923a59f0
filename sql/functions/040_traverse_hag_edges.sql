-- traverse_hag_edges: the deterministic edge walk from one entry (SPEC §3, seed), the only
-- definition of the walk: retrieval's edge_walk query (sql/queries/retrieval.sql) calls it
-- for each walked entry. Outgoing edges at or above the walk floor, into targets that are
-- not archived (and not candidates unless p_include_candidates); ordered as a teaching
-- policy: prerequisite, fallback, leads_to, related, supersedes, then confidence. Ties go
-- to the target's concept and scope before the edge id (ours; the seed leaves them open):
-- ids are random, so an id tie-break would render different lines when the same sessions
-- are replayed on a fresh database. Rows come back in that order.
CREATE OR REPLACE FUNCTION traverse_hag_edges(
    p_entry_id           uuid,
    p_min_confidence     double precision DEFAULT NULL,
    p_include_candidates boolean DEFAULT NULL
)
RETURNS TABLE (
    edge_id uuid, source_entry_id uuid, target_entry_id uuid, edge_type text,
    condition text, confidence double precision, source_type text,
    target_concept_slug text, target_maturity text, target_instruction text
)
LANGUAGE sql STABLE AS $$
    SELECT e.id, e.source_entry_id, e.target_entry_id, e.edge_type, e.condition, e.confidence,
           e.source_type, he.concept_slug, he.maturity, he.instruction
    FROM hag_edges e
    JOIN hag_entries he ON he.id = e.target_entry_id
    WHERE e.source_entry_id = p_entry_id
      AND e.confidence >= COALESCE(p_min_confidence, hag_setting_float('edge_min_confidence'))
      AND he.maturity <> 'archived'
      AND (COALESCE(p_include_candidates, (hag_setting('edge_include_candidate_targets'))::boolean)
           OR he.maturity <> 'candidate')
    ORDER BY CASE e.edge_type
                 WHEN 'prerequisite' THEN 1 WHEN 'fallback' THEN 2 WHEN 'leads_to' THEN 3
                 WHEN 'related' THEN 4 WHEN 'supersedes' THEN 5
             END,
             e.confidence DESC,
             he.concept_slug, he.visibility_scope, e.id
$$;
