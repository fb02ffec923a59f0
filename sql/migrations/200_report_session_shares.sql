-- Why: (issue 29) a session is one unit of evidence about a concept however many of its turns
-- repeat a pair. Each row of hag_edge_learner_reports (one per edge and session, migration
-- 091) now carries its session's share of that unit: the turns of the session that named the
-- pair over the turns that named any pair out of the same concept (a turn naming two pairs
-- counts for each). A session that reports only c -> m in 1,000 turns gives c -> m a share of
-- 1; a turn naming three concepts under c gives each pair a third. The share is settled when
-- the row is written (hag/session/rules.py `session_shares`), so confidence reads it without
-- re-reading the session.
--
-- Rows written before this migration get the share their own rows imply: the session's turns
-- on the pair over its turns on every pair out of the same concept that still has a row (a
-- culled edge's rows went with it, so those sessions' shares are computed over what remains).
ALTER TABLE hag_edge_learner_reports ADD COLUMN share double precision;

UPDATE hag_edge_learner_reports lr
SET share = lr.turns::double precision / s.total
FROM (
    SELECT r.edge_id, r.session_id,
           sum(r.turns) OVER (PARTITION BY r.session_id, e.source_entry_id) AS total
    FROM hag_edge_learner_reports r
    JOIN hag_edges e ON e.id = r.edge_id
) s
WHERE s.edge_id = lr.edge_id AND s.session_id = lr.session_id;

ALTER TABLE hag_edge_learner_reports
    ALTER COLUMN share SET NOT NULL,
    ADD CONSTRAINT hag_edge_learner_reports_share_check CHECK (share > 0 AND share <= 1);
