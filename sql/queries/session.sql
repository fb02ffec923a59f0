-- name: topic_exists
-- Ingest refuses a session about a topic the memory does not hold.
SELECT 1 AS present FROM hag_topics WHERE topic_id = %(topic_id)s

-- name: known_entry_ids
-- Which of the entry ids a payload names exist (ingest refuses unknown ones).
SELECT id FROM hag_entries WHERE id = ANY(%(ids)s::uuid[])

-- name: known_edge_ids
-- Which of the edge ids a payload names the memory holds or held (ingest refuses unknown
-- ones; a line the tutor rendered and the nightly culled before the session arrived is
-- still what the tutor showed, hag_rendered_lines), with both ends (every entry an edge
-- joins must be readable by the session's learner, as its own ids are).
SELECT id, source_entry_id, target_entry_id FROM hag_rendered_lines(%(ids)s::uuid[])

-- name: unreadable_entries
-- The entries among `ids` the session's learner may not read in its topic (the retrieval
-- rule, hag_entry_readable): a session naming or writing one is refused whole.
SELECT id, visibility_scope, topic_id
FROM hag_entries
WHERE id = ANY(%(ids)s::uuid[])
  AND NOT hag_entry_readable(visibility_scope, topic_id, %(reader_learner_id)s,
                             %(reader_topic_id)s, %(reader_topic_scopes)s::text[])

-- name: queue_session
-- A valid payload waits as pending; an existing session id inserts nothing (the caller
-- then compares digests: same payload is a no-op, a different one is refused). In the same
-- statement, the concepts of its successful turns (hag_learner_successes, migration 097).
WITH queued AS (
    INSERT INTO hag_sessions (session_id, learner_id, topic_id, ended_at, payload, payload_sha256)
    VALUES (%(session_id)s, %(learner_id)s, %(topic_id)s, %(ended_at)s, %(payload)s::jsonb,
            %(payload_sha256)s)
    ON CONFLICT (session_id) DO NOTHING
    RETURNING session_id, learner_id, topic_id, ended_at, payload
), successes AS (
    INSERT INTO hag_learner_successes (session_id, concept_slug, topic_id, learner_id, ended_at)
    SELECT DISTINCT q.session_id, c.slug, q.topic_id, q.learner_id, q.ended_at
    FROM queued q
    CROSS JOIN LATERAL jsonb_array_elements(q.payload -> 'turns') AS t (turn)
    CROSS JOIN LATERAL jsonb_array_elements_text(t.turn -> 'concept_slugs') AS c (slug)
    WHERE t.turn ->> 'outcome' = 'success'
), shown AS (
    -- each successful turn's concepts with the lines its prompt rendered
    SELECT q.session_id, c.slug, r.edge_id::uuid AS edge_id, q.topic_id, q.learner_id,
           q.ended_at
    FROM queued q
    CROSS JOIN LATERAL jsonb_array_elements(q.payload -> 'turns') AS t (turn)
    CROSS JOIN LATERAL jsonb_array_elements_text(t.turn -> 'concept_slugs') AS c (slug)
    CROSS JOIN LATERAL jsonb_array_elements_text(t.turn -> 'rendered_edge_ids') AS r (edge_id)
    WHERE t.turn ->> 'outcome' = 'success'
), bridged AS (
    -- the (c, m) of its successful turns on c whose prompt rendered a prerequisite or
    -- fallback line to m, live or deleted since (hag_rendered_lines; migration 216): the
    -- tutor supplied m there
    INSERT INTO hag_learner_bridged
        (session_id, concept_slug, supplied_slug, topic_id, learner_id, ended_at)
    SELECT DISTINCT s.session_id, s.slug, m.concept_slug, s.topic_id, s.learner_id, s.ended_at
    FROM shown s
    JOIN hag_rendered_lines(ARRAY(SELECT DISTINCT edge_id FROM shown)) e
      ON e.id = s.edge_id AND e.edge_type IN ('prerequisite', 'fallback')
    JOIN hag_entries m ON m.id = e.target_entry_id
)
SELECT session_id FROM queued

-- name: stored_digest
SELECT payload_sha256, status FROM hag_sessions WHERE session_id = %(session_id)s

-- name: quarantine_payload
-- A refused payload: the reason, the field and the turn, a bounded prefix of what was
-- received (dial session_quarantine_max_bytes) and the SHA-256 and size of the whole.
INSERT INTO hag_session_quarantine (source, session_id, reason, field, turn_index, raw,
                                    raw_bytes, raw_sha256)
VALUES (%(source)s, %(session_id)s, %(reason)s, %(field)s, %(turn_index)s, %(raw)s,
        %(raw_bytes)s, %(raw_sha256)s)
RETURNING quarantine_id

-- name: list_quarantined
-- The latest refused payloads for `hag ingest --quarantined` (raw shown by size and start).
SELECT quarantine_id, received_at, source, session_id, reason, field, turn_index,
       raw_bytes, raw_sha256, left(raw, 120) AS raw_start
FROM hag_session_quarantine
ORDER BY quarantine_id DESC
LIMIT %(limit)s

-- name: catalogue
-- A topic's canonical concepts, for the ladder. Minted concepts are drift residue and
-- never anchor steps 1 and 2 (hag/session/ladder.py says why).
SELECT slug, title, aliases, embedding
FROM hag_concepts
WHERE topic_id = %(topic_id)s AND origin = 'catalogue'
ORDER BY slug

-- name: claim_next_session
-- The oldest pending session nobody else holds, locked until this transaction ends. A
-- single worker therefore applies sessions in ended_at order; several workers share the
-- queue without waiting on each other. Only the id is read here: a value the client
-- cannot convert (an ended_at stored before ingest bounded it) must never stop the claim.
SELECT session_id
FROM hag_sessions
WHERE status = 'pending'
ORDER BY ended_at, session_id
LIMIT 1
FOR UPDATE SKIP LOCKED

-- name: claim_session
-- One named pending session, locked (replays and tests apply sessions in a given order).
SELECT session_id
FROM hag_sessions
WHERE session_id = %(session_id)s AND status = 'pending'
FOR UPDATE

-- name: claimed_payload
-- The payload of the session just claimed, as text (read after the claim, so a failure
-- here rejects that session rather than stopping the queue).
SELECT payload::text AS payload_text FROM hag_sessions WHERE session_id = %(session_id)s

-- name: lock_learner
-- The learner's ingest lock, shared (`shared`) or exclusive: ingest holds it shared while it
-- queues one of the learner's sessions, an erasure exclusive (hag/operations/privacy.py), so
-- the erasure waits for a session being queued and no session of the learner is queued
-- while it is erased. Two-key, with `lock_class` (apart from every other advisory lock of
-- the project), on the learner's bucket of `session_lock_buckets`: a transaction queueing
-- many learners' sessions holds at most that many, and ingests never wait on each other or
-- on session-end. CASE takes only the lock its branch names.
SELECT CASE WHEN %(shared)s THEN pg_advisory_xact_lock_shared(%(lock_class)s, b.bucket) IS NULL
            ELSE pg_advisory_xact_lock(%(lock_class)s, b.bucket) IS NULL END AS locked
FROM (SELECT ((hashtextextended('learner:' || %(learner_id)s, 0) %% %(session_lock_buckets)s
               + %(session_lock_buckets)s) %% %(session_lock_buckets)s)::int AS bucket) b

-- name: lock_identities
-- Transaction-scoped advisory locks guarding the identities this session reads before it
-- writes (a learner's patterns for the cosine dedup; the topic entries that struggles
-- look up and observations may create). Each identity is hashed into one of
-- `session_lock_buckets` buckets and the session locks its buckets, each once, in
-- one sorted pass: two sessions sharing an identity share its bucket, so they queue; they
-- never wait on each other in opposite orders; and however many identities a payload
-- names, one session holds at most `session_lock_buckets` of these locks (the server's
-- lock table is shared: one lock per identity ran it out at 60,000 observations). The
-- two-key form with `lock_class` keeps these apart from every other advisory lock of the
-- project.
SELECT count(pg_advisory_xact_lock(%(lock_class)s, b.bucket)) AS locked
FROM (SELECT DISTINCT ((hashtextextended(k, 0) %% %(session_lock_buckets)s
                        + %(session_lock_buckets)s) %% %(session_lock_buckets)s)::int AS bucket
      FROM unnest(%(keys)s::text[]) AS t (k)
      ORDER BY bucket) AS b

-- name: learner_patterns
-- A learner's live student patterns (the candidates for the cosine dedup). `_unanchored_`
-- rows are none: they have no identity, so nothing dedupes against them (seed).
SELECT id, concept_slug, embedding
FROM hag_entries
WHERE visibility_scope = %(scope)s AND maturity <> 'archived' AND concept_slug <> '_unanchored_'
ORDER BY created_at, id

-- name: insert_entries
-- New entries from observations, as candidates at base x ladder quality. A row whose
-- identity exists already inserts nothing (the caller finds the existing row: a merge).
INSERT INTO hag_entries (id, topic_id, concept_slug, visibility_scope, maturity, confidence,
                         concept_match_quality, instruction, embedding, created_at, updated_at)
SELECT n.id, %(topic_id)s, n.concept_slug, n.visibility_scope, 'candidate', n.confidence,
       n.quality, n.instruction, n.embedding, %(at)s, %(at)s
FROM unnest(%(ids)s::uuid[], %(slugs)s::text[], %(scopes)s::text[], %(confidences)s::float8[],
            %(qualities)s::float8[], %(instructions)s::text[], %(embeddings)s::vector[])
     AS n (id, concept_slug, visibility_scope, confidence, quality, instruction, embedding)
ON CONFLICT DO NOTHING
RETURNING id

-- name: mint_concepts
-- Drift residue: a concept the ladder minted joins the topic's concepts as `minted`, with
-- the name and the first words said about it (enrichment reads them).
INSERT INTO hag_concepts (topic_id, slug, title, description, origin, embedding, created_at)
SELECT %(topic_id)s, m.slug, m.title, m.description, 'minted', m.embedding, %(at)s
FROM unnest(%(slugs)s::text[], %(titles)s::text[], %(descriptions)s::text[],
            %(embeddings)s::vector[]) AS m (slug, title, description, embedding)
ON CONFLICT (topic_id, slug) DO NOTHING

-- name: entry_slugs
-- The concept of each decision entry (discovery never touches `_unanchored_` entries).
SELECT id, concept_slug FROM hag_entries WHERE id = ANY(%(ids)s::uuid[])

-- name: topic_entries_by_slug
-- The topic entries a struggle's concepts point at, in the session's topic.
SELECT id, concept_slug
FROM hag_entries
WHERE topic_id = %(topic_id)s AND visibility_scope = %(scope)s
  AND concept_slug = ANY(%(slugs)s::text[]) AND concept_slug <> '_unanchored_'

-- name: shown_concepts
-- Every concept the learner succeeded on in a session of the topic that ended strictly
-- before this one (hag_learner_successes, written at ingest, so the answer does not depend
-- on the order sessions are processed in): the learner's rows of the topic, one index range.
SELECT DISTINCT l.concept_slug AS slug
FROM hag_learner_successes l
WHERE l.topic_id = %(topic_id)s AND l.learner_id = %(learner_id)s
  AND l.ended_at < %(ended_at)s

-- name: shown_since
-- Of these probes (a key, a concept slug as ingest kept it, a time), the keys whose slug the
-- learner succeeded on in a session of the topic that ended at or after the time and before
-- this one: whether a recorded report's target was shown since it (rules.withdrawn_reports),
-- one probe of the index of migration 097 each, whatever the learner's history.
SELECT DISTINCT k.key
FROM unnest(%(keys)s::int[], %(slugs)s::text[], %(since)s::timestamptz[]) AS k (key, slug, since)
WHERE EXISTS (
    SELECT 1 FROM hag_learner_successes l
    WHERE l.topic_id = %(topic_id)s AND l.learner_id = %(learner_id)s
      AND l.concept_slug = k.slug AND l.ended_at >= k.since AND l.ended_at < %(ended_at)s
)

-- name: successes_between
-- Per session of the learner in the topic that ended after `since` (or at it, `inclusive`)
-- and before `until` (NULL: any time), in order: the concepts of its successful turns
-- (hag_learner_successes) and the (c, m) its successful turns on c had a line to m for
-- (hag_learner_bridged), both written at ingest: what may contradict or answer a report
-- forward in time (rules.succeeded_first, rules.withdrawn_reports). A session with no
-- successful turn has no row.
WITH s AS (
    SELECT l.session_id, l.ended_at, l.concept_slug
    FROM hag_learner_successes l
    WHERE l.topic_id = %(topic_id)s AND l.learner_id = %(learner_id)s
      AND (l.ended_at > %(since)s OR (%(inclusive)s AND l.ended_at = %(since)s))
      AND (%(until)s::timestamptz IS NULL OR l.ended_at < %(until)s)
), b AS (
    SELECT g.session_id, array_agg(ARRAY[g.concept_slug, g.supplied_slug]) AS pairs
    FROM hag_learner_bridged g
    WHERE g.topic_id = %(topic_id)s AND g.learner_id = %(learner_id)s
      AND g.session_id IN (SELECT session_id FROM s)
    GROUP BY g.session_id
)
SELECT s.session_id, min(s.ended_at) AS ended_at, array_agg(s.concept_slug) AS slugs,
       COALESCE(min(b.pairs), ARRAY[]::text[][]) AS bridged
FROM s LEFT JOIN b ON b.session_id = s.session_id
GROUP BY s.session_id
ORDER BY min(s.ended_at), s.session_id

-- name: rendered_targets
-- The target concept of each rendered prerequisite or fallback line, live or deleted since
-- (hag_rendered_lines): what the tutor supplied in a turn (as ingest reads it into
-- hag_learner_bridged).
SELECT e.id, m.concept_slug AS slug
FROM hag_rendered_lines(%(ids)s::uuid[]) e
JOIN hag_entries m ON m.id = e.target_entry_id
WHERE e.edge_type IN ('prerequisite', 'fallback')

-- name: grade_edges
-- Outcome grading of the edges whose lines reached the prompt (seed: +-0.05 within
-- [0.05, 1]). Each edge's turn-by-turn steps arrive composed into one clamped shift
-- (hag/session/rules.py); NULL bounds are open (GREATEST/LEAST ignore NULL). Every
-- rendering counts as a traversal. Times only move forward, so late sessions agree.
WITH prior AS (  -- the values before this statement (the rows are locked already)
    SELECT id, confidence FROM hag_edges WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id
    FOR NO KEY UPDATE
)
UPDATE hag_edges AS e SET
    confidence        = LEAST(g.hi, GREATEST(g.lo, e.confidence + g.delta)),
    traversal_count   = e.traversal_count + g.traversals,
    last_traversed_at = GREATEST(e.last_traversed_at, %(at)s),
    updated_at        = GREATEST(e.updated_at, %(at)s)
FROM unnest(%(ids)s::uuid[], %(deltas)s::float8[], %(los)s::float8[], %(his)s::float8[],
            %(traversals)s::int[]) AS g (id, delta, lo, hi, traversals)
JOIN prior p ON p.id = g.id
WHERE e.id = g.id
RETURNING e.id, p.confidence AS old_confidence, e.confidence AS new_confidence

-- name: grade_entries
-- Outcome grading of the entries whose advisories reached the prompt (seed: the
-- asymmetric saturating rule, lr 0.10 proven / 0.20 otherwise). Each entry's turn-by-turn
-- steps arrive composed into one affine map per learning rate; the entry's maturity picks
-- one. Counters add the turns' outcomes; last_matched_at moves forward only.
WITH prior AS (  -- the values before this statement (the rows are locked already)
    SELECT id, confidence FROM hag_entries WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id
    FOR NO KEY UPDATE
)
UPDATE hag_entries AS e SET
    confidence      = LEAST(1.0, GREATEST(0.0, CASE WHEN e.maturity = 'proven'
                          THEN g.scale_proven * e.confidence + g.shift_proven
                          ELSE g.scale_default * e.confidence + g.shift_default END)),
    success_count   = e.success_count + g.successes,
    failure_count   = e.failure_count + g.failures,
    last_matched_at = GREATEST(e.last_matched_at, %(at)s),
    updated_at      = GREATEST(e.updated_at, %(at)s)
FROM unnest(%(ids)s::uuid[], %(scales_proven)s::float8[], %(shifts_proven)s::float8[],
            %(scales_default)s::float8[], %(shifts_default)s::float8[], %(successes)s::int[],
            %(failures)s::int[])
     AS g (id, scale_proven, shift_proven, scale_default, shift_default, successes, failures)
JOIN prior p ON p.id = g.id
WHERE e.id = g.id
RETURNING e.id, p.confidence AS old_confidence, e.confidence AS new_confidence

-- name: mark_processed
-- The ledger: the session is applied. Its sequence number is taken last, after every row
-- lock this session needed, so numbers follow the commit order of sessions that share rows.
UPDATE hag_sessions SET
    status = 'processed', processed_at = now(), run_id = %(run_id)s, summary = %(summary)s,
    applied_seq = nextval('hag_session_apply_seq')
WHERE session_id = %(session_id)s AND status = 'pending'
RETURNING applied_seq

-- name: reject_session
-- A session that passed ingest but cannot be applied: rejected with the reason; the caller
-- copies the payload returned here to the quarantine for review. Nothing of it was applied,
-- so nothing of it stays as evidence either: the successes and bridged concepts ingest
-- wrote for it (which would mark concepts shown and withhold other sessions' reports) go in
-- the same statement.
WITH rejected AS (
    UPDATE hag_sessions SET status = 'rejected', processed_at = now(), run_id = %(run_id)s,
                            reject_reason = %(reason)s
    WHERE session_id = %(session_id)s AND status = 'pending'
    RETURNING session_id, payload::text AS payload_text
), successes AS (
    DELETE FROM hag_learner_successes s USING rejected r WHERE s.session_id = r.session_id
), bridged AS (
    DELETE FROM hag_learner_bridged b USING rejected r WHERE b.session_id = r.session_id
)
SELECT session_id, payload_text FROM rejected

-- name: fail_session
-- A session that could not be applied for a reason outside its payload (hag/session/outcome.py):
-- failed, with the error's text and class and how many times it has failed; nothing of it
-- was applied, its payload stays here (never quarantined) for --retry-failed.
-- SKIP LOCKED: the worker that claimed it holds the row (its own lock never skips); when
-- its connection was lost and the row is still held by the dead backend, nothing waits.
UPDATE hag_sessions SET status = 'failed', processed_at = now(), run_id = %(run_id)s,
                        fail_reason = %(reason)s, fail_class = %(fail_class)s,
                        fail_count = fail_count + 1
WHERE session_id = (SELECT session_id FROM hag_sessions
                     WHERE session_id = %(session_id)s AND status = 'pending'
                     FOR UPDATE SKIP LOCKED)
RETURNING fail_count

-- name: retry_failed
-- `--retry-failed`: every failed session back to pending (its failure count and last error
-- are kept until it applies).
UPDATE hag_sessions SET status = 'pending', processed_at = NULL
WHERE status = 'failed'
RETURNING session_id

-- name: session_state
-- Where a received session stands (ingest says so when it is received again).
SELECT status, fail_reason, reject_reason FROM hag_sessions WHERE session_id = %(session_id)s

-- name: count_pending
SELECT count(*) AS pending FROM hag_sessions WHERE status = 'pending'

-- name: count_left
-- What a run left behind: sessions still pending and sessions failed.
SELECT count(*) FILTER (WHERE status = 'pending') AS pending,
       count(*) FILTER (WHERE status = 'failed') AS failed
FROM hag_sessions WHERE status IN ('pending', 'failed')

-- name: open_run
-- A batch job's run row (kind 'session_end' here), with the Prefect flow run that made it.
INSERT INTO hag_runs (run_id, kind, params, flow_run_id)
VALUES (%(run_id)s, %(kind)s, %(params)s, %(flow_run_id)s) RETURNING run_id

-- name: close_run
UPDATE hag_runs SET finished_at = now(), summary = %(summary)s, status = %(status)s
WHERE run_id = %(run_id)s

-- name: lock_entries
-- Row locks on the existing entries this session grades, in one sorted pass, before any
-- of them is written: two sessions sharing entries queue instead of deadlocking. NO KEY
-- UPDATE is what the grading UPDATE takes anyway, and it lets new edges reference them.
SELECT id FROM hag_entries WHERE id = ANY(%(ids)s::uuid[]) ORDER BY id FOR NO KEY UPDATE

-- name: lock_edges
-- Row locks on the existing edges this session reinforces (by identity) or grades (by
-- id), and under the lift rule every prerequisite out of a concept it reports a struggle on
-- (their chance rate changes: sibling edges) or into it (their reverse evidence changes),
-- and under the units rule for sequences every leads_to/fallback out of a move's source or
-- into its target, and each move's reverse edge (named by identity beside the reinforced
-- ones: hag/session/sequence_step.py), in one sorted pass, for the same reason.
-- Each way to name an edge is a branch of its own, so each is an index probe (id, identity,
-- source, target): written as one OR over the table, the identity's subquery made the
-- planner scan every edge (700 ms a session at 1M edges, where the rest of the session
-- costs about 5 ms; issue 26). Each locked edge's type and confidence before the session
-- writes it: the re-weigh flags concepts whose terms read a prerequisite the session moved
-- across a threshold (migration 224).
SELECT e.id, e.edge_type, e.confidence
FROM hag_edges e
WHERE e.id IN (
    SELECT unnest(%(ids)s::uuid[])
    UNION ALL
    SELECT x.id
    FROM unnest(%(sources)s::uuid[], %(targets)s::uuid[], %(types)s::text[]) AS k (s, t, kind)
    JOIN hag_edges x
      ON x.source_entry_id = k.s AND x.target_entry_id = k.t AND x.edge_type = k.kind
    UNION ALL
    SELECT x.id FROM hag_edges x
    WHERE x.edge_type = 'prerequisite' AND x.source_entry_id = ANY(%(sibling_sources)s::uuid[])
    UNION ALL
    SELECT x.id FROM hag_edges x
    WHERE x.edge_type = 'prerequisite' AND x.target_entry_id = ANY(%(sibling_sources)s::uuid[])
    UNION ALL  -- the units rule's sequence edges (sql/queries/sequences.sql)
    SELECT x.id FROM hag_edges x
    WHERE x.edge_type IN ('leads_to', 'fallback')
      AND x.source_entry_id = ANY(%(sequence_sources)s::uuid[])
    UNION ALL
    SELECT x.id FROM hag_edges x
    WHERE x.edge_type IN ('leads_to', 'fallback')
      AND x.target_entry_id = ANY(%(sequence_targets)s::uuid[]))
ORDER BY e.id
FOR NO KEY UPDATE OF e

-- name: edge_grading_state
-- What the evidence rules' outcome grading reads of each rendered edge (locked already):
-- its type and renderings so far, and its source concept's outcome counters.
SELECT e.id, e.edge_type, e.traversal_count, s.success_count, s.failure_count
FROM hag_edges e
JOIN hag_entries s ON s.id = e.source_entry_id
WHERE e.id = ANY(%(ids)s::uuid[])
