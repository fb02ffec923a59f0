-- The units rule for learned `leads_to` and `fallback` edges (issue 29,
-- hag/evidence/sequences.py): what session-end reads and writes for it.

-- name: rendered_edge_concepts
-- The concepts at both ends of each rendered edge, live or deleted since (a move is prompted
-- when the turn it left rendered a line joining its two concepts; hag_rendered_lines).
SELECT e.id, s.concept_slug AS source_slug, t.concept_slug AS target_slug
FROM hag_rendered_lines(%(ids)s::uuid[]) e
JOIN hag_entries s ON s.id = e.source_entry_id
JOIN hag_entries t ON t.id = e.target_entry_id

-- name: record_sequence_reports
-- Who made each unprompted move this session: one row per (edge, session) with the learner,
-- the moves and the session's share (hag_edge_learner_reports, as for prerequisites), the
-- edge found by its identity (reinforcement upserted it in this transaction, its row is
-- locked). A session applied again inserts nothing.
INSERT INTO hag_edge_learner_reports (edge_id, session_id, learner_id, turns, share, reported_at)
SELECT e.id, %(session_id)s, %(learner_id)s, r.turns, r.share, %(at)s
FROM unnest(%(sources)s::uuid[], %(targets)s::uuid[], %(types)s::text[], %(turns)s::int[],
            %(shares)s::float8[]) AS r (s, t, kind, turns, share)
JOIN hag_edges e ON e.source_entry_id = r.s AND e.target_entry_id = r.t AND e.edge_type = r.kind
ON CONFLICT (edge_id, session_id) DO NOTHING

-- name: sequence_evidence
-- Every sequence edge out of one of the sources or into one of the targets, or named by its
-- identity (a session's moves' reverse edges: their reverse term changed; the rows
-- lock_edges locked), its provenance and confidence; its units and learners
-- from unprompted sessions only
-- (hag_edge_evidence with no unattributed hits: a move discovery counted before the rule, or
-- a prompted one, is no evidence), the units of its type out of its source, into its target
-- and in its topic (every sequence edge of the topic, capped per learner like its own), the
-- reverse edge's units and distinct learners (model.counted_reverse), and the confidence of
-- the prerequisite meaning the same step (`leads_to` A -> B: B -> A; `fallback` A -> B: A -> B), and the struggle evidence on the
-- concept that step says needs the other (B for `leads_to`, A for `fallback`): its units over
-- its prerequisites and its distinct reporting learners (hag_concept_learner_count, from
-- counts kept at write time: no past report is read, as the prerequisites count them), with an authored edge's prior (what judges it).
WITH family AS (
    SELECT x.id FROM hag_edges x
    WHERE x.edge_type IN ('leads_to', 'fallback')
      AND x.source_entry_id = ANY(%(sources)s::uuid[])
    UNION
    SELECT x.id FROM hag_edges x
    WHERE x.edge_type IN ('leads_to', 'fallback')
      AND x.target_entry_id = ANY(%(targets)s::uuid[])
    UNION
    SELECT x.id
    FROM unnest(%(named_sources)s::uuid[], %(named_targets)s::uuid[], %(named_types)s::text[])
         AS k (s, t, kind)
    JOIN hag_edges x
      ON x.source_entry_id = k.s AND x.target_entry_id = k.t AND x.edge_type = k.kind
), topics AS (
    SELECT DISTINCT s.topic_id
    FROM hag_edges e JOIN hag_entries s ON s.id = e.source_entry_id
    WHERE e.id IN (SELECT id FROM family)
), pool AS (
    -- the units kept at write time (hag_edge_units, one row per edge) joined set-based and
    -- read when summed at this cap; only an edge without such a row calls hag_edge_evidence,
    -- which then sums its per-learner rows (a call per edge of the topic made this step most
    -- of session-end's time); every learned edge, and an authored or enriched one holding
    -- moves (a kept row at any cap: the moves are the learners' whoever wrote the edge; one
    -- without has no moves, adds nothing and is not read)
    SELECT e.id, e.edge_type, e.source_entry_id, e.target_entry_id, s.topic_id,
           u.units, u.learners
    FROM hag_edges e
    JOIN hag_entries s ON s.id = e.source_entry_id
    LEFT JOIN hag_edge_units b ON b.edge_id = e.id
    CROSS JOIN LATERAL (
        SELECT b.units, b.learners WHERE b.cap = %(prerequisite_learner_cap)s
        UNION ALL
        SELECT f.units, f.learners
        FROM hag_edge_evidence(e.id, 0, %(prerequisite_learner_cap)s) f
        WHERE b.cap IS DISTINCT FROM %(prerequisite_learner_cap)s
    ) u
    WHERE e.edge_type IN ('leads_to', 'fallback')
      AND (e.source_type = 'learned' OR b.edge_id IS NOT NULL)
      AND s.topic_id IN (SELECT topic_id FROM topics)
), sums AS (
    SELECT p.*,
           sum(p.units) OVER (PARTITION BY p.edge_type, p.source_entry_id) AS out_units,
           sum(p.units) OVER (PARTITION BY p.edge_type, p.target_entry_id) AS in_units,
           sum(p.units) OVER (PARTITION BY p.edge_type, p.topic_id) AS total_units
    FROM pool p
), members AS (
    -- every family edge with its units (an authored or enriched one's are read by nothing
    -- of its own: struggles judge it)
    SELECT e.id, e.edge_type, e.source_entry_id, e.target_entry_id, e.source_type,
           e.confidence, e.prior_confidence,
           CASE WHEN e.edge_type = 'fallback' THEN e.source_entry_id
                ELSE e.target_entry_id END AS needing,
           COALESCE(s.units, 0) AS units, COALESCE(s.learners, 0) AS learners,
           COALESCE(s.out_units, 0) AS out_units, COALESCE(s.in_units, 0) AS in_units,
           COALESCE(s.total_units, 0) AS total_units
    FROM hag_edges e
    LEFT JOIN sums s ON s.id = e.id
    WHERE e.id IN (SELECT id FROM family)
), needs AS MATERIALIZED (
    -- the struggle evidence on each needing concept, read once per concept (a session's
    -- family shares a few dozen concepts among its hundreds of edges)
    SELECT n.needing,
           (SELECT COALESCE(sum(u.units), 0)
            FROM hag_edges q
            CROSS JOIN LATERAL hag_edge_evidence(q.id, q.hit_count, %(prerequisite_learner_cap)s) u
            WHERE q.edge_type = 'prerequisite' AND q.source_entry_id = n.needing) AS units,
           (SELECT x.learners FROM hag_concept_learner_count(n.needing) x) AS learners
    FROM (SELECT DISTINCT needing FROM members) n
)
SELECT s.id, s.edge_type, s.source_type, s.confidence, s.prior_confidence, s.units, s.learners, s.out_units,
       s.in_units, s.total_units, COALESCE(r.units, 0) AS reverse_units,
       COALESCE(r.learners, 0) AS reverse_learners,
       nd.units AS needing_units, nd.learners AS needing_learners,
       (SELECT max(q.confidence) FROM hag_edges q
        WHERE q.edge_type = 'prerequisite'
          AND ((s.edge_type = 'leads_to' AND q.source_entry_id = s.target_entry_id
                AND q.target_entry_id = s.source_entry_id)
            OR (s.edge_type = 'fallback' AND q.source_entry_id = s.source_entry_id
                AND q.target_entry_id = s.target_entry_id))) AS prerequisite
FROM members s
JOIN needs nd ON nd.needing = s.needing
LEFT JOIN sums r ON r.edge_type = s.edge_type AND r.source_entry_id = s.target_entry_id
                AND r.target_entry_id = s.source_entry_id
ORDER BY s.id
