-- Why: a resident set (hag.retrieval.resident) is used only while its set's stamp (migration
-- 095) is the one its rows were read at. Migration 095 seeded no change row, so every memory
-- migrated from before it had stamp 0 in every set until that set's next write, and two
-- such memories (a database and its restore, or a failover to a differently-aged copy) met
-- at stamp 0 with different rows: after the database behind the read URL was swapped, 22 of
-- 22 answers in a row came from the old database's rows (issue 24).
--
-- Two guards, both here:
-- 1. One random change row for set '*' (every set): no stamp of this memory is 0, and two
--    memories migrated apart start from two random sums. A fresh memory runs this too.
-- 2. A random id of this memory in hag_meta ('database_id'), part of the database's
--    identity (sql/functions/080_hag_database_identity.sql: with the server's system
--    identifier and the database's oid). The read path reads the identity in the same
--    query, and snapshot, as each stamp, and a set read from one identity never answers
--    on another.
INSERT INTO hag_entry_search_changes (set_key) VALUES ('*');

INSERT INTO hag_meta (key, value) VALUES ('database_id', gen_random_uuid()::text);
