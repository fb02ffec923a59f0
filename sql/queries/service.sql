-- name: edge_now
-- An edge as it stands (for `GET /v1/edges/{id}/explain`), or, once culled, what its
-- newest audit row kept: the ends and type survive the cull, the confidence does not.
-- No row: the id is an entry's.
SELECT e.id, e.edge_type, e.source_entry_id, e.target_entry_id, e.confidence,
       false AS culled
FROM hag_edges e
WHERE e.id = %(edge_id)s
UNION ALL
(SELECT a.edge_id, a.edge_type, a.source_entry_id, a.target_entry_id, NULL, true
 FROM hag_edge_audit a
 WHERE a.edge_id = %(edge_id)s AND NOT EXISTS (SELECT 1 FROM hag_edges WHERE id = %(edge_id)s)
 ORDER BY a.deleted_at DESC
 LIMIT 1)
