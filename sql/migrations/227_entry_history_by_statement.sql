-- Why: an entry's confidence history row was written by a row trigger (migration 003): one
-- PL/pgSQL call and one INSERT per changed entry. A nightly reprieve lifts every sunk entry
-- of a memory in one UPDATE. At 200,000 entries it lifted 102,563 in 4.3 s, 1.1 s of it in
-- that trigger (EXPLAIN ANALYZE; docs/journal/2026-12-06-evidence-read-linear.md).
--
-- The entry's history rows are now written by statement: one INSERT of every changed entry,
-- from the statement's transition tables. The search copy's statement triggers (migration
-- 080) already capture the same tables on every INSERT and UPDATE of hag_entries, so they
-- cost nothing more to capture. Each history row is the same as before:
--   * an inserted entry: its confidence, reason `hag.change_reason` or 'created';
--   * an updated entry whose confidence changed: old and new, reason `hag.change_reason`
--     or 'manual update';
--   * the session, run and moment from `hag.session_id`, `hag.run_id` and `hag.event_at`
--     (now() without it), read once per statement.
-- An UPDATE that leaves the confidence as it was writes nothing, as the row trigger's
-- `UPDATE OF confidence` with its equality check did. Edges keep their row trigger: their
-- updates capture no transition tables today, and a re-weigh adds the formula's terms to
-- the row a move just wrote (evidence.sql `record_history_terms`).
-- Bulk loaders that set session_replication_role = replica skip these triggers as they
-- skipped the row trigger.
CREATE FUNCTION hag_record_entry_confidence_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_reason  text := NULLIF(current_setting('hag.change_reason', true), '');
    v_session text := NULLIF(current_setting('hag.session_id', true), '');
    v_run     uuid := NULLIF(current_setting('hag.run_id', true), '')::uuid;
    v_at      timestamptz := COALESCE(NULLIF(current_setting('hag.event_at', true), '')::timestamptz,
                                      now());
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO hag_confidence_history
            (entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at)
        SELECT 'entry', n.id, NULL, n.confidence, COALESCE(v_reason, 'created'), v_session,
               v_run, v_at
        FROM new_rows n;
    ELSE
        INSERT INTO hag_confidence_history
            (entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at)
        SELECT 'entry', n.id, o.confidence, n.confidence, COALESCE(v_reason, 'manual update'),
               v_session, v_run, v_at
        FROM old_rows o
        JOIN new_rows n ON n.id = o.id
        WHERE o.confidence IS DISTINCT FROM n.confidence;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER hag_entries_confidence_history ON hag_entries;
CREATE TRIGGER hag_entries_confidence_history_insert AFTER INSERT ON hag_entries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_record_entry_confidence_changes();
CREATE TRIGGER hag_entries_confidence_history_update AFTER UPDATE ON hag_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_record_entry_confidence_changes();
