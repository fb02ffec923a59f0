-- Why: under the lift rule with `prerequisite_lift_noise_weight` on, every session-end reads a
-- reported concept's culled prerequisites from the audit (their reports still count toward
-- the concept's reversal share; hag.session.rules.reversal_share). The audit had no index by
-- source entry, so that read would scan it whole; this one reads only the concept's rows.
CREATE INDEX hag_edge_audit_prerequisite_source_idx ON hag_edge_audit (source_entry_id)
    WHERE edge_type = 'prerequisite' AND restored_at IS NULL;
