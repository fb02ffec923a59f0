-- name: prerequisite_evidence
-- Under the lift and units rules: the prerequisite edges out of or into the given source entries (the
-- rows lock_edges locked), each with its reports (hit_count: sessions that reported it),
-- its source concept's reports over all its prerequisites, the number of concepts of the
-- source's topic graph (anchored, live entries of its topic and scope) the reports could
-- have named, the reverse edge (target -> source), if any: its reports, provenance and
-- confidence (read, not written), the reports on the source naming a concept x with a
-- walked prerequisite x -> target (they support source -> target: rules.unlearned_confidence),
-- over the source's live and culled prerequisites (the audit keeps a culled edge's reports),
-- unless the memory holds x to build on the source (a walked x -> source: such a report is
-- the extractor's reversal, not a gap under the target),
-- the confidence negative evidence keeps beside a lowered edge (unlearned_from, migration
-- 090: the lift rule's), an authored or enriched edge's prior by its provenance
-- (prior_confidence, migration 211: the units rule's), and the source concept's reports
-- [all, reversals]: over its prerequisites, live and culled (the audit keeps a culled edge's
-- reports; a restored one is live again), those naming a concept x with a prerequisite
-- x -> source at `prerequisite_lift_noise_held_min` or more (model.reversal_share): in
-- sessions for the lift rule, and in units for the units rule, where the reports withdrawn
-- as contradicted count too.
-- Under the units rule (issue 29, model.unit_terms) the same evidence in units
-- (hag_edge_evidence: session shares, each learner's capped at `prerequisite_learner_cap`),
-- read from the sums kept when reports are written (migration 210: per edge, and the
-- distinct learners per concept), never from the reports themselves:
-- the edge's units and learners, its concept's units (live prerequisites) and distinct
-- learners, the reverse edge's units and learners (model.counted_reverse), the supporting
-- units, and the concept's units over its live and culled prerequisites (a culled pair's
-- kept reports capped per learner as a live edge's, its sessions with no kept report a unit
-- each, and its withdrawn reports: the reversal share's first term in units), and
-- the edge's unattributed sessions (its hit count beyond its reported sessions: a unit each,
-- and one learner only when no learner is recorded, in hag_edge_evidence; `hag explain`
-- says how many there are),
-- and the counts of the `invented` term (migration 215): its concept's failed sessions, of
-- them those whose learner had shown the target, and of those the ones naming the edge;
-- and its pair's reports withdrawn as contradicted forward in time (migration 223: sessions,
-- and units capped per learner; an authored edge's own evidence and its concept's count them).
WITH touched AS (
    SELECT e.id, e.source_entry_id
    FROM hag_edges e
    WHERE e.edge_type = 'prerequisite'
      AND (e.source_entry_id = ANY(%(sources)s::uuid[])
           OR e.target_entry_id = ANY(%(sources)s::uuid[]))
), family AS (
    -- the prerequisites out of each touched edge's source, with the source's topic graph
    SELECT e.id, e.source_entry_id, e.target_entry_id, e.source_type, e.hit_count,
           e.confidence, e.unlearned_from, e.prior_confidence, s.topic_id, s.visibility_scope,
           sum(e.hit_count) OVER (PARTITION BY e.source_entry_id) AS concept_reports,
           -- its sessions no learner is recorded for (hit count beyond reported sessions)
           greatest(0, e.hit_count - COALESCE((SELECT b.sessions FROM hag_edge_units b
                                                WHERE b.edge_id = e.id), 0)) AS unattributed
    FROM hag_edges e
    JOIN hag_entries s ON s.id = e.source_entry_id
    WHERE e.edge_type = 'prerequisite'
      AND e.source_entry_id IN (SELECT source_entry_id FROM touched)
), units AS (
    -- each family edge with its evidence in units, and its concept's units over its live
    -- prerequisites (`counted`): an enriched edge's sessions no learner is recorded for are
    -- its author's write (enrichment writes it with a hit), no learner's report, so they
    -- count in no concept's units (model.unit_terms, model.confirmed_terms)
    SELECT f.*, u.units, u.learners, c.counted,
           sum(c.counted) OVER (PARTITION BY f.source_entry_id) AS concept_units
    FROM family f
    CROSS JOIN LATERAL hag_edge_evidence(f.id, f.hit_count, %(prerequisite_learner_cap)s) u
    CROSS JOIN LATERAL (
        SELECT greatest(0.0, u.units - CASE WHEN f.source_type = 'enriched'
                                            THEN least(1.0, %(prerequisite_learner_cap)s)
                                                 * f.unattributed
                                            ELSE 0.0 END) AS counted) c
), concept_learners AS (
    -- per source: the distinct learners who reported any prerequisite out of it, its
    -- unattributed sessions one learner only when none is recorded (hag_concept_learner_count)
    SELECT z.source_entry_id, x.learners
    FROM (SELECT DISTINCT source_entry_id FROM family) z
    CROSS JOIN LATERAL hag_concept_learner_count(z.source_entry_id) x
), culled AS MATERIALIZED (
    -- each source's culled prerequisites not restored (the audit keeps their reports), with
    -- their sessions not resumed (a resumed one's count in the edge that took them)
    SELECT a.audit_id, a.source_entry_id, a.target_entry_id,
           a.hit_count - a.resumed_sessions AS sessions
    FROM hag_edge_audit a
    WHERE a.edge_type = 'prerequisite' AND a.restored_at IS NULL
      AND a.source_entry_id IN (SELECT source_entry_id FROM touched)
), beside AS (
    -- per (pair, learner) out of a source, the learner's reports beside the pair's live edge:
    -- kept with a culled edge's audit row and not resumed (their shares, and sessions), and
    -- withdrawn as contradicted forward in time (migration 223, whatever edge the pair has or
    -- had: the shares they held, migration 225)
    SELECT b.source_entry_id, b.target_entry_id, b.learner_id,
           sum(b.kept) AS kept, sum(b.kept_sessions)::int AS kept_sessions,
           sum(b.withdrawn) AS withdrawn, sum(b.withdrawn_sessions)::int AS withdrawn_sessions
    FROM (SELECT c.source_entry_id, c.target_entry_id, ar.learner_id,
                 ar.share AS kept, 1 AS kept_sessions, 0.0::float8 AS withdrawn,
                 0 AS withdrawn_sessions
          FROM culled c
          JOIN hag_edge_audit_reports ar ON ar.audit_id = c.audit_id
          UNION ALL
          SELECT w.source_entry_id, w.target_entry_id, w.learner_id, 0.0, 0,
                 w.units, w.sessions
          FROM hag_pair_withdrawn w
          WHERE w.source_entry_id IN (SELECT source_entry_id FROM touched)) b
    GROUP BY 1, 2, 3
), beside_units AS (
    -- per pair, what those reports add to its live edge's units, each learner's total for
    -- the pair (live, kept and withdrawn) within the cap: all of them (its concept's units,
    -- which judge an authored sibling), and the withdrawn alone (an authored edge's own)
    SELECT b.source_entry_id, b.target_entry_id,
           sum(least(%(prerequisite_learner_cap)s, l.live + b.kept + b.withdrawn)
               - least(%(prerequisite_learner_cap)s, l.live)) AS units,
           sum(least(%(prerequisite_learner_cap)s, l.live + b.withdrawn)
               - least(%(prerequisite_learner_cap)s, l.live)) AS withdrawn_units,
           sum(b.kept_sessions)::int AS kept_sessions,
           sum(b.withdrawn_sessions)::int AS withdrawn_sessions
    FROM beside b
    LEFT JOIN hag_edges e ON e.source_entry_id = b.source_entry_id
                         AND e.target_entry_id = b.target_entry_id
                         AND e.edge_type = 'prerequisite'
    LEFT JOIN hag_edge_learner_units lu ON lu.edge_id = e.id AND lu.learner_id = b.learner_id
    CROSS JOIN LATERAL (SELECT COALESCE(lu.share, 0.0) AS live) l
    GROUP BY 1, 2
), culled_pairs AS (
    SELECT c.source_entry_id, c.target_entry_id, sum(c.sessions)::int AS sessions
    FROM culled c
    GROUP BY 1, 2
), judged AS (
    -- what negative evidence judges an authored edge by, per pair: the live edge's reports,
    -- and beside them a culled edge's and those withdrawn (a withdrawn report is still the
    -- extractor naming its concept), each learner's within the cap; a culled edge's
    -- sessions no report was kept for a unit each
    SELECT x.source_entry_id, x.target_entry_id, x.hit_count, x.counted AS units FROM units x
    UNION ALL
    SELECT source_entry_id, target_entry_id, COALESCE(c.sessions, 0),
           COALESCE(b.units, 0) + least(1.0, %(prerequisite_learner_cap)s)
               * greatest(0, COALESCE(c.sessions, 0) - COALESCE(b.kept_sessions, 0))
    FROM culled_pairs c
    FULL JOIN beside_units b USING (source_entry_id, target_entry_id)
), reversals AS (
    -- per source, over its reports live, culled and withdrawn (`judged`): [its reports, those
    -- naming an x held to build on it] in sessions (the lift rule's) and in units, each
    -- learner's within the cap (the units rule's: one learner repeating a reversal in many
    -- sessions adds at most its cap, as it does to any pair)
    SELECT o.source_entry_id,
           ARRAY[COALESCE(sum(o.hit_count), 0),
                 COALESCE(sum(o.hit_count) FILTER (WHERE h.held), 0)]::int[] AS reports,
           ARRAY[COALESCE(sum(o.units), 0),
                 COALESCE(sum(o.units) FILTER (WHERE h.held), 0)]::float8[] AS units
    FROM judged o
    CROSS JOIN LATERAL (SELECT EXISTS (
        SELECT 1 FROM hag_edges rv
         WHERE rv.source_entry_id = o.target_entry_id
           AND rv.target_entry_id = o.source_entry_id
           AND rv.edge_type = 'prerequisite'
           AND rv.confidence >= %(prerequisite_lift_noise_held_min)s) AS held) h
    GROUP BY o.source_entry_id
), sup AS MATERIALIZED (
    -- per touched edge c -> m: the reports on c naming an x with a walked x -> m, unless a
    -- walked x -> c holds x to build on c; grouped once (per edge, a nightly's thousands of
    -- edges each scanned every report of the family)
    SELECT f.id, sum(o.hit_count) AS hits, sum(o.units) AS units
    FROM family f
    JOIN judged o ON o.source_entry_id = f.source_entry_id
    JOIN hag_edges via ON via.source_entry_id = o.target_entry_id
                      AND via.target_entry_id = f.target_entry_id
                      AND via.edge_type = 'prerequisite'
                      AND via.confidence >= %(edge_min_confidence)s
    WHERE f.id IN (SELECT id FROM touched)
      AND NOT EXISTS (SELECT 1 FROM hag_edges rv
                       WHERE rv.source_entry_id = o.target_entry_id
                         AND rv.target_entry_id = f.source_entry_id
                         AND rv.edge_type = 'prerequisite'
                         AND rv.confidence >= %(edge_min_confidence)s)
    GROUP BY f.id
), graphs AS MATERIALIZED (
    -- the concepts of each topic graph the family's sources sit in, as kept at write time
    -- (migration 228: the sum of the graph's changes; counting its entries here cost
    -- 21-35 ms for a topic of 20,000 at every read)
    SELECT z.topic_id, z.visibility_scope,
           (SELECT COALESCE(sum(t.concepts), 0)::bigint
              FROM hag_graph_concepts t
             WHERE t.topic_id = z.topic_id AND t.visibility_scope = z.visibility_scope)
               AS n_concepts
    FROM (SELECT DISTINCT f.topic_id, f.visibility_scope FROM family f) z
), stream AS (
    -- the family's edges and, as rows of their own, the facts placed on them: per graph, per
    -- source, per pair, per edge. Each fact reaches its edges by a window over this one
    -- stream (`placed`), never by a join of one CTE to another: the planner cannot count a
    -- CTE's rows (it takes 200 groups for each aggregate, and it took a thousand rows per
    -- edge from `hag_edge_evidence` while that was PL/pgSQL; inlined, it estimates one), and a
    -- nested loop it chose over two CTEs grew with the square
    -- of the sources (1.6 s for 5,000 concepts where 12,000 took 0.7 s; declaring the
    -- function's one row moved the square to other joins). Sorts, one per window, grow as
    -- n log n whatever the estimates.
    SELECT 1 AS kind, f.id, f.source_entry_id, f.target_entry_id, f.topic_id,
           f.visibility_scope, f.source_type, f.hit_count, f.confidence, f.unlearned_from,
           f.prior_confidence, f.concept_reports, f.unattributed, f.units, f.learners,
           f.concept_units, NULL::bigint AS n, NULL::float8 AS u, NULL::int[] AS arr,
           NULL::float8[] AS uarr
    FROM units f
    UNION ALL
    SELECT 2, NULL, NULL, NULL, g.topic_id, g.visibility_scope, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, g.n_concepts, NULL, NULL, NULL
    FROM graphs g
    UNION ALL
    SELECT 3, NULL, rs.source_entry_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, rs.reports, rs.units
    FROM reversals rs
    UNION ALL
    SELECT 4, NULL, cl.source_entry_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, cl.learners, NULL, NULL, NULL
    FROM concept_learners cl
    UNION ALL
    SELECT 6, NULL, wd.source_entry_id, wd.target_entry_id, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, NULL, NULL, NULL, NULL, wd.withdrawn_sessions, wd.withdrawn_units, NULL, NULL
    FROM beside_units wd
    UNION ALL
    SELECT 7, sup.id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
           NULL, NULL, sup.hits, sup.units, NULL, NULL
    FROM sup
), placed AS (
    SELECT x.*,
           max(x.n) FILTER (WHERE x.kind = 2)
               OVER (PARTITION BY x.topic_id, x.visibility_scope) AS n_concepts,
           max(x.arr) FILTER (WHERE x.kind = 3) OVER by_source AS reversal_reports,
           max(x.uarr) FILTER (WHERE x.kind = 3) OVER by_source AS reversal_units,
           max(x.n) FILTER (WHERE x.kind = 4) OVER by_source AS concept_learners,
           max(x.n) FILTER (WHERE x.kind = 6) OVER by_pair AS withdrawn,
           max(x.u) FILTER (WHERE x.kind = 6) OVER by_pair AS withdrawn_units,
           max(x.n) FILTER (WHERE x.kind = 7) OVER (PARTITION BY x.id) AS support_hits,
           max(x.u) FILTER (WHERE x.kind = 7) OVER (PARTITION BY x.id) AS support_units
    FROM stream x
    WINDOW by_source AS (PARTITION BY x.source_entry_id),
           by_pair AS (PARTITION BY x.source_entry_id, x.target_entry_id)
)
SELECT f.id, f.source_entry_id, f.target_entry_id,
       f.source_type, f.hit_count, f.confidence, f.unlearned_from, f.prior_confidence,
       f.concept_reports,
       f.n_concepts,
       r.hit_count AS reverse_hits, r.source_type AS reverse_source_type,
       r.confidence AS reverse_confidence,
       COALESCE(f.support_hits, 0) AS support_hits, COALESCE(f.support_units, 0) AS support_units,
       f.units, f.learners, f.concept_units, f.concept_learners,
       f.unattributed,
       COALESCE(f.reversal_units[1], 0) AS reported_units,
       rv.units AS reverse_units, rv.learners AS reverse_learners,
       COALESCE(f.reversal_reports, ARRAY[0, 0]) AS reversal_reports,
       COALESCE(f.reversal_units, ARRAY[0, 0]::float8[]) AS reversal_units,
       COALESCE(cf.sessions, 0) AS failed_sessions,
       COALESCE(sx.shown_sessions, 0) AS shown_sessions,
       COALESCE(sx.shown_named, 0) AS shown_named,
       COALESCE(f.withdrawn, 0) AS withdrawn,
       COALESCE(f.withdrawn_units, 0) AS withdrawn_units
FROM placed f
LEFT JOIN hag_edges r ON r.source_entry_id = f.target_entry_id
                     AND r.target_entry_id = f.source_entry_id AND r.edge_type = 'prerequisite'
LEFT JOIN LATERAL (SELECT u.units, u.learners
                   FROM hag_edge_evidence(r.id, r.hit_count, %(prerequisite_learner_cap)s) u
                   WHERE r.id IS NOT NULL) rv ON true
LEFT JOIN hag_concept_failures cf ON cf.source_entry_id = f.source_entry_id
LEFT JOIN hag_shown_exposures sx ON sx.source_entry_id = f.source_entry_id
                                AND sx.target_entry_id = f.target_entry_id
WHERE f.kind = 1 AND f.id IN (SELECT id FROM touched)
ORDER BY f.id

-- name: prerequisite_sources
-- Every entry with a prerequisite out of it (`hag settings profile` re-weighs them all).
SELECT DISTINCT source_entry_id FROM hag_edges WHERE edge_type = 'prerequisite'
ORDER BY source_entry_id

-- name: record_learner_reports
-- Who reported each prerequisite this session proposed (migration 091): one row per (edge,
-- session) with the session's learner, how many of its turns reported it and its share of
-- the session's unit (migration 200, rules.session_shares), in the session's transaction
-- beside the edge's hit count (the edges are locked or new). A session applied again
-- inserts nothing.
INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, reported_at)
SELECT r.edge_id, %(session_id)s, %(learner_id)s, r.turns, r.share, %(at)s
FROM unnest(%(edge_ids)s::uuid[], %(turns)s::int[], %(shares)s::float8[]) AS r (edge_id, turns, share)
ON CONFLICT (edge_id, session_id) DO NOTHING

-- name: culled_with_reports
-- The culled edges of these new learned edges' pairs (same type) that kept reports
-- (migration 220), their audit rows locked: a learned edge created again takes those
-- reports back (`store.resume_culled_reports`; a prerequisite's are its learners' reports, a
-- `leads_to`'s or `fallback`'s their unprompted moves). A cull forgets an unwalked line of
-- the graph, not what learners reported, so a learner's report waits for the next learner
-- however long it takes. Culls only. A row an operator's restore holds locked is left to it
-- (SKIP LOCKED: the restore then finds the new edge and refuses, and no lock is taken in the
-- other order) and returned with `taken` false: the session writes the resumption it could
-- not make (skipped_resumptions), and the nightly makes it (`stranded_with_reports`).
WITH waiting AS (
    SELECT f.id AS edge_id, f.edge_type, f.source_entry_id, a.audit_id
    FROM hag_edges f
    JOIN hag_edge_audit a ON a.source_entry_id = f.source_entry_id
                         AND a.target_entry_id = f.target_entry_id
                         AND a.edge_type = f.edge_type AND a.reason = 'cull'
                         AND a.restored_at IS NULL AND a.resumed_at IS NULL
    WHERE f.id = ANY (%(edge_ids)s::uuid[])
      AND EXISTS (SELECT 1 FROM hag_edge_audit_reports ar WHERE ar.audit_id = a.audit_id)
), taken AS (
    SELECT a.audit_id
    FROM hag_edge_audit a
    WHERE a.audit_id IN (SELECT audit_id FROM waiting)
      AND a.restored_at IS NULL AND a.resumed_at IS NULL
    ORDER BY a.audit_id
    FOR UPDATE OF a SKIP LOCKED
)
SELECT w.edge_id, w.edge_type, w.source_entry_id, w.audit_id,
       w.audit_id IN (SELECT audit_id FROM taken) AS taken
FROM waiting w
ORDER BY w.audit_id

-- name: skipped_resumptions
-- The resumptions culled_with_reports could not make (a restore held the audit row), for
-- the nightly (migration 226). A row per skip, appended.
INSERT INTO hag_resume_pending (audit_id, edge_id, edge_type, source_entry_id, flagged_at)
SELECT k.audit_id, k.edge_id, k.edge_type, k.source_entry_id, %(at)s
FROM unnest(%(audit_ids)s::bigint[], %(edge_ids)s::uuid[], %(edge_types)s::text[],
            %(sources)s::uuid[]) AS k (audit_id, edge_id, edge_type, source_entry_id)
ORDER BY k.audit_id

-- name: resume_pending
-- The resumptions waiting for the nightly (migration 226), of these edge types.
SELECT flag, audit_id, edge_id, source_entry_id
FROM hag_resume_pending
WHERE edge_type = ANY (%(types)s::text[])
ORDER BY flag

-- name: clear_resume_pending
-- The waiting resumptions the nightly read, made or found void.
DELETE FROM hag_resume_pending WHERE flag = ANY (%(flags)s::bigint[])

-- name: stranded_with_reports
-- The nightly's side of culled_with_reports: of the resumptions sessions could not make
-- (resume_pending), those whose audit row still waits (a cull not restored nor resumed,
-- with kept reports) and whose edge is still the pair's, of the same type, among the edges
-- the caller locked (`locked`; NULL: every edge of the type is locked). The audit rows are
-- locked (a restore holding one is waited for: it waits on nothing the nightly holds).
SELECT f.id AS edge_id, a.audit_id
FROM unnest(%(audit_ids)s::bigint[], %(edge_ids)s::uuid[]) AS k (audit_id, edge_id)
JOIN hag_edge_audit a ON a.audit_id = k.audit_id
JOIN hag_edges f ON f.id = k.edge_id
                AND f.source_entry_id = a.source_entry_id
                AND f.target_entry_id = a.target_entry_id
                AND f.edge_type = a.edge_type
WHERE a.reason = 'cull' AND a.restored_at IS NULL AND a.resumed_at IS NULL
  AND EXISTS (SELECT 1 FROM hag_edge_audit_reports ar WHERE ar.audit_id = a.audit_id)
  AND (%(locked)s::uuid[] IS NULL OR f.id = ANY (%(locked)s::uuid[]))
ORDER BY a.audit_id
FOR UPDATE OF a

-- name: record_resumption
-- After the reports moved (audit.sql `move_kept_reports`): each audit row records the
-- resumption (resumed_*: its sessions that went count once, in the new edge, and those no
-- learner was recorded for stay the culled edge's, evidence.sql `reported`), and the moved
-- sessions join the new edge's hit count. The pair's withdrawn reports stay where they are:
-- they are kept by pair, not by edge (migration 223).
WITH resumed AS (
    SELECT *
    FROM unnest(%(audit_ids)s::bigint[], %(edge_ids)s::uuid[], %(sessions)s::int[])
         AS r (audit_id, edge_id, sessions)
), marked AS (
    UPDATE hag_edge_audit a
    SET resumed_at = %(at)s, resumed_session_id = %(session_id)s,
        resumed_edge_id = r.edge_id, resumed_sessions = r.sessions
    FROM resumed r
    WHERE a.audit_id = r.audit_id
)
UPDATE hag_edges e
SET hit_count = e.hit_count + r.sessions
FROM (SELECT edge_id, sum(sessions)::int AS sessions FROM resumed GROUP BY edge_id) r
WHERE e.id = r.edge_id

-- name: learner_reports_out_of
-- The learner's recorded reports of prerequisites out of these concepts, from sessions that
-- ended before this one (by learner: the index of migration 130), with the pair's concepts:
-- the reports a success on their concept may withdraw (rules.withdrawn_reports). With them
-- the learner's reports kept beside a culled edge's audit row (audit_id set; by learner:
-- migration 220's index): a culled pair learned again resumes them, so a success
-- contradicts them as it would a live one.
SELECT r.edge_id, r.session_id, r.reported_at, e.source_entry_id,
       s.concept_slug AS source_slug, t.concept_slug AS target_slug, NULL::bigint AS audit_id
FROM hag_edge_learner_reports r
JOIN hag_edges e ON e.id = r.edge_id AND e.edge_type = 'prerequisite'
JOIN hag_entries s ON s.id = e.source_entry_id
JOIN hag_entries t ON t.id = e.target_entry_id
WHERE r.learner_id = %(learner_id)s AND r.reported_at < %(ended_at)s
  AND e.source_entry_id = ANY(%(sources)s::uuid[])
UNION ALL
SELECT a.edge_id, k.session_id, k.reported_at, a.source_entry_id,
       s.concept_slug, t.concept_slug, k.audit_id
FROM hag_edge_audit_reports k
JOIN hag_edge_audit a ON a.audit_id = k.audit_id AND a.edge_type = 'prerequisite'
                     AND a.restored_at IS NULL
JOIN hag_entries s ON s.id = a.source_entry_id
JOIN hag_entries t ON t.id = a.target_entry_id
WHERE k.learner_id = %(learner_id)s AND k.reported_at < %(ended_at)s
  AND a.source_entry_id = ANY(%(sources)s::uuid[])
ORDER BY 1, 2

-- name: lock_kept_audits
-- The audit rows whose kept reports a session withdraws, locked in order before their kept
-- reports are deleted, as a restore (audit.sql lock_restorable) and an erasure lock audit
-- rows before they touch those reports: none of them holds a kept report while it waits
-- for the audit row. (A restore inserts edges after it locks audit rows, and a session
-- locks its edges first: those two can still wait on each other; PostgreSQL's deadlock
-- check ends one, and either writer so ended runs again: session_max_retries.)
SELECT a.audit_id
FROM hag_edge_audit a
WHERE a.audit_id = ANY(%(audit_ids)s::bigint[])
ORDER BY a.audit_id
FOR UPDATE

-- name: withdraw_kept_reports
-- Kept reports of culled edges contradicted forward in time, withdrawn as a live edge's are
-- (withdraw_reports): they leave the audit row's kept reports (so a pair learned again does
-- not resume them), their sessions leave the audit row's hit count (so a restore does not
-- bring them back as sessions no learner is recorded for), and the pair counts them under
-- their learner (migration 223).
WITH gone AS (
    DELETE FROM hag_edge_audit_reports k
    USING unnest(%(audit_ids)s::bigint[], %(session_ids)s::text[]) AS w (audit_id, session_id)
    WHERE k.audit_id = w.audit_id AND k.session_id = w.session_id
    RETURNING k.audit_id, k.learner_id, k.share
), per_row AS (
    SELECT audit_id, count(*)::int AS n FROM gone GROUP BY audit_id
), hits AS (
    UPDATE hag_edge_audit a SET hit_count = greatest(0, a.hit_count - p.n)
    FROM per_row p WHERE a.audit_id = p.audit_id
), counted AS (
    INSERT INTO hag_pair_withdrawn AS w
        (source_entry_id, target_entry_id, learner_id, sessions, units)
    SELECT a.source_entry_id, a.target_entry_id, g.learner_id, count(*)::int, sum(g.share)
    FROM gone g JOIN hag_edge_audit a ON a.audit_id = g.audit_id
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (source_entry_id, target_entry_id, learner_id)
    DO UPDATE SET sessions = w.sessions + EXCLUDED.sessions, units = w.units + EXCLUDED.units
)
SELECT COALESCE(sum(n), 0)::int AS withdrawn FROM per_row

-- name: withdraw_reports
-- Reports contradicted forward in time (migration 216), withdrawn in one statement: their
-- rows leave the reports (the statement triggers take them out of the kept units), their
-- sessions leave the edges' hit counts, and each pair counts them under their learner
-- (migration 223). The edges are locked.
WITH gone AS (
    DELETE FROM hag_edge_learner_reports r
    USING unnest(%(edge_ids)s::uuid[], %(session_ids)s::text[]) AS k (edge_id, session_id)
    WHERE r.edge_id = k.edge_id AND r.session_id = k.session_id
    RETURNING r.edge_id, r.learner_id, r.share
), per_edge AS (
    SELECT edge_id, count(*)::int AS n FROM gone GROUP BY edge_id
), hits AS (
    UPDATE hag_edges e SET hit_count = greatest(0, e.hit_count - p.n)
    FROM per_edge p WHERE e.id = p.edge_id
), counted AS (
    INSERT INTO hag_pair_withdrawn AS w
        (source_entry_id, target_entry_id, learner_id, sessions, units)
    SELECT e.source_entry_id, e.target_entry_id, g.learner_id, count(*)::int, sum(g.share)
    FROM gone g JOIN hag_edges e ON e.id = g.edge_id
    GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (source_entry_id, target_entry_id, learner_id)
    DO UPDATE SET sessions = w.sessions + EXCLUDED.sessions, units = w.units + EXCLUDED.units
)
SELECT COALESCE(sum(n), 0)::int AS withdrawn FROM per_edge

-- name: count_contradicted
-- A session's struggles contradicted forward in time when made (rules.TurnStruggles.forward),
-- counted on their pair under the session's learner (migration 223), whether or not the pair
-- has an edge: the session, and the part of its unit the turns naming the pair held
-- (migration 225), as a recorded report withdraw_reports withdraws later counts, so the
-- count does not depend on the order sessions arrive in. One row per pair, in key order.
WITH counted AS (
    INSERT INTO hag_pair_withdrawn AS w
        (source_entry_id, target_entry_id, learner_id, sessions, units)
    SELECT k.source_entry_id, k.target_entry_id, %(learner_id)s, 1, k.share
    FROM unnest(%(sources)s::uuid[], %(targets)s::uuid[], %(shares)s::float8[])
         AS k (source_entry_id, target_entry_id, share)
    ORDER BY 1, 2
    ON CONFLICT (source_entry_id, target_entry_id, learner_id)
    DO UPDATE SET sessions = w.sessions + 1, units = w.units + EXCLUDED.units
    RETURNING 1
)
SELECT count(*)::int AS counted FROM counted

-- name: record_exposures
-- The session's failed concepts and, per failed concept c and concept m its learner had
-- shown, whether its struggles named c -> m (migration 215), added to the kept counts in key
-- order (the session's edge rows are locked already; counts are only ever added to here).
WITH failed AS (
    INSERT INTO hag_concept_failures AS f (source_entry_id, sessions)
    SELECT c, 1 FROM unnest(%(failed)s::uuid[]) AS x (c) ORDER BY c
    ON CONFLICT (source_entry_id) DO UPDATE SET sessions = f.sessions + 1
)  -- a data-modifying WITH runs to completion whether or not the statement reads it
INSERT INTO hag_shown_exposures AS x (source_entry_id, target_entry_id, shown_sessions, shown_named)
SELECT r.c, r.m, 1, r.named::int
FROM unnest(%(sources)s::uuid[], %(targets)s::uuid[], %(named)s::boolean[]) AS r (c, m, named)
ORDER BY r.c, r.m
ON CONFLICT (source_entry_id, target_entry_id) DO UPDATE
SET shown_sessions = x.shown_sessions + 1,
    shown_named = x.shown_named + EXCLUDED.shown_named

-- name: set_edge_confidences
-- Evidence-rule confidences computed in hag/session/rules.py, with the value negative evidence
-- keeps beside a lowered edge, written in one statement (rows already locked in sorted
-- order); an unchanged row writes nothing.
WITH prior AS (  -- the values before this statement (the rows are locked already)
    SELECT id, confidence FROM hag_edges WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id
    FOR NO KEY UPDATE
)
UPDATE hag_edges AS e SET
    confidence = c.confidence,
    unlearned_from = c.unlearned_from,
    updated_at = GREATEST(e.updated_at, %(at)s)
FROM unnest(%(ids)s::uuid[], %(confidences)s::float8[], %(unlearned_from)s::float8[])
     AS c (id, confidence, unlearned_from)
JOIN prior p ON p.id = c.id
WHERE e.id = c.id
  AND (e.confidence IS DISTINCT FROM c.confidence
       OR e.unlearned_from IS DISTINCT FROM c.unlearned_from)
RETURNING e.id, p.confidence AS old_confidence, e.confidence AS new_confidence

-- name: edges_outside_bounds
-- The edges whose confidence lies outside the edge bounds now in force (a floor raised or a
-- ceiling lowered), locked in one sorted pass, with the value negative evidence keeps beside
-- each, so a clamp writes them through set_edge_confidences.
SELECT id, confidence, unlearned_from FROM hag_edges
WHERE confidence < %(floor)s OR confidence > %(ceiling)s
ORDER BY id FOR NO KEY UPDATE

-- name: lock_edges_of_or_outside
-- Row locks, in one sorted pass, on every edge of the given types and every edge outside
-- the edge bounds: what a dial write takes before it re-weighs the first and clamps the
-- second, so its locks come in the id order every edge writer uses (two passes, one per
-- set, would not: a deadlock with a session holding one of each).
SELECT id FROM hag_edges
WHERE edge_type = ANY(%(types)s::text[]) OR confidence < %(floor)s OR confidence > %(ceiling)s
ORDER BY id FOR NO KEY UPDATE

-- name: lock_every_edge_of
-- Row locks on every edge of the given types, in one sorted pass (the order every edge write
-- uses): what `hag settings profile` takes before it re-weighs them all, so it queues behind
-- the sessions and the cull holding any of them.
SELECT id FROM hag_edges WHERE edge_type = ANY(%(types)s::text[]) ORDER BY id FOR NO KEY UPDATE

-- name: lock_edges
-- Row locks on the given edges, in one sorted pass (the order every edge write uses).
SELECT id FROM hag_edges WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR NO KEY UPDATE

-- name: fold_graph_counts
-- Each topic graph's concept count as one row again (migration 228 appends a change per
-- statement that moves it): the nightly folds every graph with more than one row. The
-- DELETE takes the rows its snapshot sees; a change a session appends meanwhile stays
-- beside the folded row, so no count is lost. A learner's own graphs are left as they are:
-- an erasure running beside the fold would not see the folded row the fold had not yet
-- committed, and it would outlive the learner (their rows are few: a learner's writes).
-- The caller holds hag_entries (`lock_entries_shared`) so a TRUNCATE of the entries waits
-- for the fold's commit, and then empties what it wrote.
WITH gone AS (
    DELETE FROM hag_graph_concepts t
    WHERE (t.topic_id, t.visibility_scope) IN (
        SELECT g.topic_id, g.visibility_scope FROM hag_graph_concepts g
        WHERE g.visibility_scope NOT LIKE 'student:%%'
        GROUP BY 1, 2 HAVING count(*) > 1)
    RETURNING t.topic_id, t.visibility_scope, t.concepts
)
INSERT INTO hag_graph_concepts (topic_id, visibility_scope, concepts)
SELECT g.topic_id, g.visibility_scope, sum(g.concepts)
FROM gone g
GROUP BY 1, 2
HAVING sum(g.concepts) <> 0

-- name: lock_entries_shared
-- Held to the end of the transaction: what waits for it is a TRUNCATE or DDL of the entries.
LOCK TABLE hag_entries IN ACCESS SHARE MODE

-- name: graph_counts_backfill
-- Every topic graph's concept count from the entries, in one statement, for a bulk loader
-- that loaded with the counts' insert trigger disabled (the benchmark); migration 228 does
-- the same for the memory it finds.
WITH cleared AS (
    DELETE FROM hag_graph_concepts
)
INSERT INTO hag_graph_concepts (topic_id, visibility_scope, concepts)
SELECT e.topic_id, e.visibility_scope, count(*)
FROM hag_entries e
WHERE e.concept_slug <> '_unanchored_' AND e.maturity <> 'archived'
GROUP BY 1, 2

-- name: sequence_sources
-- Every entry with a leads_to or fallback out of it (`hag settings profile` re-weighs them all).
SELECT DISTINCT source_entry_id FROM hag_edges WHERE edge_type IN ('leads_to', 'fallback')
ORDER BY source_entry_id

-- name: hand_history_terms
-- The formula's terms of each re-weighed edge, for the history rows the next UPDATE of the
-- edges writes (migration 229's statement trigger puts each moved edge's terms on its row and
-- empties the setting): the terms `hag explain EDGE --json` prints (migration 212), as one
-- JSON object keyed by edge id, for this transaction only. It returns the document's size,
-- not the document set_config returns (nor in FROM, where a function's result is stored in
-- a tuplestore, which spills a document of tens of MB to a temporary file).
SELECT octet_length(set_config('hag.edge_terms', %(terms)s, true)) AS handed_bytes

-- name: flag_pending
-- Concepts outside a re-weigh's sources whose prerequisites read a value that moved where
-- their writer could not lock them (migration 224): the given concepts (the target of an
-- edge that crossed `prerequisite_lift_noise_held_min`: its reports naming the edge's source
-- are reversals or stop being; a restored edge's concepts), and every concept with a report
-- naming one of the walk sources (a live or culled prerequisite into it, or a withdrawn
-- report of one: such a report supports its concept's edge to the target of an edge out
-- of it that crossed `edge_min_confidence`). A row per concept and flag, appended.
INSERT INTO hag_reweigh_pending (source_entry_id, flagged_at)
SELECT c.id, %(at)s
FROM (
    SELECT unnest(%(concepts)s::uuid[]) AS id
    UNION
    SELECT e.source_entry_id FROM hag_edges e
    WHERE e.edge_type = 'prerequisite' AND e.target_entry_id = ANY (%(walk_sources)s::uuid[])
    UNION
    SELECT a.source_entry_id FROM hag_edge_audit a
    WHERE a.edge_type = 'prerequisite' AND a.restored_at IS NULL
      AND a.target_entry_id = ANY (%(walk_sources)s::uuid[])
    UNION
    SELECT w.source_entry_id FROM hag_pair_withdrawn w
    WHERE w.target_entry_id = ANY (%(walk_sources)s::uuid[])
) c
WHERE c.id <> ALL (%(sources)s::uuid[])
  AND EXISTS (SELECT 1 FROM hag_entries x WHERE x.id = c.id)
ORDER BY c.id

-- name: pending_sources
-- The flags waiting for a re-weigh (migration 224; all, or those of the given concepts).
SELECT flag, source_entry_id FROM hag_reweigh_pending
WHERE %(among)s::uuid[] IS NULL OR source_entry_id = ANY (%(among)s::uuid[])
ORDER BY flag

-- name: clear_pending
-- The flags a re-weigh read and handled (rows appended since stay).
DELETE FROM hag_reweigh_pending WHERE flag = ANY (%(flags)s::bigint[])
