-- Why: (issue 29) the units rule counts a prerequisite's evidence as sessions (one unit per
-- concept, shared over the pairs its turns name) and learners (each learner's total capped),
-- so the dials that weighed repeats by hand are retired with the mechanisms they tuned:
--   prerequisite_repeat_weighting, prerequisite_repeat_first_weight,
--   prerequisite_repeat_session_weight, prerequisite_repeat_turn_weight,
--   prerequisite_repeat_shown_weight (repeat weighting: replaced by session and learner units);
--   prerequisite_lift_transitive, prerequisite_lift_transitive_weight (off in both profiles);
--   prerequisite_lift_reverse (the reverse direction always counts against a learned pair);
--   prerequisite_unlearn_undo (negative evidence is always read afresh from current counts).
-- Their stored values are dropped here, and each dropped value is said (a WARNING naming the
-- key, its value and who set it), so an operator who had tuned one sees what went. The
-- function that read repeat weighting's per-learner counts goes with them.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        DELETE FROM hag_settings
        WHERE key IN ('prerequisite_repeat_weighting', 'prerequisite_repeat_first_weight',
                      'prerequisite_repeat_session_weight', 'prerequisite_repeat_turn_weight',
                      'prerequisite_repeat_shown_weight', 'prerequisite_lift_transitive',
                      'prerequisite_lift_transitive_weight', 'prerequisite_lift_reverse',
                      'prerequisite_unlearn_undo')
        RETURNING key, value, updated_by
    LOOP
        RAISE WARNING 'retired dial % dropped (its stored value % set by %)',
            r.key, r.value, r.updated_by;
    END LOOP;
    -- a memory migrated from scratch has not created the function yet (sql/functions follow)
    IF to_regprocedure('hag_edge_reporters(uuid, text)') IS NOT NULL THEN
        DROP FUNCTION hag_edge_reporters(uuid, text);
    END IF;
END
$$;
