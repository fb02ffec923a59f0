-- A concept's distinct reporting learners under the units rule (issue 29): the learners who
-- reported any prerequisite out of it (hag_concept_learners, kept when reports are written),
-- or, when none is recorded, one if any of its prerequisites has sessions no learner is
-- recorded for (its hit count beyond its reported sessions: a memory from before migration
-- 091, or an edge restored from the audit). Such sessions may all be one learner's, and that
-- learner may be a recorded one, so they add none to those recorded: as hag_edge_evidence
-- counts an edge's learners. The one definition that negative evidence on an authored
-- prerequisite (sql/queries/evidence.sql) and on an authored sequence edge
-- (sql/queries/sequences.sql) both read. PL/pgSQL, so its body is checked when it runs
-- (this file also applies to a schema migrated only part of the way).
CREATE OR REPLACE FUNCTION hag_concept_learner_count(p_source uuid)
RETURNS integer
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN greatest(
        (SELECT count(*) FROM hag_concept_learners cl WHERE cl.source_entry_id = p_source),
        (SELECT EXISTS (SELECT 1
                          FROM hag_edges q
                          LEFT JOIN hag_edge_units b ON b.edge_id = q.id
                         WHERE q.edge_type = 'prerequisite' AND q.source_entry_id = p_source
                           AND q.hit_count > COALESCE(b.sessions, 0)))::integer
    )::integer;
END
$$;
