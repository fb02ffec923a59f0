-- The maturity tiers of retrieval (SPEC §3, seed), each rule written once for every pass,
-- the resident sets and the nightly reprieve: the tier number of a maturity, its confidence
-- floor and its boost. Plain SQL expression functions: the planner inlines them, and with a
-- constant maturity ('proven') folds each to the one dial it names, so a pass written per
-- tier keeps its index ranges. hag.retrieval.tiers holds the same boost for rows ranked in
-- Python (tests/test_sql_functions.py proves the two agree).

-- The tier number of a maturity that can pass the filter (0 proven, 1 pattern,
-- 2 candidate); NULL for archived and unknown maturities. The resident sets hold it per row
-- and index their boosts by it (hag.retrieval.tiers.TIERS is in this order).
CREATE OR REPLACE FUNCTION hag_maturity_tier(p_maturity text) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_maturity WHEN 'proven' THEN 0 WHEN 'pattern' THEN 1 WHEN 'candidate' THEN 2
           END::smallint
$$;

-- The confidence an entry needs to be retrieved: the higher of the global floor and the
-- floor of its maturity tier; NULL when no floor applies (archived and unknown maturities
-- are never retrieved, nor reprieved by the nightly run).
CREATE OR REPLACE FUNCTION hag_entry_retrieval_floor(
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

-- The seed's maturity boost (= maturity weight) in the ranking: proven 1.1, pattern 1.05,
-- anything else 1.0 (the dials boost_proven, boost_pattern, boost_candidate).
CREATE OR REPLACE FUNCTION hag_maturity_boost(
    p_maturity        text,
    p_boost_proven    double precision,
    p_boost_pattern   double precision,
    p_boost_candidate double precision
) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_maturity
               WHEN 'proven'  THEN p_boost_proven
               WHEN 'pattern' THEN p_boost_pattern
               ELSE p_boost_candidate
           END
$$;
