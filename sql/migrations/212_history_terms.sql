-- Why: (issue 29) `hag explain EDGE` prints the terms of a prerequisite's confidence now, but
-- the history said only that a re-weigh moved it ("prerequisite evidence (lift)"), so why an
-- edge held a value in the past could not be read back. A history row written by a re-weigh
-- under the units rule now carries the formula's terms at that moment (the same ones explain
-- prints: units, learners, chance, reverse, prior, the result ...), as JSON; other rows have
-- none. Existing rows are left without.
ALTER TABLE hag_confidence_history ADD COLUMN terms jsonb;
