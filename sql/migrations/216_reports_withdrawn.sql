-- Why: (issue 29) a struggle report c -> m says its learner failed c for want of m. Had c
-- needed m and the learner lacked it, no success on c could come before the learner showed
-- m; when the learner's next success on c comes first, the report is contradicted forward in
-- time, as `prerequisite_drop_shown` contradicts a report whose learner had shown m before.
-- A success on c in a turn whose prompt rendered a prerequisite or fallback line to m is no
-- contradiction: the tutor supplied m there. Session-end leaves such a report out when the
-- success is already recorded and withdraws a recorded one when a later session brings the
-- success: its row leaves hag_edge_learner_reports (the statement triggers of migration 210
-- take it out of the kept units), its session leaves the edge's hit count, and the edge
-- counts it in hag_edge_withdrawn. A re-weigh then reads the counts as if the report had
-- never been made.
--
-- hag_learner_bridged keeps, per ingested session, the (c, m) of its successful turns on c
-- whose prompt rendered a line to m, written at ingest beside hag_learner_successes so the
-- answer holds whatever order sessions are processed in. Finding a learner's reports out of
-- the concepts a session succeeded on reads them by learner (the index of migration 130).
-- The withdrawn count names no learner and no session: an erasure leaves it, as it leaves
-- an edge's hit count; the bridged rows are the learner's and are pseudonymised with the
-- successes.
CREATE TABLE hag_learner_bridged (
    session_id    text        NOT NULL REFERENCES hag_sessions (session_id) ON DELETE CASCADE,
    concept_slug  text        NOT NULL,
    supplied_slug text        NOT NULL,
    topic_id      text        NOT NULL,
    learner_id    text        NOT NULL,
    ended_at      timestamptz NOT NULL,
    PRIMARY KEY (session_id, concept_slug, supplied_slug)
);

CREATE INDEX hag_learner_bridged_learner_idx
    ON hag_learner_bridged (topic_id, learner_id, ended_at);

INSERT INTO hag_learner_bridged
    (session_id, concept_slug, supplied_slug, topic_id, learner_id, ended_at)
SELECT DISTINCT s.session_id, c.slug, m.concept_slug, s.topic_id, s.learner_id, s.ended_at
FROM hag_sessions s
CROSS JOIN LATERAL jsonb_array_elements(s.payload -> 'turns') AS t (turn)
CROSS JOIN LATERAL jsonb_array_elements_text(t.turn -> 'concept_slugs') AS c (slug)
CROSS JOIN LATERAL jsonb_array_elements_text(t.turn -> 'rendered_edge_ids') AS r (edge_id)
JOIN hag_edges e
  ON e.id = CASE WHEN r.edge_id ~ '^[0-9a-fA-F-]{36}$' THEN r.edge_id::uuid END
 AND e.edge_type IN ('prerequisite', 'fallback')
JOIN hag_entries m ON m.id = e.target_entry_id
WHERE t.turn ->> 'outcome' = 'success';

-- The count is derived, like the sums of migration 210: no CHECK, and no key to hag_edges
-- (a cascade would cost the nightly's cull a trigger per deleted edge, and TRUNCATE
-- hag_edges would need it named): a row whose edge is gone is read by nothing (the
-- evidence query joins the live edges), and a restored edge keeps its id and its count.
CREATE TABLE hag_edge_withdrawn (
    edge_id  uuid    PRIMARY KEY,
    sessions integer NOT NULL
);
