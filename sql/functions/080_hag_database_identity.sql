-- Why: a resident set (hag.retrieval.resident) read from one database must never answer for
-- another put behind the same read URL (a restore, a failover; issue 24). The identity is
-- the server's system identifier (one per initdb, shared by its physical standbys), this
-- database's oid (a restore into a new database gets a new one) and the random id migration
-- 125 records in hag_meta (NULL parts are left out: before 125 there is none). The read
-- path reads it in the same query as each set's stamp (sql/queries/retrieval.sql).
CREATE OR REPLACE FUNCTION hag_database_identity() RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT concat_ws('/',
        (SELECT system_identifier FROM pg_control_system()),
        (SELECT oid FROM pg_database WHERE datname = current_database()),
        (SELECT value FROM hag_meta WHERE key = 'database_id'))
$$;
