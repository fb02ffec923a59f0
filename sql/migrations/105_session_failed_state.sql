-- Why: a session that passed ingest can fail to apply for a reason that is not its payload
-- (the lock table full, a deadlock after its retries, a statement timeout, a function
-- missing on this server, a lost connection). Such a session used to end `rejected` and its
-- payload went to the quarantine, where nothing could bring it back: a valid session was
-- lost, and the run exited 0. It now ends `failed`, apart from a bad payload: with the
-- error's text and class and how many times it has failed, nothing of it applied, and
-- `hag process-sessions --retry-failed` puts it back to `pending`. Bad payloads keep
-- `rejected` and the quarantine.
ALTER TABLE hag_sessions ADD COLUMN fail_reason text;
ALTER TABLE hag_sessions ADD COLUMN fail_class text;
ALTER TABLE hag_sessions ADD COLUMN fail_count integer NOT NULL DEFAULT 0;

ALTER TABLE hag_sessions DROP CONSTRAINT hag_sessions_status_check;
ALTER TABLE hag_sessions ADD CONSTRAINT hag_sessions_status_check
    CHECK (status IN ('pending', 'processed', 'rejected', 'failed'));

CREATE INDEX hag_sessions_failed_idx ON hag_sessions (ended_at, session_id) WHERE status = 'failed';
