-- The lines a turn's prompt rendered, by their edge ids (issue 29): each id's type and ends
-- from the live edge, or else from its newest audit row (every delete is audited) when the
-- nightly culled it or an operator deleted it after the tutor rendered it. The rendered line
-- is what the tutor showed, whatever became of the edge since. Read by ingest (a rendered
-- id the memory holds or held is known; the concepts a successful turn's lines supplied)
-- and by session-end (the successes passed over when a report is contradicted; whether a
-- discovered move was prompted: a leads_to or fallback the tutor took because a line told
-- it to is no evidence). Joined to hag_edges alone, a line culled between the render and
-- the session was no line: ingest refused the session, or its prompted moves counted as a
-- learner's. The audit is read for every id by a bitmap scan of its hash index on edge_id
-- (an edge's ends and type never change, so any of its audit rows gives the same line).
CREATE OR REPLACE FUNCTION hag_rendered_lines(ids uuid[])
RETURNS TABLE (id uuid, edge_type text, source_entry_id uuid, target_entry_id uuid)
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT e.id, e.edge_type, e.source_entry_id, e.target_entry_id
    FROM hag_edges e
    WHERE e.id = ANY (ids)
    UNION ALL
    (SELECT DISTINCT ON (a.edge_id) a.edge_id, a.edge_type, a.source_entry_id, a.target_entry_id
     FROM hag_edge_audit a
     WHERE a.edge_id = ANY (ids)
       AND NOT EXISTS (SELECT 1 FROM hag_edges e WHERE e.id = a.edge_id)
     ORDER BY a.edge_id, a.audit_id DESC)
$$;
