-- Why: every change to an entry's or an edge's confidence must be answerable later ("why is
-- this edge at 0.45", "what did the memory believe after session N"). Row triggers write
-- the history in the same transaction as the change, so no code path can forget it; the
-- writer says why through transaction settings: hag.change_reason, hag.session_id,
-- hag.run_id and hag.event_at (the session's ended_at, so replays keep their own time).
-- Bulk loaders that must not pay for history (benchmarks) set session_replication_role.

CREATE FUNCTION hag_record_confidence_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.confidence IS NOT DISTINCT FROM NEW.confidence THEN
        RETURN NULL;
    END IF;
    INSERT INTO hag_confidence_history (entity_kind, entity_id, old_value, new_value, reason, session_id, run_id, at)
    VALUES (
        TG_ARGV[0],
        NEW.id,
        CASE WHEN TG_OP = 'UPDATE' THEN OLD.confidence END,
        NEW.confidence,
        COALESCE(NULLIF(current_setting('hag.change_reason', true), ''),
                 CASE WHEN TG_OP = 'INSERT' THEN 'created' ELSE 'manual update' END),
        NULLIF(current_setting('hag.session_id', true), ''),
        NULLIF(current_setting('hag.run_id', true), '')::uuid,
        COALESCE(NULLIF(current_setting('hag.event_at', true), '')::timestamptz, now())
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER hag_entries_confidence_history
    AFTER INSERT OR UPDATE OF confidence ON hag_entries
    FOR EACH ROW EXECUTE FUNCTION hag_record_confidence_change('entry');

CREATE TRIGGER hag_edges_confidence_history
    AFTER INSERT OR UPDATE OF confidence ON hag_edges
    FOR EACH ROW EXECUTE FUNCTION hag_record_confidence_change('edge');
