-- Why: migration 230 planned per call the trigger statements that join two sets of one
-- statement's rows. The triggers' other statements that read a statement's rows beside a
-- table kept the plan of their first call on a connection too: the learner reports'
-- cascade from deleted edges, the audit's copy of a deleted edge's reports, the kept
-- reports' cascade from deleted audit rows, and the kept sums' removal branch. After a
-- large first call (a cull, an erasure, a big withdrawal) the plan read the whole table by
-- a hash join, and every later small write of that connection did the same: with 100,000
-- edges and 200,000 reports, one edge deleted in 101 ms against 0.78 ms on a fresh
-- connection, an edge's two reports deleted in 31 ms against 0.52 ms, their share updated
-- in 21 ms against 1.3 ms. A connection lives long in a writer's pool, and behind a
-- transaction-mode pooler it serves every client in turn
-- (docs/journal/2026-12-07-plans-planned-both-ways.md).
--
-- Those statements now run through EXECUTE too, planned for each call's rows. What is
-- left static reads a statement's rows alone (no plan to choose), or probes a table by key
-- with an array variable (`= ANY (v_touched)`): planned for its array, or kept as a generic
-- plan that cannot see the array's length and probes the index, linear either way. The
-- kept sums' removal reads which removed reports' edges are gone and whether any of the
-- others has sums left in one statement (the second test was its own, after the gone
-- edges' sums were deleted; it now skips those edges instead). The bodies are otherwise
-- those of migrations 160, 222, 220 and 230.

CREATE OR REPLACE FUNCTION hag_edge_reports_cascade() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN  -- as TRUNCATE ... CASCADE followed the foreign key
        TRUNCATE hag_edge_learner_reports;
    ELSE
        EXECUTE $q$
        DELETE FROM hag_edge_learner_reports r USING old_edges o WHERE r.edge_id = o.id
        $q$;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION hag_edge_audit_reports_cascade() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN  -- as TRUNCATE ... CASCADE followed the foreign key (a
        DELETE FROM hag_edge_audit_reports;  -- DELETE: the TRUNCATE may name this table too)
    ELSE
        EXECUTE $q$
        DELETE FROM hag_edge_audit_reports r USING old_audit o WHERE r.audit_id = o.audit_id
        $q$;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION hag_audit_deleted_edges() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_run_id     uuid := NULLIF(current_setting('hag.run_id', true), '')::uuid;
    v_reason     text := COALESCE(NULLIF(current_setting('hag.delete_reason', true), ''),
                                  'manual delete');
    v_rules      jsonb := COALESCE(NULLIF(current_setting('hag.rule_values', true), ''),
                                   '{}')::jsonb;
    v_deleted_at timestamptz := COALESCE(
        NULLIF(current_setting('hag.deleted_at', true), '')::timestamptz, now());
BEGIN
    EXECUTE $q$
    WITH audited AS (
        INSERT INTO hag_edge_audit (
            run_id, reason, rule_values, deleted_at,
            edge_id, source_entry_id, target_entry_id, edge_type, condition, confidence,
            hit_count, source_type, source_session_id, traversal_count, last_traversed_at,
            created_at, updated_at, unlearned_from, prior_confidence)
        SELECT $1, $2, $3, $4,
               o.id, o.source_entry_id, o.target_entry_id, o.edge_type, o.condition,
               o.confidence, o.hit_count, o.source_type, o.source_session_id,
               o.traversal_count, o.last_traversed_at, o.created_at, o.updated_at,
               o.unlearned_from, o.prior_confidence
        FROM old_edges o
        RETURNING audit_id, edge_id
    )
    INSERT INTO hag_edge_audit_reports
        (audit_id, session_id, learner_id, turns, share, reported_at)
    SELECT a.audit_id, r.session_id, r.learner_id, r.turns, r.share, r.reported_at
    FROM audited a
    JOIN hag_edge_learner_reports r ON r.edge_id = a.edge_id
    $q$
    USING v_run_id, v_reason, v_rules, v_deleted_at;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION hag_edge_units_keep() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_cap      double precision := hag_setting_float('prerequisite_learner_cap');
    v_gone     uuid[];
    v_concepts uuid[];
    v_learners text[];
    v_lost     integer[];
    v_touched  uuid[];
    v_left     boolean;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_edge_learner_units, hag_edge_units, hag_concept_learners;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN  -- (nested: only a delete defines removed_reports)
        -- the reports of deleted edges (a cull's or an erasure's cascade): their sums go
        -- whole; and whether a removed report of a live edge has sums left to lower. One
        -- statement, planned for this call's rows
        EXECUTE $q$
        SELECT ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o
                     WHERE NOT EXISTS (SELECT 1 FROM hag_edges e WHERE e.id = o.edge_id)),
               EXISTS (SELECT 1 FROM removed_reports o
                       JOIN hag_edge_learner_units u
                         ON u.edge_id = o.edge_id AND u.learner_id = o.learner_id
                       WHERE EXISTS (SELECT 1 FROM hag_edges e WHERE e.id = o.edge_id))
        $q$
        INTO v_gone, v_left;
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
        IF NOT v_left THEN
            RETURN NULL;  -- none has (the usual case: a cascade from deleted edges)
        END IF;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        -- (through EXECUTE: the removed reports joined to the sums, planned for their rows)
        EXECUTE $q$
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
            SET units = CASE WHEN b.cap = $1 THEN b.units
                             ELSE (SELECT COALESCE(sum(least($1, x.share)), 0)
                                   FROM hag_edge_learner_units x WHERE x.edge_id = b.edge_id)
                        END + c.du,
                cap = $1, learners = b.learners - c.gone, sessions = b.sessions - c.dn
            FROM (SELECT up.edge_id,
                         sum(CASE WHEN up.new_sessions > 0 THEN least($1, up.new_share)
                                  ELSE 0 END
                             - least($1, up.new_share + up.ds)) AS du,
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
        WHERE cl.source_entry_id = c.source_entry_id AND cl.learner_id = c.learner_id
        $q$
        USING v_cap;
        -- the edges those reports named, read alone and probed below by key
        v_touched := ARRAY(SELECT DISTINCT o.edge_id FROM removed_reports o);
        -- the (concept, learner) rows that fell to nothing go: only those the removed reports
        -- touched, read in a statement of its own so that a writer that changed the same row
        -- meanwhile is seen (its lock waited for, its value read again)
        -- (the fallen (edge, learner) rows found by the removed edges' keys, their
        -- (concept, learner) keys gathered into two arrays, and those rows probed by key)
        WITH fallen AS (
            SELECT array_agg(source_entry_id) AS concepts, array_agg(learner_id) AS learners
            FROM (SELECT DISTINCT u.source_entry_id, u.learner_id
                  FROM hag_edge_learner_units u
                  WHERE u.edge_id = ANY (v_touched)
                    AND u.sessions <= 0 AND u.prerequisite) k
        )
        DELETE FROM hag_concept_learners cl
        USING unnest((SELECT concepts FROM fallen), (SELECT learners FROM fallen))
              AS g (source_entry_id, learner_id)
        WHERE cl.source_entry_id = g.source_entry_id AND cl.learner_id = g.learner_id
          AND cl.pairs <= 0;
        -- what fell to nothing goes (what would stay of a share is rounding residue)
        DELETE FROM hag_edge_learner_units u
        WHERE u.edge_id = ANY (v_touched)
          AND u.sessions <= 0;
        DELETE FROM hag_edge_units b
        WHERE b.edge_id = ANY (v_touched)
          AND b.sessions <= 0;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        -- (through EXECUTE: the join of `up` and `d` planned for this statement's rows)
        EXECUTE $q$
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
            SELECT c.edge_id, c.source_entry_id, $1,
                   sum(least($1, c.new_share)
                       - CASE WHEN c.old_sessions > 0 THEN least($1, c.old_share) ELSE 0 END),
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
        ON CONFLICT (source_entry_id, learner_id) DO UPDATE SET pairs = cl.pairs + EXCLUDED.pairs
        $q$
        USING v_cap;
    END IF;
    RETURN NULL;
END
$$;
