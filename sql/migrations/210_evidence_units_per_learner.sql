-- Why: (issue 29) re-weighing a prerequisite read every report ever made of its concept's
-- pairs (hag_edge_learner_reports, one row per edge and session), so its cost grew with the
-- memory's history. The evidence model needs only each learner's total per pair (the sum of
-- its sessions' shares, capped when read) and how many sessions that total covers: this
-- table keeps them, one row per (edge, learner), and hag_edge_evidence and the evidence
-- query read it instead of the reports. The cost of a re-weigh then grows with the learners
-- who reported on a concept, not with the sessions they had.
--
-- The rows are kept by statement triggers on the reports, in the statement that writes them:
-- a session's reports (INSERT ... ON CONFLICT DO NOTHING: a session applied again inserts no
-- report, so it adds nothing here either), a cull's cascade (DELETE), an erasure's
-- pseudonyms (UPDATE of learner_id) and a TRUNCATE. Existing reports are carried over.
CREATE TABLE hag_edge_learner_units (
    edge_id    uuid             NOT NULL,
    learner_id text             NOT NULL,
    share      double precision NOT NULL,  -- the learner's sessions' shares, summed (uncapped)
    sessions   integer          NOT NULL CHECK (sessions >= 1),
    PRIMARY KEY (edge_id, learner_id)
);

INSERT INTO hag_edge_learner_units (edge_id, learner_id, share, sessions)
SELECT edge_id, learner_id, sum(share), count(*)
FROM hag_edge_learner_reports
GROUP BY edge_id, learner_id;

-- One trigger function for every way reports change; each branch reads only the transition
-- tables its statement defines (PL/pgSQL plans a statement when it first runs it).
CREATE FUNCTION hag_edge_units_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_edge_learner_units;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        -- a total whose last session leaves is deleted (what would stay is rounding residue)
        DELETE FROM hag_edge_learner_units u
        USING (SELECT o.edge_id, o.learner_id, count(*) AS n
               FROM removed_reports o GROUP BY o.edge_id, o.learner_id) d
        WHERE u.edge_id = d.edge_id AND u.learner_id = d.learner_id AND u.sessions <= d.n;
        UPDATE hag_edge_learner_units u
        SET share = u.share - d.share, sessions = u.sessions - d.n
        FROM (SELECT o.edge_id, o.learner_id, sum(o.share) AS share, count(*) AS n
              FROM removed_reports o GROUP BY o.edge_id, o.learner_id) d
        WHERE u.edge_id = d.edge_id AND u.learner_id = d.learner_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO hag_edge_learner_units AS u (edge_id, learner_id, share, sessions)
        SELECT n.edge_id, n.learner_id, sum(n.share), count(*)
        FROM added_reports n
        GROUP BY n.edge_id, n.learner_id
        ORDER BY n.edge_id, n.learner_id
        ON CONFLICT (edge_id, learner_id) DO UPDATE
            SET share = u.share + EXCLUDED.share, sessions = u.sessions + EXCLUDED.sessions;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER hag_edge_reports_units_add
    AFTER INSERT ON hag_edge_learner_reports
    REFERENCING NEW TABLE AS added_reports
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_units_keep();
CREATE TRIGGER hag_edge_reports_units_remove
    AFTER DELETE ON hag_edge_learner_reports
    REFERENCING OLD TABLE AS removed_reports
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_units_keep();
CREATE TRIGGER hag_edge_reports_units_move
    AFTER UPDATE ON hag_edge_learner_reports
    REFERENCING OLD TABLE AS removed_reports NEW TABLE AS added_reports
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_units_keep();
CREATE TRIGGER hag_edge_reports_units_clear
    AFTER TRUNCATE ON hag_edge_learner_reports
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_units_keep();
