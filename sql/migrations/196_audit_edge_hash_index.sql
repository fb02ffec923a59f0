-- Why: the audited cull at 1M + 1M was 16x a bare DELETE of the same rows (issue 26). Of the
-- audit's cost (a row per culled edge, 217,558 rows a night in the benchmark), its btree on
-- edge_id was the largest part: every culled edge's id is a random uuid, so each of the
-- night's inserts lands on a random leaf of an index that grows with the audit (measured
-- with the audit trigger's inserts alone: about 1 s of 2.3-2.7 s of server CPU without it,
-- docs/journal/2026-12-02-nightly-under-8s.md).
--
-- Every reader of the audit by edge asks for equality (`edge_id = x`, `edge_id = ANY (...)`:
-- restore, an edge's history); none needs the btree's order or uniqueness (an edge culled,
-- restored and culled again has two rows), and the restored edges the cull leaves alone have
-- their own partial index (migration 030). A hash index answers those lookups and costs
-- about 0.4 s less server CPU per night at 1M (same journal). The prefix match of
-- `hag audit restore <prefix>` scans the culled rows as before (a LIKE on the id's text never
-- used the btree).
DROP INDEX hag_edge_audit_edge_idx;
CREATE INDEX hag_edge_audit_edge_idx ON hag_edge_audit USING hash (edge_id);
