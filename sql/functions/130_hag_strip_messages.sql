-- What the retention sweep strips (hag/operations/privacy.py strip_expired, dial message_retention_days):
-- its living definition, re-applied by every migrate (hag/storage/migrate.py).
-- A payload with the student's words taken out: every turn's student_message and every
-- struggle's quoted evidence become empty strings (the contract's shapes stay valid); the
-- concepts, outcomes and observations, which the memory learned from, stay.
CREATE OR REPLACE FUNCTION hag_strip_messages(p_payload jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(p_payload -> 'turns') = 'array' THEN jsonb_set(
        p_payload, '{turns}',
        COALESCE((
            SELECT jsonb_agg(
                CASE WHEN jsonb_typeof(t) <> 'object' THEN t
                     ELSE (CASE WHEN t ? 'student_message' THEN t || '{"student_message": ""}'
                                ELSE t END)
                          || CASE WHEN jsonb_typeof(t -> 'struggles') = 'array' THEN
                                 jsonb_build_object('struggles', COALESCE((
                                     SELECT jsonb_agg(
                                         CASE WHEN jsonb_typeof(s) = 'object' AND s ? 'evidence'
                                              THEN s || '{"evidence": ""}' ELSE s END
                                         ORDER BY k)
                                     FROM jsonb_array_elements(t -> 'struggles')
                                          WITH ORDINALITY AS y (s, k)), '[]'::jsonb))
                             ELSE '{}'::jsonb END
                END
                ORDER BY n)
            FROM jsonb_array_elements(p_payload -> 'turns') WITH ORDINALITY AS x (t, n)
        ), '[]'::jsonb))
    ELSE p_payload END
$$;
