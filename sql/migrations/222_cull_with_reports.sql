-- Why: (issue 29) a cull of learned edges that carry learner reports (under the evidence
-- profile every learned edge does: a learner's report made it) spent most of its time
-- keeping the evidence sums. The reports' cascade deleted each culled edge's reports, and
-- the sums' trigger (hag_edge_units_keep) then updated every (edge, learner) row and every
-- edge row down to zero before deleting them: two updates and a delete per row for sums
-- whose edge is gone. Measured by `python -m bench nightly` at 1M + 1M with one report per
-- learned edge (217,201 edges culled, 163,006 reports): the cull 6.7 s against 1.6 s
-- without reports, 21.7x the bare DELETE (docs/journal/2026-12-05-nightly-with-reports.md).
--
-- The sums' trigger, redefined whole below, drops the sums of reports whose edge is gone
-- (the cascade of a cull or an erasure) whole: the edge's (edge, learner) rows and its edge
-- row are deleted outright, and each (concept, learner) count of a prerequisite falls by
-- the rows it lost (deleted at zero). It then returns at once when none of the removed
-- reports has sums left, as after such a cascade (one probe instead of five statements).
-- The sums are unchanged: a deleted edge's rows are exactly those the update would have
-- brought to zero and deleted. The reports are still deleted (and so locked) before their
-- sums, as every writer of reports does: no lock order is reversed.
--
-- The kept reports' foreign key to their audit row becomes a statement trigger, as the
-- live reports' did (migration 160): its check ran row by row for every report the audit
-- copied from rows the same statement had just written, a sixth of the copy's time. An
-- audit row deleted (an erasure's private edges) takes its kept reports in one statement;
-- only the audit trigger writes kept reports, always beside the rows it writes.
ALTER TABLE hag_edge_audit_reports DROP CONSTRAINT hag_edge_audit_reports_audit_id_fkey;

CREATE FUNCTION hag_edge_audit_reports_cascade() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN  -- as TRUNCATE ... CASCADE followed the foreign key (a
        DELETE FROM hag_edge_audit_reports;  -- DELETE: the TRUNCATE may name this table too)
    ELSE
        DELETE FROM hag_edge_audit_reports r USING old_audit o WHERE r.audit_id = o.audit_id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER hag_edge_audit_reports_cascade
    AFTER DELETE ON hag_edge_audit
    REFERENCING OLD TABLE AS old_audit
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_audit_reports_cascade();
CREATE TRIGGER hag_edge_audit_reports_truncate
    AFTER TRUNCATE ON hag_edge_audit
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_audit_reports_cascade();

CREATE OR REPLACE FUNCTION hag_edge_units_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_cap      double precision := hag_setting_float('prerequisite_learner_cap');
    v_gone     uuid[];
    v_concepts uuid[];
    v_learners text[];
    v_lost     integer[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_edge_learner_units, hag_edge_units, hag_concept_learners;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN  -- (nested: only a delete defines removed_reports)
        -- the reports of deleted edges (a cull's or an erasure's cascade): their sums whole
        v_gone := ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o
                        WHERE NOT EXISTS (SELECT 1 FROM hag_edges e WHERE e.id = o.edge_id));
        IF cardinality(v_gone) > 0 THEN
            WITH gone AS (
                DELETE FROM hag_edge_learner_units u
                WHERE u.edge_id = ANY (v_gone)
                RETURNING u.source_entry_id, u.learner_id, u.prerequisite
            )
            SELECT array_agg(g.source_entry_id), array_agg(g.learner_id), array_agg(g.n)
            INTO v_concepts, v_learners, v_lost
            FROM (SELECT source_entry_id, learner_id, count(*)::int AS n
                  FROM gone WHERE prerequisite
                  GROUP BY source_entry_id, learner_id) g;
            IF v_concepts IS NOT NULL THEN
                -- a (concept, learner) count the loss brings to nothing is deleted outright
                -- (the usual case: a learner names one pair of a concept), the others
                -- lowered, each in a statement of its own: a writer that changed a row
                -- meanwhile is seen, and a row it lowered to the loss is deleted last
                DELETE FROM hag_concept_learners cl
                USING unnest(v_concepts, v_learners, v_lost) AS g (source_entry_id, learner_id, n)
                WHERE cl.source_entry_id = g.source_entry_id AND cl.learner_id = g.learner_id
                  AND cl.pairs <= g.n;
                WITH lowered AS (
                    UPDATE hag_concept_learners cl
                    SET pairs = cl.pairs - g.n
                    FROM unnest(v_concepts, v_learners, v_lost)
                         AS g (source_entry_id, learner_id, n)
                    WHERE cl.source_entry_id = g.source_entry_id AND cl.learner_id = g.learner_id
                    RETURNING cl.source_entry_id, cl.learner_id, cl.pairs
                )
                SELECT array_agg(l.source_entry_id), array_agg(l.learner_id)
                INTO v_concepts, v_learners
                FROM lowered l WHERE l.pairs <= 0;
                IF v_concepts IS NOT NULL THEN
                    DELETE FROM hag_concept_learners cl
                    USING unnest(v_concepts, v_learners) AS g (source_entry_id, learner_id)
                    WHERE cl.source_entry_id = g.source_entry_id
                      AND cl.learner_id = g.learner_id AND cl.pairs <= 0;
                END IF;
            END IF;
            DELETE FROM hag_edge_units b WHERE b.edge_id = ANY (v_gone);
        END IF;
        IF NOT EXISTS (
            SELECT 1 FROM removed_reports o
            JOIN hag_edge_learner_units u ON u.edge_id = o.edge_id AND u.learner_id = o.learner_id
        ) THEN
            RETURN NULL;  -- no removed report has sums left (the usual case after the above)
        END IF;
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
