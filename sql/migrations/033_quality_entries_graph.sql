-- Why: the identity expectations are compound-uniqueness checks restricted to one graph
-- (the seed's partial unique indexes). Great Expectations 1.x deprecates string row
-- conditions in favour of structured ones, which compare a column with a value but cannot
-- test a prefix; so the entries view names each row's graph and whether it is anchored.
CREATE OR REPLACE VIEW hag_quality_entries AS
SELECT id, topic_id, concept_slug, visibility_scope, maturity, confidence,
       concept_match_quality, success_count, failure_count, created_at,
       CASE WHEN visibility_scope LIKE 'student:%' THEN 'student'
            WHEN visibility_scope IN ('tutor', 'visual') THEN visibility_scope
            ELSE 'topic' END AS graph,
       concept_slug <> '_unanchored_' AS anchored
FROM hag_entries;
