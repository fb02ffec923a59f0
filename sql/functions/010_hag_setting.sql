-- hag_setting(key): one dial's value straight from hag_settings, for SQL callers (the
-- RPCs below fall back to it when a parameter is NULL, so no threshold is written twice).
CREATE OR REPLACE FUNCTION hag_setting(p_key text) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    SELECT value FROM hag_settings WHERE key = p_key
$$;

CREATE OR REPLACE FUNCTION hag_setting_float(p_key text) RETURNS double precision
LANGUAGE sql STABLE AS $$
    SELECT (value #>> '{}')::double precision FROM hag_settings WHERE key = p_key
$$;
