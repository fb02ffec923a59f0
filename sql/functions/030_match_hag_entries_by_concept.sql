-- match_hag_entries_by_concept: the by-name pass (SPEC §3, seed). It never touches an
-- embedding: the join key is the identity, and similarity is 1.0 by fiat. Same filters as
-- match_hag_entries; ordered by maturity boost times confidence, then most recently matched.
-- The last boost parameter was named p_boost_other until it took its dial's name
-- (boost_candidate). CREATE OR REPLACE cannot rename a parameter, so a memory made before
-- drops the old signature once here; nothing depends on the function.
DO $$
DECLARE
    old regprocedure;
BEGIN
    FOR old IN SELECT oid::regprocedure FROM pg_proc
               WHERE proname = 'match_hag_entries_by_concept' AND 'p_boost_other' = ANY (proargnames)
    LOOP
        EXECUTE format('DROP FUNCTION %s', old);
    END LOOP;
END $$;

CREATE OR REPLACE FUNCTION match_hag_entries_by_concept(
    p_concept_slugs     text[],
    p_topic_id          text,
    p_visibility_scopes text[],
    p_min_confidence    double precision DEFAULT NULL,
    p_floor_proven      double precision DEFAULT NULL,
    p_floor_pattern     double precision DEFAULT NULL,
    p_floor_candidate   double precision DEFAULT NULL,
    p_match_count       integer DEFAULT NULL,
    p_boost_proven      double precision DEFAULT NULL,
    p_boost_pattern     double precision DEFAULT NULL,
    p_boost_candidate   double precision DEFAULT NULL
)
RETURNS TABLE (
    id uuid, topic_id text, concept_slug text, visibility_scope text, maturity text,
    confidence double precision, concept_match_quality double precision, instruction text,
    last_matched_at timestamptz, similarity double precision
)
LANGUAGE sql STABLE AS $$
    SELECT e.id, e.topic_id, e.concept_slug, e.visibility_scope, e.maturity, e.confidence,
           e.concept_match_quality, e.instruction, e.last_matched_at,
           1.0::double precision AS similarity
    FROM hag_entries e
    WHERE e.concept_slug = ANY (p_concept_slugs)
      AND hag_entry_visible(
            e.maturity, e.confidence,
            COALESCE(p_min_confidence, hag_setting_float('retrieval_min_confidence')),
            COALESCE(p_floor_proven, hag_setting_float('floor_proven')),
            COALESCE(p_floor_pattern, hag_setting_float('floor_pattern')),
            COALESCE(p_floor_candidate, hag_setting_float('floor_candidate')))
      AND (p_topic_id IS NULL OR e.topic_id = p_topic_id)
      AND e.visibility_scope = ANY (p_visibility_scopes)
    ORDER BY hag_maturity_boost(
                 e.maturity,
                 COALESCE(p_boost_proven, hag_setting_float('boost_proven')),
                 COALESCE(p_boost_pattern, hag_setting_float('boost_pattern')),
                 COALESCE(p_boost_candidate, hag_setting_float('boost_candidate'))) * e.confidence DESC,
             e.last_matched_at DESC NULLS LAST,
             e.id
    LIMIT COALESCE(p_match_count, (hag_setting_float('concept_match_count'))::integer)
$$;
