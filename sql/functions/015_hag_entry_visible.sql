-- hag_entry_visible: the seed's retrieval filter for one entry (SPEC §3), written once for
-- every pass that uses it. Not archived, and a confidence at or above the higher of the
-- global floor and the floor of its maturity tier (hag_entry_retrieval_floor,
-- 014_hag_maturity_tiers.sql); an unknown maturity has no floor and is locked out (the
-- seed gives it the floor 1.0; the CHECK on maturity admits none). A plain SQL expression
-- function: the planner inlines it, so plans are those of the written-out filter.
--
-- The second half restates the same rule as three ranges, one per maturity that can pass
-- (ours, measured in docs/retrieval.md); with a constant maturity the planner folds each
-- floor to GREATEST(p_min_confidence, p_floor_<tier>). It changes no answer: the CHECK on
-- maturity admits only the four values named here, and for those the two halves agree. It
-- is there for the planner: the first half can only be tested row by row, while
-- `maturity = 'proven' AND confidence >= x` is a range of the btree on
-- (scope, maturity, confidence) (migration 040), so an exact pass reads the eligible rows
-- alone, in block order, instead of every row of the topic or scope.
CREATE OR REPLACE FUNCTION hag_entry_visible(
    p_maturity        text,
    p_confidence      double precision,
    p_min_confidence  double precision,
    p_floor_proven    double precision,
    p_floor_pattern   double precision,
    p_floor_candidate double precision
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_maturity <> 'archived'
       AND p_confidence >= hag_entry_retrieval_floor(p_maturity, p_min_confidence,
                               p_floor_proven, p_floor_pattern, p_floor_candidate)
       AND (   (p_maturity = 'proven'
                AND p_confidence >= hag_entry_retrieval_floor('proven', p_min_confidence,
                                       p_floor_proven, p_floor_pattern, p_floor_candidate))
            OR (p_maturity = 'pattern'
                AND p_confidence >= hag_entry_retrieval_floor('pattern', p_min_confidence,
                                       p_floor_proven, p_floor_pattern, p_floor_candidate))
            OR (p_maturity = 'candidate'
                AND p_confidence >= hag_entry_retrieval_floor('candidate', p_min_confidence,
                                       p_floor_proven, p_floor_pattern, p_floor_candidate)))
$$;
