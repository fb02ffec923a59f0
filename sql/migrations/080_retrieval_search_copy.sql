-- Why: at a million entries an exact retrieval pass spends its time visiting heap pages, not
-- comparing vectors (issue 15: the topic pass read about 7,800 eligible rows through a
-- bitmap heap scan spread over the whole table, 27 ms where the numpy floor is under 5; the
-- tutor scope's exact scan for a query near nothing, 70-90 ms). A topic's rows arrive in
-- any order, so they are scattered over every page of hag_entries, and at 1,536 dimensions
-- each row fills a page by itself.
--
-- hag_entry_search is a compact copy of what the semantic passes read, kept by triggers in
-- the same transaction as every write to hag_entries (so a reader's snapshot sees both
-- alike):
--   * only the rows a semantic pass can ever search: the tutor scope and the topic scopes
--     (student rows are few per learner and read exactly from hag_entries; drawings are
--     never searched by similarity), archived rows left out (never eligible);
--   * the filter's columns and the unit vector in half precision (`halfvec`): half the
--     bytes of the vector, and none of the row's text; kept inline in the row like the
--     vectors of hag_entries (migration 010: toast_tuple_target on every leaf partition);
--   * partitioned so that rows searched together are stored together: the tutor scope in
--     one partition, the topic scopes hashed by topic into 16 (a topic's rows share a
--     partition with about 1/16 of the others instead of the whole table; 16 keeps each
--     partition large enough that a plan prunes to one without the planner paying for
--     hundreds).
-- The read path scans it for candidates and re-ranks them with the exact vectors of
-- hag_entries; the half-precision error is bounded (dial `compact_similarity_error`), so
-- the re-rank proves its answer equals the seed's exact query or falls back to it
-- (hag.retrieval.ranking.rerank_compact, docs/retrieval.md).
--
-- Why not partition hag_entries itself: its primary key would have to carry the partition
-- key, which breaks the foreign keys from hag_edges and every other table that names an
-- entry. The copy costs one extra row write for each insert, each change of scope, topic,
-- maturity, confidence or vector, and each delete (measured in docs/retrieval.md).
-- The triggers fire ALWAYS, also under session_replication_role = replica (the bulk
-- loaders' switch), so that no write path can leave the copy behind.

DO $$
DECLARE
    d integer := (SELECT value::integer FROM hag_meta WHERE key = 'embedding_dim');
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE hag_entry_search (
            search_set        text NOT NULL,  -- 'tutor' | 'topic': no other partition
            id                uuid NOT NULL,
            topic_id          text NOT NULL,
            visibility_scope  text NOT NULL,
            maturity          text NOT NULL,
            confidence        double precision NOT NULL,
            embedding         halfvec(%1$s) NOT NULL
        ) PARTITION BY LIST (search_set)$ddl$, d);
END
$$;

CREATE TABLE hag_entry_search_tutor PARTITION OF hag_entry_search FOR VALUES IN ('tutor')
    WITH (toast_tuple_target = 8160);
CREATE TABLE hag_entry_search_topic PARTITION OF hag_entry_search FOR VALUES IN ('topic')
    PARTITION BY HASH (topic_id);

DO $$
BEGIN
    FOR r IN 0..15 LOOP
        EXECUTE format(
            'CREATE TABLE hag_entry_search_topic_%s PARTITION OF hag_entry_search_topic '
            'FOR VALUES WITH (MODULUS 16, REMAINDER %s) WITH (toast_tuple_target = 8160)',
            lpad(r::text, 2, '0'), r);
    END LOOP;
END
$$;

-- The eligible rows of one topic (or of the tutor scope) as btree ranges, as migration 040
-- does for hag_entries; `id` for the triggers' deletes.
CREATE INDEX hag_entry_search_eligible_idx
    ON hag_entry_search (topic_id, visibility_scope, maturity, confidence);
CREATE INDEX hag_entry_search_tutor_eligible_idx
    ON hag_entry_search_tutor (maturity, confidence);
CREATE INDEX hag_entry_search_id_idx ON hag_entry_search (id);

-- Which copy a row belongs to: 'tutor', 'topic', or NULL (not searched by similarity).
CREATE FUNCTION hag_entry_search_set(p_visibility_scope text, p_maturity text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
               WHEN p_maturity = 'archived' THEN NULL
               WHEN p_visibility_scope = 'tutor' THEN 'tutor'
               WHEN p_visibility_scope = 'visual' OR p_visibility_scope LIKE 'student%' THEN NULL
               ELSE 'topic'
           END
$$;

CREATE FUNCTION hag_entry_search_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_entry_search;
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        DELETE FROM hag_entry_search s USING old_rows o WHERE s.id = o.id;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        -- Only rows whose searched columns changed: grading counters, last_matched_at and
        -- texts leave the copy alone.
        DELETE FROM hag_entry_search s
        USING old_rows o
        WHERE s.id = o.id
          AND NOT EXISTS (
                SELECT 1 FROM new_rows n
                WHERE n.id = o.id
                  AND (n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding)
                      IS NOT DISTINCT FROM
                      (o.topic_id, o.visibility_scope, o.maturity, o.confidence, o.embedding));
        INSERT INTO hag_entry_search
            (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
        SELECT hag_entry_search_set(n.visibility_scope, n.maturity), n.id, n.topic_id,
               n.visibility_scope, n.maturity, n.confidence, l2_normalize(n.embedding)::halfvec
        FROM new_rows n
        WHERE hag_entry_search_set(n.visibility_scope, n.maturity) IS NOT NULL
          AND NOT EXISTS (
                SELECT 1 FROM old_rows o
                WHERE o.id = n.id
                  AND (n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding)
                      IS NOT DISTINCT FROM
                      (o.topic_id, o.visibility_scope, o.maturity, o.confidence, o.embedding));
        RETURN NULL;
    END IF;
    INSERT INTO hag_entry_search
        (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
    SELECT hag_entry_search_set(n.visibility_scope, n.maturity), n.id, n.topic_id,
           n.visibility_scope, n.maturity, n.confidence, l2_normalize(n.embedding)::halfvec
    FROM new_rows n
    WHERE hag_entry_search_set(n.visibility_scope, n.maturity) IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER hag_entries_search_insert AFTER INSERT ON hag_entries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_entry_search_sync();
CREATE TRIGGER hag_entries_search_update AFTER UPDATE ON hag_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_entry_search_sync();
CREATE TRIGGER hag_entries_search_delete AFTER DELETE ON hag_entries
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_entry_search_sync();
CREATE TRIGGER hag_entries_search_truncate AFTER TRUNCATE ON hag_entries
    FOR EACH STATEMENT EXECUTE FUNCTION hag_entry_search_sync();
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_search_insert;
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_search_update;
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_search_delete;
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_search_truncate;

-- The memory as it stands, carried over.
INSERT INTO hag_entry_search
    (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
SELECT hag_entry_search_set(e.visibility_scope, e.maturity), e.id, e.topic_id,
       e.visibility_scope, e.maturity, e.confidence, l2_normalize(e.embedding)::halfvec
FROM hag_entries e
WHERE hag_entry_search_set(e.visibility_scope, e.maturity) IS NOT NULL;
