-- Why: migration 030 declared the sweep rules IMMUTABLE, but their age tests subtract an
-- interval from a timestamptz, which PostgreSQL classes as STABLE (it depends on the time
-- zone setting). The planner refuses to inline an IMMUTABLE function whose body is not, and
-- then calls it once per row with a whole-row argument: a function call per edge instead of
-- a plain WHERE clause. Declared STABLE, they inline (tests/test_sweeps.py
-- pins this by reading the plans).
ALTER FUNCTION hag_edge_is_cullable(hag_edges, timestamptz, double precision, integer, integer, text[])
    STABLE;
ALTER FUNCTION hag_entry_promotes_to_pattern(hag_entries, timestamptz, integer, double precision, integer)
    STABLE;
ALTER FUNCTION hag_entry_promotes_to_proven(hag_entries, timestamptz, integer, double precision, integer, double precision)
    STABLE;
