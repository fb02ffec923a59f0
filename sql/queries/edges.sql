-- name: upsert_edges
-- THE edge write (SPEC §4, seed): every learned, enriched or discovered edge goes through
-- this one set-based statement. A new edge enters at the new-edge confidence and hit count
-- with its provenance; an edge seen again gets hit_count + 1 and its confidence raised to
-- the reinforcement floor for the new hit count (high at or past edge_reinforce_min_hits, else low) and
-- never lowered. The caller passes each edge once per session (hit_count counts sessions).
-- Row locks taken here are held to commit, so concurrent sessions never lose an increment.
INSERT INTO hag_edges AS e (
    source_entry_id, target_entry_id, edge_type, condition, confidence, hit_count,
    source_type, source_session_id, created_at, updated_at)
SELECT o.source_entry_id, o.target_entry_id, o.edge_type, o.condition,
       %(new_confidence)s, %(edge_new_hit_count)s, %(source_type)s, %(session_id)s, %(at)s, %(at)s
FROM unnest(%(source_ids)s::uuid[], %(target_ids)s::uuid[], %(edge_types)s::text[], %(conditions)s::text[])
     AS o (source_entry_id, target_entry_id, edge_type, condition)
ORDER BY o.source_entry_id, o.target_entry_id, o.edge_type  -- a fixed lock order: fewer deadlocks
ON CONFLICT ON CONSTRAINT hag_edges_identity DO UPDATE SET
    hit_count  = e.hit_count + 1,
    confidence = GREATEST(e.confidence,
                          CASE WHEN e.hit_count + 1 >= %(edge_reinforce_min_hits)s THEN %(edge_reinforce_confidence_high)s
                               ELSE %(edge_reinforce_confidence_low)s END),
    condition  = COALESCE(e.condition, EXCLUDED.condition),
    updated_at = GREATEST(e.updated_at, EXCLUDED.updated_at)
RETURNING e.id, e.source_entry_id, e.target_entry_id, e.edge_type, e.confidence, e.hit_count,
          (e.xmax = 0) AS inserted
