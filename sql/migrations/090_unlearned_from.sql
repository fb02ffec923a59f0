-- Why: negative evidence on an authored (or enriched) prerequisite (issue 14's evidence
-- profile) lowered the edge once and never raised it again: its confidence was the only place
-- the authored value lived, so a true prerequisite that a concept's early reports happened not
-- to name stayed lowered after later reports named it (docs/learning-report.md, second round).
-- `unlearned_from` keeps the confidence the edge held before negative evidence lowered it
-- (NULL when it is not lowered), so the rule can read the current counts at every re-weigh and
-- give the value back once the edge is supported again (the dial prerequisite_unlearn_undo).
--
-- The audit keeps every column of a deleted edge, so it gains the column too, and the
-- audit trigger copies it (a restore puts it back with the rest of the row).
--
-- An existing memory is carried over: an edge whose latest confidence changes were lowerings
-- by the evidence rule (history reason 'prerequisite evidence (lift)', nothing else since)
-- gets the confidence it held before the first of them.
ALTER TABLE hag_edges
    ADD COLUMN unlearned_from double precision
        CHECK (unlearned_from IS NULL OR (unlearned_from > 0 AND unlearned_from <= 1));

ALTER TABLE hag_edge_audit ADD COLUMN unlearned_from double precision;

CREATE OR REPLACE FUNCTION hag_audit_deleted_edges() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO hag_edge_audit (
        run_id, reason, rule_values, deleted_at,
        edge_id, source_entry_id, target_entry_id, edge_type, condition, confidence,
        hit_count, source_type, source_session_id, traversal_count, last_traversed_at,
        created_at, updated_at, unlearned_from)
    SELECT NULLIF(current_setting('hag.run_id', true), '')::uuid,
           COALESCE(NULLIF(current_setting('hag.delete_reason', true), ''), 'manual delete'),
           COALESCE(NULLIF(current_setting('hag.rule_values', true), ''), '{}')::jsonb,
           COALESCE(NULLIF(current_setting('hag.deleted_at', true), '')::timestamptz, now()),
           o.id, o.source_entry_id, o.target_entry_id, o.edge_type, o.condition, o.confidence,
           o.hit_count, o.source_type, o.source_session_id, o.traversal_count,
           o.last_traversed_at, o.created_at, o.updated_at, o.unlearned_from
    FROM old_edges o;
    RETURN NULL;
END
$$;

UPDATE hag_edges AS e
SET unlearned_from = first_lowering.old_value
FROM (
    SELECT DISTINCT ON (h.entity_id) h.entity_id, h.old_value
    FROM hag_confidence_history h
    WHERE h.entity_kind = 'edge'
      AND h.reason = 'prerequisite evidence (lift)'
      AND h.new_value < h.old_value
      AND NOT EXISTS (
          SELECT 1 FROM hag_confidence_history later
          WHERE later.entity_kind = 'edge' AND later.entity_id = h.entity_id
            AND (later.at, later.history_id) > (h.at, h.history_id)
            AND later.reason <> 'prerequisite evidence (lift)')
    ORDER BY h.entity_id, h.at, h.history_id
) AS first_lowering
WHERE e.id = first_lowering.entity_id
  AND e.edge_type = 'prerequisite'
  AND e.source_type <> 'learned'
  AND e.confidence < first_lowering.old_value;
