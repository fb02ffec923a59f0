-- hag_entry_readable: whether a learner, in a session or a retrieval about one topic, may read
-- an entry (SPEC §2 "writes are scoped like reads", §3 the four passes). Readable: the tutor's
-- entries, the learner's own `student:` patterns, and the entries of that topic in its topic
-- scopes. Never a drawing (the visual bucket has its own read) nor another learner's pattern,
-- whatever the topic scopes dial holds. Written once, for both directions: the edge walk
-- renders only targets it admits, and ingest and session processing refuse a session that
-- names or would write an entry it denies.
CREATE OR REPLACE FUNCTION hag_entry_readable(
    p_scope        text,
    p_entry_topic  text,
    p_learner_id   text,
    p_topic_id     text,
    p_topic_scopes text[]
) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT p_scope = 'tutor'
        OR p_scope = 'student:' || p_learner_id
        OR (    p_scope = ANY (p_topic_scopes)
            AND p_scope <> 'visual'
            AND p_scope NOT LIKE 'student%'
            AND p_entry_topic = p_topic_id)
$$;
