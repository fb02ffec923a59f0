-- Why: (issue 29) under the units rule an authored or enriched prerequisite's prior (the
-- confidence it holds by its provenance, before negative evidence) was read from its stored
-- state: its confidence, or `unlearned_from` while lowered (migration 090). The verdict was
-- read afresh from the counts, but the value it returned to was whatever that state held, so
-- a lost or stale `unlearned_from` left the edge lowered for good. `prior_confidence` is the
-- value the edge was written with by its author (the corpus, enrichment, an operator's
-- insert): set when the row is inserted and never moved by a re-weigh, so the units rule
-- reads confidence = prior, or min(prior, the lift of its own units) while the current
-- counts judge it unsupported, and negative evidence and its undo follow from the counts.
-- Learned edges have none (their confidence is their evidence).
--
-- The audit keeps every column of a deleted edge, so it gains the column too, the audit
-- trigger copies it and a restore puts it back. An existing memory is carried over: an
-- authored or enriched edge's prior is the value it holds by its provenance today, its
-- confidence or, while lowered, the value kept beside it.
ALTER TABLE hag_edges
    ADD COLUMN prior_confidence double precision
        CHECK (prior_confidence IS NULL OR (prior_confidence >= 0 AND prior_confidence <= 1));
ALTER TABLE hag_edge_audit ADD COLUMN prior_confidence double precision;

UPDATE hag_edges
SET prior_confidence = GREATEST(confidence, COALESCE(unlearned_from, confidence))
WHERE source_type <> 'learned';
UPDATE hag_edge_audit
SET prior_confidence = GREATEST(confidence, COALESCE(unlearned_from, confidence))
WHERE source_type <> 'learned';

CREATE FUNCTION hag_edge_prior_from_provenance() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.source_type <> 'learned' AND NEW.prior_confidence IS NULL THEN
        NEW.prior_confidence := NEW.confidence;
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER hag_edges_prior_from_provenance
    BEFORE INSERT ON hag_edges
    FOR EACH ROW EXECUTE FUNCTION hag_edge_prior_from_provenance();

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
    INSERT INTO hag_edge_audit (
        run_id, reason, rule_values, deleted_at,
        edge_id, source_entry_id, target_entry_id, edge_type, condition, confidence,
        hit_count, source_type, source_session_id, traversal_count, last_traversed_at,
        created_at, updated_at, unlearned_from, prior_confidence)
    SELECT v_run_id, v_reason, v_rules, v_deleted_at,
           o.id, o.source_entry_id, o.target_entry_id, o.edge_type, o.condition, o.confidence,
           o.hit_count, o.source_type, o.source_session_id, o.traversal_count,
           o.last_traversed_at, o.created_at, o.updated_at, o.unlearned_from,
           o.prior_confidence
    FROM old_edges o;
    RETURN NULL;
END
$$;
