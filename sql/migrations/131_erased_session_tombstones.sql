-- Why: after an erasure the learner's sessions are gone, but what they taught the shared graph
-- stays (docs/privacy.md). If the tutor sent one of those payloads again, ingest would see a
-- new session id and apply it a second time: its reports and successes would count twice,
-- and the erased learner's private patterns would come back. An erasure therefore leaves a
-- tombstone per erased session: a salted SHA-256 of the session id (the erasure salt of
-- migration 130, so a list of guessed ids does not find them), and ingest's insert of a
-- session whose id has one is refused with the reason (the payload is quarantined, as any
-- refused payload is, under quarantine_retention_days).
CREATE TABLE hag_erased_sessions (
    session_hash  text   PRIMARY KEY CHECK (session_hash ~ '^[0-9a-f]{64}$'),
    erasure_id    bigint NOT NULL REFERENCES hag_erasures (erasure_id)
);

CREATE FUNCTION hag_erased_session_hash(p_session_id text) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT encode(sha256(decode(m.value, 'hex') || convert_to(p_session_id, 'UTF8')), 'hex')
    FROM hag_meta m WHERE m.key = 'erasure_salt'
$$;

CREATE FUNCTION hag_refuse_erased_session() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    erased timestamptz;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM hag_erased_sessions) THEN
        RETURN NEW;  -- nothing was ever erased: no hash to compute
    END IF;
    SELECT e.erased_at INTO erased
    FROM hag_erased_sessions t JOIN hag_erasures e USING (erasure_id)
    WHERE t.session_hash = hag_erased_session_hash(NEW.session_id);
    IF FOUND THEN
        RAISE EXCEPTION 'session % was erased on % with its learner: it is not taken again',
            NEW.session_id, erased::date
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER hag_sessions_refuse_erased
    BEFORE INSERT ON hag_sessions
    FOR EACH ROW EXECUTE FUNCTION hag_refuse_erased_session();
