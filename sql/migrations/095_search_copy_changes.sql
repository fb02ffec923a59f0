-- Why: at 1M x 384 a topic pass through the search copy (migration 080) still spends about
-- 4.5 ms in PostgreSQL's per-row work over ~8,000 eligible rows, where the same product in
-- numpy over rows already in memory takes 0.3 ms (issue 15, docs/retrieval.md). The read path
-- may keep a searched set's eligible rows in its own memory (hag.retrieval.resident), but only
-- if it can tell, in the same snapshot as each answer, that the set has not changed since it
-- read them. This table is how.
--
-- hag_entry_search_changes: one row per statement that changed a searched set's rows in the
-- copy (an insert, a delete, or a change of topic, scope, maturity, confidence or vector),
-- per set it touched ('tutor', or 'topic:' || topic_id). The trigger that keeps the copy
-- writes it in the same transaction. A set's stamp is the sum of `changes` over its rows and
-- over the rows of set '*' (every set: a TRUNCATE of hag_entries, or a bulk backfill).
-- Each row adds a random amount (1 to 2^31 - 1), not 1: a sum then names which writers it
-- saw, not only how many, so two servers that made the same number of writes visible in
-- different orders (a primary and its standby), or two histories of one database (a
-- failover, a restore), do not meet at one stamp with different rows (a collision needs
-- two random sums to agree: about 1 in 2^31).
--
-- Why a sum over appended rows, and not a counter per set: a counter row would be locked by
-- every writer of its set until commit, so two session-ends on one topic would queue behind
-- each other (and two sets updated in opposite orders could deadlock). Appended rows lock
-- nothing. Snapshots of one server are nested (a later one sees every transaction an earlier
-- one saw), so two snapshots that see the same sum for a set see the same committed writers
-- of it, and so the same rows: the resident copy of a set read at stamp s is the set at
-- every snapshot whose stamp is s. Across servers and histories the random amounts above
-- keep that true but for a 1 in 2^31 chance; the reader also re-checks each candidate
-- against the set's filter, so a missed change drops the set instead of answering wrong.
--
-- The nightly run folds each set's rows into one (hag.retrieval.ann.nightly_upkeep, query
-- search_changes_fold): the sum is unchanged, in one statement. Never truncate this table
-- while readers run: a sum that falls back could meet an old stamp again.
CREATE TABLE hag_entry_search_changes (
    set_key  text   NOT NULL,  -- 'tutor' | 'topic:<topic_id>' | '*'
    changes  bigint NOT NULL DEFAULT (1 + floor(random() * 2147483646))::bigint
             CHECK (changes > 0)
);
CREATE INDEX hag_entry_search_changes_key_idx ON hag_entry_search_changes (set_key)
    INCLUDE (changes);

CREATE FUNCTION hag_entry_search_key(p_search_set text, p_topic_id text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE p_search_set WHEN 'tutor' THEN 'tutor' ELSE 'topic:' || p_topic_id END
$$;

-- The copy's trigger (migration 080), now also recording which sets each statement changed.
CREATE OR REPLACE FUNCTION hag_entry_search_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        TRUNCATE hag_entry_search;
        INSERT INTO hag_entry_search_changes (set_key) VALUES ('*');
        RETURN NULL;
    END IF;
    IF TG_OP = 'DELETE' THEN
        WITH gone AS (
            DELETE FROM hag_entry_search s USING old_rows o WHERE s.id = o.id
            RETURNING s.search_set, s.topic_id
        )
        INSERT INTO hag_entry_search_changes (set_key)
        SELECT DISTINCT hag_entry_search_key(search_set, topic_id) FROM gone;
        RETURN NULL;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        -- Only rows whose searched columns changed: grading counters, last_matched_at and
        -- texts leave the copy (and its stamps) alone.
        WITH gone AS (
            DELETE FROM hag_entry_search s
            USING old_rows o
            WHERE s.id = o.id
              AND NOT EXISTS (
                    SELECT 1 FROM new_rows n
                    WHERE n.id = o.id
                      AND (n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding)
                          IS NOT DISTINCT FROM
                          (o.topic_id, o.visibility_scope, o.maturity, o.confidence, o.embedding))
            RETURNING s.search_set, s.topic_id
        ), added AS (
            INSERT INTO hag_entry_search
                (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
            SELECT hag_entry_search_set(n.visibility_scope, n.maturity), n.id, n.topic_id,
                   n.visibility_scope, n.maturity, n.confidence,
                   l2_normalize(n.embedding)::halfvec
            FROM new_rows n
            WHERE hag_entry_search_set(n.visibility_scope, n.maturity) IS NOT NULL
              AND NOT EXISTS (
                    SELECT 1 FROM old_rows o
                    WHERE o.id = n.id
                      AND (n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding)
                          IS NOT DISTINCT FROM
                          (o.topic_id, o.visibility_scope, o.maturity, o.confidence, o.embedding))
            RETURNING search_set, topic_id
        )
        INSERT INTO hag_entry_search_changes (set_key)
        SELECT DISTINCT hag_entry_search_key(search_set, topic_id)
        FROM (SELECT * FROM gone UNION ALL SELECT * FROM added) changed;
        RETURN NULL;
    END IF;
    WITH added AS (
        INSERT INTO hag_entry_search
            (search_set, id, topic_id, visibility_scope, maturity, confidence, embedding)
        SELECT hag_entry_search_set(n.visibility_scope, n.maturity), n.id, n.topic_id,
               n.visibility_scope, n.maturity, n.confidence, l2_normalize(n.embedding)::halfvec
        FROM new_rows n
        WHERE hag_entry_search_set(n.visibility_scope, n.maturity) IS NOT NULL
        RETURNING search_set, topic_id
    )
    INSERT INTO hag_entry_search_changes (set_key)
    SELECT DISTINCT hag_entry_search_key(search_set, topic_id) FROM added;
    RETURN NULL;
END
$$;
