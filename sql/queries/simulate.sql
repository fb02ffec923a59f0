-- name: topic_entry_concepts
-- Entry id -> concept slug for the topic graph of one topic (what a walked edge points at).
-- The simulator reads this; it never writes to the memory except through ingest.
SELECT id, concept_slug
FROM hag_entries
WHERE topic_id = %(topic_id)s
  AND visibility_scope NOT IN ('tutor', 'visual')
  AND visibility_scope NOT LIKE 'student:%%'
  AND concept_slug <> '_unanchored_'
ORDER BY concept_slug, id

-- name: edge_info
-- Confidence and provenance of edges by id, as they stand now (before this day's processing).
SELECT id, confidence, source_type
FROM hag_edges
WHERE id = ANY(%(ids)s::uuid[])

-- name: topic_edges
-- Every edge between two topic-graph entries of one topic, with both ends' concept slugs:
-- the graph the report scores against the hidden truth and draws.
SELECT g.id, s.concept_slug AS source_slug, t.concept_slug AS target_slug, g.edge_type,
       g.source_type, g.confidence, g.hit_count, g.traversal_count, g.created_at
FROM hag_edges g
JOIN hag_entries s ON s.id = g.source_entry_id
JOIN hag_entries t ON t.id = g.target_entry_id
WHERE s.topic_id = %(topic_id)s AND t.topic_id = %(topic_id)s
  AND s.visibility_scope NOT IN ('tutor', 'visual') AND s.visibility_scope NOT LIKE 'student:%%'
  AND t.visibility_scope NOT IN ('tutor', 'visual') AND t.visibility_scope NOT LIKE 'student:%%'
ORDER BY s.concept_slug, t.concept_slug, g.edge_type

-- name: maturity_counts
-- Entries per graph and maturity across the whole memory (the lifecycle's daily snapshot).
SELECT CASE WHEN visibility_scope = 'tutor' THEN 'tutor'
            WHEN visibility_scope = 'visual' THEN 'visual'
            WHEN visibility_scope LIKE 'student:%%' THEN 'student'
            ELSE 'topic' END AS graph,
       maturity, count(*) AS n
FROM hag_entries
GROUP BY 1, 2
ORDER BY 1, 2

-- name: audit_counts
-- Edges deleted so far, by provenance and reason (the cull audit).
SELECT source_type, edge_type, reason, count(*) AS n
FROM hag_edge_audit
GROUP BY 1, 2, 3
ORDER BY 1, 2, 3

-- name: audit_rows
-- The audit of deleted edges with their ends' slugs (for the report's cull table).
SELECT a.edge_id, a.run_id, a.reason, a.deleted_at, a.edge_type, a.source_type, a.confidence,
       a.hit_count, a.traversal_count, a.created_at, a.restored_at,
       s.concept_slug AS source_slug, t.concept_slug AS target_slug, s.topic_id
FROM hag_edge_audit a
LEFT JOIN hag_entries s ON s.id = a.source_entry_id
LEFT JOIN hag_entries t ON t.id = a.target_entry_id
ORDER BY a.deleted_at, a.audit_id

-- name: enrichment_totals
-- Enrichment so far: orphans sent, proposals accepted and rejected.
SELECT count(*) AS orphans, coalesce(sum(accepted), 0) AS accepted,
       coalesce(sum(rejected), 0) AS rejected
FROM hag_enrichment_ledger

-- name: visible_topic_entries
-- Topic-graph entries of one topic that the retrieval filter can still return (SPEC §3: the
-- global floor and the per-maturity floors, read from the dials), against all of them. An
-- entry graded below its floor is never shown again, so it is never graded again either.
SELECT count(*) AS entries,
       count(*) FILTER (
           WHERE hag_entry_visible(maturity, confidence,
                                   hag_setting_float('retrieval_min_confidence'),
                                   hag_setting_float('floor_proven'),
                                   hag_setting_float('floor_pattern'),
                                   hag_setting_float('floor_candidate'))) AS visible
FROM hag_entries
WHERE topic_id = %(topic_id)s
  AND visibility_scope NOT IN ('tutor', 'visual')
  AND visibility_scope NOT LIKE 'student:%%'
