-- Why: the nightly sweep at 1M entries + 1M edges took 18.0 s where it took 7.6 s before the
-- search copy (migration 080) and the learner reports (migration 091) (issue 26). Measured
-- with EXPLAIN ANALYZE at 300k + 300k, the time went to three things that scale with the
-- table rather than with the rows a statement changes:
--
--   * the search copy's UPDATE and DELETE triggers joined the changed rows to the whole copy
--     (a merge join over a sort of every copy row, spilled to disk: 2.7 s of a 4.3 s trigger
--     for 7,339 promoted rows at 300k). The rows a statement changes are found in the
--     transition tables (a hash join between them, as before), then each is deleted from the
--     copy by its id, set and topic: one index probe in the one partition that holds it
--     (run-time partition pruning), whatever the size of the copy. The probe is a helper
--     with the hash and merge joins turned off for its one statement, so the planner, which
--     does not count the pruning, never trades the probes for a scan of every partition.
--   * the ON DELETE CASCADE of hag_edge_learner_reports is a row trigger: the cull ran one
--     probe per deleted edge (65,452 calls, 0.7 s at 300k). It is replaced by a statement
--     trigger that deletes the reports of every deleted edge in one join over the same
--     transition table the audit trigger reads; a constraint trigger on the reports keeps
--     the other half of the foreign key (a report names an edge that exists, which it locks
--     FOR KEY SHARE as the foreign key did, so a concurrent cull waits for the session).
--     The rest of the cull's cost is the audit's insert of every deleted row (unchanged).
--
-- Same results, same transaction: what the triggers write is unchanged (tests/test_sweeps.py,
-- test_audit.py, test_retrieval_search_copy.py, test_retrieval_resident.py).

-- Delete changed rows from the search copy by (id, set, topic): one index probe each, in the
-- partition that holds the row. Returns the (set, topic) of each row deleted, for the stamps.
CREATE FUNCTION hag_entry_search_forget(p_ids uuid[], p_sets text[], p_topics text[])
RETURNS TABLE (search_set text, topic_id text)
LANGUAGE sql VOLATILE
SET enable_hashjoin = off
SET enable_mergejoin = off
AS $$
    DELETE FROM hag_entry_search s
    USING unnest(p_ids, p_sets, p_topics) AS c(id, search_set, topic_id)
    WHERE s.id = c.id AND s.search_set = c.search_set AND s.topic_id = c.topic_id
    RETURNING s.search_set, s.topic_id
$$;

-- The copy's trigger (migrations 080, 095): the same rows written, the deletes by probe.
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
        INSERT INTO hag_entry_search_changes (set_key)
        SELECT DISTINCT hag_entry_search_key(f.search_set, f.topic_id)
        FROM hag_entry_search_forget(v_ids, v_sets, v_topics) f;
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
            SELECT f.search_set, f.topic_id FROM hag_entry_search_forget(v_ids, v_sets, v_topics) f
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

-- The learner reports' foreign key, as two triggers: the reports of deleted edges go in one
-- statement (was ON DELETE CASCADE, a probe per edge), and a report must name an edge that
-- exists (was the constraint's insert check, row by row as before: a session writes few).
ALTER TABLE hag_edge_learner_reports DROP CONSTRAINT hag_edge_learner_reports_edge_id_fkey;

CREATE FUNCTION hag_edge_reports_cascade() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN  -- as TRUNCATE ... CASCADE followed the foreign key
        TRUNCATE hag_edge_learner_reports;
    ELSE
        DELETE FROM hag_edge_learner_reports r USING old_edges o WHERE r.edge_id = o.id;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER hag_edges_reports_cascade
    AFTER DELETE ON hag_edges
    REFERENCING OLD TABLE AS old_edges
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_reports_cascade();
CREATE TRIGGER hag_edges_reports_truncate
    AFTER TRUNCATE ON hag_edges
    FOR EACH STATEMENT EXECUTE FUNCTION hag_edge_reports_cascade();

CREATE FUNCTION hag_edge_report_names_edge() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM hag_edges e WHERE e.id = NEW.edge_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE foreign_key_violation USING MESSAGE = format(
            'hag_edge_learner_reports: edge %s does not exist', NEW.edge_id);
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER hag_edge_learner_reports_edge_exists
    AFTER INSERT OR UPDATE OF edge_id ON hag_edge_learner_reports
    FOR EACH ROW EXECUTE FUNCTION hag_edge_report_names_edge();
