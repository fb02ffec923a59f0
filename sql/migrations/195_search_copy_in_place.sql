-- Why: the nightly at 1M + 1M took 18.0 s where it took 7.6 s before the search copy
-- (issue 26), and promotion and archiving spent most of theirs in the copy's UPDATE trigger
-- (migrations 080, 095, 160, 185): every changed entry deleted its copy row by probe and
-- inserted a new one, and the trigger joined the old and new transition tables twice (once
-- each way) to find them. A promotion keeps its row in the same searched set (same set, same
-- topic, so the same partition): its copy row can be updated where it stands.
--
-- The UPDATE branch now joins old and new rows once, and sorts each changed row into one of:
--   * kept in its set (the old and the new row are searched in the same set and topic): the
--     copy row is updated in place, by probe (hag_entry_search_restate, below), its vector
--     recomputed only when the entry's vector changed. A row the copy lacks (it never should)
--     is inserted, as before;
--   * moved or gone (the set or topic changed, or the row is no longer searched: archived):
--     deleted by probe (hag_entry_search_forget, migration 185) and, when searched again,
--     inserted in its new set;
--   * new to the copy (not searched before): inserted.
-- The change rows are the same per set and statement; each lists the ids it changed in its
-- set, an id updated in place once (it was listed twice, deleted and added).
-- Measured in docs/journal/2026-12-02-nightly-under-8s.md.

-- Update copy rows in place by (id, set, topic): one index probe each in the partition that
-- holds the row (run-time pruning), with hash and merge joins off for this one statement as
-- in hag_entry_search_forget. A NULL vector keeps the row's own. Returns the rows updated.
CREATE FUNCTION hag_entry_search_restate(
    p_ids uuid[], p_sets text[], p_topics text[], p_scopes text[], p_maturities text[],
    p_confidences double precision[], p_embeddings halfvec[]
)
RETURNS TABLE (search_set text, topic_id text, id uuid)
LANGUAGE sql VOLATILE
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
    UPDATE hag_entry_search s
    SET visibility_scope = c.visibility_scope,
        maturity = c.maturity,
        confidence = c.confidence,
        embedding = COALESCE(c.embedding, s.embedding)
    FROM unnest(p_ids, p_sets, p_topics, p_scopes, p_maturities, p_confidences, p_embeddings)
         AS c(id, search_set, topic_id, visibility_scope, maturity, confidence, embedding)
    WHERE s.id = c.id AND s.search_set = c.search_set AND s.topic_id = c.topic_id
    RETURNING s.search_set, s.topic_id, s.id
$$;

CREATE OR REPLACE FUNCTION hag_entry_search_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_ids          uuid[];
    v_sets         text[];
    v_topics       text[];
    v_scopes       text[];
    v_maturities   text[];
    v_confidences  double precision[];
    v_vectors      halfvec[];
    v_gone_ids     uuid[];
    v_gone_sets    text[];
    v_gone_topics  text[];
    v_add_ids      uuid[];
    v_add_sets     text[];
    v_add_topics   text[];
    v_add_scopes   text[];
    v_add_maturity text[];
    v_add_conf     double precision[];
    v_add_vectors  halfvec[];
    v_kept_ids     uuid[];
    v_kept_keys    text[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_entry_search;
        INSERT INTO hag_entry_search_changes (set_key) VALUES ('*');
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        SELECT array_agg(o.id), array_agg(hag_entry_search_set(o.visibility_scope, o.maturity)),
               array_agg(o.topic_id)
        INTO v_ids, v_sets, v_topics
        FROM old_rows o
        WHERE hag_entry_search_set(o.visibility_scope, o.maturity) IS NOT NULL;
        INSERT INTO hag_entry_search_changes (set_key, ids)
        SELECT hag_entry_search_key(f.search_set, f.topic_id), array_agg(f.id)
        FROM hag_entry_search_forget(v_ids, v_sets, v_topics) f
        GROUP BY 1;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        -- Only rows whose searched columns changed: grading counters, last_matched_at and
        -- texts leave the copy (and its stamps) alone. One join of the old and new rows
        -- sorts each changed row: kept in its set (updated in place), gone from its set
        -- (deleted), searched in a set it was not in (inserted); a move is gone + inserted.
        SELECT array_agg(c.id) FILTER (WHERE c.kept),
               array_agg(c.new_set) FILTER (WHERE c.kept),
               array_agg(c.topic_id) FILTER (WHERE c.kept),
               array_agg(c.visibility_scope) FILTER (WHERE c.kept),
               array_agg(c.maturity) FILTER (WHERE c.kept),
               array_agg(CASE WHEN c.new_vector THEN l2_normalize(c.embedding)::halfvec END)
                   FILTER (WHERE c.kept),
               array_agg(c.confidence) FILTER (WHERE c.kept),
               array_agg(c.id) FILTER (WHERE c.old_set IS NOT NULL AND NOT c.kept),
               array_agg(c.old_set) FILTER (WHERE c.old_set IS NOT NULL AND NOT c.kept),
               array_agg(c.old_topic) FILTER (WHERE c.old_set IS NOT NULL AND NOT c.kept),
               array_agg(c.id) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.new_set) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.topic_id) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.visibility_scope) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.maturity) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(c.confidence) FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept),
               array_agg(l2_normalize(c.embedding)::halfvec)
                   FILTER (WHERE c.new_set IS NOT NULL AND NOT c.kept)
        INTO v_ids, v_sets, v_topics, v_scopes, v_maturities, v_vectors, v_confidences,
             v_gone_ids, v_gone_sets, v_gone_topics,
             v_add_ids, v_add_sets, v_add_topics, v_add_scopes, v_add_maturity, v_add_conf,
             v_add_vectors
        FROM (
            SELECT n.id, n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding,
                   n.embedding IS DISTINCT FROM o.embedding AS new_vector,
                   s.old_set, o.topic_id AS old_topic, s.new_set,
                   COALESCE(s.old_set = s.new_set AND o.topic_id = n.topic_id, false) AS kept
            FROM old_rows o
            JOIN new_rows n ON n.id = o.id
            CROSS JOIN LATERAL (
                SELECT hag_entry_search_set(o.visibility_scope, o.maturity) AS old_set,
                       hag_entry_search_set(n.visibility_scope, n.maturity) AS new_set
            ) s
            WHERE (n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding)
                  IS DISTINCT FROM
                  (o.topic_id, o.visibility_scope, o.maturity, o.confidence, o.embedding)
              AND (s.old_set IS NOT NULL OR s.new_set IS NOT NULL)
        ) c;
        IF v_ids IS NULL AND v_gone_ids IS NULL AND v_add_ids IS NULL THEN
            RETURN NULL;
        END IF;
        SELECT array_agg(r.id), array_agg(hag_entry_search_key(r.search_set, r.topic_id))
        INTO v_kept_ids, v_kept_keys
        FROM hag_entry_search_restate(v_ids, v_sets, v_topics, v_scopes, v_maturities,
                                      v_confidences, v_vectors) r;
        IF cardinality(v_kept_ids) IS DISTINCT FROM cardinality(v_ids) THEN
            -- A kept row the copy lacked (it never should): inserted, as a moved row is.
            SELECT v_add_ids || array_agg(c.id), v_add_sets || array_agg(c.search_set),
                   v_add_topics || array_agg(c.topic_id),
                   v_add_scopes || array_agg(n.visibility_scope),
                   v_add_maturity || array_agg(n.maturity),
                   v_add_conf || array_agg(n.confidence),
                   v_add_vectors || array_agg(l2_normalize(n.embedding)::halfvec)
            INTO v_add_ids, v_add_sets, v_add_topics, v_add_scopes, v_add_maturity, v_add_conf,
                 v_add_vectors
            FROM unnest(v_ids, v_sets, v_topics) AS c(id, search_set, topic_id)
            JOIN new_rows n ON n.id = c.id
            WHERE c.id NOT IN (SELECT unnest(v_kept_ids));
        END IF;
        WITH gone AS (
            SELECT f.search_set, f.topic_id, f.id
            FROM hag_entry_search_forget(v_gone_ids, v_gone_sets, v_gone_topics) f
        ), added AS (
            INSERT INTO hag_entry_search
                (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
            SELECT * FROM unnest(v_add_sets, v_add_ids, v_add_topics, v_add_scopes,
                                 v_add_maturity, v_add_conf, v_add_vectors)
            RETURNING search_set, topic_id, id
        )
        INSERT INTO hag_entry_search_changes (set_key, ids)
        SELECT set_key, array_agg(id)
        FROM (SELECT k.set_key, k.id FROM unnest(v_kept_keys, v_kept_ids) AS k(set_key, id)
              UNION ALL
              SELECT hag_entry_search_key(search_set, topic_id), id FROM gone
              UNION ALL
              SELECT hag_entry_search_key(search_set, topic_id), id FROM added) changed
        GROUP BY 1;
        RETURN NULL;
    END IF;
    WITH added AS (
        INSERT INTO hag_entry_search
            (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
        SELECT hag_entry_search_set(n.visibility_scope, n.maturity), n.id, n.topic_id,
               n.visibility_scope, n.maturity, n.confidence, l2_normalize(n.embedding)::halfvec
        FROM new_rows n
        WHERE hag_entry_search_set(n.visibility_scope, n.maturity) IS NOT NULL
        RETURNING search_set, topic_id, id
    )
    INSERT INTO hag_entry_search_changes (set_key, ids)
    SELECT hag_entry_search_key(search_set, topic_id), array_agg(id)
    FROM added
    GROUP BY 1;
    RETURN NULL;
END
$$;
