-- Why: a resident set (hag.retrieval.resident) was dropped and read again whenever its set's
-- stamp (migration 095) moved, and at load every session-end moves its topic's stamp: with
-- sessions arriving the resident sets answered 6-18% of topic passes, the rest went through
-- the copy while the set was read again (26-220 ms at 1M x 1,536; issue 26). A change row
-- named the set a statement changed, not its rows, so the reader could not apply the change.
--
-- Each change row now also says which rows and which transaction:
--   * `ids`: the ids of the rows of the copy the statement deleted or added in that set (an
--     update that changes a searched column deletes and adds the row; an id may be listed
--     twice). NULL when the rows are not known: set '*' (a TRUNCATE, a bulk backfill), the
--     rows carried over from before this migration, and the nightly fold's one row per set.
--   * `xid`: the writing transaction's id (pg_current_xact_id, 64 bits, never wraps).
-- A reader that read a set in snapshot S (pg_current_snapshot, in the same statement as its
-- rows) reads, in a later snapshot, the set's change rows whose transaction S does not see
-- (pg_visible_in_snapshot): the writers committed since. Their ids are the only rows of the
-- set that can differ from what it holds; it reads those rows again and applies them. It
-- keeps the result only when its old stamp plus the `changes` of those rows is the new stamp
-- (so a change it missed, or a fold, sends it back to a full read), and when none of them
-- has NULL `ids`.
--
-- The index serves both reads: the stamp's sum by set (an index-only scan, as before) and
-- the rows of a set past a snapshot's xmin. Write cost: one array of the changed ids per
-- set and statement, in the row the trigger already writes (measured in
-- docs/journal/2026-12-02-mixed-load-following-writes.md).
ALTER TABLE hag_entry_search_changes ADD COLUMN xid xid8, ADD COLUMN ids uuid[];
ALTER TABLE hag_entry_search_changes ALTER COLUMN xid SET DEFAULT pg_current_xact_id();

DROP INDEX hag_entry_search_changes_key_idx;
CREATE INDEX hag_entry_search_changes_key_idx ON hag_entry_search_changes (set_key, xid)
    INCLUDE (changes);

-- The delete by probe (migration 160), now returning each deleted row's id too.
DROP FUNCTION hag_entry_search_forget(uuid[], text[], text[]);
CREATE FUNCTION hag_entry_search_forget(p_ids uuid[], p_sets text[], p_topics text[])
RETURNS TABLE (search_set text, topic_id text, id uuid)
LANGUAGE sql VOLATILE
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
    DELETE FROM hag_entry_search s
    USING unnest(p_ids, p_sets, p_topics) AS c(id, search_set, topic_id)
    WHERE s.id = c.id AND s.search_set = c.search_set AND s.topic_id = c.topic_id
    RETURNING s.search_set, s.topic_id, s.id
$$;

-- The copy's trigger (migrations 080, 095, 160): the same rows written; each change row now
-- lists the ids it changed in its set.
CREATE OR REPLACE FUNCTION hag_entry_search_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_ids    uuid[];
    v_sets   text[];
    v_topics text[];
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
        -- texts leave the copy (and its stamps) alone.
        SELECT array_agg(o.id), array_agg(hag_entry_search_set(o.visibility_scope, o.maturity)),
               array_agg(o.topic_id)
        INTO v_ids, v_sets, v_topics
        FROM old_rows o
        WHERE hag_entry_search_set(o.visibility_scope, o.maturity) IS NOT NULL
          AND NOT EXISTS (
                SELECT 1 FROM new_rows n
                WHERE n.id = o.id
                  AND (n.topic_id, n.visibility_scope, n.maturity, n.confidence, n.embedding)
                      IS NOT DISTINCT FROM
                      (o.topic_id, o.visibility_scope, o.maturity, o.confidence, o.embedding));
        WITH gone AS (
            SELECT f.search_set, f.topic_id, f.id
            FROM hag_entry_search_forget(v_ids, v_sets, v_topics) f
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
            RETURNING search_set, topic_id, id
        )
        INSERT INTO hag_entry_search_changes (set_key, ids)
        SELECT hag_entry_search_key(search_set, topic_id), array_agg(id)
        FROM (SELECT * FROM gone UNION ALL SELECT * FROM added) changed
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
