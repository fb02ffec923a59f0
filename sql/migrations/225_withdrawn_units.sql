-- Why: (issue 29, review) a report withdrawn as contradicted forward in time counted a whole
-- unit for its session, whatever part of the session's unit it had held. A session is one
-- unit of evidence about its struggled concept, shared among the pairs its turns named
-- (`hag_edge_learner_reports.share`): a turn naming three concepts gives each a third. Kept,
-- such a report gives its edge a third; withdrawn, it gave the pair's authored sibling's
-- judgement a whole unit, and three of them gave three, from one session.
--
-- The pair now keeps the units withdrawn beside the sessions: the withdrawn reports' shares
-- (a recorded report's, a culled edge's kept report's, or, for a struggle contradicted when
-- it was made, the part of its session's unit the turns naming it held). The evidence query
-- reads the units, each learner's within the learner's cap for the pair as before, so a
-- withdrawn report counts exactly what it counted while it stood.
--
-- Carried over: which share a counted session held was not kept, so each counts a unit, as
-- it did (units = sessions). A share is positive and at most 1, so the units of a row lie in
-- (0, sessions].
ALTER TABLE hag_pair_withdrawn ADD COLUMN units double precision;
UPDATE hag_pair_withdrawn SET units = sessions;
ALTER TABLE hag_pair_withdrawn ALTER COLUMN units SET NOT NULL;
ALTER TABLE hag_pair_withdrawn
    ADD CONSTRAINT hag_pair_withdrawn_units_within_sessions
    CHECK (units > 0 AND units <= sessions);
