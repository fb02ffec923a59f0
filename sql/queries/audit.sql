-- name: culled
-- The operator's review of culled edges (newest first), optionally since a moment and/or
-- for one run, with the concepts at both ends when those entries still exist.
SELECT a.audit_id, a.run_id, a.deleted_at, a.edge_id,
       s.concept_slug AS source_concept, t.concept_slug AS target_concept,
       a.source_entry_id, a.target_entry_id, a.edge_type, a.source_type, a.confidence,
       a.hit_count, a.traversal_count, a.created_at, a.restored_at, a.restored_by
FROM hag_edge_audit a
LEFT JOIN hag_entries s ON s.id = a.source_entry_id
LEFT JOIN hag_entries t ON t.id = a.target_entry_id
WHERE a.reason = 'cull'
  AND (%(since)s::timestamptz IS NULL OR a.deleted_at >= %(since)s::timestamptz)
  AND (%(run_id)s::uuid IS NULL OR a.run_id = %(run_id)s::uuid)
ORDER BY a.deleted_at DESC, a.confidence, a.edge_id
LIMIT %(limit)s

-- name: lock_restorable
-- Two restores of the same rows never race: the audit rows asked for are locked first.
SELECT a.audit_id
FROM hag_edge_audit a
WHERE a.reason = 'cull' AND a.restored_at IS NULL
  AND (a.edge_id = ANY (%(edge_ids)s::uuid[]) OR a.run_id = %(run_id)s::uuid)
ORDER BY a.audit_id
FOR UPDATE

-- name: restore_verdicts
-- For each edge asked for, its latest unrestored cull audit row and the reason it cannot go
-- back (NULL when it can): its reports went to a new edge of its pair, the edge (or its
-- identity) exists again, or an endpoint is gone.
SELECT DISTINCT ON (a.edge_id)
       a.audit_id, a.edge_id, a.run_id, a.edge_type, a.source_type, a.confidence,
       a.source_entry_id, a.target_entry_id,
       s.concept_slug AS source_concept, t.concept_slug AS target_concept,
       CASE
           WHEN a.resumed_at IS NOT NULL THEN 'its reports went to edge ' || a.resumed_edge_id
               || ', which learned the pair again'
           WHEN cur.id IS NOT NULL THEN 'the edge exists again'
           WHEN twin.id IS NOT NULL THEN 'the edge has since been recreated as ' || twin.id
           WHEN s.id IS NULL THEN 'its source entry ' || a.source_entry_id || ' no longer exists'
           WHEN t.id IS NULL THEN 'its target entry ' || a.target_entry_id || ' no longer exists'
       END AS refusal
FROM hag_edge_audit a
LEFT JOIN hag_edges cur ON cur.id = a.edge_id
LEFT JOIN hag_edges twin ON twin.source_entry_id = a.source_entry_id
                        AND twin.target_entry_id = a.target_entry_id
                        AND twin.edge_type = a.edge_type
LEFT JOIN hag_entries s ON s.id = a.source_entry_id
LEFT JOIN hag_entries t ON t.id = a.target_entry_id
WHERE a.reason = 'cull' AND a.restored_at IS NULL
  AND (a.edge_id = ANY (%(edge_ids)s::uuid[]) OR a.run_id = %(run_id)s::uuid)
ORDER BY a.edge_id, a.deleted_at DESC, a.audit_id DESC

-- name: restored_already
-- Of the edges asked for by id, those whose latest cull was restored already: when and by whom.
SELECT DISTINCT ON (a.edge_id) a.edge_id, a.restored_at, a.restored_by
FROM hag_edge_audit a
WHERE a.reason = 'cull' AND a.edge_id = ANY (%(edge_ids)s::uuid[])
ORDER BY a.edge_id, a.deleted_at DESC, a.audit_id DESC

-- name: restore_edges
-- Put the audited rows back exactly as they were (same id, every column), then mark the
-- audit rows restored. ON CONFLICT: an edge recreated concurrently stays, and is reported.
WITH back AS (
    INSERT INTO hag_edges (
        id, source_entry_id, target_entry_id, edge_type, condition, confidence, hit_count,
        source_type, source_session_id, traversal_count, last_traversed_at, created_at,
        updated_at, unlearned_from, prior_confidence)
    SELECT a.edge_id, a.source_entry_id, a.target_entry_id, a.edge_type, a.condition,
           a.confidence, a.hit_count, a.source_type, a.source_session_id, a.traversal_count,
           a.last_traversed_at, a.created_at, a.updated_at, a.unlearned_from,
           a.prior_confidence
    FROM hag_edge_audit a
    WHERE a.audit_id = ANY (%(audit_ids)s::bigint[])
    ORDER BY a.source_entry_id, a.target_entry_id, a.edge_type
    ON CONFLICT DO NOTHING
    RETURNING id
)
UPDATE hag_edge_audit a
SET restored_at = now(), restored_by = %(by)s
FROM back
WHERE a.audit_id = ANY (%(audit_ids)s::bigint[]) AND a.edge_id = back.id
RETURNING a.edge_id

-- name: move_kept_reports
-- The learner reports kept beside audit rows (migration 220) moved into edges: each audit
-- row's into the edge paired with it (a restore: the edge itself; a resumption: a new edge
-- of its pair). They leave the audit, where they would count twice, and the statement
-- triggers of migration 210 add them to the kept sums. How many each row gave its edge.
WITH pairs AS (
    SELECT * FROM unnest(%(audit_ids)s::bigint[], %(edge_ids)s::uuid[]) AS p (audit_id, edge_id)
), moved AS (
    DELETE FROM hag_edge_audit_reports ar
    USING pairs p
    WHERE ar.audit_id = p.audit_id
    RETURNING p.audit_id, p.edge_id, ar.session_id, ar.learner_id, ar.turns, ar.share,
              ar.reported_at
), put AS (
    INSERT INTO hag_edge_learner_reports
        (edge_id, session_id, learner_id, turns, share, reported_at)
    SELECT edge_id, session_id, learner_id, turns, share, reported_at
    FROM moved
    ORDER BY edge_id, session_id
)
SELECT audit_id, edge_id, count(*)::int AS sessions
FROM moved
GROUP BY audit_id, edge_id
ORDER BY audit_id

-- name: match_culled_edge
-- Culled edges whose id starts or ends with what an operator typed (hex digits without
-- dashes; the caller normalises it): a prefix, or the short ids listings and artifacts print.
SELECT DISTINCT a.edge_id
FROM hag_edge_audit a
WHERE a.reason = 'cull'
  AND (replace(a.edge_id::text, '-', '') LIKE %(prefix)s || '%%'
       OR replace(a.edge_id::text, '-', '') LIKE '%%' || %(prefix)s)
ORDER BY a.edge_id
LIMIT 10
