-- The nightly sweeps' rules (SPEC §5), each written once: the real run, the dry run and the
-- big-night forecast (sql/queries/sweeps.sql) all ask these functions. They were first
-- created by migrations 030 and 075 (which stay as history: a migration is never edited);
-- this file is their living definition, re-applied by every migrate (hag/storage/migrate.py), so a
-- rule changes here and nowhere else.
--
-- Each rule is an SQL predicate over one row, which the planner inlines into the statement
-- (it costs what the same WHERE clause written out costs; tests/test_sweeps.py reads the
-- plans). Predicates of the target row, rather than a candidate list joined back in, matter
-- under concurrency: a session that traverses an edge while the cull waits on its row lock
-- makes PostgreSQL re-check the predicate against the new row version, and the edge
-- survives. Rules with an age test are STABLE, not IMMUTABLE: subtracting an interval from a
-- timestamptz depends on the time-zone setting, and the planner refuses to inline an
-- IMMUTABLE function whose body is not (migration 032). Ages are exact 24-hour days, so a
-- time-zone change never moves the 90-day line.

-- Each parameter carries its dial's name behind `p_` (p_cull_max_confidence, ...). They had
-- generic names (p_min_age_days for the promotion and the proven rule alike) until then;
-- CREATE OR REPLACE cannot rename a parameter, so a memory made before drops the old
-- signatures once here. No index or view depends on these functions.
DO $$
DECLARE
    old regprocedure;
BEGIN
    FOR old IN SELECT oid::regprocedure FROM pg_proc
               WHERE proname IN ('hag_edge_is_cullable', 'hag_entry_promotes_to_pattern',
                                 'hag_entry_promotes_to_proven', 'hag_entry_sinks_to_archive',
                                 'hag_entry_is_reprieved')
                 AND proargnames && ARRAY['p_max_confidence', 'p_min_age_days',
                                          'p_min_failures', 'p_idle_days']
    LOOP
        EXECUTE format('DROP FUNCTION %s', old);
    END LOOP;
END $$;

-- Seed rule: learned or enriched (the allowlist), confidence below 0.35, never traversed,
-- at least 90 days old as of p_as_of. Seed edges never qualify, whatever the dials say:
-- `source_type <> 'seed'` is written into the rule, and only classes named in
-- p_cull_source_types qualify (a positive allowlist).
CREATE OR REPLACE FUNCTION hag_edge_is_cullable(
    e                           hag_edges,
    p_as_of                     timestamptz,
    p_cull_max_confidence       double precision,
    p_cull_min_age_days         integer,
    p_cull_max_traversals       integer,
    p_cull_source_types         text[]
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT e.source_type <> 'seed'
       AND e.source_type = ANY (p_cull_source_types)
       AND e.confidence < p_cull_max_confidence
       AND e.traversal_count <= p_cull_max_traversals
       AND e.created_at <= p_as_of - make_interval(hours => 24 * p_cull_min_age_days)
$$;

-- Ours: an edge an operator restored from the audit is never culled again by the rule (the
-- operator's word outranks it). The set of such edges, for the cull's anti-join
-- `NOT EXISTS (SELECT FROM hag_restored_edges() r WHERE r.edge_id = e.id)`. A set-returning
-- function, not a predicate over the row: a predicate holding a sub-query cannot be inlined
-- and would probe the audit once per edge, while this one is inlined into the statement and
-- planned as one anti-join over the partial index hag_edge_audit_restored_idx.
CREATE OR REPLACE FUNCTION hag_restored_edges()
RETURNS TABLE (edge_id uuid)
LANGUAGE sql STABLE AS $$
    SELECT a.edge_id FROM hag_edge_audit a WHERE a.restored_at IS NOT NULL
$$;

-- Seed rule: a candidate at least 14 days old, confidence >= 0.50, failure_count = 0.
-- (The maturity test is the caller's, so a dry run can chain the steps.)
CREATE OR REPLACE FUNCTION hag_entry_promotes_to_pattern(
    e                           hag_entries,
    p_as_of                     timestamptz,
    p_promotion_min_age_days    integer,
    p_promotion_min_confidence  double precision,
    p_promotion_max_failures    integer
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT e.created_at <= p_as_of - make_interval(hours => 24 * p_promotion_min_age_days)
       AND e.confidence >= p_promotion_min_confidence
       AND e.failure_count <= p_promotion_max_failures
$$;

-- Ours: a pattern that has been watched working (successes, a low failure ratio, high
-- confidence, old enough) becomes proven.
CREATE OR REPLACE FUNCTION hag_entry_promotes_to_proven(
    e                           hag_entries,
    p_as_of                     timestamptz,
    p_proven_min_age_days       integer,
    p_proven_min_confidence     double precision,
    p_proven_min_successes      integer,
    p_proven_max_failure_ratio  double precision
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT e.created_at <= p_as_of - make_interval(hours => 24 * p_proven_min_age_days)
       AND e.confidence >= p_proven_min_confidence
       AND e.success_count >= p_proven_min_successes
       AND e.failure_count <= p_proven_max_failure_ratio * (e.success_count + e.failure_count)
$$;

-- Ours: a candidate or pattern that sank (low confidence after repeated failures) retires.
-- Proven entries are never archived by the rule: they earned a slower, human decision.
CREATE OR REPLACE FUNCTION hag_entry_sinks_to_archive(
    e                           hag_entries,
    p_archive_max_confidence    double precision,
    p_archive_min_failures      integer
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT e.confidence < p_archive_max_confidence
       AND e.failure_count >= p_archive_min_failures
$$;

-- hag_entry_retrieval_floor, the floor the reprieve lifts to, is defined with the maturity
-- tiers (014_hag_maturity_tiers.sql).

-- Our rule (evidence profile, migration 075): below its floor, and neither matched nor
-- created in the last p_reprieve_idle_days days as of p_as_of; 0 turns the rule off.
CREATE OR REPLACE FUNCTION hag_entry_is_reprieved(
    e                           hag_entries,
    p_as_of                     timestamptz,
    p_reprieve_idle_days        integer,
    p_retrieval_min_confidence  double precision,
    p_floor_proven              double precision,
    p_floor_pattern             double precision,
    p_floor_candidate           double precision
) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT p_reprieve_idle_days > 0
       AND e.confidence < hag_entry_retrieval_floor(e.maturity, p_retrieval_min_confidence, p_floor_proven,
                                                    p_floor_pattern, p_floor_candidate)
       AND COALESCE(e.last_matched_at, e.created_at)
           <= p_as_of - make_interval(hours => 24 * p_reprieve_idle_days)
$$;
