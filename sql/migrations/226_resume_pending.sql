-- Why: (issue 29, review) a session that learns a culled pair again takes back the culled
-- edge's kept reports (migration 220), but skips an audit row an operator's restore (or its
-- dry run) holds locked, so the two never wait on each other. The restore then refuses (the
-- pair has an edge again) or rolls back, and the kept reports stayed beside the audit row
-- for good: the new edge counted one learner where the order without the restore counts
-- three.
--
-- The session now writes the resumption it could not make here: the audit row and the new
-- edge, with the edge's type and source concept. The nightly reads these rows before its
-- lock passes, locks the edges with them (a prerequisite's concept in the cull's sorted
-- pass, every `leads_to` and `fallback` in the sequence step's), resumes the reports a
-- still-waiting audit row kept into its edge, re-weighs, and deletes the rows it read. Only
-- the rows a session skipped are resumed: a pair learned again under another rule keeps its
-- culled reports in the audit, as before. Append-only, a row per skip, never updated.
--
-- No keys: an edge or audit row deleted meanwhile leaves its row to the nightly, which
-- finds nothing to resume and deletes it (a key to hag_edges would make every cull's delete
-- look this table up). The rows hold ids only, nothing of a learner.
CREATE TABLE hag_resume_pending (
    flag            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    audit_id        bigint      NOT NULL,
    edge_id         uuid        NOT NULL,
    edge_type       text        NOT NULL,
    source_entry_id uuid        NOT NULL,
    flagged_at      timestamptz NOT NULL
);
