-- Why: an exact retrieval pass spent half its time visiting rows the seed's filter then
-- rejects (about 55% of a scope's rows at the benchmark's mix) in index order, one heap page
-- per 1,536-d row. With the filter restated as one range per maturity tier
-- (hag_entry_visible), these btrees let the planner build a bitmap of the eligible rows
-- only and visit them in block order: the tutor pass at 100k went from 10.2 to 7.2 ms p50
-- with the same answers (docs/retrieval.md). The topic index replaces the (topic_id,
-- visibility_scope) one it extends; the scope index serves the tutor and student passes.
CREATE INDEX hag_entries_topic_eligible_idx
    ON hag_entries (topic_id, visibility_scope, maturity, confidence);
DROP INDEX hag_entries_topic_scope_idx;
CREATE INDEX hag_entries_scope_eligible_idx
    ON hag_entries (visibility_scope, maturity, confidence);
