-- hag_entry_visible: the seed's retrieval filter for one entry (SPEC §3), written once for
-- every pass that uses it. Not archived, and a confidence at or above the higher of the
-- global floor and the floor of its maturity tier (proven / pattern / candidate); an
-- unknown maturity is locked out (floor 1.0, as the seed writes it). A plain SQL expression
-- function: the planner inlines it, so plans are those of the written-out filter.
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
       AND p_confidence >= GREATEST(
             p_min_confidence,
             CASE p_maturity
                 WHEN 'proven'    THEN p_floor_proven
                 WHEN 'pattern'   THEN p_floor_pattern
                 WHEN 'candidate' THEN p_floor_candidate
                 ELSE 1.0
             END)
$$;
