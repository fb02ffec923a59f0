-- Why: (issue 29) an extractor's invented struggle names a concept m whether or not the
-- learner knows m; a real gap names m mostly when the learner has not shown it. Learners who
-- had already shown m when they failed on c, and were reported as missing it anyway, measure
-- how often the extractor names m out of c by itself, pair by pair: the evidence model's
-- `invented` term (hag.evidence.model.unit_terms) scales that rate to the failing sessions
-- by learners who had not shown m, and a learned c -> m needs more than that many units.
-- Two tables keep the counts when a session is applied (under the units rule), so a re-weigh
-- reads one row per pair and one per concept, whatever the number of sessions:
--   hag_concept_failures: per concept entry c, the sessions with a failed turn on c;
--   hag_shown_exposures: per (c, m), of those sessions the ones whose learner had shown m
--     (a success on m in an earlier session of the topic, or earlier in the same session
--     before its first failed turn on c), and of those the ones whose struggles named c -> m.
-- A session is applied once (its ledger row), so the counts need no per-session rows. They
-- name no learner and no session, and are keyed on shared topic entries: an erasure never
-- touches them, as it leaves an edge's hit count.
CREATE TABLE hag_concept_failures (
    source_entry_id uuid    PRIMARY KEY REFERENCES hag_entries (id) ON DELETE CASCADE,
    sessions        integer NOT NULL CHECK (sessions >= 0)
);

CREATE TABLE hag_shown_exposures (
    source_entry_id uuid    NOT NULL REFERENCES hag_entries (id) ON DELETE CASCADE,
    target_entry_id uuid    NOT NULL REFERENCES hag_entries (id) ON DELETE CASCADE,
    shown_sessions  integer NOT NULL,
    shown_named     integer NOT NULL,
    PRIMARY KEY (source_entry_id, target_entry_id),
    CONSTRAINT hag_shown_exposures_named_within CHECK (shown_named BETWEEN 0 AND shown_sessions),
    CONSTRAINT hag_shown_exposures_two_entries CHECK (source_entry_id <> target_entry_id)
);

CREATE INDEX hag_shown_exposures_target_idx ON hag_shown_exposures (target_entry_id);
