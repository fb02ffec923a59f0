-- Enrichment of orphan concepts (SPEC §6). An orphan is an entry in a topic scope (not
-- tutor, visual or student:*) with no edge in or out; `_unanchored_` rows are never one
-- (they have no identity to reason about), and neither are archived (retired) entries.

-- name: orphans
-- The next orphans to enrich (the view hag_orphan_entries, migration 041), oldest first:
-- those already sent to this model (the ledger is keyed by entry and model) are left out, so
-- a re-run never pays twice for one.
SELECT e.id AS entry_id, e.topic_id, t.title AS topic_title, e.concept_slug,
       e.visibility_scope, COALESCE(c.title, e.concept_slug) AS title,
       COALESCE(c.description, '') AS description, e.instruction
FROM hag_orphan_entries e
JOIN hag_topics t ON t.topic_id = e.topic_id
LEFT JOIN hag_concepts c ON c.topic_id = e.topic_id AND c.slug = e.concept_slug
WHERE (%(topic_id)s::text IS NULL OR e.topic_id = %(topic_id)s::text)
  AND NOT EXISTS (SELECT 1 FROM hag_enrichment_ledger l
                  WHERE l.entry_id = e.id AND l.model = %(model)s)
ORDER BY e.topic_id, e.created_at, e.id
LIMIT %(limit)s

-- name: orphans_already_enriched
-- Orphans left out because this model already had them (the summary reports them).
SELECT count(*) AS n
FROM hag_orphan_entries e
JOIN hag_enrichment_ledger l ON l.entry_id = e.id AND l.model = %(model)s
WHERE (%(topic_id)s::text IS NULL OR e.topic_id = %(topic_id)s::text)

-- name: topic_exists
-- Whether a topic id is known (a backfill naming a missing topic is an operator error).
SELECT EXISTS (SELECT 1 FROM hag_topics WHERE topic_id = %(topic_id)s) AS found

-- name: candidates
-- The concepts offered to the model for one orphan: live entries of the same topic and
-- scope, nearest first by cosine similarity of the concept embeddings (title and
-- description; the entry's own embedding when the catalogue has none). The list is cut
-- to the candidate-count dial, so the prompt does not grow with the topic. Ordering by
-- the COALESCE expression keeps this an exact scan: an approximate vector index must not
-- silently drop candidates behind the topic filter.
WITH o AS (
    SELECT e.id, e.topic_id, e.visibility_scope, COALESCE(c.embedding, e.embedding) AS embedding
    FROM hag_entries e
    LEFT JOIN hag_concepts c ON c.topic_id = e.topic_id AND c.slug = e.concept_slug
    WHERE e.id = %(entry_id)s
)
SELECT e.id AS entry_id, e.concept_slug AS slug, COALESCE(c.title, e.concept_slug) AS title,
       COALESCE(NULLIF(c.description, ''), e.instruction) AS description,
       1 - (COALESCE(c.embedding, e.embedding) <=> o.embedding) AS similarity,
       COALESCE(c.aliases, '{}') AS aliases
FROM o
JOIN hag_entries e ON e.topic_id = o.topic_id AND e.visibility_scope = o.visibility_scope
LEFT JOIN hag_concepts c ON c.topic_id = e.topic_id AND c.slug = e.concept_slug
WHERE e.id <> o.id
  AND e.concept_slug <> '_unanchored_'
  AND e.maturity <> 'archived'
ORDER BY COALESCE(c.embedding, e.embedding) <=> o.embedding, e.concept_slug
LIMIT %(candidate_count)s

-- name: resolve_slugs
-- For each slug a model named: the entry of that concept in the orphan's topic and scope
-- (with its maturity), whether the topic's catalogue knows the slug, and which OTHER
-- topics know it (to tell "unknown" from "belongs to another topic" in the reject).
SELECT s.slug, e.id AS entry_id, e.maturity,
       EXISTS (SELECT 1 FROM hag_concepts c
               WHERE c.topic_id = %(topic_id)s AND c.slug = s.slug) AS in_catalogue,
       ARRAY(SELECT DISTINCT k.topic_id
             FROM (SELECT c.topic_id FROM hag_concepts c WHERE c.slug = s.slug
                   UNION
                   SELECT x.topic_id FROM hag_entries x
                   WHERE x.concept_slug = s.slug
                     AND x.visibility_scope NOT IN ('tutor', 'visual')
                     AND x.visibility_scope NOT LIKE 'student:%%') k
             WHERE k.topic_id <> %(topic_id)s
             ORDER BY k.topic_id) AS other_topics
FROM unnest(%(slugs)s::text[]) AS s (slug)
LEFT JOIN hag_entries e
       ON e.topic_id = %(topic_id)s AND e.visibility_scope = %(scope)s
      AND e.concept_slug = s.slug AND s.slug <> '_unanchored_'

-- name: edges_among
-- Existing edges whose both ends are among the given entries (the duplicate check).
SELECT source_entry_id, target_entry_id, edge_type
FROM hag_edges
WHERE source_entry_id = ANY(%(ids)s::uuid[]) AND target_entry_id = ANY(%(ids)s::uuid[])

-- name: prerequisite_reach
-- Pairs (a, b) of the given entries, a <> b, where b can be reached from a by following
-- prerequisite edges: the stored ones plus `extra` ones not stored yet (a dry run's
-- accepted proposals). The cycle check then only needs this small closure plus the
-- proposals of one reply. UNION (not UNION ALL) makes the walk stop on an existing cycle.
WITH RECURSIVE prerequisite AS (
    SELECT source_entry_id AS s, target_entry_id AS t
    FROM hag_edges WHERE edge_type = 'prerequisite'
    UNION ALL
    SELECT x.s, x.t FROM unnest(%(extra_sources)s::uuid[], %(extra_targets)s::uuid[]) AS x (s, t)
), reach (start, node) AS (
    SELECT i, i FROM unnest(%(ids)s::uuid[]) AS i
    UNION
    SELECT r.start, p.t FROM reach r JOIN prerequisite p ON p.s = r.node
)
SELECT start, node FROM reach
WHERE node = ANY(%(ids)s::uuid[]) AND node <> start

-- name: claim_orphan
-- Take an orphan for this model in the current transaction: the ledger row is the lock.
-- Nothing comes back when another run already has it (that run paid; this one rolls back).
INSERT INTO hag_enrichment_ledger (entry_id, model, run_id, enriched_at)
VALUES (%(entry_id)s, %(model)s, %(run_id)s, %(at)s)
ON CONFLICT (entry_id, model) DO NOTHING
RETURNING entry_id

-- name: settle_orphan
-- What the model proposed for this orphan and what became of it.
UPDATE hag_enrichment_ledger
SET accepted = %(accepted)s, rejected = %(rejected)s, detail = %(detail)s
WHERE entry_id = %(entry_id)s AND model = %(model)s

-- name: record_call
-- One model call in the cost ledger: tokens as the server reported them, latency, outcome.
INSERT INTO hag_llm_calls (run_id, entry_id, model, prompt_tokens, completion_tokens,
                           latency_ms, ok, error, at)
VALUES (%(run_id)s, %(entry_id)s, %(model)s, %(prompt_tokens)s, %(completion_tokens)s,
        %(latency_ms)s, %(ok)s, %(error)s, %(at)s)

-- name: start_run
-- The run row of an enrichment backfill (dry runs write nothing, not even this).
INSERT INTO hag_runs (run_id, kind, started_at, dry_run, params)
VALUES (%(run_id)s, 'enrichment', %(at)s, false, %(params)s)

-- name: finish_run
-- Close the run row with its summary totals.
UPDATE hag_runs SET finished_at = %(at)s, summary = %(summary)s, status = %(status)s
WHERE run_id = %(run_id)s

-- name: run_calls
-- The cost ledger of one run, call by call.
SELECT call_id, run_id, entry_id, model, prompt_tokens, completion_tokens, latency_ms, ok,
       error, at
FROM hag_llm_calls WHERE run_id = %(run_id)s ORDER BY call_id
