-- Why: an edge's confidence history row was written by a row trigger (migration 003), and a
-- re-weigh under the units rule then updated the rows its moves had just written to add the
-- formula's terms (`record_history_terms`): it found each edge's latest row by index and wrote
-- a second version of it. On the first night at 1M + 1M (evidence profile) that UPDATE took
-- 2.83 s and the UPDATE of the confidences 3.77 s (docs/journal/2026-12-06-edge-history-by-
-- statement.md).
--
-- The edges' history rows are now written by statement, as the entries' are (migration 227),
-- by one function for both tables (the entries' triggers move to it): one INSERT of every
-- changed row, from the statement's transition tables, with the rows the row trigger wrote:
--   * an inserted row: its confidence, reason `hag.change_reason` or 'created';
--   * an updated row whose confidence changed: old and new, reason `hag.change_reason` or
--     'manual update';
--   * the session, run and moment from `hag.session_id`, `hag.run_id` and `hag.event_at`
--     (now() without it), read once per statement.
-- An UPDATE that leaves the confidence as it was writes nothing.
-- A re-weigh hands its terms to the edges' trigger before its UPDATE, as one JSON object
-- keyed by edge id in `hag.edge_terms` (hag.evidence.store.set_edge_confidences); the trigger
-- writes each moved edge's terms on its row in the same INSERT and empties the setting, so
-- the terms go with the one statement they were given for and no later write of the
-- transaction takes them. An edge the object does not name gets no terms; entries get none.
-- Bulk loaders that set session_replication_role = replica skip these triggers as they
-- skipped the row trigger.
CREATE FUNCTION hag_record_confidence_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_kind    text := TG_ARGV[0];
    v_reason  text := NULLIF(current_setting('hag.change_reason', true), '');
    v_session text := NULLIF(current_setting('hag.session_id', true), '');
    v_run     uuid := NULLIF(current_setting('hag.run_id', true), '')::uuid;
    v_at      timestamptz := COALESCE(NULLIF(current_setting('hag.event_at', true), '')::timestamptz,
                                      now());
    v_terms   jsonb;
BEGIN
    IF v_kind = 'edge' THEN
        v_terms := NULLIF(current_setting('hag.edge_terms', true), '')::jsonb;
        IF v_terms IS NOT NULL THEN
            PERFORM set_config('hag.edge_terms', '', true);
        END IF;
    END IF;
    IF TG_OP = 'INSERT' THEN
        INSERT INTO hag_confidence_history
            (entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at, terms)
        SELECT v_kind, n.id, NULL, n.confidence, COALESCE(v_reason, 'created'), v_session,
               v_run, v_at, v_terms -> n.id::text
        FROM new_rows n;
    ELSE
        INSERT INTO hag_confidence_history
            (entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at, terms)
        SELECT v_kind, n.id, o.confidence, n.confidence, COALESCE(v_reason, 'manual update'),
               v_session, v_run, v_at, v_terms -> n.id::text
        FROM old_rows o
        JOIN new_rows n ON n.id = o.id
        WHERE o.confidence IS DISTINCT FROM n.confidence;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER hag_entries_confidence_history_insert ON hag_entries;
DROP TRIGGER hag_entries_confidence_history_update ON hag_entries;
DROP FUNCTION hag_record_entry_confidence_changes();
DROP TRIGGER hag_edges_confidence_history ON hag_edges;
DROP FUNCTION hag_record_confidence_change();
CREATE TRIGGER hag_entries_confidence_history_insert AFTER INSERT ON hag_entries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_record_confidence_changes('entry');
CREATE TRIGGER hag_entries_confidence_history_update AFTER UPDATE ON hag_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_record_confidence_changes('entry');
CREATE TRIGGER hag_edges_confidence_history_insert AFTER INSERT ON hag_edges
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_record_confidence_changes('edge');
CREATE TRIGGER hag_edges_confidence_history_update AFTER UPDATE ON hag_edges
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_record_confidence_changes('edge');
