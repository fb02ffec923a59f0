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
