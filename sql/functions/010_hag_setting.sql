-- hag_setting(key): one dial's value straight from hag_settings, for SQL callers (the
-- RPCs below fall back to it when a parameter is NULL, so no threshold is written twice).
CREATE OR REPLACE FUNCTION hag_setting(p_key text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT value FROM hag_settings WHERE key = p_key
$$;

-- COST 1 (ours): a key lookup in a table of a hundred rows. At the default cost (100) the
-- planner counts a NULL-parameter call of match_hag_entries as expensive and refuses to
-- inline hag_entry_visible, whose parameters are used more than once: the filter then runs
-- as a function call per row and its ranges never reach the btrees (docs/retrieval.md).
CREATE OR REPLACE FUNCTION hag_setting_float(p_key text) RETURNS double precision
LANGUAGE sql STABLE COST 1 AS $$
    SELECT (value #>> '{}')::double precision FROM hag_settings WHERE key = p_key
$$;
