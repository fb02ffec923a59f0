-- name: edge_now
-- One edge as it stands, with the concepts and topic of its two entries, for the public
-- API's explanation of an edge (hag/api.py); no row when the edge does not exist (culled).
SELECT e.id AS edge_id, e.edge_type, e.confidence, e.source_type, e.condition,
       e.traversal_count, e.hit_count, s.topic_id, s.concept_slug AS source_concept,
       t.concept_slug AS target_concept
FROM hag_edges e
JOIN hag_entries s ON s.id = e.source_entry_id
JOIN hag_entries t ON t.id = e.target_entry_id
WHERE e.id = %(edge_id)s
