-- Why: the lift rule counts a learned prerequisite's evidence as the sessions that reported it
-- (hag_edges.hit_count), whoever reported them. A true gap repeats for the same learner across
-- sessions until it is closed, while an extractor's invented report is drawn afresh over
-- whoever fails (docs/learning-report.md, fourth round); to tell them apart the memory keeps
-- which learner's session reported each prerequisite.
--
-- One row per (edge, session) that reported it, with the session's learner and how many of its
-- turns reported it: the sessions (and turns) per (edge, learner) are a count over it.
-- Session-end writes the rows in the session's own
-- transaction, beside the edge's hit count, with ON CONFLICT DO NOTHING, so re-applying a
-- session counts it once. The rows go with their edge (a cull deletes them with it; the audit
-- keeps the edge's hit count, and a restored edge's sessions count as unattributed: the rule
-- weighs them as before, `rules.repeat_weighted_hits`).
--
-- Nothing is carried over: an existing memory's hit counts stay unattributed and count as
-- they did; only sessions processed from now on are attributed.
CREATE TABLE hag_edge_learner_reports (
    edge_id     uuid        NOT NULL REFERENCES hag_edges (id) ON DELETE CASCADE,
    session_id  text        NOT NULL,
    learner_id  text        NOT NULL,
    turns       integer     NOT NULL CHECK (turns >= 1),
    reported_at timestamptz NOT NULL,
    PRIMARY KEY (edge_id, session_id)
);

CREATE INDEX hag_edge_learner_reports_learner_idx ON hag_edge_learner_reports (edge_id, learner_id);
