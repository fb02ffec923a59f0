-- A prerequisite's evidence in units (issue 29, the `units` rule, hag/evidence/model.py
-- `unit_terms`): its living definition, re-applied by every migrate (hag/storage/migrate.py).
-- Each reporting session gives the pair its share of one unit (hag_edge_learner_reports.share,
-- migration 200); a learner's shares are summed and capped at p_cap, so one learner's total is
-- bounded however many sessions repeat the pair. The sums are kept when reports are written
-- (migration 210): hag_edge_units holds the edge's capped units, learners and sessions, read
-- here as one row when it was summed at p_cap; otherwise (the cap changed since, or a memory
-- carried over) the per-learner rows of hag_edge_learner_units are summed at p_cap. Sessions
-- the memory did not attribute to a learner (the edge's hit count beyond its reported
-- sessions: before migration 091, or an edge restored from the audit) count least(1, p_cap)
-- units each, as they always have, but they may all be one learner's, and that learner may
-- be one of the attributed ones: so they make one learner only when no learner is recorded,
-- and never add one to those recorded. However many there are, they never make the distinct
-- learners the walk floor needs. Returns the units and the distinct learners (the attributed
-- learners, or 1 when there are none and some session is unattributed).
--
-- SQL, one SELECT, STABLE and not STRICT: the planner inlines it into the query that calls
-- it in FROM (a re-weigh's read calls it once per edge; as PL/pgSQL each call cost about
-- 10 us, and the read of 20,000 concepts at 200k took 1.59-1.71 s where it takes 1.15 s
-- with both evidence functions inlined;
-- docs/journal/2026-12-06-graph-concept-counts.md). Its body is not checked when it is
-- created (check_function_bodies off for this file), so the file also applies to a schema
-- migrated only part of the way (tests/test_migrate.py), as PL/pgSQL did.
SET LOCAL check_function_bodies = off;
CREATE OR REPLACE FUNCTION hag_edge_evidence(p_edge uuid, p_hits integer, p_cap double precision)
RETURNS TABLE (units double precision, learners integer)
LANGUAGE sql STABLE AS $$
    WITH kept AS (
        SELECT b.units, b.learners, b.sessions
        FROM hag_edge_units b
        WHERE b.edge_id = p_edge AND b.cap = p_cap
    ), attributed AS (
        SELECT k.units, k.learners, k.sessions FROM kept k
        UNION ALL
        SELECT COALESCE(sum(least(p_cap, lu.share)), 0)::double precision,
               count(*)::integer, COALESCE(sum(lu.sessions), 0)::integer
        FROM hag_edge_learner_units lu
        WHERE lu.edge_id = p_edge
        HAVING NOT EXISTS (SELECT 1 FROM kept)
    )
    SELECT a.units + least(1.0, p_cap) * greatest(0, COALESCE(p_hits, 0) - a.sessions),
           greatest(a.learners, (COALESCE(p_hits, 0) > a.sessions)::integer)
    FROM attributed a
$$;
SET LOCAL check_function_bodies = on;
