-- The maturity tiers of retrieval (SPEC §3, seed), each rule written once for every pass,
-- the resident sets and the nightly reprieve: the tier number of a maturity, its confidence
-- floor, the filter built on it (hag_entry_visible) and its boost. Each parameter carries
-- its dial's name behind `p_` (p_retrieval_min_confidence, p_floor_proven, ...). Plain SQL
-- expression functions: the planner inlines them, and with a constant maturity ('proven')
-- folds each to the one dial it names, so a pass written per tier keeps its index ranges. hag.retrieval.tiers holds the same boost for rows ranked in
-- Python (tests/test_sql_functions.py proves the two agree).

-- The global floor's parameter was named p_min_confidence until it took its dial's name
-- (retrieval_min_confidence). CREATE OR REPLACE cannot rename a parameter, so a memory made
-- before drops the two old signatures once here; no index or view depends on them.
DO $$
DECLARE
    old regprocedure;
BEGIN
    FOR old IN SELECT oid::regprocedure FROM pg_proc
               WHERE proname IN ('hag_entry_retrieval_floor', 'hag_entry_visible')
                 AND 'p_min_confidence' = ANY (proargnames)
    LOOP
        EXECUTE format('DROP FUNCTION %s', old);
    END LOOP;
END $$;

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
    p_maturity                  text,
    p_retrieval_min_confidence  double precision,
    p_floor_proven              double precision,
    p_floor_pattern             double precision,
    p_floor_candidate           double precision
) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_maturity
               WHEN 'proven'    THEN GREATEST(p_retrieval_min_confidence, p_floor_proven)
               WHEN 'pattern'   THEN GREATEST(p_retrieval_min_confidence, p_floor_pattern)
               WHEN 'candidate' THEN GREATEST(p_retrieval_min_confidence, p_floor_candidate)
           END
$$;

-- hag_entry_visible: the seed's retrieval filter for one entry (SPEC §3), written once for
-- every pass that uses it. Not archived, and a confidence at or above the higher of the
-- global floor and the floor of its maturity tier (hag_entry_retrieval_floor, above); an
-- unknown maturity has no floor and is locked out (the seed gives it the floor 1.0; the
-- CHECK on maturity admits none). A plain SQL expression function: the planner inlines
-- it, so plans are those of the written-out filter.
--
-- The second half restates the same rule as three ranges, one per maturity that can pass
-- (ours, measured in docs/retrieval.md); with a constant maturity the planner folds each
-- floor to GREATEST(p_retrieval_min_confidence, p_floor_<tier>). It changes no answer: the
-- CHECK on maturity admits only the four values named here, and for those the two halves
-- agree. It is there for the planner: the first half can only be tested row by row, while
-- `maturity = 'proven' AND confidence >= x` is a range of the btree on (scope, maturity,
-- confidence) (migration 040), so an exact pass reads the eligible rows alone, in block
-- order, instead of every row of the topic or scope.
CREATE OR REPLACE FUNCTION hag_entry_visible(
    p_maturity                  text,
    p_confidence                double precision,
    p_retrieval_min_confidence  double precision,
    p_floor_proven              double precision,
    p_floor_pattern             double precision,
    p_floor_candidate           double precision
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_maturity <> 'archived'
       AND p_confidence >= hag_entry_retrieval_floor(p_maturity, p_retrieval_min_confidence,
                               p_floor_proven, p_floor_pattern, p_floor_candidate)
       AND (   (p_maturity = 'proven'
                AND p_confidence >= hag_entry_retrieval_floor('proven', p_retrieval_min_confidence,
                                       p_floor_proven, p_floor_pattern, p_floor_candidate))
            OR (p_maturity = 'pattern'
                AND p_confidence >= hag_entry_retrieval_floor('pattern', p_retrieval_min_confidence,
                                       p_floor_proven, p_floor_pattern, p_floor_candidate))
            OR (p_maturity = 'candidate'
                AND p_confidence >= hag_entry_retrieval_floor('candidate', p_retrieval_min_confidence,
                                       p_floor_proven, p_floor_pattern, p_floor_candidate)))
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
