-- Why: (issue 29, review) a report contradicted forward in time (migration 216) was counted
-- on its pair's prerequisite edge by the edge's id, a session a unit each. Two faults:
--
-- - The count depended on the order sessions arrived in. A struggle contradicted when it
--   was made (its learner's success on the concept already ingested) was counted only if
--   the pair's edge existed then; had the sessions arrived the other way, the report was
--   recorded, made the edge and was withdrawn onto it. And once that edge was culled, its
--   count was read by nothing (the evidence query joined the live edges), so the concept's
--   reports that judge an authored prerequisite lost it on the night of the cull.
-- - It named no learner, so one learner's withdrawn reports of one pair counted a unit per
--   session, where every other report a learner makes is capped per learner and pair
--   (`prerequisite_learner_cap`).
--
-- The count now lives with the pair and the learner: (source entry, target entry, learner)
-- and its sessions, whatever edge the pair has or had. A live, culled, restored or resumed
-- edge of the pair reads the same rows, so a resumption or a restore carries nothing, and
-- the evidence query counts each learner's withdrawn sessions within the learner's cap
-- for the pair, together with the learner's live reports and those kept beside a culled
-- edge (which counted a unit a session in negative evidence before; sql/queries/evidence.sql).
-- The learner id is the learner's, so an erasure pseudonymises it with the learner's
-- reports, and removes the rows of a private entry's pairs (the keys to hag_entries would
-- too, as an entry deleted any other way takes its pairs' counts).
--
-- A stored confidence the new reading moves is re-weighed with its concept, by its next
-- session or cull; `hag settings profile evidence` re-weighs every prerequisite at once.
--
-- Carried over: a count kept by a live edge's id, or a culled one's (its audit row gives
-- the pair), moves to the pair with each session under a learner of its own (`before-223:`
-- the edge id and the session's number): which learner made them was never kept, so they
-- count a unit each, as before. A count whose edge is gone from both (an erased private
-- edge), or whose entries are, was read by nothing and is dropped.
CREATE TABLE hag_pair_withdrawn (
    source_entry_id uuid    NOT NULL REFERENCES hag_entries (id) ON DELETE CASCADE,
    target_entry_id uuid    NOT NULL REFERENCES hag_entries (id) ON DELETE CASCADE,
    learner_id      text    NOT NULL,
    sessions        integer NOT NULL,
    PRIMARY KEY (source_entry_id, target_entry_id, learner_id),
    CONSTRAINT hag_pair_withdrawn_sessions_positive CHECK (sessions > 0),
    CONSTRAINT hag_pair_withdrawn_two_entries CHECK (source_entry_id <> target_entry_id)
);

CREATE INDEX hag_pair_withdrawn_learner_idx ON hag_pair_withdrawn (learner_id);
CREATE INDEX hag_pair_withdrawn_target_idx ON hag_pair_withdrawn (target_entry_id);

INSERT INTO hag_pair_withdrawn (source_entry_id, target_entry_id, learner_id, sessions)
SELECT p.source_entry_id, p.target_entry_id, 'before-223:' || w.edge_id || ':' || n, 1
FROM hag_edge_withdrawn w
CROSS JOIN LATERAL (
    SELECT e.source_entry_id, e.target_entry_id FROM hag_edges e WHERE e.id = w.edge_id
    UNION ALL
    SELECT a.source_entry_id, a.target_entry_id FROM hag_edge_audit a
    WHERE a.edge_id = w.edge_id
      AND NOT EXISTS (SELECT 1 FROM hag_edges e WHERE e.id = w.edge_id)
    LIMIT 1
) p
CROSS JOIN generate_series(1, w.sessions) AS n
WHERE EXISTS (SELECT 1 FROM hag_entries s WHERE s.id = p.source_entry_id)
  AND EXISTS (SELECT 1 FROM hag_entries t WHERE t.id = p.target_entry_id);

DROP TABLE hag_edge_withdrawn;
