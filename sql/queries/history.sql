-- name: entity_history
-- Every event of one entry or edge, in the memory's own time: each confidence change (the
-- triggers of migrations 227 and 229 stamp it with the session's ended_at or the run's
-- as_of), each cull of the edge (its audit row, at the run's as_of) and its restore, or the
-- session that resumed its reports in a new edge of its pair. A restore is stamped
-- with the wall clock while a simulated or backfilled memory may run ahead of it, so its
-- time is never before the cull it undoes: one clock, and a restore always follows its cull.
-- `total` counts every event; the newest %(limit)s (all when NULL) are returned, oldest first.
WITH events AS (
    SELECT h.history_id AS seq, 1 AS kind_order, h.entity_kind, h.old_value, h.new_value,
           h.reason, h.session_id, h.run_id,
           GREATEST(h.at, (SELECT max(a.deleted_at) FROM hag_edge_audit a
                           WHERE a.edge_id = h.entity_id AND a.restored_at = h.at
                             AND h.reason = 'restored from the cull audit')) AS at
    FROM hag_confidence_history h
    WHERE h.entity_id = %(entity_id)s
    UNION ALL
    SELECT a.audit_id, 0, 'edge', a.confidence, NULL,
           CASE a.reason WHEN 'cull' THEN 'culled by the nightly sweep'
                         ELSE 'removed (' || a.reason || ')' END
               || ', traversed ' || a.traversal_count || ' time(s)',
           NULL, a.run_id, a.deleted_at
    FROM hag_edge_audit a
    WHERE a.edge_id = %(entity_id)s
    UNION ALL
    -- a cull whose reports a new edge of the pair resumed (store.resume_culled_reports),
    -- never placed before the cull (a late session may have ended before it)
    SELECT a.audit_id, 2, 'edge', NULL, NULL,
           'its reports resumed by edge ' || a.resumed_edge_id || ', which learned the pair again',
           a.resumed_session_id, NULL, GREATEST(a.resumed_at, a.deleted_at)
    FROM hag_edge_audit a
    WHERE a.edge_id = %(entity_id)s AND a.resumed_at IS NOT NULL
),
ordered AS (
    SELECT e.*, count(*) OVER () AS total,
           row_number() OVER (ORDER BY e.at DESC, e.kind_order DESC, e.seq DESC) AS newest
    FROM events e
)
SELECT o.seq AS history_id, o.entity_kind, %(entity_id)s::uuid AS entity_id, o.old_value,
       o.new_value, o.reason, o.session_id, o.run_id, o.at, o.total
FROM ordered o
WHERE %(limit)s::integer IS NULL OR o.newest <= %(limit)s::integer
ORDER BY o.at, o.kind_order, o.seq

-- name: session_known
-- Whether a session was ever ingested, and whether it has been applied.
SELECT session_id, status, applied_seq FROM hag_sessions WHERE session_id = %(session_id)s

-- name: memory_after_session
-- What the memory believed after a session: for every entry and edge, its confidence in
-- the last history row written by that session or by any session applied before it (by
-- applied_seq), or by anything else (loads, sweeps) at or before that session's time. The
-- history of one row is written under that row's lock, so history_id orders its changes.
-- Each row is named by its concept (an edge by both ends and its type) where it still exists.
WITH target AS (
    SELECT applied_seq, ended_at FROM hag_sessions WHERE session_id = %(session_id)s
),
latest AS (
    SELECT DISTINCT ON (h.entity_kind, h.entity_id)
           h.entity_kind, h.entity_id, h.new_value AS confidence, h.reason, h.session_id, h.at
    FROM hag_confidence_history h
    LEFT JOIN hag_sessions s ON s.session_id = h.session_id
    CROSS JOIN target t
    WHERE (s.applied_seq IS NOT NULL AND s.applied_seq <= t.applied_seq)
       OR (h.session_id IS NULL AND h.at <= t.ended_at)
    ORDER BY h.entity_kind, h.entity_id, h.history_id DESC
)
SELECT l.*,
       COALESCE(en.topic_id, src.topic_id) AS topic_id,
       CASE WHEN l.entity_kind = 'entry' THEN en.concept_slug
            ELSE src.concept_slug || ' -' || ed.edge_type || '-> ' || dst.concept_slug
       END AS name
FROM latest l
LEFT JOIN hag_entries en ON l.entity_kind = 'entry' AND en.id = l.entity_id
LEFT JOIN hag_edges ed ON l.entity_kind = 'edge' AND ed.id = l.entity_id
LEFT JOIN hag_entries src ON src.id = ed.source_entry_id
LEFT JOIN hag_entries dst ON dst.id = ed.target_entry_id
ORDER BY topic_id NULLS LAST, name NULLS LAST, l.entity_kind, l.entity_id

-- name: match_entity
-- Entries, edges and culled edges whose id starts with what an operator typed (a range on
-- the primary keys: %(low)s..%(high)s is the prefix padded with 0s and fs) or ends with it
-- (the short ids listings print; a scan). At most 10, for the ambiguity message.
WITH found AS (
    SELECT id, 'entry' AS kind FROM hag_entries WHERE id BETWEEN %(low)s AND %(high)s
    UNION SELECT id, 'edge' FROM hag_edges WHERE id BETWEEN %(low)s AND %(high)s
    UNION SELECT edge_id, 'culled edge' FROM hag_edge_audit
        WHERE edge_id BETWEEN %(low)s AND %(high)s
    UNION SELECT id, 'entry' FROM hag_entries WHERE replace(id::text, '-', '') LIKE '%%' || %(prefix)s
    UNION SELECT id, 'edge' FROM hag_edges WHERE replace(id::text, '-', '') LIKE '%%' || %(prefix)s
    UNION SELECT edge_id, 'culled edge' FROM hag_edge_audit
        WHERE replace(edge_id::text, '-', '') LIKE '%%' || %(prefix)s
)
SELECT DISTINCT ON (id) id, kind FROM found ORDER BY id, kind DESC
LIMIT 10

-- name: edge_now
-- One edge as it stands, with its type, provenance and the topic and concepts of its ends,
-- or, once culled, what its newest audit row kept (the ends and type survive the cull; the
-- confidence and the concepts do not: `culled` is true). No row: the id is an entry's.
-- Read by hag.storage.history.explain_edge, for the public API and the service alike.
SELECT e.id AS edge_id, e.edge_type, e.source_entry_id, e.target_entry_id, e.confidence,
       e.source_type, s.topic_id, s.concept_slug AS source_concept,
       t.concept_slug AS target_concept, false AS culled
FROM hag_edges e
JOIN hag_entries s ON s.id = e.source_entry_id
JOIN hag_entries t ON t.id = e.target_entry_id
WHERE e.id = %(edge_id)s
UNION ALL
(SELECT a.edge_id, a.edge_type, a.source_entry_id, a.target_entry_id, NULL, NULL, NULL,
        NULL, NULL, true
 FROM hag_edge_audit a
 WHERE a.edge_id = %(edge_id)s AND NOT EXISTS (SELECT 1 FROM hag_edges WHERE id = %(edge_id)s)
 ORDER BY a.deleted_at DESC
 LIMIT 1)
