-- Why: under the seed's rules an entry of a hard concept sinks below its retrieval floor and,
-- never shown again, is never graded again (issue 14: the share of turns with an advisory for
-- the taught concept fell from 0.86 to 0.43 in the demo). The evidence profile's nightly
-- reprieve lifts such an entry back to its floor once it has gone unused for a number of days
-- (the dial reprieve_idle_days; 0, the default, keeps the seed's behaviour), so it is shown and
-- graded again. The rule lives here, as the other sweep rules do (migration 030), so the dry
-- run and the real run ask the same predicate. It only adds a function: an existing memory is
-- carried over unchanged.

-- The confidence an entry needs to be retrieved (hag_entry_visible's floor), or NULL when no
-- floor applies (archived and unknown maturities are never reprieved).
CREATE FUNCTION hag_entry_retrieval_floor(
    p_maturity        text,
    p_min_confidence  double precision,
    p_floor_proven    double precision,
    p_floor_pattern   double precision,
    p_floor_candidate double precision
) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_maturity
               WHEN 'proven'    THEN GREATEST(p_min_confidence, p_floor_proven)
               WHEN 'pattern'   THEN GREATEST(p_min_confidence, p_floor_pattern)
               WHEN 'candidate' THEN GREATEST(p_min_confidence, p_floor_candidate)
           END
$$;

-- Our rule (evidence profile): below its floor, and neither matched nor created in the last
-- p_idle_days days as of p_as_of. p_idle_days = 0 turns the rule off.
CREATE FUNCTION hag_entry_is_reprieved(
    e                 hag_entries,
    p_as_of           timestamptz,
    p_idle_days       integer,
    p_min_confidence  double precision,
    p_floor_proven    double precision,
    p_floor_pattern   double precision,
    p_floor_candidate double precision
) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT p_idle_days > 0
       AND e.confidence < hag_entry_retrieval_floor(e.maturity, p_min_confidence, p_floor_proven,
                                                    p_floor_pattern, p_floor_candidate)
       AND COALESCE(e.last_matched_at, e.created_at)
           <= p_as_of - make_interval(hours => 24 * p_idle_days)
$$;
