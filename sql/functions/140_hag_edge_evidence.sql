-- A prerequisite's evidence in units (issue 29, the `units` rule, hag/evidence/model.py
-- `unit_terms`): its living definition, re-applied by every migrate (hag/storage/migrate.py).
-- Each reporting session gives the pair its share of one unit (hag_edge_learner_reports.share,
-- migration 200); a learner's shares are summed when the reports are written
-- (hag_edge_learner_units, migration 210) and capped here at p_cap, so one learner's total is
-- bounded however many sessions repeat the pair, and the cost is one row per learner who
-- reported the pair, whatever the number of their sessions. Sessions the memory did not
-- attribute to a learner (the edge's hit count beyond its reported sessions: before
-- migration 091, or an edge restored from the audit) count least(1, p_cap) each and as a
-- learner each, as they counted before. Returns the units and the distinct learners
-- (attributed learners plus unattributed sessions).
--
-- PL/pgSQL rather than SQL: its body is checked when it runs, not when it is created, so
-- this file also applies to a schema migrated only part of the way (tests/test_migrate.py).
CREATE OR REPLACE FUNCTION hag_edge_evidence(p_edge uuid, p_hits integer, p_cap double precision)
RETURNS TABLE (units double precision, learners integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    WITH attributed AS (
        SELECT COALESCE(sum(least(p_cap, lu.share)), 0)::double precision AS units,
               count(*)::integer AS learners,
               COALESCE(sum(lu.sessions), 0)::integer AS sessions
        FROM hag_edge_learner_units lu
        WHERE lu.edge_id = p_edge
    )
    SELECT a.units + least(1.0, p_cap) * greatest(0, COALESCE(p_hits, 0) - a.sessions),
           a.learners + greatest(0, COALESCE(p_hits, 0) - a.sessions)
    FROM attributed a;
END
$$;
