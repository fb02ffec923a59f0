-- Why: a struggle report that names a concept its learner had already succeeded on is mostly
-- an extractor's invention (docs/learning-report.md, eighth round): under the lift rule with
-- `prerequisite_repeat_shown_weight` below 1 such a learner's sessions weigh less. Session-end
-- asks, for each report of a re-weighed prerequisite, whether its learner had succeeded on
-- the named concept in an earlier session of the topic. The answer is in the kept payloads,
-- but reading them per report would scan every earlier session's turns; this table keeps,
-- per ingested session, the concepts of its successful turns.
--
-- One row per (session, concept) with the session's topic, learner and end. Ingest writes
-- the rows in the statement that queues the session (a session already queued writes
-- nothing), so they hold for every ingested payload whatever order sessions are processed
-- in, and concurrent workers read the same answer a serial replay does. The payloads already
-- kept are read into it here.
CREATE TABLE hag_learner_successes (
    session_id   text        NOT NULL REFERENCES hag_sessions (session_id) ON DELETE CASCADE,
    concept_slug text        NOT NULL,
    topic_id     text        NOT NULL,
    learner_id   text        NOT NULL,
    ended_at     timestamptz NOT NULL,
    PRIMARY KEY (session_id, concept_slug)
);

CREATE INDEX hag_learner_successes_learner_idx
    ON hag_learner_successes (topic_id, learner_id, concept_slug, ended_at);

INSERT INTO hag_learner_successes (session_id, concept_slug, topic_id, learner_id, ended_at)
SELECT DISTINCT s.session_id, c.slug, s.topic_id, s.learner_id, s.ended_at
FROM hag_sessions s
CROSS JOIN LATERAL jsonb_array_elements(s.payload -> 'turns') AS t (turn)
CROSS JOIN LATERAL jsonb_array_elements_text(t.turn -> 'concept_slugs') AS c (slug)
WHERE t.turn ->> 'outcome' = 'success';
