-- Why: SPEC §6's orphan (an entry of a topic scope, anchored, not archived, with no edge in
-- or out) was written out in two enrichment queries, the next orphans to send and the count
-- of those a model already had; a drift between them would misreport a run. One view holds
-- the rule; the queries add only the ledger condition. A view, not a function: the planner
-- inlines it, NOT EXISTS subqueries and all.
CREATE VIEW hag_orphan_entries AS
SELECT e.*
FROM hag_entries e
WHERE e.visibility_scope NOT IN ('tutor', 'visual')
  AND e.visibility_scope NOT LIKE 'student:%'
  AND e.concept_slug <> '_unanchored_'
  AND e.maturity <> 'archived'
  AND NOT EXISTS (SELECT 1 FROM hag_edges g WHERE g.source_entry_id = e.id)
  AND NOT EXISTS (SELECT 1 FROM hag_edges g WHERE g.target_entry_id = e.id);
