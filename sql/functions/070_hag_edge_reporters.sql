-- Who reported a prerequisite (the evidence profile's repeat weighting, rules.repeat_weighted_hits):
-- its living definition, re-applied by every migrate (hag/storage/migrate.py). Per learner, the
-- sessions and turns of hag_edge_learner_reports (migration 091) that reported the edge, split
-- by whether the learner had succeeded on the edge's target in an earlier session of the
-- topic (shown = 1, hag_learner_successes, migration 097; a session's own successes do not
-- count for its reports). Read by session: prerequisite_evidence for the edge, its reverse
-- edge and every prerequisite out of its source.
--
-- PL/pgSQL rather than SQL: its body is checked when it runs, not when it is created, so
-- this file also applies to a schema migrated only part of the way (tests/test_migrate.py).
CREATE OR REPLACE FUNCTION hag_edge_reporters(p_edge uuid, p_topic text)
RETURNS TABLE (sessions integer, turns integer, shown integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT count(*)::integer, sum(lr.turns)::integer, y.had_shown
    FROM hag_edge_learner_reports lr
    JOIN hag_edges e ON e.id = lr.edge_id
    JOIN hag_entries te ON te.id = e.target_entry_id
    CROSS JOIN LATERAL (
        SELECT EXISTS (
            SELECT 1 FROM hag_learner_successes ls
            WHERE ls.topic_id = p_topic AND ls.learner_id = lr.learner_id
              AND ls.concept_slug = te.concept_slug AND ls.ended_at < lr.reported_at
        )::integer AS had_shown
    ) y
    WHERE lr.edge_id = p_edge
    GROUP BY lr.learner_id, y.had_shown;
END
$$;
