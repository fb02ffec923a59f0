-- Why: the data-quality suites (SPEC §8, expectations/) read these views rather than the
-- tables. They leave out the vector column (Great Expectations cannot type it, and the
-- checks never need it), and they state the relational facts a column check cannot see on
-- its own (does the edge's source entry exist, does it touch an `_unanchored_` entry, did a
-- cull run audit every edge it deleted) as plain columns, so each expectation stays a
-- one-line, reviewable statement about one column.

CREATE VIEW hag_quality_entries AS
SELECT id, topic_id, concept_slug, visibility_scope, maturity, confidence,
       concept_match_quality, success_count, failure_count, created_at
FROM hag_entries;

CREATE VIEW hag_quality_edges AS
SELECT e.id, e.source_entry_id, e.target_entry_id, e.edge_type, e.confidence, e.hit_count,
       e.source_type, e.traversal_count, e.created_at,
       e.source_entry_id = e.target_entry_id AS self_loop,
       s.id IS NOT NULL AS source_exists,
       t.id IS NOT NULL AS target_exists,
       COALESCE(s.concept_slug = '_unanchored_' OR t.concept_slug = '_unanchored_', false)
           AS touches_unanchored
FROM hag_edges e
LEFT JOIN hag_entries s ON s.id = e.source_entry_id
LEFT JOIN hag_entries t ON t.id = e.target_entry_id;

-- One row per finished nightly run: how many edges it says it culled, how many audit rows
-- carry its run id. The two must be equal (audit completeness).
CREATE VIEW hag_quality_cull_runs AS
SELECT r.run_id, r.started_at,
       COALESCE((r.summary ->> 'culled')::bigint, 0) AS culled,
       (SELECT count(*) FROM hag_edge_audit a WHERE a.run_id = r.run_id AND a.reason = 'cull')
           AS audited
FROM hag_runs r
WHERE r.kind = 'nightly' AND r.status = 'done' AND NOT r.dry_run;

-- One row per culled edge, from its audit copy: did the rule recorded with it allow it?
CREATE VIEW hag_quality_culled_edges AS
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
                false) AS old_enough
FROM hag_edge_audit a
LEFT JOIN hag_runs r ON r.run_id = a.run_id
WHERE a.reason = 'cull';
