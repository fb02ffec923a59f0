-- name: export_entries
-- Every entry with its columns as keys; the embedding only when asked for.
SELECT id, topic_id, concept_slug, visibility_scope, maturity, confidence,
       concept_match_quality, instruction,
       CASE WHEN %(with_embeddings)s THEN embedding END AS embedding,
       success_count, failure_count, last_matched_at, created_at, updated_at
FROM hag_entries
WHERE (%(topic_id)s::text IS NULL OR topic_id = %(topic_id)s::text)
ORDER BY topic_id, visibility_scope, concept_slug, id

-- name: export_edges
-- Every edge with its columns as keys (optionally those leaving entries of one topic).
SELECT e.id, e.source_entry_id, e.target_entry_id, e.edge_type, e.condition, e.confidence,
       e.hit_count, e.source_type, e.source_session_id, e.traversal_count,
       e.last_traversed_at, e.created_at, e.updated_at, e.unlearned_from, e.prior_confidence
FROM hag_edges e
JOIN hag_entries s ON s.id = e.source_entry_id
WHERE (%(topic_id)s::text IS NULL OR s.topic_id = %(topic_id)s::text)
ORDER BY s.topic_id, e.source_entry_id, e.edge_type, e.target_entry_id

-- name: graph_summary
-- Entries per graph (topic scopes, tutor, student, visual) and maturity, for the demo.
SELECT CASE WHEN visibility_scope = 'tutor' THEN 'tutor'
            WHEN visibility_scope = 'visual' THEN 'visual'
            WHEN visibility_scope LIKE 'student:%%' THEN 'student'
            ELSE 'topic' END AS graph,
       count(*) AS entries,
       count(*) FILTER (WHERE maturity = 'proven') AS proven,
       count(*) FILTER (WHERE maturity = 'pattern') AS pattern,
       count(*) FILTER (WHERE maturity = 'candidate') AS candidate,
       count(*) FILTER (WHERE maturity = 'archived') AS archived,
       count(DISTINCT topic_id) AS topics
FROM hag_entries
GROUP BY 1
ORDER BY 1

-- name: topic_summary
-- Per topic: public entries, edges leaving them by provenance, orphans as enrichment counts
-- them (the view of migration 041: anchored, not archived, no edge in or out).
SELECT t.topic_id, t.title,
       (SELECT count(*) FROM hag_entries e
         WHERE e.topic_id = t.topic_id AND e.visibility_scope NOT IN ('tutor', 'visual')
           AND e.visibility_scope NOT LIKE 'student:%%') AS entries,
       (SELECT count(*) FROM hag_edges g JOIN hag_entries s ON s.id = g.source_entry_id
         WHERE s.topic_id = t.topic_id) AS edges,
       (SELECT count(*) FROM hag_edges g JOIN hag_entries s ON s.id = g.source_entry_id
         WHERE s.topic_id = t.topic_id AND g.source_type = 'seed') AS seed_edges,
       (SELECT count(*) FROM hag_edges g JOIN hag_entries s ON s.id = g.source_entry_id
         WHERE s.topic_id = t.topic_id AND g.source_type = 'learned') AS learned_edges,
       (SELECT count(*) FROM hag_edges g JOIN hag_entries s ON s.id = g.source_entry_id
         WHERE s.topic_id = t.topic_id AND g.source_type = 'enriched') AS enriched_edges,
       (SELECT count(*) FROM hag_orphan_entries o WHERE o.topic_id = t.topic_id) AS orphans
FROM hag_topics t
ORDER BY t.topic_id

-- name: unreadable_timestamps
-- Stored timestamps no client can read back (year 0, year 10000), by table, row and column:
-- a read that failed on one names where it is (hag_unreadable_timestamps).
SELECT table_name, row_key, column_name, stored FROM hag_unreadable_timestamps() LIMIT 5

-- name: topic_exists
-- Whether a topic id is known: a command naming a missing topic is refused, not answered empty.
SELECT EXISTS (SELECT 1 FROM hag_topics WHERE topic_id = %(topic_id)s) AS found
