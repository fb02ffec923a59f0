-- Why: (issue 29, review) a prerequisite's terms read other prerequisites' confidences: a
-- concept b's reports naming a are reversals while a -> b stands at
-- `prerequisite_lift_noise_held_min`, and a report on c naming x supports c -> m while a
-- walked x -> m stands at `edge_min_confidence`. A re-weigh writes the edges out of and into
-- the concepts its caller locked; when an edge crosses either threshold (by the session's
-- reinforcement and re-weigh together, or by the cull's delete), the edges of concepts
-- outside those (b's, and those of every c with a report naming x) read a value that moved,
-- and keep the confidence of their own last re-weigh: `hag explain` gave another value
-- until their concept was next reported on. Re-weighing them at once would lock rows
-- outside the caller's one sorted pass (a deadlock with a session's own pass); so do a
-- restore's edges, put back at the value they were culled with, and enrichment's, written
-- at `enrichment_confidence`.
--
-- Such a concept is now flagged here, in the transaction that moved the edge it reads (or
-- restored its edge), and the nightly cull locks the flagged concepts' prerequisites in its
-- sorted pass, re-weighs them and deletes the flags it read. The table is append-only: a
-- flag is a row of its own, never updated, so no writer waits on another's flag (an
-- upsert would make the nightly's clear and a session's flag lock rows in two orders), and
-- a flag written after the nightly read the table stays for the next night. `hag explain`
-- says when an edge's concept waits here.
CREATE TABLE hag_reweigh_pending (
    flag            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source_entry_id uuid        NOT NULL REFERENCES hag_entries (id) ON DELETE CASCADE,
    flagged_at      timestamptz NOT NULL
);

CREATE INDEX hag_reweigh_pending_source_idx ON hag_reweigh_pending (source_entry_id);

-- the concepts whose culled prerequisites point at x: they read a walked x -> m too
CREATE INDEX hag_edge_audit_prerequisite_target_idx ON hag_edge_audit (target_entry_id)
    WHERE edge_type = 'prerequisite' AND restored_at IS NULL;
