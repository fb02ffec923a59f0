-- Why: (issue 29) negative evidence judged an authored prerequisite c -> m only from the
-- struggle reports on c. A concept with no true prerequisite (a root) gets almost none, so a
-- wrong authored edge out of it (symmetric-encryption -> caesar-cipher) was never judged. Its
-- failed sessions are evidence too: a learner who had not shown m and failed on c is one a
-- real gap under m would have been named for. hag_concept_failures and hag_shown_exposures
-- count those sessions (c's failed sessions less those whose learner had shown m); this table
-- keeps who failed on c, so that negative evidence from failures needs as many distinct
-- learners as negative evidence from reports does (`prerequisite_min_learners`): one learner
-- failing on c in many sessions never lowers an authored edge out of it.
--
-- One row per (concept entry, learner), written with the session's failure counts (under the
-- units rule). An erasure pseudonymises the learner, as it does the learner's reports, so the
-- count stays. Nothing is read into it here: the sessions applied before this migration named
-- no learner in hag_concept_failures, so a memory starts counting its failing learners now
-- (fewer learners than sessions: negative evidence from failures waits for new ones).
CREATE TABLE hag_concept_failure_learners (
    source_entry_id uuid NOT NULL REFERENCES hag_entries (id) ON DELETE CASCADE,
    learner_id      text NOT NULL,
    PRIMARY KEY (source_entry_id, learner_id)
);

CREATE INDEX hag_concept_failure_learners_learner_idx ON hag_concept_failure_learners (learner_id);
