-- Why: a learner (or a parent, or a school) may ask what the memory holds about them, ask for
-- it to be erased, and expects raw transcripts to be kept only as long as they are needed
-- (issue 25, docs/privacy.md). This migration adds what the erasure and the retention sweep
-- need; the work itself is hag/operations/privacy.py.
--
-- hag_erasures: one row per erasure, the audit of it: when, by whom, a salted hash of the
-- learner id and the rows removed or pseudonymised per table, never the data itself. The
-- salt is a per-database secret kept in hag_meta (`erasure_salt`), so the hash answers "was
-- this learner erased here?" for someone who holds the database, and cannot be reversed by
-- hashing a list of names without it.
CREATE TABLE hag_erasures (
    erasure_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    erased_at     timestamptz NOT NULL DEFAULT now(),
    erased_by     text        NOT NULL CHECK (length(btrim(erased_by)) > 0),
    learner_hash  text        NOT NULL CHECK (learner_hash ~ '^[0-9a-f]{64}$'),
    counts        jsonb       NOT NULL
);

-- 256 bits from the server's strong random source (gen_random_uuid: 122 bits each).
INSERT INTO hag_meta (key, value)
VALUES ('erasure_salt',
        encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text
                                 || gen_random_uuid()::text, 'UTF8')), 'hex'))
ON CONFLICT (key) DO NOTHING;

-- What the shared graph learned from a learner stays after the erasure, under a random
-- pseudonym: the learner's successes feed the evidence model's "had they already shown the
-- target" split (hag_edge_reporters), so they outlive the learner's session rows. The
-- foreign key to hag_sessions would delete them with the sessions.
ALTER TABLE hag_learner_successes DROP CONSTRAINT hag_learner_successes_session_id_fkey;

-- The erasure and the export find a learner's rows by learner id.
CREATE INDEX hag_sessions_learner_idx ON hag_sessions (learner_id);
CREATE INDEX hag_edge_learner_reports_by_learner_idx ON hag_edge_learner_reports (learner_id);
CREATE INDEX hag_learner_successes_by_learner_idx ON hag_learner_successes (learner_id);
CREATE INDEX hag_edges_source_session_idx ON hag_edges (source_session_id)
    WHERE source_session_id IS NOT NULL;

-- Retention (dials message_retention_days, quarantine_retention_days): the nightly strips the
-- student's words from processed payloads and the raw bytes from the quarantine, and stamps
-- the row. A stripped payload no longer says what the session said (a struggle without its
-- quoted evidence proposes no prerequisite), so applying it again would half-apply it: a
-- stripped session never returns to the queue.
ALTER TABLE hag_sessions ADD COLUMN stripped_at timestamptz;
ALTER TABLE hag_session_quarantine ADD COLUMN stripped_at timestamptz;

CREATE FUNCTION hag_refuse_stripped_replay() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.stripped_at IS NOT NULL AND NEW.status = 'pending' THEN
        RAISE EXCEPTION 'session % cannot be replayed: its student messages were stripped by the retention sweep on % (message_retention_days)',
            OLD.session_id, OLD.stripped_at::date
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER hag_sessions_refuse_stripped_replay
    BEFORE UPDATE OF status ON hag_sessions
    FOR EACH ROW WHEN (OLD.stripped_at IS NOT NULL)
    EXECUTE FUNCTION hag_refuse_stripped_replay();

