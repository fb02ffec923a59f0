-- The seed's deterministic edge walk (SPEC §3), defined once: hag_edge_walk holds its
-- filter and order for several entries at once; traverse_hag_edges (the seed's function)
-- and retrieval's edge_walk query (sql/queries/retrieval.sql) both read it.
--
-- hag_edge_walk: the outgoing edges of each entry of p_entry_ids at or above the walk floor
-- (edge_min_confidence), into targets that are not archived (and not candidates unless
-- edge_include_candidate_targets); ordered per entry as a teaching policy: prerequisite,
-- fallback, leads_to, related, supersedes, then confidence. Ties go to the target's concept and scope before the edge id
-- (ours; the seed leaves them open): ids are random, so an id tie-break would render
-- different lines when the same sessions are replayed on a fresh database. `rank` is the
-- entry's position in p_entry_ids, `walk_position` the edge's in its entry's walk (from 1).
-- The target's scope and topic come along, for a caller that limits the walk to what a
-- reader may see. A single SQL statement: the planner inlines it into its caller.
CREATE OR REPLACE FUNCTION hag_edge_walk(
    p_entry_ids                      uuid[],
    p_edge_min_confidence            double precision,
    p_edge_include_candidate_targets boolean
)
RETURNS TABLE (
    rank bigint, walk_position bigint, edge_id uuid, source_entry_id uuid,
    target_entry_id uuid, edge_type text, condition text, confidence double precision,
    source_type text, target_concept_slug text, target_maturity text,
    target_instruction text, target_visibility_scope text, target_topic_id text
)
LANGUAGE sql STABLE AS $$
    SELECT s.rank,
           row_number() OVER (
               PARTITION BY s.rank
               ORDER BY CASE e.edge_type
                            WHEN 'prerequisite' THEN 1 WHEN 'fallback' THEN 2
                            WHEN 'leads_to' THEN 3 WHEN 'related' THEN 4
                            WHEN 'supersedes' THEN 5
                        END,
                        e.confidence DESC,
                        he.concept_slug, he.visibility_scope, e.id),
           e.id, e.source_entry_id, e.target_entry_id, e.edge_type, e.condition, e.confidence,
           e.source_type, he.concept_slug, he.maturity, he.instruction, he.visibility_scope,
           he.topic_id
    FROM unnest(p_entry_ids) WITH ORDINALITY AS s (entry_id, rank)
    JOIN hag_edges e ON e.source_entry_id = s.entry_id
    JOIN hag_entries he ON he.id = e.target_entry_id
    WHERE e.confidence >= p_edge_min_confidence
      AND he.maturity <> 'archived'
      AND (p_edge_include_candidate_targets OR he.maturity <> 'candidate')
$$;

-- traverse_hag_edges: the seed's walk from one entry, in the walk's order; a NULL parameter
-- is read from its dial (edge_min_confidence, edge_include_candidate_targets).
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
    SELECT w.edge_id, w.source_entry_id, w.target_entry_id, w.edge_type, w.condition,
           w.confidence, w.source_type, w.target_concept_slug, w.target_maturity,
           w.target_instruction
    FROM hag_edge_walk(
             ARRAY[p_entry_id],
             COALESCE(p_min_confidence, hag_setting_float('edge_min_confidence')),
             COALESCE(p_include_candidates,
                      (hag_setting('edge_include_candidate_targets'))::boolean)) AS w
    ORDER BY w.walk_position
$$;
