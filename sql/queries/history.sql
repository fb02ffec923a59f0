-- name: entity_history
-- Every recorded confidence change of one entry or edge, oldest first: the answer to "why is
-- this edge at 0.45". Rows are written by the triggers of migration 003 under the row's lock,
-- so history_id orders one entity's changes.
SELECT h.history_id, h.entity_kind, h.entity_id, h.old_value, h.new_value, h.reason,
       h.session_id, h.run_id, h.at
FROM hag_confidence_history h
WHERE h.entity_id = %(entity_id)s
ORDER BY h.history_id

-- name: session_known
-- Whether a session was ever ingested, and whether it has been applied.
SELECT session_id, status, applied_seq FROM hag_sessions WHERE session_id = %(session_id)s

-- name: memory_after_session
-- What the memory believed after a session: for every entry and edge, its confidence in
-- the last history row written by that session or by any session applied before it (by
-- applied_seq), or by anything else (loads, sweeps) at or before that session's time. The
-- history of one row is written under that row's lock, so history_id orders its changes.
WITH target AS (
    SELECT applied_seq, ended_at FROM hag_sessions WHERE session_id = %(session_id)s
)
SELECT DISTINCT ON (h.entity_kind, h.entity_id)
       h.entity_kind, h.entity_id, h.new_value AS confidence, h.reason, h.session_id, h.at
FROM hag_confidence_history h
LEFT JOIN hag_sessions s ON s.session_id = h.session_id
CROSS JOIN target t
WHERE (s.applied_seq IS NOT NULL AND s.applied_seq <= t.applied_seq)
   OR (h.session_id IS NULL AND h.at <= t.ended_at)
ORDER BY h.entity_kind, h.entity_id, h.history_id DESC
