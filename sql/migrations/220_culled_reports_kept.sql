-- Why: (issue 29) a deleted edge's row is copied to hag_edge_audit, but its learner reports
-- (hag_edge_learner_reports: which learner's session reported it, with the session's share)
-- went with it, so a restore put back the row "exactly as it was" without the evidence its
-- confidence rests on: the restored edge's sessions were read as unattributed (one learner
-- however many had reported it) the next time its concept was re-weighed, and an erased
-- learner's reports on a culled edge were nowhere to pseudonymise because they were gone.
--
-- The audit trigger now copies a deleted edge's reports beside its row, keyed by the audit
-- row, in the same statement (the copy is as much a part of the audit as the row). It runs
-- before the reports' own cascade (statement triggers on one event fire in name order:
-- hag_edges_audit_delete before hag_edges_reports_cascade), so the reports are still there
-- to copy. A restore puts them back with the edge (the statement triggers of migration 210
-- rebuild the kept sums from them) and removes the copies, which are live again; so does a
-- session that learns the pair again (below). An erasure pseudonymises the copies as it
-- does the live reports, removes those of private edges with their audit rows, and the
-- export lists them.
--
-- Nothing is carried over: edges culled before this migration have no reports to copy.
CREATE TABLE hag_edge_audit_reports (
    audit_id    bigint           NOT NULL REFERENCES hag_edge_audit (audit_id) ON DELETE CASCADE,
    session_id  text             NOT NULL,
    learner_id  text             NOT NULL,
    turns       integer          NOT NULL,
    share       double precision NOT NULL,
    reported_at timestamptz      NOT NULL,
    PRIMARY KEY (audit_id, session_id)
);

CREATE INDEX hag_edge_audit_reports_learner_idx ON hag_edge_audit_reports (learner_id);

-- A resumption (a session that learns the pair again takes the kept reports into its new
-- edge) is recorded on the audit row: when, by which session, into which edge, and how many
-- of its sessions went along. The row stays unrestored: the sessions that did not go (those
-- no learner was recorded for) still count as the culled edge's reports, the others count
-- once, in the new edge.
ALTER TABLE hag_edge_audit
    ADD COLUMN resumed_at timestamptz,
    ADD COLUMN resumed_session_id text,
    ADD COLUMN resumed_edge_id uuid,
    ADD COLUMN resumed_sessions integer NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION hag_audit_deleted_edges() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    v_run_id     uuid := NULLIF(current_setting('hag.run_id', true), '')::uuid;
    v_reason     text := COALESCE(NULLIF(current_setting('hag.delete_reason', true), ''),
                                  'manual delete');
    v_rules      jsonb := COALESCE(NULLIF(current_setting('hag.rule_values', true), ''),
                                   '{}')::jsonb;
    v_deleted_at timestamptz := COALESCE(
        NULLIF(current_setting('hag.deleted_at', true), '')::timestamptz, now());
BEGIN
    WITH audited AS (
        INSERT INTO hag_edge_audit (
            run_id, reason, rule_values, deleted_at,
            edge_id, source_entry_id, target_entry_id, edge_type, condition, confidence,
            hit_count, source_type, source_session_id, traversal_count, last_traversed_at,
            created_at, updated_at, unlearned_from, prior_confidence)
        SELECT v_run_id, v_reason, v_rules, v_deleted_at,
               o.id, o.source_entry_id, o.target_entry_id, o.edge_type, o.condition,
               o.confidence, o.hit_count, o.source_type, o.source_session_id,
               o.traversal_count, o.last_traversed_at, o.created_at, o.updated_at,
               o.unlearned_from, o.prior_confidence
        FROM old_edges o
        RETURNING audit_id, edge_id
    )
    INSERT INTO hag_edge_audit_reports
        (audit_id, session_id, learner_id, turns, share, reported_at)
    SELECT a.audit_id, r.session_id, r.learner_id, r.turns, r.share, r.reported_at
    FROM audited a
    JOIN hag_edge_learner_reports r ON r.edge_id = a.edge_id;
    RETURN NULL;
END
$$;

-- The culled-edges suite (expectations/suites/culled_edges.json) checks where the reports
-- are: a cull restored by an operator, or resumed by a session in a new edge of its pair,
-- has put every kept report back, so none stays beside it. Only those rows are probed, a
-- handful against a night's culls.
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
       END AS reports_placed
FROM hag_edge_audit a
LEFT JOIN hag_runs r ON r.run_id = a.run_id
WHERE a.reason = 'cull';
