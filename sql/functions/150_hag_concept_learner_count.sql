-- A concept's distinct reporting learners under the units rule (issue 29): the learners who
-- reported any prerequisite out of it (hag_concept_learners, kept when reports are written),
-- or, when none is recorded, one if any of its prerequisites has sessions no learner is
-- recorded for (its hit count beyond its reported sessions: a memory from before migration
-- 091, or an edge restored from the audit). Such sessions may all be one learner's, and that
-- learner may be a recorded one, so they add none to those recorded: as hag_edge_evidence
-- counts an edge's learners. The one definition that negative evidence on an authored
-- prerequisite (sql/queries/evidence.sql) and on an authored sequence edge
-- (sql/queries/sequences.sql) both read.
--
-- One row of one column, from SQL, STABLE and not STRICT: called in FROM (`CROSS JOIN
-- LATERAL hag_concept_learner_count(c) x`, or `(SELECT x.learners FROM ...)`), the planner
-- inlines it into the calling query, as it does hag_edge_evidence; a PL/pgSQL scalar was
-- one call per concept a re-weigh reads (docs/journal/2026-12-06-graph-concept-counts.md).
-- Its body is not checked when it is created (check_function_bodies off for this file), so
-- the file also applies to a schema migrated only part of the way. A memory whose function
-- still returns a bare integer has it dropped first (a replace cannot change the type; no
-- index or view depends on it). This came with migration 228, so a checkout from before
-- it, whose file would replace the row with an integer, is refused by the ledger first.
DO $$
DECLARE
    old regprocedure;
BEGIN
    FOR old IN SELECT oid::regprocedure FROM pg_proc
               WHERE proname = 'hag_concept_learner_count' AND NOT proretset
                 AND pronamespace = current_schema()::regnamespace
    LOOP
        EXECUTE format('DROP FUNCTION %s', old);
    END LOOP;
END $$;
SET LOCAL check_function_bodies = off;
CREATE OR REPLACE FUNCTION hag_concept_learner_count(p_source uuid)
RETURNS TABLE (learners integer)
LANGUAGE sql STABLE AS $$
    SELECT greatest(
        (SELECT count(*) FROM hag_concept_learners cl WHERE cl.source_entry_id = p_source),
        (SELECT EXISTS (SELECT 1
                          FROM hag_edges q
                          LEFT JOIN hag_edge_units b ON b.edge_id = q.id
                         WHERE q.edge_type = 'prerequisite' AND q.source_entry_id = p_source
                           AND q.hit_count > COALESCE(b.sessions, 0)))::integer
    )::integer
$$;
SET LOCAL check_function_bodies = on;
