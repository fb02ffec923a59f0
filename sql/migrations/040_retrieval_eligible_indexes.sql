-- Why: an exact retrieval pass spent half its time visiting rows the seed's filter then
-- rejects (about 55% of a scope's rows at the benchmark's mix) in index order, one heap page
-- per 1,536-d row. With the filter restated as one range per maturity tier
-- (hag_entry_visible), these btrees let the planner build a bitmap of the eligible rows
-- only and visit them in block order: the exact tutor pass at 100k went from 10.2 to about
-- 7 ms p50 with the same answers (docs/retrieval.md). The topic index replaces the
-- (topic_id, visibility_scope) one it extends (dropped last: a DROP locks out readers until
-- the transaction commits); the scope index serves the tutor and student passes.
-- Cost on the write side: confidence and maturity are now indexed, so a graded entry is
-- never a HOT update. A 1,536-d row fills its page, so its updates were never HOT anyway;
-- at small dimensions each grading now also writes these index entries.
CREATE INDEX hag_entries_topic_eligible_idx
    ON hag_entries (topic_id, visibility_scope, maturity, confidence);
CREATE INDEX hag_entries_scope_eligible_idx
    ON hag_entries (visibility_scope, maturity, confidence);
DROP INDEX hag_entries_topic_scope_idx;
