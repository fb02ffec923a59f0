-- Why: the re-weigh's chance term reads how many concepts a prerequisite's topic graph holds
-- (its live anchored entries: topic, scope, not `_unanchored_`, not archived). The evidence
-- read counted them at every read: 21-35 ms for a topic of 20,000 entries, paid by each
-- session-end pass for its own topic and by the nightly for every graph it touches (1.0 to
-- 1.8 s for 50 such topics at 1M; docs/journal/2026-12-06-graph-concept-counts.md). A count that
-- grows with the topic does not belong in a read that runs at every session's end.
--
-- The count is now kept at write time, as changes: every statement that inserts, updates
-- or deletes entries appends one row per graph whose count it moved, with the signed
-- difference; a TRUNCATE of the entries empties the counts. A graph's count is the sum of its rows. Appending never waits: two
-- sessions that each add a concept to one topic write two rows, where one counter row
-- would have held each of them until the other committed (and could deadlock two writers
-- that touch two graphs in opposite orders). The nightly folds each graph's rows into one
-- (`hag.evidence.store.fold_graph_counts`), so a read sums at most a day's changes (a
-- learner's own graphs aside: their rows are the learner's few writes).
-- Which entries count is defined here once, in the trigger and the carried-over count
-- below; a change to it needs a migration that recounts.
-- The triggers fire ALWAYS, also under session_replication_role = replica (the bulk
-- loaders' switch), as the search copy's do: no write path can leave a count behind.
-- A graph of a learner's own scope names the learner: the erasure deletes its rows
-- (privacy.sql `erase_private_graph_counts`) once the learner's entries are gone.
CREATE TABLE hag_graph_concepts (
    topic_id          text NOT NULL,
    visibility_scope  text NOT NULL,
    concepts          bigint NOT NULL  -- a change; the graph's count is the sum of its rows
);
CREATE INDEX hag_graph_concepts_graph_idx
    ON hag_graph_concepts (topic_id, visibility_scope) INCLUDE (concepts);

CREATE FUNCTION hag_graph_concepts_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        -- a DELETE: a TRUNCATE naming both tables would refuse a TRUNCATE of this one here
        DELETE FROM hag_graph_concepts;
    ELSIF TG_OP = 'INSERT' THEN
        INSERT INTO hag_graph_concepts (topic_id, visibility_scope, concepts)
        SELECT n.topic_id, n.visibility_scope, count(*)
        FROM new_rows n
        WHERE n.concept_slug <> '_unanchored_' AND n.maturity <> 'archived'
        GROUP BY 1, 2;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO hag_graph_concepts (topic_id, visibility_scope, concepts)
        SELECT o.topic_id, o.visibility_scope, -count(*)
        FROM old_rows o
        WHERE o.concept_slug <> '_unanchored_' AND o.maturity <> 'archived'
        GROUP BY 1, 2;
    ELSE
        -- an update moves a count only when it archives or revives an entry, anchors or
        -- unanchors it, or moves it to another graph: the rows that counted before, less,
        -- and after, more, net per graph (most updates net to nothing and write no row)
        INSERT INTO hag_graph_concepts (topic_id, visibility_scope, concepts)
        SELECT c.topic_id, c.visibility_scope, sum(c.d)
        FROM (SELECT n.topic_id, n.visibility_scope, 1 AS d
              FROM new_rows n
              WHERE n.concept_slug <> '_unanchored_' AND n.maturity <> 'archived'
              UNION ALL
              SELECT o.topic_id, o.visibility_scope, -1
              FROM old_rows o
              WHERE o.concept_slug <> '_unanchored_' AND o.maturity <> 'archived') c
        GROUP BY 1, 2
        HAVING sum(c.d) <> 0;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER hag_entries_graph_concepts_insert AFTER INSERT ON hag_entries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_graph_concepts_sync();
CREATE TRIGGER hag_entries_graph_concepts_update AFTER UPDATE ON hag_entries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_graph_concepts_sync();
CREATE TRIGGER hag_entries_graph_concepts_delete AFTER DELETE ON hag_entries
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION hag_graph_concepts_sync();
CREATE TRIGGER hag_entries_graph_concepts_truncate AFTER TRUNCATE ON hag_entries
    FOR EACH STATEMENT EXECUTE FUNCTION hag_graph_concepts_sync();
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_graph_concepts_insert;
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_graph_concepts_update;
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_graph_concepts_delete;
ALTER TABLE hag_entries ENABLE ALWAYS TRIGGER hag_entries_graph_concepts_truncate;

-- The memory as it stands, counted once.
INSERT INTO hag_graph_concepts (topic_id, visibility_scope, concepts)
SELECT e.topic_id, e.visibility_scope, count(*)
FROM hag_entries e
WHERE e.concept_slug <> '_unanchored_' AND e.maturity <> 'archived'
GROUP BY 1, 2;
