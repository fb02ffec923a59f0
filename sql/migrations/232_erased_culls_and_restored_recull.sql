-- Why: two facts the audit suites could not see (a read-only review of the suites).
--
-- An erasure (`hag learner erase`) deletes the audit rows of every edge that touched the
-- learner's private entries, culled ones included, while each nightly run's summary keeps
-- the number it culled. `hag_quality_cull_runs` compared that number with the audit rows
-- left, so after one erasure of a learner who had a culled edge the cull_runs suite failed
-- for good, and with it every later session-end, nightly and enrichment run. The erasure
-- now counts, per run, the cull audit rows it deletes (`hag_erased_culls`: run ids and
-- counts, nothing of the learner's), in its transaction, and the view adds them back:
-- `audited` is the audit rows a run wrote, those since erased with their learner included.
--
-- The cull never takes an edge an operator restored (`hag_restored_edges()`, the sweep's
-- rule since migration 030), but `hag_quality_culled_edges` re-checked every part of the
-- rule except that one: a restored edge deleted again under a recorded cull passed every
-- suite. Its `not_restored_before` is false for a cull audit row whose edge an earlier
-- audit row of the same edge records as restored.

CREATE TABLE hag_erased_culls (
    run_id uuid PRIMARY KEY,
    erased bigint NOT NULL CHECK (erased > 0)
);

CREATE OR REPLACE VIEW hag_quality_cull_runs AS
SELECT r.run_id, r.started_at,
       COALESCE((r.summary ->> 'culled')::bigint, 0) AS culled,
       (SELECT count(*) FROM hag_edge_audit a WHERE a.run_id = r.run_id AND a.reason = 'cull')
           + COALESCE((SELECT x.erased FROM hag_erased_culls x WHERE x.run_id = r.run_id), 0)
           AS audited
FROM hag_runs r
WHERE r.kind = 'nightly' AND r.status = 'done' AND NOT r.dry_run;

CREATE OR REPLACE VIEW hag_quality_culled_edges AS
SELECT a.audit_id, a.run_id, a.edge_id, a.source_type, a.confidence, a.traversal_count,
       r.run_id IS NOT NULL AS run_recorded,
       (a.source_type <> 'seed'
        AND COALESCE(a.rule_values -> 'cull_source_types' ? a.source_type, false))
           AS provenance_allowed,
       COALESCE(a.confidence < (a.rule_values ->> 'cull_max_confidence')::double precision,
                false) AS below_threshold,
       COALESCE(a.traversal_count <= (a.rule_values ->> 'cull_max_traversals')::integer, false)
           AS untraversed_enough,
       COALESCE(a.created_at <= (a.rule_values ->> 'as_of')::timestamptz
                    - make_interval(hours => 24 * (a.rule_values ->> 'cull_min_age_days')::integer),
                false) AS old_enough,
       CASE WHEN a.restored_at IS NULL AND a.resumed_at IS NULL THEN true
            ELSE NOT EXISTS (SELECT 1 FROM hag_edge_audit_reports k
                             WHERE k.audit_id = a.audit_id)
       END AS reports_placed,
       NOT EXISTS (SELECT 1 FROM hag_edge_audit p
                   WHERE p.edge_id = a.edge_id AND p.restored_at IS NOT NULL
                     AND p.audit_id < a.audit_id) AS not_restored_before
FROM hag_edge_audit a
LEFT JOIN hag_runs r ON r.run_id = a.run_id
WHERE a.reason = 'cull';
