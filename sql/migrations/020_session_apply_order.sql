-- Why: session-end processing needs two things the foundation's ledger lacks.
-- 1. The order in which sessions were applied. Each session is applied in one transaction
--    and takes its sequence number as its last statement, so for any two sessions that
--    touched the same row the numbers follow their commit order: replaying sessions by
--    `applied_seq` rebuilds the memory exactly, and "what did the memory believe after
--    session N" is the history up to that number.
-- 2. A terminal state for a session that passed the contract at ingest but cannot be
--    applied (a constraint the contract does not know about): it becomes `rejected`, with
--    the reason, and is copied to the quarantine; it is never half-applied.

ALTER TABLE hag_sessions ADD COLUMN applied_seq bigint;
ALTER TABLE hag_sessions ADD COLUMN reject_reason text;

CREATE SEQUENCE hag_session_apply_seq OWNED BY hag_sessions.applied_seq;

CREATE UNIQUE INDEX hag_sessions_applied_seq_uniq ON hag_sessions (applied_seq);

ALTER TABLE hag_sessions DROP CONSTRAINT hag_sessions_status_check;
ALTER TABLE hag_sessions ADD CONSTRAINT hag_sessions_status_check
    CHECK (status IN ('pending', 'processed', 'rejected'));
