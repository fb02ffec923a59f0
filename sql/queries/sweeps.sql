-- name: lock_nightly
-- Two nightly runs never interleave: the second waits for the first to commit, then finds
-- nothing left to do (the sweeps are idempotent). Held until the transaction ends.
SELECT pg_advisory_xact_lock(%(lock_id)s)

-- name: database_now
-- "Now" for a run without --as-of: the database's clock, the one created_at defaults use.
SELECT now() AS now

-- name: start_run
-- A run is recorded before it works, in its own transaction, so a crashed run stays visible.
INSERT INTO hag_runs (run_id, kind, as_of, dry_run, params)
VALUES (%(run_id)s, 'nightly', %(as_of)s, false, %(params)s)

-- name: finish_run
-- Written in the sweep's own transaction: a run is 'done' exactly when its changes are.
UPDATE hag_runs
SET finished_at = clock_timestamp(), status = 'done', summary = %(summary)s
WHERE run_id = %(run_id)s

-- name: note_progress
-- The counts of what the run's transaction is about to commit, on its still-running row (in
-- that transaction): a failure or a reaped process later keeps them.
UPDATE hag_runs SET summary = %(summary)s::jsonb
WHERE run_id = %(run_id)s AND status = 'running'

-- name: fail_run
-- The error beside the counts of what the run had committed (`note_progress`), if any.
UPDATE hag_runs
SET finished_at = clock_timestamp(), status = 'failed',
    summary = COALESCE(summary, '{}'::jsonb) || %(summary)s::jsonb
WHERE run_id = %(run_id)s AND status = 'running'

-- name: note_failure_after_done
-- A run whose changes committed (status done, its counts) and whose last step, in a
-- transaction of its own, failed: the error beside the counts.
UPDATE hag_runs
SET summary = COALESCE(summary, '{}'::jsonb) || %(summary)s::jsonb
WHERE run_id = %(run_id)s

-- name: set_delete_context
-- What the audit trigger (migration 001) copies into every audit row of this transaction.
SELECT set_config('hag.run_id', %(run_id)s, true),
       set_config('hag.delete_reason', %(reason)s, true),
       set_config('hag.rule_values', %(rule_values)s, true),
       set_config('hag.deleted_at', %(deleted_at)s, true)

-- name: promote_to_pattern
-- Seed step: candidate -> pattern, with a history row for each entry moved. A candidate that
-- the proven rule (our step, promote_to_proven) would then take on in the same run goes
-- straight to proven here, in one row version (two steps, two history rows, as the steps
-- run one after the other): every changed entry is a new row version with five index
-- entries and a row in the search copy's trigger, so a second version of the same row in
-- the same night was paid twice (5,766 of 54,840 promotions at 1M; see
-- docs/journal/2026-12-02-nightly-one-update.md). The old maturity of every moved row is
-- 'candidate' (the WHERE clause), so the history needs no read of the old row; the proven
-- rule reads columns this statement does not change, so RETURNING may ask it again.
WITH moved AS (
    UPDATE hag_entries e
    SET maturity = CASE
            WHEN hag_entry_promotes_to_proven(e, %(as_of)s, %(proven_min_age_days)s,
                                              %(proven_min_confidence)s, %(proven_min_successes)s,
                                              %(proven_max_failure_ratio)s)
            THEN 'proven' ELSE 'pattern' END,
        updated_at = GREATEST(e.updated_at, %(as_of)s)
    WHERE e.maturity = 'candidate'
      AND hag_entry_promotes_to_pattern(e, %(as_of)s, %(promotion_min_age_days)s,
                                        %(promotion_min_confidence)s, %(promotion_max_failures)s)
    RETURNING e.id, e.maturity = 'proven' AS to_proven
), noted AS (
    INSERT INTO hag_maturity_history (entry_id, old_maturity, new_maturity, rule, run_id, at)
    SELECT m.id, s.old_maturity, s.new_maturity, s.rule, %(run_id)s, %(as_of)s
    FROM moved m
    CROSS JOIN LATERAL (VALUES (1, 'candidate', 'pattern', 'promotion', true),
                               (2, 'pattern', 'proven', 'proven', m.to_proven))
         AS s (step, old_maturity, new_maturity, rule, taken)
    WHERE s.taken
    ORDER BY s.step  -- the history in the order of the steps, as when each ran alone
)
SELECT count(*) AS n, count(*) FILTER (WHERE to_proven) AS to_proven FROM moved

-- name: promoted_entries
-- The entries this run promoted, by name, for its log (at most `limit`; the count is the
-- promote steps'). The run index of the maturity history serves it.
SELECT h.entry_id, e.topic_id, e.concept_slug, h.new_maturity
FROM hag_maturity_history h
JOIN hag_entries e ON e.id = h.entry_id
WHERE h.run_id = %(run_id)s AND h.rule IN ('promotion', 'proven')
ORDER BY h.history_id
LIMIT %(limit)s

-- name: promote_to_proven
-- Our step: pattern -> proven (runs after promote_to_pattern in the same transaction, so one
-- run reaches the fixed point and a second run changes nothing). The candidates promoted
-- tonight that qualify went on to proven in promote_to_pattern; those that did not are
-- patterns this rule still refuses, so this step moves the entries that were patterns.
WITH moved AS (
    UPDATE hag_entries e
    SET maturity = 'proven', updated_at = GREATEST(e.updated_at, %(as_of)s)
    WHERE e.maturity = 'pattern'
      AND hag_entry_promotes_to_proven(e, %(as_of)s, %(proven_min_age_days)s,
                                       %(proven_min_confidence)s, %(proven_min_successes)s,
                                       %(proven_max_failure_ratio)s)
    RETURNING e.id
), noted AS (
    INSERT INTO hag_maturity_history (entry_id, old_maturity, new_maturity, rule, run_id, at)
    SELECT id, 'pattern', 'proven', 'proven', %(run_id)s, %(as_of)s FROM moved
)
SELECT count(*) AS n FROM moved

-- name: archive_sunk
-- Our step: a candidate or pattern that sank is archived (last, after the promotions). Run
-- once per starting maturity, so the history row can say where the entry came from.
WITH moved AS (
    UPDATE hag_entries e
    SET maturity = 'archived', updated_at = GREATEST(e.updated_at, %(as_of)s)
    WHERE e.maturity = %(from_maturity)s
      AND hag_entry_sinks_to_archive(e, %(archive_max_confidence)s, %(archive_min_failures)s)
    RETURNING e.id
), noted AS (
    INSERT INTO hag_maturity_history (entry_id, old_maturity, new_maturity, rule, run_id, at)
    SELECT id, %(from_maturity)s, 'archived', 'archive', %(run_id)s, %(as_of)s FROM moved
)
SELECT count(*) AS n FROM moved

-- name: maturity_forecast
-- Dry run: the same three steps chained over a snapshot, changing nothing. Each entry's
-- maturity after step 1 feeds step 2, whose result feeds step 3, as in the real run.
SELECT count(*) FILTER (WHERE s1.to_pattern) AS promoted_to_pattern,
       count(*) FILTER (WHERE s2.to_proven) AS promoted_to_proven,
       count(*) FILTER (WHERE s3.to_archive) AS archived
FROM hag_entries e
CROSS JOIN LATERAL (
    SELECT e.maturity = 'candidate'
           AND hag_entry_promotes_to_pattern(e, %(as_of)s, %(promotion_min_age_days)s,
                                             %(promotion_min_confidence)s,
                                             %(promotion_max_failures)s) AS to_pattern
) s1
CROSS JOIN LATERAL (
    SELECT CASE WHEN s1.to_pattern THEN 'pattern' ELSE e.maturity END AS maturity
) m1
CROSS JOIN LATERAL (
    SELECT m1.maturity = 'pattern'
           AND hag_entry_promotes_to_proven(e, %(as_of)s, %(proven_min_age_days)s,
                                            %(proven_min_confidence)s, %(proven_min_successes)s,
                                            %(proven_max_failure_ratio)s) AS to_proven
) s2
CROSS JOIN LATERAL (
    SELECT (CASE WHEN s2.to_proven THEN 'proven' ELSE m1.maturity END) IN ('candidate', 'pattern')
           AND hag_entry_sinks_to_archive(e, %(archive_max_confidence)s,
                                          %(archive_min_failures)s) AS to_archive
) s3
WHERE e.maturity IN ('candidate', 'pattern')

-- name: cull_edges
-- The seed's cull, set-based: one DELETE of every edge the rule allows (never seed, only the
-- allowlist, never an edge an operator restored; after an operator approved a big night's
-- forecast, only the forecast edges the rule still allows). The AFTER DELETE statement trigger copies
-- the deleted rows into hag_edge_audit in this same statement and transaction.
-- The prerequisite sources come back with repeats (the caller makes them a set): a DISTINCT
-- inside the aggregate sorted every deleted row, prerequisite or not (217,000 rows at 1M,
-- spilled to disk), where grouping by provenance alone is a hash of a few groups.
WITH gone AS (
    DELETE FROM hag_edges e
    WHERE hag_edge_is_cullable(e, %(as_of)s, %(cull_max_confidence)s, %(cull_min_age_days)s,
                               %(cull_max_traversals)s, %(cull_source_types)s)
      AND NOT EXISTS (SELECT FROM hag_restored_edges() r WHERE r.edge_id = e.id)
      AND (%(only_edges)s::uuid[] IS NULL OR e.id = ANY (%(only_edges)s::uuid[]))
    RETURNING e.source_type, e.edge_type, e.source_entry_id, e.target_entry_id, e.confidence
)
SELECT source_type, count(*) AS n,
       count(*) FILTER (WHERE edge_type IN ('leads_to', 'fallback')) AS sequence_edges,
       COALESCE(array_agg(source_entry_id) FILTER (WHERE edge_type = 'prerequisite'),
                '{}'::uuid[]) AS prerequisite_sources,
       -- culled prerequisites other terms read (migration 224): a walked one's source (a
       -- report naming it supported an edge to its target), a held one's target (its
       -- reports naming the source were reversals)
       COALESCE(array_agg(source_entry_id) FILTER (
                    WHERE edge_type = 'prerequisite' AND confidence >= %(edge_min_confidence)s),
                '{}'::uuid[]) AS walked_sources,
       COALESCE(array_agg(target_entry_id) FILTER (
                    WHERE edge_type = 'prerequisite'
                      AND confidence >= %(prerequisite_lift_noise_held_min)s),
                '{}'::uuid[]) AS held_targets
FROM gone GROUP BY source_type ORDER BY source_type

-- name: lock_cull
-- Under the lift rule, before cull_edges: row locks, in one pass sorted by id (the order of
-- session-end's lock_edges), on every edge the cull will delete and on every prerequisite
-- out of or into the source concept of a prerequisite it will delete (their chance and
-- reverse evidence change: the survivors are re-weighed in this transaction). FOR UPDATE, the
-- lock the DELETE takes; a session that traverses an edge while this waits makes the
-- predicate re-checked against the new row version, as in cull_edges. `doomed` says which
-- locked rows the rule allows: the cull then deletes only those (only_edges), so it never
-- deletes a row whose siblings this pass did not lock. The prerequisites out of or into a
-- concept flagged for a re-weigh (migration 224) are locked in the same pass.
WITH doomed AS (
    SELECT e.source_entry_id
    FROM hag_edges e
    WHERE e.edge_type = 'prerequisite'
      AND hag_edge_is_cullable(e, %(as_of)s, %(cull_max_confidence)s, %(cull_min_age_days)s,
                               %(cull_max_traversals)s, %(cull_source_types)s)
      AND NOT EXISTS (SELECT FROM hag_restored_edges() r WHERE r.edge_id = e.id)
      AND (%(only_edges)s::uuid[] IS NULL OR e.id = ANY (%(only_edges)s::uuid[]))
)
SELECT e.id, d.doomed
FROM hag_edges e
CROSS JOIN LATERAL (  -- the rule on the row itself, so a row re-read after a wait is re-judged
    SELECT hag_edge_is_cullable(e, %(as_of)s, %(cull_max_confidence)s, %(cull_min_age_days)s,
                                %(cull_max_traversals)s, %(cull_source_types)s)
           AND NOT EXISTS (SELECT FROM hag_restored_edges() r WHERE r.edge_id = e.id)
           AND (%(only_edges)s::uuid[] IS NULL OR e.id = ANY (%(only_edges)s::uuid[])) AS doomed
) d
WHERE d.doomed
   OR (e.edge_type = 'prerequisite'
       AND (e.source_entry_id IN (SELECT source_entry_id FROM doomed)
            OR e.target_entry_id IN (SELECT source_entry_id FROM doomed)
            OR e.source_entry_id = ANY (%(pending)s::uuid[])
            OR e.target_entry_id = ANY (%(pending)s::uuid[])))
ORDER BY e.id
FOR UPDATE OF e

-- name: analyze_audit
-- The audit's statistics after a cull wrote its rows (in the run's transaction: its own rows
-- count). Session-end's evidence read probes the audit by the culled sources it reads; until
-- autovacuum analyzed the table the planner took its old size (a never-analyzed audit: a few
-- rows) and scanned every culled prerequisite: 57 ms for ten concepts at 1M, 5 ms after.
ANALYZE hag_edge_audit, hag_edge_audit_reports

-- name: cull_forecast
-- Dry run: what cull_edges would delete, by provenance, changing nothing.
SELECT e.source_type, count(*) AS n
FROM hag_edges e
WHERE hag_edge_is_cullable(e, %(as_of)s, %(cull_max_confidence)s, %(cull_min_age_days)s,
                           %(cull_max_traversals)s, %(cull_source_types)s)
  AND NOT EXISTS (SELECT FROM hag_restored_edges() r WHERE r.edge_id = e.id)
GROUP BY e.source_type ORDER BY e.source_type

-- name: cull_candidate_ids
-- The big-night guard's forecast: every edge the cull would delete now, by id, so an
-- approval culls exactly what the operator was shown.
SELECT e.id
FROM hag_edges e
WHERE hag_edge_is_cullable(e, %(as_of)s, %(cull_max_confidence)s, %(cull_min_age_days)s,
                           %(cull_max_traversals)s, %(cull_source_types)s)
  AND NOT EXISTS (SELECT FROM hag_restored_edges() r WHERE r.edge_id = e.id)
ORDER BY e.id

-- name: count_edges
-- All edges: the denominator of the guard's share.
SELECT count(*) AS n FROM hag_edges

-- name: culled_report_rows
-- The operator's table of a run's culled edges (from the audit), weakest first, bounded:
-- the bound applies before the joins, so a run that culled 200,000 edges joins 200 rows.
SELECT a.edge_id, s.concept_slug AS source_concept, t.concept_slug AS target_concept,
       a.edge_type, a.source_type, a.confidence,
       floor(extract(epoch FROM (%(as_of)s - a.created_at)) / 86400)::integer AS age_days
FROM (SELECT * FROM hag_edge_audit
      WHERE run_id = %(run_id)s AND reason = 'cull'
      ORDER BY confidence, created_at, edge_id
      LIMIT %(limit)s) AS a
LEFT JOIN hag_entries s ON s.id = a.source_entry_id
LEFT JOIN hag_entries t ON t.id = a.target_entry_id
ORDER BY a.confidence, a.created_at, a.edge_id

-- name: cull_forecast_rows
-- Dry run: the same table for the edges the cull would delete.
SELECT e.edge_id, s.concept_slug AS source_concept, t.concept_slug AS target_concept,
       e.edge_type, e.source_type, e.confidence,
       floor(extract(epoch FROM (%(as_of)s - e.created_at)) / 86400)::integer AS age_days
FROM (SELECT c.id AS edge_id, c.source_entry_id, c.target_entry_id, c.edge_type,
             c.source_type, c.confidence, c.created_at
      FROM hag_edges c
      WHERE hag_edge_is_cullable(c, %(as_of)s, %(cull_max_confidence)s, %(cull_min_age_days)s,
                                 %(cull_max_traversals)s, %(cull_source_types)s)
        AND NOT EXISTS (SELECT FROM hag_restored_edges() r WHERE r.edge_id = c.id)
      ORDER BY c.confidence, c.created_at, c.id
      LIMIT %(limit)s) AS e
LEFT JOIN hag_entries s ON s.id = e.source_entry_id
LEFT JOIN hag_entries t ON t.id = e.target_entry_id
ORDER BY e.confidence, e.created_at, e.edge_id

-- name: reprieve_sunk
-- The evidence profile's reprieve (migration 075): an entry below its retrieval floor and
-- unused for reprieve_idle_days is lifted back to the floor, so it is shown and graded again.
-- Runs after the archive step: an entry that sank far enough to be archived stays archived.
-- Its confidence history row says why (hag.change_reason set by the caller).
WITH lifted AS (
    UPDATE hag_entries e
    SET confidence = hag_entry_retrieval_floor(e.maturity, %(retrieval_min_confidence)s,
                                               %(floor_proven)s, %(floor_pattern)s,
                                               %(floor_candidate)s),
        updated_at = GREATEST(e.updated_at, %(as_of)s)
    WHERE e.maturity IN ('candidate', 'pattern', 'proven')
      AND hag_entry_is_reprieved(e, %(as_of)s, %(reprieve_idle_days)s,
                                 %(retrieval_min_confidence)s, %(floor_proven)s,
                                 %(floor_pattern)s, %(floor_candidate)s)
    RETURNING e.id
)
SELECT count(*) AS n FROM lifted

-- name: reprieve_forecast
-- Dry run: how many entries reprieve_sunk would lift, leaving out those the archive step
-- takes first. (An entry whose promotion the same run would decide is judged at its maturity
-- before the run: promotion needs a confidence that is rarely below a floor.)
SELECT count(*) AS n
FROM hag_entries e
WHERE e.maturity IN ('candidate', 'pattern', 'proven')
  AND NOT (e.maturity IN ('candidate', 'pattern')
           AND hag_entry_sinks_to_archive(e, %(archive_max_confidence)s, %(archive_min_failures)s))
  AND hag_entry_is_reprieved(e, %(as_of)s, %(reprieve_idle_days)s,
                             %(retrieval_min_confidence)s, %(floor_proven)s,
                             %(floor_pattern)s, %(floor_candidate)s)
