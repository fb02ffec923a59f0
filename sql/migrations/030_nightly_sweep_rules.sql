-- Why: the daily sweeps (SPEC §5) decide over a million rows in one set-based statement each,
-- and their rules must live in exactly one place so that a dry run reports exactly what the
-- real run would do. Each rule is an SQL predicate over one row (inlined by the planner, so
-- it costs what the same WHERE clause written out costs). Writing them as predicates of the
-- target row, rather than as a candidate list joined back in, matters under concurrency: a
-- session that traverses an edge while the cull waits on its row lock makes PostgreSQL
-- re-check the predicate against the new row version, and the edge survives.
--
-- The cull's protection of seed edges and of any provenance class not on the allowlist is
-- enforced here, in SQL, whatever the dials say: `source_type <> 'seed'` is written into the
-- rule, and only classes named in p_source_types qualify (a positive allowlist).
--
-- Maturity changes get their own history table: hag_confidence_history records numbers,
-- and "when did this entry become a pattern, under which run" is a different question.
-- Ages are exact 24-hour days, so a time-zone change never moves the 90-day line.

CREATE TABLE hag_maturity_history (
    history_id    bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry_id      uuid NOT NULL,
    old_maturity  text NOT NULL,
    new_maturity  text NOT NULL,
    rule          text NOT NULL,
    run_id        uuid,
    at            timestamptz NOT NULL
);

CREATE INDEX hag_maturity_history_entry_idx ON hag_maturity_history (entry_id, at);
CREATE INDEX hag_maturity_history_run_idx ON hag_maturity_history (run_id);

-- An edge an operator restored from the audit is never culled again by the rule: the
-- operator's word outranks it. This index keeps that anti-join cheap.
CREATE INDEX hag_edge_audit_restored_idx ON hag_edge_audit (edge_id) WHERE restored_at IS NOT NULL;

-- Seed rule: learned or enriched (the allowlist), confidence below 0.35, never traversed,
-- at least 90 days old as of p_as_of. Seed edges never qualify.
CREATE FUNCTION hag_edge_is_cullable(
    e                 hag_edges,
    p_as_of           timestamptz,
    p_max_confidence  double precision,
    p_min_age_days    integer,
    p_max_traversals  integer,
    p_source_types    text[]
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT e.source_type <> 'seed'
       AND e.source_type = ANY (p_source_types)
       AND e.confidence < p_max_confidence
       AND e.traversal_count <= p_max_traversals
       AND e.created_at <= p_as_of - make_interval(hours => 24 * p_min_age_days)
$$;

-- Seed rule: a candidate at least 14 days old, confidence >= 0.50, failure_count = 0.
-- (The maturity test is the caller's, so a dry run can chain the steps.)
CREATE FUNCTION hag_entry_promotes_to_pattern(
    e                 hag_entries,
    p_as_of           timestamptz,
    p_min_age_days    integer,
    p_min_confidence  double precision,
    p_max_failures    integer
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT e.created_at <= p_as_of - make_interval(hours => 24 * p_min_age_days)
       AND e.confidence >= p_min_confidence
       AND e.failure_count <= p_max_failures
$$;

-- Ours: a pattern that has been watched working (successes, a low failure ratio, high
-- confidence, old enough) becomes proven.
CREATE FUNCTION hag_entry_promotes_to_proven(
    e                    hag_entries,
    p_as_of              timestamptz,
    p_min_age_days       integer,
    p_min_confidence     double precision,
    p_min_successes      integer,
    p_max_failure_ratio  double precision
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT e.created_at <= p_as_of - make_interval(hours => 24 * p_min_age_days)
       AND e.confidence >= p_min_confidence
       AND e.success_count >= p_min_successes
       AND e.failure_count <= p_max_failure_ratio * (e.success_count + e.failure_count)
$$;

-- Ours: a candidate or pattern that sank (low confidence after repeated failures) retires.
-- Proven entries are never archived by the rule: they earned a slower, human decision.
CREATE FUNCTION hag_entry_sinks_to_archive(
    e                 hag_entries,
    p_max_confidence  double precision,
    p_min_failures    integer
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT e.confidence < p_max_confidence
       AND e.failure_count >= p_min_failures
$$;
