-- Why: (issue 29) a cull of edges with learner reports (the usual case: a learned edge is
-- culled with the reports of the learners who named it) took time quadratic in the edges it
-- culled. The trigger that keeps the evidence sums ended a delete of reports with
-- `DELETE FROM hag_edge_units b USING (the removed edges) d WHERE b.edge_id = d.edge_id AND
-- b.sessions <= 0`, and the statistics of hag_edge_units (where no row has 0 sessions but
-- inside this statement) made the planner drive a nested loop from that filter, rescanning
-- the removed edges once per fallen row: 12.5M comparisons for 5,000 culled edges, 22 s to
-- cull 20,000 edges of 3 reports each where the same cull without reports takes 0.1 s
-- (docs/journal/2026-12-05-culled-reports-kept.md). The bench's culled edges carried no
-- reports, so its figures never saw it. The (concept, learner) rows that fell were found by
-- a join the planner drove the same way (the removed reports against every learner's row
-- at 0). The removed edges are now one array the primary keys are probed with, and the
-- fallen (concept, learner) keys two more, so each statement reads the rows it touches
-- whatever the statistics say. The sums are unchanged.
CREATE OR REPLACE FUNCTION hag_edge_units_keep() RETURNS trigger
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
            RETURNING u.edge_id, u.learner_id, u.source_entry_id, u.prerequisite,
                      u.share AS new_share, u.sessions AS new_sessions, d.ds, d.dn
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
              FROM up WHERE up.new_sessions <= 0 AND up.prerequisite
              GROUP BY up.source_entry_id, up.learner_id) c
        WHERE cl.source_entry_id = c.source_entry_id AND cl.learner_id = c.learner_id;
        -- the (concept, learner) rows that fell to nothing go: only those the removed reports
        -- touched, read in a statement of its own so that a writer that changed the same row
        -- meanwhile is seen (its lock waited for, its value read again)
        -- (the fallen (edge, learner) rows found by the removed edges' keys, their
        -- (concept, learner) keys gathered into two arrays, and those rows probed by key)
        WITH fallen AS (
            SELECT array_agg(source_entry_id) AS concepts, array_agg(learner_id) AS learners
            FROM (SELECT DISTINCT u.source_entry_id, u.learner_id
                  FROM hag_edge_learner_units u
                  WHERE u.edge_id = ANY (ARRAY(SELECT DISTINCT o.edge_id
                                               FROM removed_reports o))
                    AND u.sessions <= 0 AND u.prerequisite) k
        )
        DELETE FROM hag_concept_learners cl
        USING unnest((SELECT concepts FROM fallen), (SELECT learners FROM fallen))
              AS g (source_entry_id, learner_id)
        WHERE cl.source_entry_id = g.source_entry_id AND cl.learner_id = g.learner_id
          AND cl.pairs <= 0;
        -- what fell to nothing goes (what would stay of a share is rounding residue)
        DELETE FROM hag_edge_learner_units u
        WHERE u.edge_id = ANY (ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o))
          AND u.sessions <= 0;
        DELETE FROM hag_edge_units b
        WHERE b.edge_id = ANY (ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o))
          AND b.sessions <= 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        WITH d AS (
            SELECT n.edge_id, n.learner_id, e.source_entry_id,
                   e.edge_type = 'prerequisite' AS prerequisite, sum(n.share) AS ds,
                   count(*)::int AS dn
            FROM added_reports n
            JOIN hag_edges e ON e.id = n.edge_id
            GROUP BY n.edge_id, n.learner_id, e.source_entry_id, e.edge_type
        ), up AS (
            INSERT INTO hag_edge_learner_units AS u
                (edge_id, learner_id, source_entry_id, prerequisite, share, sessions)
            SELECT d.edge_id, d.learner_id, d.source_entry_id, d.prerequisite, d.ds, d.dn
            FROM d ORDER BY d.edge_id, d.learner_id
            ON CONFLICT (edge_id, learner_id) DO UPDATE
                SET share = u.share + EXCLUDED.share, sessions = u.sessions + EXCLUDED.sessions
            RETURNING u.edge_id, u.learner_id, u.source_entry_id, u.prerequisite, u.share,
                      u.sessions
        ), ch AS (
            SELECT up.edge_id, up.learner_id, up.source_entry_id, up.prerequisite,
                   up.share AS new_share,
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
        FROM ch c WHERE c.old_sessions = 0 AND c.prerequisite
        GROUP BY c.source_entry_id, c.learner_id
        ORDER BY c.source_entry_id, c.learner_id
        ON CONFLICT (source_entry_id, learner_id) DO UPDATE SET pairs = cl.pairs + EXCLUDED.pairs;
    END IF;
    RETURN NULL;
END
$$;
