-- Why: (issue 29) re-weighing a prerequisite read every report ever made of its concept's
-- pairs (hag_edge_learner_reports, one row per edge and session), so its cost grew with the
-- memory's history. The evidence model needs, per pair, the units (each learner's sessions'
-- shares summed and capped at `prerequisite_learner_cap`), the distinct learners and the
-- sessions they cover, and per concept the distinct learners over its pairs. Three tables
-- keep them when reports are written, so a re-weigh reads one row per edge and counts one
-- row per learner of a concept, whatever the number of sessions:
--   hag_edge_learner_units: per (edge, learner), the shares summed (uncapped) and sessions;
--   hag_edge_units: per edge, the capped units at the cap they were summed with, the
--     learners and the sessions (a cap changed since is read back from the rows above);
--   hag_concept_learners: per (concept, learner), how many of the concept's pairs the
--     learner reported.
--
-- Statement triggers on the reports keep them in the statement that writes the reports: a
-- session's reports (INSERT ... ON CONFLICT DO NOTHING: a session applied again inserts no
-- report, so it adds nothing here either), a cull's cascade (DELETE), an erasure's
-- pseudonyms (UPDATE of learner_id) and a TRUNCATE. Existing reports are carried over (the
-- per-edge units with no cap: read back from the per-learner rows until a report moves them).
-- The tables are derived, so they carry no CHECKs: a count falls to 0 inside the trigger's
-- statement and its row is deleted by the next.
CREATE TABLE hag_edge_learner_units (
    edge_id         uuid             NOT NULL,
    learner_id      text             NOT NULL,
    source_entry_id uuid             NOT NULL,  -- the edge's concept (kept past its delete)
    share           double precision NOT NULL,  -- the learner's sessions' shares, summed
    sessions        integer          NOT NULL,
    PRIMARY KEY (edge_id, learner_id)
);

CREATE TABLE hag_edge_units (
    edge_id         uuid             PRIMARY KEY,
    source_entry_id uuid             NOT NULL,
    cap             double precision,           -- the cap `units` was summed with (NULL: none)
    units           double precision NOT NULL,  -- sum over learners of least(cap, share)
    learners        integer          NOT NULL,
    sessions        integer          NOT NULL
);

CREATE TABLE hag_concept_learners (
    source_entry_id uuid    NOT NULL,
    learner_id      text    NOT NULL,
    pairs           integer NOT NULL,
    PRIMARY KEY (source_entry_id, learner_id)
);

INSERT INTO hag_edge_learner_units (edge_id, learner_id, source_entry_id, share, sessions)
SELECT r.edge_id, r.learner_id, e.source_entry_id, sum(r.share), count(*)
FROM hag_edge_learner_reports r
JOIN hag_edges e ON e.id = r.edge_id
GROUP BY r.edge_id, r.learner_id, e.source_entry_id;

INSERT INTO hag_edge_units (edge_id, source_entry_id, cap, units, learners, sessions)
SELECT edge_id, source_entry_id, NULL, sum(share), count(*), sum(sessions)
FROM hag_edge_learner_units
GROUP BY edge_id, source_entry_id;

INSERT INTO hag_concept_learners (source_entry_id, learner_id, pairs)
SELECT source_entry_id, learner_id, count(*)
FROM hag_edge_learner_units
GROUP BY source_entry_id, learner_id;

-- One trigger function for every way reports change; each branch reads only the transition
-- tables its statement defines (PL/pgSQL plans a statement when it first runs it). Each
-- branch is one statement whose CTEs see the tables as they were before it, so the values
-- before a change are the values after it less the change.
CREATE FUNCTION hag_edge_units_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_cap double precision := hag_setting_float('prerequisite_learner_cap');
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_edge_learner_units, hag_edge_units, hag_concept_learners;
        RETURN NULL;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        WITH d AS (
            SELECT o.edge_id, o.learner_id, sum(o.share) AS ds, count(*)::int AS dn
            FROM removed_reports o GROUP BY o.edge_id, o.learner_id
        ), up AS (
            UPDATE hag_edge_learner_units u
            SET share = u.share - d.ds, sessions = u.sessions - d.dn
            FROM d
            WHERE u.edge_id = d.edge_id AND u.learner_id = d.learner_id
            RETURNING u.edge_id, u.learner_id, u.source_entry_id, u.share AS new_share,
                      u.sessions AS new_sessions, d.ds, d.dn
        ), per_edge AS (
            UPDATE hag_edge_units b
            SET units = CASE WHEN b.cap = v_cap THEN b.units
                             ELSE (SELECT COALESCE(sum(least(v_cap, x.share)), 0)
                                   FROM hag_edge_learner_units x WHERE x.edge_id = b.edge_id)
                        END + c.du,
                cap = v_cap, learners = b.learners - c.gone, sessions = b.sessions - c.dn
            FROM (SELECT up.edge_id,
                         sum(CASE WHEN up.new_sessions > 0 THEN least(v_cap, up.new_share)
                                  ELSE 0 END
                             - least(v_cap, up.new_share + up.ds)) AS du,
                         count(*) FILTER (WHERE up.new_sessions <= 0)::int AS gone,
                         sum(up.dn)::int AS dn
                  FROM up GROUP BY up.edge_id) c
            WHERE b.edge_id = c.edge_id
            RETURNING b.edge_id
        )
        UPDATE hag_concept_learners cl
        SET pairs = cl.pairs - c.n
        FROM (SELECT up.source_entry_id, up.learner_id, count(*)::int AS n
              FROM up WHERE up.new_sessions <= 0
              GROUP BY up.source_entry_id, up.learner_id) c
        WHERE cl.source_entry_id = c.source_entry_id AND cl.learner_id = c.learner_id;
        -- what fell to nothing goes (what would stay of a share is rounding residue)
        DELETE FROM hag_edge_learner_units u
        USING (SELECT DISTINCT o.edge_id, o.learner_id FROM removed_reports o) d
        WHERE u.edge_id = d.edge_id AND u.learner_id = d.learner_id AND u.sessions <= 0;
        DELETE FROM hag_edge_units b
        USING (SELECT DISTINCT o.edge_id FROM removed_reports o) d
        WHERE b.edge_id = d.edge_id AND b.sessions <= 0;
        DELETE FROM hag_concept_learners cl WHERE cl.pairs <= 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        WITH d AS (
            SELECT n.edge_id, n.learner_id, e.source_entry_id, sum(n.share) AS ds,
                   count(*)::int AS dn
            FROM added_reports n
            JOIN hag_edges e ON e.id = n.edge_id
            GROUP BY n.edge_id, n.learner_id, e.source_entry_id
        ), up AS (
            INSERT INTO hag_edge_learner_units AS u
                (edge_id, learner_id, source_entry_id, share, sessions)
            SELECT d.edge_id, d.learner_id, d.source_entry_id, d.ds, d.dn
            FROM d ORDER BY d.edge_id, d.learner_id
            ON CONFLICT (edge_id, learner_id) DO UPDATE
                SET share = u.share + EXCLUDED.share, sessions = u.sessions + EXCLUDED.sessions
            RETURNING u.edge_id, u.learner_id, u.source_entry_id, u.share, u.sessions
        ), ch AS (
            SELECT up.edge_id, up.learner_id, up.source_entry_id, up.share AS new_share,
                   up.share - d.ds AS old_share, up.sessions - d.dn AS old_sessions, d.dn
            FROM up JOIN d ON d.edge_id = up.edge_id AND d.learner_id = up.learner_id
        ), per_edge AS (
            INSERT INTO hag_edge_units AS b
                (edge_id, source_entry_id, cap, units, learners, sessions)
            SELECT c.edge_id, c.source_entry_id, v_cap,
                   sum(least(v_cap, c.new_share)
                       - CASE WHEN c.old_sessions > 0 THEN least(v_cap, c.old_share) ELSE 0 END),
                   count(*) FILTER (WHERE c.old_sessions = 0), sum(c.dn)
            FROM ch c
            GROUP BY c.edge_id, c.source_entry_id
            ORDER BY c.edge_id
            ON CONFLICT (edge_id) DO UPDATE
                SET units = CASE WHEN b.cap = EXCLUDED.cap THEN b.units
                                 ELSE (SELECT COALESCE(sum(least(EXCLUDED.cap, x.share)), 0)
                                       FROM hag_edge_learner_units x
                                       WHERE x.edge_id = b.edge_id)
                            END + EXCLUDED.units,
                    cap = EXCLUDED.cap,
                    learners = b.learners + EXCLUDED.learners,
                    sessions = b.sessions + EXCLUDED.sessions
            RETURNING b.edge_id
        )
        INSERT INTO hag_concept_learners AS cl (source_entry_id, learner_id, pairs)
        SELECT c.source_entry_id, c.learner_id, count(*)
        FROM ch c WHERE c.old_sessions = 0
        GROUP BY c.source_entry_id, c.learner_id
        ORDER BY c.source_entry_id, c.learner_id
        ON CONFLICT (source_entry_id, learner_id) DO UPDATE SET pairs = cl.pairs + EXCLUDED.pairs;
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
